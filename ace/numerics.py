"""Golden model of the reduction ALU array: elementwise ``sum``/``max``/``min``/``copy``.

Every result is computed by numpy (``ml_dtypes`` for bf16), then the special-value policy of
``docs/numerics.md`` is applied on top:

* any NaN result is the canonical quiet NaN (:data:`CANONICAL_NAN`);
* ``max``/``min`` propagate NaN (as ``np.maximum``/``np.minimum``) and order ``-0 < +0``
  (IEEE 754-2019 ``maximum``/``minimum``), whatever the operand order;
* ``sum`` is IEEE-754 addition, round to nearest even, subnormals kept, overflow to infinity
  (numpy's own behaviour: ``Inf + -Inf`` is NaN, ``x + -x`` is ``+0``, ``-0 + -0`` is ``-0``);
* ``int32`` ``sum`` wraps (two's complement), ``max``/``min`` are signed;
* ``copy`` returns ``a`` bit for bit (no NaN canonicalisation).

numpy computes fp16 (and ``ml_dtypes`` bf16) sums in fp32 and rounds the fp32 sum once more;
fp32 has at least ``2p + 2`` bits of precision for both (p = 11 and 8), so by Figueroa's
double-rounding theorem that equals the correctly rounded sum, which is what the hardware's
adder produces directly.

Beats are ``link_bytes`` bytes holding ``link_bytes // esize`` little-endian elements, element
``i`` in bytes ``[i*esize, (i+1)*esize)``. :func:`pack_beats`/:func:`unpack_beats` convert
between element arrays and beats as Python integers (bit ``8*i`` of the integer is bit 0 of
byte ``i``), which is what the testbenches drive onto ``tdata``.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ace.layouts import DTYPE_BYTES, Dtype, ReduceOp

__all__ = [
    "FLOAT_FORMATS", "CANONICAL_NAN", "NP_DTYPE", "BITS_DTYPE",
    "to_elements", "to_bits", "reduce_elements",
    "pack_beats", "unpack_beats", "pack_beat", "unpack_beat", "elements_per_beat",
    "special_values", "directed_pairs", "random_elements",
]

#: (exponent bits, fraction bits) of each floating-point dtype.
FLOAT_FORMATS = {Dtype.FP32: (8, 23), Dtype.FP16: (5, 10), Dtype.BF16: (8, 7)}

#: Canonical quiet NaN: sign 0, exponent all ones, only the top fraction bit set.
CANONICAL_NAN = {Dtype.FP32: 0x7FC0_0000, Dtype.FP16: 0x7E00, Dtype.BF16: 0x7FC0}

#: numpy element dtype of each ACE dtype.
NP_DTYPE = {Dtype.INT32: np.dtype(np.int32), Dtype.FP32: np.dtype(np.float32),
            Dtype.BF16: np.dtype(ml_dtypes.bfloat16), Dtype.FP16: np.dtype(np.float16)}

#: Unsigned integer dtype holding the bit pattern of each ACE dtype.
BITS_DTYPE = {Dtype.INT32: np.dtype(np.uint32), Dtype.FP32: np.dtype(np.uint32),
              Dtype.BF16: np.dtype(np.uint16), Dtype.FP16: np.dtype(np.uint16)}


def to_elements(dtype: Dtype, values) -> np.ndarray:
    """An array of ``dtype`` elements: bit patterns (unsigned ints) are reinterpreted, arrays
    already of the element dtype are copied, anything else is converted by value."""
    dtype = Dtype(dtype)
    array = np.asarray(values)
    if array.dtype == NP_DTYPE[dtype]:
        return array.copy()
    if array.dtype == BITS_DTYPE[dtype]:
        return array.view(NP_DTYPE[dtype]).copy()
    return array.astype(NP_DTYPE[dtype])


def to_bits(dtype: Dtype, elements) -> np.ndarray:
    """Bit patterns (unsigned) of an array of ``dtype`` elements."""
    return to_elements(dtype, elements).view(BITS_DTYPE[Dtype(dtype)])


def _is_nan_bits(dtype: Dtype, bits: np.ndarray) -> np.ndarray:
    exp_bits, man_bits = FLOAT_FORMATS[dtype]
    exp_all = (1 << exp_bits) - 1
    exponent = (bits >> man_bits) & exp_all
    fraction = bits & ((1 << man_bits) - 1)
    return (exponent == exp_all) & (fraction != 0)


def reduce_elements(op: ReduceOp, dtype: Dtype, a, b) -> np.ndarray:
    """Elementwise ``op`` of ``a`` and ``b`` (arrays of ``dtype`` elements or bit patterns),
    exactly as the ALU array computes it. Returns an array of the element dtype."""
    op, dtype = ReduceOp(op), Dtype(dtype)
    a = to_elements(dtype, a)
    b = to_elements(dtype, b)
    if a.shape != b.shape:
        raise ValueError(f"operand shapes differ: {a.shape} and {b.shape}")
    if op is ReduceOp.COPY:
        return a
    if dtype is Dtype.INT32:
        if op is ReduceOp.SUM:
            wrapped = a.view(np.uint32) + b.view(np.uint32)  # modulo 2**32
            return wrapped.view(np.int32)
        return np.maximum(a, b) if op is ReduceOp.MAX else np.minimum(a, b)

    bits_dtype = BITS_DTYPE[dtype]
    sign_bit = bits_dtype.type(1 << (8 * bits_dtype.itemsize - 1))
    with np.errstate(all="ignore"):
        if op is ReduceOp.SUM:
            result = (a + b).astype(NP_DTYPE[dtype])
        else:
            # fp16 and bf16 widen to fp32 exactly; the chosen operand converts back exactly.
            wide_a, wide_b = a.astype(np.float32), b.astype(np.float32)
            pick = np.maximum if op is ReduceOp.MAX else np.minimum
            result = pick(wide_a, wide_b).astype(NP_DTYPE[dtype])
    bits = result.view(bits_dtype).copy()
    if op is not ReduceOp.SUM:
        # -0 < +0: max of two zeros is -0 only if both are -0, min is -0 if either is.
        a_bits, b_bits = a.view(bits_dtype), b.view(bits_dtype)
        both_zero = ((a_bits & ~sign_bit) == 0) & ((b_bits & ~sign_bit) == 0)
        if op is ReduceOp.MAX:
            zero_sign = a_bits & b_bits & sign_bit
        else:
            zero_sign = (a_bits | b_bits) & sign_bit
        bits = np.where(both_zero, zero_sign, bits).astype(bits_dtype)
        nan_in = _is_nan_bits(dtype, a_bits) | _is_nan_bits(dtype, b_bits)
        bits = np.where(nan_in, bits_dtype.type(CANONICAL_NAN[dtype]), bits)
    bits = np.where(_is_nan_bits(dtype, bits), bits_dtype.type(CANONICAL_NAN[dtype]), bits)
    return bits.astype(bits_dtype).view(NP_DTYPE[dtype])


# -- beats -----------------------------------------------------------------------------------

def elements_per_beat(dtype: Dtype, link_bytes: int) -> int:
    return link_bytes // DTYPE_BYTES[Dtype(dtype)]


def pack_beat(dtype: Dtype, elements) -> bytes:
    """Bytes of one beat: the elements little-endian, element 0 first."""
    return to_bits(dtype, elements).astype(BITS_DTYPE[Dtype(dtype)].newbyteorder("<")).tobytes()


def unpack_beat(dtype: Dtype, data: bytes) -> np.ndarray:
    """Elements of one beat's bytes (inverse of :func:`pack_beat`)."""
    bits = np.frombuffer(bytes(data), dtype=BITS_DTYPE[Dtype(dtype)].newbyteorder("<"))
    return bits.astype(BITS_DTYPE[Dtype(dtype)]).view(NP_DTYPE[Dtype(dtype)])


