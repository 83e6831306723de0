"""Amaranth-simulator unit tests of the DMA engine's pieces against Python golden models.

The burst splitter is checked against :func:`ace.hw.dma.burst.split_bursts` and against the AXI
rules themselves (no 4 KiB crossing, at most ``max_burst`` beats, contiguous cover); the realigner
against :func:`ace.hw.dma.realign.realign`; the width converters against
:func:`ace.hw.dma.downsizer.downsize` and :func:`ace.hw.dma.upsizer.upsize`, whose outputs are
themselves checked against the bytes of memory that a transfer covers. Every test runs with
random idle cycles on the source and random backpressure on the sink. The whole engine is checked by ``tests/test_cocotb_dma.py``.
"""

import random

import pytest
from amaranth.hdl import Fragment, Shape
from amaranth.sim import Simulator

from ace.config import NAMED_CONFIGS
from ace.layouts import DMA_LENGTH_BITS
from ace.hw.dma.engine import DmaEngine
from ace.hw.dma.burst import BurstSplitter, split_bursts
from ace.hw.dma.downsizer import WidthDownsizer, downsize
from ace.hw.dma.reader import DmaReader
from ace.hw.dma.writer import DmaWriter
from ace.hw.dma.realign import Realigner, realign
from ace.hw.dma.upsizer import WidthUpsizer, upsize

TIMEOUT_CYCLES = 40000


def _run(dut, testbenches, vcd=None):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for tb in testbenches:
        sim.add_testbench(tb)

    async def watchdog(ctx):
        await ctx.delay(TIMEOUT_CYCLES * 1e-8)
        raise AssertionError("watchdog: simulation did not finish")
    sim.add_testbench(watchdog, background=True)
    sim.run()


async def _send(ctx, port, items, rng, idle):
    for item in items:
        while idle and rng.random() < idle:
            await ctx.tick()
        ctx.set(port.valid, 1)
        ctx.set(port.payload, item)
        await ctx.tick().until(port.ready)
        ctx.set(port.valid, 0)


async def _receive(ctx, port, count, rng, stall):
    got = []
    while len(got) < count:
        ready = not (stall and rng.random() < stall)
        ctx.set(port.ready, ready)
        _, _, valid, payload = await ctx.tick().sample(port.valid, port.payload)
        if ready and valid:
            got.append(payload)
    ctx.set(port.ready, 0)
    return got


MODES = {"plain": (0.0, 0.0), "idle": (0.4, 0.0), "backpressure": (0.0, 0.4)}


# -- burst splitter ----------------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("max_burst,beat_bytes", [(64, 16), (16, 64), (1, 16), (256, 16)])
def test_burst_splitter(mode, max_burst, beat_bytes):
    idle, stall = MODES[mode]
    rng = random.Random(f"split-{mode}-{max_burst}-{beat_bytes}")
    addr_bits, count_bits = 20, 12
    dut = BurstSplitter(addr_bits, count_bits, max_burst, 8)
    beats_per_4k = 4096 // beat_bytes
    requests = []
    for n in range(40):
        # Starts near 4 KiB boundaries and burst boundaries, lengths 1 .. several bursts.
        base = rng.randrange(1 << addr_bits - 2) // beats_per_4k * beats_per_4k
        start = (base + rng.choice([0, 1, beats_per_4k - 1, beats_per_4k - 3,
                                    rng.randrange(beats_per_4k)])) % (1 << addr_bits - 1)
        beats = rng.choice([1, 2, max_burst, max_burst + 1, rng.randrange(1, 4 * max_burst + 8)])
        requests.append((start, beats, n))
    expected = []
    for start, beats, n in requests:
        bursts = split_bursts(start, beats, max_burst)
        for k, (addr, count) in enumerate(bursts):
            expected.append((addr, count, k == len(bursts) - 1, n))
        # The golden model itself against the AXI rules.
        assert sum(c for _, c in bursts) == beats
        assert bursts[0][0] == start
        for (a, c), (a2, _) in zip(bursts, bursts[1:]):
            assert a + c == a2
        for a, c in bursts:
            assert 1 <= c <= max_burst
            assert (a * beat_bytes) // 4096 == ((a + c) * beat_bytes - 1) // 4096

    async def source(ctx):
        await _send(ctx, dut.i, [{"beat_addr": s, "span": b + s % max_burst, "meta": n}
                                 for s, b, n in requests], rng, idle)

    async def sink(ctx):
        got = await _receive(ctx, dut.o, len(expected), rng, stall)
        got = [(p.beat_addr, p.len + 1, bool(p.last), p.meta) for p in got]
        assert got == expected

    _run(dut, [source, sink])


# -- realigner ------------------------------------------------------------------------------

