"""Amaranth-simulator tests of :class:`ace.hw.common.skid_buffer.SkidBuffer` and of
:class:`ace.hw.common.skid_fifo.SkidFifo` (the same contract). Every test runs on four
forms: the skid buffer, the skid buffer with its control registers copied for three payload
slices, the same with a copy of ``o.ready`` per slice (each driven from ``o.ready``), and the
skid FIFO with its control registers replicated per 5 payload bits, three copies of
``i.ready`` and two of ``o.valid``. Every ready copy is checked against ``i.ready`` and every
valid copy against ``o.valid`` in every cycle.

A source testbench offers a numbered sequence of random payloads, a sink testbench drains the
output, and a monitor records every transfer on both sides at each clock edge; the expected
output is the input sequence itself (nothing lost, duplicated or reordered).
"""

import random

import pytest
from amaranth.hdl import Module, ResetInserter, Signal, unsigned
from amaranth.lib import data
from amaranth.sim import Simulator

from ace.hw.common.skid_buffer import SkidBuffer
from ace.hw.common.skid_fifo import SkidFifo

WATCHDOG_CYCLES = 5_000


class ReadyPerSlice(SkidBuffer):
    """Three slices, each taking its own copy of ``o.ready`` (driven here from the port)."""

    def __init__(self, shape):
        super().__init__(shape, slices=3, ready_per_slice=True)
        assert len(self.out_ready_copies) == self.slices == len(self.valid_copies)

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += [copy.eq(self.o.ready) for copy in self.out_ready_copies]
        return m


MAKERS = {
    "skid_buffer": SkidBuffer,
    "skid_buffer_sliced": lambda shape: SkidBuffer(shape, slices=3),
    "skid_buffer_ready_per_slice": ReadyPerSlice,
    "skid_fifo": lambda shape: SkidFifo(shape, slice_bits=5, ready_copies=3, valid_copies=2),
}


@pytest.fixture(params=sorted(MAKERS))
def make(request):
    """The block under test, built for a payload shape."""
    return MAKERS[request.param]


class Bench:
    """Source, sink and monitor around one SkidBuffer; ``valid(cycle)`` and ``ready(cycle)``
    give the source's and the sink's willingness in each cycle."""

    def __init__(self, make, shape, values, *, valid=lambda c: True, ready=lambda c: True):
        self.dut = make(shape)
        self.shape = shape
        self.reset = Signal()
        self.top = Module()
        self.top.submodules.dut = ResetInserter(self.reset)(self.dut)
        self.values = values
        self.valid = valid
        self.ready = ready
        self.sent, self.received = [], []   # (cycle, value) of each transfer
        self.resets = set()                 # cycles in which reset is high

    async def source(self, ctx):
        cycle = 0
        for value in self.values:
            while not self.valid(cycle):
                ctx.set(self.dut.i.valid, 0)
                await ctx.tick()
                cycle += 1
            if isinstance(self.shape, data.Layout):
                value = self.shape.from_bits(value)
            ctx.set(self.dut.i.payload, value)
            ctx.set(self.dut.i.valid, 1)
            while True:
                _, _, ready = await ctx.tick().sample(self.dut.i.ready)
                cycle += 1
                if ready:
                    break
        ctx.set(self.dut.i.valid, 0)
        await ctx.tick().repeat(8)  # let the last beats leave before the simulation stops

    async def sink(self, ctx):
        cycle = 0
        while True:
            ctx.set(self.dut.o.ready, int(self.ready(cycle)))
            await ctx.tick()
            cycle += 1

    async def monitor(self, ctx):
        cycle = 0
        dut = self.dut
        n = len(dut.ready_copies)
        async for _, _, i_valid, i_ready, i_payload, o_valid, o_ready, o_payload, reset, \
                *copies in ctx.tick().sample(dut.i.valid, dut.i.ready, dut.i.payload,
                                             dut.o.valid, dut.o.ready, dut.o.payload,
                                             self.reset, *dut.ready_copies, *dut.valid_copies):
            assert all(copy == i_ready for copy in copies[:n]), \
                f"cycle {cycle}: a ready copy differs"
            assert all(copy == o_valid for copy in copies[n:]), \
                f"cycle {cycle}: a valid copy differs"
            if not reset:
                if i_valid and i_ready:
                    self.sent.append((cycle, i_payload))
                if o_valid and o_ready:
                    self.received.append((cycle, o_payload))
            cycle += 1

    def run(self, *extra):
        sim = Simulator(self.top)
        sim.add_clock(1e-8)
        sim.add_testbench(self.source)
        sim.add_testbench(self.sink, background=True)
        sim.add_testbench(self.monitor, background=True)
        for testbench in extra:
            sim.add_testbench(testbench, background=True)

        async def watchdog(ctx):
            for _ in range(WATCHDOG_CYCLES):
                await ctx.tick()
            raise AssertionError(f"watchdog: still running after {WATCHDOG_CYCLES} cycles")
        sim.add_testbench(watchdog, background=True)
        sim.run()
        return self


