"""Pin-frugal wrapper for FPGA synthesis of a block whose ports outnumber the package's pins.

::

    sin --> [ input shift register ] --> DUT inputs
            DUT outputs --> [ capture / shift register ] --> sout
    load selects parallel capture (1) or shift (0) of the output register.

Every DUT input bit is driven by a flip-flop and every output bit is observed, so synthesis
removes nothing, and the wrapper's own paths are one LUT deep, leaving the DUT's internal paths
to set Fmax. The DUT is kept as a separate module so its resources can be reported on their own.
"""

from amaranth.hdl import Cat, Module, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["SerialShellWrapper"]


class SerialShellWrapper(wiring.Component):
    """Wrap ``dut`` (a Component) behind three pins.

    Members
    -------
    sin : In(1)
        Serial input, shifted into the input register every cycle.
    load : In(1)
        Capture the DUT outputs in parallel (1) or shift the output register (0).
    sout : Out(1)
        Serial output: the last bit of the output register.
    """

    sin: In(1)
    load: In(1)
    sout: Out(1)

    def __init__(self, dut: wiring.Component):
        super().__init__()
        self.dut = dut

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = self.dut
        inputs, outputs = [], []
        for _path, member, value in self.dut.signature.flatten(self.dut):
            (inputs if member.flow == In else outputs).append(Value.cast(value))
        in_width = sum(len(v) for v in inputs)
        out_width = sum(len(v) for v in outputs)
        shift_in = Signal(max(in_width, 1))
        capture = Signal(max(out_width, 1))
        m.d.sync += shift_in.eq(Cat(self.sin, shift_in[:-1]))
        if inputs:
            m.d.comb += Cat(*inputs).eq(shift_in)
        with m.If(self.load):
            m.d.sync += capture.eq(Cat(*outputs) if outputs else 0)
        with m.Else():
            m.d.sync += capture.eq(capture >> 1)
        m.d.comb += self.sout.eq(capture[0])
        return m
