"""NIC interface: per-link AXI-Stream TX/RX, packets with a checked header, per-channel credits.

::

          ch{c}_send / ch{c}_send_data           ch{c}_recv (link select: ch{c}_recv_link)
                        |  command check                                  ^
                        v  (BAD_COMMAND: dropped, counted)                 |  mux over links
    +-------------------+-------------------+          +-----------------+-----------------+
    | NicLinkTx (link 0): arbiter, credits  |--> tx0   | NicLinkRx (link 0): checks,        |<-- rx0
    |   <- credit_in, freed{c} ------------------------ |   per-channel NicRxBuffer          |
    +---------------------------------------+          +------------------------------------+
                          ... one TX/RX pair per link ...

Each link's TX and RX form a pair: CREDIT packets received on ``rx{l}`` add credits to
``tx{l}``, and beats freed from ``rx{l}``'s buffers are returned by ``tx{l}`` as CREDIT packets.
The link partner's ``tx{l}`` must therefore be wired to this NIC's ``rx{l}`` and vice versa.
See docs/nic.md for the packet format, the credit protocol and the error handling.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ace.layouts import AxiStreamSignature, NicError, NicRxBeat, NicSendCmd, NicTxBeat
from ace.hw.nic.rx import NicLinkRx
from ace.hw.nic.tx import COUNTER_BITS, NicLinkTx

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
        Link ``l``; ``rx{l}.tready`` is always 1.
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

    Throughput: one beat per cycle per link in each direction; a DATA packet of ``n`` payload
    beats takes ``n + 1`` link cycles, with no idle cycle between packets.
    Latency: first header beat one cycle after the command (combinational arbitration); a
    received packet reaches ``ch{c}_recv`` 2 cycles after its last beat (store and forward).
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
        nlinks, nch = cfg.num_links, cfg.num_channels

        txs, rxs = [], []
        for l in range(nlinks):
            tx = NicLinkTx(cfg)
            rx = NicLinkRx(cfg)
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
            for c in range(nch):
                m.d.comb += [
                    getattr(tx, f"freed{c}").eq(getattr(rx, f"freed{c}")),
                    getattr(rx, f"credits{c}").eq(getattr(tx, f"credits{c}")),
                ]
            for name in LINK_COUNTERS:
                block, field = (tx, name[3:]) if name.startswith("tx_") else (rx, name[3:])
                m.d.comb += getattr(self, f"link{l}_{name}").eq(getattr(block, field))

        bad_cmds = []
        for c in range(nch):
            send = getattr(self, f"ch{c}_send")
            send_data = getattr(self, f"ch{c}_send_data")
            recv = getattr(self, f"ch{c}_recv")
            recv_link = getattr(self, f"ch{c}_recv_link")

            # A channel's payload beats go to one link at a time: hold its next command back
            # while any link is still sending its previous packet's payload.
            busy = Signal(name=f"ch{c}_busy")
            m.d.comb += busy.eq(Cat(*(tx.active & (tx.channel == c) for tx in txs)).any())
            bad = Signal(name=f"ch{c}_bad_cmd")
            m.d.comb += bad.eq(send.valid & ((send.payload.length == 0) |
                                             (send.payload.length > self.max_send_bytes) |
                                             (send.payload.link >= nlinks)))
            bad_cmds.append(bad)
            taken = [bad]
            data_taken = []
            for l, tx in enumerate(txs):
                cmd = getattr(tx, f"cmd{c}")
                data = getattr(tx, f"data{c}")
                m.d.comb += [
                    cmd.payload.eq(send.payload),
                    cmd.valid.eq(send.valid & ~bad & ~busy & (send.payload.link == l)),
                    data.payload.eq(send_data.payload),
                    data.valid.eq(send_data.valid),
                ]
                taken.append(cmd.ready)
                data_taken.append(data.ready)
            m.d.comb += [
                send.ready.eq(Cat(*taken).any()),
                send_data.ready.eq(Cat(*data_taken).any()),
            ]

            outs = [getattr(rx, f"out{c}") for rx in rxs]
            m.d.comb += [
                recv.valid.eq(Array(o.valid for o in outs)[recv_link]),
                recv.payload.eq(Array(o.payload.as_value() for o in outs)[recv_link]),
            ]
            for l, out in enumerate(outs):
                m.d.comb += out.ready.eq(recv.ready & (recv_link == l))

        any_bad = Signal()
        m.d.comb += any_bad.eq(Cat(*bad_cmds).any())
        with m.If(any_bad):
            m.d.sync += self.cmd_errors.eq(self.cmd_errors + sum(bad_cmds))
        with m.If(self.error_clear):
            m.d.sync += self.cmd_error.eq(0)
        with m.Elif(any_bad):
            m.d.sync += self.cmd_error.eq(1)
        return m
