"""Shared enums, payload layouts and port signatures: the contracts between ACE's blocks.

Everything that crosses a block boundary, or is packed by Python (tests, assembler, harness),
is defined here once, so hardware and software agree by construction.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Value, unsigned
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = [
    "Dtype", "ReduceOp", "DTYPE_BYTES",
    "SramWrite", "sram_write_signature", "sram_read_signature",
    "AxiStreamSignature",
]


class Dtype(enum.Enum, shape=2):
    """Element type of a reduction. The encoding is part of the instruction format."""
    INT32 = 0
    FP32 = 1
    BF16 = 2
    FP16 = 3


class ReduceOp(enum.Enum, shape=2):
    """Elementwise reduction operator. ``COPY`` passes operand ``a`` through unchanged."""
    SUM = 0
    MAX = 1
    MIN = 2
    COPY = 3


DTYPE_BYTES = {Dtype.INT32: 4, Dtype.FP32: 4, Dtype.BF16: 2, Dtype.FP16: 2}


# -- SRAM ports ------------------------------------------------------------------------------
#
# Addresses are word (beat) addresses. A write carries a byte-enable mask, one bit per byte of
# the beat. A read is a request stream of addresses and a response stream of data words,
# returned in request order. Signatures are from the requester's side; the SRAM exposes them
# flipped.

def _addr_bits(words: int) -> int:
    return max(1, (words - 1).bit_length())


class SramWrite(data.StructLayout):
    """Payload of an SRAM write port: word address, data word, byte enables."""

    def __init__(self, words: int, word_bytes: int):
        super().__init__({
            "addr": unsigned(_addr_bits(words)),
            "data": unsigned(8 * word_bytes),
            "mask": unsigned(word_bytes),
        })


def sram_write_signature(words: int, word_bytes: int) -> wiring.Signature:
    """Requester side of an SRAM write port: one stream of :class:`SramWrite`."""
    return stream.Signature(SramWrite(words, word_bytes))


def sram_read_signature(words: int, word_bytes: int) -> wiring.Signature:
    """Requester side of an SRAM read port: ``req`` (addresses) out, ``resp`` (data) in."""
    return wiring.Signature({
        "req": Out(stream.Signature(unsigned(_addr_bits(words)))),
        "resp": In(stream.Signature(unsigned(8 * word_bytes))),
    })


# -- AXI-Stream --------------------------------------------------------------------------------

class AxiStreamSignature(wiring.Signature):
    """AXI-Stream, source side, with the member names cocotbext-axi matches.

    A port named ``s_axis`` flattens to ``s_axis__tdata``, ``s_axis__tvalid``, ...; a testbench
    binds it with ``AxiStreamBus.from_prefix(dut, "s_axis_")``.

    Parameters
    ----------
    data_bytes : int
        Width of ``tdata`` in bytes; ``tkeep`` has one bit per byte when ``keep`` is set.
    user_bits : int
        Width of ``tuser``; 0 leaves it out.
    keep : bool
        Include ``tkeep``.
    """

    def __init__(self, data_bytes: int, *, user_bits: int = 0, keep: bool = False):
        self.data_bytes = data_bytes
        self.user_bits = user_bits
        self.keep = keep
        members = {
            "tdata": Out(8 * data_bytes),
            "tvalid": Out(1),
            "tready": In(1),
            "tlast": Out(1),
        }
        if keep:
            members["tkeep"] = Out(data_bytes)
        if user_bits:
            members["tuser"] = Out(user_bits)
        super().__init__(members)

    def __eq__(self, other):
        return (type(other) is AxiStreamSignature and self.data_bytes == other.data_bytes
                and self.user_bits == other.user_bits and self.keep == other.keep)

    def __repr__(self):
        return (f"AxiStreamSignature({self.data_bytes}, user_bits={self.user_bits}, "
                f"keep={self.keep})")


# -- NIC packets and channel ports -------------------------------------------------------------
#
# A link packet is one header beat followed by payload beats (tlast on the final beat). The
# header is a 64-bit PacketHeader in the low bytes of the header beat (tdata[0:64], byte 0 =
# bits 0..7); the rest of that beat is zero. A CREDIT packet is the header beat alone, and its
# ``length`` field carries the number of beats credited. See docs/nic.md.

__all__ += [
    "struct_value", "PacketType", "PacketHeader", "PACKET_MAGIC", "PACKET_VERSION", "PACKET_HEADER_BITS",
    "NIC_NODE_BITS", "NIC_TAG_BITS", "NicError", "crc8", "packet_header_check",
    "make_packet_header", "NicSendCmd", "NicTxBeat", "NicRxBeat",
]

PACKET_MAGIC = 0xA
PACKET_VERSION = 0
PACKET_HEADER_BITS = 64
NIC_NODE_BITS = 8
NIC_TAG_BITS = 8


class PacketType(enum.Enum, shape=2):
    """Link packet type: ``DATA`` has payload beats, ``CREDIT`` is a header-only credit return."""
    DATA = 0
    CREDIT = 1


class PacketHeader(data.Struct):
    """The 64-bit link packet header (low bits first). ``check`` is CRC-8 (polynomial 0x07,
    init 0) over header bytes 0..6, see :func:`packet_header_check`. ``length`` is the payload
    length in bytes (DATA) or the credited beat count (CREDIT)."""
    # Spelled as a dict: this module uses ``from __future__ import annotations``, which would
    # turn field annotations into strings that data.Struct cannot read.
    __annotations__ = {
        "magic": unsigned(4),
        "version": unsigned(2),
        "ptype": PacketType,
        "src": unsigned(NIC_NODE_BITS),
        "channel": unsigned(4),
        "rsvd0": unsigned(4),
        "tag": unsigned(NIC_TAG_BITS),
        "length": unsigned(17),
        "rsvd1": unsigned(7),
        "check": unsigned(8),
    }


def crc8(payload: bytes, poly: int = 0x07, init: int = 0) -> int:
    """CRC-8, MSB first, no reflection, no final XOR (CRC-8/SMBUS for the defaults)."""
    crc = init
    for byte in payload:
        crc ^= byte
        for _ in range(8):
            crc = ((crc << 1) ^ poly) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
    return crc


def packet_header_check(header_bits: int) -> int:
    """The ``check`` field for a header: CRC-8 over its low 56 bits as 7 little-endian bytes."""
    return crc8((header_bits & ((1 << 56) - 1)).to_bytes(7, "little"))


def struct_value(layout, **fields) -> Value:
    """A whole ``layout`` as one value built from ``fields`` (ints or values, each cut or
    zero-extended to its field's width; omitted fields are 0), in the layout's own field order.
    Assigning it in one statement keeps constant fields out of reader-less ``always @*`` blocks,
    which Verilator never runs."""
    layout, parts = data.Layout.cast(layout), []
    unknown = set(fields) - {name for name, _ in layout}
    if unknown:
        raise ValueError(f"{sorted(unknown)} are not fields of {layout!r}")
    for name, field in sorted(layout, key=lambda item: item[1].offset):
        value = fields.get(name, 0)
        value = Const(value, field.width) if isinstance(value, int) else Value.cast(value)
        parts.append(value[:field.width] if len(value) >= field.width
                     else Cat(value, Const(0, field.width - len(value))))
    return Cat(*parts)


def make_packet_header(**fields) -> int:
    """A packed header (int) with magic, version and a correct ``check``; ``fields`` override
    any of them (tests build bad headers with ``magic=...`` or ``check=...``)."""
    values = {"magic": PACKET_MAGIC, "version": PACKET_VERSION, **fields}
    check = values.pop("check", None)
    ptype = values.pop("ptype", PacketType.DATA)
    ptype = ptype.value if isinstance(ptype, PacketType) else int(ptype)  # may be undefined
    bits = PacketHeader.const({**values, "check": 0}).as_value().value
    bits &= (1 << PACKET_HEADER_BITS) - 1
    bits |= (ptype & 3) << PacketHeader.as_shape()["ptype"].offset
    if check is None:
        check = packet_header_check(bits)
    return bits | (check << 56)


class NicError(enum.Enum, shape=4):
    """Cause code of a NIC error (sticky status). The first check that fails names it."""
    NONE = 0
    BAD_MAGIC = 1        # magic or version mismatch
    BAD_CHECK = 2        # header CRC-8 mismatch
    BAD_TYPE = 3         # unknown packet type
    BAD_CHANNEL = 4      # channel >= num_channels
    BAD_LENGTH = 5       # DATA length 0 or > max_packet_bytes; CREDIT count 0 or > buffer depth
    EARLY_TLAST = 6      # tlast before the beat count that the length implies
    MISSING_TLAST = 7    # no tlast on the last beat that the length implies (frame too long)
    OVERFLOW = 8         # DATA packet larger than the channel's free RX space (credits broken)
    CREDIT_OVERFLOW = 9  # credit return beyond the receiver's buffer depth
    BAD_COMMAND = 10     # channel send command with length 0, too long, or link out of range


class NicSendCmd(data.StructLayout):
    """A channel's send command: one packet of ``length`` bytes (1..max_send_bytes, see
    :class:`ace.hw.nic.interface.NicInterface`) on ``link`` with ``tag``."""

    def __init__(self, config):
        super().__init__({
            "link": unsigned(max(1, (config.num_links - 1).bit_length())),
            "tag": unsigned(NIC_TAG_BITS),
            "length": unsigned(config.max_packet_bytes.bit_length()),
        })


class NicTxBeat(data.StructLayout):
    """A payload beat from a channel to the NIC; bytes past the packet's length are ignored."""

    def __init__(self, config):
        super().__init__({"data": unsigned(8 * config.link_bytes)})


