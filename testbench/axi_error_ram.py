"""cocotbext-axi ``AxiRam`` that answers SLVERR or DECERR for chosen address ranges.

cocotbext-axi's slave models answer SLVERR when their ``_read``/``_write`` hook raises; this
model's hooks raise for addresses inside :attr:`ErrorAxiRam.error_ranges` (byte ranges
``(start, end)`` or ``(start, end, "DECERR")``, end exclusive). A read beat of such an address
returns zeros with SLVERR (DECERR for a ``"DECERR"`` range); a write burst with an enabled byte
in such a range gets SLVERR (or DECERR) in its B response. DECERR is made by rewriting the
SLVERR of the R beat or B response that the failed hook caused, as it is sent. Everything else
is the unmodified ``AxiRam`` behaviour, including pause generators on every channel.
"""

from __future__ import annotations

from cocotbext.axi.axi_ram import AxiRamRead, AxiRamWrite
from cocotbext.axi.constants import AxiResp
from cocotbext.axi.memory import Memory

__all__ = ["ErrorAxiRam"]


class _Hits:
    def __init__(self):
        self.error_ranges: list[tuple] = []
        self.errors_answered = 0

    def check(self, address: int, length: int) -> None:
        """Raise :class:`_Injected`, naming the range's response, for an address in a range."""
        for start, end, *resp in self.error_ranges:
            if address < end and start < address + length:
                self.errors_answered += 1
                raise _Injected(resp[0] if resp else "SLVERR")


class _Injected(IOError):
    def __init__(self, resp: str):
        super().__init__(f"injected AXI {resp}")
        self.resp = resp


def _rewrite_decerr(port, channel, field):
    """Wrap ``channel.send`` so that the SLVERR a DECERR range caused goes out as DECERR."""
    send = channel.send

    async def send_rewritten(item):
        if port.decerr_pending and int(getattr(item, field)) == AxiResp.SLVERR:
            setattr(item, field, AxiResp.DECERR)
        port.decerr_pending = False
        await send(item)
    channel.send = send_rewritten


class _ErrorRead(AxiRamRead):
    def __init__(self, *args, hits, **kwargs):
        self.hits = hits
        self.decerr_pending = False
        super().__init__(*args, **kwargs)
        _rewrite_decerr(self, self.r_channel, "rresp")

    async def _read(self, address, length):
        try:
            self.hits.check(address, length)
        except _Injected as error:
            self.decerr_pending = error.resp == "DECERR"
            raise
        return await super()._read(address, length)


class _ErrorWrite(AxiRamWrite):
    def __init__(self, *args, hits, **kwargs):
        self.hits = hits
        self.decerr_pending = False
        super().__init__(*args, **kwargs)
        _rewrite_decerr(self, self.b_channel, "bresp")

    async def _write(self, address, data):
        try:
            self.hits.check(address, len(data))
        except _Injected as error:
            self.decerr_pending |= error.resp == "DECERR"
            raise
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
