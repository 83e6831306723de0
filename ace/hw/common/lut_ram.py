"""A small RAM with one write port and one asynchronous read port: LUT RAM on an FPGA.

On ECP5 yosys maps it to ``TRELLIS_DPR16X4`` cells (16 words of 4 bits each); the rings of
the FIFOs and delay lines that want a read in the cycle of the address use it.
"""

from __future__ import annotations

from amaranth.lib import memory

__all__ = ["lut_ram"]


def lut_ram(m, width: int, depth: int, name: str = "storage"):
    """A ``depth`` x ``width`` memory, initially zero, added to ``m`` as ``name``; returns its
    synchronous write port and its combinational read port."""
    m.submodules[name] = storage = memory.Memory(shape=width, depth=depth, init=[])
    w_port = storage.write_port()                  # (the ports' signals take these names)
    r_port = storage.read_port(domain="comb")
    return w_port, r_port