class NicRxBeat(data.StructLayout):
    """A payload beat delivered by the NIC to a channel. ``keep`` marks valid bytes (all but
    the last beat are full), ``first``/``last`` delimit the packet, and ``src``, ``tag`` and
    ``length`` repeat the packet's header fields on every beat."""

    def __init__(self, config):
        super().__init__({
            "data": unsigned(8 * config.link_bytes),
            "keep": unsigned(config.link_bytes),
            "first": unsigned(1),
            "last": unsigned(1),
            "src": unsigned(NIC_NODE_BITS),
            "tag": unsigned(NIC_TAG_BITS),
            "length": unsigned(17),
        })


# -- DMA descriptors and completions (ace/hw/dma/engine.py) ---------------------------------------------

__all__ += ["DMA_ID_BITS", "DMA_LENGTH_BITS", "DmaKind", "DmaStatus", "DmaDescriptor",
            "DmaCompletion"]

#: Width of a DMA descriptor's id/tag, echoed in its completion.
DMA_ID_BITS = 8
#: Width of a DMA descriptor's byte length: 0 .. 2**24 - 1 bytes.
DMA_LENGTH_BITS = 24


class DmaKind(enum.Enum, shape=2):
    """What a DMA descriptor moves. The encoding is part of the instruction format."""
    LOAD = 0           # main memory -> SRAM write port
    STORE = 1          # SRAM read port -> main memory
    MEM_TO_STREAM = 2  # main memory -> ``rd_stream`` (baseline mode)
    STREAM_TO_MEM = 3  # ``wr_stream`` -> main memory (baseline mode)


class DmaStatus(enum.Enum, shape=3):
    """Completion status: bit 2 = write side, bits 1..0 = the AXI response that failed."""
    OKAY = 0
    READ_SLVERR = 2
    READ_DECERR = 3
    WRITE_SLVERR = 6
    WRITE_DECERR = 7


class DmaDescriptor(data.StructLayout):
    """One DMA command: ``kind``, byte ``mem_addr``, SRAM word ``sram_addr`` (unified space of
    ``input_buffer_words + output_buffer_words`` words), byte ``length`` and ``id``."""

    def __init__(self, config):
        super().__init__({
            "kind": DmaKind,
            "id": unsigned(DMA_ID_BITS),
            "length": unsigned(DMA_LENGTH_BITS),
            "mem_addr": unsigned(config.mem_addr_bits),
            "sram_addr": unsigned(_addr_bits(config.input_buffer_words
                                              + config.output_buffer_words)),
        })


class DmaCompletion(data.StructLayout):
    """One DMA completion: the descriptor's ``id`` and its :class:`DmaStatus`."""

    def __init__(self):
        super().__init__({"id": unsigned(DMA_ID_BITS), "status": DmaStatus})
