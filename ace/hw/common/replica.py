"""Replicated registers: several flip-flops holding the same value, kept apart in synthesis.

A register whose output fans out to a whole bus (a load enable, a multiplexer select) is one
net with hundreds of loads, and on an FPGA its routing delay grows with the area those loads
cover. Several copies, each driving a slice of the bus, let the placer put each copy beside
its slice. Synthesis merges identical flip-flops (yosys ``opt_merge``), and a ``keep`` on the
signal does not stop it, so the ECP5 form instantiates each copy as a ``TRELLIS_FF`` (a
primitive cell, which ``opt_merge`` leaves alone) with ``keep``; any other platform, or none,
gets plain registers (the same behaviour in simulation).

The gated-clock form (``config.clock_gating == "clock"``, no platform: the form the harness
simulates) keeps one copy of each: :func:`replicates` is false there, and the blocks then ask
for one copy (``replicas(distinct=False)``, ``SkidBuffer(slices=1)``,
``SkidFifo(slice_bits=None)``, one lane of control in the DMA realigner, one copy of the
interconnect's and the DMA queues' slice control). The copies change no cycle, and a cycle-based
simulator evaluates each of them: in the harness's engine they were a third of the simulation
time (docs/benchmarks.md, Simulator speed). FPGA synthesis always gets the enable form, with
the copies; an ASIC flow buffers a wide fan-out itself.
"""

from __future__ import annotations

from amaranth.hdl import ClockSignal, Const, Instance, ResetSignal, Signal

from ace.hw.common.bram import is_ecp5
from ace.hw.common.clock_gate import uses_gated_clock

__all__ = ["drive_replicas", "replicas", "replicates"]


def replicates(config, platform) -> bool:
    """Whether the blocks copy fan-out registers and register-slice control (see the module
    docstring): in every form but the gated-clock one."""
    return not uses_gated_clock(config, platform)


def replicas(m, platform, d, copies: int, *, init: int = 0, name: str,
             distinct: bool = True, reset_less: bool = False) -> list[Signal]:
    """``copies`` one-bit registers in ``m``'s ``sync`` domain, each loaded with ``d`` every
    cycle and reset to ``init`` (synchronously, with the domain's reset; never with
    ``reset_less``). Returns the copies' outputs; on ECP5 each is a kept ``TRELLIS_FF``.
    ``distinct=False``: one register, returned ``copies`` times."""
    if not distinct:
        return replicas(m, platform, d, 1, init=init, name=name, reset_less=reset_less) * copies
    outs = [Signal(init=init, name=f"{name}_r{k}", reset_less=reset_less)
            for k in range(copies)]
    if not is_ecp5(platform):
        for out in outs:
            m.d.sync += out.eq(d)
        return outs
    for k, out in enumerate(outs):
        m.submodules[f"{name}_ff{k}"] = Instance(
            "TRELLIS_FF", a_keep=1,
            p_GSR="DISABLED", p_CEMUX="1", p_CLKMUX="CLK", p_LSRMUX="LSR",
            p_REGSET="SET" if init else "RESET", p_SRMODE="LSR_OVER_CE",
            i_CLK=ClockSignal(), i_LSR=Const(0) if reset_less else ResetSignal(), i_DI=d,
            o_Q=out)
    return outs


def drive_replicas(m, platform, d, outputs: list[Signal], *, init: int = 0, name: str) -> None:
    """Drive each signal of ``outputs`` (copies a component offers its users, declared in its
    constructor) from a register of its own loaded with ``d`` (:func:`replicas`)."""
    if outputs:
        copies = replicas(m, platform, d, len(outputs), init=init, name=name)
        m.d.comb += [out.eq(q) for out, q in zip(outputs, copies)]
