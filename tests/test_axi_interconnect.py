"""Amaranth-simulator tests of :class:`ace.hw.axi.interconnect.AxiInterconnect`.

A Python AXI4 memory slave (:class:`MemoryModel`: in order, random ready, idle and latency, a
byte array) drives ``m_axi`` and checks the AXI rules on it (stable payload while valid, IDs,
burst lengths, one master's W beats per burst). Python masters issue random bursts with random
idle and backpressure on every master-side handshake. The scoreboard: every read returns the
preloaded contents (read regions are never written), the final memory equals a golden copy with
every write applied (masters write disjoint regions, so the golden is order independent), and
every master gets back its own IDs and responses in order.

Every random test prints its seed in assertion messages; rerun one with that seed.
"""

import itertools
import random
from collections import deque
from dataclasses import dataclass

import pytest
from amaranth.hdl import DomainRenamer, Fragment
from amaranth.sim import Simulator

from ace.hw.axi.interconnect import AxiInterconnect

CLOCK = 1e-8
ADDR_BITS = 20
DATA_BYTES = 16
LOG2_BYTES = 4
MAX_BURST = 16
REGION = 16 << 10               # bytes of memory per master
MEM_BYTES = 1 << ADDR_BITS


def _resp_for(addr):
    """The model's response for a burst at ``addr``: some bursts fail, so that response routing
    is checked too."""
    return 2 if (addr >> 8) % 5 == 3 else 0


@dataclass
class Burst:
    id: int
    addr: int
    len: int                    # AXI len: beats - 1
    data: list = None           # write bursts: (wdata, wstrb) per beat


