"""cocotbext-axi ``AxiRam`` that answers SLVERR or DECERR for chosen address ranges.

cocotbext-axi's slave models answer SLVERR when their ``_read``/``_write`` hook raises; this
model's hooks raise for addresses inside :attr:`ErrorAxiRam.error_ranges` (byte ranges
``(start, end)``, end exclusive). A read beat of such an address returns zeros with SLVERR; a
write burst with an enabled byte in such a range gets SLVERR in its B response. Everything else
is the unmodified ``AxiRam`` behaviour, including pause generators on every channel.
"""

from __future__ import annotations

from cocotbext.axi.axi_ram import AxiRamRead, AxiRamWrite
from cocotbext.axi.memory import Memory

__all__ = ["ErrorAxiRam"]


class _Hits:
    def __init__(self):
        self.error_ranges: list[tuple[int, int]] = []
        self.errors_answered = 0

    def check(self, address: int, length: int):
        for start, end in self.error_ranges:
            if address < end and start < address + length:
                self.errors_answered += 1
                raise IOError(f"injected AXI error at 0x{address:x}")


class _ErrorRead(AxiRamRead):
    def __init__(self, *args, hits, **kwargs):
        self.hits = hits
        super().__init__(*args, **kwargs)

    async def _read(self, address, length):
        self.hits.check(address, length)
        return await super()._read(address, length)


class _ErrorWrite(AxiRamWrite):
    def __init__(self, *args, hits, **kwargs):
        self.hits = hits
        super().__init__(*args, **kwargs)

    async def _write(self, address, data):
        self.hits.check(address, len(data))
        await super()._write(address, data)


class ErrorAxiRam(Memory):
    """``AxiRam`` with injectable error responses (see the module docstring)."""

    def __init__(self, bus, clock, reset=None, reset_active_level=True, size=2**32, mem=None,
                 **kwargs):
        self.write_if = None
        self.read_if = None
        super().__init__(size, mem, **kwargs)
        self.hits = _Hits()
        self.write_if = _ErrorWrite(bus.write, clock, reset, reset_active_level, mem=self.mem,
                                    hits=self.hits)
        self.read_if = _ErrorRead(bus.read, clock, reset, reset_active_level, mem=self.mem,
                                  hits=self.hits)

    @property
    def error_ranges(self) -> list[tuple[int, int]]:
        return self.hits.error_ranges

    @property
    def errors_answered(self) -> int:
        return self.hits.errors_answered
