"""The instruction format: layout, encode/decode, range checks, word conversion."""

import random

import pytest

from ace.isa import (FIELD_LIMITS, INSTR_BITS, INSTR_WORDS, Buf, Instruction, IsaError, Opcode,
                     decode, encode, encode_const, field_table, from_words, to_words)
from ace.layouts import Dtype, ReduceOp


def test_layout_width_and_word_alignment():
    assert INSTR_BITS == Instruction.size == 256
    assert INSTR_BITS % 32 == 0 and INSTR_WORDS == 8
    for name in Instruction._fields:
        field = Instruction[name]
        # every field sits inside one 32-bit word, or is whole words (mem_addr)
        if field.width <= 32:
            assert field.offset // 32 == (field.offset + field.width - 1) // 32, name
        else:
            assert field.offset % 32 == 0 and field.width % 32 == 0, name
    assert "opcode" in field_table() and "mem_addr" in field_table()


def _random_fields(rng):
    return dict(
        opcode=rng.choice(list(Opcode)), dtype=rng.choice(list(Dtype)),
        op=rng.choice(list(ReduceOp)), src_buf=rng.choice(list(Buf)), dst_buf=rng.choice(list(Buf)),
        send_link=rng.randrange(16), recv_link=rng.randrange(16), send_peer=rng.randrange(256),
        recv_peer=rng.randrange(256), dep_channel=rng.randrange(16), dep_valid=rng.randrange(2),
        dep_step=rng.randrange(1 << 16), count=rng.getrandbits(32), src_off=rng.getrandbits(32),
        dst_off=rng.getrandbits(32), mem_addr=rng.getrandbits(64))


def test_encode_matches_layout_const_and_roundtrips():
    rng = random.Random(1)
    for _ in range(300):
        fields = _random_fields(rng)
        bits = encode(**fields)
        assert bits == encode_const(**fields)
        assert bits == Instruction.const(fields).as_value().value
        assert 0 <= bits < 1 << INSTR_BITS
        assert decode(bits) == fields
        words = to_words(bits)
        assert len(words) == INSTR_WORDS and all(0 <= w < 1 << 32 for w in words)
        assert from_words(words) == bits


def test_encode_accepts_names():
    assert decode(encode(opcode="rrc", dtype="bf16", op="max", src_buf="s"))["opcode"] is Opcode.RRC
    assert decode(encode(opcode="end"))["opcode"] is Opcode.END


@pytest.mark.parametrize("field,value", [
    ("count", 1 << 32), ("dep_channel", 16), ("dep_step", 1 << 16), ("send_peer", 256),
    ("send_link", -1), ("mem_addr", 1 << 64), ("src_off", -5)])
def test_encode_range_errors_name_field(field, value):
    with pytest.raises(IsaError, match=rf"^{field}: {value} is out of range; allowed: 0 to"):
        encode(opcode="s", **{field: value})
    low, high = FIELD_LIMITS[field]
    assert low == 0 and high == (1 << Instruction[field].width) - 1


def test_encode_bad_enum_and_unknown_field():
    with pytest.raises(IsaError, match="opcode: 'jump' is not a defined Opcode"):
        encode(opcode="jump")
    with pytest.raises(IsaError, match="src_buf: 3 is not a defined Buf"):
        encode(opcode="s", src_buf=3)
    with pytest.raises(IsaError, match="bogus: not an instruction field"):
        encode(opcode="s", bogus=1)
    with pytest.raises(IsaError, match="rsvd0: 1 must be 0"):
        encode(opcode="s", rsvd0=1)


def test_decode_rejects_unknown_opcode_buffer_and_reserved_bits():
    for code in (11, 12, 13, 14):
        with pytest.raises(IsaError, match=f"opcode: {code} is not a defined Opcode"):
            decode(code)
    good = encode(opcode="cpy")
    with pytest.raises(IsaError, match="src_buf: 3 is not a defined Buf"):
        decode(good | (3 << Instruction["src_buf"].offset))
    with pytest.raises(IsaError, match="rsvd2"):
        decode(good | (1 << Instruction["rsvd2"].offset))
    with pytest.raises(IsaError, match="not an unsigned 256-bit"):
        decode(1 << 256)
    with pytest.raises(IsaError, match="words: 3 given"):
        from_words([0, 0, 0])
