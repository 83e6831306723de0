"""Amaranth-simulator tests of :class:`ace.hw.common.arbiter.RoundRobinArbiter` against a Python model."""

import random

import pytest
from amaranth.sim import Simulator

from ace.hw.common.arbiter import RoundRobinArbiter


class ArbiterModel:
    """The documented behaviour: first requester at or after the pointer wins; the pointer moves
    past the winner when ``advance`` is high and onto it when low."""

    def __init__(self, n):
        self.n = n
        self.pointer = 0

    def step(self, requests, advance):
        winner = None
        for offset in range(self.n):
            i = (self.pointer + offset) % self.n
            if requests >> i & 1:
                winner = i
                break
        if winner is not None:
            self.pointer = (winner + 1) % self.n if advance else winner
        return winner


@pytest.mark.parametrize("n", [1, 2, 3, 5, 9])
def test_matches_model(n):
    dut = RoundRobinArbiter(n)
    model = ArbiterModel(n)
    rng = random.Random(n)
    errors = []

    async def testbench(ctx):
        for cycle in range(400):
            requests = rng.getrandbits(n) if rng.random() < 0.9 else 0
            advance = int(rng.random() < 0.8)
            ctx.set(dut.requests, requests)
            ctx.set(dut.advance, advance)
            want = model.step(requests, advance)
            grant, index, valid = ctx.get(dut.grant), ctx.get(dut.grant_index), ctx.get(dut.valid)
            got = index if valid else None
            if got != want or grant != (0 if want is None else 1 << want):
                errors.append((cycle, requests, advance, want, got, grant))
            if n > 1:
                await ctx.tick()
            else:
                await ctx.delay(1e-8)  # one requester: no state, no clock domain

    sim = Simulator(dut)
    if n > 1:
        sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    assert not errors, errors[:5]


def test_all_requesting_rotates_and_lock_holds():
    dut = RoundRobinArbiter(4)
    order = []

    async def testbench(ctx):
        ctx.set(dut.requests, 0b1111)
        for _ in range(8):
            order.append(ctx.get(dut.grant_index))
            await ctx.tick()
        ctx.set(dut.advance, 0)  # lock onto the current winner
        for _ in range(3):
            order.append(ctx.get(dut.grant_index))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    assert order == [0, 1, 2, 3, 0, 1, 2, 3, 0, 0, 0]
