"""A read port's response FIFO: LUT-RAM ring per slice of the word, then a skid FIFO.

::

    w_data, w_en (a copy per slice) --> ring of depth - 2 words (LUT RAM, one Memory and one
                                        write and read pointer per slice)
                                           |  nonempty (register)
                                           v
                                        SkidFifo (two entries, registered load enables)
                                           |
                                           v
                                        o (stream; valid and ready registered inside)

The writer never overflows it: the SRAM counts credits (a read is taken only while the FIFO
has room for every read in flight), so the write side has no ``ready`` and no full check,
and its pointers advance on ``w_en`` alone. Every control net stays within a slice of the
word (``slice_bits``): each slice's ring has its own write enable copy, its own pointers
(free-running counters, so synthesis keeps them apart) and its own ``Memory``; the
:class:`~ace.hw.common.skid_fifo.SkidFifo` after it copies its load enables and read select per
slice, and ``o.ready`` reaches only a handful of flip-flops.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ace.hw.common.skid_fifo import SkidFifo

__all__ = ["ResponseFifo"]


class ResponseFifo(wiring.Component):
    """FIFO of ``depth`` words for a writer that never overflows it.

    Latency: a word written in cycle ``t`` (``w_en`` high) is valid on ``o`` in ``t + 2`` at
    the earliest (:attr:`latency`), as :class:`amaranth.lib.fifo.SyncFIFOBuffered`.
    Throughput: one word per cycle in and out. Capacity: ``depth`` words (``depth - 2`` in
    the ring, two in the skid FIFO); a write while ``depth`` words are held is lost, so the
    writer must count credits. ``o.valid`` and ``o.payload`` come from registers (the payload
    through the skid FIFO's 2:1 mux).

    Parameters
    ----------
    width : int
        Bits per word.
    depth : int
        Words held, at least 3.
    slice_bits : int or None
        Bits per slice, each with its own ring, pointers and write enable copy; None: one
        slice of the whole word.

    Members
    -------
    w_data : In(width)
    w_en : In(slices)
        One copy of the write enable per slice (all equal), so that a register beside each
        slice can drive it.
    o : Out(stream.Signature(width))
    """

    #: Cycles from a write to its word on ``o``.
    latency = 2

    def __init__(self, width: int, depth: int, *, slice_bits: int | None = None):
        for name, value, least in (("width", width, 1), ("depth", depth, 3)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"ResponseFifo {name}: {value!r} is not valid; allowed: an "
                                 f"integer of at least {least}")
        self.width = width
        self.depth = depth
        self.slice_bits = slice_bits
        super().__init__({
            "w_data": In(width),
            "w_en": In(len(self.slices)),
            "o": Out(stream.Signature(width)),
        })

    @property
    def slices(self) -> list[tuple[int, int]]:
        """``(lo, hi)`` bit ranges of the slices."""
        step = self.slice_bits or self.width
        return [(lo, min(lo + step, self.width)) for lo in range(0, self.width, step)]

    def elaborate(self, platform):
        m = Module()
        # A power of two above the ring's words, so equal pointers mean empty.
        size = 1 << (self.depth - 2).bit_length()
        m.submodules.skid = skid = SkidFifo(
            self.width, slice_bits=self.slice_bits if len(self.slices) > 1 else None)
        nonempty = Signal(name="nonempty")
        pop = Signal(name="pop")
        m.d.comb += [pop.eq(nonempty & skid.i.ready), skid.i.valid.eq(nonempty)]
        data = []
        for k, (lo, hi) in enumerate(self.slices):
            m.submodules[f"ring{k}"] = ring = Memory(shape=unsigned(hi - lo), depth=size,
                                                     init=[])
            write = ring.write_port()
            read = ring.read_port(domain="comb")
            w_at = Signal(range(size), name=f"w_at{k}")
            r_at = Signal(range(size), name=f"r_at{k}")
            with m.If(self.w_en[k]):
                m.d.sync += w_at.eq(w_at + 1)
            with m.If(pop):
                m.d.sync += r_at.eq(r_at + 1)
            m.d.comb += [write.addr.eq(w_at), write.data.eq(self.w_data[lo:hi]),
                         write.en.eq(self.w_en[k]), read.addr.eq(r_at)]
            data.append(read.data)
            if k == 0:
                # Whether the ring holds a word next cycle: from the pointers' next values.
                m.d.sync += nonempty.eq((w_at + self.w_en[k])[:len(w_at)]
                                        != (r_at + pop)[:len(r_at)])
        m.d.comb += skid.i.payload.eq(Cat(*data))
        wiring.connect(m, skid.o, wiring.flipped(self.o))
        return m
