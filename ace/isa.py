"""The ACE instruction format: one 256-bit ``data.StructLayout`` shared by the sequencer hardware
and the Python assembler.

One instruction is one step of one channel (see ``docs/programming_model.md``). The layout is
fixed-width (:data:`INSTR_BITS` = 256, eight 32-bit words), every field sits inside one 32-bit
word, and reserved bits must be zero. Field map (bit offsets from bit 0 of word 0)::

    word 0  [  0,  4) opcode      Opcode
            [  4,  6) dtype       Dtype (ace.layouts)
            [  6,  8) op          ReduceOp (ace.layouts)
            [  8, 10) src_buf     Buf: SRAM/memory region of the source slice
            [ 10, 12) dst_buf     Buf: region of the destination slice
            [ 12, 16) rsvd0
            [ 16, 20) send_link   link the step sends on
            [ 20, 24) recv_link   link the step receives from
            [ 24, 32) rsvd1
    word 1  [ 32, 40) send_peer   node id the step sends to
            [ 40, 48) recv_peer   node id the step receives from (expected header ``src``)
            [ 48, 52) dep_channel channel of the cross-channel dependency
            [ 52, 63) rsvd2
            [ 63, 64) dep_valid   the dependency is valid
    word 2  [ 64, 80) dep_step    wait until channel dep_channel completed >= dep_step + 1 steps
            [ 80, 96) rsvd3
    word 3  [ 96,128) count       length in ELEMENTS of ``dtype`` (bytes = count x size)
    word 4  [128,160) src_off     source offset in WORDS (link_bytes each) inside src_buf
    word 5  [160,192) dst_off     destination offset in WORDS inside dst_buf
    word 6,7[192,256) mem_addr    main-memory BYTE address (load: source, store: destination)

:func:`encode` checks every field's range and raises :class:`IsaError` naming the field, the
value and the allowed range; :func:`decode` rejects undefined opcodes, buffer selectors and
non-zero reserved bits. :func:`to_words` / :func:`from_words` convert to and from the eight
little-endian 32-bit words the host writes into a channel's instruction memory (word 0 first).
"""

from __future__ import annotations

from amaranth.hdl import unsigned
from amaranth.lib import data, enum

from ace.layouts import Dtype, ReduceOp
from ace.vocab import Buffer, StepType

__all__ = [
    "Opcode", "Buf", "Instruction", "INSTR_BITS", "INSTR_WORDS", "IsaError",
    "encode", "encode_const", "decode", "to_words", "from_words", "FIELD_LIMITS",
    "OPCODE_NAMES", "NAME_TO_OPCODE", "BUF_NAMES", "NAME_TO_BUF",
]


class IsaError(ValueError):
    """A field out of range on encode, or an undefined encoding on decode."""


class Opcode(enum.Enum, shape=4):
    """Step type. Values 12..14 are reserved (decode error)."""
    NOP = 0     # wait on the dependency only
    LOAD = 1    # main memory (mem_addr) -> dst_buf[dst_off], count elements
    STORE = 2   # src_buf[src_off] -> main memory (mem_addr)
    S = 3       # send src slice to send_peer on send_link
    R = 4       # receive from recv_peer into dst slice
    RRC = 5     # dst = recv (+) src
    RRS = 6     # send (recv (+) src); nothing written
    RRCS = 7    # dst = recv (+) src, and send it
    RCS = 8     # dst = recv, and send it
    CPY = 9     # dst = src
    RE = 10     # dst = dst (+) src
    END = 15    # end of the channel's program


class Buf(enum.Enum, shape=2):
    """Buffer (region) selector. In ``sram`` placement the regions are SRAM regions whose base
    word addresses (in the unified input+output SRAM space) the program's buffer table gives;
    in ``memory`` and ``p2p`` placement (the baselines) they are main-memory regions whose byte
    base addresses the buffer table gives, and an offset of ``w`` words is byte
    ``base + w * link_bytes``. Value 3 is reserved."""
    INPUT = 0
    OUTPUT = 1
    SCRATCH = 2


