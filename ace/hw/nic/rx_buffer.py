"""Per-(link, channel) receive buffer of the NIC: a FIFO whose writes are tentative until the
packet is accepted, so a bad packet is dropped completely.

::

    w_en, w_data,      input      write pointer    WideBlockRam (depth beats: address
    commit, rollback -> register -> (tentative,  -> register, output register; a pipeline
                                     committed)     that stalls by its clock enables)     -> r

Every input is registered on entry, so the writer's decision (the RX FSM) fans out from a
register to the RAM's write enables. The storage is a :class:`WideBlockRam` (on ECP5 ``DP16KD``
in 512 x 36 mode with its output register, ``ceil(179 / 36) = 5`` per buffer), whose two read
stages are the FIFO's output: ``r.payload`` is the RAM's output register, and ``r.ready``
stalls the read pipeline through the RAMs' clock enables, so no register per data bit needs a
load enable (the landing ring of registers that sat here until session 14 is gone).
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ace.hw.common.bram import WideBlockRam
from ace.layouts import NicRxBeat

__all__ = ["NicRxBuffer"]


class NicRxBuffer(wiring.Component):
    """Receive buffer with commit/rollback.

    Parameters
    ----------
    config : AceConfig
        ``rx_channel_beats`` is the depth in beats (a power of two); ``link_bytes`` the width.
    data_registered : bool
        ``w_data`` comes from a register already, a cycle after ``w_en`` (the caller's
        register shared by several buffers); it is not registered again.

    Members
    -------
    w_en : In(1)
        Write ``w_data`` at the tentative write pointer and advance it.
    w_data : In(NicRxBeat)
        The beat ``w_en`` writes: in the same cycle, or (``data_registered``) in the next.
    commit : In(1)
        Make every tentative write (including one in this cycle) visible to the reader.
    rollback : In(1)
        Discard every uncommitted write (including one in this cycle).
    free : Out(range(depth + 1))
        Beats that can be written without overwriting committed data (registered state; it
        follows the inputs a cycle late, since they are registered on entry).
    r : Out(stream.Signature(NicRxBeat))
        Committed beats in order: ``valid`` from a register, ``payload`` the RAM's output
        register. ``ready`` reaches the RAMs' read clock enables (combinationally: drive it
        from a register, as the NIC's skid FIFO does). One beat per cycle; the first beat of
        a packet is valid :attr:`commit_latency` (4) cycles after its ``commit``.
    freed : Out(1)
        A beat left the buffer this cycle (taken on ``r``: one credit to return).
    quiet : Out(1)
        No register of the buffer that is ever read can change next cycle unless ``w_en``,
        ``commit`` or ``rollback`` is high: no input registered, no committed beat unread, no
        beat in the read stages (the RAM's output register may still reload an unread word).

    Latency: ``commit`` in cycle ``t`` -> input register (``t + 1``) -> committed pointer
    (``t + 2``, the read is issued) -> RAM address register (``t + 3``) -> RAM output
    register: the beat is on ``r`` in ``t + 4``. Throughput: one write and one read per cycle.
    """

    #: Cycles from ``commit`` to the packet's first beat on ``r`` (with ``r`` empty before).
    commit_latency = 2 + WideBlockRam.read_latency

    def __init__(self, config, *, data_registered=False):
        self.config = config
        self.data_registered = data_registered
        self.depth = config.rx_channel_beats
        super().__init__({
            "w_en": In(1),
            "w_data": In(NicRxBeat(config)),
            "commit": In(1),
            "rollback": In(1),
            "free": Out(range(self.depth + 1)),
            "r": Out(stream.Signature(NicRxBeat(config))),
            "freed": Out(1),
            "quiet": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        depth = self.depth
        addr_bits = (depth - 1).bit_length()
        m.submodules.ram = ram = WideBlockRam(NicRxBeat(self.config).size, depth)

        # Input register: every control and the data, a cycle after the writer decided.
        write = Signal(name="write")            # w_en and not rolled back
        w_data = Signal(NicRxBeat(self.config), name="w_data_q")
        w_step = Signal(name="w_step")          # the tentative pointer advances
        commit = Signal(name="commit_q")
        rollback = Signal(name="rollback_q")
        if self.data_registered:
            m.d.comb += w_data.eq(self.w_data)
        else:
            m.d.sync += w_data.eq(self.w_data)
        m.d.sync += [write.eq(self.w_en & ~self.rollback),
                     w_step.eq(self.w_en), commit.eq(self.commit), rollback.eq(self.rollback)]

        # Pointers count modulo 2 * depth so that full and empty differ.
        wr_tmp = Signal(addr_bits + 1)
        wr_commit = Signal(addr_bits + 1)
        rd_ptr = Signal(addr_bits + 1)
        wr_tmp_next = Signal.like(wr_tmp)
        m.d.comb += [
            ram.w_addr.eq(wr_tmp[:addr_bits]),
            ram.w_data.eq(w_data),
            ram.w_en.eq(write),
            wr_tmp_next.eq(wr_tmp + w_step),
        ]
        with m.If(rollback):
            m.d.sync += wr_tmp.eq(wr_commit)
        with m.Else():
            m.d.sync += wr_tmp.eq(wr_tmp_next)
            with m.If(commit):
                m.d.sync += wr_commit.eq(wr_tmp_next)
        m.d.comb += self.free.eq(depth - (wr_commit - rd_ptr)[:addr_bits + 1])

        # Read: the RAM's two read stages (address register, output register) form a pipeline
        # that advances whenever its output is empty or taken, so the consumer's ``ready`` (a
        # register: the NIC's skid FIFO) stalls it through the block RAMs' clock enables and
        # no register per data bit needs a load enable. A read is issued (``fetch``) when the
        # pipeline advances and a committed beat is waiting.
        staged = Signal(name="staged")          # stage 1 holds a read (address register)
        out_valid = Signal(name="out_valid")    # stage 2 holds a beat (output register)
        advance = Signal()
        fetch = Signal()
        waiting = Signal()                      # a committed beat is not yet read
        m.d.comb += [
            advance.eq(~out_valid | self.r.ready),
            fetch.eq(waiting & advance),
            ram.r_addr.eq(rd_ptr[:addr_bits]),
            ram.r_en.eq(advance),
            self.r.valid.eq(out_valid),
            self.r.payload.eq(ram.r_data[:NicRxBeat(self.config).size]),
            # A beat frees its slot when it leaves the RAM's output register: until then the
            # pipeline holds it, and its slot must not be written again.
            self.freed.eq(out_valid & self.r.ready),
        ]
        with m.If(advance):
            m.d.sync += [staged.eq(fetch), out_valid.eq(staged)]
        m.d.comb += [
            waiting.eq(wr_commit != rd_ptr),
            self.quiet.eq(~(write | w_step | commit | rollback | waiting | staged | out_valid)),
        ]
        with m.If(fetch):
            m.d.sync += rd_ptr.eq(rd_ptr + 1)
        return m
