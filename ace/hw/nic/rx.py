"""Receive side of one NIC link: header parsing and checking over four registered stages,
per-channel buffers, credit intake, error counting.

::

    link --> input reg --> decode (CRC, field checks) --> cause --> judge (space, credits)
                                                                               |
                          FSM (HEADER / PAYLOAD / DROP) <----------------------+
                           |        |
        credit_* (to TX) <-+        v
                                         freed[c] (to TX) <-- NicRxBuffer per channel --> out[c]

The link is never stalled (``tready`` is always 1): the sender's credits guarantee buffer space,
and a packet that does not fit is an error and is dropped.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ace.layouts import (AxiStreamSignature, NicError, NicRxBeat, PACKET_MAGIC, PACKET_VERSION,
                         PacketHeader, PacketType, struct_value)
from ace.hw.common.clock_gate import gate_while_busy
from ace.hw.nic.header import check_taps
from ace.hw.nic.rx_buffer import NicRxBuffer
from ace.hw.nic.tx import COUNTER_BITS

__all__ = ["NicLinkRx", "RX_CHECK_STAGES", "RX_COUNTER_DELAY", "RX_PACKET_LATENCY"]

#: Cycles from a beat on ``link`` to the FSM that acts on it: input register, decode (CRC and
#: field checks), cause (priority of the stateless checks), judge (the two state checks).
RX_CHECK_STAGES = 4

#: Cycles the counters (``errors``, ``payload_bytes``, ``header_bytes``) follow the FSM's
#: decision: their steps are registered first.
RX_COUNTER_DELAY = 1

#: Cycles from a packet's last beat on ``link`` to its first beat on ``out[c]`` (an empty
#: channel buffer): the check stages, then the buffer's commit-to-read latency.
RX_PACKET_LATENCY = RX_CHECK_STAGES + NicRxBuffer.commit_latency


class NicLinkRx(wiring.Component):
    """One link's receiver.

    A DATA packet is written into its channel's buffer as it arrives and becomes visible to the
    channel only when its last beat arrived with ``tlast`` where the length says; any error
    rolls the writes back, so a bad packet is dropped completely. Checks on the header beat, in
    order (the first failure is the cause): magic and version, CRC-8, packet type, channel,
    length range, ``tlast`` on the header (required for CREDIT, forbidden for DATA), free space
    (DATA) or credit overflow (CREDIT). On payload beats: ``tlast`` exactly on the last beat.
    After an error the rest of the frame (up to ``tlast``) is discarded.

    Pipeline: every beat goes through an input register, a decode stage (the header's CRC-8 and
    the field compares, registered), a cause stage (the first failing stateless check,
    registered) and a judge stage (the two checks that read state, free space and credits, each
    for both outcomes of the beat the FSM handles meanwhile, registered); the FSM picks the
    outcome that holds and writes the buffer. The free space of a channel is kept here in
    registers: a DATA header reserves its beats, a rollback returns them, and a beat read from
    the buffer counts as free once it is owed as a credit (``freed``); the judge stage reads it
    a cycle before the FSM acts, so a beat read less than three cycles before a header is not
    yet free for it. A sender that keeps to its credits cannot tell: a credit takes more than
    ten cycles to reach it.

    Parameters
    ----------
    config : AceConfig
    gated_clock : bool
        Everything after the input register on a gated clock
        (:func:`ace.hw.common.clock_gate.gate_while_busy`) that runs only while a beat is in
        the stages, a buffer holds or moves one, or a step of the counters, the free space or
        the credits is pending: the gated-clock form of the engine, which Verilator evaluates
        only in those cycles. The same behaviour as without.

    Members
    -------
    link : In(AxiStreamSignature(link_bytes, keep=True))
        ``tready`` is always 1. ``tkeep`` is ignored (the header's length is authoritative).
    out : Out(stream.Signature(NicRxBeat)).array(num_channels)
        Each channel's accepted payload beats.
    freed : Out(1).array(num_channels)
        One beat of the channel's buffer was freed (a credit to return; to this link's TX;
        registered, the cycle after the beat left the buffer).
    credits : In(range(rx_channel_beats + 1)).array(num_channels)
        Credits this link's TX holds, to detect a credit return that would overflow them.
    credit_valid, credit_channel, credit_count : Out
        A valid CREDIT packet arrived (from the FSM, whose inputs are registered).
    error_clear : In(1)
        Clears ``error`` and ``error_cause`` (not the counters).
    error : Out(1), error_cause : Out(NicError)
        Sticky: set by the first error after a clear, with its cause.
    payload_bytes, header_bytes, busy_cycles, errors : Out(48)
        Payload bytes of accepted packets, header beats of accepted packets x link_bytes, cycles
        with a beat on the link, packets dropped for an error.

    Latency: :data:`RX_CHECK_STAGES` (4) cycles from a beat to the FSM; from the last beat of a
    packet on ``link`` to its first beat on ``out[c]``: :data:`RX_PACKET_LATENCY` (8) cycles.
    Throughput: one beat per cycle.
    """

    def __init__(self, config, *, gated_clock=False):
        self.config = config
        self.gated_clock = gated_clock
        nch = config.num_channels
        depth = config.rx_channel_beats
        super().__init__({
            "link": In(AxiStreamSignature(config.link_bytes, keep=True)),
            "out": Out(stream.Signature(NicRxBeat(config))).array(nch),
            "freed": Out(1).array(nch),
            "credits": In(range(depth + 1)).array(nch),
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
        })

    def _stage_layout(self, extra):
        lb = self.config.link_bytes
        return data.StructLayout({"valid": 1, "data": 8 * lb, "last": 1, "beats":
                                  range(self.config.max_packet_beats + 1),
                                  "room": range(self.config.rx_channel_beats + 1), **extra})

    def elaborate(self, platform):
        m = Module()
        # With ``gated_clock``, everything after the input register is a module of its own
        # whose clock runs only while it has work (:meth:`_gate`).
        core = Module() if self.gated_clock else m
        self._work = []         # registers of the core, some nonzero while it has work
        cfg = self.config
        buffers = []
        for c in range(cfg.num_channels):
            buf = NicRxBuffer(cfg, data_registered=True)
            core.submodules[f"buffer{c}"] = buf
            buffers.append(buf)
            wiring.connect(core, buf.r, wiring.flipped(self.out[c]))
            core.d.sync += self.freed[c].eq(buf.freed)
            self._work += [~buf.quiet, self.freed[c]]

        m.d.comb += self.link.tready.eq(1)
        m.d.sync += self.busy_cycles.eq(self.busy_cycles + self.link.tvalid)
        arrived = self._input(m)
        decoded = self._decode(core, arrived)
        checked = self._cause(core, decoded)
        error_now, error_code = self._fsm(core, checked, buffers)

        # The counters follow the FSM a cycle late (RX_COUNTER_DELAY): their steps are
        # registered, so their load enables fan out from registers, not from the FSM.
        error_q = Signal(name="error_q")
        core.d.sync += error_q.eq(error_now)
        with core.If(error_q):
            core.d.sync += self.errors.eq(self.errors + 1)
        with core.If(self.error_clear):
            core.d.sync += [self.error.eq(0), self.error_cause.eq(NicError.NONE)]
        with core.Elif(error_now & ~self.error):
            core.d.sync += [self.error.eq(1), self.error_cause.eq(error_code)]
        if self.gated_clock:
            self._work += [arrived.valid, decoded.valid, checked.valid, error_q,
                           self.error_clear]
            gate_while_busy(m, "core", Cat(*self._work).any(), core)
        return m

    def _input(self, m):
        """Input register: the beat, with the stateless field checks of its header already
        computed (compares with constants) and the CRC-8 as XORs of up to four header bits
        each (``crc_part``), so the decode stage only finishes the CRC. In the gated-clock form
        the register holds the beat alone and the same fields are computed from it: the
        simulator then evaluates them once a cycle, not in each evaluation of the inputs."""
        cfg = self.config
        depth = cfg.rx_channel_beats
        link = self.link
        if self.gated_clock:
            raw = Signal(self._stage_layout({}), name="in_beat")
            m.d.sync += [raw.valid.eq(link.tvalid), raw.data.eq(link.tdata),
                         raw.last.eq(link.tlast)]
            valid, tdata, tlast, domain = raw.valid, raw.data, raw.last, "comb"
        else:
            valid, tdata, tlast, domain = link.tvalid, link.tdata, link.tlast, "sync"
        hdr = PacketHeader(tdata[:64])
        bits = tdata[:64]
        groups = [[taps[i:i + 4] for i in range(0, len(taps), 4)] for taps in check_taps()]
        self._crc_groups = [len(g) for g in groups]
        flags = ("magic_bad", "type_bad", "channel_bad", "length_bad")
        arrived = Signal(self._stage_layout({"crc_part": sum(self._crc_groups),
                                             **{f: 1 for f in flags}}), name="in")
        parts = []
        for g in groups:
            for taps in g:
                value = 0
                for tap in taps:
                    value = value ^ bits[tap]
                parts.append(value)
        is_data = hdr.ptype == PacketType.DATA
        is_credit = hdr.ptype == PacketType.CREDIT
        m.d[domain] += [
            arrived.valid.eq(valid),
            arrived.data.eq(tdata),
            arrived.last.eq(tlast),
            arrived.crc_part.eq(Cat(*parts)),
            arrived.magic_bad.eq((hdr.magic != PACKET_MAGIC) | (hdr.version != PACKET_VERSION)),
            arrived.type_bad.eq(~is_data & ~is_credit),
            arrived.channel_bad.eq(hdr.channel >= cfg.num_channels),
            arrived.length_bad.eq((hdr.length == 0) |
                                  (is_data & (hdr.length > cfg.max_packet_bytes)) |
                                  (is_credit & (hdr.length > depth))),
        ]
        return arrived

    def _decode(self, m, arrived):
        """Decode stage: the CRC-8 of the header (from the input stage's partial XORs), the
        beat count and the room left, registered with the field checks."""
        cfg = self.config
        lb = cfg.link_bytes
        shift = (lb - 1).bit_length()
        depth = cfg.rx_channel_beats
        hdr = PacketHeader(arrived.data[:64])
        flags = ("magic_bad", "type_bad", "channel_bad", "length_bad")
        decoded = Signal(self._stage_layout({"crc": 8, **{f: 1 for f in flags}}), name="decoded")
        crc = []
        at = 0
        for n in self._crc_groups:
            value = 0
            for k in range(n):
                value = value ^ arrived.crc_part[at + k]
            crc.append(value)
            at += n
        m.d.sync += [
            decoded.valid.eq(arrived.valid), decoded.data.eq(arrived.data),
            decoded.last.eq(arrived.last),
            decoded.beats.eq((hdr.length + (lb - 1)) >> shift),
            decoded.room.eq(depth - hdr.length),
            decoded.crc.eq(Cat(*crc)),
            *(getattr(decoded, f).eq(getattr(arrived, f)) for f in flags),
        ]
        return decoded

    def _cause(self, m, decoded):
        """Cause stage: the first failing stateless check (NONE if all pass), registered."""
        hdr = PacketHeader(decoded.data[:64])
        is_data = hdr.ptype == PacketType.DATA
        cause = Signal(NicError)
        with m.If(decoded.magic_bad):
            m.d.comb += cause.eq(NicError.BAD_MAGIC)
        with m.Elif(decoded.crc != hdr.check):
            m.d.comb += cause.eq(NicError.BAD_CHECK)
        with m.Elif(decoded.type_bad):
            m.d.comb += cause.eq(NicError.BAD_TYPE)
        with m.Elif(decoded.channel_bad):
            m.d.comb += cause.eq(NicError.BAD_CHANNEL)
        with m.Elif(decoded.length_bad):
            m.d.comb += cause.eq(NicError.BAD_LENGTH)
        with m.Elif(is_data & decoded.last):
            m.d.comb += cause.eq(NicError.EARLY_TLAST)
        with m.Elif(~is_data & ~decoded.last):
            m.d.comb += cause.eq(NicError.MISSING_TLAST)
        room_bits = self.config.rx_channel_beats.bit_length()
        nch = self.config.num_channels
        checked = Signal(self._stage_layout({
            "cause": NicError, "room_ahead": signed(room_bits + 1), "same_ch_ahead": 1,
            "is_data": 1,
            # per channel: a valid beat that passed every stateless check, DATA or CREDIT
            **{f"data_ch{c}": 1 for c in range(nch)},
            **{f"credit_ch{c}": 1 for c in range(nch)}}), name="checked")
        none = cause == NicError.NONE
        # a channel number out of range is BAD_CHANNEL, so its low bits may select anything
        sel = hdr.channel[:max(1, (nch - 1).bit_length())]
        ahead = PacketHeader(checked.data[:64])     # the beat one stage ahead
        m.d.sync += [
            checked.valid.eq(decoded.valid), checked.data.eq(decoded.data),
            checked.last.eq(decoded.last), checked.beats.eq(decoded.beats),
            checked.room.eq(decoded.room), checked.cause.eq(cause),
            # For a CREDIT right behind an accepted CREDIT: room left after the one ahead.
            checked.room_ahead.eq(decoded.room - ahead.length[:room_bits]),
            checked.same_ch_ahead.eq(hdr.channel == ahead.channel),
            checked.is_data.eq(is_data),
        ]
        for c in range(nch):
            passed = decoded.valid & none & (sel == c)
            m.d.sync += [checked[f"data_ch{c}"].eq(passed & is_data),
                         checked[f"credit_ch{c}"].eq(passed & ~is_data)]
        return checked

    def _judge(self, m, checked, space, cur):
        """Judge stage: the two header checks that read state (free space for DATA, credit
        overflow for CREDIT), each precomputed for the outcomes of the beat ahead, which the
        FSM is acting on in this cycle: that beat changes nothing for this one, or it rolls
        back its packet (``_rolled``: if that was this channel's packet, its space returns),
        or it is an accepted CREDIT (``_credited``: if of this channel, its count is added to
        the TX credits). Registered as the verdict (``ok``) and, for each channel, whether
        the beat reserves the channel's space (``reserve``), and whether it is a CREDIT taken
        (``credit``), so the FSM only picks the outcome that holds by what it did last
        cycle."""
        cfg = self.config
        nch = cfg.num_channels
        is_data = checked.is_data
        judged = Signal(self._stage_layout({
            "cause": NicError, "is_data": 1, "ok": 1, "ok_rolled": 1, "ok_credited": 1,
            "credit": 1, "credit_credited": 1,
            **{f"reserve{c}": 1 for c in range(nch)},
            **{f"reserve{c}_rolled": 1 for c in range(nch)},
            "beats_m1": range(cfg.max_packet_beats + 1)}),
            name="judged")
        # Compare per channel, then an AND-OR with the channel's registered selects
        # (``data_ch``, ``credit_ch``: valid, no stateless error, of this channel): no
        # multiplexer in front of the carry chains, one LUT level or two after them.
        fits = [checked.beats <= space["total"][c] for c in range(nch)]
        fits_rolled = [Mux(cur == c, checked.beats <= space["committed"][c], fits[c])
                       for c in range(nch)]
        credit_fits = [self.credits[c] <= checked.room for c in range(nch)]
        credit_fits_credited = [Mux(checked.same_ch_ahead,
                                    self.credits[c] <= checked.room_ahead, credit_fits[c])
                                for c in range(nch)]
        data_ch = [checked[f"data_ch{c}"] for c in range(nch)]
        credit_ch = [checked[f"credit_ch{c}"] for c in range(nch)]

        def any_of(selects, flags):
            return Cat(*(s & f for s, f in zip(selects, flags))).any()
        m.d.sync += [
            judged.valid.eq(checked.valid), judged.data.eq(checked.data),
            judged.last.eq(checked.last), judged.beats.eq(checked.beats),
            judged.beats_m1.eq(checked.beats - 1),
            judged.cause.eq(checked.cause), judged.is_data.eq(is_data),
            judged.ok.eq(any_of(data_ch, fits) | any_of(credit_ch, credit_fits)),
            judged.ok_rolled.eq(any_of(data_ch, fits_rolled) | any_of(credit_ch, credit_fits)),
            judged.ok_credited.eq(any_of(data_ch, fits) |
                                  any_of(credit_ch, credit_fits_credited)),
            judged.credit.eq(any_of(credit_ch, credit_fits)),
            judged.credit_credited.eq(any_of(credit_ch, credit_fits_credited)),
        ]
        for c in range(nch):
            m.d.sync += [
                judged[f"reserve{c}"].eq(data_ch[c] & fits[c]),
                judged[f"reserve{c}_rolled"].eq(data_ch[c] & fits_rolled[c]),
            ]
        return judged

    def _packet_state(self, m, beat, buffers, cur):
        """Registers of the packet being received, and the buffer entry each beat writes."""
        cfg = self.config
        lb = cfg.link_bytes
        beat_range = range(cfg.max_packet_beats + 1)
        hdr = PacketHeader(beat.data[:64])
        pkt = {"cur": cur, "beats_left": Signal(beat_range),
               "beats": Signal(beat_range, name="pkt_beats"),
               "length": Signal(17),
               "tag": Signal.like(hdr.tag), "src": Signal.like(hdr.src), "first": Signal(),
               "last_keep": Signal(lb), "is_last": Signal(name="pkt_is_last"),
               "keep": Signal(lb, init=-1, name="pkt_keep")}
        # ``is_last`` (``beats_left == 1``) and the beat's byte mask are registers, set by the
        # FSM with ``beats_left``, so no compare sits in front of the entry's data mask.
        keep = pkt["keep"]
        entry = Signal(NicRxBeat(cfg))
        m.d.comb += entry.eq(struct_value(
            NicRxBeat(cfg), keep=keep, first=pkt["first"], last=pkt["is_last"], src=pkt["src"],
            tag=pkt["tag"], length=pkt["length"],
            data=Cat(*(beat.data.word_select(i, 8) & keep[i].replicate(8) for i in range(lb)))))
        # One register of the entry for all the link's buffers (each registers its controls).
        entry_q = Signal(NicRxBeat(cfg), name="entry_q")
        m.d.sync += entry_q.eq(entry)
        for buf in buffers:
            m.d.comb += buf.w_data.eq(entry_q)
        return pkt

    def _fsm(self, m, checked, buffers):
        """The judge stage and the packet FSM on judged beats: buffer writes, credit intake,
        errors. Returns (error_now, error_code)."""
        lb = self.config.link_bytes
        space = self._free_space(m, buffers)
        cur = Signal(range(self.config.num_channels))
        beat = self._judge(m, checked, space, cur)
        hdr = PacketHeader(beat.data[:64])
        is_data = beat.is_data
        pkt = self._packet_state(m, beat, buffers, cur)
        is_last = pkt["is_last"]
        error_now = Signal()
        error_code = Signal(NicError)
        rollback = Signal()
        commit = Signal()
        credit_now = Signal()
        # What the beat ahead did last cycle decides which precomputed result holds.
        rolled_back = Signal()
        credited = Signal()
        m.d.sync += [rolled_back.eq(rollback), credited.eq(credit_now)]
        ok = Signal()
        m.d.comb += ok.eq(Mux(rolled_back, beat.ok_rolled, Mux(credited, beat.ok_credited,
                                                                 beat.ok)))
        # The same verdict per channel for an accepted DATA header, and for a CREDIT, in the
        # HEADER state (rolled_back and credited are never both high: the FSM was in PAYLOAD
        # or in HEADER last cycle).
        in_header = Signal(name="rx_in_header")
        for c, reserve in enumerate(space["reserve"]):
            m.d.comb += reserve.eq(in_header & Mux(rolled_back, beat[f"reserve{c}_rolled"],
                                                   beat[f"reserve{c}"]))
        m.d.comb += credit_now.eq(in_header & Mux(credited, beat.credit_credited,
                                                  beat.credit))
        cause = Signal(NicError)
        with m.If(beat.cause != NicError.NONE):
            m.d.comb += cause.eq(beat.cause)
        with m.Elif(is_data):
            m.d.comb += cause.eq(NicError.OVERFLOW)
        with m.Else():
            m.d.comb += cause.eq(NicError.CREDIT_OVERFLOW)
        m.d.comb += [self.credit_valid.eq(credit_now), self.credit_channel.eq(hdr.channel),
                     self.credit_count.eq(hdr.length)]

        header_now = Signal()       # an accepted packet's header beat is counted now
        header_q = Signal(name="header_q")
        commit_q = Signal(name="commit_q")
        length_q = Signal.like(pkt["length"], name="length_q")
        m.d.sync += [header_q.eq(header_now), commit_q.eq(commit), length_q.eq(pkt["length"])]
        self._work += [beat.valid, rolled_back, credited, header_q, commit_q]
        with m.If(commit_q):
            m.d.sync += self.payload_bytes.eq(self.payload_bytes + length_q)
        with m.If(header_q):
            m.d.sync += self.header_bytes.eq(self.header_bytes + lb)
        with m.FSM(name="rx_fsm") as fsm:
            with m.State("HEADER"):
                with m.If(beat.valid):
                    with m.If(~ok):
                        m.d.comb += [error_now.eq(1), error_code.eq(cause)]
                        with m.If(~beat.last):
                            m.next = "DROP"
                    with m.Elif(~is_data):
                        m.d.comb += header_now.eq(1)
                    with m.Else():
                        m.next = "PAYLOAD"
                    # The packet's registers load from every header beat (only an accepted
                    # DATA header's values are read, in PAYLOAD), so their load enable is the
                    # state and ``valid``, not the verdict.
                    last_index = (hdr.length - 1) & (lb - 1)
                    one_beat = beat.beats == 1
                    m.d.sync += [
                        cur.eq(hdr.channel), pkt["beats_left"].eq(beat.beats),
                        pkt["beats"].eq(beat.beats),
                        pkt["length"].eq(hdr.length),
                        pkt["tag"].eq(hdr.tag), pkt["src"].eq(hdr.src), pkt["first"].eq(1),
                        pkt["is_last"].eq(one_beat),
                    ]
                    for i in range(lb):
                        m.d.sync += [pkt["last_keep"][i].eq(last_index >= i),
                                     pkt["keep"][i].eq(~one_beat | (last_index >= i))]
            with m.State("PAYLOAD"):
                with m.If(beat.valid):
                    next_is_last = pkt["beats_left"] == 2
                    m.d.sync += [pkt["beats_left"].eq(pkt["beats_left"] - 1), pkt["first"].eq(0),
                                 pkt["is_last"].eq(next_is_last),
                                 pkt["keep"].eq(Mux(next_is_last, pkt["last_keep"],
                                                    Const(-1, lb)))]
                    m.d.comb += [rollback.eq(is_last != beat.last),
                                 commit.eq(is_last & beat.last)]
                    with m.If(is_last & beat.last):
                        m.d.comb += header_now.eq(1)
                        m.next = "HEADER"
                    with m.Elif(beat.last):
                        m.d.comb += [error_now.eq(1), error_code.eq(NicError.EARLY_TLAST)]
                        m.next = "HEADER"
                    with m.Elif(is_last):
                        m.d.comb += [error_now.eq(1), error_code.eq(NicError.MISSING_TLAST)]
                        m.next = "DROP"
            with m.State("DROP"):
                with m.If(beat.valid & beat.last):
                    m.next = "HEADER"

        # One-hot ``PAYLOAD`` and ``cur``: the channel whose packet is being received
        # (registered, set with the FSM's state), so each buffer's controls and each channel's
        # free-space step are one LUT of registers, with no channel decode.
        receiving = [Signal(name=f"receiving{c}") for c in range(self.config.num_channels)]
        payload_ends = beat.valid & (beat.last | is_last)
        for c, buf in enumerate(buffers):
            m.d.sync += receiving[c].eq(space["reserve"][c] | (receiving[c] & ~payload_ends))
            m.d.comb += [
                buf.w_en.eq(receiving[c] & beat.valid & ~(beat.last & ~is_last)),
                buf.commit.eq(receiving[c] & beat.valid & is_last & beat.last),
                buf.rollback.eq(receiving[c] & beat.valid & (is_last != beat.last)),
                space["release"][c].eq(buf.rollback),
            ]
        m.d.comb += [in_header.eq(fsm.ongoing("HEADER")),
                     space["reserve_beats"].eq(beat.beats),
                     space["reserve_beats_m1"].eq(beat.beats_m1),
                     space["channel"].eq(cur), space["beats"].eq(pkt["beats"]),
                     space["commit"].eq(commit)]
        # For tests: one expression per FSM state, true while in it.
        self.fsm_states = {name: fsm.ongoing(name) for name in ['HEADER', 'PAYLOAD', 'DROP']}
        return error_now, error_code

    def _free_space(self, m, buffers):
        """Per channel, the buffer space a new packet may use, in two registers: ``total``
        (``depth`` less the committed unread beats and the reservation of the packet being
        received) and ``committed`` (without the reservation: what ``total`` becomes if that
        packet rolls back). A DATA header taken (``reserve[c]``, of ``reserve_beats``)
        reserves its beats, a commit turns the current packet's beats (``beats`` on
        ``channel``) into committed ones, a rollback (``release[c]``) returns them; a beat read
        from the buffer counts when it is owed (``freed``, a register). Each register is one
        adder: ``total + step + freed``, ``freed`` as the carry in and ``step`` a one-LUT pick
        per bit of ``-reserve_beats`` (``~(reserve_beats - 1)``, registered), ``beats`` or 0.
        Returns the controls and registers."""
        cfg = self.config
        nch = cfg.num_channels
        depth = cfg.rx_channel_beats
        beat_range = range(cfg.max_packet_beats + 1)
        channel_range = range(nch)
        ctl = {"reserve": [Signal(name=f"space{c}_reserve") for c in range(nch)],
               "release": [Signal(name=f"space{c}_release") for c in range(nch)],
               "commit": Signal(name="space_commit"),
               "reserve_beats": Signal(beat_range, name="space_reserve_beats"),
               "channel": Signal(channel_range, name="space_channel"),
               "beats": Signal(beat_range, name="space_beats"),
               "reserve_beats_m1": Signal(beat_range, name="space_reserve_beats_m1"),
               "total": [], "committed": []}
        for c in range(nch):
            total = Signal(range(depth + 1), init=depth, name=f"space{c}_total")
            committed = Signal(range(depth + 1), init=depth, name=f"space{c}_committed")
            width = len(total)
            mine = ctl["channel"] == c
            step = Signal(width, name=f"space{c}_step")
            with m.If(ctl["reserve"][c]):
                # Zero-extended to the space's width before the inversion, so that the
                # step is ``-reserve_beats`` modulo 2**width however the two widths compare.
                m.d.comb += step.eq(~Cat(ctl["reserve_beats_m1"], Const(0, width))[:width])
            with m.Elif(ctl["release"][c]):       # never with reserve: PAYLOAD, not HEADER
                m.d.comb += step.eq(ctl["beats"][:width])
            m.d.sync += total.eq(total + step + self.freed[c])
            # Applied a cycle late: only a header right behind a rollback reads ``committed``,
            # and a packet (two beats at least) separates it from any earlier commit. ``kept``
            # holds the commit's beats negated.
            kept = Signal(width, name=f"space{c}_kept")
            m.d.sync += kept.eq(Mux(ctl["commit"] & mine, -ctl["beats"], 0))
            self._work.append(kept.any())
            m.d.sync += committed.eq(committed + kept + self.freed[c])
            ctl["total"].append(total)
            ctl["committed"].append(committed)
        return ctl
