"""Transmit side of one NIC link: packet framing, round-robin arbitration among channels,
per-channel credits and in-band credit return, in three registered stages.

::

    cmd[c] ---> eligible (reg.) ---+
    owed[c] --> urgent, pending ---+--> arbiter --> grant slot --> header (CRC) | payload
                (reg.)                              (reg.)            |   data[cur] ^
                                                                      v
    credit_in (from RX) --> credits[c]                          skid buffer --> link
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ace.layouts import (PACKET_MAGIC, PACKET_VERSION, AxiStreamSignature, NicSendCmd, NicTxBeat,
                         PacketHeader, struct_value)
from ace.hw.nic.header import HeaderCheck
from ace.hw.common.carry_save import CarrySaveSum
from ace.hw.common.clock_gate import gate_while_busy
from ace.hw.common.replica import replicas, replicates
from ace.hw.common.skid_fifo import SkidFifo

__all__ = ["NicLinkTx", "COUNTER_BITS", "TX_COMMAND_STAGES", "TX_COUNTER_DELAY"]

COUNTER_BITS = 48

#: Cycles without a freed beat after which owed credits may go out in an idle-link CREDIT packet.
CREDIT_QUIET_CYCLES = 4

#: Cycles from a command first offered on ``cmd[c]`` (an idle link, credits available) to its
#: header on ``link``: eligibility register, grant slot, header (CRC) stage into the skid.
TX_COMMAND_STAGES = 3

#: Cycles the counters (``payload_bytes``, ``header_bytes``, ``busy_cycles``, ``stall_cycles``)
#: follow the link: their steps are registered first.
TX_COUNTER_DELAY = 1

#: Beat bits per copy of a register that selects or loads a whole beat (the framing's one-hot
#: selects, the skid FIFOs' load enables and read pointers).
TX_SLICE_BITS = 16


def credit_threshold(config) -> int:
    """Owed credits at which a CREDIT packet takes priority over DATA."""
    return max(1, config.rx_channel_beats // 4)


def link_beat_layout(link_bytes: int) -> data.StructLayout:
    """A beat on its way to the link, with what the counters need: ``header`` marks a header
    beat, ``bytes`` the payload bytes the beat carries (0 for a header)."""
    return data.StructLayout({
        "data": unsigned(8 * link_bytes), "keep": unsigned(link_bytes), "last": unsigned(1),
        "header": unsigned(1), "bytes": range(link_bytes + 1),
    })


class NicLinkTx(wiring.Component):
    """One link's transmitter.

    A packet starts only at a packet boundary and only if its channel holds credits for all of
    its payload beats, so the receiver never has to stall the link. The arbiter reads only
    registered requests (``eligible``, ``urgent``, ``pending``, each computed a cycle ahead)
    and registers its grant in a one-packet slot; the grant takes the command (``cmd[c].ready``)
    and is arbitrated while the previous packet's payload goes out, so the next header follows
    the last payload beat with no idle cycle. The header's CRC is computed from the slot
    registers in its own stage, and every beat leaves through a skid buffer, so ``link`` is
    driven from registers and ``link.tready`` reaches only that buffer.

    Credits are spent, and owed credits cleared, the cycle after the grant; the grant slot
    cannot be refilled in that cycle, and the request registers of the granted channel are
    masked for it, so nothing is granted twice.

    Parameters
    ----------
    config : AceConfig
    gated_clock : bool
        The transmitter on a gated clock (:func:`ace.hw.common.clock_gate.gate_while_busy`)
        that runs only while a command is offered, a request, grant or beat is in flight, a
        credit comes in or one is owed: the gated-clock form of the engine, which Verilator
        evaluates only in those cycles. The same behaviour as without.

    Members
    -------
    node_id : In(8)
        Source node id written into every header.
    link : Out(AxiStreamSignature(link_bytes, keep=True))
    cmd : In(stream.Signature(NicSendCmd)).array(num_channels)
        Send commands per channel for this link (``link`` field ignored). ``length`` must be
        1..max_send_bytes (checked by :class:`ace.hw.nic.interface.NicInterface`).
    data : In(stream.Signature(NicTxBeat)).array(num_channels)
        Payload beats per channel; taken only while this link sends that channel's packet.
    credit_in_valid, credit_in_channel, credit_in_count : In
        The far end returned ``count`` beats of credit for ``channel`` (from this link's RX).
    freed : In(1).array(num_channels)
        The local RX freed one beat of the channel's buffer: one credit owed to the far end.
    credits : Out(range(rx_channel_beats + 1)).array(num_channels)
        Credits held per channel (beats the far end can take; registered).
    busy : Out(1).array(num_channels)
        The channel has a DATA packet granted or its payload going out on this link
        (registered). :class:`NicInterface` holds the channel's commands for other links.
    payload_bytes, header_bytes, busy_cycles, stall_cycles : Out(48)
        Counters of what ``link`` carried: payload bytes, header beats x link_bytes (DATA and
        CREDIT), cycles with a beat taken, cycles with ``tvalid & ~tready``; each counts a
        cycle :data:`TX_COUNTER_DELAY` (1) after the beat or stall.

    Latency: :data:`TX_COMMAND_STAGES` (3) cycles from a command to its header on an idle link.
    Throughput: one beat per cycle; a DATA packet of ``n >= 2`` payload beats takes ``n + 1``
    link cycles; one channel alone sending 1-beat packets takes 3 cycles per packet, CREDIT
    packets back to back take 2 cycles each.
    """

    def __init__(self, config, *, gated_clock=False):
        self.config = config
        self.gated_clock = gated_clock
        nch = config.num_channels
        depth = config.rx_channel_beats
        super().__init__({
            "node_id": In(8),
            "link": Out(AxiStreamSignature(config.link_bytes, keep=True)),
            "cmd": In(stream.Signature(NicSendCmd(config))).array(nch),
            "data": In(stream.Signature(NicTxBeat(config))).array(nch),
            "credit_in_valid": In(1),
            "credit_in_channel": In(4),
            "credit_in_count": In(range(depth + 1)),
            "freed": In(1).array(nch),
            "credits": Out(range(depth + 1)).array(nch),
            "busy": Out(1).array(nch),
            "payload_bytes": Out(COUNTER_BITS),
            "header_bytes": Out(COUNTER_BITS),
            "busy_cycles": Out(COUNTER_BITS),
            "stall_cycles": Out(COUNTER_BITS),
        })
        #: Each channel's ``data[c].ready`` again (the same value in every cycle): a register
        #: computed a cycle ahead in the replicated form (:func:`replicates`), so a consumer
        #: with many load enables on it (:class:`NicInterface`'s skid FIFO) starts from a
        #: flip-flop of its own, not from this link's skid and framing; ``data[c].ready``
        #: itself in the gated-clock form.
        self.data_ready_copies = [Signal(name=f"data{c}_ready_copy") for c in range(nch)]

    def elaborate(self, platform):
        m = Module()
        # With ``gated_clock``, the whole transmitter is a module of its own whose clock runs
        # only while it has work (see the class docstring).
        core = Module() if self.gated_clock else m
        cfg = self.config
        self._platform = platform
        self._copies = replicates(cfg, platform)
        core.submodules.out_skid = skid = SkidFifo(link_beat_layout(cfg.link_bytes),
                                                   slice_bits=TX_SLICE_BITS if self._copies
                                                   else None)
        self._out_skid = skid
        self._drive_link(core, skid.o)
        slot, req = self._grant_slot(core)
        self._frame(core, slot, skid.i)
        if self.gated_clock:
            # Every register moves only with a command, a request, a grant, a beat in the
            # framing or the skid FIFO, a credit in or out, or an owed credit's quiet count.
            busy = Cat(*(cmd.valid for cmd in self.cmd), *self.freed, self.credit_in_valid,
                       slot["valid"], slot["fresh"], self.fsm_states["PAYLOAD"], skid.o.valid,
                       *req["eligible"], *req["urgent"], *req["pending"],
                       *(owed.any() for owed in req["owed"]),
                       *(quiet != CREDIT_QUIET_CYCLES for quiet in req["quiet"]),
                       self._counter_steps).any()
            gate_while_busy(m, "core", busy, core)
        return m

    # -- stage 1 and 2: registered requests, arbiter, grant slot, credit bookkeeping -------------

    def _requests(self, m, slot):
        """Per channel: the registered requests (eligible DATA, urgent and pending CREDIT), the
        beat count of the head command, credits and owed credits, updated for the grant made
        in the previous cycle (whose channel is masked now, since its counts change only now)."""
        cfg = self.config
        lb = cfg.link_bytes
        shift = (lb - 1).bit_length()
        depth = cfg.rx_channel_beats
        beat_range = range(cfg.max_packet_beats + 1)
        names = ("eligible", "urgent", "pending", "beats", "owed", "quiet")
        req = {name: [] for name in names}
        for c, cmd in enumerate(self.cmd):
            eligible, urgent, pending = (Signal(name=f"ch{c}_{n}") for n in names[:3])
            beats = Signal(beat_range, name=f"cmd{c}_beats")
            credits = Signal(range(depth + 1), init=depth, name=f"credits{c}_q")
            owed = Signal(range(depth + 1), name=f"owed{c}")
            quiet = Signal(range(CREDIT_QUIET_CYCLES + 1), name=f"owed{c}_quiet")
            for name, sig in zip(names, (eligible, urgent, pending, beats, owed, quiet)):
                req[name].append(sig)
            data_granted = slot["data_granted"][c]
            credit_granted = slot["credit_granted"][c]
            m.d.comb += [
                self.credits[c].eq(credits),
                beats.eq((cmd.payload.length + (lb - 1)) >> shift),
            ]
            m.d.sync += [
                eligible.eq(cmd.valid & ((credits << shift) >= cmd.payload.length) &
                            ~data_granted),
                urgent.eq((owed >= credit_threshold(cfg)) & ~credit_granted),
                pending.eq((owed != 0) & (quiet == CREDIT_QUIET_CYCLES) & ~credit_granted),
            ]
            with m.If(self.freed[c]):
                m.d.sync += quiet.eq(0)
            with m.Elif(quiet != CREDIT_QUIET_CYCLES):
                m.d.sync += quiet.eq(quiet + 1)

            # The new credit count for both outcomes of the RX's credit intake (whose decision
            # comes late, from its FSM), computed from registers; the intake only picks one.
            # The grant's spending (``spent``, from registers) is subtracted in both; with the
            # intake that is three operands, summed carry-save: one adder, not two in series.
            returned = Signal(range(depth + 1), name=f"owed{c}_returned")
            with m.If(credit_granted):
                m.d.comb += returned.eq(slot["length"])
            spent = Signal(beat_range, name=f"credits{c}_spent")
            with m.If(data_granted):
                m.d.comb += spent.eq(slot["beats"])
            kept = (credits - spent)[:len(credits)]
            gained = CarrySaveSum(credits, plus=self.credit_in_count, minus=spent).sum()
            m.d.sync += [
                credits.eq(Mux(self.credit_in_valid & (self.credit_in_channel == c),
                               gained, kept)),
                owed.eq(owed + self.freed[c] - returned),
            ]
        return req

    def _grant_slot(self, m):
        """The arbiter and its registered grant. Returns the slot's signals and the requests
        (two dicts)."""
        cfg = self.config
        nch = cfg.num_channels
        slot = {"valid": Signal(name="slot_valid"), "fresh": Signal(name="slot_fresh"),
                "credit": Signal(name="slot_credit"), "ch": Signal(range(nch), name="slot_ch"),
                "tag": Signal(8, name="slot_tag"), "length": Signal(17, name="slot_length"),
                "beats": Signal(range(cfg.max_packet_beats + 1), name="slot_beats"),
                # Per channel, one-hot: the slot holds a DATA packet of the channel (until its
                # header goes out), and the grant of the previous cycle was the channel's DATA
                # or CREDIT packet (``fresh`` for one channel and kind).
                "data_ch": [Signal(name=f"slot_data_ch{c}") for c in range(nch)],
                "data_granted": [Signal(name=f"ch{c}_data_granted") for c in range(nch)],
                "credit_granted": [Signal(name=f"ch{c}_credit_granted") for c in range(nch)]}
        req = self._requests(m, slot)
        eligible, urgent, pending = req["eligible"], req["urgent"], req["pending"]

        # Arbiter: urgent CREDIT (lowest channel), else DATA (round robin), else idle CREDIT.
        # Every channel's grant is computed in parallel as one-hot bits from the request
        # registers and the one-hot last DATA grant, and the slot's fields are AND-OR
        # selections by them, so no encoded channel number sits between the requests and
        # the slot's multiplexers.
        idle = ~slot["valid"]
        any_urgent = Cat(*urgent).any()
        any_eligible = Cat(*eligible).any()
        rr_last = [Signal(init=c == 0, name=f"rr_last{c}") for c in range(nch)]  # one-hot

        def first(flags, c):
            return flags[c] & ~Cat(*flags[:c]).any() if c else flags[c]

        def round_robin(c):
            # eligible, and no channel eligible after the last grant's and before this one
            after_last = []
            for last in range(nch):
                between = [(last + 1 + i) % nch for i in range(nch)]
                between = between[:between.index(c)]
                after_last.append(rr_last[last] & ~Cat(*(eligible[d] for d in between)).any()
                                  if between else rr_last[last])
            return eligible[c] & Cat(*after_last).any()

        data_grant = [Signal(name=f"ch{c}_data_grant") for c in range(nch)]
        credit_grant = [Signal(name=f"ch{c}_credit_grant") for c in range(nch)]
        for c in range(nch):
            m.d.comb += [
                data_grant[c].eq(idle & ~any_urgent & round_robin(c)),
                credit_grant[c].eq(idle & (first(urgent, c) | (
                    ~any_urgent & ~any_eligible & first(pending, c)))),
            ]
        grant = Signal()
        m.d.comb += grant.eq(Cat(*data_grant, *credit_grant).any())

        def select(values):
            # AND-OR of ``(grant bit, value)`` pairs
            out = 0
            for bit, value in values:
                out = out | (value & bit.replicate(len(value)))
            return out

        m.d.sync += slot["fresh"].eq(grant)
        for c in range(nch):
            m.d.sync += [slot["data_granted"][c].eq(data_grant[c]),
                         slot["credit_granted"][c].eq(credit_grant[c])]
            m.d.comb += self.cmd[c].ready.eq(data_grant[c])
        with m.If(grant):
            m.d.sync += [
                slot["valid"].eq(1), slot["credit"].eq(Cat(*credit_grant).any()),
                slot["ch"].eq(select((data_grant[c] | credit_grant[c], Const(c, len(slot["ch"])))
                                     for c in range(nch))),
                slot["tag"].eq(select(zip(data_grant, (cmd.payload.tag for cmd in self.cmd)))),
                slot["length"].eq(select(
                    [*zip(data_grant, (cmd.payload.length for cmd in self.cmd)),
                     *zip(credit_grant, req["owed"])])),
                slot["beats"].eq(select(zip(data_grant, req["beats"]))),
                *(slot["data_ch"][c].eq(data_grant[c]) for c in range(nch)),
            ]
        with m.If(Cat(*data_grant).any()):
            m.d.sync += [rr_last[c].eq(data_grant[c]) for c in range(nch)]
        return slot, req

    # -- stage 3: header (CRC) or payload beat into the skid buffer ------------------------------

    def _frame(self, m, slot, beat):
        """The framing FSM: the slot's header, then its payload beats, into ``beat``."""
        cfg = self.config
        nch = cfg.num_channels
        lb = cfg.link_bytes
        beat_range = range(cfg.max_packet_beats + 1)

        m.submodules.hdr_check = check = HeaderCheck()
        m.d.comb += check.header.eq(struct_value(
            PacketHeader, magic=PACKET_MAGIC, version=PACKET_VERSION,
            ptype=slot["credit"], src=self.node_id, channel=slot["ch"], tag=slot["tag"],
            length=slot["length"]))

        cur = Signal(range(nch))
        beats_left = Signal(beat_range)
        last_bytes = Signal(range(lb + 1))
        last_keep = Signal(lb)
        # The current beat's last flag and byte mask, registered: set with the beat count when
        # the header goes out and when a payload beat does, so no compare sits in front of the
        # payload's mask.
        is_last = Signal(name="is_last")
        keep = Signal(lb, init=-1, name="keep")
        # One-hot ``PAYLOAD`` and ``cur``: the channel whose payload goes out (registered, set
        # with the FSM's state), so a payload beat's valid and ready need no channel decode.
        sending = [Signal(name=f"sending{c}") for c in range(nch)]
        sent = beat.valid & beat.ready

        with m.FSM(name="tx_fsm") as fsm:
            with m.State("HEADER"):
                m.d.comb += [
                    beat.valid.eq(slot["valid"]),
                    beat.payload.keep.eq(Const(-1, lb)),
                    beat.payload.last.eq(slot["credit"]),
                    beat.payload.header.eq(1),
                ]
                with m.If(sent):
                    m.d.sync += slot["valid"].eq(0)
                    m.d.sync += [data_ch.eq(0) for data_ch in slot["data_ch"]]
                    with m.If(~slot["credit"]):
                        last_index = (slot["length"] - 1) & (lb - 1)
                        first_is_last = slot["beats"] == 1
                        m.d.sync += [cur.eq(slot["ch"]), beats_left.eq(slot["beats"]),
                                     last_bytes.eq(last_index + 1), is_last.eq(first_is_last)]
                        for i in range(lb):
                            m.d.sync += [last_keep[i].eq(last_index >= i),
                                         keep[i].eq(~first_is_last | (last_index >= i))]
                        m.next = "PAYLOAD"
            with m.State("PAYLOAD"):
                m.d.comb += [
                    beat.valid.eq(Cat(*(on & d.valid for on, d in zip(sending, self.data))).any()),
                    beat.payload.keep.eq(keep),
                    beat.payload.last.eq(is_last),
                    beat.payload.bytes.eq(Mux(is_last, last_bytes, lb)),
                ]
                for c in range(nch):
                    m.d.comb += self.data[c].ready.eq(sending[c] & beat.ready)
                with m.If(sent):
                    next_is_last = beats_left == 2
                    m.d.sync += [beats_left.eq(beats_left - 1), is_last.eq(next_is_last),
                                 keep.eq(Mux(next_is_last, last_keep, Const(-1, lb)))]
                    with m.If(is_last):
                        m.next = "HEADER"

        self._frame_data(m, fsm, slot, sending, is_last, keep,
                         Cat(check.header.as_value()[:56], check.check), beat)
        for c in range(nch):
            m.d.comb += self.busy[c].eq(slot["data_ch"][c] | sending[c])
        # For tests: one expression per FSM state, true while in it.
        self.fsm_states = {name: fsm.ongoing(name) for name in ['HEADER', 'PAYLOAD']}

    def _frame_data(self, m, fsm, slot, sending, is_last, keep, header, beat):
        """The beat's data: the header in ``HEADER``, the current channel's word masked by
        ``keep`` in ``PAYLOAD``, as an AND-OR of one-hot selects. The selects are registers
        computed a cycle ahead (the next value of ``sending``), replicated per
        :data:`TX_SLICE_BITS` of the beat (:func:`replicas`), so no select fans out to the
        whole beat. Each channel's next select is a function of six registers (``HEADER``, the
        slot holding the channel's DATA packet, the skid's ``ready``, ``sending``, the
        channel's ``valid`` and ``is_last``), not of the FSM's decoded transitions."""
        cfg = self.config
        nch = cfg.num_channels
        lb = cfg.link_bytes
        width = 8 * lb
        starts = range(0, width, TX_SLICE_BITS)
        in_header = fsm.ongoing("HEADER")
        ready = beat.ready
        sending_next = []
        for c in range(nch):
            # The channel's header goes out now, or its payload goes on past this beat.
            nxt = Signal(name=f"sending{c}_next")
            m.d.comb += nxt.eq((in_header & slot["data_ch"][c] & ready) |
                               (sending[c] & ~(self.data[c].valid & ready & is_last)))
            m.d.sync += sending[c].eq(nxt)
            sending_next.append(nxt)
            # ``data[c].ready`` is ``sending[c] & beat.ready`` in both states (``sending`` is
            # all low in HEADER), and both are registers whose next values are known here.
            if self._copies:
                m.d.sync += self.data_ready_copies[c].eq(nxt & self._out_skid.ready_next)
            else:
                m.d.comb += self.data_ready_copies[c].eq(self.data[c].ready)
        picks = [replicas(m, self._platform, sending_next[c], len(starts),
                          name=f"pick{c}", distinct=self._copies) for c in range(nch)]
        header_starts = [lo for lo in starts if lo < header.shape().width]
        pick_header = replicas(m, self._platform, ~Cat(*sending_next).any(), len(header_starts),
                               init=1, name="pick_header", distinct=self._copies)
        out = []
        for j, lo in enumerate(starts):
            bits = slice(lo, min(lo + TX_SLICE_BITS, width))
            n = bits.stop - bits.start
            mask = Cat(*(keep[i // 8] for i in range(bits.start, bits.stop)))
            word = 0
            for c in range(nch):
                word = word | (self.data[c].payload.data[bits] & picks[c][j].replicate(n))
            word = word & mask
            if j < len(header_starts):
                word = word | (header[bits] & pick_header[j].replicate(n))
            out.append(word)
        m.d.comb += beat.payload.data.eq(Cat(*out))

    # -- link port and counters -----------------------------------------------------------------

    def _drive_link(self, m, out):
        """``link`` from the output skid FIFO, and the counters. The counters follow the link
        a cycle late (:data:`TX_COUNTER_DELAY`): their steps are registered, so each 48-bit
        carry chain starts at a register of its own, not at the handshake's logic."""
        link = self.link
        take = Signal()
        m.d.comb += [
            link.tvalid.eq(out.valid),
            link.tdata.eq(out.payload.data),
            link.tkeep.eq(out.payload.keep),
            link.tlast.eq(out.payload.last),
            out.ready.eq(link.tready),
            take.eq(out.valid & link.tready),
        ]
        take_q = Signal(name="take_q")
        stall_q = Signal(name="stall_q")
        header_q = Signal(name="header_q")
        bytes_q = Signal.like(out.payload.bytes, name="bytes_q")
        m.d.sync += [
            take_q.eq(take),
            stall_q.eq(out.valid & ~link.tready),
            header_q.eq(take & out.payload.header),
            bytes_q.eq(Mux(take, out.payload.bytes, 0)),
            self.payload_bytes.eq(self.payload_bytes + bytes_q),
            self.busy_cycles.eq(self.busy_cycles + take_q),
            self.stall_cycles.eq(self.stall_cycles + stall_q),
        ]
        with m.If(header_q):
            m.d.sync += self.header_bytes.eq(self.header_bytes + self.config.link_bytes)
        self._counter_steps = Cat(take_q, stall_q).any()
