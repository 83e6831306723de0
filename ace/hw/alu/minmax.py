"""Shared max/min unit of one 32-bit ALU lane: one int32/fp32 element or two fp16/bf16 ones.

Each operand is mapped to an unsigned key whose order is the numeric order: int32 flips the
sign bit; floats flip the sign bit of positive values and invert every bit of negative ones,
which orders ``-Inf < ... < -0 < +0 < ... < +Inf``. One comparator compares the two 16-bit
halves of the keys; the halves give the two 16-bit results, and together (high half less, or
equal and low half less) the 32-bit result. A NaN operand of a float element gives the
canonical quiet NaN for that element.

Latency 2: the keys and the NaN tests end in registers (with the operands), then the compares
and the per-element choice; the selection after them is combinational, so ``result`` is valid
two cycles after the operands.
"""


from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ace.layouts import Dtype

__all__ = ["MinMaxUnit"]


class MinMaxUnit(wiring.Component):
    """``max``/``min`` of one lane (IEEE 754-2019 ``maximum``/``minimum`` for floats: NaN
    propagates as the canonical quiet NaN, ``-0 < +0``; signed for int32).

    Latency is :attr:`latency` (2) cycles: operands in cycle ``t`` give ``result`` in cycle
    ``t + 2``; one operation per cycle. ``result`` is a multiplexer after registers.

    Members
    -------
    a : In(32)
        First operand lane: one 32-bit element, or two 16-bit elements (low half first).
    b : In(32)
        Second operand lane.
    dtype : In(Dtype)
        Element type.
    is_max : In(1)
        1 for ``max``, 0 for ``min``.
    result : Out(32)
        The selected operand per element, or the canonical NaN, of the operands presented
        :attr:`latency` cycles earlier.
    """

    #: Cycles from operands to result.
    LATENCY = 2

    a: In(32)
    b: In(32)
    dtype: In(Dtype)
    is_max: In(1)
    result: Out(32)

    @property
    def latency(self) -> int:
        """Cycles from operands to result (2)."""
        return self.LATENCY

    @staticmethod
    def _delay(m, value):
        delayed = Signal.like(value, name=f"r{value.name}")
        m.d.sync += delayed.eq(value)
        return delayed

    def _nan_tests(self, m):
        """Whether each element's result is NaN (a NaN operand of a float dtype), and the
        canonical NaN word of the dtype; registered twice, beside the two stages."""
        def nan16(x, exp_bits, man_bits):
            exp = x[man_bits:man_bits + exp_bits]
            return (exp == (1 << exp_bits) - 1) & x[:man_bits].any()

        def nan32(x):
            return x[23:31].all() & x[:23].any()

        nan_lo, nan_hi = Signal(name="r_nan_lo"), Signal(name="r_nan_hi")
        nan_word = Signal(32, name="r_nan_word")
        is_fp32 = self.dtype == Dtype.FP32
        is_fp16 = self.dtype == Dtype.FP16
        is_bf16 = self.dtype == Dtype.BF16
        nan_fp32 = nan32(self.a) | nan32(self.b)
        m.d.sync += [
            nan_lo.eq((is_fp32 & nan_fp32)
                      | (is_fp16 & (nan16(self.a[:16], 5, 10) | nan16(self.b[:16], 5, 10)))
                      | (is_bf16 & (nan16(self.a[:16], 8, 7) | nan16(self.b[:16], 8, 7)))),
            nan_hi.eq((is_fp32 & nan_fp32)
                      | (is_fp16 & (nan16(self.a[16:], 5, 10) | nan16(self.b[16:], 5, 10)))
                      | (is_bf16 & (nan16(self.a[16:], 8, 7) | nan16(self.b[16:], 8, 7)))),
            nan_word.eq(Mux(is_fp16, 0x7E00_7E00, Mux(is_bf16, 0x7FC0_7FC0, 0x7FC0_0000))),
        ]
        return self._delay(m, nan_lo), self._delay(m, nan_hi), self._delay(m, nan_word)

    def elaborate(self, platform):
        m = Module()
        wide = Signal(name="wide")          # one 32-bit element
        is_float = Signal(name="is_float")
        m.d.comb += [
            wide.eq(~self.dtype.as_value()[1]),         # INT32 (0) or FP32 (1)
            is_float.eq(self.dtype.as_value().any()),  # every dtype but INT32 (0)
        ]

        def keys(x, name):
            # Sign used by each half: bit 31 for 32-bit elements, the half's own top bit else.
            sign_hi = x[31]
            sign_lo = Mux(wide, x[31], x[15])
            flip_hi = Mux(is_float & sign_hi, 0xFFFF, 0x8000)
            flip_lo = Mux(wide,
                          Mux(is_float & sign_hi, 0xFFFF, 0x0000),
                          Mux(sign_lo, 0xFFFF, 0x8000))
            key = Signal(32, name=f"r_{name}_key")
            m.d.sync += key.eq(Cat(x[:16] ^ flip_lo, x[16:] ^ flip_hi))
            return key

        # Stage 1: the keys, the NaN tests and the operands are registered.
        key_a, key_b = keys(self.a, "a"), keys(self.b, "b")
        r_wide, r_is_max = Signal(name="r_wide"), Signal(name="r_is_max")
        r_a, r_b = Signal(32, name="r_a"), Signal(32, name="r_b")
        m.d.sync += [r_wide.eq(wide), r_is_max.eq(self.is_max), r_a.eq(self.a), r_b.eq(self.b)]
        wide = r_wide

        # Stage 2: the compares and the choice per element are registered.
        lt_lo = Signal(name="lt_lo")
        lt_hi = Signal(name="lt_hi")
        eq_hi = Signal(name="eq_hi")
        m.d.comb += [
            lt_lo.eq(key_a[:16] < key_b[:16]),
            lt_hi.eq(key_a[16:] < key_b[16:]),
            eq_hi.eq(key_a[16:] == key_b[16:]),
        ]
        # a < b for the low element (or the whole word) and for the high element.
        less_lo = Signal(name="less_lo")
        less_hi = Signal(name="less_hi")
        m.d.comb += [
            less_hi.eq(Mux(wide, lt_hi | (eq_hi & lt_lo), lt_hi)),
            less_lo.eq(Mux(wide, lt_hi | (eq_hi & lt_lo), lt_lo)),
        ]
        # max takes b when a < b; min takes b unless a < b (equal keys are equal bits).
        pick_b_lo = Signal(name="rr_pick_b_lo")
        pick_b_hi = Signal(name="rr_pick_b_hi")
        a, b = Signal(32, name="rr_a"), Signal(32, name="rr_b")
        m.d.sync += [
            pick_b_lo.eq(less_lo == r_is_max),
            pick_b_hi.eq(less_hi == r_is_max),
            a.eq(r_a), b.eq(r_b),
        ]
        picked = Signal(32, name="picked")
        m.d.comb += picked.eq(Cat(Mux(pick_b_lo, b[:16], a[:16]), Mux(pick_b_hi, b[16:], a[16:])))

        nan_lo, nan_hi, nan_word = self._nan_tests(m)
        m.d.comb += self.result.eq(Cat(Mux(nan_lo, nan_word[:16], picked[:16]),
                                       Mux(nan_hi, nan_word[16:], picked[16:])))
        return m
