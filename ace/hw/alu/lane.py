"""One 32-bit lane of the reduction ALU array.

A lane holds one int32/fp32 element or two fp16/bf16 elements (element ``2n`` in bits
``[15:0]``, ``2n+1`` in bits ``[31:16]``)::

                          +--> SimdFpAdder (fp32, or 2 x bf16, or 2 x fp16) ------+  float sum
    a, b --> operand  ----+--> int32 add | MinMaxUnit (or copy a) --> delay line -+  the rest
    op,      registers    +--> float sum? -----------------------> delay line --> select --> result
    dtype

The operands are registered on entry (stage 0, clock domain ``sync``), so the lane's logic
starts from registers whatever drives it: three copies, one for the adder, one for the max/min
unit and one for the rest, so that each drives only its own logic (when the lane, the adder and
the max/min unit are kept as modules of their own in FPGA synthesis, ``docs/synthesis.md``;
flattened, yosys merges them back into one). Every path then has the adder's latency, so a
new beat of any op and dtype can enter on every cycle. The stages after the operand registers
(the adder, the max/min unit and the delay line) are in clock domain ``pipe``; each loads only
when the stage before it holds a valid beat (``valid``: a valid bit travels beside the stages,
so each stage's clock enable is a register of its own). The array tracks which results are
valid. The delay line is two registers up to the max/min unit's result, then a ring of LUT RAM
for the adder's remaining ten cycles (``DelayLine``: on ECP5 nine ``DPR16X4`` cells instead of
about 340 flip-flops per lane), written only with a valid beat.

With ``gated_stages`` (the array's gated-clock form) the adder's stages are clock domain ``fp``,
the max/min unit's ``max_min`` and the delay line ``other``, instead of ``pipe``. The array
clocks ``fp`` only while a floating-point sum is in the stages, ``max_min`` only while a max
or min is in the unit and ``other`` only while a beat that is not a floating-point sum is in
the delay line (a copy enters it directly, without the max/min unit), so a cycle-based
simulator evaluates each unit only for its own ops; ``fp_result`` (from the array) picks the
result.
"""


from amaranth.hdl import Cat, DomainRenamer, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ace.hw.alu.minmax import MinMaxUnit
from ace.hw.alu.simd_add import SimdFpAdder
from ace.hw.common.delay_line import DelayLine
from ace.layouts import Dtype, ReduceOp

__all__ = ["AluLane"]


