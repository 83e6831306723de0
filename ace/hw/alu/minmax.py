"""Shared max/min unit of one 32-bit ALU lane: one int32/fp32 element or two fp16/bf16 ones.

The order of two elements: if their signs differ, the negative one is less (for floats also
``-0 < +0``); if both are positive, the larger magnitude is larger; if both are negative, the
larger magnitude is less for floats and larger for int32 (two's complement), which orders
``-Inf < ... < -0 < +0 < ... < +Inf``. The magnitudes are compared per 16-bit half (bits 14..0,
in two short carry chains each way); for a 32-bit element the halves combine (high greater, or
high equal and low 16 bits greater). A NaN operand of a float element gives the canonical quiet
NaN for that element; ``pass_a`` (``COPY``) gives ``a``.

Latency 2 (3 with input registers): the magnitude compares and the parts of the NaN tests
(exponent all ones, fraction not zero, per field) end in registers with the operands, then the
order, the per-element choice and the NaN tests; the selection after them is combinational, so
``result`` is valid two cycles after the operands.
"""


from amaranth.hdl import Cat, DomainRenamer, EnableInserter, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ace.layouts import Dtype

__all__ = ["MinMaxUnit"]


class MinMaxUnit(wiring.Component):
    """``max``/``min`` of one lane (IEEE 754-2019 ``maximum``/``minimum`` for floats: NaN
    propagates as the canonical quiet NaN, ``-0 < +0``; signed for int32).

    Latency is :attr:`latency` (2, or 3 with ``input_domain``) cycles: operands in cycle ``t``
    give ``result`` in cycle ``t + latency``; one operation per cycle. ``result`` is a
    multiplexer after registers.

    Parameters
    ----------
    input_domain : str or None
        If given, the inputs are registered on entry in this clock domain (one more cycle) and
        the two stages follow in ``sync`` (a lane's own copy of the operand registers for this
        unit, see :class:`~ace.hw.alu.simd_add.SimdFpAdder`).
    stage_domain : str or None
        If given, both stages are in this clock domain, clocked by the caller, and ``valid``
        is unused (as in :class:`~ace.hw.alu.simd_add.SimdFpAdder`).

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
    pass_a : In(1)
        1: the result is ``a``, unchanged (the lane's ``copy``); ``is_max`` and ``dtype`` do
        not matter.
    valid : In(1, init=1)
        The operands are valid: each stage loads only when the stage before it holds valid
        operands (:class:`~ace.hw.alu.simd_add.SimdFpAdder`). Leave at 1 to move every cycle.
    result : Out(32)
        The selected operand per element, or the canonical NaN, of the operands presented
        :attr:`latency` cycles earlier.
    """

    #: Cycles from operands to result (without input registers).
    LATENCY = 2

    a: In(32)
    b: In(32)
    dtype: In(Dtype)
    is_max: In(1)
    pass_a: In(1)
    valid: In(1, init=1)
    result: Out(32)

    def __init__(self, input_domain: str | None = None, stage_domain: str | None = None):
        self.input_domain = input_domain
        self.stage_domain = stage_domain
        super().__init__()

    @property
    def latency(self) -> int:
        """Cycles from operands to result: 2, or 3 with input registers."""
        return self.LATENCY + (self.input_domain is not None)

    @staticmethod
    def _nan_parts(m, x, name):
        """Stage 1 of the NaN tests of one operand: per 16-bit half, exponent all ones (8-bit
        field: bf16, and fp32 in the high half; 5-bit field: fp16) and the fraction bits not
        zero in pieces (bits 6..0, 9..7 and, for fp32's low fraction bits, the whole low half),
        each at most 16 inputs."""
        parts = {}
        for slot, half in (("lo", x[:16]), ("hi", x[16:])):
            for field, value in (("e8", half[7:15].all()), ("e5", half[10:15].all()),
                                 ("f7", half[:7].any()), ("f3", half[7:10].any())):
                parts[f"{field}_{slot}"] = reg = Signal(name=f"r_{name}_{field}_{slot}")
                m.d.stage1 += reg.eq(value)
        parts["any_lo"] = reg = Signal(name=f"r_{name}_any_lo")
        m.d.stage1 += reg.eq(x[:16].any())
        return parts

    def _nan_tests(self, m, a, b, dtype, pass_a):
        """Whether each element's result is NaN (a NaN operand of a float dtype), and the
        canonical NaN word of the dtype: the tests' parts in stage 1, their result in stage 2."""
        pa, pb = self._nan_parts(m, a, "a"), self._nan_parts(m, b, "b")
        r_dtype = Signal(Dtype, name="r_dtype")
        nan_word = Signal(32, name="r_nan_word")
        is_fp16 = dtype == Dtype.FP16
        is_bf16 = dtype == Dtype.BF16
        m.d.stage1 += [
            r_dtype.eq(dtype),
            nan_word.eq(Mux(is_fp16, 0x7E00_7E00, Mux(is_bf16, 0x7FC0_7FC0, 0x7FC0_0000))),
        ]

        def nan(p, slot):       # the element in this half is NaN, per dtype
            fp32 = p["e8_hi"] & (p["f7_hi"] | p["any_lo"])
            fp16 = p[f"e5_{slot}"] & (p[f"f7_{slot}"] | p[f"f3_{slot}"])
            bf16 = p[f"e8_{slot}"] & p[f"f7_{slot}"]
            return fp32, fp16, bf16

        nan_lo, nan_hi = Signal(name="rr_nan_lo"), Signal(name="rr_nan_hi")
        for reg, slot in ((nan_lo, "lo"), (nan_hi, "hi")):
            (a32, a16, ab16), (b32, b16, bb16) = nan(pa, slot), nan(pb, slot)
            m.d.stage2 += reg.eq((((r_dtype == Dtype.FP32) & (a32 | b32))
                                | ((r_dtype == Dtype.FP16) & (a16 | b16))
                                | ((r_dtype == Dtype.BF16) & (ab16 | bb16))) & ~pass_a)
        rr_nan_word = Signal(32, name="rr_nan_word")
        m.d.stage2 += rr_nan_word.eq(nan_word)
        return nan_lo, nan_hi, rr_nan_word

    def elaborate(self, platform):
        m = Module()
        a_in, b_in, dtype = self.a, self.b, self.dtype
        is_max, pass_a, valid = self.is_max, self.pass_a, self.valid
        if self.input_domain is not None:
            registers = []
            for value, name in ((a_in, "in_a"), (b_in, "in_b"), (dtype, "in_dtype"),
                                (is_max, "in_is_max"), (pass_a, "in_pass_a"),
                                (valid, "in_valid")):
                register = Signal.like(value, name=name)
                m.d[self.input_domain] += register.eq(value)
                registers.append(register)
            a_in, b_in, dtype, is_max, pass_a, valid = registers

        wide = Signal(name="wide")          # one 32-bit element
        is_float = Signal(name="is_float")
        m.d.comb += [
            wide.eq(~dtype.as_value()[1]),         # INT32 (0) or FP32 (1)
            is_float.eq(dtype.as_value().any()),  # every dtype but INT32 (0)
        ]

        # Stage 1: the magnitude compares of the halves' bits 14..0, each in two short carry
        # chains (bits 14..8 and 7..0, both ways), the NaN tests' parts and the operands are
        # registered.
        parts = {}
        for half, base in (("lo", 0), ("hi", 16)):
            for piece, (lo_bit, hi_bit) in (("h", (8, 15)), ("l", (0, 8))):
                x, y = a_in[base + lo_bit:base + hi_bit], b_in[base + lo_bit:base + hi_bit]
                for name, value in (("b_gt", y > x), ("a_gt", x > y)):
                    parts[name, half, piece] = reg = Signal(name=f"r_{name}_{half}_{piece}")
                    m.d.stage1 += reg.eq(value)
        r_wide, r_is_max = Signal(name="r_wide"), Signal(name="r_is_max")
        r_is_float, r_pass_a = Signal(name="r_is_float"), Signal(name="r_pass_a")
        r_a, r_b = Signal(32, name="r_a"), Signal(32, name="r_b")
        m.d.stage1 += [r_wide.eq(wide), r_is_max.eq(is_max), r_pass_a.eq(pass_a),
                       r_is_float.eq(is_float), r_a.eq(a_in), r_b.eq(b_in)]
        wide = r_wide

        # Stage 2: the order of the elements and the choice per element are registered.
        def magnitude(half):
            """(|b| > |a|, |a| > |b|) of a half's bits 14..0."""
            b_h, a_h = parts["b_gt", half, "h"], parts["a_gt", half, "h"]
            return (b_h | (~a_h & parts["b_gt", half, "l"]),
                    a_h | (~b_h & parts["a_gt", half, "l"]))

        def less(sign_a, sign_b, b_gt, a_gt, is_float):
            """a < b: signs differ, a negative; else by magnitude (reversed for two negative
            floats; two's complement keeps the order for int32). -0 < +0."""
            return ((sign_a & ~sign_b)
                    | (~(sign_a ^ sign_b) & Mux(sign_a & is_float, a_gt, b_gt)))

        b_gt_lo, a_gt_lo = magnitude("lo")
        b_gt_hi, a_gt_hi = magnitude("hi")
        # 32-bit magnitudes (bits 30..0): the high parts, or equal and the low 16 bits (bit
        # 15 a magnitude bit here).
        a15, b15 = r_a[15], r_b[15]
        b_gt16 = (b15 & ~a15) | (~(a15 ^ b15) & b_gt_lo)
        a_gt16 = (a15 & ~b15) | (~(a15 ^ b15) & a_gt_lo)
        eq_hi = ~b_gt_hi & ~a_gt_hi
        b_gt32 = b_gt_hi | (eq_hi & b_gt16)
        a_gt32 = a_gt_hi | (eq_hi & a_gt16)
        less_lo = Signal(name="less_lo")     # a < b for the low element (or the whole word)
        less_hi = Signal(name="less_hi")     # and for the high element
        less_wide = less(r_a[31], r_b[31], b_gt32, a_gt32, r_is_float)
        m.d.comb += [
            less_hi.eq(Mux(wide, less_wide, less(r_a[31], r_b[31], b_gt_hi, a_gt_hi, 1))),
            less_lo.eq(Mux(wide, less_wide, less(r_a[15], r_b[15], b_gt_lo, a_gt_lo, 1))),
        ]
        # max takes b when a < b; min takes b unless a < b (equal values are equal bits).
        pick_b_lo = Signal(name="rr_pick_b_lo")
        pick_b_hi = Signal(name="rr_pick_b_hi")
        a, b = Signal(32, name="rr_a"), Signal(32, name="rr_b")
        m.d.stage2 += [
            pick_b_lo.eq((less_lo == r_is_max) & ~r_pass_a),
            pick_b_hi.eq((less_hi == r_is_max) & ~r_pass_a),
            a.eq(r_a), b.eq(r_b),
        ]
        picked = Signal(32, name="picked")
        m.d.comb += picked.eq(Cat(Mux(pick_b_lo, b[:16], a[:16]), Mux(pick_b_hi, b[16:], a[16:])))

        nan_lo, nan_hi, nan_word = self._nan_tests(m, a_in, b_in, dtype, r_pass_a)
        m.d.comb += self.result.eq(Cat(Mux(nan_lo, nan_word[:16], picked[:16]),
                                       Mux(nan_hi, nan_word[16:], picked[16:])))

        if self.stage_domain is not None:
            return DomainRenamer({f"stage{k}": self.stage_domain
                                  for k in range(1, self.LATENCY + 1)})(m)
        # Each stage loads only when the stage before it holds valid operands (domains
        # ``stage1``, ``stage2`` until here, then ``sync`` with these enables).
        r_valid = Signal(name="r_valid", init=1)
        m.d.sync += r_valid.eq(valid)
        enables = {"stage1": valid, "stage2": r_valid}
        return DomainRenamer({name: "sync" for name in enables})(EnableInserter(enables)(m))
