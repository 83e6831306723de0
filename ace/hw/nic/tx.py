"""Transmit side of one NIC link: packet framing, round-robin arbitration among channels,
per-channel credits and in-band credit return.

::

    cmd{c}/data{c} (channels) --+
                                +--> arbiter (CREDIT first if urgent, then DATA round-robin,
    owed credits (from RX) -----+      then CREDIT if idle and quiet) --> header | payload --> link
    credit_in (from RX) ---------> credits{c} (beats the far end can still take for channel c)
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ace.layouts import (PACKET_MAGIC, PACKET_VERSION, AxiStreamSignature, NicSendCmd, NicTxBeat,
                         PacketHeader, PacketType, struct_value)
from ace.hw.nic.header import HeaderCheck

__all__ = ["NicLinkTx", "COUNTER_BITS"]

COUNTER_BITS = 48


#: Cycles without a freed beat after which owed credits may go out in an idle-link CREDIT packet.
CREDIT_QUIET_CYCLES = 4


def credit_threshold(config) -> int:
    """Owed credits at which a CREDIT packet takes priority over DATA."""
    return max(1, config.rx_channel_beats // 4)


class NicLinkTx(wiring.Component):
    """One link's transmitter.

    A packet starts only at a packet boundary and only if its channel holds credits for all of
    its payload beats, so the receiver never has to stall the link. The command is taken
    (``cmd{c}.ready``) when the header beat is sent; the payload beats then come from
    ``data{c}`` and go out back to back. The next header follows the last payload beat with no
    idle cycle. Once a header is offered (``tvalid``) it is held until taken.

    Parameters
    ----------
    config : AceConfig

    Members
    -------
    node_id : In(8)
        Source node id written into every header.
    link : Out(AxiStreamSignature(link_bytes, keep=True))
    cmd{c} : In(stream.Signature(NicSendCmd))
        Send commands of channel ``c`` for this link (``link`` field ignored). ``length`` must
        be 1..max_send_bytes (checked by :class:`ace.hw.nic.interface.NicInterface`).
    data{c} : In(stream.Signature(NicTxBeat))
        Payload beats of channel ``c``; taken only while this link sends that channel's packet.
    credit_in_valid, credit_in_channel, credit_in_count : In
        The far end returned ``count`` beats of credit for ``channel`` (from this link's RX).
    freed{c} : In(1)
        The local RX freed one beat of channel ``c``'s buffer: one credit owed to the far end.
    credits{c} : Out(range(rx_channel_beats + 1))
        Credits held for channel ``c`` (beats the far end can take).
    active : Out(1), channel : Out(range(num_channels))
        A DATA packet's payload of ``channel`` is being sent.
    payload_bytes, header_bytes, busy_cycles, stall_cycles : Out(48)
        Counters: payload bytes sent, header beats sent x link_bytes (DATA and CREDIT), cycles
        with a beat taken, cycles with ``tvalid & ~tready``.
    """

    def __init__(self, config):
        self.config = config
        nch = config.num_channels
        depth = config.rx_channel_beats
        members = {
            "node_id": In(8),
            "link": Out(AxiStreamSignature(config.link_bytes, keep=True)),
            "credit_in_valid": In(1),
            "credit_in_channel": In(4),
            "credit_in_count": In(range(depth + 1)),
            "active": Out(1),
            "channel": Out(range(nch)),
            "payload_bytes": Out(COUNTER_BITS),
            "header_bytes": Out(COUNTER_BITS),
            "busy_cycles": Out(COUNTER_BITS),
            "stall_cycles": Out(COUNTER_BITS),
        }
        for c in range(nch):
            members[f"cmd{c}"] = In(stream.Signature(NicSendCmd(config)))
            members[f"data{c}"] = In(stream.Signature(NicTxBeat(config)))
            members[f"freed{c}"] = In(1)
            members[f"credits{c}"] = Out(range(depth + 1))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        nch = cfg.num_channels
        lb = cfg.link_bytes
        shift = (lb - 1).bit_length()
        depth = cfg.rx_channel_beats
        threshold = credit_threshold(cfg)
        len_bits = cfg.max_packet_bytes.bit_length()
        beat_range = range(cfg.max_packet_beats + 1)

        cmds = [getattr(self, f"cmd{c}") for c in range(nch)]
        datas = [getattr(self, f"data{c}") for c in range(nch)]

        credits = [Signal(range(depth + 1), init=depth, name=f"credits{c}_q")
                   for c in range(nch)]
        owed = [Signal(range(depth + 1), name=f"owed{c}") for c in range(nch)]
        beats = [Signal(beat_range, name=f"cmd{c}_beats") for c in range(nch)]
        eligible = [Signal(name=f"cmd{c}_eligible") for c in range(nch)]
        urgent = [Signal(name=f"owed{c}_urgent") for c in range(nch)]
        pending = [Signal(name=f"owed{c}_pending") for c in range(nch)]
        quiet = [Signal(range(CREDIT_QUIET_CYCLES + 1), name=f"owed{c}_quiet")
                 for c in range(nch)]
        for c in range(nch):
            m.d.comb += [
                getattr(self, f"credits{c}").eq(credits[c]),
                beats[c].eq((cmds[c].payload.length + (lb - 1)) >> shift),
                eligible[c].eq(cmds[c].valid & (credits[c] >= beats[c])),
                urgent[c].eq(owed[c] >= threshold),
                pending[c].eq((owed[c] != 0) & (quiet[c] == CREDIT_QUIET_CYCLES)),
            ]
            with m.If(getattr(self, f"freed{c}")):
                m.d.sync += quiet[c].eq(0)
            with m.Elif(quiet[c] != CREDIT_QUIET_CYCLES):
                m.d.sync += quiet[c].eq(quiet[c] + 1)

        # -- arbitration (combinational) ----------------------------------------------------
        rr_last = Signal(range(nch))          # channel of the last DATA packet
        rr_pick = Signal(range(nch))
        with m.Switch(rr_last):
            for last in range(nch):
                with m.Case(last):
                    for i in reversed(range(nch)):
                        c = (last + 1 + i) % nch
                        with m.If(eligible[c]):
                            m.d.comb += rr_pick.eq(c)
        urgent_pick = Signal(range(nch))
        pending_pick = Signal(range(nch))
        for c in reversed(range(nch)):
            with m.If(urgent[c]):
                m.d.comb += urgent_pick.eq(c)
            with m.If(pending[c]):
                m.d.comb += pending_pick.eq(c)

        pick_valid = Signal()
        pick_credit = Signal()
        pick_ch = Signal(range(nch))
        with m.If(Cat(*urgent).any()):
            m.d.comb += [pick_valid.eq(1), pick_credit.eq(1), pick_ch.eq(urgent_pick)]
        with m.Elif(Cat(*eligible).any()):
            m.d.comb += [pick_valid.eq(1), pick_ch.eq(rr_pick)]
        with m.Elif(Cat(*pending).any()):
            m.d.comb += [pick_valid.eq(1), pick_credit.eq(1), pick_ch.eq(pending_pick)]

        cmd_length = Array(cmd.payload.length for cmd in cmds)
        cmd_tag = Array(cmd.payload.tag for cmd in cmds)
        beats_arr = Array(beats)
        owed_arr = Array(owed)

        m.submodules.hdr_check = check = HeaderCheck()
        pick_hdr = Signal(PacketHeader)
        pick_beats = Signal(beat_range)
        pick_type = Signal(PacketType)
        pick_tag = Signal(8)
        pick_length = Signal(17)
        with m.If(pick_credit):
            m.d.comb += [
                pick_type.eq(PacketType.CREDIT),
                pick_length.eq(owed_arr[pick_ch]),
            ]
        with m.Else():
            m.d.comb += [
                pick_type.eq(PacketType.DATA),
                pick_tag.eq(cmd_tag[pick_ch]),
                pick_length.eq(cmd_length[pick_ch]),
                pick_beats.eq(beats_arr[pick_ch]),
            ]
        m.d.comb += check.header.eq(struct_value(
            PacketHeader, magic=PACKET_MAGIC, version=PACKET_VERSION, ptype=pick_type,
            src=self.node_id, channel=pick_ch, tag=pick_tag, length=pick_length))
        m.d.comb += [
            pick_hdr.eq(check.header),
            pick_hdr.check.eq(check.check),
        ]

        # -- offered header: held in registers once offered and not taken -------------------
        locked = Signal()
        lock_hdr = Signal(PacketHeader)
        lock_credit = Signal()
        lock_ch = Signal(range(nch))
        lock_beats = Signal(beat_range)
        hdr = Signal(PacketHeader)
        hdr_valid = Signal()
        hdr_credit = Signal()
        hdr_ch = Signal(range(nch))
        hdr_beats = Signal(beat_range)
        with m.If(locked):
            m.d.comb += [hdr.eq(lock_hdr), hdr_valid.eq(1), hdr_credit.eq(lock_credit),
                         hdr_ch.eq(lock_ch), hdr_beats.eq(lock_beats)]
        with m.Else():
            m.d.comb += [hdr.eq(pick_hdr), hdr_valid.eq(pick_valid), hdr_credit.eq(pick_credit),
                         hdr_ch.eq(pick_ch), hdr_beats.eq(pick_beats)]

        # -- packet state -------------------------------------------------------------------
        cur = Signal(range(nch))
        beats_left = Signal(beat_range)
        last_bytes = Signal(range(lb + 1))
        last_keep = Signal(lb)
        is_last = Signal()
        m.d.comb += [
            is_last.eq(beats_left == 1),
            self.channel.eq(cur),
        ]

        link = self.link
        take = Signal()
        m.d.comb += take.eq(link.tvalid & link.tready)

        sent_credit = Signal()      # a CREDIT header is taken this cycle
        sent_data = Signal()        # a DATA header is taken this cycle
        data_valid = Array(d.valid for d in datas)
        data_word = Array(d.payload.data for d in datas)
        keep = Signal(lb)

        with m.FSM(name="tx_fsm") as fsm:
            with m.State("HEADER"):
                m.d.comb += [
                    link.tvalid.eq(hdr_valid),
                    link.tdata.eq(hdr.as_value()),
                    link.tkeep.eq(Const(-1, lb)),
                    link.tlast.eq(hdr_credit),
                ]
                with m.If(hdr_valid & ~link.tready & ~locked):
                    m.d.sync += [locked.eq(1), lock_hdr.eq(pick_hdr), lock_credit.eq(pick_credit),
                                 lock_ch.eq(pick_ch), lock_beats.eq(pick_beats)]
                with m.If(take):
                    m.d.sync += [locked.eq(0),
                                 self.header_bytes.eq(self.header_bytes + lb)]
                    with m.If(hdr_credit):
                        m.d.comb += sent_credit.eq(1)
                    with m.Else():
                        m.d.comb += sent_data.eq(1)
                        for c in range(nch):
                            m.d.comb += cmds[c].ready.eq(hdr_ch == c)
                        length = hdr.length[:len_bits]
                        m.d.sync += [
                            rr_last.eq(hdr_ch),
                            cur.eq(hdr_ch),
                            beats_left.eq(hdr_beats),
                            last_bytes.eq(((length - 1) & (lb - 1)) + 1),
                        ]
                        for i in range(lb):
                            m.d.sync += last_keep[i].eq(((length - 1) & (lb - 1)) >= i)
                        m.next = "PAYLOAD"
            with m.State("PAYLOAD"):
                m.d.comb += self.active.eq(1)
                with m.If(is_last):
                    m.d.comb += keep.eq(last_keep)
                with m.Else():
                    m.d.comb += keep.eq(Const(-1, lb))
                word = data_word[cur]
                m.d.comb += [
                    link.tvalid.eq(data_valid[cur]),
                    link.tdata.eq(Cat(*(word.word_select(i, 8) & keep[i].replicate(8)
                                        for i in range(lb)))),
                    link.tkeep.eq(keep),
                    link.tlast.eq(is_last),
                ]
                for c in range(nch):
                    m.d.comb += datas[c].ready.eq((cur == c) & link.tready)
                with m.If(take):
                    m.d.sync += beats_left.eq(beats_left - 1)
                    with m.If(is_last):
                        m.d.sync += self.payload_bytes.eq(self.payload_bytes + last_bytes)
                        m.next = "HEADER"
                    with m.Else():
                        m.d.sync += self.payload_bytes.eq(self.payload_bytes + lb)

        # For tests: one expression per FSM state, true while in it.
        self.fsm_states = {name: fsm.ongoing(name) for name in ['HEADER', 'PAYLOAD']}

        # -- credit bookkeeping -------------------------------------------------------------
        for c in range(nch):
            gained = Signal(range(depth + 1), name=f"credits{c}_gained")
            spent = Signal(beat_range, name=f"credits{c}_spent")
            returned = Signal(range(depth + 1), name=f"owed{c}_returned")
            with m.If(self.credit_in_valid & (self.credit_in_channel == c)):
                m.d.comb += gained.eq(self.credit_in_count)
            with m.If(sent_data & (hdr_ch == c)):
                m.d.comb += spent.eq(hdr_beats)
            with m.If(sent_credit & (hdr_ch == c)):
                m.d.comb += returned.eq(hdr.length)
            m.d.sync += [
                credits[c].eq(credits[c] + gained - spent),
                owed[c].eq(owed[c] + getattr(self, f"freed{c}") - returned),
            ]

        m.d.sync += [
            self.busy_cycles.eq(self.busy_cycles + take),
            self.stall_cycles.eq(self.stall_cycles + (link.tvalid & ~link.tready)),
        ]
        return m
