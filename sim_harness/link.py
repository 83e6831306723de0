"""One directed network link of the system model: a delay line with a bandwidth throttle.

::

    i (from a NIC TX)                                                  o (to a NIC RX)
        |                                                                  ^
        v                                                                  |
    +--------------+   +---------------------------------------+   +-------------+
    | token bucket |-->| RamFifo of {beat, due}: one circular  |-->| head is due |
    | -> i.tready  |   | buffer in a Memory, no shift chain    |   | -> o.tvalid |
    +--------------+   +---------------------------------------+   +-------------+
                                   due = now + cfg_latency

A beat that enters at cycle ``t`` (``i.tvalid & i.tready``) is stored with its due time
``t + cfg_latency`` and leaves at that cycle (``o.tvalid``), or later if ``o.tready`` is low. The
buffer holds ``max_latency + 1`` beats or more, so at full rate with ``o.tready`` high the link
never stalls its input; when ``o.tready`` is held low the buffer fills and ``i.tready`` falls,
so no beat is ever lost. (The ACE NIC RX never stalls, so in a system ``o.tready`` is 1.)

The throttle is a token bucket in bytes with 8 fractional bits: it refills by
``cfg_bytes_per_cycle_q8 / 256`` each cycle and a beat costs ``data_bytes`` (a partial beat
occupies the link for a whole beat time), so the long-run rate is at most
``cfg_bytes_per_cycle_q8 / 256`` bytes per cycle. At ``data_bytes`` or more, one beat passes every
cycle.

Everything is synthesizable and cycle-exact, so a Verilator build runs with no Python per cycle.
"""

from __future__ import annotations

from numbers import Real

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ace.layouts import AxiStreamSignature

__all__ = [
    "COUNTER_BITS",
    "RATE_BITS",
    "TIME_BITS",
    "LinkModel",
    "RamFifo",
    "bytes_per_cycle_q8",
    "share_q16",
    "token_bucket",
]

#: Width of every statistics counter.
COUNTER_BITS = 48
#: Width of a ``cfg_bytes_per_cycle_q8`` port: up to 65535.996 bytes per cycle.
RATE_BITS = 24
#: Width of the free-running cycle counter and of stored due times. Comparisons are modulo
#: ``2**TIME_BITS``, so a due time is recognised while it is less than ``2**31`` cycles old.
TIME_BITS = 32


def bytes_per_cycle_q8(value: Real) -> int:
    """``value`` bytes per cycle as the fixed-point integer a ``cfg_bytes_per_cycle_q8`` port
    takes (8 fractional bits, rounded to nearest)."""
    return round(value * 256)


def share_q16(value: Real) -> int:
    """A share in [0, 1) as the fixed-point integer a ``cfg_background_q16`` port takes."""
    return min(round(value * 65536), 65535)


def _check_int(name, value, low, high, meaning=""):
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name}: {value!r} is out of range; allowed: an integer from {low} "
                         f"to {high}{f' ({meaning})' if meaning else ''}")


def _check_rate(name, value, high):
    low = 1 / 256
    if isinstance(value, bool) or not isinstance(value, Real) or not low <= value <= high:
        raise ValueError(f"{name}: {value!r} is out of range; allowed: a number of bytes per "
                         f"cycle from 1/256 to {high}")


def token_bucket(m: Module, data_bytes: int, rate_q8, take) -> Signal:
    """A bandwidth throttle in ``m``: returns ``has_tokens`` (enough for one beat). Each cycle
    the bucket refills by ``rate_q8 / 256`` bytes, and a beat taken (``take`` high) costs
    ``data_bytes``. Clipping before the refill keeps the refill whole whenever a beat waits for
    tokens, so the long-run rate is exact; at ``data_bytes`` or more, a beat every cycle."""
    cost = data_bytes << 8
    tokens = Signal(range(cost + (1 << RATE_BITS)), init=cost)
    after = Signal.like(tokens)
    m.d.comb += after.eq(tokens - Mux(take, cost, 0))
    m.d.sync += tokens.eq(Mux(after > cost, cost, after) + rate_q8)
    return tokens >= cost


def _pow2_at_least(value: int) -> int:
    return 1 << max(1, (value - 1).bit_length())


