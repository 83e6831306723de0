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

Pipeline, one register at the end of each stage (latency :attr:`SimdFpAdder.LATENCY` = 12),
each stage a few LUT levels or one carry chain deep (ECP5 timing, ``docs/synthesis.md``)::

    a, b --> [1 unpack per dtype, special-value flags; magnitude compares of 7 and 8 bits]
         --> [2 order: |b| > |a| per element (joining the compares); both exponent differences]
         --> [3 swap so that |x| >= |y|; clamp and select the difference; NaN/Inf of the sum]
         --> [4 align the smaller significand: shift right by 16, 8, 4, jam into sticky;
                decode the sentinel bit]
         --> [5 align: shift right by 2, 1; OR the sticky bit in; complement y to subtract]
         --> [6 add or subtract the segments (one carry chain); OR the sentinel in]
         --> [7 leading-zero count of (sum | sentinel), by nibbles; sum zero?]
         --> [8 normalise: shift left by the count's 16 and 8 bits; sign of a zero sum]
         --> [9 normalise: shift left by 4, 2, 1; exponent + 1 - count]
         --> [10 round to nearest even: the increment, the packed {exponent, fraction}]
         --> [11 add the increment (one carry chain, cut between elements)]
         --> [12 detect overflow, substitute Inf/NaN, add the sign] --> result

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


from amaranth.hdl import Cat, Const, DomainRenamer, EnableInserter, Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ace.layouts import Dtype

__all__ = ["SimdFpAdder", "leading_zeros16"]

#: Per-element ("slot") state that travels beside the significands. The high slot serves
#: fp32 too: in fp32 mode both slots hold the fp32 element's values.
_Slot = data.StructLayout({
    "sign": 1,        # sign of the larger operand (stage 8 on: of the result)
    "both_neg": 1,    # both operands negative: an exact zero sum is -0
    "exp": 9,         # larger operand's effective exponent (stage 6 on: the result's)
    "nan": 1,         # the result is NaN
    "inf": 1,         # the result is an infinity (operand Inf)
    "inf_sign": 1,    # the sign of that infinity
})

#: One operand's per-element fields after unpacking (stage 1).
_Operand = data.StructLayout({"sign": 1, "exp": 8, "nan": 1, "inf": 1})

_NAN15 = {True: 0x7E00, False: 0x7FC0}     # fp16 / bf16 (= fp32's high half) quiet NaN
_INF15 = {True: 0x7C00, False: 0x7F80}     # fp16 / bf16 (= fp32's high half) infinity


def leading_zeros16(value):
    """Combinational leading-zero count of a 16-bit value: (all zero, count 0..15 of a
    non-zero value). Each nibble gives its own count and zero flag (one LUT4 each); the first
    non-zero nibble, a priority choice over four flags, selects one of them."""
    assert len(value) == 16
    nibbles = [value[4 * n:4 * n + 4] for n in range(4)]
    zeros = [~nibble.any() for nibble in nibbles]
    counts = [Mux(nibble[3], 0, Mux(nibble[2], 1, Mux(nibble[1], 2, 3))) for nibble in nibbles]
    index = Mux(~zeros[3], 0, Mux(~zeros[2], 1, Mux(~zeros[1], 2, 3)))
    count = Mux(~zeros[3], counts[3], Mux(~zeros[2], counts[2],
                                          Mux(~zeros[1], counts[1], counts[0])))
    return zeros[0] & zeros[1] & zeros[2] & zeros[3], Cat(count[:2], index[:2])


def _add_carry(x, y, carry_in):
    """``x + y + carry_in`` as one adder (one carry chain), ``len(x) + 1`` bits."""
    return (Cat(carry_in, x) + Cat(carry_in, y))[1:]


class SimdFpAdder(wiring.Component):
    """SIMD floating-point adder; see the module docstring for the numerics and the pipeline.

    Latency is :attr:`latency` (12, or 13 with ``input_domain``) cycles: operands presented in
    cycle ``t`` give the result in cycle ``t + latency``. Throughput is one 32-bit word (one
    fp32 or two 16-bit additions) per cycle, with any dtype from cycle to cycle. A valid bit
    travels beside the stages only to hold the stages that have no word to take (``valid``);
    the caller tracks which results are valid. The result comes from a register.

    Parameters
    ----------
    input_domain : str or None
        If given, the operands are registered on entry in this clock domain (one more cycle)
        and the twelve stages follow in ``sync``; a lane uses it to give the adder its own
        copy of the operand registers, ungated while its stages are clock-gated.
    stage_domain : str or None
        If given, every stage is in this clock domain, which the caller clocks only while a
        stage has a word to take; ``valid`` is then unused (no valid bit travels beside the
        stages). A lane's gated-clock form uses it (:class:`~ace.hw.alu.lane.AluLane`).

    Members
    -------
    a : In(32)
        First operand: one fp32 element or two bf16/fp16 elements (low half first).
    b : In(32)
        Second operand.
    dtype : In(Dtype)
        ``FP32``, ``BF16`` or ``FP16`` (``INT32`` gives an unspecified word).
    valid : In(1, init=1)
        The operands are a word to add. Each stage loads only when the stage before it holds
        a valid word, so invalid cycles leave the stages holding (their switching power
        saved); results of valid words do not depend on it. Leave at 1 to move every cycle.
    result : Out(32)
        ``a + b`` of the operands presented :attr:`latency` cycles earlier.
    """

    #: Pipeline depth in cycles, the same for every dtype (without input registers).
    LATENCY = 12

    a: In(32)
    b: In(32)
    dtype: In(Dtype)
    valid: In(1, init=1)
    result: Out(32)

    def __init__(self, input_domain: str | None = None, stage_domain: str | None = None):
        self.input_domain = input_domain
        self.stage_domain = stage_domain
        super().__init__()

    @property
    def latency(self) -> int:
        """Cycles from operands to result: 12, or 13 with input registers."""
        return self.LATENCY + (self.input_domain is not None)

    def elaborate(self, platform):
        m = Module()
        a, b, dtype, valid = self.a, self.b, self.dtype, self.valid
        modes_b = None
        if self.input_domain is not None:
            # The adder's own copy of the operands (a lane registers its operands once per
            # consumer, so that each copy drives only its own logic: docs/synthesis.md).
            a, b, dtype, valid = (
                self._register(m, self.input_domain, value, name)
                for value, name in ((a, "in_a"), (b, "in_b"), (dtype, "in_dtype"),
                                    (valid, "in_valid")))
            # Operand b's unpacking reads its own registers of the decoded modes (functions of
            # dtype, so yosys does not merge them with ``in_dtype``): half the loads each.
            modes_b = tuple(self._register(m, self.input_domain, mode, name) for mode, name
                            in zip(self._modes(self.dtype), ("in_wide_b", "in_fp16_b")))
        # dtype travels down the pipeline; stage k reads dtypes[k - 1]. The registers of
        # stage k are in clock domain ``stage{k}`` until the end, where they are given their
        # enables and merged into ``sync``.
        dtypes = [dtype]
        for stage in range(1, self.LATENCY):
            dtype = Signal(Dtype, name=f"s{stage}_dtype")
            m.d[f"stage{stage}"] += dtype.eq(dtypes[-1])
            dtypes.append(dtype)

        regs = self._unpack(m, a, b, dtypes[0], modes_b)
        regs = self._order(m, regs, dtypes[1])
        regs = self._swap(m, regs, dtypes[2])
        regs = self._align(m, regs, dtypes[3], 4, levels=(4, 3, 2))
        regs = self._align(m, regs, dtypes[4], 5, levels=(1, 0))
        regs = self._add(m, regs, dtypes[5])
        regs = self._count(m, regs, dtypes[6])
        regs = self._normalise(m, regs, dtypes[7], 8, levels=(4, 3))
        regs = self._normalise(m, regs, dtypes[8], 9, levels=(2, 1, 0))
        regs = self._round(m, regs, dtypes[9])
        regs = self._increment(m, regs, dtypes[10])
        self._pack(m, regs, dtypes[11])

        if self.stage_domain is not None:
            return DomainRenamer({f"stage{k}": self.stage_domain
                                  for k in range(1, self.LATENCY + 1)})(m)
        # Stage k loads only when stage k - 1 holds a valid word: its enable is that stage's
        # valid bit (a register of its own, driving one stage's flip-flops).
        valids = [valid]
        for stage in range(1, self.LATENCY):
            v = Signal(name=f"s{stage}_valid", init=1)
            m.d.sync += v.eq(valids[-1])
            valids.append(v)
        enables = {f"stage{k}": valids[k - 1] for k in range(1, self.LATENCY + 1)}
        return DomainRenamer({name: "sync" for name in enables})(EnableInserter(enables)(m))

    @staticmethod
    def _register(m, domain, value, name):
        register = Signal.like(value, name=name)
        m.d[domain] += register.eq(value)
        return register

    @staticmethod
    def _modes(dtype):
        value = dtype.as_value()
        return ~value[1], value[1] & value[0]        # wide (INT32/FP32), fp16

    @staticmethod
    def _stage_regs(stage, **shapes):
        """Named registers of one stage: ``name=width`` or ``name=layout``."""
        return {name: Signal(shape, name=f"s{stage}_{name}") for name, shape in shapes.items()}

    @staticmethod
    def _carry(m, stage, regs, prev, names):
        """Copy the registers ``names`` from the previous stage."""
        m.d[f"stage{stage}"] += [regs[name].eq(prev[name]) for name in names]

    # -- stage 1 ------------------------------------------------------------------------------
    def _fields(self, m, x, wide, fp16, name):
        """Unpack one operand: per slot (hi, lo) sign, effective exponent and NaN/Inf flags,
        and the significand word in the segmented layout."""
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
            slots[slot] = dict(sign=half[15], exp=Cat(exp[0] | ~normal, exp[1:]), normal=normal,
                               nan=is_max & frac_any, inf=is_max & ~frac_any, sig=sig)
        wide_sig = Cat(Const(0, 7), x[:23], slots["hi"]["normal"])
        sig = Signal(32, name=f"{name}_sig")
        m.d.comb += sig.eq(Mux(wide, wide_sig, Cat(slots["lo"]["sig"], slots["hi"]["sig"])))
        return slots, sig

    def _unpack(self, m, a, b, dtype, modes_b=None):
        """Per element of each 16-bit half: effective exponent (1 for subnormals), sign,
        NaN/Inf; the significand words; the magnitude compares of the halves (bits 14..0 of
        each), each in two parts, bits 14..8 and 7..0 (short carry chains straight from the
        operands; stage 2 joins them)."""
        wide, fp16 = self._modes(dtype)
        r = self._stage_regs(1, sig_a=32, sig_b=32,
                             gt_lo_h=1, eq_lo_h=1, gt_lo_l=1, gt_hi_h=1, eq_hi_h=1, gt_hi_l=1,
                             eq_hi_l=1, a_exp_lo=8, b_exp_lo=8,
                             a_hi=_Operand, a_lo=_Operand, b_hi=_Operand, b_lo=_Operand)
        for operand, x, modes in (("a", a, (wide, fp16)), ("b", b, modes_b or (wide, fp16))):
            slots, sig = self._fields(m, x, *modes, operand)
            m.d["stage1"] += r[f"sig_{operand}"].eq(sig)
            # The low slot's exponent for stage 2's differences: the fp32 element's for fp32.
            m.d["stage1"] += r[f"{operand}_exp_lo"].eq(Mux(modes[0], slots["hi"]["exp"],
                                                            slots["lo"]["exp"]))
            for slot in ("hi", "lo"):
                m.d["stage1"] += [r[f"{operand}_{slot}"][field].eq(slots[slot][field])
                             for field in ("sign", "exp", "nan", "inf")]
        for slot, base in (("lo", 0), ("hi", 16)):
            high, low = slice(base + 8, base + 15), slice(base, base + 8)
            m.d["stage1"] += [
                r[f"gt_{slot}_h"].eq(b[high] > a[high]),
                r[f"eq_{slot}_h"].eq(b[high] == a[high]),
                r[f"gt_{slot}_l"].eq(b[low] > a[low]),
            ]
        m.d["stage1"] += r["eq_hi_l"].eq(b[16:24] == a[16:24])
        return r

    # -- stage 2 ------------------------------------------------------------------------------
    def _order(self, m, prev, dtype):
        """|b| > |a| per element: the 32-bit compare is made of the 16-bit ones (high greater,
        or high equal and low greater), bit 15 joining the low one for fp32. Both exponent
        differences. In fp32 mode the low slot takes the fp32 element's fields."""
        wide, _ = self._modes(dtype)
        gt_lo = prev["gt_lo_h"] | (prev["eq_lo_h"] & prev["gt_lo_l"])      # bits 14..0
        gt_hi = prev["gt_hi_h"] | (prev["eq_hi_h"] & prev["gt_hi_l"])      # bits 30..16
        eq_hi = prev["eq_hi_h"] & prev["eq_hi_l"]
        a15, b15 = prev["a_lo"].sign, prev["b_lo"].sign
        gt_lo16 = (b15 & ~a15) | (~(a15 ^ b15) & gt_lo)
        gt_wide = gt_hi | (eq_hi & gt_lo16)
        r = self._stage_regs(2, sig_a=32, sig_b=32, swap_hi=1, swap_lo=1,
                             a_hi=_Operand, a_lo=_Operand, b_hi=_Operand, b_lo=_Operand,
                             d_ab_hi=8, d_ba_hi=8, d_ab_lo=8, d_ba_lo=8)
        self._carry(m, 2, r, prev, ("sig_a", "sig_b", "a_hi", "b_hi"))
        m.d["stage2"] += [r["swap_hi"].eq(Mux(wide, gt_wide, gt_hi)),
                     r["swap_lo"].eq(Mux(wide, gt_wide, gt_lo))]
        for operand in ("a", "b"):
            m.d["stage2"] += r[f"{operand}_lo"].eq(Mux(wide, prev[f"{operand}_hi"],
                                                  prev[f"{operand}_lo"]))
        for slot in ("hi", "lo"):
            exp_a = prev["a_exp_lo"] if slot == "lo" else prev["a_hi"].exp
            exp_b = prev["b_exp_lo"] if slot == "lo" else prev["b_hi"].exp
            m.d["stage2"] += [r[f"d_ab_{slot}"].eq(exp_a - exp_b),
                              r[f"d_ba_{slot}"].eq(exp_b - exp_a)]
        return r

    # -- stage 3 ------------------------------------------------------------------------------
    def _swap(self, m, prev, dtype):
        """Swap so that x is the larger per element; the clamped exponent difference;
        NaN/Inf of the sum."""
        wide, _ = self._modes(dtype)
        swap = {"hi": prev["swap_hi"], "lo": prev["swap_lo"]}
        r = self._stage_regs(3, x=32, y=32, shift_hi=5, shift_lo=5, sub_hi=1, sub_lo=1,
                             slot_hi=_Slot, slot_lo=_Slot)
        for slot in ("hi", "lo"):
            a, b, s = prev[f"a_{slot}"], prev[f"b_{slot}"], swap[slot]
            m.d["stage3"] += [
                r[f"shift_{slot}"].eq(Mux(s, self._clamp(prev[f"d_ba_{slot}"], wide),
                                          self._clamp(prev[f"d_ab_{slot}"], wide))),
                r[f"sub_{slot}"].eq(a.sign ^ b.sign),
            ]
            fields = {
                "sign": Mux(s, b.sign, a.sign),
                "both_neg": a.sign & b.sign,
                "exp": Mux(s, b.exp, a.exp),
                "nan": a.nan | b.nan | (a.inf & b.inf & (a.sign ^ b.sign)),
                "inf": a.inf | b.inf,
                "inf_sign": Mux(a.inf, a.sign, b.sign),
            }
            m.d["stage3"] += [r[f"slot_{slot}"][k].eq(v) for k, v in fields.items()]
        sig_a, sig_b = prev["sig_a"], prev["sig_b"]
        m.d["stage3"] += [
            r["x"].eq(Cat(Mux(swap["lo"], sig_b[:16], sig_a[:16]),
                          Mux(swap["hi"], sig_b[16:], sig_a[16:]))),
            r["y"].eq(Cat(Mux(swap["lo"], sig_a[:16], sig_b[:16]),
                          Mux(swap["hi"], sig_a[16:], sig_b[16:]))),
        ]
        return r

    @staticmethod
    def _clamp(difference, wide):
        """``min(difference, 31)`` for fp32, ``min(difference, 15)`` else, in bit operations
        (one LUT level; a compare would be a second carry chain after the subtraction)."""
        saturate = difference[5:].any() | (~wide & difference[4])
        return Cat(difference[:4] | Mux(saturate, 0b1111, 0),
                   Mux(saturate, wide, difference[4]))

    # -- stages 4 and 5 -------------------------------------------------------------------------
    def _align(self, m, prev, dtype, stage, levels):
        """Shift ``y`` right by the shift amount bits ``levels``; bits leaving a segment (the
        word's bottom for fp32) are ORed into that segment's sticky bit. The last alignment
        stage ORs the sticky bits into the segments' lowest bits; the first decodes the
        sentinel."""
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
        if levels == (4, 3, 2):
            # The same sticky bits from the unshifted word, beside the shifter rather than
            # after it: a nibble leaves when its index is below shift[4:2] (for fp32 the
            # word's nibbles leave from its bottom; a 16-bit shift is below 16, shift[4] is 0).
            # Equal to the above because both slots shift alike for fp32.
            y, top = prev["y"], {"hi": prev["shift_hi"][2:5], "lo": prev["shift_lo"][2:5]}
            nibbles = [y[4 * n:4 * n + 4].any() for n in range(8)]
            sticky_hi = ~wide & Cat(*(nibbles[4 + n] & (top["hi"] > n)
                                      for n in range(4))).any()
            # (nibble 7 never leaves: shift[4:2] is at most 7)
            sticky_lo = Cat(*(nibbles[n] & (top["lo"] > n) for n in range(4)),
                            *(wide & nibbles[n] & (top["lo"] > n) for n in range(4, 7))).any()
        carried = ("x", "sub_hi", "sub_lo", "slot_hi", "slot_lo")
        if levels[-1] != 0:
            # The sentinel: a one at bit ``top - ex`` of each segment (of the word for fp32),
            # ``ex`` the larger operand's exponent (decoded here, used in stage 6).
            ex_hi, ex_lo = prev["slot_hi"].exp, prev["slot_lo"].exp
            top32, top16 = Const(1 << 31, 32), Const(1 << 15, 16)
            r = self._stage_regs(stage, y=32, sticky_hi=1, sticky_lo=1, shift_hi=5,
                                 shift_lo=5, sentinel=32,
                                 **{name: prev[name].shape() for name in carried})
            self._carry(m, stage, r, prev, carried + ("shift_hi", "shift_lo"))
            m.d[f"stage{stage}"] += [r["y"].eq(Cat(lo, hi)),
                         r["sticky_hi"].eq(sticky_hi), r["sticky_lo"].eq(sticky_lo),
                         r["sentinel"].eq(Mux(wide, top32 >> ex_hi,
                                              Cat(top16 >> ex_lo, top16 >> ex_hi)))]
            return r
        # The adder's operands: y complemented to subtract, and between the segments a
        # separator bit pair that propagates the carry (fp32: 1 + 0) or replaces it with the
        # high segment's carry-in (1 + 1 or 0 + 0), so stage 5 is one carry chain.
        sub_hi, sub_lo = prev["sub_hi"], prev["sub_lo"]
        x = prev["x"]
        r = self._stage_regs(stage, x=33, y=33, carry_in=1, sentinel=32,
                             slot_hi=_Slot, slot_lo=_Slot)
        self._carry(m, stage, r, prev, ("slot_hi", "slot_lo", "sentinel"))
        m.d[f"stage{stage}"] += [
            r["x"].eq(Cat(x[:16], wide | sub_hi, x[16:])),
            r["y"].eq(Cat((lo | sticky_lo) ^ Mux(sub_lo, 0xFFFF, 0), ~wide & sub_hi,
                          (hi | sticky_hi) ^ Mux(sub_hi, 0xFFFF, 0))),
            r["carry_in"].eq(sub_lo),
        ]
        return r

    # -- stage 6 --------------------------------------------------------------------------------
    def _add(self, m, prev, dtype):
        """Add or subtract the segments (|x| >= |y| per element, so never negative) in one
        carry chain; the separator bit (stage 4) passes the carry between the segments for
        fp32 only."""
        chain = Signal(34, name="s5_chain")
        m.d.comb += chain.eq(_add_carry(prev["x"], prev["y"], prev["carry_in"]))
        total = Cat(chain[:16], chain[17:33])
        r = self._stage_regs(6, sum=32, marked=32, slot_hi=_Slot, slot_lo=_Slot)
        self._carry(m, 6, r, prev, ("slot_hi", "slot_lo"))
        m.d["stage6"] += [r["sum"].eq(total), r["marked"].eq(total | prev["sentinel"])]
        return r

    # -- stage 7 --------------------------------------------------------------------------------
    def _count(self, m, prev, dtype):
        """Leading zeros of each segment (of the word for fp32), stopped by the sentinel at
        the subnormal boundary; whether each segment's sum is zero. A zero segment's count is
        arbitrary: shifting zero by any amount gives zero, which rounds and packs to zero."""
        zero_hi, count_hi = leading_zeros16(prev["marked"][16:])
        _, count_lo = leading_zeros16(prev["marked"][:16])
        r = self._stage_regs(7, sum=32, count_hi=4, count_lo=4, zero_hi=1,
                             sum_zero_hi=1, sum_zero_lo=1, slot_hi=_Slot, slot_lo=_Slot)
        self._carry(m, 7, r, prev, ("sum", "slot_hi", "slot_lo"))
        m.d["stage7"] += [r["count_hi"].eq(count_hi), r["count_lo"].eq(count_lo),
                     r["zero_hi"].eq(zero_hi),
                     # the zero tests of the segments; stage 8 gives a zero sum its sign
                     r["sum_zero_hi"].eq(~prev["sum"][16:].any()),
                     r["sum_zero_lo"].eq(~prev["sum"][:16].any())]
        return r

    # -- stages 8 and 9 ---------------------------------------------------------------------
    def _normalise(self, m, prev, dtype, stage, levels):
        """Shift each segment (the word for fp32) left by the count bits ``levels``, so the
        leading one reaches the carry bit unless the result is subnormal. The first stage
        resolves the counts: for fp32, 16 + the low count when the high segment is zero (the
        shift by 16 needs only that flag; the low bits settle while the data passes it). The
        last stage computes the exponent ``ex + 1 - count``."""
        wide, _ = self._modes(dtype)
        if "zero_hi" in prev:
            zero_hi = prev["zero_hi"]
            count_wide = Cat(Mux(zero_hi, prev["count_lo"], prev["count_hi"]), zero_hi)
            shifts = {"hi": Mux(wide, count_wide, prev["count_hi"]),
                      "lo": Mux(wide, count_wide, prev["count_lo"])}
        else:
            shifts = {"hi": prev["shift_hi"], "lo": prev["shift_lo"]}
        hi, lo = prev["sum"][16:], prev["sum"][:16]
        for k in levels:
            n = 1 << k
            shift_hi, shift_lo = shifts["hi"][k], shifts["lo"][k]
            hi, lo = (Mux(shift_hi, Mux(wide, Cat(lo, hi)[16 - n:32 - n],
                                        Cat(Const(0, n), hi)[:16]), hi),
                      Mux(shift_lo, Cat(Const(0, n), lo)[:16], lo))
        last = levels[-1] == 0
        r = self._stage_regs(stage, sum=32, slot_hi=_Slot, slot_lo=_Slot,
                             **({} if last else {"shift_hi": 5, "shift_lo": 5}))
        self._carry(m, stage, r, prev, ("slot_hi", "slot_lo"))
        m.d[f"stage{stage}"] += r["sum"].eq(Cat(lo[:16], hi[:16]))
        if "sum_zero_hi" in prev:
            # An exact zero sum is +0 unless both operands are negative (-0 + -0).
            zero_hi, zero_lo = prev["sum_zero_hi"], prev["sum_zero_lo"]
            zero = {"hi": Mux(wide, zero_hi & zero_lo, zero_hi),
                    "lo": Mux(wide, zero_hi & zero_lo, zero_lo)}
            for slot in ("hi", "lo"):
                p = prev[f"slot_{slot}"]
                m.d[f"stage{stage}"] += r[f"slot_{slot}"].sign.eq(
                    Mux(zero[slot], p.both_neg, p.sign))
        for slot in ("hi", "lo"):
            if last:
                exp = prev[f"slot_{slot}"].exp + 1 - shifts[slot]
                m.d[f"stage{stage}"] += r[f"slot_{slot}"].exp.eq(exp)
            else:
                m.d[f"stage{stage}"] += r[f"shift_{slot}"].eq(shifts[slot])
        return r

    # -- stage 10 --------------------------------------------------------------------------------
    def _round(self, m, prev, dtype):
        """Round to nearest even: the increment of each element and its packed
        ``{exponent field, fraction}`` (exponent field 0 when the hidden bit is 0: subnormal).
        Also the special word of each element: NaN, Inf, or Inf of the result's sign, used if
        the element is NaN/Inf or overflows."""
        wide, fp16 = self._modes(dtype)
        n = prev["sum"]

        def rounding(lsb, round_bit, sticky_bits):
            return round_bit & (lsb | sticky_bits.any())

        def half(seg, exp):          # packed {exponent, fraction} (15 bits) and increment
            return (Mux(fp16, Cat(seg[5:15], Mux(seg[15], exp[:5], 0)),
                        Cat(seg[8:15], Mux(seg[15], exp[:8], 0))),
                    Mux(fp16, rounding(seg[5], seg[4], seg[:4]),
                        rounding(seg[8], seg[7], seg[:7])))

        packed_hi, inc_hi = half(n[16:], prev["slot_hi"].exp)
        packed_lo, inc_lo = half(n[:16], prev["slot_lo"].exp)
        wide_packed = Cat(n[8:31], Mux(n[31], prev["slot_hi"].exp[:8], 0))
        wide_inc = rounding(n[8], n[7], n[:7])

        # The packed word with a separator bit at 16 (1: fp32, the carry passes; 0: it stops)
        # and the high element's increment at bit 17, so stage 9 is one carry chain.
        packed = Mux(wide, wide_packed, Cat(packed_lo, Const(0, 1), packed_hi))
        r = self._stage_regs(10, packed=33, inc_hi=1, inc_lo=1, sign_hi=1, sign_lo=1,
                             forced_hi=1, forced_lo=1, special_hi=16, special_lo=16)
        m.d["stage10"] += [
            r["packed"].eq(Cat(packed[:16], wide, packed[16:])),
            r["inc_hi"].eq(~wide & inc_hi),
            r["inc_lo"].eq(Mux(wide, wide_inc, inc_lo)),
        ]
        for slot in ("hi", "lo"):
            p = prev[f"slot_{slot}"]
            nan = Mux(fp16, _NAN15[True], _NAN15[False])
            inf = Mux(fp16, _INF15[True], _INF15[False])
            m.d["stage10"] += [
                r[f"sign_{slot}"].eq(p.sign),
                r[f"forced_{slot}"].eq(p.nan | p.inf),
                r[f"special_{slot}"].eq(Mux(p.nan, nan, Cat(inf[:15], Mux(p.inf, p.inf_sign,
                                                                           p.sign)))),
            ]
        return r

    # -- stage 11 --------------------------------------------------------------------------------
    def _increment(self, m, prev, dtype):
        """Add the increments to the packed word, so a fraction carry moves a subnormal to the
        smallest normal and the largest significand to the next binade. One carry chain; the
        separator bit passes the carry for fp32 only."""
        chain = Signal(34, name="s10_chain")
        m.d.comb += chain.eq(prev["packed"]
                             + Cat(prev["inc_lo"], Const(0, 16), prev["inc_hi"]))
        carried = ("sign_hi", "sign_lo", "forced_hi", "forced_lo", "special_hi", "special_lo")
        r = self._stage_regs(11, rounded=32, wide=1, fp16=1,
                             **{name: len(prev[name]) for name in carried})
        self._carry(m, 11, r, prev, carried)
        wide, fp16 = self._modes(dtype)
        m.d["stage11"] += [r["rounded"].eq(Cat(chain[:16], chain[17:33])),
                     r["wide"].eq(wide), r["fp16"].eq(fp16)]     # the modes, decoded
        return r

    # -- stage 12 -------------------------------------------------------------------------------
    def _pack(self, m, prev, dtype):
        """An exponent reaching all ones is overflow (the sign bit position is its carry):
        Inf. NaN/Inf flags override. Add the signs."""
        wide, fp16 = prev["wide"], prev["fp16"]
        rounded = prev["rounded"]

        def special(slot, seg):
            # exponent >= all ones, in bit operations (a compare would be a carry chain)
            overflow = Mux(fp16, seg[15] | seg[10:15].all(), seg[15] | seg[7:15].all())
            return prev[f"forced_{slot}"] | overflow

        special_hi = special("hi", rounded[16:])
        special_lo = special("lo", rounded[:16])
        hi16 = Mux(special_hi, prev["special_hi"], Cat(rounded[16:31], prev["sign_hi"]))
        lo16 = Mux(wide, Mux(special_hi, 0, rounded[:16]),
                   Mux(special_lo, prev["special_lo"], Cat(rounded[:15], prev["sign_lo"])))
        m.d["stage12"] += self.result.eq(Cat(lo16, hi16))
