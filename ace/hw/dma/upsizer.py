"""Width upsizer: packs link-width words into wide memory beats.

::

    i (word, lo) --lane--> [ assembly register, k words ] --complete--> [ output register ] --> o
         ^                         |                                          |
         +--- i.ready: assembly register not holding a complete beat, or output register empty

Word after word of a packet fill the lanes of a beat of ``ratio`` words (lane ``n`` is bytes
``n*W .. n*W + W - 1``, W = ``word_bytes``): a packet's first word goes to lane ``lo``, each
next word to the next lane. A beat is complete when its last lane is filled or the packet's
last word arrives; lanes a beat did not receive hold undefined bytes (the DMA writer's
``wstrb`` covers only payload bytes). Output beats carry ``first``/``last`` of the packet and
the ``meta`` of the beat's last word. The DMA writer uses it between the realigner (which
placed the payload at its byte offset within a word) and the AXI W channel.

Latency: two cycles from the handshake of the word that completes a beat to the beat on ``o``
(assembly register, output register). Throughput: one word per cycle, so one beat every
``ratio`` cycles in a long transfer; two beats completed in consecutive cycles (a packet's
short last beat followed by a one-word packet) cost one idle input cycle. ``i.ready`` and every
output come from registers; ``o.ready`` never reaches ``i.ready``.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["WidthUpsizer", "upsize"]


def upsize(packets: list[tuple[list[bytes], int]], ratio: int) \
        -> list[tuple[list[bytes | None], bool, bool]]:
    """Golden model: packets ``(words, lo)`` to beats ``(lanes, first, last)``; a lane the
    beat did not receive is ``None``."""
    beats = []
    for words, lo in packets:
        lanes = [None] * ratio
        lane, first = lo, True
        for n, word in enumerate(words):
            lanes[lane] = word
            if lane == ratio - 1 or n == len(words) - 1:
                beats.append((lanes, first, n == len(words) - 1))
                lanes, first = [None] * ratio, False
            lane = (lane + 1) % ratio
    return beats


class WidthUpsizer(wiring.Component):
    """Pack words into beats of ``ratio`` words (see the module docstring).

    Parameters
    ----------
    word_bytes : int
        Bytes per input word (the link width).
    ratio : int
        Words per output beat, a power of two of at least 2.
    meta_shape : shape-like
        Side information copied from the last word of a beat to the beat.

    Members
    -------
    i : In(stream of {data, first, last, lo, meta}); ``lo`` is read with the first word
    o : Out(stream of {data, first, last, meta}), from registers
    """

    #: Cycles from the handshake of the word completing a beat to the beat valid on ``o``.
    latency = 2

    def __init__(self, word_bytes: int, ratio: int, meta_shape=0):
        assert ratio >= 2 and ratio & (ratio - 1) == 0, "ratio: a power of two, at least 2"
        self.word_bytes = word_bytes
        self.ratio = ratio
        self.meta_shape = meta_shape
        self.beat_layout = data.StructLayout({
            "data": unsigned(8 * word_bytes * ratio), "first": unsigned(1),
            "last": unsigned(1), "meta": meta_shape})
        super().__init__({
            "i": In(stream.Signature(data.StructLayout({
                "data": unsigned(8 * word_bytes), "first": unsigned(1), "last": unsigned(1),
                "lo": range(ratio), "meta": meta_shape}))),
            "o": Out(stream.Signature(self.beat_layout)),
        })

    def elaborate(self, platform):
        m = Module()
        word = self.i.p
        beat = Signal(self.beat_layout)      # the assembly register
        complete = Signal()                  # it holds a whole beat, not yet in the output
        lane = Signal(range(self.ratio))     # next lane of the current packet
        word_lane = Signal(range(self.ratio))
        moves = Signal()
        m.d.comb += [
            word_lane.eq(Mux(word.first, word.lo, lane)),
            moves.eq(complete & (~self.o.valid | self.o.ready)),
            # A complete beat leaves in this cycle for certain when the output is empty.
            self.i.ready.eq(~complete | ~self.o.valid),
        ]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += self.o.valid.eq(0)
        with m.If(moves):
            m.d.sync += [self.o.valid.eq(1), self.o.p.eq(beat), complete.eq(0)]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [
                beat.data.word_select(word_lane, 8 * self.word_bytes).eq(word.data),
                beat.last.eq(word.last),
                beat.meta.eq(word.meta),
                lane.eq(word_lane + 1),
                complete.eq(word.last | (word_lane == self.ratio - 1)),
            ]
            with m.If(word.first | (word_lane == 0)):
                m.d.sync += beat.first.eq(word.first)
        return m