class AluLane(wiring.Component):
    """One 32-bit lane: ``sum``/``max``/``min``/``copy`` of int32, fp32, bf16 and fp16.

    Latency is :attr:`latency` (13) cycles: the operand registers (1) and the SIMD adder (12).
    Operands in cycle ``t`` give the result in cycle ``t + latency``; throughput is one
    operation (one 32-bit lane word) per cycle, for any mix of ops and dtypes from cycle to
    cycle. ``result`` is a multiplexer (combinational) of the adder's result register and the
    delay line's LUT-RAM read.

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
    valid : In(1, init=1)
        Not with ``gated_stages``. The operands are a beat. Each stage after the operand
        registers (in the adder, the max/min unit and the delay lines) loads only when the
        stage before it holds a valid beat, so that idle stages hold (saving their switching
        power) and each stage's enable is a register of its own, driving only that stage.
        Results of valid beats do not depend on it; tie to 1 to move every cycle.
    fp_result : In(1)
        Only with ``gated_stages``: the result of this cycle is a floating-point sum.
    result : Out(32)
        Result of the operands presented :attr:`latency` cycles earlier.

    Parameters
    ----------
    gated_stages : bool
        The stages in clock domains ``fp``, ``max_min`` and ``other`` (module docstring) instead of
        ``pipe``, and ``fp_result`` an input; default False.
    """

    #: Pipeline depth in cycles: operand registers plus the SIMD adder.
    LATENCY = 1 + SimdFpAdder.LATENCY

    def __init__(self, gated_stages: bool = False):
        self.gated_stages = gated_stages
        super().__init__({
            "a": In(32), "b": In(32), "op": In(ReduceOp), "dtype": In(Dtype),
            **({"fp_result": In(1)} if gated_stages else {"valid": In(1, init=1)}),
            "result": Out(32),
        })

    @property
    def latency(self) -> int:
        """Cycles from operands to result: operand registers plus the adder (13)."""
        return self.LATENCY

    @staticmethod
    def is_max_min(op):
        """The beat is a max or a min."""
        return (op == ReduceOp.MAX) | (op == ReduceOp.MIN)

    @staticmethod
    def is_fp_sum(op, dtype):
        """The beat's result comes from the adder: a sum of a float dtype (SUM is 0 and INT32
        is 0; written so that no 2-bit logical NOT appears in the Verilog)."""
        return ~op.as_value().any() & dtype.as_value().any()

    def elaborate(self, platform):
        m = Module()

        # Operand registers (stage 0): one copy per consumer, so that each drives only its own
        # logic. The adder and the max/min unit register their own (in this ``sync`` domain,
        # their stages in ``pipe``, or ``fp`` and ``max_min``); these feed the int32 sum, copy
        # and the result choice.
        a = Signal(32, name="s0_a")
        b = Signal(32, name="s0_b")
        op = Signal(ReduceOp, name="s0_op")
        dtype = Signal(Dtype, name="s0_dtype")
        m.d.sync += [a.eq(self.a), b.eq(self.b), op.eq(self.op), dtype.eq(self.dtype)]

        gated = self.gated_stages
        stages = DomainRenamer({"operands": "sync"} if gated
                               else {"sync": "pipe", "operands": "sync"})
        if not gated:
            valid = Signal(name="s0_valid", init=1)
            m.d.sync += valid.eq(self.valid)
        adder = SimdFpAdder(input_domain="operands", stage_domain="fp" if gated else None)
        minmax = MinMaxUnit(input_domain="operands", stage_domain="max_min" if gated else None)
        m.submodules.adder = stages(adder)
        m.submodules.minmax = stages(minmax)
        m.d.comb += [
            adder.a.eq(self.a), adder.b.eq(self.b), adder.dtype.eq(self.dtype),
            minmax.a.eq(self.a), minmax.b.eq(self.b), minmax.dtype.eq(self.dtype),
            minmax.is_max.eq(self.op == ReduceOp.MAX),
            minmax.pass_a.eq(self.op == ReduceOp.COPY),
        ]
        if not gated:
            m.d.comb += [adder.valid.eq(self.valid), minmax.valid.eq(self.valid)]
        assert adder.latency == self.LATENCY

        # Everything that is not a floating-point sum is computed in the cycles after the
        # operand registers (int32 sum in one; max, min and copy in the max/min unit's
        # latency) and then delayed to line up with the adder. d{k} holds what the operands of
        # k + 1 cycles earlier gave, up to the max/min unit's result; a delay line in LUT RAM
        # (``DelayLine``) takes the rest of the adder's latency. int32 sums wrap. With
        # gated_stages a copy enters the delay here, without the max/min unit (``max_min`` is
        # clocked only for max/min).
        direct = Signal(32, name="direct")
        m.d.comb += direct.eq(Mux(op == ReduceOp.COPY, a, a + b) if gated else a + b)
        fp_sum = Signal(name="fp_sum")
        m.d.comb += fp_sum.eq(self.is_fp_sum(op, dtype))
        # The max/min unit's result: MAX, MIN or COPY (MAX or MIN with gated_stages).
        is_minmax = self.is_max_min(op) if gated else op.as_value().any()

        # Each delay stage loads only when the stage before it holds a valid beat (with
        # gated_stages, domain ``other``, clocked by the array).
        prev_simple, prev_fp_sum, prev_minmax = direct, fp_sum, is_minmax
        prev_valid = None if gated else valid
        for stage in range(1, minmax.latency):
            d_simple = Signal(32, name=f"d{stage}_simple")
            d_minmax = Signal(name=f"d{stage}_minmax")
            if gated:
                m.d.other += [d_simple.eq(prev_simple), d_minmax.eq(prev_minmax)]
                prev_simple, prev_minmax = d_simple, d_minmax
                continue
            d_fp_sum = Signal(name=f"d{stage}_fp_sum")
            d_valid = Signal(name=f"d{stage}_valid", init=1)
            with m.If(prev_valid):
                m.d.pipe += [d_simple.eq(prev_simple), d_fp_sum.eq(prev_fp_sum),
                             d_minmax.eq(prev_minmax)]
            m.d.pipe += d_valid.eq(prev_valid)
            prev_simple, prev_fp_sum, prev_minmax = d_simple, d_fp_sum, d_minmax
            prev_valid = d_valid
        simple = Mux(prev_minmax, minmax.result, prev_simple)

        # The rest of the latency: the value (and, ungated, whether the beat is a float sum)
        # through a delay line, written with a valid beat (ungated).
        tail = DelayLine(width=32 if gated else 33, delay=self.LATENCY - minmax.latency)
        m.submodules.tail = DomainRenamer("other" if gated else "pipe")(tail)
        if gated:
            m.d.comb += tail.i.eq(simple)
            select_fp, tail_simple = self.fp_result, tail.o
        else:
            m.d.comb += [tail.i.eq(Cat(simple, prev_fp_sum)), tail.i_en.eq(prev_valid)]
            select_fp, tail_simple = tail.o[32], tail.o[:32]
        m.d.comb += self.result.eq(Mux(select_fp, adder.result, tail_simple))
        return m
