"""Per-(link, channel) receive buffer of the NIC: a FIFO whose writes are tentative until the
packet is accepted, so a bad packet is dropped completely.

::

    w_en, w_data,      input      write pointer    BlockRam (depth beats,      landing FIFO
    commit, rollback -> register -> (tentative,  -> registered address and  -> ring of 3 -> r
                                     committed)     output: read latency 2)     registers

Every input is registered on entry, so the writer's decision (the RX FSM) fans out from a
register to the RAM's write enables. The storage is a :class:`BlockRam` (``DP16KD`` with its
output register on ECP5), read two cycles after the read is issued; its words land in a
three-entry ring of registers whose head drives ``r``. A read is issued only when the landing
FIFO has room for it, counting the reads in flight, so the RAM's read data never has to stall.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ace.hw.common.bram import BlockRam
from ace.layouts import NicRxBeat

__all__ = ["NicRxBuffer", "LANDING_ENTRIES"]

#: Registers the RAM's read data lands in: its read latency (2) plus one, so that one beat per
#: cycle flows while the head is taken every cycle.
LANDING_ENTRIES = BlockRam.read_latency + 1


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
        Beats that can be written without overwriting committed data (registered state; it
        follows the inputs a cycle late, since they are registered on entry).
    r : Out(stream.Signature(NicRxBeat))
        Committed beats in order: ``valid`` from a register, ``payload`` the landing ring's head
        (a 3:1 multiplexer of registers; the NIC registers it again in a skid buffer). One beat
        per cycle; the first beat of a packet is valid :attr:`commit_latency` (5) cycles after
        its ``commit``.
    freed : Out(1)
        A beat left the memory this cycle (one credit to return): its read was issued.

    Latency: ``commit`` in cycle ``t`` -> input register (``t + 1``) -> committed pointer
    (``t + 2``, the read is issued) -> RAM address and output registers -> landing FIFO:
    the beat is on ``r`` in ``t + 5``. Throughput: one write and one read per cycle.
    """

    #: Cycles from ``commit`` to the packet's first beat on ``r`` (with ``r`` empty before).
    commit_latency = 3 + BlockRam.read_latency

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
        width = -(-NicRxBeat(self.config).size // 8) * 8
        m.submodules.ram = ram = BlockRam(width, depth)

        # Input register: every control and the data, a cycle after the writer decided.
        write = Signal(name="write")            # w_en and not rolled back
        w_data = Signal(NicRxBeat(self.config), name="w_data_q")
        w_step = Signal(name="w_step")          # the tentative pointer advances
        commit = Signal(name="commit_q")
        rollback = Signal(name="rollback_q")
        m.d.sync += [write.eq(self.w_en & ~self.rollback), w_data.eq(self.w_data),
                     w_step.eq(self.w_en), commit.eq(self.commit), rollback.eq(self.rollback)]

        # Pointers count modulo 2 * depth so that full and empty differ.
        wr_tmp = Signal(addr_bits + 1)
        wr_commit = Signal(addr_bits + 1)
        rd_ptr = Signal(addr_bits + 1)
        wr_tmp_next = Signal.like(wr_tmp)
        m.d.comb += [
            ram.w_addr.eq(wr_tmp[:addr_bits]),
            ram.w_data.eq(w_data),
            ram.w_en.eq(write.replicate(width // 8)),
            wr_tmp_next.eq(wr_tmp + w_step),
        ]
        with m.If(rollback):
            m.d.sync += wr_tmp.eq(wr_commit)
        with m.Else():
            m.d.sync += wr_tmp.eq(wr_tmp_next)
            with m.If(commit):
                m.d.sync += wr_commit.eq(wr_tmp_next)
        m.d.comb += self.free.eq(depth - (wr_commit - rd_ptr)[:addr_bits + 1])

        # Read: issue when the landing FIFO has room for every read in flight.
        pop = Signal()
        fetch = Signal()
        reserved = Signal(range(LANDING_ENTRIES + 1))   # landed beats + reads in flight
        m.d.comb += [
            pop.eq(self.r.valid & self.r.ready),
            fetch.eq((wr_commit != rd_ptr) & ((reserved != LANDING_ENTRIES) | pop)),
            ram.r_addr.eq(rd_ptr[:addr_bits]),
            ram.r_en.eq(fetch),
            self.freed.eq(fetch),
        ]
        m.d.sync += reserved.eq(reserved + fetch - pop)
        with m.If(fetch):
            m.d.sync += rd_ptr.eq(rd_ptr + 1)
        in_flight = Signal(BlockRam.read_latency)       # one bit per cycle of RAM latency
        m.d.sync += in_flight.eq(Cat(fetch, in_flight[:-1]))
        self._landing(m, arrive=in_flight[-1], data=ram.r_data, pop=pop)
        return m

    def _landing(self, m, *, arrive, data, pop):
        """The landing FIFO: ``LANDING_ENTRIES`` registers in a ring with one-hot write and read
        pointers (registers), so an arriving word's write enable is two registers ANDed and no
        entry moves; ``r.payload`` is the read pointer's entry (a small multiplexer of
        registers, registered again by the consumer's skid buffer)."""
        layout = NicRxBeat(self.config)
        n = LANDING_ENTRIES
        entries = [Signal(layout, name=f"landed{i}") for i in range(n)]
        w_at = Signal(n, init=1, name="landing_w_at")       # one-hot write pointer
        r_at = Signal(n, init=1, name="landing_r_at")       # one-hot read pointer
        count = Signal(range(n + 1), name="landing_count")
        nonempty = Signal(name="landing_nonempty")
        m.d.sync += [count.eq(count + arrive - pop),
                     nonempty.eq((count + arrive - pop) != 0)]
        for i in range(n):
            with m.If(arrive & w_at[i]):
                m.d.sync += entries[i].eq(data[:layout.size])
        with m.If(arrive):
            m.d.sync += w_at.eq(w_at.rotate_left(1))
        with m.If(pop):
            m.d.sync += r_at.eq(r_at.rotate_left(1))
        head = Signal(layout, name="landing_head")
        m.d.comb += [
            head.as_value().eq(0),
            self.r.valid.eq(nonempty),
            self.r.payload.eq(head),
        ]
        for i in range(n):
            with m.If(r_at[i]):
                m.d.comb += head.eq(entries[i])
