"""Byte realigner: shifts a packet of words by a byte offset across word boundaries.

Output word ``j`` of a packet is bytes ``shift .. shift + word_bytes - 1`` of the double word
``{in[j], in[j - 1]}`` (``in[-1]`` is zero, ``in[n]`` past the end is zero), with ``shift`` from
1 to ``word_bytes``; ``shift == word_bytes`` passes words through. Two per-packet flags make it
serve both DMA directions:

* ``drop_first``: the first input word only primes the shifter and yields no output (memory to
  SRAM: output ``j`` combines beats ``j`` and ``j + 1``);
* ``flush``: after the last input word one more output word is produced from it alone (the
  packet's bytes straddle one more word on the output side).

So a packet of ``n`` input words gives ``n - drop_first + flush`` output words. The flags,
``shift`` and ``meta`` are sampled with each word and must be constant within a packet; the
flush word carries the last input word's ``meta``. Output words carry ``first``/``last`` of the
output packet.

Latency: two cycles (an input skid buffer, so ``i.ready`` and the shifter's inputs come from
registers, then the registered output). Throughput: one word per cycle, plus one cycle for a
flush word.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ace.hw.common.skid_buffer import SkidBuffer

__all__ = ["Realigner", "realign"]


def realign(words: list[bytes], shift: int, drop_first: bool, flush: bool,
            word_bytes: int) -> list[bytes]:
    """Golden model of one packet through :class:`Realigner`."""
    stream_ = [bytes(word_bytes)] + list(words) + [bytes(word_bytes)]
    out = []
    for j in range(len(words) + (1 if flush else 0)):
        if drop_first and j == 0:
            continue
        double = stream_[j] + stream_[j + 1]  # {in[j], in[j-1]} as little-endian bytes
        out.append(double[shift:shift + word_bytes])
    return out


class Realigner(wiring.Component):
    """Byte realigner (see the module docstring).

    Parameters
    ----------
    word_bytes : int
        Bytes per word.
    meta_shape : shape-like
        Side information carried from each input word to the output word it completes.

    Members
    -------
    i : In(stream of {data, first, last, shift, drop_first, flush, meta})
    o : Out(stream of {data, first, last, meta})
    """

    def __init__(self, word_bytes: int, meta_shape=0):
        self.word_bytes = word_bytes
        self.meta_shape = meta_shape
        super().__init__({
            "i": In(stream.Signature(data.StructLayout({
                "data": unsigned(8 * word_bytes), "first": unsigned(1), "last": unsigned(1),
                "shift": range(word_bytes + 1), "drop_first": unsigned(1),
                "flush": unsigned(1), "meta": meta_shape}))),
            "o": Out(stream.Signature(data.StructLayout({
                "data": unsigned(8 * word_bytes), "first": unsigned(1), "last": unsigned(1),
                "meta": meta_shape}))),
        })

    #: Cycles from an input word to the output word it completes.
    latency = 2

    def elaborate(self, platform):
        m = Module()
        nbits = 8 * self.word_bytes
        m.submodules.in_skid = skid = SkidBuffer(self.i.p.shape())
        wiring.connect(m, wiring.flipped(self.i), skid.i)
        i = skid.o

        prev = Signal(nbits)
        started = Signal()       # an output word of the current packet has been produced
        flushing = Signal()      # the flush word is pending
        flush_shift = Signal(range(self.word_bytes + 1))
        flush_meta = Signal(self.meta_shape)

        can_load = Signal()
        m.d.comb += can_load.eq(~self.o.valid | self.o.ready)
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += self.o.valid.eq(0)

        shift = Signal(range(self.word_bytes + 1))
        upper = Signal(nbits)
        lower = Signal(nbits)
        m.d.comb += [
            shift.eq(Mux(flushing, flush_shift, i.p.shift)),
            upper.eq(Mux(flushing, 0, i.p.data)),
            lower.eq(Mux(i.p.first & ~flushing, 0, prev)),
        ]
        shifted = Signal(nbits)
        m.d.comb += shifted.eq(Cat(lower, upper).bit_select(Cat(Const(0, 3), shift), nbits))

        m.d.comb += i.ready.eq(can_load & ~flushing)
        with m.If(flushing):
            with m.If(can_load):
                m.d.sync += [
                    self.o.valid.eq(1),
                    self.o.p.data.eq(shifted),
                    self.o.p.first.eq(~started),
                    self.o.p.last.eq(1),
                    self.o.p.meta.eq(flush_meta),
                    flushing.eq(0),
                    started.eq(0),
                ]
        with m.Elif(i.valid & i.ready):
            m.d.sync += prev.eq(i.p.data)
            emit = ~(i.p.first & i.p.drop_first)
            ends = i.p.last & ~i.p.flush
            with m.If(emit):
                m.d.sync += [
                    self.o.valid.eq(1),
                    self.o.p.data.eq(shifted),
                    self.o.p.first.eq(~started),
                    self.o.p.last.eq(ends),
                    self.o.p.meta.eq(i.p.meta),
                    started.eq(~ends),
                ]
            with m.If(i.p.last & i.p.flush):
                m.d.sync += [
                    flushing.eq(1),
                    flush_shift.eq(i.p.shift),
                    flush_meta.eq(i.p.meta),
                ]
        return m
