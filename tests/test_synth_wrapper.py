"""The synthesis shell drives every input of the block and observes every output."""

from amaranth.back import verilog
from amaranth.hdl import Module
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from ace.config import NAMED_CONFIGS
from ace.flow.synth_wrapper import SerialShellWrapper
from ace.hw.tops import TOPS


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


class _StructPorts(wiring.Component):
    i: In(data.StructLayout({"addr": 4, "data": 8}))
    o: Out(data.StructLayout({"sum": 9}))

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.o.sum.eq(self.i.addr + self.i.data)
        return m


def test_shell_takes_struct_ports():
    """Ports that are views of a struct layout count by their bits."""
    text = verilog.convert(SerialShellWrapper(_StructPorts()), name="shell", emit_src=False)
    assert "reg [11:0] shift_in" in text and "reg [8:0] capture" in text
