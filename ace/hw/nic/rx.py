"""Receive side of one NIC link: header parsing and checking, per-channel buffers, credit
intake, error counting.

::

    link --> header check --> FSM (HEADER / PAYLOAD / DROP) --> NicRxBuffer per channel --> out{c}
                 |                                                  |
                 +--> credit_* (CREDIT packets, to this link's TX)  +--> freed{c} (to TX)

The link is never stalled (``tready`` is always 1): the sender's credits guarantee buffer space,
and a packet that does not fit is an error and is dropped.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ace.layouts import (AxiStreamSignature, NicError, NicRxBeat, PACKET_MAGIC, PACKET_VERSION,
                      PacketHeader, PacketType)
from ace.hw.nic.header import HeaderCheck
from ace.hw.nic.rx_buffer import NicRxBuffer
from ace.hw.nic.tx import COUNTER_BITS

__all__ = ["NicLinkRx"]


class NicLinkRx(wiring.Component):
    """One link's receiver.

    A DATA packet is written into its channel's buffer as it arrives and becomes visible to the
    channel only when its last beat arrived with ``tlast`` where the length says; any error
    rolls the writes back, so a bad packet is dropped completely. Checks on the header beat, in
    order (the first failure is the cause): magic and version, CRC-8, packet type, channel,
    length range, ``tlast`` on the header (required for CREDIT, forbidden for DATA), free space
    (DATA) or credit overflow (CREDIT). On payload beats: ``tlast`` exactly on the last beat.
    After an error the rest of the frame (up to ``tlast``) is discarded.

    Parameters
    ----------
    config : AceConfig

    Members
    -------
    link : In(AxiStreamSignature(link_bytes, keep=True))
        ``tready`` is always 1. ``tkeep`` is ignored (the header's length is authoritative).
    out{c} : Out(stream.Signature(NicRxBeat))
        Channel ``c``'s accepted payload beats. Latency from the last beat of a packet to its
        first beat on ``out{c}``: 2 cycles.
    freed{c} : Out(1)
        One beat of channel ``c``'s buffer was freed (a credit to return; to this link's TX).
    credits{c} : In(range(rx_channel_beats + 1))
        Credits this link's TX holds, to detect a credit return that would overflow them.
    credit_valid, credit_channel, credit_count : Out
        A valid CREDIT packet arrived.
    error_clear : In(1)
        Clears ``error`` and ``error_cause`` (not the counters).
    error : Out(1), error_cause : Out(NicError)
        Sticky: set by the first error after a clear, with its cause.
    payload_bytes, header_bytes, busy_cycles, errors : Out(48)
        Payload bytes of accepted packets, header beats of accepted packets x link_bytes, cycles
        with a beat on the link, packets dropped for an error.
    """

    def __init__(self, config):
        self.config = config
        depth = config.rx_channel_beats
        members = {
            "link": In(AxiStreamSignature(config.link_bytes, keep=True)),
            "credit_valid": Out(1),
            "credit_channel": Out(4),
            "credit_count": Out(range(depth + 1)),
            "error_clear": In(1),
            "error": Out(1),
            "error_cause": Out(NicError),
            "payload_bytes": Out(COUNTER_BITS),
            "header_bytes": Out(COUNTER_BITS),
            "busy_cycles": Out(COUNTER_BITS),
            "errors": Out(COUNTER_BITS),
        }
        for c in range(config.num_channels):
            members[f"out{c}"] = Out(stream.Signature(NicRxBeat(config)))
            members[f"freed{c}"] = Out(1)
            members[f"credits{c}"] = In(range(depth + 1))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        nch = cfg.num_channels
        lb = cfg.link_bytes
        shift = (lb - 1).bit_length()
        depth = cfg.rx_channel_beats
        beat_range = range(cfg.max_packet_beats + 1)
        link = self.link

        buffers = []
        for c in range(nch):
            buf = NicRxBuffer(cfg)
            m.submodules[f"buffer{c}"] = buf
            buffers.append(buf)
            wiring.connect(m, buf.r, wiring.flipped(getattr(self, f"out{c}")))
            m.d.comb += getattr(self, f"freed{c}").eq(buf.freed)

        m.d.comb += link.tready.eq(1)
        beat = Signal()
        m.d.comb += beat.eq(link.tvalid)

        # -- header checks (combinational, on every beat; used in HEADER) --------------------
        m.submodules.hdr_check = check = HeaderCheck()
        hdr = Signal(PacketHeader)
        m.d.comb += [
            hdr.eq(link.tdata[:64]),
            check.header.eq(hdr),
        ]
        hdr_beats = Signal(range((1 << 17) // lb + 2))
        m.d.comb += hdr_beats.eq((hdr.length + (lb - 1)) >> shift)
        free_arr = Array(buf.free for buf in buffers)
        credits_arr = Array(getattr(self, f"credits{c}") for c in range(nch))
        is_data = hdr.ptype == PacketType.DATA
        is_credit = hdr.ptype == PacketType.CREDIT
        cause = Signal(NicError)
        with m.If((hdr.magic != PACKET_MAGIC) | (hdr.version != PACKET_VERSION)):
            m.d.comb += cause.eq(NicError.BAD_MAGIC)
        with m.Elif(~check.ok):
            m.d.comb += cause.eq(NicError.BAD_CHECK)
        with m.Elif(~is_data & ~is_credit):
            m.d.comb += cause.eq(NicError.BAD_TYPE)
        with m.Elif(hdr.channel >= nch):
            m.d.comb += cause.eq(NicError.BAD_CHANNEL)
        with m.Elif((hdr.length == 0) |
                    (is_data & (hdr.length > cfg.max_packet_bytes)) |
                    (is_credit & (hdr.length > depth))):
            m.d.comb += cause.eq(NicError.BAD_LENGTH)
        with m.Elif(is_data & link.tlast):
            m.d.comb += cause.eq(NicError.EARLY_TLAST)
        with m.Elif(is_credit & ~link.tlast):
            m.d.comb += cause.eq(NicError.MISSING_TLAST)
        with m.Elif(is_data & (hdr_beats > free_arr[hdr.channel])):
            m.d.comb += cause.eq(NicError.OVERFLOW)
        with m.Elif(is_credit & (credits_arr[hdr.channel] + hdr.length > depth)):
            m.d.comb += cause.eq(NicError.CREDIT_OVERFLOW)

        # -- packet state -------------------------------------------------------------------
        cur = Signal(range(nch))
        beats_left = Signal(beat_range)
        length = Signal(17)
        tag = Signal.like(hdr.tag)
        src = Signal.like(hdr.src)
        first = Signal()
        last_keep = Signal(lb)
        is_last = Signal()
        m.d.comb += is_last.eq(beats_left == 1)

        error_now = Signal()
        error_code = Signal(NicError)

        entry = Signal(NicRxBeat(cfg))
        keep = Signal(lb)
        m.d.comb += [
            entry.data.eq(Cat(*(link.tdata.word_select(i, 8) & keep[i].replicate(8)
                                for i in range(lb)))),
            entry.keep.eq(keep),
            entry.first.eq(first),
            entry.last.eq(is_last),
            entry.src.eq(src),
            entry.tag.eq(tag),
            entry.length.eq(length),
        ]
        with m.If(is_last):
            m.d.comb += keep.eq(last_keep)
        with m.Else():
            m.d.comb += keep.eq(Const(-1, lb))
        for buf in buffers:
            m.d.comb += buf.w_data.eq(entry)

        with m.FSM(name="rx_fsm") as fsm:
            with m.State("HEADER"):
                with m.If(beat):
                    with m.If(cause != NicError.NONE):
                        m.d.comb += [error_now.eq(1), error_code.eq(cause)]
                        with m.If(~link.tlast):
                            m.next = "DROP"
                    with m.Elif(is_credit):
                        m.d.comb += [
                            self.credit_valid.eq(1),
                            self.credit_channel.eq(hdr.channel),
                            self.credit_count.eq(hdr.length),
                        ]
                        m.d.sync += self.header_bytes.eq(self.header_bytes + lb)
                    with m.Else():
                        last_index = (hdr.length - 1) & (lb - 1)
                        m.d.sync += [
                            cur.eq(hdr.channel),
                            beats_left.eq(hdr_beats),
                            length.eq(hdr.length),
                            tag.eq(hdr.tag),
                            src.eq(hdr.src),
                            first.eq(1),
                        ]
                        for i in range(lb):
                            m.d.sync += last_keep[i].eq(last_index >= i)
                        m.next = "PAYLOAD"
            with m.State("PAYLOAD"):
                with m.If(beat):
                    m.d.sync += [beats_left.eq(beats_left - 1), first.eq(0)]
                    for c, buf in enumerate(buffers):
                        with m.If(cur == c):
                            m.d.comb += buf.w_en.eq(~(link.tlast & ~is_last))
                            with m.If(is_last & link.tlast):
                                m.d.comb += buf.commit.eq(1)
                            with m.If(is_last != link.tlast):
                                m.d.comb += buf.rollback.eq(1)
                    with m.If(is_last & link.tlast):
                        m.d.sync += [
                            self.payload_bytes.eq(self.payload_bytes + length),
                            self.header_bytes.eq(self.header_bytes + lb),
                        ]
                        m.next = "HEADER"
                    with m.Elif(link.tlast):
                        m.d.comb += [error_now.eq(1), error_code.eq(NicError.EARLY_TLAST)]
                        m.next = "HEADER"
                    with m.Elif(is_last):
                        m.d.comb += [error_now.eq(1), error_code.eq(NicError.MISSING_TLAST)]
                        m.next = "DROP"
            with m.State("DROP"):
                with m.If(beat & link.tlast):
                    m.next = "HEADER"

        # For tests: one expression per FSM state, true while in it.
        self.fsm_states = {name: fsm.ongoing(name) for name in ['HEADER', 'PAYLOAD', 'DROP']}

        # -- status and counters ------------------------------------------------------------
        m.d.sync += self.busy_cycles.eq(self.busy_cycles + beat)
        with m.If(error_now):
            m.d.sync += self.errors.eq(self.errors + 1)
        with m.If(self.error_clear):
            m.d.sync += [self.error.eq(0), self.error_cause.eq(NicError.NONE)]
        with m.Elif(error_now & ~self.error):
            m.d.sync += [self.error.eq(1), self.error_cause.eq(error_code)]
        return m
