"""A pipelined SIMD IEEE-754 adder: one fp32, or two bf16, or two fp16 additions per cycle.

A 32-bit word holds one fp32 element or two 16-bit elements (low half first). The adder keeps
one 32-bit significand datapath split into two 16-bit *segments*: for fp32 the segments work
as one 32-bit value (shifts and carries cross from one segment to the other), for bf16 and fp16
each segment holds one element and nothing crosses. Each segment (or the whole word for fp32)
holds a significand left-aligned under a zero carry bit::

    fp32 word      [31] carry | [30] hidden | [29:7] fraction | [6:0] guard bits
    fp16 segment   [15] carry | [14] hidden | [13:4] fraction | [3:0] guard bits
    bf16 segment   [15] carry | [14] hidden | [13:7] fraction | [6:0] guard bits

Numerics: round to nearest, ties to even; subnormal inputs and outputs kept (no flush to zero);
overflow rounds to infinity; any NaN result is the canonical quiet NaN; ``Inf + -Inf`` is NaN;
an exact zero sum is ``+0`` unless both operands are ``-0`` (``docs/numerics.md``).

Pipeline, one register at the end of each stage (latency :attr:`SimdFpAdder.LATENCY` = 7)::

    a, b --> [1 unpack, compare magnitudes, swap, exponent difference, special cases]
         --> [2 align the smaller significand: shift right by 16, 8, 4, jam into sticky]
         --> [3 align: shift right by 2, 1; OR the sticky bit in at the bottom]
         --> [4 add or subtract the segments; decode the sentinel bit from the exponent]
         --> [5 leading-zero count of (sum | sentinel)]
         --> [6 normalise: shift left by the count; exponent - count + 1]
         --> [7 round to nearest even, pack, detect overflow, substitute Inf/NaN] --> result

Why jamming is exact: the bits of the smaller significand shifted out of the segment are ORed
into its lowest bit, which rounds it to odd there. Bits are lost only when the exponent
difference exceeds the guard bits (>= 5), and then a subtraction loses at most one leading bit,
so the final rounding is at least three bits above the jammed bit, and rounding to odd
followed by rounding to nearest two or more bits higher is correct rounding.

The sentinel: the normalising shift must stop at the subnormal boundary (the exponent may not
drop below 1), so it is ``min(leading zeros, ex)`` where ``ex`` is the larger operand's
exponent. A one ORed into the count's input at bit ``top - ex`` makes the count itself stop
there, so no compare and clamp follows the count.
"""


from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ace.layouts import Dtype

__all__ = ["SimdFpAdder", "leading_zeros16"]

#: Per-element ("slot") state that travels beside the significands. The high slot serves
#: fp32 too: in fp32 mode both slots hold the fp32 element's values.
_Slot = data.StructLayout({
    "sign": 1,        # sign of the larger operand (stage 5 on: of the result)
    "both_neg": 1,    # both operands negative: an exact zero sum is -0
    "exp": 9,         # larger operand's effective exponent (stage 6 on: the result's)
    "nan": 1,         # the result is NaN
    "inf": 1,         # the result is an infinity (operand Inf)
    "inf_sign": 1,    # the sign of that infinity
})

_NAN15 = {True: 0x7E00, False: 0x7FC0}     # fp16 / bf16 (= fp32's high half) quiet NaN
_INF15 = {True: 0x7C00, False: 0x7F80}     # fp16 / bf16 (= fp32's high half) infinity


def leading_zeros16(value):
    """Combinational leading-zero count of a 16-bit value: (all zero, count 0..15 of the
    non-zero value); a tree of 2:1 multiplexers, four levels."""
    def count(bits):
        if len(bits) == 1:
            return ~bits[0], Const(0, 0)
        half = len(bits) // 2
        zero_hi, count_hi = count(bits[half:])
        zero_lo, count_lo = count(bits[:half])
        return zero_hi & zero_lo, Mux(zero_hi, Cat(count_lo, Const(1, 1)),
                                      Cat(count_hi, Const(0, 1)))
    assert len(value) == 16
    return count(value)


def _add_carry(x, y, carry_in):
    """``x + y + carry_in`` as one adder (one carry chain), ``len(x) + 1`` bits."""
    return (Cat(carry_in, x) + Cat(carry_in, y))[1:]


