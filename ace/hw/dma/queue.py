"""Command queue of a DMA half: a LUT-RAM FIFO whose head is a skid buffer.

::

    w_data, w_en --> SyncFIFO (depth) --> SkidBuffer (2 entries, sliced) --> r_data, r_rdy
          ^                                   ^                                  |
        room (register)                  in_ready (register)                  r_en

The interface is that of a ``SyncFIFOBuffered`` (``w_data``, ``w_en``, ``w_rdy``, ``r_data``,
``r_rdy``, ``r_en``) with the same latency (an entry written in cycle ``t`` is at the head in
``t + 2``), plus ``room_next``: high when the queue will surely be able to take an entry in
the next cycle, whatever happens in this one (the FIFO holds at most ``depth - 2`` entries), for
a requester to register as its ``ready`` (:func:`queues_open`), with no compare of levels
behind it. The head is a skid buffer:
its ``ready`` (the FIFO's read enable) is a register, and the consumer's ``r_en``, which often
comes from a handshake and a last-item flag, reaches only the head's control registers (one
copy per slice of the entry), not the FIFO's pointers and level or a read enable as wide as the
entry. Capacity: ``depth`` entries in the FIFO (``depth - 1`` when written through ``room``)
plus two at the head.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Elaboratable, Module, Signal
from amaranth.lib.fifo import SyncFIFO

from ace.hw.common.skid_buffer import SkidBuffer

__all__ = ["CommandQueue", "queues_open"]


def queues_open(m, *queues):
    """A register: high when each of ``queues`` (:class:`CommandQueue`) can take an entry in
    this cycle, whatever happened in the previous one; a command's ``ready``."""
    open_ = Signal(init=1)
    m.d.sync += open_.eq(Cat(*(queue.room_next for queue in queues)).all())
    return open_


class CommandQueue(Elaboratable):
    """See the module docstring. ``slices``: copies of the head's control registers (default:
    one per 24 bits of the entry; one if ``replicate`` is false, the same cycles)."""

    def __init__(self, *, width: int, depth: int, slices: int | None = None,
                 replicate: bool = True):
        assert depth >= 2, "room_next needs a FIFO of two entries or more"
        self.width = width
        self.depth = depth
        self.slices = (max(1, width // 24) if slices is None else slices) if replicate else 1
        self.w_data = Signal(width)
        self.w_en = Signal()
        self.w_rdy = Signal()
        self.r_data = Signal(width)
        self.r_rdy = Signal()
        self.r_en = Signal()
        self.room_next = Signal()

    def elaborate(self, platform):
        m = Module()
        m.submodules.fifo = fifo = SyncFIFO(width=self.width, depth=self.depth)
        m.submodules.head = head = SkidBuffer(self.width, slices=self.slices)
        m.d.comb += [
            fifo.w_data.eq(self.w_data),
            fifo.w_en.eq(self.w_en),
            self.w_rdy.eq(fifo.w_rdy),
            head.i.valid.eq(fifo.r_rdy),
            head.i.p.eq(fifo.r_data),
            fifo.r_en.eq(head.i.ready),
            self.r_data.eq(head.o.p),
            self.r_rdy.eq(head.o.valid),
            head.o.ready.eq(self.r_en),
        ]
        m.d.comb += self.room_next.eq(fifo.level <= self.depth - 2)
        return m