#: Opcode -> step type (:class:`ace.vocab.StepType`): an opcode's name is its step type's
#: text upper-cased (``Opcode.RRC`` is ``rrc``, ``Opcode.S`` the send ``s``).
OPCODE_NAMES = {code: StepType(code.name.lower()) for code in Opcode}
NAME_TO_OPCODE = {name: code for code, name in OPCODE_NAMES.items()}
#: Buffer selector -> buffer (:class:`ace.vocab.Buffer`), by member name.
BUF_NAMES = {code: Buffer[code.name] for code in Buf}
NAME_TO_BUF = {name: code for code, name in BUF_NAMES.items()}
assert set(NAME_TO_OPCODE) == set(StepType) and set(NAME_TO_BUF) == set(Buffer)

#: The instruction layout. Reserved fields keep every field inside one 32-bit word.
Instruction = data.StructLayout({
    "opcode": Opcode,
    "dtype": Dtype,
    "op": ReduceOp,
    "src_buf": Buf,
    "dst_buf": Buf,
    "rsvd0": unsigned(4),
    "send_link": unsigned(4),
    "recv_link": unsigned(4),
    "rsvd1": unsigned(8),
    "send_peer": unsigned(8),
    "recv_peer": unsigned(8),
    "dep_channel": unsigned(4),
    "rsvd2": unsigned(11),
    "dep_valid": unsigned(1),
    "dep_step": unsigned(16),
    "rsvd3": unsigned(16),
    "count": unsigned(32),
    "src_off": unsigned(32),
    "dst_off": unsigned(32),
    "mem_addr": unsigned(64),
})

INSTR_BITS = Instruction.size
INSTR_WORDS = INSTR_BITS // 32
assert INSTR_BITS == 256

_ENUM_FIELDS = {"opcode": Opcode, "dtype": Dtype, "op": ReduceOp, "src_buf": Buf,
                "dst_buf": Buf}
_RESERVED = ("rsvd0", "rsvd1", "rsvd2", "rsvd3")

#: Allowed (min, max) of every plain integer field.
FIELD_LIMITS = {name: (0, (1 << Instruction[name].width) - 1)
                for name in Instruction._fields if name not in _ENUM_FIELDS}


def _enum_value(name: str, enum_cls, value):
    if isinstance(value, enum_cls):
        return value.value
    if isinstance(value, str):
        lookup = {"opcode": NAME_TO_OPCODE, "src_buf": NAME_TO_BUF, "dst_buf": NAME_TO_BUF}
        if name in lookup and value in lookup[name]:
            return lookup[name][value].value
        for member in enum_cls:
            if member.name.lower() == value.lower():
                return member.value
    elif isinstance(value, int) and not isinstance(value, bool):
        if value in {m.value for m in enum_cls}:
            return value
    allowed = ", ".join(f"{m.name}={m.value}" for m in enum_cls)
    raise IsaError(f"{name}: {value!r} is not a defined {enum_cls.__name__}; allowed: {allowed}")


_OFFSETS = {name: (Instruction[name].offset, Instruction[name].width)
            for name in Instruction._fields}


def _checked_values(fields: dict) -> dict:
    unknown = sorted(set(fields) - set(Instruction._fields))
    if unknown:
        raise IsaError(f"{unknown[0]}: not an instruction field; allowed: "
                       f"{', '.join(Instruction._fields)}")
    values = {}
    for name in Instruction._fields:
        value = fields.get(name, 0)
        if name in _ENUM_FIELDS:
            values[name] = _ENUM_FIELDS[name](_enum_value(name, _ENUM_FIELDS[name], value))
            continue
        if isinstance(value, bool):
            value = int(value)
        if not isinstance(value, int):
            raise IsaError(f"{name}: {value!r} is not an integer")
        low, high = FIELD_LIMITS[name]
        if name in _RESERVED and value != 0:
            raise IsaError(f"{name}: {value} must be 0 (reserved)")
        if not low <= value <= high:
            raise IsaError(f"{name}: {value} is out of range; allowed: {low} to {high} "
                           f"({Instruction[name].width} bits)")
        values[name] = value
    return values


