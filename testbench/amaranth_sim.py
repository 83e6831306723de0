"""Run Amaranth-simulator testbenches with a clock and a background watchdog."""

from __future__ import annotations

from amaranth.sim import Simulator

__all__ = ["run_with_watchdog"]


def run_with_watchdog(dut, testbenches, timeout_cycles: int, *, period: float = 1e-8) -> None:
    """Simulate ``dut`` with a clock of ``period`` seconds and every async testbench in
    ``testbenches``; fail if they are not all done within ``timeout_cycles`` cycles."""
    sim = Simulator(dut)
    sim.add_clock(period)
    for tb in testbenches:
        sim.add_testbench(tb)

    async def watchdog(ctx):
        await ctx.delay(timeout_cycles * period)
        raise AssertionError(f"watchdog: simulation did not finish in {timeout_cycles} cycles")
    sim.add_testbench(watchdog, background=True)
    sim.run()
