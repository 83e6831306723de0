"""Synchronous FIFO with an output register and registered flags.

::

    w_data, w_en --> [ FlagFifo (depth - 1) ] --> [ output register ] --> r_data
    w_rdy, w_rdy copies (registers: not full)       r_rdy (register)

The same ports and cycles as ``amaranth.lib.fifo.SyncFIFOBuffered`` (``depth`` counts the
output register; an entry written in cycle ``t`` is at ``r_data`` with ``r_rdy`` in ``t + 2``;
a full memory refuses a write even in a cycle where it is read), built from a
:class:`~ace.hw.common.flag_fifo.FlagFifo` (``SyncFIFO``'s cycles, flags in flip-flops) and
the output register. ``SyncFIFOBuffered`` compares its level for ``w_rdy`` and for "the memory
is not empty"; here both are flip-flops, so a writer whose load enables hang on ``w_rdy`` (a
register slice in front) starts from a flip-flop, not a compare of a counter, and
``ready_copies`` gives it a copy per part of a wide writer. The memory's read feeds only the
output register, which synthesis takes into the read port (a deep FIFO maps to block RAM).

Latency: two cycles from a write to ``r_rdy``. Throughput: a write and a read in every cycle.
"""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ace.hw.common.flag_fifo import FlagFifo

__all__ = ["BufferedFlagFifo"]


class BufferedFlagFifo(wiring.Component):
    """``SyncFIFOBuffered`` with registered ``w_rdy`` (see the module docstring).

    Parameters
    ----------
    width : int
        Bits per entry.
    depth : int
        Entries, output register included: 2 or more.
    ready_copies : int
        Copies of ``w_rdy`` (:attr:`ready_copies`, as :class:`FlagFifo`'s).

    Members
    -------
    w_data : In(width)
    w_en : In(1)
    w_rdy : Out(1), a register: the memory is not full
    r_data : Out(width), the output register
    r_en : In(1)
    r_rdy : Out(1), a register: the output register holds an entry
    level : Out(range(depth + 1)): entries held
    """

    def __init__(self, *, width: int, depth: int, ready_copies: int = 0):
        assert depth >= 2, f"BufferedFlagFifo depth must be at least 2, not {depth}"
        self._memory = FlagFifo(width=width, depth=depth - 1, ready_copies=ready_copies)
        super().__init__({
            "w_data": In(width),
            "w_en": In(1),
            "w_rdy": Out(1, init=1),
            "r_data": Out(width),
            "r_en": In(1),
            "r_rdy": Out(1),
            "level": Out(range(depth + 1)),
        })
        #: Copies of ``w_rdy`` (the same value), one per part of a wide writer.
        self.ready_copies = self._memory.ready_copies

    def elaborate(self, platform):
        m = Module()
        m.submodules.memory = memory = self._memory
        # memory -> output register: when the memory holds an entry and the register is empty
        # or read now
        move = memory.r_rdy & (~self.r_rdy | self.r_en)
        m.d.comb += [
            memory.w_data.eq(self.w_data),
            memory.w_en.eq(self.w_en),
            self.w_rdy.eq(memory.w_rdy),
            memory.r_en.eq(move),
            self.level.eq(memory.level + self.r_rdy),
        ]
        with m.If(move):
            m.d.sync += [self.r_data.eq(memory.r_data), self.r_rdy.eq(1)]
        with m.Elif(self.r_en):
            m.d.sync += self.r_rdy.eq(0)
        return m