def encode(**fields) -> int:
    """Pack an instruction into an int of :data:`INSTR_BITS` bits. Missing fields are zero;
    enum fields accept the enum member, its value or its name (``"rrc"``, ``"i"``, ``"bf16"``).

    Packs with the field offsets of :data:`Instruction` (fast); :func:`encode_const` packs the
    same fields through ``Instruction.const(...)`` and gives the same int (tests check it)."""
    bits = 0
    for name, value in _checked_values(fields).items():
        offset, _ = _OFFSETS[name]
        bits |= (value.value if name in _ENUM_FIELDS else value) << offset
    return bits


def encode_const(**fields) -> int:
    """:func:`encode` through Amaranth: ``Instruction.const(fields).as_value().value``."""
    return Instruction.const(_checked_values(fields)).as_value().value


def decode(bits: int) -> dict:
    """Unpack an instruction int into a dict of field values (enum fields as enum members).
    Raises :class:`IsaError` for an undefined opcode or buffer selector or reserved bits set."""
    if not isinstance(bits, int) or bits < 0 or bits >> INSTR_BITS:
        raise IsaError(f"instruction: {bits!r} is not an unsigned {INSTR_BITS}-bit integer")
    out = {}
    for name in Instruction._fields:
        field = Instruction[name]
        raw = (bits >> field.offset) & ((1 << field.width) - 1)
        if name in _ENUM_FIELDS:
            enum_cls = _ENUM_FIELDS[name]
            try:
                out[name] = enum_cls(raw)
            except ValueError:
                allowed = ", ".join(f"{m.name}={m.value}" for m in enum_cls)
                raise IsaError(f"{name}: {raw} is not a defined {enum_cls.__name__}; "
                               f"allowed: {allowed}") from None
        elif name in _RESERVED:
            if raw:
                raise IsaError(f"{name}: {raw:#x} must be 0 (reserved bits "
                               f"{field.offset}..{field.offset + field.width - 1})")
        else:
            out[name] = raw
    return out


def to_words(bits: int) -> list[int]:
    """The :data:`INSTR_WORDS` 32-bit words of an instruction, word 0 (bits 0..31) first."""
    return [(bits >> (32 * k)) & 0xFFFF_FFFF for k in range(INSTR_WORDS)]


def from_words(words) -> int:
    """Inverse of :func:`to_words`."""
    words = list(words)
    if len(words) != INSTR_WORDS:
        raise IsaError(f"words: {len(words)} given; an instruction is {INSTR_WORDS} words")
    bits = 0
    for k, word in enumerate(words):
        if not 0 <= word <= 0xFFFF_FFFF:
            raise IsaError(f"word {k}: {word!r} is not a 32-bit unsigned integer")
        bits |= word << (32 * k)
    return bits


def field_table() -> str:
    """Markdown table of the field map (docs embed it)."""
    rows = ["| field | bits | width | meaning |", "|---|---|---|---|"]
    meaning = {
        "opcode": "step type (Opcode)", "dtype": "element type (Dtype)",
        "op": "reduction operator (ReduceOp)", "src_buf": "source region (Buf)",
        "dst_buf": "destination region (Buf)", "send_link": "link to send on",
        "recv_link": "link to receive from", "send_peer": "node sent to",
        "recv_peer": "node received from", "dep_channel": "dependency: channel",
        "dep_valid": "dependency valid",
        "dep_step": "dependency: wait until dep_channel completed >= dep_step+1 steps",
        "count": "length in elements", "src_off": "source offset in SRAM words",
        "dst_off": "destination offset in SRAM words", "mem_addr": "main-memory byte address",
    }
    for name in Instruction._fields:
        field = Instruction[name]
        rows.append(f"| `{name}` | {field.offset}..{field.offset + field.width - 1} | "
                    f"{field.width} | {meaning.get(name, 'reserved, 0')} |")
    return "\n".join(rows) + "\n"
