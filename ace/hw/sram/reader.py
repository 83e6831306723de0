"""Slice reader: streams ``words`` consecutive SRAM words starting at ``addr``.

::

    cmd (addr, words) --> address counter --> port.req --> SRAM --> port.resp --> o (data, last)
                                                                    (word counter marks last)

Throughput: one word per cycle while ``o`` is ready (the SRAM's response FIFO keeps the request
side running). Latency: the reader follows the SRAM's handshakes and assumes no latency; the
first word leaves one cycle after the command plus the SRAM's
:attr:`ace.hw.sram.banked.BankedSram.read_latency` (8 cycles in the `small` engine), plus any wait
for the port's time slot. A new command is taken once every word of the previous one has left
on ``o``.
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ace.layouts import DMA_LENGTH_BITS, sram_read_signature

__all__ = ["SramSliceReader", "SliceCommand", "SliceWord"]


class SliceCommand(data.StructLayout):
    """A slice of the unified SRAM space: first word address and word count (>= 1)."""

    def __init__(self, addr_bits: int):
        super().__init__({"addr": unsigned(addr_bits), "words": unsigned(DMA_LENGTH_BITS)})


class SliceWord(data.StructLayout):
    """One word of a slice and whether it is the slice's last."""

    def __init__(self, word_bytes: int):
        super().__init__({"data": unsigned(8 * word_bytes), "last": unsigned(1)})


class SramSliceReader(wiring.Component):
    """Reads one slice per command (see the module docstring).

    Parameters
    ----------
    words : int
        Words in the SRAM address space.
    word_bytes : int
        Bytes per word.

    Members
    -------
    cmd : In(stream of :class:`SliceCommand`)
    port : Out(:func:`ace.layouts.sram_read_signature`)
    o : Out(stream of :class:`SliceWord`)
    busy : Out(1), a command is taken and not all its words have left on ``o``
    """

    def __init__(self, words: int, word_bytes: int):
        port = sram_read_signature(words, word_bytes)
        addr_bits = port.members["req"].signature.members["payload"].shape.width
        super().__init__({
            "cmd": In(stream.Signature(SliceCommand(addr_bits))),
            "port": Out(port),
            "o": Out(stream.Signature(SliceWord(word_bytes))),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        addr = Signal.like(self.port.req.payload)
        to_request = Signal(DMA_LENGTH_BITS)
        to_deliver = Signal(DMA_LENGTH_BITS)

        m.d.comb += [
            self.busy.eq(to_deliver != 0),
            self.cmd.ready.eq(to_deliver == 0),
            self.port.req.payload.eq(addr),
            self.port.req.valid.eq(to_request != 0),
            self.o.payload.data.eq(self.port.resp.payload),
            self.o.payload.last.eq(to_deliver == 1),
            self.o.valid.eq(self.port.resp.valid),
            self.port.resp.ready.eq(self.o.ready),
        ]
        with m.If(self.cmd.valid & self.cmd.ready):
            m.d.sync += [
                addr.eq(self.cmd.payload.addr),
                to_request.eq(self.cmd.payload.words),
                to_deliver.eq(self.cmd.payload.words),
            ]
        with m.If(self.port.req.valid & self.port.req.ready):
            m.d.sync += [addr.eq(addr + 1), to_request.eq(to_request - 1)]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += to_deliver.eq(to_deliver - 1)
        return m