class MemoryModel:
    """AXI4 slave on ``m_axi``: one byte array, bursts served in order of arrival.

    R bursts run in AR order, each starting a random latency after its AR; W beats are taken
    independently of AW (as AXI4 allows) and a burst is written once its AW and all its beats
    are in; its B follows after a random latency, in order. ``ready`` is the probability of
    each ready being high, ``idle`` the probability of holding back an R or B beat.
    """

    def __init__(self, dut, rng, seed, *, ready=0.7, idle=0.3, latency=(1, 12)):
        self.dut = dut
        self.m = dut.m_axi
        self.rng = rng
        self.seed = seed
        self.ready = ready
        self.idle = idle
        self.latency = latency
        self.mem = bytearray(MEM_BYTES)
        self.cycle = 0
        self.ar_log = []        # (cycle, arid, araddr, arlen)
        self.aw_log = []        # (cycle, awid, awaddr, awlen)
        self.w_cycles = []      # cycles with a W handshake
        self.r_cycles = []      # cycles with an R handshake

    def _delay(self):
        return self.rng.randint(*self.latency)

    async def run(self, ctx):
        m, rng, dut = self.m, self.rng, self.dut
        seed = f"seed {self.seed}"
        reads = deque()         # [due, id, addr, len, beat]
        writes = deque()        # (id, addr, len)
        wbeats = []             # (data, strb, last)
        bresps = deque()        # (due, id, resp)
        sampled = [m.arvalid, m.arid, m.araddr, m.arlen, m.arsize, m.arburst,
                   m.awvalid, m.awid, m.awaddr, m.awlen, m.awsize, m.awburst,
                   m.wvalid, m.wdata, m.wstrb, m.wlast, m.rready, m.bready]
        pending = {"ar": None, "aw": None, "w": None}
        while True:
            arready = rng.random() < self.ready
            awready = rng.random() < self.ready
            wready = rng.random() < self.ready
            ctx.set(m.arready, arready)
            ctx.set(m.awready, awready)
            ctx.set(m.wready, wready)
            rvalid = bool(reads) and reads[0][0] <= self.cycle and rng.random() >= self.idle
            if rvalid:
                _, rid, addr, length, beat = reads[0]
                at = addr + beat * DATA_BYTES
                ctx.set(m.rid, rid)
                ctx.set(m.rdata, int.from_bytes(self.mem[at:at + DATA_BYTES], "little"))
                ctx.set(m.rresp, _resp_for(addr))
                ctx.set(m.rlast, beat == length)
            ctx.set(m.rvalid, rvalid)
            bvalid = bool(bresps) and bresps[0][0] <= self.cycle and rng.random() >= self.idle
            if bvalid:
                ctx.set(m.bid, bresps[0][1])
                ctx.set(m.bresp, bresps[0][2])
            ctx.set(m.bvalid, bvalid)

            (_, _, arvalid, arid, araddr, arlen, arsize, arburst, awvalid, awid, awaddr, awlen,
             awsize, awburst, wvalid, wdata, wstrb, wlast, rready, bready) = \
                await ctx.tick().sample(*sampled)

            # Valid and payload stay put until the handshake.
            now = {"ar": (arvalid, arid, araddr, arlen, arsize, arburst),
                   "aw": (awvalid, awid, awaddr, awlen, awsize, awburst),
                   "w": (wvalid, wdata, wstrb, wlast)}
            for ch, ready in (("ar", arready), ("aw", awready), ("w", wready)):
                if pending[ch] is not None:
                    assert now[ch] == pending[ch], \
                        f"{seed}: cycle {self.cycle}: {ch} changed before its handshake"
                pending[ch] = now[ch] if now[ch][0] and not ready else None
            assert rready and bready, f"{seed}: m_axi rready/bready must always be 1"

            if arvalid and arready:
                assert arid < dut.read_masters, f"{seed}: arid {arid} is no read master"
                assert arlen < MAX_BURST and arsize == LOG2_BYTES and arburst == 1, seed
                reads.append([self.cycle + self._delay(), arid, araddr, arlen, 0])
                self.ar_log.append((self.cycle, arid, araddr, arlen))
            if rvalid and rready:
                self.r_cycles.append(self.cycle)
                reads[0][4] += 1
                if reads[0][4] > reads[0][3]:
                    reads.popleft()
                    if reads:
                        reads[0][0] = max(reads[0][0], self.cycle + 1)
            if awvalid and awready:
                assert awid < dut.write_masters, f"{seed}: awid {awid} is no write master"
                assert awlen < MAX_BURST and awsize == LOG2_BYTES and awburst == 1, seed
                writes.append((awid, awaddr, awlen))
                self.aw_log.append((self.cycle, awid, awaddr, awlen))
            if wvalid and wready:
                self.w_cycles.append(self.cycle)
                wbeats.append((wdata, wstrb, wlast))
            while writes and len(wbeats) > writes[0][2]:
                wid, addr, length = writes.popleft()
                beats, wbeats = wbeats[:length + 1], wbeats[length + 1:]
                assert [b[2] for b in beats] == [0] * length + [1], \
                    f"{seed}: W beats of awid {wid} at {addr:#x}: wlast misplaced"
                for k, (wd, ws, _) in enumerate(beats):
                    raw = wd.to_bytes(DATA_BYTES, "little")
                    for n in range(DATA_BYTES):
                        if ws >> n & 1:
                            self.mem[addr + k * DATA_BYTES + n] = raw[n]
                bresps.append((self.cycle + self._delay(), wid, _resp_for(addr)))
            if bvalid and bready:
                bresps.popleft()
            self.cycle += 1


# -- master-side drivers -------------------------------------------------------------------

async def _idle(ctx, rng, idle):
    while idle and rng.random() < idle:
        await ctx.tick()


async def drive_ar(ctx, port, bursts, rng, idle):
    for b in bursts:
        await _idle(ctx, rng, idle)
        for name, value in (("arid", b.id), ("araddr", b.addr), ("arlen", b.len),
                            ("arsize", LOG2_BYTES), ("arburst", 1), ("arvalid", 1)):
            ctx.set(getattr(port, name), value)
        await ctx.tick().until(port.arready)
        ctx.set(port.arvalid, 0)


