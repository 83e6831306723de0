"""Amaranth-simulator tests of the harness's main-memory model (sim_harness/memory.py).

A Python AXI4 master drives the model with one testbench per channel; a ``bytearray`` is the
scoreboard. Bandwidth, background share and latency are measured on the R/B timing and checked
against the configured values; error responses must never hang.
"""

import random

import pytest
from amaranth.back import verilog

from ace.hw.axi.signatures import AxiBurst, AxiResp
from sim_harness.link import bytes_per_cycle_q8, share_q16
from sim_harness.memory import MemoryModel
from testbench.amaranth_sim import run_with_watchdog

TIMEOUT_CYCLES = 20000


def _run(dut, testbenches, timeout=TIMEOUT_CYCLES):
    run_with_watchdog(dut, testbenches, timeout)


class Clock:
    """Counts the cycles of one testbench. Every testbench starts at time 0 and only awaits
    clock edges, so all of them agree on the cycle number."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.cycle = 0

    async def tick(self, *signals):
        """Wait one edge; return the values ``signals`` had during the cycle that ended,
        whose number is then ``self.cycle - 1``."""
        sampled = await self.ctx.tick().sample(*signals)
        self.cycle += 1
        return sampled[2:]

    async def until(self, flag):
        while not flag():
            await self.tick()


def _beat_lanes(addr, size, n, db):
    """(word, first lane, end lane) of beat ``n`` of an INCR burst, by the AXI address rules."""
    step = 1 << size
    beat_addr = addr if n == 0 else (addr // step) * step + n * step
    lane = beat_addr % db
    return beat_addr // db, lane, (beat_addr // step * step) % db + step


class AxiMaster:
    """One testbench per AXI channel. Bursts are ``(id, addr, len, size, burst)``."""

    def __init__(self, dut, rng, idle=0.0, stall=0.0):
        self.dut = dut
        self.axi = dut.s_axi
        self.db = dut.data_bytes
        self.rng = rng
        self.idle = idle
        self.stall = stall
        self.ar_queue, self.aw_queue = [], []
        self.ar_log, self.aw_log, self.r_log, self.w_log, self.b_log = [], [], [], [], []

    async def _pause(self, clock):
        while self.idle and self.rng.random() < self.idle:
            await clock.tick()

    async def _request(self, clock, prefix, burst):
        axi = self.axi
        ident, addr, length, size, kind = burst
        for name, value in (("id", ident), ("addr", addr), ("len", length), ("size", size),
                            ("burst", kind), ("valid", 1)):
            clock.ctx.set(getattr(axi, prefix + name), value)
        while True:
            (ready,) = await clock.tick(getattr(axi, prefix + "ready"))
            if ready:
                break
        clock.ctx.set(getattr(axi, prefix + "valid"), 0)
        return clock.cycle - 1

    async def ar(self, clock, bursts):
        """Issue read bursts; log ``(cycle, burst)`` of each handshake."""
        for burst in bursts:
            await self._pause(clock)
            self.ar_log.append((await self._request(clock, "ar", burst), burst))

    async def aw(self, clock, bursts):
        for burst in bursts:
            await self._pause(clock)
            self.aw_log.append((await self._request(clock, "aw", burst), burst))

    async def w(self, clock, beats):
        """Send W beats ``(data, strb, last)``; log ``(cycle, beat)`` of each handshake."""
        axi = self.axi
        for beat in beats:
            await self._pause(clock)
            data, strb, last = beat
            clock.ctx.set(axi.wdata, data)
            clock.ctx.set(axi.wstrb, strb)
            clock.ctx.set(axi.wlast, last)
            clock.ctx.set(axi.wvalid, 1)
            while True:
                (ready,) = await clock.tick(axi.wready)
                if ready:
                    break
            clock.ctx.set(axi.wvalid, 0)
            self.w_log.append((clock.cycle - 1, beat))

    async def r(self, clock, beats):
        """Receive ``beats`` R beats; log ``(cycle, id, data, resp, last)``."""
        axi = self.axi
        while len(self.r_log) < beats:
            ready = not (self.stall and self.rng.random() < self.stall)
            clock.ctx.set(axi.rready, ready)
            valid, *fields = await clock.tick(axi.rvalid, axi.rid, axi.rdata, axi.rresp,
                                              axi.rlast)
            if valid and ready:
                self.r_log.append((clock.cycle - 1, *fields))
        clock.ctx.set(axi.rready, 0)

    async def b(self, clock, count):
        axi = self.axi
        while len(self.b_log) < count:
            ready = not (self.stall and self.rng.random() < self.stall)
            clock.ctx.set(axi.bready, ready)
            valid, ident, resp = await clock.tick(axi.bvalid, axi.bid, axi.bresp)
            if valid and ready:
                self.b_log.append((clock.cycle - 1, ident, resp))
        clock.ctx.set(axi.bready, 0)


def _model(**kwargs):
    args = {"size_bytes": 4096, "data_bytes": 16, "addr_bits": 16, "id_bits": 4}
    args.update(kwargs)
    return MemoryModel(**args)


# -- functional: random traffic against a bytearray --------------------------------------------

@pytest.mark.parametrize("mode", ["plain", "pauses"])
def test_random_traffic(mode):
    """Backdoor load; concurrent AXI reads (lower half) and writes (upper half) with bursts,
    unaligned starts, narrow sizes, strobes; then AXI reads and backdoor reads of everything."""
    rng = random.Random(f"mem-random-{mode}")
    if mode == "plain":
        dut, idle, stall = _model(latency=5), 0.0, 0.0
    else:
        dut, idle, stall = _model(latency=11, bytes_per_cycle=12.5, background_share=0.25), \
            0.3, 0.3
    db, size = dut.data_bytes, dut.size_bytes
    half = size // 2
    memory = bytearray(rng.randbytes(size))
    master = AxiMaster(dut, rng, idle, stall)
    state = {"loaded": False, "written": False, "reads": 0}

    def bursts(base, count):
        out = []
        for _ in range(count):
            burst_size = rng.choice([4, 4, 4, 0, 1, 2, 3])
            length = rng.choice([0, 1, 3, 7, 15, rng.randrange(16)])
            span = (length + 1) << burst_size
            start = base + rng.randrange(half - span - db)
            out.append((rng.randrange(16), start, length, burst_size, AxiBurst.INCR.value))
        return out

    phase_a = bursts(0, 30)
    phase_b = bursts(half, 30) + [(1, half, half // db - 1, 4, AxiBurst.INCR.value)]
    writes = bursts(half, 30)
    expected_read_bytes = sum((b[2] + 1) << b[3] for b in phase_a + phase_b)
    total_read_beats = sum(b[2] + 1 for b in phase_a + phase_b)
    w_beats = []
    for _, addr, length, burst_size, _ in writes:
        for n in range(length + 1):
            _word, lane, end = _beat_lanes(addr, burst_size, n, db)
            strb = sum(1 << k for k in range(lane, end) if rng.random() < 0.8)
            w_beats.append((int.from_bytes(rng.randbytes(db), "little"), strb, n == length))
    expected_write_bytes = sum(strb.bit_count() for _, strb, _ in w_beats)

    async def backdoor(ctx):
        clock = Clock(ctx)
        for word in range(size // db):
            ctx.set(dut.bd_addr, word)
            ctx.set(dut.bd_wdata, int.from_bytes(memory[word * db:(word + 1) * db], "little"))
            ctx.set(dut.bd_we, 1)
            await clock.tick()
        ctx.set(dut.bd_we, 0)
        state["loaded"] = True
        await clock.until(lambda: state["written"])
        for word in range(size // db):
            ctx.set(dut.bd_addr, word)
            await clock.tick()
            got = ctx.get(dut.bd_rdata)   # registered: the word addressed before the edge
            assert got == int.from_bytes(memory[word * db:(word + 1) * db], "little"), \
                f"backdoor word {word}"
        await clock.until(lambda: len(master.r_log) == total_read_beats)
        assert ctx.get(dut.read_bytes) == expected_read_bytes
        assert ctx.get(dut.write_bytes) == expected_write_bytes

    async def ar(ctx):
        clock = Clock(ctx)
        await clock.until(lambda: state["loaded"])
        await master.ar(clock, phase_a)
        await clock.until(lambda: state["written"])
        await master.ar(clock, phase_b)

    async def r(ctx):
        await master.r(Clock(ctx), total_read_beats)
        k = 0
        for _, (ident, addr, length, burst_size, _) in master.ar_log:
            for n in range(length + 1):
                _, rid, rdata, rresp, rlast = master.r_log[k]
                word = _beat_lanes(addr, burst_size, n, db)[0]
                assert (rid, rresp, rlast) == (ident, AxiResp.OKAY.value, n == length), k
                assert rdata == int.from_bytes(memory[word * db:(word + 1) * db], "little"), \
                    f"read beat {k}: burst at 0x{addr:x} beat {n}"
                k += 1

    async def aw(ctx):
        clock = Clock(ctx)
        await clock.until(lambda: state["loaded"])
        await master.aw(clock, writes)

    async def w(ctx):
        clock = Clock(ctx)
        await clock.until(lambda: state["loaded"])
        await master.w(clock, w_beats)

    async def b(ctx):
        clock = Clock(ctx)
        await master.b(clock, len(writes))
        assert [(i, r) for _, i, r in master.b_log] == [(wb[0], 0) for wb in writes]
        # Apply the writes to the scoreboard in order; the upper half is read only from now on.
        k = 0
        for _, addr, length, burst_size, _ in writes:
            for n in range(length + 1):
                word = _beat_lanes(addr, burst_size, n, db)[0]
                data, strb, _ = w_beats[k]
                for lane in range(db):
                    if strb >> lane & 1:
                        memory[word * db + lane] = data >> 8 * lane & 0xFF
                k += 1
        state["written"] = True

    _run(dut, [backdoor, ar, r, aw, w, b], timeout=30000)


# -- bandwidth and background share -------------------------------------------------------------

def _stream(direction, beats, burst_beats, db):
    count = beats // burst_beats
    return [(n % 16, n * burst_beats * db, burst_beats - 1, (db - 1).bit_length(),
             AxiBurst.INCR.value) for n in range(count)]


def _rate(times, db, skip):
    """Bytes per cycle between beat ``skip`` and the last beat."""
    return (len(times) - 1 - skip) * db / (times[-1] - times[skip])


@pytest.mark.parametrize("bpc,share,directions", [
    (8, 0.0, "r"), (12.5, 0.0, "r"), (16, 0.0, "r"), (12.5, 0.0, "w"),
    (16, 0.5, "r"), (32, 0.0, "rw"), (16, 0.0, "rw"), (32, 0.5, "rw"),
])
def test_bandwidth(bpc, share, directions):
    """Long streams run at the configured bytes per cycle, less the background share."""
    db, beats = 16, 384
    dut = _model(size_bytes=1 << 14, latency=20)
    master = AxiMaster(dut, random.Random(0))
    expected = min(bpc * (1 - share), db * len(directions))
    stream = _stream(directions, beats, 16, db)
    results = {}

    async def config(ctx):
        # Runtime configuration ports, as a system top drives them.
        ctx.set(dut.cfg_bytes_per_cycle_q8, bytes_per_cycle_q8(bpc))
        ctx.set(dut.cfg_background_q16, share_q16(share))

    async def ar(ctx):
        if "r" in directions:
            await master.ar(Clock(ctx), stream)

    async def r(ctx):
        if "r" in directions:
            clock = Clock(ctx)
            await master.r(clock, beats)
            results["r"] = [c for c, *_ in master.r_log]
            results["busy"] = ctx.get(dut.busy_cycles)
            results["cycle"] = clock.cycle

    async def aw(ctx):
        if "w" in directions:
            await master.aw(Clock(ctx), stream)

    async def w(ctx):
        if "w" in directions:
            await master.w(Clock(ctx), [(n, 0xFFFF, n % 16 == 15) for n in range(beats)])
            results["w"] = [c for c, _ in master.w_log]

    async def b(ctx):
        if "w" in directions:
            await master.b(Clock(ctx), len(stream))
            assert all(resp == 0 for _, _, resp in master.b_log)

    async def background(ctx):
        clock = Clock(ctx)
        for _ in range(200):
            await clock.tick()
        expected_bg = 200 * (bytes_per_cycle_q8(bpc) * share_q16(share) >> 16) >> 8
        assert ctx.get(dut.background_bytes) == expected_bg

    _run(dut, [config, ar, r, aw, w, b, background])
    skip = 32
    if directions == "rw":
        start = max(results["r"][skip], results["w"][skip])
        end = min(results["r"][-1], results["w"][-1])
        moved = {key: sum(start < t <= end for t in results[key]) for key in "rw"}
        measured = (moved["r"] + moved["w"]) * db / (end - start)
        assert abs(moved["r"] - moved["w"]) <= 2   # reads and writes share fairly
    else:
        measured = _rate(results[directions], db, skip)
    print(f"bandwidth {bpc} B/cycle, share {share}, {directions}: measured {measured:.3f}, "
          f"expected {expected:.3f}")
    assert abs(measured - expected) <= 0.02 * expected
    if directions == "r":
        assert results["busy"] == beats   # one read beat issued per busy cycle


# -- latency ------------------------------------------------------------------------------------

@pytest.mark.parametrize("latency", [2, 5, 37])
def test_latency(latency):
    """AR to first R beat, and last W beat to B, take exactly the configured cycles; bursts
    issued back to back keep that latency each, at one beat per cycle."""
    dut = _model(latency=latency)
    master = AxiMaster(dut, random.Random(1))
    size4 = AxiBurst.INCR.value
    spaced = [(1, 0x100, 0, 4, size4), (2, 0x200, 3, 4, size4)]
    back_to_back = [(n, 0x400 + 16 * n, 0, 4, size4) for n in range(8)]
    writes = [(3, 0x300, 0, 4, size4), (4, 0x340, 2, 4, size4)]
    done = {}

    async def ar(ctx):
        clock = Clock(ctx)
        for burst in spaced:
            await master.ar(clock, [burst])
            for _ in range(latency + 8):
                await clock.tick()
        await master.ar(clock, back_to_back)
        await clock.until(lambda: "r" in done)
        # A runtime change of cfg_latency while idle applies to the next request.
        ctx.set(dut.cfg_latency, latency + 3)
        await clock.tick()
        await master.ar(clock, [(5, 0x100, 0, 4, size4)])

    async def r(ctx):
        clock = Clock(ctx)
        total = 4 + 1 + 8
        await master.r(clock, total)
        done["r"] = True
        await master.r(clock, total + 1)
        firsts, k = [], 0
        for _, (_, _, length, _, _) in master.ar_log:
            firsts.append(master.r_log[k][0])
            k += length + 1
        lats = [f - a for f, (a, _) in zip(firsts, master.ar_log)]
        assert lats == [latency] * 10 + [latency + 3]
        beats = [c for c, *_ in master.r_log]
        assert beats[1:5] == [beats[1] + n for n in range(4)]       # burst at full rate
        assert beats[5:13] == [beats[5] + n for n in range(8)]      # pipelined bursts

    async def aw(ctx):
        clock = Clock(ctx)
        for burst in writes:
            await master.aw(clock, [burst])
            for _ in range(latency + 8):
                await clock.tick()

    async def w(ctx):
        clock = Clock(ctx)
        await master.w(clock, [(1, 0xFFFF, 1)])
        for _ in range(latency + 8):
            await clock.tick()
        await master.w(clock, [(2, 0xFFFF, 0), (3, 0xFFFF, 0), (4, 0xFFFF, 1)])

    async def b(ctx):
        await master.b(Clock(ctx), 2)
        lasts = [master.w_log[0][0], master.w_log[3][0]]
        assert [c - last for (c, _, _), last in zip(master.b_log, lasts)] == [latency] * 2

    _run(dut, [ar, r, aw, w, b])


# -- errors -------------------------------------------------------------------------------------

def test_errors_do_not_hang():
    """Beats beyond size_bytes answer DECERR, FIXED/WRAP bursts and over-wide sizes SLVERR;
    every burst still gets all its beats (rlast) and its B; normal traffic continues."""
    dut = _model(size_bytes=1024, latency=3)
    master = AxiMaster(dut, random.Random(2))
    incr, fixed, wrap = (b.value for b in (AxiBurst.INCR, AxiBurst.FIXED, AxiBurst.WRAP))
    okay, slverr, decerr = (r.value for r in (AxiResp.OKAY, AxiResp.SLVERR, AxiResp.DECERR))
    reads = [
        ((1, 2048, 3, 4, incr), [decerr] * 4),
        ((2, 1024 - 32, 3, 4, incr), [okay, okay, decerr, decerr]),
        ((3, 0x40, 3, 4, wrap), [slverr] * 4),
        ((4, 0x40, 1, 4, fixed), [slverr] * 2),
        ((5, 0x40, 0, 5, incr), [slverr]),
        ((6, 0xFFE0, 1, 4, incr), [decerr] * 2),
        ((7, 0x10, 1, 4, incr), [okay] * 2),
    ]
    writes = [
        ((1, 4096, 1, 4, incr), decerr),
        ((2, 1024 - 16, 1, 4, incr), decerr),   # first beat lands, second is beyond the end
        ((3, 0x80, 1, 4, fixed), slverr),
        ((4, 0x90, 0, 4, incr), okay),
    ]
    w_beats = []
    for (_, _, length, _, _), _ in writes:
        w_beats += [(0xA5 * (n + 1), 0xFFFF, n == length) for n in range(length + 1)]

    async def ar(ctx):
        await master.ar(Clock(ctx), [burst for burst, _ in reads])

    async def r(ctx):
        await master.r(Clock(ctx), sum(len(resps) for _, resps in reads))
        k = 0
        for (ident, _, _, _, _), resps in reads:
            for n, resp in enumerate(resps):
                _, rid, rdata, rresp, rlast = master.r_log[k]
                assert (rid, rresp, rlast) == (ident, resp, n == len(resps) - 1)
                if resp != okay:
                    assert rdata == 0
                k += 1

    async def aw(ctx):
        await master.aw(Clock(ctx), [burst for burst, _ in writes])

    async def w(ctx):
        await master.w(Clock(ctx), w_beats)

    async def b(ctx):
        clock = Clock(ctx)
        await master.b(clock, len(writes))
        assert [(i, r) for _, i, r in master.b_log] == [(b[0], r) for b, r in writes]
        for word, value in ((1024 // 16 - 1, 0xA5), (0x80 // 16, 0), (0x90 // 16, 0xA5)):
            ctx.set(dut.bd_addr, word)
            await clock.tick()
            assert ctx.get(dut.bd_rdata) == value
        # Only the in-range OKAY beats count: 16 bytes at 1024 - 16 and 16 at 0x90.
        assert ctx.get(dut.write_bytes) == 32

    _run(dut, [ar, r, aw, w, b])


# -- parameters and Verilog ------------------------------------------------------------------

@pytest.mark.parametrize("kwargs,name", [
    ({"data_bytes": 12}, "data_bytes"),
    ({"size_bytes": 4100}, "size_bytes"),
    ({"size_bytes": 1 << 17}, "size_bytes"),
    ({"addr_bits": 0}, "addr_bits"),
    ({"id_bits": 0}, "id_bits"),
    ({"latency": 1}, "latency"),
    ({"latency": 100, "max_latency": 50}, "max_latency"),
    ({"bytes_per_cycle": 0}, "bytes_per_cycle"),
    ({"bytes_per_cycle": 33}, "bytes_per_cycle"),
    ({"background_share": 1.0}, "background_share"),
])
def test_bad_parameters(kwargs, name):
    with pytest.raises(ValueError, match=f"^{name}: .*allowed"):
        _model(**kwargs)


def test_defaults_and_verilog():
    dut = _model(latency=100)
    assert dut.queue_depth >= 102
    assert dut.bytes_per_cycle == 32
    assert dut.cfg_bytes_per_cycle_q8.init == 32 * 256
    text = verilog.convert(dut, name="memory_model")
    for port in ("s_axi__arvalid", "s_axi__wstrb", "cfg_bytes_per_cycle_q8",
                 "cfg_background_q16", "cfg_latency", "read_bytes", "bd_rdata"):
        assert port in text
