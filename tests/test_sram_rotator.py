"""Amaranth-simulator tests of :class:`ace.hw.sram.rotator.SlotRotator`, the registered barrel
rotator of the SRAM's crossbar. The expected words come from a Python rotation of the inputs
by the documented schedule ``(phase + step * t) mod period``."""

import random

import pytest
from amaranth.sim import Simulator

from ace.hw.sram.rotator import SlotRotator, rotation_levels, rotation_stages


@pytest.mark.parametrize("period, stages", [(1, 1), (2, 1), (3, 2), (4, 2), (5, 3), (8, 3),
                                            (9, 4), (16, 4)])
def test_stages(period, stages):
    assert rotation_stages(period) == stages
    assert rotation_levels(period) == (stages if period > 1 else 0)
    assert SlotRotator(4, period).stages == stages


@pytest.mark.parametrize("period, stages, levels", [
    (8, 3, [[0], [1], [2]]),          # the default: one level per stage
    (8, 2, [[0], [1, 2]]),            # the engine's read rotators: a 4:1 mux in a stage
    (4, 1, [[0, 1]]),                 # the small engine's read rotator
    (2, 2, [[], [0]]),                # the small engine's write rotator: a register first
    (4, 3, [[], [0], [1]]),
    (1, 2, [[], []]),                 # nothing to rotate: two registers
])
def test_levels_spread_over_stages(period, stages, levels):
    """Each level in exactly one stage, in order; the extra stages are plain registers in
    front, the extra levels in the last stages."""
    dut = SlotRotator(4, period, stages=stages)
    assert [list(dut.stage_levels(s)) for s in range(stages)] == levels


@pytest.mark.parametrize("kwargs, name", [
    (dict(width=0, period=4), "width"),
    (dict(width=8, period=0), "period"),
    (dict(width=8, period=4, step=2), "step"),
    (dict(width=8, period=4, select_bits=0), "select_bits"),
    (dict(width=8, period=4, stages=0), "stages"),
])
def test_bad_parameters(kwargs, name):
    with pytest.raises(ValueError, match=name):
        SlotRotator(**kwargs)


@pytest.mark.parametrize("period, phase, step, select_bits, stages", [
    (1, 0, 1, 16, None),    # one position: a register
    (1, 0, 1, 16, 3),       # ... or three
    (2, 1, -1, 3, None),
    (2, 1, -1, 3, 2),       # the small engine's write rotator: a register, then the mux
    (3, 2, 1, 5, None),     # not a power of two: rotations by 1 and 2 mod 3
    (3, 2, 1, 5, 1),        # ... both in one stage
    (5, -7, 1, 4, None),    # the read rotator of 5 ports on 4 banks (period 5)
    (5, -7, 1, 4, 2),       # ... three levels in two stages
    (8, -6, 1, 16, 2),      # the small top's read rotator
    (4, -4, 1, 16, 1),      # the small engine's read rotator: a 4:1 mux
    (4, 0, -1, 7, 3),       # the small top's write rotator (step -1)
    (9, 3, -1, 32, None),
    (9, 3, -1, 32, 2),
])
@pytest.mark.parametrize("position_copies", [False, True])
def test_rotation_follows_schedule(period, phase, step, select_bits, stages, position_copies):
    """Random words in every cycle: each output set equals the set presented ``stages``
    cycles earlier, rotated left by that cycle's amount; every stage's select copies agree."""
    width, cycles, seed = 20, 60, period * 100 + select_bits + 7 * (stages or 0)
    dut = SlotRotator(width, period, phase=phase, step=step, select_bits=select_bits,
                      position_copies=position_copies, stages=stages)
    if stages is not None:
        assert dut.stages == stages
    rng = random.Random(seed)
    sets = [[rng.getrandbits(width) for _ in range(period)] for _ in range(cycles)]
    seen = []

    async def testbench(ctx):
        for cycle in range(cycles + dut.stages):
            if cycle < cycles:
                for k, word in enumerate(sets[cycle]):
                    ctx.set(getattr(dut, f"i{k}"), word)
            if cycle >= dut.stages:
                seen.append([ctx.get(getattr(dut, f"o{k}")) for k in range(period)])
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    for cycle, (words, outputs) in enumerate(zip(sets, seen)):
        amount = (phase + step * cycle) % period
        assert amount == dut.amount(cycle)
        want = [words[(k + amount) % period] for k in range(period)]
        assert outputs == want, f"seed {seed}, cycle {cycle}: amount {amount}"
