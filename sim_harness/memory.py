"""Per-node main memory of the system model: an AXI4 slave with bandwidth, latency and
background traffic, plus a backdoor for loading and reading back contents.

::

     AR --> arq: RamFifo {burst, due} --> read issuer --+--> array read --> R (registered)
                                              ^         |
                                              |    +---------+
                                        token bucket <- refill: cfg_bytes_per_cycle_q8
                                              |    |  x (1 - cfg_background_q16)
                                              v    +---------+
     AW --> awq: RamFifo {burst} ------> W acceptor ----+--> array write
                                              |
                                              +--> bq: RamFifo {id, resp, due} --> B

     bd_addr/bd_wdata/bd_we --> array (own write port)    array (own read port) --> bd_rdata

Bandwidth is one shared token bucket in bytes with 8 fractional bits, as on an HBM channel
where reads and writes share the DRAM: every read or write beat that touches the array costs
``data_bytes`` tokens (a narrow or partly strobed beat still occupies a whole beat), error
beats cost nothing. Each cycle the bucket refills by ``cfg_bytes_per_cycle_q8 / 256`` less
the background share ``cfg_background_q16 / 65536`` of it, which synthetic background traffic
(the DL compute's demand) takes; ``background_bytes`` counts it. The default rate,
``2 * data_bytes``, lets one read beat and one write beat through every cycle. When both
directions wait and the bucket holds only one beat, they alternate.

Latency is exact: a burst accepted on AR in cycle ``t`` has its first R beat valid in cycle
``t + cfg_latency`` (if tokens and ``rready`` allow), and a write burst whose last W beat is
accepted in cycle ``t`` has ``bvalid`` in cycle ``t + cfg_latency``. Values below
:attr:`MemoryModel.min_latency` (2) act as 2. The request queues hold ``max_latency + 2`` bursts
or more, so even single-beat bursts stream at full rate at the largest latency.

Bursts: INCR with any start address (unaligned starts and narrow sizes follow the AXI address
rules; the array is written by ``wstrb``). FIXED and WRAP bursts and sizes wider than the bus
answer SLVERR on every beat; a beat whose address is ``size_bytes`` or more answers DECERR
(reads return zeros); the B response of a burst is the worst of its beats. W beats are taken
only once their AW has been accepted (``wlast`` is not checked: ``awlen`` decides). Responses
are in order per direction; reads and writes proceed concurrently.

Runtime configuration: ``cfg_bytes_per_cycle_q8``, ``cfg_background_q16`` and ``cfg_latency``
are inputs whose reset values are the constructor's ``bytes_per_cycle``, ``background_share``
and ``latency``. A system top may leave them undriven (they keep those values) or drive them
from its own ports, so one Verilator build sweeps bandwidth, background share and latency.
"""

from __future__ import annotations

from numbers import Real

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ace.hw.axi.signatures import Axi4Signature, AxiBurst, AxiResp

from .sim_ram import SimRam
from .link import (
    COUNTER_BITS,
    RATE_BITS,
    TIME_BITS,
    RamFifo,
    _check_int,
    _check_rate,
    _pow2_at_least,
    _reached,
    bytes_per_cycle_q8,
    share_q16,
)

__all__ = ["MemoryModel"]