def pack_beats(dtype: Dtype, elements, link_bytes: int) -> list[int]:
    """Beats as integers from a flat array whose length is a multiple of the beat size."""
    per_beat = elements_per_beat(dtype, link_bytes)
    flat = to_bits(dtype, elements).reshape(-1)
    if flat.size % per_beat:
        raise ValueError(f"{flat.size} elements do not fill whole beats of {per_beat}")
    raw = flat.astype(flat.dtype.newbyteorder("<")).tobytes()
    return [int.from_bytes(raw[i:i + link_bytes], "little")
            for i in range(0, len(raw), link_bytes)]


def unpack_beats(dtype: Dtype, beats, link_bytes: int) -> np.ndarray:
    """Flat element array from beats as integers (inverse of :func:`pack_beats`)."""
    raw = b"".join(int(beat).to_bytes(link_bytes, "little") for beat in beats)
    return unpack_beat(dtype, raw)


# -- stimulus --------------------------------------------------------------------------------

def _float_bits(dtype, sign, exponent, fraction):
    exp_bits, man_bits = FLOAT_FORMATS[dtype]
    bits_dtype = BITS_DTYPE[dtype]
    sign = np.asarray(sign, dtype=np.uint64)
    exponent = np.asarray(exponent, dtype=np.uint64)
    fraction = np.asarray(fraction, dtype=np.uint64)
    word = (sign << (exp_bits + man_bits)) | (exponent << man_bits) | fraction
    return word.astype(bits_dtype)


