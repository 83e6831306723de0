"""Header check generator for the NIC: CRC-8 over the low 56 bits of a :class:`PacketHeader`.

CRC-8 with initial value 0 is linear over GF(2), so each check bit is the XOR of a fixed set of
header bits. The sets are found by running the Python reference :func:`ace.layouts.crc8` on
every single-bit header, so hardware and software agree by construction.
"""


from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ace.layouts import PacketHeader, packet_header_check

__all__ = ["HeaderCheck", "check_taps"]

_COVERED_BITS = 56


def check_taps() -> list[list[int]]:
    """For each of the 8 check bits, the header bit indices whose XOR gives it."""
    columns = [packet_header_check(1 << bit) for bit in range(_COVERED_BITS)]
    return [[bit for bit in range(_COVERED_BITS) if columns[bit] >> out & 1] for out in range(8)]


class HeaderCheck(wiring.Component):
    """Combinational CRC-8 of a packet header.

    Members
    -------
    header : In(PacketHeader)
        The header; its ``check`` field is ignored when computing ``check`` and compared for
        ``ok``.
    check : Out(8)
        CRC-8 of header bits 0..55.
    ok : Out(1)
        ``header.check == check``.

    Latency: combinational.
    """

    header: In(PacketHeader)
    check: Out(8)
    ok: Out(1)

    def elaborate(self, platform):
        m = Module()
        bits = self.header.as_value()
        for out, taps in enumerate(check_taps()):
            value = 0
            for tap in taps:
                value = value ^ bits[tap]
            m.d.comb += self.check[out].eq(value)
        m.d.comb += self.ok.eq(self.header.check == self.check)
        return m
