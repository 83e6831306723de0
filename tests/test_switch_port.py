"""Amaranth-simulator tests of the switch model's port (sim_harness/switch.py): one grant per
cycle among the requesters, round-robin fair, and the long-run byte rate of its throttle.
Random request patterns are seeded; the seed is in every assertion message."""

import random

import pytest

from sim_harness.link import bytes_per_cycle_q8
from sim_harness.switch import SwitchPort
from testbench.amaranth_sim import run_with_watchdog

CYCLES = 3000


def _record(n, data_bytes, rate, pattern):
    """Drive ``requests`` from ``pattern(cycle)`` for CYCLES cycles; return [(requests,
    grant)] per cycle."""
    dut = SwitchPort(n, data_bytes)
    log = []

    async def bench(ctx):
        ctx.set(dut.cfg_bytes_per_cycle_q8, bytes_per_cycle_q8(rate))
        for cycle in range(CYCLES):
            req = pattern(cycle)
            ctx.set(dut.requests, req)
            log.append((req, ctx.get(dut.grant)))
            await ctx.tick()

    run_with_watchdog(dut, [bench], CYCLES + 10)
    return log


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_one_grant_per_cycle_to_a_requester_at_full_rate(seed):
    rng = random.Random(seed)
    log = _record(5, 16, 16, lambda c: rng.getrandbits(5))
    for cycle, (req, grant) in enumerate(log):
        where = f"seed {seed}, cycle {cycle}"
        assert grant & (grant - 1) == 0, where                   # at most one
        assert grant & ~req == 0, where                          # only to a requester
        assert (grant != 0) == (req != 0), where                 # full rate: never idle


def test_round_robin_shares_the_port_evenly():
    log = _record(3, 16, 16, lambda c: 0b111)
    counts = [sum(1 for _, g in log if g >> i & 1) for i in range(3)]
    assert max(counts) - min(counts) <= 1, counts
    # Strict rotation: no requester is granted twice in a row while the others wait.
    grants = [g for _, g in log]
    assert all(a != b for a, b in zip(grants, grants[1:]))


@pytest.mark.parametrize("rate, seed", [(4, 1), (5.5, 2), (12, 3)])
def test_throttle_holds_the_long_run_rate(rate, seed):
    """At ``rate`` bytes per cycle and 16-byte beats, with requests always up (from a random
    subset, never empty), the port passes CYCLES * rate / 16 beats, within one beat."""
    rng = random.Random(seed)
    log = _record(4, 16, rate, lambda c: rng.randrange(1, 16))
    beats = sum(1 for _, g in log if g)
    expected = CYCLES * rate / 16
    assert abs(beats - expected) <= 1.5, f"seed {seed}: {beats} beats, expected {expected}"
    for cycle, (req, grant) in enumerate(log):
        assert grant & (grant - 1) == 0 and grant & ~req == 0, f"seed {seed}, cycle {cycle}"
