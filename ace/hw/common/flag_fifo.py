"""Synchronous FIFO whose ``w_rdy`` and ``r_rdy`` are registers.

::

    w_data, w_en --> [ LUT-RAM ring (depth) ] --> r_data (combinational read at the head)
    w_rdy (register: not full)                    r_rdy (register: not empty)

The same ports and cycles as ``amaranth.lib.fifo.SyncFIFO`` (an entry written in cycle ``t``
can be read in ``t + 1``; ``r_data`` is the head entry, read from the memory
combinationally), but the two flags are flip-flops computed a cycle ahead instead of compares of
``level``: the memory's write enable is ``w_en & w_rdy`` (one gate from a register), and a
consumer that registers ``r_rdy`` as its input valid sees no compare in front. The next value
of each flag is a choice of three (set, cleared, kept) by the handshakes, with the one compare
of ``level`` against a constant beside it.

Latency: one cycle from a write to ``r_rdy`` and ``r_data`` (as ``SyncFIFO``). Throughput: a
write and a read in every cycle; as in ``SyncFIFO``, a full FIFO refuses a write even in a cycle
where it is read, and an empty one refuses a read even in a cycle where it is written.

``registered_write``: the same ports and cycles, but ``w_data`` goes only into a register (no
enable), and the memory is written from it a cycle later, so whatever logic computes ``w_data``
ends at flip-flops, not at the memory's write port. While the written entry is the head and not
yet in the memory (``bypass``, a register), ``r_data`` comes from that register: ``r_data`` is
then a 2:1 multiplexer of the memory's read and the register.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ace.hw.common.lut_ram import lut_ram
from ace.hw.common.replica import drive_replicas

__all__ = ["FlagFifo"]


class FlagFifo(wiring.Component):
    """``SyncFIFO`` with registered ``w_rdy``/``r_rdy`` (see the module docstring).

    Parameters
    ----------
    width : int
        Bits per entry.
    depth : int
        Entries, 1 or more (any value, not only powers of two).
    registered_write : bool
        Write the memory a cycle late, from a register (see the module docstring).
    ready_copies : int
        Copies of ``w_rdy`` to make (:attr:`ready_copies`), each a register of its own with
        ``w_rdy``'s value, for a wide writer that takes a copy per part.

    Members
    -------
    w_data : In(width)
    w_en : In(1)
    w_rdy : Out(1), a register: the FIFO is not full
    r_data : Out(width), the head entry (combinational read of the memory)
    r_en : In(1)
    r_rdy : Out(1), a register: the FIFO is not empty
    level : Out(range(depth + 1)), a register: entries held
    """

    def __init__(self, *, width: int, depth: int, registered_write: bool = False,
                 ready_copies: int = 0):
        assert depth >= 1, f"FlagFifo depth must be at least 1, not {depth}"
        self.width = width
        self.depth = depth
        self.registered_write = registered_write
        super().__init__({
            "w_data": In(width),
            "w_en": In(1),
            "w_rdy": Out(1, init=1),
            "r_data": Out(width),
            "r_en": In(1),
            "r_rdy": Out(1),
            "level": Out(range(depth + 1)),
        })
        #: Copies of ``w_rdy`` (the same value in every cycle), one per part of a wide writer.
        self.ready_copies = [Signal(init=1, name=f"w_rdy_{k}") for k in range(ready_copies)]

    def elaborate(self, platform):
        m = Module()
        depth = self.depth
        w_port, r_port = lut_ram(m, self.width, depth)
        produce = Signal(range(depth), name="produce")
        consume = Signal(range(depth), name="consume")
        do_write = Signal()
        do_read = Signal()

        def advance(pointer):
            return Mux(pointer == depth - 1, 0, pointer + 1)

        m.d.comb += [
            do_write.eq(self.w_en & self.w_rdy),
            do_read.eq(self.r_en & self.r_rdy),
            r_port.addr.eq(consume),
        ]
        if self.registered_write:
            # The write a cycle late, from registers: data (loaded every cycle), address and
            # enable. ``bypass``: the head is the entry in those registers (the entry written
            # in the previous cycle is the only one held), not yet readable from the memory.
            w_hold = Signal(self.width, name="w_hold")
            w_hold_addr = Signal(range(depth), name="w_hold_addr")
            w_hold_en = Signal(name="w_hold_en")
            bypass = Signal(name="bypass")
            m.d.sync += [
                w_hold.eq(self.w_data),
                w_hold_addr.eq(produce),
                w_hold_en.eq(do_write),
                bypass.eq(do_write & ((self.level == 0) | ((self.level == 1) & do_read))),
            ]
            m.d.comb += [
                w_port.addr.eq(w_hold_addr),
                w_port.data.eq(w_hold),
                w_port.en.eq(w_hold_en),
                self.r_data.eq(Mux(bypass, w_hold, r_port.data)),
            ]
        else:
            m.d.comb += [
                w_port.addr.eq(produce),
                w_port.data.eq(self.w_data),
                w_port.en.eq(do_write),
                self.r_data.eq(r_port.data),
            ]
        with m.If(do_write):
            m.d.sync += produce.eq(advance(produce))
        with m.If(do_read):
            m.d.sync += consume.eq(advance(consume))
        w_rdy_next = Signal()
        m.d.comb += w_rdy_next.eq(self.w_rdy)
        with m.If(do_write & ~do_read):
            m.d.sync += [self.level.eq(self.level + 1), self.r_rdy.eq(1)]
            m.d.comb += w_rdy_next.eq(self.level != depth - 1)
        with m.If(do_read & ~do_write):
            m.d.sync += [self.level.eq(self.level - 1), self.r_rdy.eq(self.level != 1)]
            m.d.comb += w_rdy_next.eq(1)
        m.d.sync += self.w_rdy.eq(w_rdy_next)
        drive_replicas(m, platform, w_rdy_next, self.ready_copies, init=1, name="w_rdy_copy")
        return m
