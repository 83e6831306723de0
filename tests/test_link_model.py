"""Amaranth-simulator tests of the harness's link model (sim_harness/link.py).

One testbench drives ``i``, one receives ``o``; both log the cycle of every transfer, so
latency and rates are measured exactly and checked against the configuration.
"""

import random

import pytest
from amaranth.back import verilog

from sim_harness.link import LinkModel, RamFifo, bytes_per_cycle_q8
from testbench.amaranth_sim import run_with_watchdog

TIMEOUT_CYCLES = 20000


def _run(dut, testbenches, timeout=TIMEOUT_CYCLES):
    run_with_watchdog(dut, testbenches, timeout)


def _beats(rng, count, db):
    """Random beats ``(tdata, tkeep, tlast)``: packets of 1..8 beats, partial last beats."""
    beats = []
    while len(beats) < count:
        length = rng.randrange(1, 9)
        for n in range(length):
            last = n == length - 1
            keep = (1 << rng.randrange(1, db + 1)) - 1 if last else (1 << db) - 1
            beats.append((int.from_bytes(rng.randbytes(db), "little"), keep, last))
    return beats[:count]


class Harness:
    """Source and sink testbenches; ``sent``/``got`` log ``(cycle, beat)`` of each transfer,
    ``stalls`` counts cycles with ``tvalid & ~tready`` at the input."""

    def __init__(self, dut, beats, rng, idle=0.0, stall=0.0, idle_beats=None):
        self.dut, self.beats, self.rng = dut, beats, rng
        self.idle, self.stall = idle, stall
        self.idle_beats = len(beats) if idle_beats is None else idle_beats
        self.sent, self.got, self.stalls = [], [], 0
        self.counters = {}

    async def source(self, ctx):
        i, cycle = self.dut.i, 0
        for n, beat in enumerate(self.beats):
            while n < self.idle_beats and self.idle and self.rng.random() < self.idle:
                await ctx.tick()
                cycle += 1
            for name, value in zip(("tdata", "tkeep", "tlast"), beat):
                ctx.set(getattr(i, name), value)
            ctx.set(i.tvalid, 1)
            while True:
                _, _, ready = await ctx.tick().sample(i.tready)
                cycle += 1
                if ready:
                    break
                self.stalls += 1
            ctx.set(i.tvalid, 0)
            self.sent.append((cycle - 1, beat))

    async def sink(self, ctx):
        o, cycle = self.dut.o, 0
        while len(self.got) < len(self.beats):
            ready = not (self.stall and self.rng.random() < self.stall)
            ctx.set(o.tready, ready)
            _, _, valid, *beat = await ctx.tick().sample(o.tvalid, o.tdata, o.tkeep, o.tlast)
            cycle += 1
            if valid and ready:
                self.got.append((cycle - 1, tuple(beat)))
        ctx.set(o.tready, 0)
        for _ in range(2):
            await ctx.tick()
        for name in ("busy_cycles", "beats", "bytes", "stall_cycles"):
            self.counters[name] = ctx.get(getattr(self.dut, name))

    def check(self):
        assert [b for _, b in self.got] == list(self.beats), "beats lost, reordered or changed"
        assert self.counters == {
            "busy_cycles": len(self.beats), "beats": len(self.beats),
            "bytes": sum(keep.bit_count() for _, keep, _ in self.beats),
            "stall_cycles": self.stalls,
        }


@pytest.mark.parametrize("latency", [1, 7, 100])
def test_exact_latency(latency):
    """Every beat leaves exactly ``latency`` cycles after it entered, with idle gaps and at
    full rate; the full-rate part passes one beat per cycle without a stall."""
    rng = random.Random(f"link-latency-{latency}")
    dut = LinkModel(data_bytes=16, latency=latency)
    h = Harness(dut, _beats(rng, 150, 16), rng, idle=0.5, idle_beats=50)
    _run(dut, [h.source, h.sink])
    h.check()
    assert [g - s for (g, _), (s, _) in zip(h.got, h.sent)] == [latency] * len(h.sent)
    cycles = [c for c, _ in h.sent[50:]]
    assert cycles == list(range(cycles[0], cycles[0] + len(cycles)))   # 1 beat per cycle
    assert h.stalls == 0


