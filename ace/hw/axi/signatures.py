"""AXI4 and AXI4-Lite port signatures with the member names cocotbext-axi matches.

Members are flat (``awaddr``, ``wdata``, ``rready``, ...), so a port named ``m_axi`` flattens to
``m_axi__awaddr``, ``m_axi__wdata``, ... and a testbench binds it with
``AxiBus.from_prefix(dut, "m_axi_")`` (cocotb joins prefix and name with ``_``). Signatures are
from the master's side; a slave exposes them flipped.
"""

from __future__ import annotations

from amaranth.lib import enum, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["AxiBurst", "AxiResp", "Axi4Signature", "AxiLiteSignature"]


class AxiBurst(enum.Enum, shape=2):
    FIXED = 0
    INCR = 1
    WRAP = 2


class AxiResp(enum.Enum, shape=2):
    OKAY = 0
    EXOKAY = 1
    SLVERR = 2
    DECERR = 3


class Axi4Signature(wiring.Signature):
    """AXI4 master port (full AXI4 without QoS, region and user signals).

    Parameters
    ----------
    addr_bits : int
        Width of ``awaddr`` and ``araddr``.
    data_bytes : int
        Bytes per beat: ``wdata``/``rdata`` are ``8 * data_bytes`` wide, ``wstrb`` has one bit
        per byte.
    id_bits : int
        Width of ``awid``, ``bid``, ``arid`` and ``rid`` (cocotbext-axi needs them present).
    read, write : bool
        Include the read channels (AR, R) and/or the write channels (AW, W, B). A block that
        masters only one direction (the DMA reader or writer) uses half a signature; its parent
        forwards the members by name.
    """

    def __init__(self, addr_bits: int, data_bytes: int, id_bits: int, *,
                 read: bool = True, write: bool = True):
        self.addr_bits = addr_bits
        self.data_bytes = data_bytes
        self.id_bits = id_bits
        self.read = read
        self.write = write
        members = {}
        for ch, enabled in (("aw", write), ("ar", read)):
            if enabled:
                members.update({
                    f"{ch}id": Out(id_bits), f"{ch}addr": Out(addr_bits), f"{ch}len": Out(8),
                    f"{ch}size": Out(3), f"{ch}burst": Out(2), f"{ch}lock": Out(1),
                    f"{ch}cache": Out(4), f"{ch}prot": Out(3), f"{ch}valid": Out(1),
                    f"{ch}ready": In(1),
                })
        if write:
            members.update({
                "wdata": Out(8 * data_bytes), "wstrb": Out(data_bytes), "wlast": Out(1),
                "wvalid": Out(1), "wready": In(1),
                "bid": In(id_bits), "bresp": In(2), "bvalid": In(1), "bready": Out(1),
            })
        if read:
            members.update({
                "rid": In(id_bits), "rdata": In(8 * data_bytes), "rresp": In(2),
                "rlast": In(1), "rvalid": In(1), "rready": Out(1),
            })
        super().__init__(members)

    def __eq__(self, other):
        return (type(other) is Axi4Signature and self.addr_bits == other.addr_bits
                and self.data_bytes == other.data_bytes and self.id_bits == other.id_bits
                and self.read == other.read and self.write == other.write)

    def __repr__(self):
        return (f"Axi4Signature({self.addr_bits}, {self.data_bytes}, {self.id_bits}, "
                f"read={self.read}, write={self.write})")


class AxiLiteSignature(wiring.Signature):
    """AXI4-Lite master port; a CSR block exposes it flipped as ``s_axil``.

    Parameters
    ----------
    addr_bits : int
        Width of ``awaddr``/``araddr``.
    data_bytes : int
        4 or 8; ``wstrb`` has one bit per byte.
    """

    def __init__(self, addr_bits: int, data_bytes: int = 4):
        self.addr_bits = addr_bits
        self.data_bytes = data_bytes
        super().__init__({
            "awaddr": Out(addr_bits), "awprot": Out(3), "awvalid": Out(1), "awready": In(1),
            "wdata": Out(8 * data_bytes), "wstrb": Out(data_bytes), "wvalid": Out(1),
            "wready": In(1),
            "bresp": In(2), "bvalid": In(1), "bready": Out(1),
            "araddr": Out(addr_bits), "arprot": Out(3), "arvalid": Out(1), "arready": In(1),
            "rdata": In(8 * data_bytes), "rresp": In(2), "rvalid": In(1), "rready": Out(1),
        })

    def __eq__(self, other):
        return (type(other) is AxiLiteSignature and self.addr_bits == other.addr_bits
                and self.data_bytes == other.data_bytes)

    def __repr__(self):
        return f"AxiLiteSignature({self.addr_bits}, {self.data_bytes})"
