"""Skid FIFO: a two-entry stream slice whose data registers load from registers only.

::

    i.payload --+--> [ entry 0 ] --+
                |   load0 (reg.)   +--> 2:1 mux (r_at, a register) --> o.payload
                +--> [ entry 1 ] --+
                    load1 (reg.)
    i.ready, o.valid, load0/1, r_at: registers; o.ready reaches only the pointers and flags

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

from amaranth.hdl import Cat, Module, Mux, Shape, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ace.hw.common.replica import drive_replicas, replicas

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
    slice_bits : int or None
        Payload bits per copy of the load enables and the read pointer
        (:func:`ace.hw.common.replica.replicas`): each slice of the entries has its own, so no
        control net fans out to the whole payload. None: one copy.
    ready_copies : int
        Copies of ``i.ready`` to make (:attr:`ready_copies`), each a register placed on its own.
    valid_copies : int
        Copies of ``o.valid`` to make (:attr:`valid_copies`), the same for consumers.

    Members
    -------
    i : In(stream.Signature(shape))
    o : Out(stream.Signature(shape))
    """

    def __init__(self, shape, *, slice_bits=None, ready_copies: int = 0, valid_copies: int = 0):
        self.shape = shape
        self.slice_bits = slice_bits
        #: Copies of ``i.ready`` (equal to it in every cycle, each its own register): a wide
        #: producer upstream can take its load enables from them, a copy per part.
        self.ready_copies = [Signal(init=1, name=f"in_ready_{k}") for k in range(ready_copies)]
        #: Copies of ``o.valid`` (equal to it in every cycle, each its own register): several
        #: consumers apart from each other each take one, so no one valid net reaches them all.
        self.valid_copies = [Signal(name=f"out_valid_{k}") for k in range(valid_copies)]
        #: Combinational: the value ``i.ready`` takes in the next cycle, for a producer that
        #: registers its own copies of it combined with conditions of its own.
        self.ready_next = Signal(name="ready_next")
        super().__init__({
            "i": In(stream.Signature(shape)),
            "o": Out(stream.Signature(shape)),
        })

    def elaborate(self, platform):
        m = Module()
        width = Shape.cast(self.shape).width
        step = self.slice_bits or width
        slices = [slice(lo, min(lo + step, width)) for lo in range(0, width, step)]
        entries = [Signal(width, name=f"entry{k}") for k in range(2)]
        # The occupancy is the pair (out_valid, in_ready): 0 beats (0, 1), 1 beat (1, 1),
        # 2 beats (1, 0). Every next value below is written as logic of these registers,
        # ``i.valid`` and ``o.ready`` (at most five inputs), not as a counter's adder, which
        # synthesis would map to a carry chain that the LUT mapping cannot see through.
        in_ready = Signal(init=1, name="in_ready")
        out_valid = Signal(name="out_valid")
        w_at = Signal(name="w_at")
        r_at = Signal(name="r_at")
        push = Signal()
        pop = Signal()
        full_next = Signal()
        empty_next = Signal()
        w_at_next = Signal()
        r_at_next = Signal()
        holds_one = out_valid & in_ready
        m.d.comb += [
            push.eq(self.i.valid & in_ready),
            pop.eq(out_valid & self.o.ready),
            # Two beats held next: two now and none taken, or one now, one in, none taken.
            full_next.eq(~self.o.ready & (~in_ready | (holds_one & self.i.valid))),
            # None held next: none now and none in, or one now, taken, and none in.
            empty_next.eq(~self.i.valid & (~out_valid | (in_ready & self.o.ready))),
            w_at_next.eq(w_at ^ push),
            r_at_next.eq(r_at ^ pop),
            self.i.ready.eq(in_ready),
            self.o.valid.eq(out_valid),
            self.ready_next.eq(~full_next),
        ]
        m.d.sync += [
            in_ready.eq(~full_next),
            out_valid.eq(~empty_next),
            w_at.eq(w_at_next),
            r_at.eq(r_at_next),
        ]
        # Per slice: its own copies of the two load enables ("not full and the write pointer
        # will be at this entry") and of the read pointer.
        n = len(slices)
        loads = [replicas(m, platform, ~full_next & (w_at_next == k), n, init=k == 0,
                          name=f"load{k}") for k in range(2)]
        selects = replicas(m, platform, r_at_next, n, name="r_at")
        drive_replicas(m, platform, ~full_next, self.ready_copies, init=1, name="in_ready")
        drive_replicas(m, platform, ~empty_next, self.valid_copies, name="out_valid")
        payload = self.i.payload.as_value() if hasattr(self.i.payload, "as_value") \
            else self.i.payload
        out = []
        for j, bits in enumerate(slices):
            for k in range(2):
                with m.If(loads[k][j]):
                    m.d.sync += entries[k][bits].eq(payload[bits])
            out.append(Mux(selects[j], entries[1][bits], entries[0][bits]))
        m.d.comb += self.o.payload.eq(Cat(*out))
        return m
