"""Amaranth-simulator tests of :class:`ace.hw.common.delay_line.DelayLine` against a model
written here: a Python list of the last ``delay`` inputs (a shift register). Every cycle the
testbench drives a random ``i`` with ``i_en`` from a pattern and checks ``o`` against the input of
``delay`` clock edges earlier whenever that input was written. The line is also run under a
clock enable that stops it at random (a gated clock advances it only on its own edges) and
with a reset in mid-stream (after which only words written since the reset are checked).
"""

import random

import pytest
from amaranth.hdl import EnableInserter, Module, ResetInserter, Signal
from amaranth.sim import Simulator

from ace.hw.common.delay_line import DelayLine

WIDTH = 13


def run(delay, cycles, *, write, advance=lambda c: True, reset=lambda c: False, seed=0):
    """Drive ``cycles`` cycles; ``write(c)`` gives ``i_en``, ``advance(c)`` the clock enable,
    ``reset(c)`` the reset. Returns how many outputs were checked."""
    rng = random.Random(seed)
    dut = DelayLine(width=WIDTH, delay=delay)
    enable, rst = Signal(), Signal()
    top = Module()
    top.submodules.dut = ResetInserter(rst)(EnableInserter(enable)(dut))
    history = [None] * delay            # inputs of the last `delay` edges, oldest first
    checked = [0]

    async def bench(ctx):
        for c in range(cycles):
            value, i_en, tick, in_reset = (rng.getrandbits(WIDTH), write(c), advance(c),
                                           reset(c))
            ctx.set(dut.i, value)
            ctx.set(dut.i_en, i_en)
            ctx.set(enable, tick)
            ctx.set(rst, in_reset)
            if history[0] is not None:
                assert ctx.get(dut.o) == history[0], f"seed {seed}, cycle {c}, delay {delay}"
                checked[0] += 1
            await ctx.tick()
            if in_reset:
                history[:] = [None] * delay
            elif tick:
                history[:] = history[1:] + [value if i_en else None]

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return checked[0]


@pytest.mark.parametrize("delay", [1, 2, 3, 4, 5, 10, 16, 17])
def test_back_to_back(delay):
    """A value every cycle: from cycle ``delay`` on, every output is checked."""
    assert run(delay, 120, write=lambda c: True) == 120 - delay


@pytest.mark.parametrize("delay", [1, 3, 10, 16])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_writes_and_stops(delay, seed):
    """Random write enables and a clock that stops at random (a gated clock): each written
    value comes out ``delay`` edges later; the line holds while stopped."""
    rng = random.Random(seed)
    writes = [rng.random() < 0.6 for _ in range(400)]
    ticks = [rng.random() < 0.7 for _ in range(400)]
    assert run(delay, 400, write=writes.__getitem__, advance=ticks.__getitem__,
               seed=seed) > 100


@pytest.mark.parametrize("delay", [2, 10])
def test_stall_every_cycle_but_one(delay):
    """The clock advances one cycle in three: the line moves only on its own edges."""
    assert run(delay, 300, write=lambda c: True, advance=lambda c: c % 3 == 0) > 80


@pytest.mark.parametrize("delay", [1, 7, 10])
def test_reset_mid_stream(delay):
    """A reset in mid-stream: the pointers restart, and every value written after it comes out
    ``delay`` cycles later."""
    checked = run(delay, 200, write=lambda c: True, reset=lambda c: c in (50, 51, 120))
    assert checked == 200 - 3 * delay - 1


def test_bad_parameters():
    for width, delay in ((0, 4), (8, 0)):
        with pytest.raises(ValueError, match="allowed: at least 1"):
            DelayLine(width=width, delay=delay)
