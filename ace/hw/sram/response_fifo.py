"""A read port's response FIFO: per slice of the word, a LUT-RAM ring and two output entries.

::

    w_data, w_en (a copy per slice)
       |
       v   per slice j (all in lockstep):
    ring: depth - 2 words of LUT RAM, write and read pointers, occupancy held{j}
       |  push{j} = ring not empty and the entries not full
       v
    two output entries, loaded by registered enables; out_valid{j}, full{j}
       |  2:1 mux by a register (r_sel{j})
       v
    o (valid: slice 0's out_valid; payload: every slice's entry)

The writer never overflows it: the SRAM counts credits (a read is taken only while the FIFO
has room for every read in flight), so the write side has no ``ready`` and no full check,
and its pointers advance on ``w_en`` alone. Every control net stays within a slice of the
word (``slice_bits``): each slice is a FIFO of its own (ring, pointers, occupancy flags,
output entries), all in lockstep because they see the same write enable (each slice its own
copy, a register of the writer's) and the same ``o.ready``; the distinct write-enable copies
keep synthesis from merging the slices' control. ``o.ready`` reaches the flags and the read
select of each slice, a few flip-flops; the entries' load enables are registers.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ace.hw.common.lut_ram import lut_ram

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
        valids, data = [], []
        for j, (lo, hi) in enumerate(self.slices):
            valid, payload = self._slice(m, j, self.w_en[j], self.w_data[lo:hi])
            valids.append(valid)
            data.append(payload)
        m.d.comb += [self.o.valid.eq(valids[0]), self.o.payload.eq(Cat(*data))]
        return m

    def _slice(self, m, j: int, w_en, w_data):
        """One slice: a FIFO of its own, in lockstep with the others (the same write enable,
        from a copy of its own, and the same ``o.ready``), so that none of its control nets
        leaves the slice. Returns its ``valid`` and payload."""
        ring_words = self.depth - 2
        # A power of two above the ring's words, so that the pointers wrap by themselves.
        size = 1 << ring_words.bit_length()
        # Occupancy as thermometer codes, so every flag's next value is a small function of
        # flags: held[k], the ring holds more than k words; out_valid and full, the output
        # entries hold at least one and two words.
        held = Signal(ring_words, name=f"held{j}")
        out_valid = Signal(name=f"out_valid{j}")
        full = Signal(name=f"full{j}")
        push = Signal(name=f"push{j}")    # the ring's head moves to an output entry
        pop = Signal(name=f"pop{j}")      # the reader takes a word
        m.d.comb += [push.eq(held[0] & ~full), pop.eq(out_valid & self.o.ready)]
        with m.If(w_en & ~push):
            m.d.sync += held.eq(Cat(1, held[:-1]))
        with m.Elif(push & ~w_en):
            m.d.sync += held.eq(held >> 1)
        full_next = Mux(push & ~pop, out_valid, Mux(pop & ~push, 0, full))
        m.d.sync += [out_valid.eq(Mux(push, 1, Mux(pop, full, out_valid))),
                     full.eq(full_next)]

        # The ring: LUT RAM with its own pointers.
        write, read = lut_ram(m, len(w_data), size, name=f"ring{j}")
        w_at = Signal(range(size), name=f"w_at{j}")
        r_at = Signal(range(size), name=f"r_at{j}")
        with m.If(w_en):
            m.d.sync += w_at.eq(w_at + 1)
        with m.If(push):
            m.d.sync += r_at.eq(r_at + 1)
        m.d.comb += [write.addr.eq(w_at), write.data.eq(w_data), write.en.eq(w_en),
                     read.addr.eq(r_at)]

        # Two output entries; the free one the write select names is loaded in every cycle
        # (beat or not: it is read only after a push), so its load enable is a register, and
        # o.ready reaches only the flags and the read select.
        w_sel = Signal(name=f"w_sel{j}")
        r_sel = Signal(name=f"r_sel{j}")
        w_sel_next = w_sel ^ push
        m.d.sync += [w_sel.eq(w_sel_next), r_sel.eq(r_sel ^ pop)]
        entries = [Signal(len(w_data), name=f"entry{k}_{j}", reset_less=True) for k in range(2)]
        for k in range(2):
            load = Signal(init=k == 0, name=f"load{k}_{j}")
            m.d.sync += load.eq(~full_next & (w_sel_next == k))
            with m.If(load):
                m.d.sync += entries[k].eq(read.data)
        return out_valid, Mux(r_sel, entries[1], entries[0])