class MemoryModel(wiring.Component):
    """Main memory of one node (see the module docstring for the timing model).

    Throughput: at most one read beat and one write beat per cycle, and at most
    ``cfg_bytes_per_cycle_q8 / 256 * (1 - cfg_background_q16 / 65536)`` bytes per cycle over
    both in the long run. Latency: ``max(cfg_latency, 2)`` cycles from AR to the first R beat
    and from the last W beat to B.

    Parameters
    ----------
    size_bytes : int
        Capacity; a multiple of ``data_bytes`` from ``data_bytes`` to ``2**addr_bits`` (and at
        most ``2**34``). Byte addresses from ``size_bytes`` up answer DECERR.
    data_bytes : int
        Bytes per AXI beat, a power of two from 1 to 128.
    addr_bits : int
        AXI address width, 1 to 64.
    id_bits : int
        AXI ID width, 1 to 32.
    bytes_per_cycle : number or None
        Reset value of the bandwidth, 1/256 to ``2 * data_bytes`` (None: ``2 * data_bytes``).
    latency : int
        Reset value of ``cfg_latency``, 2 to ``max_latency``.
    background_share : number
        Reset value of the background share, in [0, 1).
    max_latency : int or None
        Largest latency at which single-beat bursts still stream at full rate: sets the queue
        depths and the width of ``cfg_latency``. ``max(latency, 64)`` if None, up to 65536.
    storage : "amaranth", "verilog" or "dpi"
        The array as an Amaranth ``Memory`` (Amaranth simulator), the behavioural Verilog RAM
        of :mod:`sim_harness.sim_ram` (cocotb system builds; see there why), or words held by
        the C++ harness driver (``dpi``; ``node`` is its memory index).

    Members
    -------
    s_axi : In(Axi4Signature(addr_bits, data_bytes, id_bits))
        The AXI4 slave port.
    cfg_bytes_per_cycle_q8 : In(24)
        Bandwidth, bytes per cycle with 8 fractional bits (:func:`bytes_per_cycle_q8`). Zero
        stops every beat that touches the array.
    cfg_background_q16 : In(16)
        Background share of the bandwidth, 16 fractional bits (:func:`share_q16`).
    cfg_latency : In(max_latency.bit_length())
        Latency in cycles. Change it only while no request is outstanding.
    read_bytes, write_bytes : Out(48)
        Payload bytes of OKAY beats: ``2**arsize`` per R beat, the set ``wstrb`` bits per W beat.
    busy_cycles : Out(48)
        Cycles in which at least one R beat issued or one W beat was accepted.
    background_bytes : Out(48)
        Bytes taken by the background traffic (integer part of its running sum).
    bd_addr : In(word address bits)
        Backdoor word address (byte address / ``data_bytes``).
    bd_wdata, bd_we : In
        Backdoor write of a whole word, in the cycle ``bd_we`` is high.
    bd_rdata : Out
        Word at ``bd_addr`` of the previous cycle (1 cycle latency, registered).
    """

    #: Smallest effective latency in cycles (queue write, then the array read register).
    min_latency = 2

    def __init__(self, *, size_bytes: int, data_bytes: int, addr_bits: int, id_bits: int,
                 bytes_per_cycle: Real | None = None, latency: int = 2,
                 background_share: Real = 0.0, max_latency: int | None = None,
                 storage: str = "amaranth", node: int = 0):
        self._MustUse__silence = True   # no "never used" warning when a check below raises
        _check_int("data_bytes", data_bytes, 1, 128, "bytes per beat")
        if data_bytes & (data_bytes - 1):
            raise ValueError(f"data_bytes: {data_bytes} is not valid; allowed: a power of two "
                             "from 1 to 128")
        _check_int("addr_bits", addr_bits, 1, 64, "AXI address width")
        _check_int("id_bits", id_bits, 1, 32, "AXI ID width")
        _check_int("size_bytes", size_bytes, data_bytes, min(1 << addr_bits, 1 << 34),
                   "bytes, at most 2**addr_bits")
        if size_bytes % data_bytes:
            raise ValueError(f"size_bytes: {size_bytes} is not valid; allowed: a multiple of "
                             f"data_bytes ({data_bytes})")
        _check_int("latency", latency, self.min_latency, 1 << 16, "cycles")
        max_latency = max(latency, 64) if max_latency is None else max_latency
        _check_int("max_latency", max_latency, latency, 1 << 16,
                   "cycles, at least latency")
        bytes_per_cycle = 2 * data_bytes if bytes_per_cycle is None else bytes_per_cycle
        _check_rate("bytes_per_cycle", bytes_per_cycle, 2 * data_bytes)
        if (isinstance(background_share, bool) or not isinstance(background_share, Real)
                or not 0 <= background_share < 1):
            raise ValueError(f"background_share: {background_share!r} is out of range; "
                             "allowed: a number in [0, 1)")
        self._MustUse__silence = False
        self.size_bytes = size_bytes
        self.data_bytes = data_bytes
        self.addr_bits = addr_bits
        self.id_bits = id_bits
        self.bytes_per_cycle = bytes_per_cycle
        self.latency = latency
        self.background_share = background_share
        self.max_latency = max_latency
        self.storage = storage
        self.node = node
        self.words = size_bytes // data_bytes
        #: Depth of the AR, AW and B queues.
        self.queue_depth = _pow2_at_least(max_latency + 2)
        word_bits = max(1, (self.words - 1).bit_length())
        super().__init__({
            "s_axi": In(Axi4Signature(addr_bits, data_bytes, id_bits)),
            "cfg_bytes_per_cycle_q8": In(RATE_BITS, init=bytes_per_cycle_q8(bytes_per_cycle)),
            "cfg_background_q16": In(16, init=share_q16(background_share)),
            "cfg_latency": In(max_latency.bit_length(), init=latency),
            "read_bytes": Out(COUNTER_BITS),
            "write_bytes": Out(COUNTER_BITS),
            "busy_cycles": Out(COUNTER_BITS),
            "background_bytes": Out(COUNTER_BITS),
            "bd_addr": In(word_bits),
            "bd_wdata": In(8 * data_bytes),
            "bd_we": In(1),
            "bd_rdata": Out(8 * data_bytes),
        })

    def elaborate(self, platform):
        m = Module()
        axi = self.s_axi
        db = self.data_bytes
        db_log2 = (db - 1).bit_length()
        word_bits = len(self.bd_addr)

        m.submodules.array = array = SimRam(self.words, db, storage=self.storage, node=self.node)
        axi_wp = _Port(array, "w0")
        axi_rp = _Port(array, "r0")
        m.d.comb += [
            array.w1_addr.eq(self.bd_addr),
            array.w1_data.eq(self.bd_wdata),
            array.w1_en.eq(self.bd_we),
            array.r1_addr.eq(self.bd_addr),
            self.bd_rdata.eq(array.r1_data),
        ]

        now = Signal(TIME_BITS)
        m.d.sync += now.eq(now + 1)
        lat = Mux(self.cfg_latency < self.min_latency, self.min_latency, self.cfg_latency)

        def word_of(addr):
            return addr[db_log2:db_log2 + word_bits]

        def out_of_range(addr):
            if self.size_bytes >= 1 << self.addr_bits:
                return Const(0)
            return addr >= self.size_bytes

        def next_addr(addr, size, name):
            # AXI INCR: align to the transfer size, then step by it. Sizes wider than the bus
            # only occur in SLVERR bursts, which touch nothing.
            result = Signal(self.addr_bits, name=f"{name}_next_addr")
            with m.Switch(size):
                for s in range(db_log2 + 1):
                    with m.Case(s):
                        m.d.comb += result.eq(Cat(Const(0, s), addr[s:]) + (1 << s))
                with m.Default():
                    m.d.comb += result.eq(addr + db)
            return result

        def bad_burst(burst, size):
            return (burst != AxiBurst.INCR) | (size > db_log2)

        burst_layout = data.StructLayout({
            "id": self.id_bits, "addr": self.addr_bits, "len": 8, "size": 3, "slverr": 1,
            "due": TIME_BITS,
        })

        # -- token bucket ------------------------------------------------------------------
        cost = db << 8
        cap = 2 * cost
        tokens = Signal(range(cap + (1 << RATE_BITS)), init=cap)
        background = Signal(RATE_BITS)
        refill = Signal(RATE_BITS)
        m.d.comb += [
            background.eq((self.cfg_bytes_per_cycle_q8 * self.cfg_background_q16) >> 16),
            refill.eq(self.cfg_bytes_per_cycle_q8 - background),
        ]
        background_sum = Signal(COUNTER_BITS + 8)
        m.d.sync += background_sum.eq(background_sum + background)
        m.d.comb += self.background_bytes.eq(background_sum[8:])

        # -- read side -----------------------------------------------------------------------
        m.submodules.arq = arq = RamFifo(burst_layout.size, self.queue_depth)
        ar_in = Signal(burst_layout)
        m.d.comb += [
            ar_in.id.eq(axi.arid), ar_in.addr.eq(axi.araddr), ar_in.len.eq(axi.arlen),
            ar_in.size.eq(axi.arsize), ar_in.slverr.eq(bad_burst(axi.arburst, axi.arsize)),
            ar_in.due.eq(now + lat - 1),   # the cycle the first beat may issue
            arq.w_data.eq(ar_in),
            arq.w_en.eq(axi.arvalid),
            axi.arready.eq(arq.w_rdy),
        ]
        ar = data.View(burst_layout, arq.r_data)
        r_beat = Signal(8)
        r_addr = Signal(self.addr_bits)
        r_cur = Signal(self.addr_bits)
        r_resp = Signal(2)
        m.d.comb += [
            r_cur.eq(Mux(r_beat == 0, ar.addr, r_addr)),
            r_resp.eq(Mux(ar.slverr, AxiResp.SLVERR,
                          Mux(out_of_range(r_cur), AxiResp.DECERR, AxiResp.OKAY))),
        ]
        r_ok = r_resp == AxiResp.OKAY
        r_valid = Signal()
        r_data_ok = Signal()
        want_r = arq.r_rdy & _reached(m, now, ar.due, "ar") & (~r_valid | axi.rready)
        cost_r = Mux(r_ok, cost, 0)

        # -- write side ----------------------------------------------------------------------
        m.submodules.awq = awq = RamFifo(burst_layout.size, self.queue_depth)
        aw_in = Signal(burst_layout)
        m.d.comb += [
            aw_in.id.eq(axi.awid), aw_in.addr.eq(axi.awaddr), aw_in.len.eq(axi.awlen),
            aw_in.size.eq(axi.awsize), aw_in.slverr.eq(bad_burst(axi.awburst, axi.awsize)),
            awq.w_data.eq(aw_in),
            awq.w_en.eq(axi.awvalid),
            axi.awready.eq(awq.w_rdy),
        ]
        aw = data.View(burst_layout, awq.r_data)
        b_layout = data.StructLayout({"id": self.id_bits, "resp": 2, "due": TIME_BITS})
        m.submodules.bq = bq = RamFifo(b_layout.size, self.queue_depth)
        w_beat = Signal(8)
        w_addr = Signal(self.addr_bits)
        w_cur = Signal(self.addr_bits)
        w_resp = Signal(2)
        w_resp_acc = Signal(2)   # OR of the earlier beats' responses (OKAY 0, SLVERR 2, DECERR 3)
        m.d.comb += [
            w_cur.eq(Mux(w_beat == 0, aw.addr, w_addr)),
            w_resp.eq(Mux(aw.slverr, AxiResp.SLVERR,
                          Mux(out_of_range(w_cur), AxiResp.DECERR, AxiResp.OKAY))),
        ]
        w_ok = w_resp == AxiResp.OKAY
        want_w = awq.r_rdy & axi.wvalid & bq.w_rdy
        cost_w = Mux(w_ok, cost, 0)

        # -- arbitration for tokens ----------------------------------------------------------
        fit_r = tokens >= cost_r
        fit_w = tokens >= cost_w
        fit_both = tokens >= cost_r + cost_w
        prefer_r = Signal()   # who wins the next conflict; flips after each conflict
        grant_r = Signal()
        grant_w = Signal()
        conflict = want_r & want_w & fit_r & fit_w & ~fit_both
        m.d.comb += [
            grant_r.eq(want_r & fit_r & (~conflict | prefer_r)),
            grant_w.eq(want_w & fit_w & (~conflict | ~prefer_r)),
        ]
        with m.If(conflict):
            m.d.sync += prefer_r.eq(~prefer_r)
        after = Signal.like(tokens)
        m.d.comb += after.eq(tokens - Mux(grant_r, cost_r, 0) - Mux(grant_w, cost_w, 0))
        # Clip before the refill, so a waiting beat never loses refill: the rate is exact.
        m.d.sync += tokens.eq(Mux(after > cap, cap, after) + refill)
        with m.If(grant_r | grant_w):
            m.d.sync += self.busy_cycles.eq(self.busy_cycles + 1)

        # -- read issue and R channel --------------------------------------------------------
        r_last = r_beat == ar.len
        m.d.comb += [
            axi_rp.addr.eq(word_of(r_cur)),
            axi_rp.en.eq(grant_r),   # the array's output register holds while R stalls
            arq.r_en.eq(grant_r & r_last),
            axi.rvalid.eq(r_valid),
            axi.rdata.eq(Mux(r_data_ok, axi_rp.data, 0)),
        ]
        with m.If(grant_r):
            m.d.sync += [
                r_valid.eq(1),
                axi.rid.eq(ar.id),
                axi.rresp.eq(r_resp),
                axi.rlast.eq(r_last),
                r_data_ok.eq(r_ok),
                r_beat.eq(Mux(r_last, 0, r_beat + 1)),
                r_addr.eq(next_addr(r_cur, ar.size, "r")),
            ]
            with m.If(r_ok):
                m.d.sync += self.read_bytes.eq(self.read_bytes + (Const(1, 8) << ar.size))
        with m.Elif(axi.rready):
            m.d.sync += r_valid.eq(0)

        # -- W acceptance, array write and B channel -----------------------------------------
        w_last = w_beat == aw.len
        b_in = Signal(b_layout)
        m.d.comb += [
            axi.wready.eq(grant_w),
            axi_wp.addr.eq(word_of(w_cur)),
            axi_wp.data.eq(axi.wdata),
            axi_wp.en.eq(Mux(grant_w & w_ok, axi.wstrb, 0)),
            awq.r_en.eq(grant_w & w_last),
            b_in.id.eq(aw.id),
            b_in.resp.eq(w_resp_acc | w_resp),
            b_in.due.eq(now + lat),
            bq.w_data.eq(b_in),
            bq.w_en.eq(grant_w & w_last),
        ]
        with m.If(grant_w):
            m.d.sync += [
                w_beat.eq(Mux(w_last, 0, w_beat + 1)),
                w_addr.eq(next_addr(w_cur, aw.size, "w")),
                w_resp_acc.eq(Mux(w_last, 0, w_resp_acc | w_resp)),
            ]
            with m.If(w_ok):
                m.d.sync += self.write_bytes.eq(
                    self.write_bytes + sum(axi.wstrb[k] for k in range(db)))
        b = data.View(b_layout, bq.r_data)
        m.d.comb += [
            axi.bvalid.eq(bq.r_rdy & _reached(m, now, b.due, "b")),
            axi.bid.eq(b.id),
            axi.bresp.eq(b.resp),
            bq.r_en.eq(axi.bvalid & axi.bready),
        ]
        return m


class _Port:
    """Names a :class:`SimRam` port's signals like a ``Memory`` port's (``addr``, ``data``,
    ``en``)."""

    def __init__(self, ram, prefix):
        self.addr = getattr(ram, f"{prefix}_addr")
        self.data = getattr(ram, f"{prefix}_data")
        self.en = getattr(ram, f"{prefix}_en")