async def receive_r(ctx, port, expected, rng, stall, seed, *, gate=None, log=None):
    """Take R beats with random backpressure; ``gate()`` false holds ``rready`` low."""
    got = 0
    while got < len(expected):
        ready = (gate is None or gate()) and not (stall and rng.random() < stall)
        ctx.set(port.rready, ready)
        _, _, valid, rdata, rresp, rlast, rid = await ctx.tick().sample(
            port.rvalid, port.rdata, port.rresp, port.rlast, port.rid)
        if ready and valid:
            assert (rdata, rresp, rlast, rid) == expected[got], \
                f"seed {seed}: R beat {got}: got {(rdata, rresp, rlast, rid)}, " \
                f"expected {expected[got]}"
            got += 1
            if log is not None:
                log.append(got)
    ctx.set(port.rready, 0)


async def drive_aw(ctx, port, bursts, rng, idle):
    for b in bursts:
        await _idle(ctx, rng, idle)
        for name, value in (("awid", b.id), ("awaddr", b.addr), ("awlen", b.len),
                            ("awsize", LOG2_BYTES), ("awburst", 1), ("awvalid", 1)):
            ctx.set(getattr(port, name), value)
        await ctx.tick().until(port.awready)
        ctx.set(port.awvalid, 0)


async def drive_w(ctx, port, bursts, rng, idle, *, gate=None):
    """Send every burst's W beats; ``gate(k)`` false holds beat ``k`` (counted over all
    bursts) back."""
    k = 0
    for b in bursts:
        for n, (wdata, wstrb) in enumerate(b.data):
            while gate is not None and not gate(k):
                await ctx.tick()
            await _idle(ctx, rng, idle)
            ctx.set(port.wdata, wdata)
            ctx.set(port.wstrb, wstrb)
            ctx.set(port.wlast, n == b.len)
            ctx.set(port.wvalid, 1)
            await ctx.tick().until(port.wready)
            ctx.set(port.wvalid, 0)
            k += 1


async def receive_b(ctx, port, expected, rng, stall, seed, *, gate=None):
    """Take B responses with random backpressure; ``gate()`` false holds ``bready`` low."""
    got = 0
    while got < len(expected):
        ready = (gate is None or gate()) and not (stall and rng.random() < stall)
        ctx.set(port.bready, ready)
        _, _, valid, bid, bresp = await ctx.tick().sample(port.bvalid, port.bid, port.bresp)
        if ready and valid:
            assert (bid, bresp) == expected[got], \
                f"seed {seed}: B {got}: got {(bid, bresp)}, expected {expected[got]}"
            got += 1
    ctx.set(port.bready, 0)


# -- traffic and golden --------------------------------------------------------------------

