"""The ALU golden model (:mod:`ace.numerics`): special-value policy, exact rounding against an
independent rational reference, int32 wrap-around, beat packing."""

from fractions import Fraction

import numpy as np
import pytest

from ace.layouts import Dtype, ReduceOp
from ace.numerics import (
    CANONICAL_NAN, FLOAT_FORMATS, directed_pairs, pack_beat, pack_beats, random_elements,
    reduce_elements, special_values, to_bits, unpack_beat, unpack_beats,
)

FLOATS = [Dtype.FP32, Dtype.BF16, Dtype.FP16]


def _bits(dtype, sign, exponent, fraction):
    exp_bits, man_bits = FLOAT_FORMATS[dtype]
    return (sign << (exp_bits + man_bits)) | (exponent << man_bits) | fraction


def _one(op, dtype, a, b):
    bits_type = np.uint32 if dtype in (Dtype.INT32, Dtype.FP32) else np.uint16
    result = reduce_elements(op, dtype, np.array([a], dtype=bits_type),
                             np.array([b], dtype=bits_type))
    return int(to_bits(dtype, result)[0])


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
def test_policy(dtype):
    exp_bits, man_bits = FLOAT_FORMATS[dtype]
    exp_all = (1 << exp_bits) - 1
    bias = exp_all >> 1
    nan = CANONICAL_NAN[dtype]
    assert nan == _bits(dtype, 0, exp_all, 1 << (man_bits - 1))
    pz, nz = _bits(dtype, 0, 0, 0), _bits(dtype, 1, 0, 0)
    one, minus_one = _bits(dtype, 0, bias, 0), _bits(dtype, 1, bias, 0)
    inf, minus_inf = _bits(dtype, 0, exp_all, 0), _bits(dtype, 1, exp_all, 0)
    snan, neg_qnan = _bits(dtype, 0, exp_all, 1), _bits(dtype, 1, exp_all, (1 << man_bits) - 1)
    largest = _bits(dtype, 0, exp_all - 1, (1 << man_bits) - 1)
    tiny = _bits(dtype, 0, 0, 1)
    S, X, N, C = ReduceOp.SUM, ReduceOp.MAX, ReduceOp.MIN, ReduceOp.COPY

    for a, b in ((nz, pz), (pz, nz)):
        assert _one(X, dtype, a, b) == pz
        assert _one(N, dtype, a, b) == nz
        assert _one(S, dtype, a, b) == pz
    assert _one(X, dtype, nz, nz) == nz and _one(N, dtype, pz, pz) == pz
    assert _one(S, dtype, nz, nz) == nz
    assert _one(S, dtype, one, minus_one) == pz
    assert _one(S, dtype, minus_one, one) == pz
    assert _one(S, dtype, tiny, tiny | (1 << (exp_bits + man_bits))) == pz
    assert _one(S, dtype, inf, minus_inf) == nan
    assert _one(S, dtype, inf, inf) == inf
    assert _one(S, dtype, minus_inf, largest) == minus_inf
    assert _one(S, dtype, largest, largest) == inf
    assert _one(S, dtype, tiny, tiny) == _bits(dtype, 0, 0, 2)       # subnormals kept
    for special in (snan, neg_qnan, nan):
        for other in (one, inf, pz, snan):
            for op in (S, X, N):
                assert _one(op, dtype, special, other) == nan
                assert _one(op, dtype, other, special) == nan
        assert _one(C, dtype, special, one) == special                 # copy is bit exact
    assert _one(X, dtype, minus_inf, one) == one
    assert _one(N, dtype, minus_inf, one) == minus_inf


def test_int32():
    S, X, N = ReduceOp.SUM, ReduceOp.MAX, ReduceOp.MIN
    assert _one(S, Dtype.INT32, 0x7FFF_FFFF, 1) == 0x8000_0000
    assert _one(S, Dtype.INT32, 0x8000_0000, 0x8000_0000) == 0
    assert _one(S, Dtype.INT32, 0xFFFF_FFFF, 2) == 1
    assert _one(X, Dtype.INT32, 0xFFFF_FFFF, 1) == 1
    assert _one(N, Dtype.INT32, 0xFFFF_FFFF, 1) == 0xFFFF_FFFF
    assert _one(N, Dtype.INT32, 0x8000_0000, 0x7FFF_FFFF) == 0x8000_0000


def _decode(dtype, bits):
    exp_bits, man_bits = FLOAT_FORMATS[dtype]
    sign = -1 if bits >> (exp_bits + man_bits) else 1
    exponent = (bits >> man_bits) & ((1 << exp_bits) - 1)
    fraction = bits & ((1 << man_bits) - 1)
    bias = (1 << (exp_bits - 1)) - 1
    if exponent == (1 << exp_bits) - 1:
        return None                                            # Inf or NaN: not rational
    if exponent == 0:
        return sign * Fraction(fraction) * Fraction(2) ** (1 - bias - man_bits)
    return sign * Fraction(fraction | (1 << man_bits)) * Fraction(2) ** (exponent - bias - man_bits)