def special_values(dtype: Dtype) -> np.ndarray:
    """Directed special operands of ``dtype`` as bit patterns (unsigned array).

    Floats: both zeros, smallest/largest/middle subnormals, smallest normal, one, 1.5, largest
    finite, infinities, quiet NaNs (canonical, with payload, negative) and signalling NaNs,
    each with both signs. int32: 0, +-1, the extremes and their neighbours.
    """
    dtype = Dtype(dtype)
    if dtype is Dtype.INT32:
        values = [0, 1, -1, 2, -2, 0x7FFF_FFFF, -0x8000_0000, 0x7FFF_FFFE, -0x7FFF_FFFF,
                  0x4000_0000, -0x4000_0000, 0x1234_5678, -0x1234_5678, 0xFFFF, -0x10000]
        return np.array(values, dtype=np.int64).astype(np.int32).view(np.uint32)
    exp_bits, man_bits = FLOAT_FORMATS[dtype]
    exp_all = (1 << exp_bits) - 1
    bias = exp_all >> 1
    frac_all = (1 << man_bits) - 1
    magnitudes = [
        (0, 0),                              # zero
        (0, 1),                              # smallest subnormal
        (0, frac_all),                       # largest subnormal
        (0, 1 << (man_bits - 1)),            # middle subnormal
        (0, 3),                              # small subnormal
        (1, 0),                              # smallest normal
        (1, 1),                              # smallest normal + 1 ulp
        (bias, 0),                           # 1.0
        (bias, 1 << (man_bits - 1)),         # 1.5
        (bias, frac_all),                    # just below 2.0
        (exp_all - 1, frac_all),             # largest finite
        (exp_all - 1, frac_all - 1),         # largest finite - 1 ulp
        (exp_all - 1, 0),                    # largest power of two
        (exp_all, 0),                        # infinity
        (exp_all, 1 << (man_bits - 1)),      # canonical quiet NaN
        (exp_all, (1 << (man_bits - 1)) | 5),  # quiet NaN with payload
        (exp_all, 1),                        # signalling NaN
        (exp_all, frac_all >> 1),            # signalling NaN, full payload
    ]
    exponents = [e for e, _ in magnitudes]
    fractions = [f for _, f in magnitudes]
    plus = _float_bits(dtype, 0, exponents, fractions)
    minus = _float_bits(dtype, 1, exponents, fractions)
    return np.concatenate([plus, minus])