def _random_bursts(rng, base, count, id_bits, *, write, lengths=None):
    bursts = []
    for n in range(count):
        beats = lengths[n] if lengths else rng.choice([1, 2, MAX_BURST, rng.randint(1, MAX_BURST)])
        page = base + rng.randrange(REGION // 4096) * 4096
        addr = page + rng.randrange((4096 - beats * DATA_BYTES) // DATA_BYTES + 1) * DATA_BYTES
        burst = Burst(rng.randrange(1 << id_bits), addr, beats - 1)
        if write:
            full = (1 << DATA_BYTES) - 1
            burst.data = [(rng.getrandbits(8 * DATA_BYTES),
                           rng.choice([full, full, rng.getrandbits(DATA_BYTES), 0,
                                       1 << rng.randrange(DATA_BYTES)]))
                          for _ in range(beats)]
        bursts.append(burst)
    return bursts


def _expected_r(mem, bursts):
    beats = []
    for b in bursts:
        for k in range(b.len + 1):
            at = b.addr + k * DATA_BYTES
            beats.append((int.from_bytes(mem[at:at + DATA_BYTES], "little"), _resp_for(b.addr),
                          int(k == b.len), b.id))
    return beats


def _apply_writes(mem, bursts):
    for b in bursts:
        for k, (wdata, wstrb) in enumerate(b.data):
            raw = wdata.to_bytes(DATA_BYTES, "little")
            for n in range(DATA_BYTES):
                if wstrb >> n & 1:
                    mem[b.addr + k * DATA_BYTES + n] = raw[n]


def _run(dut, testbenches, background=(), timeout_cycles=40000):
    sim = Simulator(dut)
    sim.add_clock(CLOCK)
    for tb in testbenches:
        sim.add_testbench(tb)
    for tb in background:
        sim.add_testbench(tb, background=True)

    async def watchdog(ctx):
        await ctx.delay(timeout_cycles * CLOCK)
        raise AssertionError("watchdog: simulation did not finish")
    sim.add_testbench(watchdog, background=True)
    sim.run()


def _bench(coroutine, *args, **kwargs):
    async def testbench(ctx):
        await coroutine(ctx, *args, **kwargs)
    return testbench


# -- random traffic ------------------------------------------------------------------------

SCENARIOS = {
    # name: (read masters, write masters, read buffer, write buffer, master idle, stall)
    "3r3w": (3, 3, None, None, 0.3, 0.3),
    "2r2w_fast": (2, 2, None, 2 * MAX_BURST, 0.0, 0.0),
    "1r2w_deep": (1, 2, 4 * MAX_BURST, MAX_BURST + 3, 0.5, 0.5),
    "2r0w": (2, 0, MAX_BURST, None, 0.2, 0.6),
    "0r2w": (0, 2, None, MAX_BURST, 0.2, 0.6),
}


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("seed", [1, 2])
def test_random_traffic(scenario, seed):
    _random_traffic(scenario, seed)


@pytest.mark.parametrize("scenario", ["3r3w", "2r2w_fast"])
def test_random_traffic_one_slice_control(scenario):
    """The gated-clock form's interconnect: its register slices with one copy of the
    control (``replicate=False``) and its halves in domains ``read`` and ``write``
    (``split_domains``, here both on the test clock), the same traffic checks."""
    _random_traffic(scenario, 3, replicate=False)


def _random_traffic(scenario, seed, replicate=True):
    n_rd, n_wr, rbuf, wbuf, idle, stall = SCENARIOS[scenario]
    seed = f"{scenario}-{seed}{'' if replicate else '-one-copy'}"
    rng = random.Random(seed)
    id_bits = 3
    dut = AxiInterconnect(ADDR_BITS, DATA_BYTES, id_bits, n_rd, n_wr, max_burst_beats=MAX_BURST,
                          read_buffer_beats=rbuf, write_buffer_beats=wbuf,
                          max_writes_in_flight=rng.choice([1, 2, 4]), replicate=replicate,
                          split_domains=not replicate)
    memory = MemoryModel(dut, rng, seed)
    memory.mem[:] = rng.randbytes(MEM_BYTES)
    golden = bytearray(memory.mem)
    benches = []
    for i in range(n_rd):
        bursts = _random_bursts(rng, i * REGION, 24, id_bits, write=False)
        port = getattr(dut, f"rd{i}")
        benches += [_bench(drive_ar, port, bursts, random.Random(f"{seed}-ar{i}"), idle),
                    _bench(receive_r, port, _expected_r(golden, bursts),
                           random.Random(f"{seed}-r{i}"), stall, seed)]
    for j in range(n_wr):
        bursts = _random_bursts(rng, (8 + j) * REGION, 24, id_bits, write=True)
        _apply_writes(golden, bursts)
        port = getattr(dut, f"wr{j}")
        benches += [_bench(drive_aw, port, bursts, random.Random(f"{seed}-aw{j}"), idle),
                    _bench(drive_w, port, bursts, random.Random(f"{seed}-w{j}"), idle),
                    _bench(receive_b, port, [(b.id, _resp_for(b.addr)) for b in bursts],
                           random.Random(f"{seed}-b{j}"), stall, seed)]
    top = dut if replicate else DomainRenamer({"read": "sync", "write": "sync"})(dut)
    _run(top, benches, [memory.run])
    for at in range(0, MEM_BYTES, REGION):
        assert memory.mem[at:at + REGION] == golden[at:at + REGION], \
            f"seed {seed}: memory differs from the golden in region {at:#x}"
    # Every master got bursts through, and W bursts never interleave (checked by the model).
    assert {a[1] for a in memory.ar_log} == set(range(n_rd)), seed
    assert {a[1] for a in memory.aw_log} == set(range(n_wr)), seed


# -- head-of-line blocking -----------------------------------------------------------------

def test_stalled_masters_block_nobody():
    """Read master 0 never takes its R beats, write master 0 stops in the middle of a burst and
    write master 2 never takes its B responses; masters 1 still finish. Then the stalled
    masters resume and finish too."""
    seed = "hol"
    rng = random.Random(seed)
    id_bits = 2
    dut = AxiInterconnect(ADDR_BITS, DATA_BYTES, id_bits, 2, 3, max_burst_beats=MAX_BURST)
    memory = MemoryModel(dut, rng, seed)
    memory.mem[:] = rng.randbytes(MEM_BYTES)
    golden = bytearray(memory.mem)
    state = {"release": False, "done": 0, "r0_beats": []}

    rd0 = _random_bursts(rng, 0, 4, id_bits, write=False, lengths=[MAX_BURST] * 4)
    rd1 = _random_bursts(rng, REGION, 30, id_bits, write=False)
    wr0 = _random_bursts(rng, 8 * REGION, 2, id_bits, write=True, lengths=[MAX_BURST] * 2)
    wr1 = _random_bursts(rng, 9 * REGION, 30, id_bits, write=True)
    wr2 = _random_bursts(rng, 10 * REGION, 2 * dut.max_writes_in_flight, id_bits, write=True)
    _apply_writes(golden, wr0 + wr1 + wr2)

    def counted(coroutine):
        async def bench(ctx, *args, **kwargs):
            await coroutine(ctx, *args, **kwargs)
            state["done"] += 1
        return bench

    async def controller(ctx):
        while state["done"] < 2:
            await ctx.tick()
        for _ in range(100):
            await ctx.tick()
        reserved = dut.read_buffer_beats // MAX_BURST
        assert [a[1] for a in memory.ar_log].count(0) == reserved, \
            "read master 0 got more ARs out than its R buffer holds"
        assert state["r0_beats"] == []
        assert 0 not in [a[1] for a in memory.aw_log], \
            "write master 0's incomplete burst reached memory"
        assert [a[1] for a in memory.aw_log].count(2) == dut.max_writes_in_flight, \
            "write master 2 got more bursts out than its B buffer holds"
        state["release"] = True

    benches = [
        _bench(drive_ar, dut.rd0, rd0, rng, 0.0),
        _bench(receive_r, dut.rd0, _expected_r(golden, rd0), rng, 0.2, seed,
               gate=lambda: state["release"], log=state["r0_beats"]),
        _bench(drive_ar, dut.rd1, rd1, random.Random(1), 0.2),
        _bench(counted(receive_r), dut.rd1, _expected_r(golden, rd1), random.Random(2), 0.2,
               seed),
        _bench(drive_aw, dut.wr0, wr0, rng, 0.0),
        _bench(drive_w, dut.wr0, wr0, rng, 0.0,
               gate=lambda k: k < MAX_BURST // 2 or state["release"]),
        _bench(receive_b, dut.wr0, [(b.id, _resp_for(b.addr)) for b in wr0], rng, 0.2, seed),
        _bench(drive_aw, dut.wr1, wr1, random.Random(3), 0.2),
        _bench(drive_w, dut.wr1, wr1, random.Random(4), 0.2),
        _bench(counted(receive_b), dut.wr1, [(b.id, _resp_for(b.addr)) for b in wr1],
               random.Random(5), 0.2, seed),
        _bench(drive_aw, dut.wr2, wr2, rng, 0.0),
        _bench(drive_w, dut.wr2, wr2, rng, 0.0),
        _bench(receive_b, dut.wr2, [(b.id, _resp_for(b.addr)) for b in wr2], rng, 0.2, seed,
               gate=lambda: state["release"]),
        controller,
    ]
    _run(dut, benches, [memory.run])
    assert memory.mem == golden


def test_overlong_read_burst_is_never_granted():
    """A read burst longer than ``max_burst_beats`` (a broken master) never fits its R buffer:
    it is held in its slice and never reaches memory, while the other master's reads run to
    the end; a burst of exactly ``max_burst_beats`` is granted."""
    seed = "overlong"
    dut = AxiInterconnect(ADDR_BITS, DATA_BYTES, 1, 2, 1, max_burst_beats=MAX_BURST)
    memory = MemoryModel(dut, random.Random(0), seed)
    memory.mem[:] = random.Random(1).randbytes(MEM_BYTES)
    full = [Burst(0, 0, MAX_BURST - 1)]
    too_long = [Burst(0, 2 * REGION, MAX_BURST)]
    others = _random_bursts(random.Random(2), REGION, 20, 1, write=False)
    state = {"full": False}

    async def master0(ctx):
        await drive_ar(ctx, dut.rd0, full, None, 0.0)
        await receive_r(ctx, dut.rd0, _expected_r(memory.mem, full), None, 0.0, seed)
        state["full"] = True
        ctx.set(dut.rd0.arid, 0)
        ctx.set(dut.rd0.araddr, too_long[0].addr)
        ctx.set(dut.rd0.arlen, too_long[0].len)
        ctx.set(dut.rd0.arvalid, 1)

    async def master1_r(ctx):
        await receive_r(ctx, dut.rd1, _expected_r(memory.mem, others), random.Random(4), 0.2,
                        seed)
        await ctx.tick().repeat(200)

    _run(dut, [master0, _bench(drive_ar, dut.rd1, others, random.Random(3), 0.2), master1_r],
         [memory.run])
    assert state["full"]
    lens_of_0 = [arlen for _, arid, _, arlen in memory.ar_log if arid == 0]
    assert lens_of_0 == [MAX_BURST - 1], f"{seed}: master 0's bursts at memory: {lens_of_0}"


# -- throughput and latency ----------------------------------------------------------------

def _stream_bursts(count, base):
    return [Burst(0, base + n * MAX_BURST * DATA_BYTES, MAX_BURST - 1,
                  [(n * MAX_BURST + k, (1 << DATA_BYTES) - 1) for k in range(MAX_BURST)])
            for n in range(count)]


@pytest.mark.parametrize("latency", [4, 12])
def test_read_throughput(latency):
    """Full rate while the round trip (memory latency + 3) is below the spare buffer."""
    dut = AxiInterconnect(ADDR_BITS, DATA_BYTES, 1, 2, 1, max_burst_beats=MAX_BURST)
    assert latency + 3 < dut.read_buffer_beats - MAX_BURST
    memory = MemoryModel(dut, random.Random(0), "read-rate", ready=1.0, idle=0.0,
                         latency=(latency, latency))
    bursts = _stream_bursts(64, 0)
    beats = []

    async def bench(ctx):
        await receive_r(ctx, dut.rd0, _expected_r(memory.mem, bursts), None, 0.0, "read-rate",
                        log=beats)
        beats.append(memory.cycle)

    _run(dut, [_bench(drive_ar, dut.rd0, bursts, None, 0.0), bench], [memory.run])
    rate = 64 * MAX_BURST / beats[-1]          # from cycle 0 to the last beat taken
    print(f"read throughput, memory latency {latency}: {rate:.3f} beats/cycle")
    assert rate >= 0.95


@pytest.mark.parametrize("ratio", [2, 4])
def test_wide_port_serves_streams_at_once(ratio):
    """A memory port ``ratio`` times wider than a link: each read master (a DMA reader behind
    its width downsizer) takes one R beat every ``ratio`` cycles, so ``ratio`` masters streaming
    at once share the port and each still gets its full rate; the port carries about one beat
    per cycle. ``read_buffer_beats`` is the engine's default (2 x ``max_burst_beats``)."""
    dut = AxiInterconnect(ADDR_BITS, DATA_BYTES, 2, ratio, 1, max_burst_beats=MAX_BURST)
    memory = MemoryModel(dut, random.Random(0), f"wide-{ratio}", ready=1.0, idle=0.0,
                         latency=(8, 8))
    bursts = [[Burst(b.id, b.addr, b.len) for b in _stream_bursts(32, i * REGION)]
              for i in range(ratio)]
    finished = {}

    def every(n):
        phases = itertools.cycle([True] + [False] * (n - 1))
        return lambda: next(phases)

    def reader(i):
        async def bench(ctx):
            await receive_r(ctx, getattr(dut, f"rd{i}"), _expected_r(memory.mem, bursts[i]),
                            None, 0.0, f"wide-{ratio}", gate=every(ratio))
            finished[i] = memory.cycle
        return bench

    benches = [_bench(drive_ar, getattr(dut, f"rd{i}"), bursts[i], None, 0.0)
               for i in range(ratio)]
    _run(dut, benches + [reader(i) for i in range(ratio)], [memory.run])
    beats = 32 * MAX_BURST
    rates = [beats / finished[i] for i in range(ratio)]
    port = ratio * beats / max(finished.values())
    print(f"memory port {ratio}x a link: per-master {[f'{r:.3f}' for r in rates]} beats/cycle "
          f"(at most {1 / ratio:.3f}), port {port:.3f} beats/cycle")
    assert min(rates) >= 0.95 / ratio
    assert port >= 0.95


@pytest.mark.parametrize("write_buffer_beats", [MAX_BURST, 2 * MAX_BURST])
def test_write_throughput(write_buffer_beats):
    dut = AxiInterconnect(ADDR_BITS, DATA_BYTES, 1, 1, 2, max_burst_beats=MAX_BURST,
                          write_buffer_beats=write_buffer_beats)
    memory = MemoryModel(dut, random.Random(0), "write-rate", ready=1.0, idle=0.0,
                         latency=(4, 4))
    bursts = _stream_bursts(64, 0)
    golden = bytearray(memory.mem)
    _apply_writes(golden, bursts)
    benches = [_bench(drive_aw, dut.wr0, bursts, None, 0.0),
               _bench(drive_w, dut.wr0, bursts, None, 0.0),
               _bench(receive_b, dut.wr0, [(0, _resp_for(b.addr)) for b in bursts], None, 0.0,
                      "write-rate")]
    _run(dut, benches, [memory.run])
    assert memory.mem == golden
    rate = 64 * MAX_BURST / (memory.w_cycles[-1] + 1)     # from cycle 0 to the last W beat
    gaps = [b - a - 1 for a, b in zip(memory.w_cycles, memory.w_cycles[1:])]
    print(f"write throughput: {rate:.3f} beats/cycle, largest gap between bursts "
          f"{max(gaps)} cycles")
    assert max(gaps) <= 0
    assert rate >= 0.95


def test_latency():
    """The stated latencies, on an idle interconnect."""
    dut = AxiInterconnect(ADDR_BITS, DATA_BYTES, 2, 1, 1, max_burst_beats=MAX_BURST)
    m, rd, wr = dut.m_axi, dut.rd0, dut.wr0

    async def cycles_until(ctx, signal):
        n = 0
        while not ctx.get(signal):
            await ctx.tick()
            n += 1
        return n

    async def bench(ctx):
        # AR: handshake in cycle 0 (m_axi.arready low), then R one beat later.
        ctx.set(rd.arvalid, 1)
        ctx.set(rd.arid, 3)
        ctx.set(rd.araddr, 0x40)
        assert ctx.get(rd.arready)
        await ctx.tick()
        ctx.set(rd.arvalid, 0)
        assert 1 + await cycles_until(ctx, m.arvalid) == dut.ar_latency
        assert (ctx.get(m.arid), ctx.get(m.araddr), ctx.get(m.arlen)) == (0, 0x40, 0)
        ctx.set(m.arready, 1)
        await ctx.tick()
        ctx.set(m.arready, 0)
        assert not ctx.get(m.arvalid)
        for name, value in (("rid", 0), ("rdata", 0x1234), ("rlast", 1), ("rresp", 2),
                            ("rvalid", 1)):
            ctx.set(getattr(m, name), value)
        assert ctx.get(m.rready)
        await ctx.tick()
        ctx.set(m.rvalid, 0)
        assert 1 + await cycles_until(ctx, rd.rvalid) == dut.r_latency
        assert (ctx.get(rd.rdata), ctx.get(rd.rresp), ctx.get(rd.rlast), ctx.get(rd.rid)) \
            == (0x1234, 2, 1, 3)
        ctx.set(rd.rready, 1)
        await ctx.tick()
        assert not ctx.get(rd.rvalid)

        # AW and a one-beat W in the same cycle; both reach m_axi together.
        for name, value in (("awvalid", 1), ("awid", 2), ("awaddr", 0x80), ("wvalid", 1),
                            ("wdata", 0x55), ("wstrb", 0xF), ("wlast", 1)):
            ctx.set(getattr(wr, name), value)
        assert ctx.get(wr.awready) and ctx.get(wr.wready)
        await ctx.tick()
        ctx.set(wr.awvalid, 0)
        ctx.set(wr.wvalid, 0)
        assert 1 + await cycles_until(ctx, m.awvalid) == dut.aw_latency
        assert ctx.get(m.wvalid)
        assert (ctx.get(m.awid), ctx.get(m.awaddr), ctx.get(m.wdata), ctx.get(m.wstrb),
                ctx.get(m.wlast)) == (0, 0x80, 0x55, 0xF, 1)
        ctx.set(m.awready, 1)
        ctx.set(m.wready, 1)
        await ctx.tick()
        assert not ctx.get(m.awvalid) and not ctx.get(m.wvalid)
        for name, value in (("bid", 0), ("bresp", 2), ("bvalid", 1)):
            ctx.set(getattr(m, name), value)
        assert ctx.get(m.bready)
        await ctx.tick()
        ctx.set(m.bvalid, 0)
        assert 1 + await cycles_until(ctx, wr.bvalid) == dut.b_latency
        assert (ctx.get(wr.bid), ctx.get(wr.bresp)) == (2, 2)

    _run(dut, [bench])


# -- parameters ----------------------------------------------------------------------------

GOOD = {"addr_bits": 32, "data_bytes": 16, "id_bits": 2, "read_masters": 3,
        "write_masters": 2, "max_burst_beats": 16}


@pytest.mark.parametrize("changes,name", [
    ({"addr_bits": 8}, "addr_bits"),
    ({"addr_bits": 32.0}, "addr_bits"),
    ({"data_bytes": 12}, "data_bytes"),
    ({"data_bytes": 256}, "data_bytes"),
    ({"id_bits": 1}, "id_bits"),
    ({"id_bits": 0, "read_masters": 1, "write_masters": 1}, "id_bits"),
    ({"read_masters": -1}, "read_masters"),
    ({"write_masters": True}, "write_masters"),
    ({"read_masters": 0, "write_masters": 0}, "read_masters, write_masters"),
    ({"max_burst_beats": 0}, "max_burst_beats"),
    ({"max_burst_beats": 257}, "max_burst_beats"),
    ({"read_buffer_beats": 15}, "read_buffer_beats"),
    ({"write_buffer_beats": 8}, "write_buffer_beats"),
    ({"max_writes_in_flight": 0}, "max_writes_in_flight"),
])
def test_bad_parameters(changes, name):
    with pytest.raises(ValueError, match=f"^{name}: .*allowed"):
        AxiInterconnect(**{**GOOD, **changes})


def test_defaults_and_ports():
    dut = AxiInterconnect(**GOOD)
    Fragment.get(dut, None)  # elaborates
    assert dut.read_buffer_beats == 32 and dut.write_buffer_beats == 16
    names = {"__".join(str(p) for p in path) for path, _, _ in dut.signature.flatten(dut)}
    assert {"rd2__arvalid", "rd0__rid", "wr1__wlast", "wr0__bid", "m_axi__awid",
            "m_axi__rready"} <= names
    assert "rd0__awvalid" not in names and "wr0__arvalid" not in names
