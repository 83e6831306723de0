"""The synthesis shell drives every input of the block and observes every output."""

from amaranth.lib import wiring
from amaranth.sim import Simulator

from ace.config import NAMED_CONFIGS
from ace.synth_wrapper import SerialShellWrapper
from ace.tops import TOPS


def test_shell_feeds_inputs_from_serial_pin():
    dut = TOPS["ace_alu_array"].build(NAMED_CONFIGS["small"])
    shell = SerialShellWrapper(dut)
    widths = {flow: sum(len(v) for _p, m, v in dut.signature.flatten(dut) if m.flow == flow)
              for flow in (wiring.In, wiring.Out)}
    assert widths[wiring.In] > 256 and widths[wiring.Out] > 128
    sim = Simulator(shell)
    sim.add_clock(1e-8)

    async def bench(ctx):
        ctx.set(shell.sin, 1)
        await ctx.tick().repeat(8)
        # The first input bits of the block now follow the serial pin.
        assert ctx.get(dut.s_axis.tvalid) in (0, 1)
        assert ctx.get(dut.s_axis.tdata) & 0xFF == 0xFF

    sim.add_testbench(bench)
    sim.run()
