"""The ACE engine: the top that turns the blocks into a programmable collectives endpoint.

::

     s_axil --> AceCsr: control, status, buffer table, program load, counter snapshot
                  |  start / error_clear / imem writes        ^ status, counters
                  v                                           |
         +-- AceChannel 0 .. C-1 (sequencer + StepDatapath each, dependency scoreboard) --+
         |   sram_rd_a/b, sram_wr        mem_rd_a/b, mem_wr          nic_send/recv        |
         v                               v                           v                    |
     BankedSram (input + output      AxiInterconnect            NicInterface              |
     buffers, one word space,        (2C read + C write         (tx{l}/rx{l} links,       |
     2C read / C write ports)         masters) --> m_axi         per-channel credits)     |
                                                                                          |
     error register (first failing channel, or a link) -----------------------------------+

Channel ``c`` owns SRAM read ports ``2c`` (operand A) and ``2c + 1`` (operand B), write port
``c``, interconnect read masters ``2c``/``2c + 1`` and write master ``c``, and NIC channel ``c``.
The input buffer is SRAM words ``0 .. input_buffer_words - 1`` and the output buffer follows it.

Status: ``busy`` while any channel runs; ``done`` once every channel halted after a start
without an error; ``error`` latches the first failing channel (cause, pc) or, with cause
``LINK_ERROR``, the first link whose receiver flagged a bad packet (its number in the channel
field). ``error_clear`` clears it, aborts running steps and returns the channels to idle.
Counters (:func:`counter_names`) are 48 bits, count from the last ``counter_clear``, and are
read through the CSR snapshot. The memory byte counters lag the ports by one cycle (the
channels' counts are summed into a register first).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, ResetSignal, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ace.hw.axi.signatures import Axi4Signature, AxiLiteSignature
from ace.hw.axi.interconnect import AxiInterconnect
from ace.hw.channel.sequencer import AceChannel
from ace.hw.common.clock_gate import ClockGate, uses_gated_clock
from ace.hw.common.replica import replicates
from ace.hw.csr import AceCsr
from ace.regmap import CSR_ADDR_BITS, ErrorCause
from ace.layouts import AxiStreamSignature
from ace.hw.nic.interface import LINK_COUNTERS, NicInterface
from ace.hw.sram.banked import BankedSram

__all__ = ["AceEngine", "counter_names", "COUNTER_BITS"]

COUNTER_BITS = 48


def counter_names(config) -> list[str]:
    """The engine's performance counters, in CSR order."""
    names = ["cycles", "mem_read_bytes", "mem_write_bytes"]
    names += [f"link{l}_{name}" for l in range(config.num_links) for name in LINK_COUNTERS]
    names += [f"ch{c}_{name}" for c in range(config.num_channels)
              for name in ("busy_cycles", "alu_beats", "steps")]
    names += ["nic_cmd_errors"]
    return names