def payloads(seed, count, width=16):
    rng = random.Random(seed)
    return [rng.getrandbits(width) for _ in range(count)]


def test_back_to_back(make):
    """Always valid, always ready: one beat per cycle, each one cycle after it went in."""
    values = payloads(1, 50)
    bench = Bench(make, 16, values).run()
    assert [v for _, v in bench.received] == values
    assert [c for c, _ in bench.sent] == list(range(len(values)))
    assert all(out - sent == 1 for (sent, _), (out, _) in zip(bench.sent, bench.received))


@pytest.mark.parametrize("period", [2, 3])
def test_stall_every_cycle(make, period):
    """The sink stalls in every cycle but one in ``period``: no beat lost or duplicated, and the
    sink's every ready cycle after the first fill carries a beat (rate 1 / period)."""
    values = payloads(2, 60)
    bench = Bench(make, 16, values, ready=lambda c: c % period == 0).run()
    assert [v for _, v in bench.received] == values
    gaps = {b - a for (a, _), (b, _) in zip(bench.received, bench.received[1:])}
    assert gaps == {period}


def test_ready_is_registered(make):
    """``i.ready`` does not follow ``o.ready`` within a cycle (no combinational path)."""
    dut = make(8)
    seen = []

    async def testbench(ctx):
        ctx.set(dut.i.valid, 1)
        ctx.set(dut.o.ready, 0)
        await ctx.tick().repeat(3)            # output and skid full, i.ready low
        before = ctx.get(dut.i.ready)
        ctx.set(dut.o.ready, 1)               # same cycle: i.ready must not change yet
        seen.append((before, ctx.get(dut.i.ready)))
        await ctx.tick()
        seen.append(ctx.get(dut.i.ready))     # one cycle later it follows

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    assert seen == [(0, 0), 1]


@pytest.mark.parametrize("seed", [11, 12, 13, 14])
def test_random_valid_ready(make, seed):
    """Random source idles and sink stalls against a scoreboard; a struct payload."""
    print(f"seed {seed}")
    layout = data.StructLayout({"a": unsigned(7), "b": unsigned(9)})
    rng = random.Random(seed)
    values = payloads(seed, 300)
    valid = [rng.random() < 0.7 for _ in range(WATCHDOG_CYCLES)]
    ready = [rng.random() < 0.6 for _ in range(WATCHDOG_CYCLES)]
    bench = Bench(make, layout, values, valid=lambda c: valid[c], ready=lambda c: ready[c]).run()
    got = [v.as_bits() for _, v in bench.received]
    assert got == values, f"seed {seed}: output differs from input"


def test_reset_mid_stream(make):
    """Reset while both registers hold beats: they are dropped (not delivered after the reset),
    ``i.ready`` is high again, and a new stream then passes intact."""
    first, second = payloads(3, 20), payloads(4, 20)
    bench = Bench(make, 16, first + second, ready=lambda c: c < 6 or c > 12)

    async def resetter(ctx):
        await ctx.tick().repeat(10)   # the sink has stalled since cycle 6: both entries full
        assert ctx.get(bench.dut.o.valid) and not ctx.get(bench.dut.i.ready)
        ctx.set(bench.reset, 1)
        await ctx.tick()
        ctx.set(bench.reset, 0)
        assert not ctx.get(bench.dut.o.valid) and ctx.get(bench.dut.i.ready)

    bench.run(resetter)
    received = [v for _, v in bench.received]
    sent = [v for _, v in bench.sent]
    # Every beat sent before the reset and delivered before it, then every beat sent after it.
    reset_cycle = 10
    before = [v for c, v in bench.received if c < reset_cycle]
    after_sent = [v for c, v in bench.sent if c > reset_cycle]
    assert received == before + after_sent
    assert before == sent[:len(before)]
    assert len(after_sent) >= len(second), "the stream after the reset did not pass"