@pytest.mark.parametrize("bpc", [8, 12.5, 15])
def test_throttled_rate(bpc):
    """A continuous source passes at the configured bytes per cycle (within 2 %)."""
    rng = random.Random(f"link-rate-{bpc}")
    dut = LinkModel(data_bytes=16, latency=5, max_latency=40)
    h = Harness(dut, _beats(rng, 400, 16), rng)

    async def config(ctx):
        ctx.set(dut.cfg_bytes_per_cycle_q8, bytes_per_cycle_q8(bpc))
        ctx.set(dut.cfg_latency, 40)

    _run(dut, [config, h.source, h.sink])
    h.check()
    skip = 20
    times = [c for c, _ in h.sent]
    measured = (len(times) - 1 - skip) * 16 / (times[-1] - times[skip])
    print(f"link rate {bpc} B/cycle: measured {measured:.3f}")
    assert abs(measured - bpc) <= 0.02 * bpc
    assert h.stalls > 0
    # Unstalled by the sink, each beat still leaves exactly cfg_latency after it entered.
    assert all(g - s == 40 for (g, _), (s, _) in zip(h.got, h.sent))


def test_backpressure():
    """With a stalling sink the buffer fills and the input stalls; nothing is lost."""
    rng = random.Random("link-backpressure")
    dut = LinkModel(data_bytes=8, latency=3)
    h = Harness(dut, _beats(rng, 300, 8), rng, idle=0.1, stall=0.7)
    _run(dut, [h.source, h.sink])
    h.check()
    assert h.stalls > 0
    assert all(g - s >= 3 for (g, _), (s, _) in zip(h.got, h.sent))


def test_ram_fifo():
    """The buffer on its own: random writes and reads, contents and order kept, one cycle
    from write to output."""
    rng = random.Random("ram-fifo")
    dut = RamFifo(12, 4)
    values = [rng.randrange(1 << 12) for _ in range(300)]

    async def writer(ctx):
        for value in values:
            while rng.random() < 0.3:
                await ctx.tick()
            ctx.set(dut.w_data, value)
            ctx.set(dut.w_en, 1)
            await ctx.tick().until(dut.w_rdy)
            ctx.set(dut.w_en, 0)

    async def reader(ctx):
        got = []
        while len(got) < len(values):
            take = rng.random() < 0.6
            ctx.set(dut.r_en, take)
            _, _, rdy, data, level = await ctx.tick().sample(dut.r_rdy, dut.r_data, dut.level)
            assert level <= 4
            if rdy and take:
                got.append(data)
        assert got == values

    _run(dut, [writer, reader])


@pytest.mark.parametrize("kwargs,name", [
    ({"data_bytes": 0, "latency": 1}, "data_bytes"),
    ({"data_bytes": 16, "latency": 0}, "latency"),
    ({"data_bytes": 16, "latency": 10, "max_latency": 5}, "max_latency"),
    ({"data_bytes": 16, "latency": 1, "max_latency": 1 << 17}, "max_latency"),
    ({"data_bytes": 16, "latency": 1, "bytes_per_cycle": 17}, "bytes_per_cycle"),
    ({"data_bytes": 16, "latency": 1, "bytes_per_cycle": 0}, "bytes_per_cycle"),
])
def test_bad_parameters(kwargs, name):
    with pytest.raises(ValueError, match=f"^{name}: .*allowed"):
        LinkModel(**kwargs)


def test_verilog():
    dut = LinkModel(data_bytes=64, latency=1000)
    assert dut.depth == 1024
    assert dut.cfg_bytes_per_cycle_q8.init == 64 * 256
    text = verilog.convert(dut, name="link_model")
    for port in ("i__tkeep", "o__tlast", "cfg_latency", "cfg_bytes_per_cycle_q8",
                 "stall_cycles", "busy_cycles"):
        assert port in text


@pytest.mark.parametrize("topology", ["ring:2", "ring:8", "torus:4x2", "torus:2x2x2",
                                      "fully_connected:4"])
def test_system_links_are_bidirectional(topology):
    """Every wired direction has its reverse (the receiver returns credits on it), and every
    link a neighbour sends or receives on is wired: in a dimension of size 2 the two links
    between a pair are both used in both directions."""
    from ace.sw.program import Topology
    from sim_harness.system import link_partners
    topo = Topology.parse(topology)
    partners = link_partners(topo)
    for a, b in partners.items():
        assert partners[b] == a
    p = topo.num_nodes
    for x in range(p):
        for y in range(p):
            if x != y and y in _neighbours(topo, x):
                assert partners[(x, topo.send_link(x, y))] == (y, topo.recv_link(y, x))


def _neighbours(topo, x):
    from ace.sw.program import ProgramError
    out = set()
    for y in range(topo.num_nodes):
        try:
            topo.send_link(x, y)
            out.add(y)
        except ProgramError:      # not neighbours
            pass
    return out
