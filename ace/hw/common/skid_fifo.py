"""Skid FIFO: a two-entry stream slice whose data registers load from registers only.

::

    i.payload --+--> [ entry 0 ] --+
                |   load0 (reg.)   +--> 2:1 mux (r_at, a register) --> o.payload
                +--> [ entry 1 ] --+
                    load1 (reg.)
    i.ready, o.valid, load0/1, r_at: registers; o.ready reaches only the pointers and counts

The same contract as :class:`ace.hw.common.skid_buffer.SkidBuffer` (``i.ready`` registered,
one beat per cycle, a beat taken in cycle ``t`` valid on ``o`` in ``t + 1``), built as a
two-entry ring: the beat goes to the free entry the write pointer names, so an entry's load
enable is a register computed a cycle ahead ("not full and the write pointer is here"), not
``o.ready`` combined with the buffer's state. ``o.ready`` therefore fans out to a handful of
flip-flops instead of every payload bit, and ``o.payload`` is a 2:1 multiplexer of registers
selected by a register. An entry is loaded whenever it is the free entry named by the write
pointer, beat or not; it is only read once the pointer moved past it with a beat.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["SkidFifo"]


class SkidFifo(wiring.Component):
    """Two-entry register FIFO between ``i`` and ``o`` with registered load enables.

    Latency: a beat transferred on ``i`` in cycle ``t`` is valid on ``o`` in cycle ``t + 1`` at
    the earliest. Throughput: one beat per cycle (back to back, with ``o.ready`` high), and no
    beat is lost or duplicated for any pattern of ``i.valid`` and ``o.ready``. ``i.ready`` is a
    register, high out of reset and while fewer than two beats are held; ``o.valid`` is a
    register; ``o.payload`` is a 2:1 multiplexer of the two entries, selected by a register.

    Parameters
    ----------
    shape : shape-like
        Payload shape.

    Members
    -------
    i : In(stream.Signature(shape))
    o : Out(stream.Signature(shape))
    """

    def __init__(self, shape):
        self.shape = shape
        super().__init__({
            "i": In(stream.Signature(shape)),
            "o": Out(stream.Signature(shape)),
        })

    def elaborate(self, platform):
        m = Module()
        entries = [Signal(self.shape, name=f"entry{k}") for k in range(2)]
        load = [Signal(init=1, name="load0"), Signal(name="load1")]
        count = Signal(range(3), name="count")
        in_ready = Signal(init=1, name="in_ready")
        out_valid = Signal(name="out_valid")
        w_at = Signal(name="w_at")
        r_at = Signal(name="r_at")
        push = Signal()
        pop = Signal()
        m.d.comb += [
            push.eq(self.i.valid & in_ready),
            pop.eq(out_valid & self.o.ready),
            self.i.ready.eq(in_ready),
            self.o.valid.eq(out_valid),
            self.o.payload.eq(Mux(r_at, entries[1], entries[0])),
        ]
        count_next = Signal(range(3))
        w_at_next = Signal()
        m.d.comb += [count_next.eq(count + push - pop), w_at_next.eq(w_at ^ push)]
        m.d.sync += [
            count.eq(count_next),
            in_ready.eq(count_next != 2),
            out_valid.eq(count_next != 0),
            w_at.eq(w_at_next),
            r_at.eq(r_at ^ pop),
            load[0].eq((count_next != 2) & ~w_at_next),
            load[1].eq((count_next != 2) & w_at_next),
        ]
        for k in range(2):
            with m.If(load[k]):
                m.d.sync += entries[k].eq(self.i.payload)
        return m
