"""Width downsizer: splits wide memory beats into link-width words, one word per cycle.

::

    i (beat of k words, lo, hi) --> [ beat register ] --word idx--> [ SkidBuffer ] --> o (word)
          ^                               |
          +--- i.ready: beat register empty, or its last word moves to the skid buffer now

A beat of ``ratio`` words (word ``n`` is bytes ``n*W .. n*W + W - 1``, W = ``word_bytes``)
carries the range ``lo .. hi`` of its words to emit; they leave in order, one per cycle. The
first word emitted from a beat with ``first`` set carries ``first``, the last word emitted from
a beat with ``last`` set carries ``last``; ``meta`` is copied to every word of its beat. The DMA
reader uses it between the AXI R channel and the realigner: the words of a packet's first and
last memory beats that hold no payload byte are skipped here (``lo``/``hi``), and the realigner
then removes the byte offset within a word.

Latency: two cycles from a beat's handshake to its first word on ``o`` (beat register, skid
buffer). Throughput: one word per cycle; a beat of ``n`` words is taken every ``n`` cycles, so
the input runs at one beat every ``ratio`` cycles in a long transfer. ``i.ready`` and every
output come from registers (``o.ready`` reaches only the skid buffer's registered ready).
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ace.hw.common.skid_buffer import SkidBuffer

__all__ = ["WidthDownsizer", "downsize"]


def downsize(beats: list[tuple[bytes, bool, bool, int, int]], word_bytes: int) \
        -> list[tuple[bytes, bool, bool]]:
    """Golden model: ``(data, first, last, lo, hi)`` beats to ``(word, first, last)`` words."""
    words = []
    for beat, first, last, lo, hi in beats:
        for n in range(lo, hi + 1):
            words.append((beat[n * word_bytes:(n + 1) * word_bytes],
                          first and n == lo, last and n == hi))
    return words


class WidthDownsizer(wiring.Component):
    """Split beats of ``ratio`` words into words (see the module docstring).

    Parameters
    ----------
    word_bytes : int
        Bytes per output word (the link width).
    ratio : int
        Words per input beat, a power of two of at least 2.
    meta_shape : shape-like
        Side information copied from a beat to each of its words.

    Members
    -------
    i : In(stream of {data, first, last, lo, hi, meta}), ``lo <= hi < ratio``
    o : Out(stream of {data, first, last, meta}), from registers
    """

    #: Cycles from a beat's handshake on ``i`` to its first word valid on ``o``.
    latency = 2

    def __init__(self, word_bytes: int, ratio: int, meta_shape=0):
        assert ratio >= 2 and ratio & (ratio - 1) == 0, "ratio: a power of two, at least 2"
        self.word_bytes = word_bytes
        self.ratio = ratio
        self.meta_shape = meta_shape
        super().__init__({
            "i": In(stream.Signature(data.StructLayout({
                "data": unsigned(8 * word_bytes * ratio), "first": unsigned(1),
                "last": unsigned(1), "lo": range(ratio), "hi": range(ratio),
                "meta": meta_shape}))),
            "o": Out(stream.Signature(self.word_layout)),
        })

    @property
    def word_layout(self) -> data.StructLayout:
        return data.StructLayout({"data": unsigned(8 * self.word_bytes), "first": unsigned(1),
                                  "last": unsigned(1), "meta": self.meta_shape})

    def elaborate(self, platform):
        m = Module()
        m.submodules.out = out = SkidBuffer(self.word_layout)
        wiring.connect(m, out.o, wiring.flipped(self.o))

        beat = Signal(self.i.p.shape())
        held = Signal()                 # the beat register holds words still to emit
        index = Signal(range(self.ratio))
        at_end = Signal()
        moves = Signal()                # the word at index goes into the skid buffer
        m.d.comb += [
            at_end.eq(index == beat.hi),
            out.i.valid.eq(held),
            out.i.p.data.eq(beat.data.word_select(index, 8 * self.word_bytes)),
            out.i.p.first.eq(beat.first & (index == beat.lo)),
            out.i.p.last.eq(beat.last & at_end),
            out.i.p.meta.eq(beat.meta),
            moves.eq(held & out.i.ready),
            self.i.ready.eq(~held | (moves & at_end)),
        ]
        with m.If(moves):
            m.d.sync += index.eq(index + 1)
            with m.If(at_end):
                m.d.sync += held.eq(0)
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [beat.eq(self.i.p), held.eq(1), index.eq(self.i.p.lo)]
        return m
