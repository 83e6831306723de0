"""Amaranth-simulator tests of :class:`ace.hw.common.flag_fifo.FlagFifo` against a cycle model of
a synchronous FIFO written here (a Python list, ``SyncFIFO``'s rules: a write is taken when the
FIFO is not full, a read when it is not empty, both in the same cycle; ``r_data`` is the oldest
entry). Every cycle the testbench sets ``w_en``, ``w_data`` and ``r_en`` from a pattern, checks
``w_rdy``, ``r_rdy``, ``level`` and (when not empty) ``r_data`` against the model, and steps both.
Every test runs both forms: the memory written in the cycle of the write, and a cycle later from
a register (``registered_write``), which must give the same cycles.
"""

import random

import pytest
from amaranth.hdl import Module, ResetInserter, Signal
from amaranth.sim import Simulator

from ace.hw.common.flag_fifo import FlagFifo

WIDTH = 12


class FifoModel:
    def __init__(self, depth):
        self.depth = depth
        self.items = []

    def outputs(self):
        return {"w_rdy": len(self.items) != self.depth, "r_rdy": len(self.items) != 0,
                "level": len(self.items), "head": self.items[0] if self.items else None}

    def step(self, w_en, w_data, r_en):
        out = self.outputs()
        if r_en and out["r_rdy"]:
            self.items.pop(0)
        if w_en and out["w_rdy"]:
            self.items.append(w_data)

    def reset(self):
        self.items = []


@pytest.fixture(params=[False, True], ids=["direct", "registered"])
def registered_write(request):
    return request.param


def run(depth, cycles, *, write, read, reset=lambda c: False, seed=0, registered_write=False):
    """Drive ``cycles`` cycles: ``write(c)``/``read(c)`` give w_en/r_en, ``reset(c)`` the reset
    of cycle ``c``. Returns (writes, reads) taken, as counted by the model."""
    rng = random.Random(seed)
    dut = FlagFifo(width=WIDTH, depth=depth, registered_write=registered_write)
    rst = Signal()
    top = Module()
    top.submodules.dut = ResetInserter(rst)(dut)
    model = FifoModel(depth)
    counts = {"writes": 0, "reads": 0}

    async def bench(ctx):
        for c in range(cycles):
            w_en, r_en, w_data, in_reset = write(c), read(c), rng.getrandbits(WIDTH), reset(c)
            ctx.set(dut.w_en, w_en)
            ctx.set(dut.r_en, r_en)
            ctx.set(dut.w_data, w_data)
            ctx.set(rst, in_reset)
            want = model.outputs()
            got = {"w_rdy": ctx.get(dut.w_rdy), "r_rdy": ctx.get(dut.r_rdy),
                   "level": ctx.get(dut.level)}
            assert got == {k: int(want[k]) for k in got}, (c, got, want)
            if want["head"] is not None:
                assert ctx.get(dut.r_data) == want["head"], c
            await ctx.tick()
            if in_reset:
                model.reset()
            else:
                counts["writes"] += w_en and want["w_rdy"]
                counts["reads"] += r_en and want["r_rdy"]
                model.step(w_en, w_data, r_en)

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return counts


@pytest.mark.parametrize("depth", [1, 2, 3, 4, 6])
def test_back_to_back(depth, registered_write):
    """A write and a read every cycle: after the first cycle one entry passes every cycle
    (every other cycle with one entry, which a read does not free for the same cycle's write)."""
    counts = run(depth, 200, write=lambda c: True, read=lambda c: True,
                 registered_write=registered_write)
    if depth == 1:
        assert counts["writes"] == 100 and counts["reads"] == 100
    else:
        assert counts["writes"] == 200 and counts["reads"] == 199


@pytest.mark.parametrize("depth", [1, 2, 3, 6])
@pytest.mark.parametrize("period", [2, 3])
def test_stall_every_cycle(depth, period, registered_write):
    """The reader stalls in every cycle but one of each ``period``: the FIFO fills and the
    writer is held off by ``w_rdy`` (full), then entries leave at the reader's rate."""
    counts = run(depth, 300, write=lambda c: True, read=lambda c: c % period == 0,
                 registered_write=registered_write)
    assert counts["reads"] in (300 // period - 1, 300 // period)


@pytest.mark.parametrize("depth", [1, 2, 5, 6])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random(depth, seed, registered_write):
    """Random writes and reads, some stretches full or empty."""
    rng = random.Random(seed)
    w = [rng.random() < 0.3 + 0.4 * ((c // 50) % 2) for c in range(1000)]
    r = [rng.random() < 0.7 - 0.4 * ((c // 70) % 2) for c in range(1000)]
    counts = run(depth, 1000, write=lambda c: w[c], read=lambda c: r[c], seed=seed,
                 registered_write=registered_write)
    assert counts["reads"] > 200


@pytest.mark.parametrize("depth", [2, 6])
def test_reset_mid_stream(depth, registered_write):
    """A reset while full and while moving empties the FIFO; it then works as after reset."""
    counts = run(depth, 400, write=lambda c: True, read=lambda c: c % 3 != 0 or c > 200,
                 reset=lambda c: c in (37, 38, 150, 251), registered_write=registered_write)
    assert counts["reads"] > 200
