"""A pipelined IEEE-754 binary floating-point adder, parameterised by its format.

One adder design serves fp32 (8, 23), bf16 (8, 7) and fp16 (5, 10). It rounds to nearest,
ties to even, keeps subnormal inputs and outputs (no flush to zero), and rounds overflow to
infinity. Any NaN result is the canonical quiet NaN (sign 0, exponent all ones, top fraction
bit set); ``Inf + -Inf`` is NaN; an exact zero sum is ``+0`` unless both operands are ``-0``.

Pipeline (one register at the end of each stage)::

    a, b --> [1 unpack, compare |a| >= |b|, swap, exponent difference, special cases]
         --> [2 align the smaller significand: shift right with guard, round, sticky]
         --> [3 add or subtract the significands]
         --> [4 count leading zeros, normalise (left shift clamped at the subnormal
                 boundary, or right by one on carry)]
         --> [5 round to nearest even, detect overflow, pack, substitute Inf/NaN] --> result

Why three extra bits suffice: the smaller significand is shifted right with the bits shifted
out ORed into the lowest of three extra bits ("jamming"), which rounds it to odd at that
granularity. When bits are lost (exponent difference >= 2) the difference loses at most one
leading bit, so the final rounding is at least two bits coarser than the jammed bit, and
rounding to odd followed by rounding to nearest two or more bits higher is correct rounding.
With a difference of 0 or 1 nothing is lost and the result is exact before rounding.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["FpAdder", "leading_zeros"]


def leading_zeros(value):
    """Combinational leading-zero count of ``value`` (a tree of 2:1 multiplexers).

    Returns a value equal to ``len(value)`` when ``value`` is zero. The operand is padded at the
    bottom with a one up to a power of two, so the count never exceeds ``len(value)``.
    """
    width = len(value)
    padded_width = 1
    while padded_width < width + 1:
        padded_width *= 2
    pad = padded_width - width
    padded = Cat(Const((1 << pad) - 1, pad), value)

    def count(bits):
        # Returns (all bits zero, leading zeros of bits); len(bits) is a power of two.
        if len(bits) == 1:
            return ~bits[0], Const(0, 0)
        half = len(bits) // 2
        zero_hi, count_hi = count(bits[half:])
        zero_lo, count_lo = count(bits[:half])
        return zero_hi & zero_lo, Mux(zero_hi, Cat(count_lo, Const(1, 1)),
                                      Cat(count_hi, Const(0, 1)))

    return count(padded)[1]


class FpAdder(wiring.Component):
    """IEEE-754 adder for a binary format with ``exp_bits`` exponent and ``man_bits`` fraction
    bits; see the module docstring for the numerics and the pipeline.

    Latency is :attr:`latency` (5) cycles: operands presented in cycle ``t`` give the result in
    cycle ``t + latency``. Throughput is one addition per cycle. The pipeline has no enable and
    no valid bits: it computes on every cycle, and the caller tracks which results are valid.

    Parameters
    ----------
    exp_bits : int
        Exponent field width (fp32 and bf16: 8, fp16: 5).
    man_bits : int
        Fraction field width, without the hidden bit (fp32: 23, bf16: 7, fp16: 10).

    Members
    -------
    a : In(1 + exp_bits + man_bits)
        First operand, IEEE-754 bit pattern.
    b : In(1 + exp_bits + man_bits)
        Second operand.
    result : Out(1 + exp_bits + man_bits)
        ``a + b`` of the operands presented :attr:`latency` cycles earlier.
    """

    #: Pipeline depth in cycles, the same for every format.
    LATENCY = 5

    def __init__(self, exp_bits: int, man_bits: int):
        if not 2 <= exp_bits <= 11 or not 2 <= man_bits <= 52:
            raise ValueError(f"exp_bits {exp_bits} / man_bits {man_bits} out of range; "
                             "allowed: 2..11 exponent bits and 2..52 fraction bits")
        self.exp_bits = exp_bits
        self.man_bits = man_bits
        width = 1 + exp_bits + man_bits
        super().__init__({"a": In(width), "b": In(width), "result": Out(width)})

    @property
    def latency(self) -> int:
        """Cycles from operands to result."""
        return self.LATENCY

    def elaborate(self, platform):
        m = Module()
        E, M = self.exp_bits, self.man_bits
        P = M + 1           # significand bits, hidden bit included
        W = P + 3           # aligned significand: guard, round and sticky bits below
        EMAX = (1 << E) - 1

        # -- stage 1: unpack, compare magnitudes, swap, special cases --------------------------
        def unpack(x, name):
            sign, exp, frac = x[E + M], x[M:M + E], x[:M]
            normal = exp.any()
            eff_exp = Signal(E, name=f"{name}_eff_exp")
            m.d.comb += eff_exp.eq(Mux(normal, exp, 1))       # subnormals use exponent 1
            is_max = exp == EMAX
            return dict(sign=sign, eff_exp=eff_exp, sig=Cat(frac, normal), mag=x[:E + M],
                        nan=is_max & frac.any(), inf=is_max & ~frac.any())

        ua, ub = unpack(self.a, "a"), unpack(self.b, "b")
        swap = Signal(name="s0_swap")   # |b| > |a|: b becomes the larger operand x
        m.d.comb += swap.eq(ub["mag"] > ua["mag"])

        s1_sx, s1_sy, s1_sub = Signal(name="s1_sx"), Signal(name="s1_sy"), Signal(name="s1_sub")
        s1_ex, s1_d = Signal(E, name="s1_ex"), Signal(E, name="s1_d")
        s1_mx, s1_my = Signal(P, name="s1_mx"), Signal(P, name="s1_my")
        s1_nan, s1_inf = Signal(name="s1_nan"), Signal(name="s1_inf")
        s1_inf_sign = Signal(name="s1_inf_sign")
        m.d.sync += [
            s1_sx.eq(Mux(swap, ub["sign"], ua["sign"])),
            s1_sy.eq(Mux(swap, ua["sign"], ub["sign"])),
            s1_sub.eq(ua["sign"] ^ ub["sign"]),
            s1_ex.eq(Mux(swap, ub["eff_exp"], ua["eff_exp"])),
            s1_d.eq(Mux(swap, ub["eff_exp"] - ua["eff_exp"], ua["eff_exp"] - ub["eff_exp"])),
            s1_mx.eq(Mux(swap, ub["sig"], ua["sig"])),
            s1_my.eq(Mux(swap, ua["sig"], ub["sig"])),
            s1_nan.eq(ua["nan"] | ub["nan"]
                      | (ua["inf"] & ub["inf"] & (ua["sign"] ^ ub["sign"]))),
            s1_inf.eq(ua["inf"] | ub["inf"]),
            s1_inf_sign.eq(Mux(ua["inf"], ua["sign"], ub["sign"])),
        ]

        # -- stage 2: align y to x, jamming the bits shifted out into the sticky bit -----------
        shift = Signal(range(W + 1), name="s1_shift")
        m.d.comb += shift.eq(Mux(s1_d > W, W, s1_d))
        wide = Signal(2 * W, name="s1_wide")        # upper half: y aligned; lower: shifted out
        m.d.comb += wide.eq(Cat(Const(0, W), Const(0, 3), s1_my) >> shift)

        s2_sx, s2_sy, s2_sub = Signal(name="s2_sx"), Signal(name="s2_sy"), Signal(name="s2_sub")
        s2_ex = Signal(E, name="s2_ex")
        s2_x, s2_y = Signal(W, name="s2_x"), Signal(W, name="s2_y")
        s2_nan, s2_inf = Signal(name="s2_nan"), Signal(name="s2_inf")
        s2_inf_sign = Signal(name="s2_inf_sign")
        m.d.sync += [
            s2_sx.eq(s1_sx), s2_sy.eq(s1_sy), s2_sub.eq(s1_sub), s2_ex.eq(s1_ex),
            s2_x.eq(Cat(Const(0, 3), s1_mx)),
            s2_y.eq(wide[W:] | wide[:W].any()),
            s2_nan.eq(s1_nan), s2_inf.eq(s1_inf), s2_inf_sign.eq(s1_inf_sign),
        ]

        # -- stage 3: add or subtract (|x| >= |y|, so the difference is never negative) --------
        s3_sum = Signal(W + 1, name="s3_sum")
        s3_sign, s3_ex = Signal(name="s3_sign"), Signal(E, name="s3_ex")
        s3_nan, s3_inf = Signal(name="s3_nan"), Signal(name="s3_inf")
        s3_inf_sign = Signal(name="s3_inf_sign")
        m.d.sync += [
            s3_sum.eq(Mux(s2_sub, s2_x - s2_y, s2_x + s2_y)),
            s3_sign.eq(s2_sx),
            s3_ex.eq(s2_ex),
            s3_nan.eq(s2_nan), s3_inf.eq(s2_inf), s3_inf_sign.eq(s2_inf_sign),
        ]
        # An exact zero sum is +0, or -0 when both operands are -0 (then s2_sub is 0).
        s3_both_neg = Signal(name="s3_both_neg")
        m.d.sync += s3_both_neg.eq(s2_sx & s2_sy)

        # -- stage 4: normalise -----------------------------------------------------------------
        # The leading one of s3_sum goes to bit W; the exponent becomes ex + 1 - shift. The
        # shift is clamped to ex, so the exponent never drops below 1: a result whose leading
        # one does not reach bit W after the clamp is subnormal (or zero).
        lz = Signal(range(W + 2), name="s3_lz")
        m.d.comb += lz.eq(leading_zeros(s3_sum))
        norm_shift = Signal(range(W + 2), name="s3_norm_shift")
        m.d.comb += norm_shift.eq(Mux(lz > s3_ex, s3_ex, lz))
        normalised = Signal(W + 1, name="s3_normalised")
        m.d.comb += normalised.eq(s3_sum << norm_shift)
        zero = Signal(name="s3_zero")
        m.d.comb += zero.eq(~s3_sum.any())

        s4_sig = Signal(P, name="s4_sig")       # hidden bit and fraction, before rounding
        s4_round, s4_sticky = Signal(name="s4_round"), Signal(name="s4_sticky")
        s4_exp = Signal(E + 1, name="s4_exp")   # 1 .. EMAX; EMAX means overflow
        s4_sign = Signal(name="s4_sign")
        s4_nan, s4_inf = Signal(name="s4_nan"), Signal(name="s4_inf")
        s4_inf_sign = Signal(name="s4_inf_sign")
        m.d.sync += [
            s4_sig.eq(normalised[4:]),
            s4_round.eq(normalised[3]),
            s4_sticky.eq(normalised[:3].any()),
            s4_exp.eq(s3_ex + 1 - norm_shift),
            s4_sign.eq(Mux(zero, s3_both_neg, s3_sign)),
            s4_nan.eq(s3_nan), s4_inf.eq(s3_inf), s4_inf_sign.eq(s3_inf_sign),
        ]

        # -- stage 5: round to nearest even, pack ------------------------------------------------
        # Exponent field and fraction are incremented together, so a fraction carry moves a
        # subnormal to the smallest normal and the largest significand to the next binade.
        increment = Signal(name="s4_increment")
        m.d.comb += increment.eq(s4_round & (s4_sticky | s4_sig[0]))
        exp_field = Signal(E + 1, name="s4_exp_field")
        m.d.comb += exp_field.eq(Mux(s4_sig[P - 1], s4_exp, 0))
        rounded = Signal(E + 1 + M, name="s4_rounded")
        m.d.comb += rounded.eq(Cat(s4_sig[:M], exp_field) + increment)
        overflow = Signal(name="s4_overflow")
        m.d.comb += overflow.eq(rounded[M:] >= EMAX)

        canonical_nan = Const((EMAX << M) | (1 << (M - 1)), 1 + E + M)
        m.d.sync += self.result.eq(
            Mux(s4_nan, canonical_nan,
                Mux(s4_inf, Cat(Const(0, M), Const(EMAX, E), s4_inf_sign),
                    Mux(overflow, Cat(Const(0, M), Const(EMAX, E), s4_sign),
                        Cat(rounded[:E + M], s4_sign)))))
        return m
