"""Command queue of a DMA half: a LUT-RAM FIFO whose head is a two-entry register slice.

::

    w_data, w_en --> FlagFifo (depth) --> head (2 entries, sliced) --> r_data, r_rdy
          ^                                   ^                           |
        room (register)                  i.ready (register)            r_en

The interface is that of a ``SyncFIFOBuffered`` (``w_data``, ``w_en``, ``w_rdy``, ``r_data``,
``r_rdy``, ``r_en``) with the same latency (an entry written in cycle ``t`` is at the head in
``t + 2``), plus ``room_next``: high when the queue will surely be able to take an entry in
the next cycle, whatever happens in this one (the FIFO holds at most ``depth - 2`` entries), for
a requester to register as its ``ready`` (:func:`queues_open`), with no compare of levels
behind it. The FIFO's ``w_rdy`` and ``r_rdy`` are registers (:class:`FlagFifo`), so neither
the memory's write enable nor the head's input valid has a compare of levels in front.

The head is a register slice whose ``ready`` (the FIFO's read enable) is a register, so the
consumer's ``r_en``, which often comes from a handshake and a last-item flag, reaches only the
head, not the FIFO's pointers and level. ``head="buffer"``: a :class:`SkidBuffer`, ``r_data``
straight from its output register, ``r_en`` in the load enable of every head bit (one copy of
the control per slice); ``head="fifo"``: a :class:`SkidFifo`, whose load enables are registers
computed a cycle ahead, so ``r_en`` reaches only a few flip-flops per slice, and ``r_data`` is a
2:1 multiplexer of its two entries (one LUT more in front of the consumer). Both give the same
cycles. ``registered_write``: the FIFO's memory is written a cycle late from a register
(:class:`FlagFifo`), so the logic that computes ``w_data`` (a command's decoding) ends at
flip-flops, not at the LUT RAM; the same cycles. Capacity: ``depth`` entries in the FIFO
(``depth - 1`` when written through ``room``) plus two at the head.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Elaboratable, Module, Signal

from ace.hw.common.flag_fifo import FlagFifo
from ace.hw.common.skid_buffer import SkidBuffer
from ace.hw.common.skid_fifo import SkidFifo

__all__ = ["CommandQueue", "queues_open"]


def queues_open(m, *queues):
    """A register: high when each of ``queues`` (:class:`CommandQueue`) can take an entry in
    this cycle, whatever happened in the previous one; a command's ``ready``."""
    open_ = Signal(init=1)
    m.d.sync += open_.eq(Cat(*(queue.room_next for queue in queues)).all())
    return open_


class CommandQueue(Elaboratable):
    """See the module docstring. ``slices``: copies of the head's control registers (default:
    one per 24 bits of the entry; one if ``replicate`` is false, the same cycles). ``head``:
    ``"buffer"`` (:class:`SkidBuffer`) or ``"fifo"`` (:class:`SkidFifo`). ``registered_write``:
    see :class:`FlagFifo`."""

    def __init__(self, *, width: int, depth: int, slices: int | None = None,
                 replicate: bool = True, head: str = "buffer", registered_write: bool = False):
        assert depth >= 2, "room_next needs a FIFO of two entries or more"
        assert head in ("buffer", "fifo"), f"head must be 'buffer' or 'fifo', not {head!r}"
        self.head = head
        self.registered_write = registered_write
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
        m.submodules.fifo = fifo = FlagFifo(width=self.width, depth=self.depth,
                                              registered_write=self.registered_write)
        if self.head == "fifo":
            slice_bits = -(-self.width // self.slices) if self.slices > 1 else None
            m.submodules.head = head = SkidFifo(self.width, slice_bits=slice_bits)
        else:
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
