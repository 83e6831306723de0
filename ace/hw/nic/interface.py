"""NIC interface: per-link AXI-Stream TX/RX, packets with a checked header, per-channel credits.

::

      ch{c}_send        ch{c}_send_data                ch{c}_recv (link: ch{c}_recv_link)
          v                   v                              ^
    [command register]   [skid FIFO]                    mux over links
    check: BAD_COMMAND        |                              ^
          v                   v                   [skid FIFO] per link and channel
    +-----------------------------------+       +------------------------------------+
    | NicLinkTx l: requests -> grant    |       | NicLinkRx l: input -> decode ->    |
    | slot -> header (CRC) | payload    |       | cause -> FSM -> NicRxBuffer per ch |
    | -> skid                    credits| <-----| credit_in, freed[c]                |
    +-----------------------------------+       +------------------------------------+
                        v tx{l}                                   ^ rx{l}
                          ... one TX/RX pair per link ...

Each link's TX and RX form a pair: CREDIT packets received on ``rx{l}`` add credits to
``tx{l}``, and beats freed from ``rx{l}``'s buffers are returned by ``tx{l}`` as CREDIT packets.
The link partner's ``tx{l}`` must therefore be wired to this NIC's ``rx{l}`` and vice versa.
See docs/nic.md for the packet format, the credit protocol and the error handling.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, DomainRenamer, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ace.hw.common.clock_gate import gate_while_busy, uses_gated_clock
from ace.hw.common.replica import replicates
from ace.hw.common.skid_fifo import SkidFifo
from ace.layouts import AxiStreamSignature, NicError, NicRxBeat, NicSendCmd, NicTxBeat
from ace.hw.nic.rx import NicLinkRx
from ace.hw.nic.tx import COUNTER_BITS, TX_SLICE_BITS, NicLinkTx

__all__ = ["NicInterface", "LINK_COUNTERS"]

#: Per-link counter ports, named ``link{l}_<name>``; all :data:`COUNTER_BITS` wide.
LINK_COUNTERS = (
    "tx_payload_bytes", "tx_header_bytes", "tx_busy_cycles", "tx_stall_cycles",
    "rx_payload_bytes", "rx_header_bytes", "rx_busy_cycles", "rx_errors",
)


class NicInterface(wiring.Component):
    """The NIC interface of one endpoint.

    Parameters
    ----------
    config : AceConfig
        Uses ``num_links``, ``link_bytes`` (at least 8: the header is 64 bits),
        ``num_channels``, ``max_packet_bytes`` and ``rx_channel_beats``.

    Members
    -------
    node_id : In(8)
        This endpoint's id, sent as ``src`` in every header.
    tx{l} : Out(AxiStreamSignature(link_bytes, keep=True))
    rx{l} : In(AxiStreamSignature(link_bytes, keep=True))
        Link ``l``; ``rx{l}.tready`` is always 1. (Port names are the testbench and engine
        contract; the blocks inside use indexed ports, ``tx.cmd[c]``, ``rx.out[c]``...)
    ch{c}_send : In(stream.Signature(NicSendCmd))
        Channel ``c`` sends one packet of ``length`` bytes (1..:attr:`max_send_bytes`) on
        ``link`` with ``tag``. A command with a bad length or link is taken and dropped, and
        counts in ``cmd_errors``.
    ch{c}_send_data : In(stream.Signature(NicTxBeat))
        The payload beats of channel ``c``'s commands, ``ceil(length / link_bytes)`` per
        command, in command order.
    ch{c}_recv : Out(stream.Signature(NicRxBeat))
        Payload beats received for channel ``c`` on link ``ch{c}_recv_link``; header fields
        (``src``, ``tag``, ``length``) repeat on every beat, ``first``/``last`` delimit packets.
    ch{c}_recv_link : In(range(num_links))
        Which link ``ch{c}_recv`` reads from. Change it only between packets; other links keep
        buffering channel ``c`` meanwhile (up to their credits).
    error_clear : In(1)
        Clears the sticky error flags and causes (not the counters).
    link{l}_rx_error : Out(1), link{l}_rx_error_cause : Out(NicError)
        Sticky: the first error on ``rx{l}`` since the last clear, and its cause.
    link{l}_<counter> : Out(48)
        :data:`LINK_COUNTERS`. Header bytes count ``link_bytes`` per header beat (the link
        time a header costs), for DATA and CREDIT packets.
    cmd_error : Out(1), cmd_errors : Out(48)
        Sticky flag and count of dropped bad send commands.

    Every port is driven from a register (``ch{c}_recv`` through the link mux), and no
    ``ready`` passes combinationally between ports: ``ch{c}_send`` enters a command register
    (checked there; ``ready`` is "empty"), ``ch{c}_send_data`` passes through a skid FIFO,
    ``ch{c}_recv`` is the ``ch{c}_recv_link`` mux of one skid FIFO per link (so a beat
    fetched ahead stays with its link when the channel's next step reads another), ``tx{l}``
    leaves the TX's skid FIFO and ``rx{l}`` enters the RX's input register. (A skid FIFO,
    :class:`ace.hw.common.skid_fifo.SkidFifo`, drives its output from a 2:1 multiplexer of
    two registers selected by a register.)

    Throughput: one beat per cycle per link in each direction; a DATA packet of ``n >= 2``
    payload beats takes ``n + 1`` link cycles with no idle cycle between packets (1-beat
    packets of a single channel: 3 cycles each; of two channels taking turns: 2).
    Latency: first header beat on ``tx{l}`` 4 cycles after ``ch{c}_send`` is taken (command
    register, then :data:`ace.hw.nic.tx.TX_COMMAND_STAGES`); a payload beat follows its
    header at line rate; a received packet's first beat reaches ``ch{c}_recv`` 9 cycles after
    its last beat arrived on ``rx{l}`` (:data:`ace.hw.nic.rx.RX_PACKET_LATENCY`: 4 check
    stages and the buffer's registered commit and block RAM read; then the skid FIFO; store
    and forward).
    """

    def __init__(self, config):
        if config.link_bytes < 8:
            raise ValueError(f"link_bytes: {config.link_bytes} is too small for the NIC; "
                             "allowed: at least 8 (the packet header is 64 bits)")
        self.config = config
        members = {"node_id": In(8), "error_clear": In(1),
                   "cmd_error": Out(1), "cmd_errors": Out(COUNTER_BITS)}
        for l in range(config.num_links):
            members[f"tx{l}"] = Out(AxiStreamSignature(config.link_bytes, keep=True))
            members[f"rx{l}"] = In(AxiStreamSignature(config.link_bytes, keep=True))
        for c in range(config.num_channels):
            members[f"ch{c}_send"] = In(stream.Signature(NicSendCmd(config)))
            members[f"ch{c}_send_data"] = In(stream.Signature(NicTxBeat(config)))
            members[f"ch{c}_recv"] = Out(stream.Signature(NicRxBeat(config)))
            members[f"ch{c}_recv_link"] = In(range(config.num_links))
        for l in range(config.num_links):
            for name in LINK_COUNTERS:
                members[f"link{l}_{name}"] = Out(COUNTER_BITS)
            members[f"link{l}_rx_error"] = Out(1)
            members[f"link{l}_rx_error_cause"] = Out(NicError)
        super().__init__(members)

    @property
    def max_send_bytes(self) -> int:
        """Longest packet a channel may send: a packet must fit the receiver's buffer."""
        return min(self.config.max_packet_bytes,
                   self.config.rx_channel_beats * self.config.link_bytes)

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        # the skid FIFOs' load enables copied per slice (replica.py)
        self._slice_bits = TX_SLICE_BITS if replicates(cfg, platform) else None
        txs, rxs = [], []
        gated_clock = uses_gated_clock(cfg, platform)
        for l in range(cfg.num_links):
            tx = NicLinkTx(cfg, gated_clock=gated_clock)
            rx = NicLinkRx(cfg, gated_clock=gated_clock)
            m.submodules[f"tx{l}"] = tx
            m.submodules[f"rx{l}"] = rx
            txs.append(tx)
            rxs.append(rx)
            wiring.connect(m, tx.link, wiring.flipped(getattr(self, f"tx{l}")))
            wiring.connect(m, wiring.flipped(getattr(self, f"rx{l}")), rx.link)
            m.d.comb += [
                tx.node_id.eq(self.node_id),
                tx.credit_in_valid.eq(rx.credit_valid),
                tx.credit_in_channel.eq(rx.credit_channel),
                tx.credit_in_count.eq(rx.credit_count),
                rx.error_clear.eq(self.error_clear),
                getattr(self, f"link{l}_rx_error").eq(rx.error),
                getattr(self, f"link{l}_rx_error_cause").eq(rx.error_cause),
            ]
            for c in range(cfg.num_channels):
                m.d.comb += [tx.freed[c].eq(rx.freed[c]), rx.credits[c].eq(tx.credits[c])]
            for name in LINK_COUNTERS:
                block = tx if name.startswith("tx_") else rx
                m.d.comb += getattr(self, f"link{l}_{name}").eq(getattr(block, name[3:]))

        self._skids = {}   # skid FIFOs by clock group: [(name, SkidFifo)]
        bad_cmds = [self._channel_send(m, c, txs) for c in range(cfg.num_channels)]
        for c in range(cfg.num_channels):
            self._channel_recv(m, c, rxs)
        self._add_skids(m, gated_clock)
        with m.If(Cat(*bad_cmds).any()):
            m.d.sync += self.cmd_errors.eq(self.cmd_errors + sum(bad_cmds))
        with m.If(self.error_clear):
            m.d.sync += self.cmd_error.eq(0)
        with m.Elif(Cat(*bad_cmds).any()):
            m.d.sync += self.cmd_error.eq(1)
        return m

    def _channel_send(self, m, c, txs):
        """Channel ``c``'s send side: the command register (checked on entry, offered to its
        link's TX, dropped if bad) and the payload skid FIFO shared by the links. Returns the
        signal that drops a bad command this cycle."""
        cfg = self.config
        send = getattr(self, f"ch{c}_send")
        head = Signal(NicSendCmd(cfg), name=f"ch{c}_head")
        head_valid = Signal(name=f"ch{c}_head_valid")
        head_bad = Signal(name=f"ch{c}_head_bad")
        m.d.comb += send.ready.eq(~head_valid)
        with m.If(~head_valid):
            m.d.sync += [
                head_valid.eq(send.valid),
                head.eq(send.payload),
                head_bad.eq((send.payload.length == 0) |
                            (send.payload.length > self.max_send_bytes) |
                            (send.payload.link >= cfg.num_links)),
            ]
        with m.Elif(head_bad | Cat(*(tx.cmd[c].ready for tx in txs)).any()):
            m.d.sync += head_valid.eq(0)

        # A channel's payload beats go to one link at a time: its command for link l waits
        # while another link has its previous packet granted or sending.
        for l, tx in enumerate(txs):
            elsewhere = Cat(*(other.busy[c] for other in txs if other is not tx)).any()
            m.d.comb += [
                tx.cmd[c].payload.eq(head),
                tx.cmd[c].valid.eq(head_valid & ~head_bad & (head.link == l) & ~elsewhere),
            ]

        # Each link's transmitter takes a valid of its own (a copy of ``o.valid``), so no one
        # valid net reaches both transmitters' framing.
        skid = SkidFifo(NicTxBeat(cfg), slice_bits=self._slice_bits,
                        valid_copies=len(txs) if self._slice_bits else 0)
        self._skids.setdefault("send", []).append((f"ch{c}_send_skid", skid))
        wiring.connect(m, wiring.flipped(getattr(self, f"ch{c}_send_data")), skid.i)
        valids = skid.valid_copies or [skid.o.valid] * len(txs)
        for tx, valid in zip(txs, valids):
            m.d.comb += [tx.data[c].payload.eq(skid.o.payload), tx.data[c].valid.eq(valid)]
        # (from each link's registered copy of its ``data[c].ready``: the same value)
        m.d.comb += skid.o.ready.eq(Cat(*(tx.data_ready_copies[c] for tx in txs)).any())
        bad = Signal(name=f"ch{c}_bad_cmd")
        m.d.comb += bad.eq(head_valid & head_bad)
        return bad

    def _channel_recv(self, m, c, rxs):
        """Channel ``c``'s receive side: a skid FIFO on each link's buffer, then the link mux.

        The skid buffers sit before the mux, not after it: a skid buffer takes beats ahead of
        demand, and a beat fetched from the link the channel reads now must stay with that link
        when the channel's next step reads another one (a register after the mux would hand the
        prefetched beat of the old link to the new step: RECV_MISMATCH)."""
        recv, recv_link = getattr(self, f"ch{c}_recv"), getattr(self, f"ch{c}_recv_link")
        outs = []
        for l, rx in enumerate(rxs):
            skid = SkidFifo(NicRxBeat(self.config), slice_bits=self._slice_bits)
            self._skids.setdefault(f"link{l}_recv", []).append((f"ch{c}_link{l}_recv_skid", skid))
            wiring.connect(m, rx.out[c], skid.i)
            outs.append(skid.o)
            m.d.comb += skid.o.ready.eq(recv.ready & (recv_link == l))
        m.d.comb += [
            recv.valid.eq(Array(o.valid for o in outs)[recv_link]),
            recv.payload.eq(Array(o.payload.as_value() for o in outs)[recv_link]),
        ]

    def _add_skids(self, m, gated_clock):
        """The skid FIFOs as submodules. In the gated-clock form, the channels' send FIFOs
        share one gated clock, and each link's receive FIFOs one per link
        (:func:`~ace.hw.common.clock_gate.gate_while_busy`), running while one of them holds
        a beat or is offered one. An empty FIFO with nothing offered would only reload its
        free entry with a payload that is not a beat: stopped, it shows an older one while
        ``o.valid`` is low, and passes the same beats."""
        for group, members in self._skids.items():
            if gated_clock:
                busy = Cat(*(bit for _, skid in members
                             for bit in (skid.i.valid, skid.o.valid))).any()
                rename = DomainRenamer({"sync": gate_while_busy(m, f"{group}_skids", busy)})
            for name, skid in members:
                m.submodules[name] = rename(skid) if gated_clock else skid
