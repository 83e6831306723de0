"""Amaranth-simulator tests of :class:`ace.hw.common.buffered_flag_fifo.BufferedFlagFifo`.

Two references, every cycle: Amaranth's own ``SyncFIFOBuffered`` of the same depth, driven with
the same inputs in the same simulation (the FIFO whose cycles this one keeps: ``w_rdy``,
``r_rdy``, ``level`` and ``r_data`` must match it exactly), and a scoreboard written here (a
Python list of the entries written and not yet read: every entry read is the oldest one, none
lost, none twice). The ``w_rdy`` copies must equal ``w_rdy`` in every cycle. Inputs come from a
pattern per test, with random data; a failing seed is in the assertion message.
"""

import random

import pytest
from amaranth.hdl import Module, ResetInserter, Signal
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.sim import Simulator

from ace.hw.common.buffered_flag_fifo import BufferedFlagFifo

WIDTH = 12


def run(depth, cycles, *, write, read, reset=lambda c: False, seed=0, copies=3):
    """Drive ``cycles`` cycles (``write(c)``/``read(c)``: w_en/r_en, ``reset(c)``: reset).
    Returns the entries written and read, as the reference FIFO took them."""
    rng = random.Random(seed)
    dut = BufferedFlagFifo(width=WIDTH, depth=depth, ready_copies=copies)
    ref = SyncFIFOBuffered(width=WIDTH, depth=depth)
    rst = Signal()
    top = Module()
    top.submodules.dut = ResetInserter(rst)(dut)
    top.submodules.ref = ResetInserter(rst)(ref)
    counts = {"writes": 0, "reads": 0}
    held = []

    async def bench(ctx):
        for c in range(cycles):
            w_en, r_en, w_data, in_reset = write(c), read(c), rng.getrandbits(WIDTH), reset(c)
            for fifo in (dut, ref):
                ctx.set(fifo.w_en, w_en)
                ctx.set(fifo.r_en, r_en)
                ctx.set(fifo.w_data, w_data)
            ctx.set(rst, in_reset)
            got = {name: ctx.get(getattr(dut, name)) for name in ("w_rdy", "r_rdy", "level")}
            want = {name: ctx.get(getattr(ref, name)) for name in ("w_rdy", "r_rdy", "level")}
            where = f"seed {seed}, depth {depth}, cycle {c}"
            assert got == want, (where, got, want)
            assert [ctx.get(copy) for copy in dut.ready_copies] == [got["w_rdy"]] * copies, where
            if want["r_rdy"]:
                assert ctx.get(dut.r_data) == ctx.get(ref.r_data) == held[0], where
            await ctx.tick()
            if in_reset:
                held.clear()
                continue
            if r_en and want["r_rdy"]:
                held.pop(0)
                counts["reads"] += 1
            if w_en and want["w_rdy"]:
                held.append(w_data)
                counts["writes"] += 1

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return counts


@pytest.mark.parametrize("depth", [2, 3, 4, 18])
def test_back_to_back(depth):
    """A write and a read every cycle: one entry passes every cycle after the first two
    (with depth 2 the one-entry memory refuses the write of a cycle it is read in)."""
    counts = run(depth, 200, write=lambda c: True, read=lambda c: True)
    assert counts["writes"] >= (100 if depth == 2 else 199)
    assert counts["reads"] >= counts["writes"] - 2


@pytest.mark.parametrize("depth", [2, 3, 18])
@pytest.mark.parametrize("period", [2, 3])
def test_stall_every_cycle(depth, period):
    """The reader stalls in every cycle but one of each ``period``: the FIFO fills, ``w_rdy``
    holds the writer off, and entries leave at the reader's rate."""
    counts = run(depth, 300, write=lambda c: True, read=lambda c: c % period == 0)
    assert counts["reads"] >= 300 // period - 2


@pytest.mark.parametrize("depth", [2, 5, 17])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random(depth, seed):
    """Random writes and reads, with stretches full and stretches empty."""
    rng = random.Random(seed)
    w = [rng.random() < 0.3 + 0.4 * ((c // 50) % 2) for c in range(1000)]
    r = [rng.random() < 0.7 - 0.4 * ((c // 70) % 2) for c in range(1000)]
    counts = run(depth, 1000, write=lambda c: w[c], read=lambda c: r[c], seed=seed)
    assert counts["reads"] > 200


@pytest.mark.parametrize("depth", [2, 6])
def test_reset_mid_stream(depth):
    """A reset while full and while moving empties the FIFO; it then runs as after reset."""
    counts = run(depth, 400, write=lambda c: True, read=lambda c: c % 3 != 0 or c > 200,
                 reset=lambda c: c in (37, 38, 150, 251))
    assert counts["reads"] > 150