class AceEngine(wiring.Component):
    """One ACE endpoint (see the module docstring).

    Members
    -------
    s_axil : In(AxiLiteSignature(16, 4)), the CSRs (docs/csr.md)
    m_axi : Out(Axi4Signature), main memory
    tx{l} : Out(AxiStreamSignature(link_bytes, keep=True)), rx{l} : In(same), link ``l``
    irq : Out(1), done or error (when enabled in IRQ_ENABLE)
    """

    def __init__(self, config):
        self.config = config
        members = {
            "s_axil": In(AxiLiteSignature(CSR_ADDR_BITS, 4)),
            "m_axi": Out(Axi4Signature(config.mem_addr_bits, config.mem_bytes,
                                       config.mem_id_bits)),
            "irq": Out(1),
        }
        for l in range(config.num_links):
            members[f"tx{l}"] = Out(AxiStreamSignature(config.link_bytes, keep=True))
            members[f"rx{l}"] = In(AxiStreamSignature(config.link_bytes, keep=True))
        super().__init__(members)

    def _interconnect_gated(self, m, ic, channels, platform):
        """In the gated-clock form, ``ic``'s read half clocked only while a channel's DMA
        reader is (and one cycle after), its write half only while a DMA writer is: its only
        masters are the DMA halves, and memory answers only their outstanding bursts, so in
        any other cycle a half holds; the cycle after lets its registers computed a cycle
        ahead (a master's room for a burst) settle. The clock-enable form leaves it ungated."""
        if not uses_gated_clock(self.config, platform):
            return ic
        for half in ("read", "write"):
            active = Signal(name=f"mem_{half}_active")
            after = Signal(init=1, name=f"mem_{half}_active_after")
            m.d.comb += active.eq(Cat(getattr(ch, f"mem_{half}_active")
                                      for ch in channels).any())
            m.d.sync += after.eq(active)
            gate = ClockGate(m, f"interconnect_{half}_clk", active | after | ResetSignal(),
                             gated_clock=True)
            ic = gate(ic, domain=half)
        return ic

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        C, L = cfg.num_channels, cfg.num_links
        names = counter_names(cfg)

        m.submodules.csr = csr = AceCsr(cfg, names)
        m.submodules.nic = nic = NicInterface(cfg)
        m.submodules.sram = sram = BankedSram(
            cfg.input_buffer_words + cfg.output_buffer_words, cfg.link_bytes, cfg.sram_banks,
            read_ports=2 * C, write_ports=C, replicate=replicates(cfg, platform))
        ic = AxiInterconnect(
            cfg.mem_addr_bits, cfg.mem_bytes, cfg.mem_id_bits, read_masters=2 * C,
            write_masters=C, max_burst_beats=cfg.max_burst_beats,
            replicate=replicates(cfg, platform), split_domains=uses_gated_clock(cfg, platform))
        channels = [AceChannel(cfg, c) for c in range(C)]
        m.submodules.interconnect = self._interconnect_gated(m, ic, channels, platform)

        wiring.connect(m, wiring.flipped(self.s_axil), csr.s_axil)
        wiring.connect(m, ic.m_axi, wiring.flipped(self.m_axi))
        m.d.comb += [self.irq.eq(csr.irq), nic.node_id.eq(csr.node_id),
                     nic.error_clear.eq(csr.error_clear)]
        for l in range(L):
            wiring.connect(m, getattr(nic, f"tx{l}"),
                           wiring.flipped(getattr(self, f"tx{l}")))
            wiring.connect(m, wiring.flipped(getattr(self, f"rx{l}")), getattr(nic, f"rx{l}"))

        bases = (csr.buf_base_i, csr.buf_base_o, csr.buf_base_s)
        limits = (csr.buf_limit_i, csr.buf_limit_o, csr.buf_limit_s)
        for c, ch in enumerate(channels):
            m.submodules[f"ch{c}"] = ch
            wiring.connect(m, ch.sram_rd_a, getattr(sram, f"rd{2 * c}"))
            wiring.connect(m, ch.sram_rd_b, getattr(sram, f"rd{2 * c + 1}"))
            wiring.connect(m, ch.sram_wr, getattr(sram, f"wr{c}"))
            wiring.connect(m, ch.mem_rd_a, getattr(ic, f"rd{2 * c}"))
            wiring.connect(m, ch.mem_rd_b, getattr(ic, f"rd{2 * c + 1}"))
            wiring.connect(m, ch.mem_wr, getattr(ic, f"wr{c}"))
            wiring.connect(m, ch.nic_send, getattr(nic, f"ch{c}_send"))
            wiring.connect(m, ch.nic_send_data, getattr(nic, f"ch{c}_send_data"))
            wiring.connect(m, getattr(nic, f"ch{c}_recv"), ch.nic_recv)
            m.d.comb += [
                getattr(nic, f"ch{c}_recv_link").eq(ch.nic_recv_link),
                ch.imem_we.eq(csr.imem_we & (csr.imem_channel == c)),
                ch.imem_addr.eq(csr.imem_addr),
                ch.imem_data.eq(csr.imem_data),
                ch.start.eq(csr.start),
                ch.enable.eq(csr.channel_enable[c]),
                ch.error_clear.eq(csr.error_clear),
                ch.placement.eq(csr.placement),
                ch.stage_base.eq(csr.stage_base),
                ch.timeout.eq(csr.timeout),
                getattr(csr, f"steps_done{c}").eq(ch.steps_done),
            ]
            for b in range(3):
                m.d.comb += [ch.buf_base[b].eq(bases[b]), ch.buf_limit[b].eq(limits[b])]
            for k, other in enumerate(channels):
                m.d.comb += [ch.dep_steps[k].eq(other.steps_done),
                             ch.dep_halted[k].eq(other.halted)]
        activity = Signal()
        m.d.comb += activity.eq(Cat(ch.progress for ch in channels).any())
        for ch in channels:
            m.d.comb += ch.activity.eq(activity)

        # -- status and the first error --------------------------------------------------------
        busy = Signal()
        done = Signal()
        err = Signal()
        err_cause = Signal(ErrorCause)
        err_channel = Signal(4)
        err_pc = Signal(16)
        m.d.comb += busy.eq(Cat(ch.running for ch in channels).any())
        with m.If(csr.start):
            m.d.sync += done.eq(0)
        with m.Elif(~busy & Cat(ch.finished for ch in channels).all()):
            m.d.sync += done.eq(1)
        with m.If(csr.error_clear):
            m.d.sync += err.eq(0)
        with m.Elif(~err):
            # Lowest failing channel first, then the lowest link with a receive error.
            for l in reversed(range(L)):
                with m.If(getattr(nic, f"link{l}_rx_error")):
                    m.d.sync += [err.eq(1), err_cause.eq(ErrorCause.LINK_ERROR),
                                 err_channel.eq(l), err_pc.eq(0)]
            for c in reversed(range(C)):
                with m.If(channels[c].error):
                    m.d.sync += [err.eq(1), err_cause.eq(channels[c].error_cause),
                                 err_channel.eq(c), err_pc.eq(channels[c].error_pc)]
        m.d.comb += [
            csr.busy.eq(busy), csr.done.eq(done & ~err), csr.error.eq(err),
            csr.error_cause.eq(err_cause), csr.error_channel.eq(err_channel),
            csr.error_pc.eq(err_pc),
        ]

        # -- counters --------------------------------------------------------------------------
        # Engine-owned counters reset on counter_clear; the NIC's free-running counters are
        # reported relative to their value at the last clear. Each engine counter adds a
        # registered step, the cycle after its event, so no handshake, channel state or sum of
        # byte counts reaches a 48-bit carry chain in its own cycle; a clear loads the pending
        # step, so an event is counted before or after a clear, never lost.
        increments = {"cycles": busy,
                      "mem_read_bytes": sum(ch.mem_read_bytes for ch in channels),
                      "mem_write_bytes": sum(ch.mem_write_bytes for ch in channels)}
        for c, ch in enumerate(channels):
            increments[f"ch{c}_busy_cycles"] = ch.running
            increments[f"ch{c}_alu_beats"] = ch.alu_beat
            increments[f"ch{c}_steps"] = ch.step_done
        for name in names:
            port = getattr(csr, name)
            if name in increments:
                step = Signal.like(increments[name], name=f"step_{name}")
                count = Signal(COUNTER_BITS, name=f"count_{name}")
                m.d.sync += step.eq(increments[name])
                with m.If(csr.counter_clear):
                    m.d.sync += count.eq(step)
                with m.Else():
                    m.d.sync += count.eq(count + step)
                m.d.comb += port.eq(count)
            else:
                source = getattr(nic, name.replace("nic_", ""))
                base = Signal(COUNTER_BITS, name=f"base_{name}")
                with m.If(csr.counter_clear):
                    m.d.sync += base.eq(source)
                m.d.comb += port.eq(source - base)
        return m
