"""One 32-bit lane of the reduction ALU array.

A lane holds one int32/fp32 element or two fp16/bf16 elements (element ``2n`` in bits
``[15:0]``, ``2n+1`` in bits ``[31:16]``)::

                          +--> SimdFpAdder (fp32, or 2 x bf16, or 2 x fp16) ------+  float sum
    a, b --> operand  ----+--> int32 add | copy a, MinMaxUnit --> delay line -----+  the rest
    op,      registers    +--> float sum? -----------------------> delay line --> select --> result
    dtype

The operands are registered on entry (stage 0, clock domain ``sync``), so the lane's logic
starts from registers whatever drives it: three copies, one for the adder, one for the max/min
unit and one for the rest, so that each drives only its own logic (when the lane, the adder and
the max/min unit are kept as modules of their own in FPGA synthesis, ``docs/synthesis.md``;
flattened, yosys merges them back into one). Every path then has the adder's latency, so a
new beat of any op and dtype can enter on every cycle. The stages after the operand registers (the
adder, the max/min unit and the delay lines) are in clock domain ``pipe``, which the array
holds while no beat is in them (:class:`~ace.hw.alu.array.AluArray`: a clock enable, or a gated
clock). The lane has no valid bits (the array tracks validity).
"""


from amaranth.hdl import DomainRenamer, EnableInserter, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ace.hw.alu.minmax import MinMaxUnit
from ace.hw.alu.simd_add import SimdFpAdder
from ace.layouts import Dtype, ReduceOp

__all__ = ["AluLane"]


class AluLane(wiring.Component):
    """One 32-bit lane: ``sum``/``max``/``min``/``copy`` of int32, fp32, bf16 and fp16.

    Latency is :attr:`latency` (13) cycles: the operand registers (1) and the SIMD adder (12).
    Operands in cycle ``t`` give the result in cycle ``t + latency``; throughput is one
    operation (one 32-bit lane word) per cycle, for any mix of ops and dtypes from cycle to
    cycle. ``result`` is a multiplexer (combinational) between two registers.

    Members
    -------
    a : In(32)
        First operand: one 32-bit element or two 16-bit elements, little-endian.
    b : In(32)
        Second operand.
    op : In(ReduceOp)
        Operation of this cycle's operands.
    dtype : In(Dtype)
        Element type of this cycle's operands.
    advance : In(1)
        High in a cycle when the stages after the operand registers (domain ``pipe``) must
        move at the end of the next cycle; the lane registers it (its own copy of the array's
        ``busy``) as the clock enable of those stages. Tie to 1 when ``pipe`` is a gated clock.
    result : Out(32)
        Result of the operands presented :attr:`latency` cycles earlier.
    """

    #: Pipeline depth in cycles: operand registers plus the SIMD adder.
    LATENCY = 1 + SimdFpAdder.LATENCY

    a: In(32)
    b: In(32)
    op: In(ReduceOp)
    dtype: In(Dtype)
    advance: In(1)
    result: Out(32)

    @property
    def latency(self) -> int:
        """Cycles from operands to result: operand registers plus the adder (13)."""
        return self.LATENCY

    def elaborate(self, platform):
        m = Module()

        # Operand registers (stage 0): one copy per consumer, so that each drives only its own
        # logic. The adder and the max/min unit register their own (in this ``sync`` domain,
        # their stages in ``pipe``); these feed the int32 sum, copy and the result choice.
        a = Signal(32, name="s0_a")
        b = Signal(32, name="s0_b")
        op = Signal(ReduceOp, name="s0_op")
        dtype = Signal(Dtype, name="s0_dtype")
        m.d.sync += [a.eq(self.a), b.eq(self.b), op.eq(self.op), dtype.eq(self.dtype)]

        # The stages move in the cycles after ``advance`` (a register of this lane, so that
        # each lane's enable has its own driver).
        busy = Signal(name="busy", init=1)
        m.d.sync += busy.eq(self.advance)

        def stages(unit):
            return EnableInserter({"pipe": busy})(
                DomainRenamer({"sync": "pipe", "operands": "sync"})(unit))

        m.submodules.adder = adder = stages(SimdFpAdder(input_domain="operands"))
        m.submodules.minmax = minmax = stages(MinMaxUnit(input_domain="operands"))
        m.d.comb += [
            adder.a.eq(self.a), adder.b.eq(self.b), adder.dtype.eq(self.dtype),
            minmax.a.eq(self.a), minmax.b.eq(self.b), minmax.dtype.eq(self.dtype),
            minmax.is_max.eq(self.op == ReduceOp.MAX),
        ]
        assert adder.latency == self.LATENCY

        # Everything that is not a floating-point sum is computed in the cycles after the
        # operand registers (int32 sum and copy in one, max/min in MinMaxUnit.LATENCY) and then
        # delayed to line up with the adder. d{k} holds what the operands of k + 1 cycles
        # earlier gave.
        direct = Signal(32, name="direct")
        m.d.comb += direct.eq(Mux(op == ReduceOp.COPY, a, a + b))     # int32 sum wraps
        fp_sum = Signal(name="fp_sum")
        # SUM is 0 and INT32 is 0: a sum of a float dtype (written so that no 2-bit logical
        # NOT appears in the Verilog).
        m.d.comb += fp_sum.eq(~op.as_value().any() & dtype.as_value().any())
        is_minmax = (op == ReduceOp.MAX) | (op == ReduceOp.MIN)

        prev_simple, prev_fp_sum, prev_minmax = direct, fp_sum, is_minmax
        for stage in range(1, self.LATENCY):
            if stage == minmax.latency:
                prev_simple = Mux(prev_minmax, minmax.result, prev_simple)
            d_simple = Signal(32, name=f"d{stage}_simple")
            d_fp_sum = Signal(name=f"d{stage}_fp_sum")
            d_minmax = Signal(name=f"d{stage}_minmax")
            with m.If(busy):
                m.d.pipe += [d_simple.eq(prev_simple), d_fp_sum.eq(prev_fp_sum),
                             d_minmax.eq(prev_minmax)]
            prev_simple, prev_fp_sum, prev_minmax = d_simple, d_fp_sum, d_minmax

        m.d.comb += self.result.eq(Mux(prev_fp_sum, adder.result, prev_simple))
        return m