def _reached(m, now, due, name):
    """Combinational: ``now`` is at or past ``due`` (modulo ``2**TIME_BITS``)."""
    diff = Signal(TIME_BITS, name=f"{name}_diff")
    m.d.comb += diff.eq(now - due)
    return ~diff[TIME_BITS - 1]


class RamFifo(wiring.Component):
    """First-word-fall-through FIFO in one :class:`~amaranth.lib.memory.Memory` with a
    synchronous, write-transparent read port (block-RAM friendly).

    An entry written in cycle ``t`` is at the output (``r_rdy``) in cycle ``t + 1``, and one
    entry can be written and one read every cycle.

    Parameters
    ----------
    width : int
        Entry width in bits.
    depth : int
        Capacity; a power of two, at least 2.

    Members
    -------
    w_data, w_en : In
        Entry to write, and write request (taken when ``w_rdy``).
    w_rdy : Out
        Not full (combinational from registers).
    r_data : Out
        Oldest entry, valid while ``r_rdy``.
    r_en : In
        Remove the oldest entry (taken when ``r_rdy``).
    r_rdy : Out
        Not empty (combinational from registers).
    level : Out
        Number of entries.
    """

    def __init__(self, width: int, depth: int):
        _check_int("width", width, 1, 1 << 16)
        if not isinstance(depth, int) or depth < 2 or depth & (depth - 1):
            raise ValueError(f"depth: {depth!r} is not valid; allowed: a power of two of at "
                             "least 2")
        self.width = width
        self.depth = depth
        super().__init__({
            "w_data": In(width), "w_en": In(1), "w_rdy": Out(1),
            "r_data": Out(width), "r_en": In(1), "r_rdy": Out(1),
            "level": Out(range(depth + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        abits = (self.depth - 1).bit_length()
        m.submodules.ram = ram = Memory(shape=self.width, depth=self.depth, init=[])
        wp = ram.write_port()
        rp = ram.read_port(transparent_for=(wp,))
        wr_ptr = Signal(abits + 1)
        rd_ptr = Signal(abits + 1)
        rd_next = Signal(abits + 1)
        level = Signal(abits + 1)
        do_write = self.w_en & self.w_rdy
        do_read = self.r_en & self.r_rdy
        m.d.comb += [
            level.eq(wr_ptr - rd_ptr),
            self.level.eq(level),
            self.w_rdy.eq(level != self.depth),
            self.r_rdy.eq(level != 0),
            rd_next.eq(rd_ptr + do_read),
            wp.addr.eq(wr_ptr[:abits]),
            wp.data.eq(self.w_data),
            wp.en.eq(do_write),
            # Read ahead at the pointer the next cycle will use; transparency forwards an entry
            # written to that row in this same cycle.
            rp.addr.eq(rd_next[:abits]),
            self.r_data.eq(rp.data),
        ]
        m.d.sync += [wr_ptr.eq(wr_ptr + do_write), rd_ptr.eq(rd_next)]
        return m


class LinkModel(wiring.Component):
    """One directed link: fixed latency, bandwidth throttle, statistics counters.

    Latency: a beat entering at cycle ``t`` leaves at cycle ``t + cfg_latency`` exactly while
    ``o.tready`` is high (values below 1 act as 1). Throughput: one beat per cycle at full rate;
    at most ``cfg_bytes_per_cycle_q8 / 256`` bytes per cycle in the long run otherwise.

    Parameters
    ----------
    data_bytes : int
        Width of ``tdata`` in bytes (1 to 256); ``tkeep`` has one bit per byte.
    latency : int
        Reset value of ``cfg_latency``, 1 to 65536.
    max_latency : int or None
        Largest latency the buffer supports at full rate (``latency`` if None, from
        ``latency`` to 65536);
        sets the buffer depth (next power of two above it) and the width of ``cfg_latency``.
    bytes_per_cycle : number or None
        Reset value of the throttle, 1/256 to ``data_bytes`` bytes per cycle (``data_bytes``,
        that is full rate, if None).

    Members
    -------
    i : In(AxiStreamSignature(data_bytes, keep=True))
        From a NIC TX. ``i.tready`` is low while the throttle has too few tokens for a beat or
        the buffer is full.
    o : Out(AxiStreamSignature(data_bytes, keep=True))
        To a NIC RX; ``tdata``, ``tkeep`` and ``tlast`` as they entered. ``o.tready`` is
        honoured (1 in an ACE system, whose NIC RX never stalls).
    cfg_latency : In(max_latency.bit_length())
        Latency in cycles. Change it only while the link is empty.
    cfg_bytes_per_cycle_q8 : In(RATE_BITS)
        Bandwidth in bytes per cycle with 8 fractional bits (:func:`bytes_per_cycle_q8`).
        Zero stops the link.
    busy_cycles, beats, bytes, stall_cycles : Out(48)
        Cycles in which a beat entered, beats that entered (the same count: at most one beat
        enters per cycle), payload bytes that entered (``tkeep`` bits), and cycles with
        ``i.tvalid & ~i.tready``.

    Undriven ``cfg_*`` ports keep their reset values (the constructor's arguments), so a
    system top may leave them unconnected or drive them from its own ports to sweep them in
    one Verilator build.
    """

    min_latency = 1

    def __init__(self, *, data_bytes: int, latency: int, max_latency: int | None = None,
                 bytes_per_cycle: Real | None = None):
        self._MustUse__silence = True   # no "never used" warning when a check below raises
        _check_int("data_bytes", data_bytes, 1, 256, "bytes per beat")
        _check_int("latency", latency, self.min_latency, 1 << 16, "cycles")
        max_latency = latency if max_latency is None else max_latency
        _check_int("max_latency", max_latency, latency, 1 << 16, "cycles, at least latency")
        bytes_per_cycle = data_bytes if bytes_per_cycle is None else bytes_per_cycle
        _check_rate("bytes_per_cycle", bytes_per_cycle, data_bytes)
        self._MustUse__silence = False
        self.data_bytes = data_bytes
        self.latency = latency
        self.max_latency = max_latency
        self.bytes_per_cycle = bytes_per_cycle
        self.depth = _pow2_at_least(max_latency + 1)
        stream = AxiStreamSignature(data_bytes, keep=True)
        super().__init__({
            "i": In(stream),
            "o": Out(stream),
            "cfg_latency": In(max_latency.bit_length(), init=latency),
            "cfg_bytes_per_cycle_q8": In(RATE_BITS, init=bytes_per_cycle_q8(bytes_per_cycle)),
            "busy_cycles": Out(COUNTER_BITS),
            "beats": Out(COUNTER_BITS),
            "bytes": Out(COUNTER_BITS),
            "stall_cycles": Out(COUNTER_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        db = self.data_bytes
        entry = data.StructLayout({
            "tdata": 8 * db, "tkeep": db, "tlast": 1, "due": TIME_BITS,
        })
        m.submodules.fifo = fifo = RamFifo(entry.size, self.depth)

        now = Signal(TIME_BITS)
        m.d.sync += now.eq(now + 1)

        accept = Signal()
        has_tokens = token_bucket(m, db, self.cfg_bytes_per_cycle_q8, accept)
        lat = Mux(self.cfg_latency < self.min_latency, self.min_latency, self.cfg_latency)
        w_entry = Signal(entry)
        m.d.comb += [
            self.i.tready.eq(fifo.w_rdy & has_tokens),
            w_entry.tdata.eq(self.i.tdata),
            w_entry.tkeep.eq(self.i.tkeep),
            w_entry.tlast.eq(self.i.tlast),
            w_entry.due.eq(now + lat),
            fifo.w_data.eq(w_entry),
        ]
        m.d.comb += [accept.eq(self.i.tvalid & self.i.tready), fifo.w_en.eq(accept)]

        head = data.View(entry, fifo.r_data)
        m.d.comb += [
            self.o.tvalid.eq(fifo.r_rdy & _reached(m, now, head.due, "head")),
            self.o.tdata.eq(head.tdata),
            self.o.tkeep.eq(head.tkeep),
            self.o.tlast.eq(head.tlast),
            fifo.r_en.eq(self.o.tvalid & self.o.tready),
        ]

        with m.If(accept):
            m.d.sync += [
                self.busy_cycles.eq(self.busy_cycles + 1),
                self.beats.eq(self.beats + 1),
                self.bytes.eq(self.bytes + sum(self.i.tkeep[k] for k in range(db))),
            ]
        with m.If(self.i.tvalid & ~self.i.tready):
            m.d.sync += self.stall_cycles.eq(self.stall_cycles + 1)
        return m