def _round(dtype, value: Fraction, zero_sign: int) -> int:
    """Correct rounding (nearest, ties to even) of an exact rational to ``dtype`` bits."""
    exp_bits, man_bits = FLOAT_FORMATS[dtype]
    bias = (1 << (exp_bits - 1)) - 1
    if value == 0:
        return zero_sign << (exp_bits + man_bits)
    sign = int(value < 0)
    value = abs(value)
    exponent = value.numerator.bit_length() - value.denominator.bit_length()
    while Fraction(2) ** exponent > value:
        exponent -= 1
    while Fraction(2) ** (exponent + 1) <= value:
        exponent += 1
    exponent = max(exponent, 1 - bias)                         # subnormal range
    ulp = Fraction(2) ** (exponent - man_bits)
    quotient, remainder = divmod(value, ulp)
    quotient = int(quotient)
    if remainder * 2 > ulp or (remainder * 2 == ulp and quotient & 1):
        quotient += 1
    rounded = quotient * ulp
    if rounded >= Fraction(2) ** (bias + 1):
        return _bits(dtype, sign, (1 << exp_bits) - 1, 0)      # overflow to infinity
    return _encode(dtype, sign, rounded)


def _encode(dtype, sign, magnitude: Fraction) -> int:
    exp_bits, man_bits = FLOAT_FORMATS[dtype]
    bias = (1 << (exp_bits - 1)) - 1
    scaled = magnitude / Fraction(2) ** (1 - bias - man_bits)   # in units of the smallest ulp
    assert scaled.denominator == 1
    units = scaled.numerator
    if units < (1 << man_bits):
        return _bits(dtype, sign, 0, units)
    exponent = 1
    while units >= (2 << man_bits):
        assert units % 2 == 0
        units //= 2
        exponent += 1
    return _bits(dtype, sign, exponent, units - (1 << man_bits))


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
def test_sum_is_correctly_rounded(dtype):
    """numpy (fp32, fp16) and ml_dtypes (bf16) sums equal an exact rational reference on the
    directed pairs and random operands: the double-rounding argument holds."""
    rng = np.random.default_rng(3)
    da, db = directed_pairs(dtype)
    a = np.concatenate([da, random_elements(dtype, 1000, rng),
                        random_elements(dtype, 1000, rng, mode="scaled")])
    b = np.concatenate([db, random_elements(dtype, 1000, rng),
                        random_elements(dtype, 1000, rng, mode="scaled")])
    got = to_bits(dtype, reduce_elements(ReduceOp.SUM, dtype, a, b))
    exp_bits, man_bits = FLOAT_FORMATS[dtype]
    sign_shift = exp_bits + man_bits
    checked = 0
    for x, y, r in zip(a.tolist(), b.tolist(), got.tolist()):
        fx, fy = _decode(dtype, x), _decode(dtype, y)
        if fx is None or fy is None:
            continue
        expected = _round(dtype, fx + fy, (x >> sign_shift) & (y >> sign_shift))
        assert r == expected, f"{x:#x} + {y:#x}: golden {r:#x}, exact {expected:#x}"
        checked += 1
    assert checked > 1000


@pytest.mark.parametrize("dtype", list(Dtype), ids=lambda d: d.name)
def test_beat_packing(dtype):
    rng = np.random.default_rng(4)
    link_bytes = 16
    bits = random_elements(dtype, 3 * link_bytes // (4 if dtype in (Dtype.INT32, Dtype.FP32)
                                                      else 2), rng)
    beats = pack_beats(dtype, bits, link_bytes)
    assert len(beats) == 3
    size = bits.dtype.itemsize * 8
    per_beat = bits.size // 3
    for i in range(per_beat):                       # element i at bits [i*size, (i+1)*size)
        assert (beats[1] >> (i * size)) & ((1 << size) - 1) == int(bits[per_beat + i])
    assert np.array_equal(to_bits(dtype, unpack_beats(dtype, beats, link_bytes)), bits)
    raw = pack_beat(dtype, bits[:per_beat])
    assert raw == beats[0].to_bytes(link_bytes, "little")
    assert np.array_equal(to_bits(dtype, unpack_beat(dtype, raw)), bits[:per_beat])


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
def test_special_values_cover_classes(dtype):
    exp_bits, man_bits = FLOAT_FORMATS[dtype]
    exp_all = (1 << exp_bits) - 1
    values = special_values(dtype).astype(np.int64)
    exponent = (values >> man_bits) & exp_all
    fraction = values & ((1 << man_bits) - 1)
    sign = values >> (exp_bits + man_bits)
    quiet = 1 << (man_bits - 1)
    assert ((exponent == 0) & (fraction == 1)).any()                     # smallest subnormal
    assert ((exponent == 0) & (fraction == (1 << man_bits) - 1)).any()   # largest subnormal
    assert ((exponent == exp_all) & (fraction == 0) & (sign == 1)).any() # -Inf
    assert ((exponent == exp_all) & (fraction != 0) & ((fraction & quiet) == 0)).any()  # sNaN
    assert ((exponent == 0) & (fraction == 0) & (sign == 1)).any()       # -0
    a, b = directed_pairs(dtype)
    gaps = ((a.astype(np.int64) >> man_bits) & exp_all) - ((b.astype(np.int64) >> man_bits)
                                                            & exp_all)
    assert set(range(man_bits + 4)) <= set(np.abs(gaps).tolist())