class SimdFpAdder(wiring.Component):
    """SIMD floating-point adder; see the module docstring for the numerics and the pipeline.

    Latency is :attr:`latency` (7) cycles: operands presented in cycle ``t`` give the result
    in cycle ``t + latency``. Throughput is one 32-bit word (one fp32 or two 16-bit additions)
    per cycle, with any dtype from cycle to cycle. The pipeline has no enable and no valid
    bits: it computes on every cycle, and the caller tracks which results are valid. The
    result comes from a register.

    Members
    -------
    a : In(32)
        First operand: one fp32 element or two bf16/fp16 elements (low half first).
    b : In(32)
        Second operand.
    dtype : In(Dtype)
        ``FP32``, ``BF16`` or ``FP16`` (``INT32`` gives an unspecified word).
    result : Out(32)
        ``a + b`` of the operands presented :attr:`latency` cycles earlier.
    """

    #: Pipeline depth in cycles, the same for every dtype.
    LATENCY = 7

    a: In(32)
    b: In(32)
    dtype: In(Dtype)
    result: Out(32)

    @property
    def latency(self) -> int:
        """Cycles from operands to result (7)."""
        return self.LATENCY

    def elaborate(self, platform):
        m = Module()
        # dtype travels down the pipeline; stage k reads dtypes[k - 1].
        dtypes = [self.dtype]
        for stage in range(1, self.LATENCY):
            dtype = Signal(Dtype, name=f"s{stage}_dtype")
            m.d.sync += dtype.eq(dtypes[-1])
            dtypes.append(dtype)

        s1 = self._unpack(m, dtypes[0])
        s2 = self._align(m, s1, dtypes[1], 2, levels=(4, 3, 2))
        s3 = self._align(m, s2, dtypes[2], 3, levels=(1, 0))
        s4 = self._add(m, s3, dtypes[3])
        s5 = self._count(m, s4, dtypes[4])
        s6 = self._normalise(m, s5, dtypes[5])
        self._round(m, s6, dtypes[6])
        return m

    @staticmethod
    def _modes(dtype):
        value = dtype.as_value()
        return ~value[1], value[1] & value[0]        # wide (INT32/FP32), fp16

    def _stage_regs(self, m, stage, **widths):
        """Named registers of one stage: ``name=width`` or ``name=layout``."""
        return {name: Signal(shape, name=f"s{stage}_{name}") for name, shape in widths.items()}

    # -- stage 1 ------------------------------------------------------------------------------
    def _fields(self, m, x, wide, fp16, name):
        """Unpack one operand: per slot (hi, lo) sign, effective exponent, NaN/Inf flags, and
        the significand word in the segmented layout."""
        slots = {}
        for slot, half in (("hi", x[16:]), ("lo", x[:16])):
            exp = Signal(8, name=f"{name}_{slot}_exp")
            m.d.comb += exp.eq(Mux(fp16, half[10:15], half[7:15]))
            normal = exp.any()
            frac_any = Mux(fp16, half[:10].any(), half[:7].any())
            if slot == "hi":
                frac_any = Mux(wide, x[:23].any(), frac_any)
            is_max = exp == Mux(fp16, 31, 255)
            sig = Signal(16, name=f"{name}_{slot}_sig")
            m.d.comb += sig.eq(Mux(fp16, Cat(Const(0, 4), half[:10], normal),
                                   Cat(Const(0, 7), half[:7], normal)))
            slots[slot] = dict(sign=half[15], exp=Mux(normal, exp, 1), normal=normal,
                               nan=is_max & frac_any, inf=is_max & ~frac_any, sig=sig)
        wide_sig = Cat(Const(0, 7), x[:23], slots["hi"]["normal"])
        sig = Signal(32, name=f"{name}_sig")
        m.d.comb += sig.eq(Mux(wide, wide_sig, Cat(slots["lo"]["sig"], slots["hi"]["sig"])))
        return slots, sig

    def _unpack(self, m, dtype):
        wide, fp16 = self._modes(dtype)
        fa, sig_a = self._fields(m, self.a, wide, fp16, "a")
        fb, sig_b = self._fields(m, self.b, wide, fp16, "b")

        # |b| > |a| per slot; the 32-bit compare is made of the two 16-bit ones.
        low_mask = Mux(wide, 0xFFFF, 0x7FFF)
        gt_lo = Signal(name="s0_gt_lo")
        gt_hi = Signal(name="s0_gt_hi")
        eq_hi = Signal(name="s0_eq_hi")
        m.d.comb += [
            gt_lo.eq((self.b[:16] & low_mask) > (self.a[:16] & low_mask)),
            gt_hi.eq(self.b[16:31] > self.a[16:31]),
            eq_hi.eq(self.b[16:31] == self.a[16:31]),
        ]
        gt_wide = gt_hi | (eq_hi & gt_lo)
        swap = {"hi": Mux(wide, gt_wide, gt_hi), "lo": Mux(wide, gt_wide, gt_lo)}

        r = self._stage_regs(m, 1, x=32, y=32, shift_hi=5, shift_lo=5, sub_hi=1, sub_lo=1,
                             slot_hi=_Slot, slot_lo=_Slot)
        limit = Mux(wide, 31, 15)
        for slot in ("hi", "lo"):
            a = fa["hi"] if slot == "hi" else {k: Mux(wide, fa["hi"][k], v)
                                                for k, v in fa["lo"].items() if k != "sig"}
            b = fb["hi"] if slot == "hi" else {k: Mux(wide, fb["hi"][k], v)
                                                for k, v in fb["lo"].items() if k != "sig"}
            s = swap[slot]
            shift_ab = Signal(8, name=f"s0_{slot}_shift_ab")
            shift_ba = Signal(8, name=f"s0_{slot}_shift_ba")
            m.d.comb += [shift_ab.eq(a["exp"] - b["exp"]), shift_ba.eq(b["exp"] - a["exp"])]
            shift_ab = Mux(shift_ab > limit, limit, shift_ab)
            shift_ba = Mux(shift_ba > limit, limit, shift_ba)
            m.d.sync += [
                r[f"shift_{slot}"].eq(Mux(s, shift_ba, shift_ab)),
                r[f"sub_{slot}"].eq(a["sign"] ^ b["sign"]),
            ]
            fields = {
                "sign": Mux(s, b["sign"], a["sign"]),
                "both_neg": a["sign"] & b["sign"],
                "exp": Mux(s, b["exp"], a["exp"]),
                "nan": a["nan"] | b["nan"] | (a["inf"] & b["inf"] & (a["sign"] ^ b["sign"])),
                "inf": a["inf"] | b["inf"],
                "inf_sign": Mux(a["inf"], a["sign"], b["sign"]),
            }
            m.d.sync += [r[f"slot_{slot}"][k].eq(v) for k, v in fields.items()]
        m.d.sync += [
            r["x"].eq(Cat(Mux(swap["lo"], sig_b[:16], sig_a[:16]),
                          Mux(swap["hi"], sig_b[16:], sig_a[16:]))),
            r["y"].eq(Cat(Mux(swap["lo"], sig_a[:16], sig_b[:16]),
                          Mux(swap["hi"], sig_a[16:], sig_b[16:]))),
        ]
        return r

    # -- stages 2 and 3 -------------------------------------------------------------------------
    def _align(self, m, prev, dtype, stage, levels):
        """Shift ``y`` right by the shift amount bits ``levels``; bits leaving a segment (the
        word's bottom for fp32) are ORed into that segment's sticky bit. The last alignment
        stage ORs the sticky bits into the segments' lowest bits."""
        wide, _ = self._modes(dtype)
        hi, lo = prev["y"][16:], prev["y"][:16]
        sticky_hi = prev.get("sticky_hi", Const(0, 1))
        sticky_lo = prev.get("sticky_lo", Const(0, 1))
        for k in levels:
            n = 1 << k
            shift_hi, shift_lo = prev["shift_hi"][k], prev["shift_lo"][k]
            sticky_hi = sticky_hi | (shift_hi & ~wide & hi[:n].any())
            sticky_lo = sticky_lo | (shift_lo & lo[:n].any())
            hi, lo = (Mux(shift_hi, hi[n:], hi),
                      Mux(shift_lo, Mux(wide, Cat(lo, hi)[n:n + 16], lo[n:]), lo))
        last = levels[-1] == 0
        r = self._stage_regs(m, stage, x=32, y=32, shift_hi=5, shift_lo=5, sub_hi=1,
                             sub_lo=1, slot_hi=_Slot, slot_lo=_Slot,
                             **({} if last else {"sticky_hi": 1, "sticky_lo": 1}))
        for name in ("x", "shift_hi", "shift_lo", "sub_hi", "sub_lo", "slot_hi", "slot_lo"):
            m.d.sync += r[name].eq(prev[name])
        if last:
            m.d.sync += r["y"].eq(Cat(lo | sticky_lo, hi | sticky_hi))
        else:
            m.d.sync += [r["y"].eq(Cat(lo, hi)),
                         r["sticky_hi"].eq(sticky_hi), r["sticky_lo"].eq(sticky_lo)]
        return r

    # -- stage 4 --------------------------------------------------------------------------------
    def _add(self, m, prev, dtype):
        """Add or subtract the segments (|x| >= |y| per element, so never negative); the
        carry crosses between the segments for fp32 only. Decode the sentinel."""
        wide, _ = self._modes(dtype)
        x, y = prev["x"], prev["y"]
        sub_hi, sub_lo = prev["sub_hi"], prev["sub_lo"]
        sum_lo = Signal(17, name="s3_sum_lo")
        m.d.comb += sum_lo.eq(_add_carry(x[:16], Mux(sub_lo, ~y[:16], y[:16]), sub_lo))
        sum_hi = _add_carry(x[16:], Mux(sub_hi, ~y[16:], y[16:]),
                            Mux(wide, sum_lo[16], sub_hi))
        ex_hi, ex_lo = prev["slot_hi"].exp, prev["slot_lo"].exp
        top32, top16 = Const(1 << 31, 32), Const(1 << 15, 16)

        r = self._stage_regs(m, 4, sum=32, sentinel=32, slot_hi=_Slot, slot_lo=_Slot)
        m.d.sync += [
            r["sum"].eq(Cat(sum_lo[:16], sum_hi[:16])),
            r["sentinel"].eq(Mux(wide, top32 >> ex_hi, Cat(top16 >> ex_lo, top16 >> ex_hi))),
            r["slot_hi"].eq(prev["slot_hi"]),
            r["slot_lo"].eq(prev["slot_lo"]),
        ]
        return r

    # -- stage 5 --------------------------------------------------------------------------------
    def _count(self, m, prev, dtype):
        """Leading zeros of each segment (of the word for fp32), stopped by the sentinel at
        the subnormal boundary; the sign of an exact zero sum."""
        wide, _ = self._modes(dtype)
        marked = prev["sum"] | prev["sentinel"]
        zero_hi, count_hi = leading_zeros16(marked[16:])
        zero_lo, count_lo = leading_zeros16(marked[:16])
        lz_hi = Mux(zero_hi, 16, count_hi)
        lz_lo = Mux(zero_lo, 16, count_lo)
        lz_wide = Mux(zero_hi, 16 + lz_lo, count_hi)
        sum_zero_hi = ~prev["sum"][16:].any()
        sum_zero_lo = ~prev["sum"][:16].any()
        zero = {"hi": Mux(wide, sum_zero_hi & sum_zero_lo, sum_zero_hi),
                "lo": Mux(wide, sum_zero_hi & sum_zero_lo, sum_zero_lo)}

        r = self._stage_regs(m, 5, sum=32, shift_hi=6, shift_lo=6, slot_hi=_Slot, slot_lo=_Slot)
        m.d.sync += [
            r["sum"].eq(prev["sum"]),
            r["shift_hi"].eq(Mux(wide, lz_wide, lz_hi)),
            r["shift_lo"].eq(Mux(wide, lz_wide, lz_lo)),
        ]
        for slot in ("hi", "lo"):
            p = prev[f"slot_{slot}"]
            m.d.sync += [
                r[f"slot_{slot}"].eq(p),
                r[f"slot_{slot}"].sign.eq(Mux(zero[slot], p.both_neg, p.sign)),
            ]
        return r

    # -- stage 6 --------------------------------------------------------------------------------
    def _normalise(self, m, prev, dtype):
        """Shift each segment (the word for fp32) left by its count, so the leading one
        reaches the carry bit unless the result is subnormal; exponent ``ex + 1 - count``."""
        wide, _ = self._modes(dtype)
        hi, lo = prev["sum"][16:], prev["sum"][:16]
        for k in (4, 3, 2, 1, 0):
            n = 1 << k
            shift_hi, shift_lo = prev["shift_hi"][k], prev["shift_lo"][k]
            hi, lo = (Mux(shift_hi, Mux(wide, Cat(lo, hi)[16 - n:32 - n],
                                        Cat(Const(0, n), hi)[:16]), hi),
                      Mux(shift_lo, Cat(Const(0, n), lo)[:16], lo))
        r = self._stage_regs(m, 6, sum=32, slot_hi=_Slot, slot_lo=_Slot)
        m.d.sync += r["sum"].eq(Cat(lo[:16], hi[:16]))
        for slot in ("hi", "lo"):
            p = prev[f"slot_{slot}"]
            m.d.sync += [
                r[f"slot_{slot}"].eq(p),
                r[f"slot_{slot}"].exp.eq(p.exp + 1 - prev[f"shift_{slot}"]),
            ]
        return r

    # -- stage 7 --------------------------------------------------------------------------------
    def _round(self, m, prev, dtype):
        """Round to nearest even and pack. The increment is added to ``{exponent, fraction}``
        so a fraction carry moves a subnormal to the smallest normal and the largest
        significand to the next binade; an exponent reaching all ones is overflow (Inf)."""
        wide, fp16 = self._modes(dtype)
        n = prev["sum"]
        slot_hi, slot_lo = prev["slot_hi"], prev["slot_lo"]

        def rounding(lsb, round_bit, sticky_bits):
            return round_bit & (lsb | sticky_bits.any())

        def half(seg, exp):          # packed {exponent, fraction} (15 bits) and increment
            fp16_exp = Mux(seg[15], exp[:5], 0)
            bf16_exp = Mux(seg[15], exp[:8], 0)
            return (Mux(fp16, Cat(seg[5:15], fp16_exp), Cat(seg[8:15], bf16_exp)),
                    Mux(fp16, rounding(seg[5], seg[4], seg[:4]),
                        rounding(seg[8], seg[7], seg[:7])))

        packed_hi, inc_hi = half(n[16:], slot_hi.exp)
        packed_lo, inc_lo = half(n[:16], slot_lo.exp)
        wide_packed = Cat(n[8:31], Mux(n[31], slot_hi.exp[:8], 0))
        wide_inc = rounding(n[8], n[7], n[:7])
        packed = Signal(32, name="s6_packed")
        m.d.comb += packed.eq(Mux(wide, wide_packed, Cat(packed_lo, Const(0, 1), packed_hi)))
        rounded_lo = Signal(17, name="s6_rounded_lo")
        m.d.comb += rounded_lo.eq(packed[:16] + Mux(wide, wide_inc, inc_lo))
        rounded = Signal(32, name="s6_rounded")
        m.d.comb += rounded.eq(Cat(rounded_lo[:16],
                                   packed[16:] + Mux(wide, rounded_lo[16], inc_hi)))

        def overflow(seg):      # rounded exponent >= all ones (the sign bit is its carry)
            return Mux(fp16, seg[10:16] >= 31, seg[7:16] >= 255)

        def special(slot, ovf):
            is_special = slot.nan | slot.inf | ovf
            sign = Mux(slot.nan, 0, Mux(slot.inf, slot.inf_sign, slot.sign))
            pattern = Mux(slot.nan, Mux(fp16, _NAN15[True], _NAN15[False]),
                          Mux(fp16, _INF15[True], _INF15[False]))
            return is_special, Cat(pattern[:15], sign)

        special_hi, pattern_hi = special(slot_hi, overflow(rounded[16:]))
        special_lo, pattern_lo = special(slot_lo, overflow(rounded[:16]))
        hi16 = Mux(special_hi, pattern_hi, Cat(rounded[16:31], slot_hi.sign))
        lo16 = Mux(wide, Mux(special_hi, 0, rounded[:16]),
                   Mux(special_lo, pattern_lo, Cat(rounded[:15], slot_lo.sign)))
        m.d.sync += self.result.eq(Cat(lo16, hi16))