def _packets(rng, word_bytes, count):
    """Random packets with their parameters, as the DMA reader and writer produce them."""
    packets = []
    for _ in range(count):
        direction = rng.choice(["read", "write"])
        off = rng.choice([0, 1, word_bytes - 1, rng.randrange(word_bytes)])
        length = rng.choice([1, word_bytes - off, word_bytes, rng.randrange(1, 5 * word_bytes)])
        length = max(1, length)
        nbeats = (off + length + word_bytes - 1) // word_bytes
        nwords = (length + word_bytes - 1) // word_bytes
        if direction == "read":
            n_in = nbeats
            shift, drop, flush = (off or word_bytes), off != 0, off != 0 and nwords == nbeats
        else:
            n_in = nwords
            shift, drop, flush = word_bytes - off, False, nbeats != nwords
        words = [rng.randbytes(word_bytes) for _ in range(n_in)]
        packets.append((words, shift, drop, flush, direction, off, length))
    return packets


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("word_bytes", [4, 16])
def test_realigner(mode, word_bytes):
    idle, stall = MODES[mode]
    rng = random.Random(f"realign-{mode}-{word_bytes}")
    dut = Realigner(word_bytes, 8)
    packets = _packets(rng, word_bytes, 60)
    expected = []
    for n, (words, shift, drop, flush, direction, off, length) in enumerate(packets):
        out = realign(words, shift, drop, flush, word_bytes)
        # The golden model against the byte-level meaning of each direction.
        if direction == "read":
            memory = b"".join(words)
            payload = memory[off:off + length]
            assert b"".join(out)[:length] == payload
            assert len(out) == (length + word_bytes - 1) // word_bytes
        else:
            payload = b"".join(words)[:length]
            assert b"".join(out)[off:off + length] == payload
            assert len(out) == (off + length + word_bytes - 1) // word_bytes
        for k, word in enumerate(out):
            expected.append((int.from_bytes(word, "little"), k == 0, k == len(out) - 1, n))

    async def source(ctx):
        items = []
        for n, (words, shift, drop, flush, *_rest) in enumerate(packets):
            for k, word in enumerate(words):
                items.append({"data": int.from_bytes(word, "little"), "first": k == 0,
                              "last": k == len(words) - 1, "shift": shift,
                              "drop_first": drop, "flush": flush, "meta": n})
        await _send(ctx, dut.i, items, rng, idle)

    async def sink(ctx):
        got = await _receive(ctx, dut.o, len(expected), rng, stall)
        got = [(p.data, bool(p.first), bool(p.last), p.meta) for p in got]
        for k, (g, e) in enumerate(zip(got, expected)):
            assert g == e, f"word {k}: got {g}, expected {e}"

    _run(dut, [source, sink])


def test_realigner_full_rate():
    """Aligned packets pass at one word per cycle with the stated latency."""
    dut = Realigner(16, 0)
    words = list(range(1, 33))

    async def bench(ctx):
        ctx.set(dut.o.ready, 1)
        ctx.set(dut.i.valid, 1)
        seen = []
        for k, word in enumerate(words):
            ctx.set(dut.i.payload, {"data": word, "first": k == 0, "last": k == len(words) - 1,
                                    "shift": 16, "drop_first": 0, "flush": 0})
            assert ctx.get(dut.i.ready)
            await ctx.tick()
            if ctx.get(dut.o.valid):
                seen.append(ctx.get(dut.o.payload.data))
        ctx.set(dut.i.valid, 0)
        for _ in range(Realigner.latency):
            await ctx.tick()
            if ctx.get(dut.o.valid):
                seen.append(ctx.get(dut.o.payload.data))
        assert seen == words

    _run(dut, [bench])


# -- width converters ---------------------------------------------------------------------

def _transfers(rng, word_bytes, ratio, count):
    """Random transfers ``(mem_addr, length)`` within a beat-aligned window: every start word
    in a beat, lengths from 1 byte to several beats."""
    beat = word_bytes * ratio
    out = []
    for _ in range(count):
        start = rng.choice([0, word_bytes - 1, beat - 1, rng.randrange(beat)])
        length = rng.choice([1, word_bytes, beat - start, beat, rng.randrange(1, 5 * beat)])
        out.append((start, max(1, length)))
    return out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ratio", [2, 4])
