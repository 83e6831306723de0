"""Replicated registers: several flip-flops holding the same value, kept apart in synthesis.

A register whose output fans out to a whole bus (a load enable, a multiplexer select) is one
net with hundreds of loads, and on an FPGA its routing delay grows with the area those loads
cover. Several copies, each driving a slice of the bus, let the placer put each copy beside
its slice. Synthesis merges identical flip-flops (yosys ``opt_merge``), and a ``keep`` on the
signal does not stop it, so the ECP5 form instantiates each copy as a ``TRELLIS_FF`` (a
primitive cell, which ``opt_merge`` leaves alone) with ``keep``; any other platform, or none,
gets plain registers (the same behaviour in simulation).
"""

from __future__ import annotations

from amaranth.hdl import ClockSignal, Instance, ResetSignal, Signal

from ace.hw.common.bram import is_ecp5

__all__ = ["replicas"]


def replicas(m, platform, d, copies: int, *, init: int = 0, name: str) -> list[Signal]:
    """``copies`` one-bit registers in ``m``'s ``sync`` domain, each loaded with ``d`` every
    cycle and reset to ``init`` (synchronously, with the domain's reset). Returns the copies'
    outputs; on ECP5 each is a kept ``TRELLIS_FF``."""
    outs = [Signal(init=init, name=f"{name}_r{k}") for k in range(copies)]
    if not is_ecp5(platform):
        for out in outs:
            m.d.sync += out.eq(d)
        return outs
    for k, out in enumerate(outs):
        m.submodules[f"{name}_ff{k}"] = Instance(
            "TRELLIS_FF", a_keep=1,
            p_GSR="DISABLED", p_CEMUX="1", p_CLKMUX="CLK", p_LSRMUX="LSR",
            p_REGSET="SET" if init else "RESET", p_SRMODE="LSR_OVER_CE",
            i_CLK=ClockSignal(), i_LSR=ResetSignal(), i_DI=d, o_Q=out)
    return outs
