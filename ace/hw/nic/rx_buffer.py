"""Per-(link, channel) receive buffer of the NIC: a FIFO whose writes are tentative until the
packet is accepted, so a bad packet is dropped completely.

::

    w_en/w_data --> [ Memory: depth beats ] --> read register --> r (stream of NicRxBeat)
    commit / rollback move the committed write pointer / restore the tentative one
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ace.layouts import NicRxBeat

__all__ = ["NicRxBuffer"]


class NicRxBuffer(wiring.Component):
    """Receive buffer with commit/rollback.

    Parameters
    ----------
    config : AceConfig
        ``rx_channel_beats`` is the depth in beats (a power of two); ``link_bytes`` the width.

    Members
    -------
    w_en : In(1)
        Write ``w_data`` at the tentative write pointer and advance it.
    w_data : In(NicRxBeat)
    commit : In(1)
        Make every tentative write (including one in this cycle) visible to the reader.
    rollback : In(1)
        Discard every uncommitted write (including one in this cycle).
    free : Out(range(depth + 1))
        Beats that can be written without overwriting committed data (registered state).
    r : Out(stream.Signature(NicRxBeat))
        Committed beats in order. One beat per cycle; first beat two cycles after ``commit``.
    freed : Out(1)
        A beat left the memory this cycle (one credit to return).
    """

    def __init__(self, config):
        self.config = config
        self.depth = config.rx_channel_beats
        super().__init__({
            "w_en": In(1),
            "w_data": In(NicRxBeat(config)),
            "commit": In(1),
            "rollback": In(1),
            "free": Out(range(self.depth + 1)),
            "r": Out(stream.Signature(NicRxBeat(config))),
            "freed": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        depth = self.depth
        addr_bits = (depth - 1).bit_length()
        m.submodules.mem = mem = Memory(shape=NicRxBeat(self.config), depth=depth, init=[])
        wr = mem.write_port()
        rd = mem.read_port(transparent_for=())

        # Pointers count modulo 2 * depth so that full and empty differ.
        wr_tmp = Signal(addr_bits + 1)
        wr_commit = Signal(addr_bits + 1)
        rd_ptr = Signal(addr_bits + 1)
        out_valid = Signal()

        wr_tmp_next = Signal.like(wr_tmp)
        m.d.comb += [
            wr.addr.eq(wr_tmp[:addr_bits]),
            wr.data.eq(self.w_data),
            wr.en.eq(self.w_en & ~self.rollback),
            wr_tmp_next.eq(wr_tmp + self.w_en),
        ]
        with m.If(self.rollback):
            m.d.sync += wr_tmp.eq(wr_commit)
        with m.Else():
            m.d.sync += wr_tmp.eq(wr_tmp_next)
            with m.If(self.commit):
                m.d.sync += wr_commit.eq(wr_tmp_next)

        used = Signal(addr_bits + 1)
        m.d.comb += [
            used.eq(wr_commit - rd_ptr),
            self.free.eq(depth - used),
        ]

        fetch = Signal()
        m.d.comb += [
            fetch.eq((wr_commit != rd_ptr) & (~out_valid | self.r.ready)),
            rd.addr.eq(rd_ptr[:addr_bits]),
            rd.en.eq(fetch),
            self.r.payload.eq(rd.data),
            self.r.valid.eq(out_valid),
            self.freed.eq(fetch),
        ]
        with m.If(fetch):
            m.d.sync += [rd_ptr.eq(rd_ptr + 1), out_valid.eq(1)]
        with m.Elif(self.r.ready):
            m.d.sync += out_valid.eq(0)
        return m