def test_downsizer(mode, ratio):
    idle, stall = MODES[mode]
    seed = f"downsize-{mode}-{ratio}"
    rng = random.Random(seed)
    W = 4
    M = W * ratio
    dut = WidthDownsizer(W, ratio, 8)
    beats, expected = [], []
    for n, (start, length) in enumerate(_transfers(rng, W, ratio, 50)):
        end = start + length - 1
        nbeats = end // M + 1
        memory = rng.randbytes(nbeats * M)
        packet = [(memory[b * M:(b + 1) * M], b == 0, b == nbeats - 1,
                   start % M // W if b == 0 else 0,
                   end % M // W if b == nbeats - 1 else ratio - 1) for b in range(nbeats)]
        words = downsize(packet, W)
        # The golden model against the bytes: the words covering [start, end], in order.
        assert b"".join(w for w, _, _ in words) == memory[start // W * W:(end // W + 1) * W]
        assert [f for _, f, _ in words] == [True] + [False] * (len(words) - 1)
        assert [l for _, _, l in words] == [False] * (len(words) - 1) + [True]
        beats += [(b, n) for b in packet]
        expected += [(int.from_bytes(w, "little"), f, l, n) for w, f, l in words]

    async def source(ctx):
        await _send(ctx, dut.i, [{"data": int.from_bytes(d, "little"), "first": f, "last": l,
                                  "lo": lo, "hi": hi, "meta": n}
                                 for (d, f, l, lo, hi), n in beats], rng, idle)

    async def sink(ctx):
        got = await _receive(ctx, dut.o, len(expected), rng, stall)
        got = [(p.data, bool(p.first), bool(p.last), p.meta) for p in got]
        for k, (g, e) in enumerate(zip(got, expected)):
            assert g == e, f"seed {seed!r}: word {k}: got {g}, expected {e}"

    _run(dut, [source, sink])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ratio", [2, 4])
def test_upsizer(mode, ratio):
    idle, stall = MODES[mode]
    seed = f"upsize-{mode}-{ratio}"
    rng = random.Random(seed)
    W = 4
    M = W * ratio
    dut = WidthUpsizer(W, ratio, 8)
    packets, expected = [], []
    for n, (start, length) in enumerate(_transfers(rng, W, ratio, 50)):
        end = start + length - 1
        words = [rng.randbytes(W) for _ in range(end // W - start // W + 1)]
        beats = upsize([(words, start % M // W)], ratio)
        # The golden model against the bytes: lane by lane, the words at their addresses.
        assert len(beats) == end // M - start // M + 1
        flat = b"".join(b"".join(lane or bytes(W) for lane in lanes) for lanes, _, _ in beats)
        first_lane = start // W - start // M * ratio
        assert flat[first_lane * W:first_lane * W + len(words) * W] == b"".join(words)
        packets.append((words, start % M // W, n))
        expected += [(lanes, f, l, n) for lanes, f, l in beats]

    async def source(ctx):
        items = [{"data": int.from_bytes(w, "little"), "first": k == 0,
                  "last": k == len(words) - 1, "lo": lo, "meta": n}
                 for words, lo, n in packets for k, w in enumerate(words)]
        await _send(ctx, dut.i, items, rng, idle)

    async def sink(ctx):
        got = await _receive(ctx, dut.o, len(expected), rng, stall)
        for k, (p, (lanes, first, last, n)) in enumerate(zip(got, expected)):
            data = p.data.to_bytes(M, "little")
            for lane, word in enumerate(lanes):
                if word is not None:
                    assert data[lane * W:(lane + 1) * W] == word, \
                        f"seed {seed!r}: beat {k} lane {lane}"
            assert (bool(p.first), bool(p.last), p.meta) == (first, last, n), \
                f"seed {seed!r}: beat {k}: {(p.first, p.last, p.meta)}, expected {(first, last, n)}"

    _run(dut, [source, sink])


@pytest.mark.parametrize("ratio", [2, 4])
def test_converters_full_rate(ratio):
    """One word per cycle through each converter with no pauses: a long aligned transfer of
    beats in, words out (downsizer), and words in, beats out (upsizer), at the stated
    latency."""
    W, nbeats = 4, 16
    for dut in (WidthDownsizer(W, ratio), WidthUpsizer(W, ratio)):
        down = isinstance(dut, WidthDownsizer)
        items = nbeats if down else nbeats * ratio
        outs = nbeats * ratio if down else nbeats
        cycles = {}

        async def bench(ctx, dut=dut, down=down, items=items, outs=outs, cycles=cycles):
            ctx.set(dut.o.ready, 1)
            sent = got = cycle = 0
            while got < outs:
                ctx.set(dut.i.valid, sent < items)
                if sent < items:
                    if down:
                        ctx.set(dut.i.payload, {"data": sent, "first": sent == 0,
                                                "last": sent == items - 1, "lo": 0,
                                                "hi": ratio - 1})
                    else:
                        ctx.set(dut.i.payload, {"data": sent, "first": sent == 0,
                                                "last": sent == items - 1, "lo": 0})
                _, _, ready, valid = await ctx.tick().sample(dut.i.ready, dut.o.valid)
                cycle += 1
                if sent < items and ready:
                    cycles.setdefault("first_in", cycle)
                    sent += 1
                if valid:
                    cycles.setdefault("first_out", cycle)
                    got += 1
            cycles["last_out"] = cycle

        _run(dut, [bench])
        assert cycles["last_out"] - cycles["first_out"] == outs - 1 if down else \
            cycles["last_out"] - cycles["first_out"] == (outs - 1) * ratio, (type(dut), cycles)
        first_beat_in = cycles["first_in"] + (0 if down else ratio - 1)
        assert cycles["first_out"] - first_beat_in == dut.latency, (type(dut), cycles)


def test_engine_ports():
    """The top's flattened port names are those cocotbext-axi binds."""
    dut = DmaEngine(NAMED_CONFIGS["small"])
    Fragment.get(dut, None)  # elaborates
    names = {"__".join(str(p) for p in path) for path, _, _ in dut.signature.flatten(dut)}
    for channel in ("aw", "ar"):
        for sig in ("id", "addr", "len", "size", "burst", "lock", "cache", "prot", "valid",
                    "ready"):
            assert f"m_axi__{channel}{sig}" in names
    for sig in ("wdata", "wstrb", "wlast", "wvalid", "wready", "bid", "bresp", "bvalid",
                "bready", "rid", "rdata", "rresp", "rlast", "rvalid", "rready"):
        assert f"m_axi__{sig}" in names
    assert Shape.cast(dut.desc.payload.shape()).width > 0


@pytest.mark.parametrize("ratio", [1, 2, 4])
def test_engine_port_widths(ratio):
    """The memory port is ``mem_bytes`` wide; the SRAM and stream ports ``link_bytes``."""
    small = NAMED_CONFIGS["small"]
    dut = DmaEngine(small.replace(mem_bytes=ratio * small.link_bytes))
    W = small.link_bytes
    assert len(dut.m_axi.rdata) == len(dut.m_axi.wdata) == 8 * W * ratio
    assert len(dut.m_axi.wstrb) == W * ratio
    assert len(dut.sram_w.payload.data) == len(dut.sram_r.resp.payload) == 8 * W
    assert len(dut.rd_stream.tdata) == len(dut.wr_stream.tdata) == 8 * W
    Fragment.get(dut, None)  # elaborates at this width


@pytest.mark.parametrize("side", ["read", "write"])
@pytest.mark.parametrize("ratio", [1, 2, 4])
def test_longest_descriptor_bursts(ratio, side):
    """A descriptor of the largest length, 2**24 - 1 bytes, from an unaligned address: the AR
    (reader) or AW (writer) bursts cover exactly its memory beats, as :func:`split_bursts`
    says, none crossing 4 KiB. Checks the widths of every length and beat count (the data of
    16 MiB is not moved: R beats and B responses are answered early, one per burst)."""
    small = NAMED_CONFIGS["small"]
    M = ratio * small.link_bytes
    cfg = small.replace(mem_bytes=M, max_burst_beats=4096 // M, max_reads_in_flight=8)
    length = (1 << DMA_LENGTH_BITS) - 1
    mem_addr = 0x0123_4567 + M // 2 + 1
    first, last = mem_addr // M, (mem_addr + length - 1) // M
    expected = split_bursts(first, last - first + 1, cfg.max_burst_beats)
    assert sum(n for _, n in expected) == last - first + 1 and len(expected) > 4000
    dut = DmaReader(cfg) if side == "read" else DmaWriter(cfg)
    a = "ar" if side == "read" else "aw"
    axi = dut.axi

    async def bench(ctx):
        ctx.set(dut.cmd.payload, {"stream": 1, "id": 5, "length": length, "mem_addr": mem_addr})
        ctx.set(dut.cmd.valid, 1)
        await ctx.tick().until(dut.cmd.ready)
        ctx.set(dut.cmd.valid, 0)
        ctx.set(getattr(axi, f"{a}ready"), 1)
        if side == "read":      # one R beat per burst, so bursts never wait on the budget
            ctx.set(axi.rlast, 1)
            ctx.set(dut.rd_stream.tready, 1)
        else:                   # B responses as fast as bursts go out
            ctx.set(axi.bvalid, 1)
            ctx.set(dut.cpl.ready, 1)
        got = []
        owed = 0                # read bursts without their (single) R beat yet
        while len(got) < len(expected):
            _, _, valid, addr, alen, r_taken = await ctx.tick().sample(
                getattr(axi, f"{a}valid"), getattr(axi, f"{a}addr"), getattr(axi, f"{a}len"),
                axi.rvalid & axi.rready if side == "read" else axi.bvalid)
            if valid:
                assert addr % M == 0 and addr // 4096 == (addr + (alen + 1) * M - 1) // 4096
                got.append((addr // M, alen + 1))
            if side == "read":
                owed += valid - r_taken
                ctx.set(axi.rvalid, owed > 0)
        assert got == expected

    _run(dut, [bench])
