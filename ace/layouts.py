"""Shared enums, payload layouts and port signatures: the contracts between ACE's blocks.

Everything that crosses a block boundary, or is packed by Python (tests, assembler, harness),
is defined here once, so hardware and software agree by construction.
"""

from __future__ import annotations

from amaranth.hdl import unsigned
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
