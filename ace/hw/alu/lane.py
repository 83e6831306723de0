"""One 32-bit lane of the reduction ALU array.

A lane holds one int32/fp32 element or two fp16/bf16 elements (element ``2n`` in bits
``[15:0]``, ``2n+1`` in bits ``[31:16]``)::

             +--> FpAdder(8, 23) -----------------------------------+  fp32 sum
             +--> FpAdder(8, 7) x2 (low, high half) ----------------+  bf16 sum
    a, b ----+--> FpAdder(5, 10) x2 (low, high half) ---------------+  fp16 sum
    op,      +--> int32 add | MinMaxUnit | copy a --> delay line ---+  everything else
    dtype    +--> op, dtype --------------------------> delay line --> select --> result

Every path has the same latency (the adders'), so a new beat of any op and dtype can enter on
every cycle. The lane is free-running: no enable, no valid bits (the array tracks validity).
"""


from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ace.hw.alu.minmax import MinMaxUnit
from ace.hw.alu.fp_add import FpAdder
from ace.layouts import Dtype, ReduceOp

__all__ = ["AluLane"]


class AluLane(wiring.Component):
    """One 32-bit lane: ``sum``/``max``/``min``/``copy`` of int32, fp32, bf16 and fp16.

    Latency is :attr:`latency` cycles (operands in cycle ``t``, result in cycle
    ``t + latency``); throughput is one operation (one 32-bit lane word) per cycle, for any mix
    of ops and dtypes from cycle to cycle.

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
    result : Out(32)
        Result of the operands presented :attr:`latency` cycles earlier.
    """

    #: Pipeline depth in cycles: the floating-point adders' depth.
    LATENCY = FpAdder.LATENCY

    a: In(32)
    b: In(32)
    op: In(ReduceOp)
    dtype: In(Dtype)
    result: Out(32)

    @property
    def latency(self) -> int:
        """Cycles from operands to result: the floating-point adders' latency."""
        return self.LATENCY

    def elaborate(self, platform):
        m = Module()

        m.submodules.add_fp32 = add_fp32 = FpAdder(8, 23)
        m.submodules.add_bf16_lo = add_bf16_lo = FpAdder(8, 7)
        m.submodules.add_bf16_hi = add_bf16_hi = FpAdder(8, 7)
        m.submodules.add_fp16_lo = add_fp16_lo = FpAdder(5, 10)
        m.submodules.add_fp16_hi = add_fp16_hi = FpAdder(5, 10)
        m.submodules.minmax = minmax = MinMaxUnit()
        m.d.comb += [
            add_fp32.a.eq(self.a), add_fp32.b.eq(self.b),
            add_bf16_lo.a.eq(self.a[:16]), add_bf16_lo.b.eq(self.b[:16]),
            add_bf16_hi.a.eq(self.a[16:]), add_bf16_hi.b.eq(self.b[16:]),
            add_fp16_lo.a.eq(self.a[:16]), add_fp16_lo.b.eq(self.b[:16]),
            add_fp16_hi.a.eq(self.a[16:]), add_fp16_hi.b.eq(self.b[16:]),
            minmax.a.eq(self.a), minmax.b.eq(self.b), minmax.dtype.eq(self.dtype),
            minmax.is_max.eq(self.op == ReduceOp.MAX),
        ]

        # Everything that is not a floating-point sum is computed in the first cycle and then
        # delayed to line up with the adders.
        simple = Signal(32, name="simple")
        with m.Switch(self.op):
            with m.Case(ReduceOp.SUM):
                m.d.comb += simple.eq(self.a + self.b)      # int32; wraps modulo 2**32
            with m.Case(ReduceOp.MAX, ReduceOp.MIN):
                m.d.comb += simple.eq(minmax.result)
            with m.Case(ReduceOp.COPY):
                m.d.comb += simple.eq(self.a)
        fp_sum = Signal(name="fp_sum")
        # SUM is 0 and INT32 is 0: a sum of a float dtype (written so that no 2-bit logical
        # NOT appears in the Verilog).
        m.d.comb += fp_sum.eq(~self.op.as_value().any() & self.dtype.as_value().any())

        prev_simple, prev_fp_sum, prev_dtype = simple, fp_sum, self.dtype
        for stage in range(self.latency):
            d_simple = Signal(32, name=f"d{stage}_simple")
            d_fp_sum = Signal(name=f"d{stage}_fp_sum")
            d_dtype = Signal(Dtype, name=f"d{stage}_dtype")
            m.d.sync += [d_simple.eq(prev_simple), d_fp_sum.eq(prev_fp_sum),
                         d_dtype.eq(prev_dtype)]
            prev_simple, prev_fp_sum, prev_dtype = d_simple, d_fp_sum, d_dtype

        fp_result = Signal(32, name="fp_result")
        m.d.comb += [
            fp_result.eq(Mux(prev_dtype == Dtype.FP32, add_fp32.result,
                             Mux(prev_dtype == Dtype.BF16,
                                 Cat(add_bf16_lo.result, add_bf16_hi.result),
                                 Cat(add_fp16_lo.result, add_fp16_hi.result)))),
            self.result.eq(Mux(prev_fp_sum, fp_result, prev_simple)),
        ]
        return m
