"""A minimal AXI4-Lite master for system testbenches: it touches the bus only while a transfer
is in progress, so a simulation with many nodes spends no Python time per idle cycle
(cocotbext-axi's masters sample their response channels every cycle, which dominates a
multi-node run). One transfer at a time per port; ports of different nodes run concurrently.
"""

from __future__ import annotations

from cocotb.triggers import FallingEdge, RisingEdge, gather

__all__ = ["AxiLiteDriver", "AxiLiteError"]


class AxiLiteError(RuntimeError):
    """The slave answered SLVERR or DECERR."""


class AxiLiteDriver:
    def __init__(self, dut, prefix: str, clock):
        self.clock = clock
        self.s = {name: getattr(dut, f"{prefix}__{name}") for name in (
            "awaddr", "awprot", "awvalid", "awready", "wdata", "wstrb", "wvalid", "wready",
            "bresp", "bvalid", "bready", "araddr", "arprot", "arvalid", "arready", "rdata",
            "rresp", "rvalid", "rready")}
        for name in ("awvalid", "wvalid", "bready", "arvalid", "rready", "awprot", "arprot"):
            self.s[name].value = 0

    async def _handshake(self, valid: str, ready: str) -> None:
        """Hold ``valid`` until a cycle ends with ``ready`` high (sampled mid-cycle, when the
        slave's outputs have settled), then drop it."""
        self.s[valid].value = 1
        while True:
            await FallingEdge(self.clock)
            fire = bool(self.s[ready].value)
            await RisingEdge(self.clock)
            if fire:
                self.s[valid].value = 0
                return

    async def _response(self, valid: str, ready: str, fields) -> list[int]:
        self.s[ready].value = 1
        while True:
            await FallingEdge(self.clock)
            if self.s[valid].value:
                values = [int(self.s[f].value) for f in fields]
                await RisingEdge(self.clock)
                self.s[ready].value = 0
                return values
            await RisingEdge(self.clock)

    async def write32(self, addr: int, value: int) -> None:
        s = self.s
        s["awaddr"].value = addr
        s["wdata"].value = value
        s["wstrb"].value = 0xF
        await gather(self._handshake("awvalid", "awready"),
                     self._handshake("wvalid", "wready"))
        (resp,) = await self._response("bvalid", "bready", ["bresp"])
        if resp:
            raise AxiLiteError(f"write {addr:#x}: response {resp}")

    async def read32(self, addr: int) -> int:
        self.s["araddr"].value = addr
        await self._handshake("arvalid", "arready")
        data, resp = await self._response("rvalid", "rready", ["rdata", "rresp"])
        if resp:
            raise AxiLiteError(f"read {addr:#x}: response {resp}")
        return data