def _float_structured_pairs(dtype: Dtype, rng: np.random.Generator):
    """Pairs aimed at alignment, rounding, cancellation, overflow and the subnormal boundary."""
    exp_bits, man_bits = FLOAT_FORMATS[dtype]
    exp_all = (1 << exp_bits) - 1
    bias = exp_all >> 1
    frac_all = (1 << man_bits) - 1
    a_list, b_list = [], []

    def add(sa, ea, fa, sb, eb, fb):
        a_list.append(_float_bits(dtype, sa, ea, fa))
        b_list.append(_float_bits(dtype, sb, eb, fb))

    n = 4
    for base in (bias, 1, 2, man_bits + 2, exp_all - 1):
        # Exponent gaps 0 .. man_bits + 5: guard, round and sticky positions, both signs.
        for gap in range(man_bits + 6):
            eb = base - gap
            if eb < 0:
                continue
            for sa in (0, 1):
                for sb in (0, 1):
                    fa = rng.integers(0, frac_all + 1, n)
                    fb = rng.integers(0, frac_all + 1, n)
                    add([sa] * n, [base] * n, fa, [sb] * n, [eb] * n, fb)
                    # Also with fractions of all ones / one bit, where carries ripple.
                    add(sa, base, frac_all, sb, eb, frac_all)
                    add(sa, base, 0, sb, eb, 1)
                    add(sa, base, 1, sb, eb, frac_all)
    for e in (1, 2, bias, exp_all - 1):
        for sa in (0, 1):
            # Ties: b is exactly half an ulp of a, or one and a half ulps.
            fa = rng.integers(0, frac_all + 1, n)
            for half_exp, half_frac in ((e - man_bits - 1, 0), (e - man_bits, 1 << (man_bits - 1))):
                if half_exp >= 1:
                    add([sa] * n, [e] * n, fa, [sa] * n, [half_exp] * n, [half_frac] * n)
                    add([sa] * n, [e] * n, fa, [1 - sa] * n, [half_exp] * n, [half_frac] * n)
                    add(sa, e, 0, 1 - sa, half_exp, half_frac)
                    add(sa, e, 1, sa, half_exp, half_frac)
            # Cancellation: exact, off by one ulp, and close random fractions.
            add([sa] * n, [e] * n, fa, [1 - sa] * n, [e] * n, fa)
            add([sa] * n, [e] * n, fa, [1 - sa] * n, [e] * n, fa ^ 1)
            add([sa] * n, [e] * n, fa, [1 - sa] * n, [max(e - 1, 0)] * n, frac_all - (fa >> 3))
            add([sa] * n, [e] * n, fa, [1 - sa] * n, [e] * n,
                (fa + rng.integers(-8, 9, n)) & frac_all)
    for sa in (0, 1):
        # Subnormal boundary: subnormal + subnormal -> normal, normal - subnormal -> subnormal.
        add(sa, 0, frac_all, sa, 0, 1)
        add(sa, 0, frac_all, sa, 0, frac_all)
        add(sa, 1, 0, 1 - sa, 0, 1)
        add(sa, 1, frac_all, 1 - sa, 1, 0)
        add(sa, 2, 0, 1 - sa, 1, 1)
        # Overflow: largest finite + largest finite, + half an ulp (odd -> rounds up to Inf),
        # + less than half an ulp (stays finite).
        add(sa, exp_all - 1, frac_all, sa, exp_all - 1, frac_all)
        add(sa, exp_all - 1, frac_all, sa, exp_all - 2 - man_bits, 0)
        add(sa, exp_all - 1, frac_all, sa, exp_all - 3 - man_bits, frac_all)
        add(sa, exp_all - 1, frac_all - 1, sa, exp_all - 2 - man_bits, 0)
        add(sa, exp_all - 1, 0, sa, exp_all - 1, 0)
    a = np.concatenate([np.atleast_1d(x) for x in a_list])
    b = np.concatenate([np.atleast_1d(x) for x in b_list])
    return a, b


def directed_pairs(dtype: Dtype, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Directed operand pairs ``(a, b)`` as bit patterns: every pair of :func:`special_values`
    (both orders), plus for floats pairs with exponent gaps ``0 .. man_bits + 5`` (guard,
    round, sticky), ties to even, cancellation, the subnormal/normal boundary and overflow."""
    dtype = Dtype(dtype)
    specials = special_values(dtype)
    a = np.repeat(specials, specials.size)
    b = np.tile(specials, specials.size)
    if dtype is Dtype.INT32:
        return a, b
    sa, sb = _float_structured_pairs(dtype, np.random.default_rng(seed))
    return np.concatenate([a, sa, sb]), np.concatenate([b, sb, sa])


def random_elements(dtype: Dtype, count: int, rng: np.random.Generator, *,
                    mode: str = "bits") -> np.ndarray:
    """``count`` random operands of ``dtype`` as bit patterns.

    ``mode="bits"``: uniformly random bit patterns (every exponent, NaNs and infinities
    included). ``mode="scaled"``: well-scaled values, normally distributed and multiplied by
    a power of two in a narrow range, so that sums of two such values cancel and round often.
    """
    dtype = Dtype(dtype)
    bits_dtype = BITS_DTYPE[dtype]
    if mode == "bits":
        return rng.integers(0, 1 << (8 * bits_dtype.itemsize), count,
                            dtype=np.uint64).astype(bits_dtype)
    if mode != "scaled":
        raise ValueError(f"mode: {mode!r}; allowed: 'bits' or 'scaled'")
    if dtype is Dtype.INT32:
        scale = rng.choice([1 << 8, 1 << 20, 1 << 31], count)
        values = rng.integers(-scale, scale, count, dtype=np.int64)
        return values.astype(np.int32).view(np.uint32)
    exponent = rng.integers(-6, 7, count)
    values = rng.standard_normal(count) * np.exp2(exponent)
    if dtype is not Dtype.FP32:
        # Also some values near the bottom of the 16-bit ranges.
        tiny = rng.random(count) < 0.1
        low = -14 if dtype is Dtype.FP16 else -126
        values = np.where(tiny, values * np.exp2(low), values)
    return to_bits(dtype, values.astype(np.float32).astype(NP_DTYPE[dtype]))
