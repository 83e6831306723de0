"""Clock gating: submodules whose registers move only in the cycles where an enable is high.

A block that has nothing to do holds its registers, which saves their switching power and
changes no result when the enable is high in every cycle where one of its registers would
take a new value that matters. ``config.clock_gating`` chooses the form of the same behaviour:

* ``enable``: the enable is the clock enable of every register of the gated domain
  (:class:`amaranth.hdl.EnableInserter`). FPGA synthesis always gets this form (a platform is
  given): an FPGA gates with clock enables, not with clocks.
* ``clock``: the gated domain's clock is ``clk & enable_n``, ``enable_n`` being ``enable``
  registered on the falling edge, so that the gated clock cannot glitch (the form of an ASIC
  clock-gating cell). A cycle-based simulator such as Verilator evaluates a domain's logic only
  on its clock's edges, so a stopped block costs no simulation time. The gated domain's reset
  is asynchronous in this form: a synchronous reset is an input of every register's next-state
  logic, and the reset is a register of the ungated clock, so Verilator would evaluate all of
  that logic on every edge of the ungated clock. The enable is high while the reset is, so the
  gated registers take their reset values at the same edges as ungated ones, and hold them
  until the edge that ends the reset (the first reset cycle aside, where the asynchronous form
  resets at once). Amaranth's own simulator
  cannot run this form: it moves a derived clock a delta cycle after the registers of the
  clock it comes from, so the gated registers would sample the next cycle's values.

Usage::

    gate = ClockGate(m, "mem_a_clk", enable, gated_clock=uses_gated_clock(config, platform))
    m.submodules.mem_a = gate(DmaReader(config))              # its sync domain, gated
    m.submodules.lane0 = gate(AluLane(), domain="pipe")        # only its "pipe" domain
"""

from __future__ import annotations

from amaranth.hdl import (ClockDomain, ClockSignal, DomainRenamer, EnableInserter, Module,
                          ResetSignal, Signal)

__all__ = ["ClockGate", "gate_while_busy", "uses_gated_clock"]


def uses_gated_clock(config, platform) -> bool:
    """Whether to gate with a clock (``config.clock_gating == "clock"`` and no FPGA platform)
    rather than with clock enables."""
    return config.clock_gating == "clock" and platform is None


class ClockGate:
    """One enable applied to any number of submodules of ``m`` (see the module docstring).

    ``enable`` is a signal of ``m``'s ``sync`` domain: high in a cycle, the gated registers
    take their next values at the end of that cycle, as ungated ones would; low, they hold.
    The gated clock's domain is named ``name`` (local to ``m``); its reset is ``m``'s.
    """

    def __init__(self, m: Module, name: str, enable, *, gated_clock: bool):
        self.name, self.enable, self.gated_clock = name, enable, gated_clock
        if gated_clock:
            gated = ClockDomain(name, local=True, async_reset=True)
            falling = ClockDomain(f"{name}_n", clk_edge="neg", reset_less=True, local=True)
            m.domains += [gated, falling]
            enable_n = Signal(name=f"{name}_enable_n")
            m.d[falling.name] += enable_n.eq(enable)
            m.d.comb += [falling.clk.eq(ClockSignal()),
                         gated.clk.eq(ClockSignal() & enable_n),
                         gated.rst.eq(ResetSignal())]

    def __call__(self, elaboratable, domain: str = "sync"):
        """``elaboratable`` with its ``domain`` clocked through this gate (and, in the
        clock-enable form, merged into ``m``'s ``sync``)."""
        if self.gated_clock:
            return DomainRenamer({domain: self.name})(elaboratable)
        gated = EnableInserter({domain: self.enable})(elaboratable)
        return gated if domain == "sync" else DomainRenamer({domain: "sync"})(gated)


def gate_while_busy(m: Module, name: str, busy, block=None) -> str:
    """A gated clock ``{name}_clk`` in ``m``, enabled while ``busy`` is high, for one cycle
    after, and in reset; ``block``, if given, becomes submodule ``name`` with its ``sync``
    domain on it. Returns the gated domain's name (for ``m``'s own registers).

    ``busy`` is a signal of ``m``'s ``sync`` domain, high in every cycle after which a gated
    register that is ever read may change: whatever the inputs do in a cycle where ``busy`` is
    low, the gated registers keep what matters. The cycle after ``busy`` falls is clocked too,
    a margin for a register that follows another a cycle late. Only the gated-clock form; the
    clock-enable form of the same logic has no gate."""
    after = Signal(name=f"{name}_after")
    m.d.sync += after.eq(busy)
    enable = Signal(name=f"{name}_clock_enable")
    m.d.comb += enable.eq(busy | after | ResetSignal())
    gate = ClockGate(m, f"{name}_clk", enable, gated_clock=True)
    if block is not None:
        m.submodules[name] = gate(block)
    return gate.name
