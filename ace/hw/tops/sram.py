"""Verilog top ``ace_sram``: one engine SRAM buffer with the engine's full port set.

::

    rd0 .. rd{2L}  (NIC TX x L, ALU operand x L, DMA store) --+
                                                              +--> BankedSram(input_buffer_words,
    wr0 .. wr{L}   (NIC RX / ALU result x L, DMA load)     --+      link_bytes, sram_banks)

The port roles and counts come from :class:`ace.hw.sram.banked.EngineSramPorts`, which the engine reuses.
"""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from ace.config import AceConfig
from ace.layouts import sram_read_signature, sram_write_signature
from ace.hw.sram.banked import BankedSram, EngineSramPorts

__all__ = ["SramBufferTop"]


class SramBufferTop(wiring.Component):
    """One SRAM buffer of ``config.input_buffer_words`` words of ``config.link_bytes`` bytes in
    ``config.sram_banks`` banks, with ``2 * num_links + 1`` read and ``num_links + 1`` write
    ports (see :class:`~ace.hw.sram.banked.EngineSramPorts` for which client owns which port).

    Latency and throughput are those of :class:`~ace.hw.sram.banked.BankedSram`: a read response
    is valid :attr:`read_latency` cycles after its request at the earliest; each port moves up
    to one word per cycle on consecutive addresses.

    Parameters
    ----------
    config : AceConfig
        Engine configuration.

    Members
    -------
    rd{i} : In(sram_read_signature(words, link_bytes))
        Read ports, ``i`` in ``range(ports.read_ports)``.
    wr{j} : In(sram_write_signature(words, link_bytes))
        Write ports, ``j`` in ``range(ports.write_ports)``.
    """

    def __init__(self, config: AceConfig):
        self.config = config
        self.ports = EngineSramPorts(config.num_links)
        self.words = config.input_buffer_words
        members = {}
        for i in range(self.ports.read_ports):
            members[f"rd{i}"] = In(sram_read_signature(self.words, config.link_bytes))
        for j in range(self.ports.write_ports):
            members[f"wr{j}"] = In(sram_write_signature(self.words, config.link_bytes))
        super().__init__(members)
        self._sram = BankedSram(self.words, config.link_bytes, config.sram_banks,
                                self.ports.read_ports, self.ports.write_ports)

    @property
    def read_ports(self) -> int:
        return self.ports.read_ports

    @property
    def write_ports(self) -> int:
        return self.ports.write_ports

    @property
    def read_latency(self) -> int:
        return self._sram.read_latency

    def elaborate(self, platform):
        m = Module()
        m.submodules.sram = sram = self._sram
        for i in range(self.ports.read_ports):
            wiring.connect(m, wiring.flipped(getattr(self, f"rd{i}")), getattr(sram, f"rd{i}"))
        for j in range(self.ports.write_ports):
            wiring.connect(m, wiring.flipped(getattr(self, f"wr{j}")), getattr(sram, f"wr{j}"))
        return m
