"""Slice writer: writes a stream of words to ``words`` consecutive SRAM words from ``addr``.

::

    cmd (addr, words, last_mask) --> address counter --+
    i (data) ------------------------------------------+--> port (addr, data, mask)

The last word is written with ``last_mask`` (the bytes of a slice that ends inside a word);
every other word with all bytes enabled. Throughput: one word per cycle when the SRAM grants the
port. A word is in the SRAM when its transfer on ``port`` completes, so a read requested after
``busy`` falls sees it. A new command is taken once the previous one's last word is written.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ace.layouts import DMA_LENGTH_BITS, sram_write_signature

__all__ = ["SramSliceWriter", "WriteSliceCommand"]


class WriteSliceCommand(data.StructLayout):
    """A slice to write: first word address, word count (>= 1), byte mask of the last word."""

    def __init__(self, addr_bits: int, word_bytes: int):
        super().__init__({"addr": unsigned(addr_bits), "words": unsigned(DMA_LENGTH_BITS),
                          "last_mask": unsigned(word_bytes)})


class SramSliceWriter(wiring.Component):
    """Writes one slice per command (see the module docstring).

    Parameters
    ----------
    words : int
        Words in the SRAM address space.
    word_bytes : int
        Bytes per word.

    Members
    -------
    cmd : In(stream of :class:`WriteSliceCommand`)
    i : In(stream of ``unsigned(8 * word_bytes)``), the words, in order
    port : Out(:func:`ace.layouts.sram_write_signature`)
    busy : Out(1), a command is taken and not all its words are written
    """

    def __init__(self, words: int, word_bytes: int):
        port = sram_write_signature(words, word_bytes)
        addr_bits = port.members["payload"].shape["addr"].shape.width
        self.word_bytes = word_bytes
        super().__init__({
            "cmd": In(stream.Signature(WriteSliceCommand(addr_bits, word_bytes))),
            "i": In(stream.Signature(unsigned(8 * word_bytes))),
            "port": Out(port),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        addr = Signal.like(self.port.payload.addr)
        left = Signal(DMA_LENGTH_BITS)
        # left != 0 and left == 1, kept in registers beside ``left``: the stream's ready and
        # the last word's mask come from a flip-flop, not from a compare of ``left``.
        more = Signal()
        one = Signal()
        last_mask = Signal(self.word_bytes)
        full = (1 << self.word_bytes) - 1

        m.d.comb += [
            self.busy.eq(more),
            self.cmd.ready.eq(~more),
            self.port.payload.addr.eq(addr),
            self.port.payload.data.eq(self.i.payload),
            self.port.payload.mask.eq(Mux(one, last_mask, full)),
            self.port.valid.eq(self.i.valid & more),
            self.i.ready.eq(self.port.ready & more),
        ]
        with m.If(self.cmd.valid & self.cmd.ready):
            words = self.cmd.payload.words
            m.d.sync += [
                addr.eq(self.cmd.payload.addr),
                left.eq(words),
                more.eq(words != 0),
                one.eq(words == 1),
                last_mask.eq(self.cmd.payload.last_mask),
            ]
        with m.If(self.port.valid & self.port.ready):
            m.d.sync += [addr.eq(addr + 1), left.eq(left - 1), more.eq(~one),
                         one.eq(left == 2)]
        return m
