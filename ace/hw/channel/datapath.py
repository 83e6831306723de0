"""The datapath of one sequencer channel: every data step is one pass of a single stream shape.

::

    operand A:  NIC receive (rr*, r, rcs) | SRAM slice reader | memory reader --> skid --+
    operand B:  SRAM slice reader | memory reader (rr* local slice, re destination) --> skid --+
                                                                                           v
      join (both operands, beat count) --> skid --> AluArray (op, or COPY) --> skid --> fork
                                                                                           |
    result:     skid --> SRAM slice writer | memory writer (DmaWriter) <-------------------+
                skid --> NIC send (packetizer: commands of <= packet_bytes, then beats) <--+

A step (:class:`StepPlan`) selects each operand's source, whether the result is written and
where, and whether it is sent. ``load`` is A = memory, written to SRAM; ``store`` is A = SRAM,
written to memory; ``s`` is A = SRAM, sent; ``rrs`` is A = NIC, B = SRAM, reduced and sent
without touching SRAM (cut-through). The baselines (buffers in main memory, ``staged`` and
``p2p``) swap the SRAM readers and writer for the memory ones, so every mode runs the same steps
on the same hardware; their receives run as micro-steps (:mod:`ace.hw.channel.microsteps`),
each one plan here (a p2p ``rrcs`` is one pass from two memory operands to memory and the link).

Packets: the message of a sending step is cut into packets of :attr:`packet_bytes` (the last
one shorter); packet ``k`` of a message carries ``tag = k``. A forwarding step (``rcs``,
``rrcs``, ``rrs``) offers packet ``k`` to the NIC only once the received packet ``k`` is in the
receive buffer, so that a link is never held by a packet whose data is still on another link
(the deadlock of issue 18). A receiving step checks every beat
it takes: ``src`` is the step's peer, each packet has the expected length and tag, ``first`` and
``last`` fall where the lengths say. A mismatch is reported with ``done`` (``recv_error``), the
beats are still consumed, so the step ends.

Throughput: one beat per cycle through the ALU when every source and sink keeps up. Latency of
a step: about 3 cycles (command issue, SRAM read latency) + 1 (operand slices) + 1 (join slice)
+ the ALU's :attr:`AluArray.latency` + 1 (result slice) + 1 (sink slice) + 1 for the sink, plus
the memory latency when a memory reader is the source. Every stream between the sources, the
join, the ALU, the fork and the sinks passes a register slice (:class:`SkidBuffer`, control
copied per 32-bit lane): no ``ready`` crosses from one source or sink to another, or across the
ALU. ``abort`` replaces NIC operand beats by zeros so a step stuck on a receive that never comes
still finishes (with undefined results).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, ResetSignal, Signal, signed, unsigned
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.wiring import In, Out

from ace.hw.alu.array import AluArray
from ace.hw.axi.signatures import Axi4Signature
from ace.hw.common.carry_save import CarrySaveSum
from ace.hw.common.clock_gate import ClockGate, uses_gated_clock
from ace.hw.common.replica import replicas, replicates
from ace.hw.common.skid_buffer import SkidBuffer
from ace.hw.common.skid_fifo import SkidFifo
from ace.hw.dma.reader import DmaReader
from ace.hw.dma.writer import DmaWriter
from ace.layouts import (DMA_LENGTH_BITS, NIC_NODE_BITS, NIC_TAG_BITS, DmaStatus, Dtype,
                      NicRxBeat, NicSendCmd, NicTxBeat, ReduceOp, sram_read_signature,
                      sram_write_signature)
from ace.hw.sram.reader import SramSliceReader
from ace.hw.sram.writer import SramSliceWriter

__all__ = ["ASource", "StepPlan", "StepDatapath", "datapath_ports"]


def _above(value, limit: int):
    """``value > limit`` for a constant ``limit``: an OR of the bits above ``limit``'s width
    and a compare of the bits below it (log depth in the OR); a plain ``>`` goes through a
    subtractor's carry network (two levels more on a 24-bit count)."""
    n = limit.bit_length()
    return value > limit if len(value) <= n else value[n:].any() | (value[:n] > limit)


def _at_most(value, limit: int):
    """``min(value, limit)`` for a constant ``limit`` (the compare as in :func:`_above`)."""
    return Mux(_above(value, limit), limit, value)


def _one_unit(nbytes, unit_log2: int):
    """``ceil(nbytes / 2**unit_log2) == 1``, without a carry chain: ``0 < nbytes <= unit``."""
    high = nbytes[unit_log2:]
    return nbytes.any() & (~high.any() | ((nbytes[:unit_log2] == 0) & (high == 1)))


class ASource(enum.Enum, shape=2):
    """Where operand A comes from."""
    NIC = 0
    SRAM = 1
    MEM = 2


class StepPlan(data.StructLayout):
    """One data step for :class:`StepDatapath`. Addresses are SRAM word addresses (unified
    input+output space) or main-memory byte addresses, as the ``*_mem`` bits say."""

    def __init__(self, config):
        addr_bits = max(config.mem_addr_bits, config.sram_addr_bits)
        super().__init__({
            "a_src": ASource,
            "a_addr": unsigned(addr_bits),
            "b_use": unsigned(1),
            "b_mem": unsigned(1),
            "b_addr": unsigned(addr_bits),
            "w_use": unsigned(1),
            "w_mem": unsigned(1),
            "w_addr": unsigned(addr_bits),
            "send": unsigned(1),
            "send_link": unsigned(max(1, (config.num_links - 1).bit_length())),
            "recv_link": unsigned(max(1, (config.num_links - 1).bit_length())),
            "recv_peer": unsigned(NIC_NODE_BITS),
            "op": ReduceOp,
            "dtype": Dtype,
            "bytes": unsigned(DMA_LENGTH_BITS),
        })


def datapath_ports(config) -> dict:
    """The datapath's ports to the SRAM, the memory interconnect and the NIC, and its memory
    byte counts; :class:`~ace.hw.channel.sequencer.AceChannel` forwards the same set."""
    words, B = config.sram_words, config.link_bytes
    axi = dict(addr_bits=config.mem_addr_bits, data_bytes=config.mem_bytes,
               id_bits=config.mem_id_bits)
    return {
        "sram_rd_a": Out(sram_read_signature(words, B)),
        "sram_rd_b": Out(sram_read_signature(words, B)),
        "sram_wr": Out(sram_write_signature(words, B)),
        "mem_rd_a": Out(Axi4Signature(**axi, write=False)),
        "mem_rd_b": Out(Axi4Signature(**axi, write=False)),
        "mem_wr": Out(Axi4Signature(**axi, read=False)),
        "nic_send": Out(stream.Signature(NicSendCmd(config))),
        "nic_send_data": Out(stream.Signature(NicTxBeat(config))),
        "nic_recv": In(stream.Signature(NicRxBeat(config))),
        "nic_recv_link": Out(range(config.num_links)),
        "mem_read_bytes": Out(range(2 * config.mem_bytes + 1)),
        "mem_write_bytes": Out(range(config.mem_bytes + 1)),
        "mem_read_active": Out(1),
        "mem_write_active": Out(1),
    }


class StepDatapath(wiring.Component):
    """Executes one :class:`StepPlan` at a time (see the module docstring).

    Members
    -------
    plan : In(stream of :class:`StepPlan`), taken when the previous step has finished
    done : Out(1), one cycle when the step's last result is written and sent and every memory
        completion is in; ``mem_error``, ``recv_error`` are valid with it
    abort : In(1), NIC operand beats become zeros from the next cycle on (see the module
        docstring; registered here, so the sequencer's state reaches no datapath logic)
    sram_rd_a, sram_rd_b : Out(sram read port); sram_wr : Out(sram write port)
    mem_rd_a, mem_rd_b : Out(AXI4 read half); mem_wr : Out(AXI4 write half)
    nic_send, nic_send_data, nic_recv, nic_recv_link : the NIC channel ports
    mem_read_bytes, mem_write_bytes : Out, bytes moved on the memory ports this cycle
    mem_read_active, mem_write_active : Out(1), high in every cycle where a DMA reader's
        (writer's) clock is enabled (the OR of their enables, :meth:`_gated`; in the
        clock-enable form, where the halves run ungated, where it would be): no memory read
        (write) port moves in another cycle
    alu_beat : Out(1), a beat entered the ALU this cycle (progress)
    quiet : Out(1), no register of the datapath can change next cycle unless a plan is offered
        or ``abort`` is high: no step active, no ``done`` pulse, not aborting, every DMA half's
        clock stopped (every stream inside is empty when a step ends). The channel's
        gated-clock form stops the datapath's clock while it is quiet.
    """

    def __init__(self, config):
        self.config = config
        super().__init__({
            "plan": In(stream.Signature(StepPlan(config))),
            "done": Out(1),
            "mem_error": Out(1),
            "recv_error": Out(1),
            "abort": In(1),
            **datapath_ports(config),
            "alu_beat": Out(1),
            "quiet": Out(1),
        })

    @property
    def packet_bytes(self) -> int:
        return self.config.packet_bytes

    @staticmethod
    def _gated(m, name, dma, coming, gated_clock):
        """``dma`` clocked (:class:`ClockGate`) only in the cycles where it can act: a command
        outstanding (accepted, its completion not yet taken: every burst, beat and word of it,
        and every R or B response the memory returns for it, falls in these cycles), a command
        offered, or in reset. The enable is a register, so the clock enables of the half's
        registers hang off a flip-flop (and the reset), not off the datapath's handshakes: each
        term is taken one cycle ahead, as a superset. A command offered now is offered or
        outstanding next cycle, and ``coming`` (from the caller) is high the cycle before any
        other input can arrive: a new command (a plan is taken) or a stream beat. So the half
        moves exactly as ungated and stops a cycle after its last work. An R or B response
        with no command outstanding, which AXI does not allow, finds the half stopped.
        Only the gated-clock form gates: in the clock-enable form (every FPGA build) the
        enable would be one net to each of the half's thousand-odd flip-flops, across the
        channel (the worst routed path, 11.6 ns at 89 % wire), for no change of any cycle, so
        the half runs ungated there. Returns the (gated) half and its enable's register, which
        also tells when the half's memory ports can move (``mem_*_active``)."""
        outstanding = Signal(8, name=f"{name}_outstanding")
        accepted = dma.cmd.valid & dma.cmd.ready
        completed = dma.cpl.valid & dma.cpl.ready
        with m.If(accepted & ~completed):
            m.d.sync += outstanding.eq(outstanding + 1)
        with m.Elif(completed & ~accepted):
            m.d.sync += outstanding.eq(outstanding - 1)
        will_act = Signal(init=1, name=f"{name}_will_act")
        m.d.sync += will_act.eq(outstanding.any() | dma.cmd.valid | coming)
        if not gated_clock:
            return dma, will_act
        enable = Signal(name=f"{name}_clock_enable")
        m.d.comb += enable.eq(will_act | ResetSignal())
        return ClockGate(m, f"{name}_clk", enable, gated_clock=True)(dma), will_act

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        B = cfg.link_bytes
        lb = (B - 1).bit_length()
        P = self.packet_bytes
        P_log2 = (P - 1).bit_length()     # P is a power of two (AceConfig.packet_bytes)
        words = cfg.sram_words

        m.submodules.sram_a = sram_a = SramSliceReader(words, B)
        m.submodules.sram_b = sram_b = SramSliceReader(words, B)
        m.submodules.sram_w = sram_w = SramSliceWriter(words, B)
        mem_a, mem_b, mem_w = DmaReader(cfg), DmaReader(cfg), DmaWriter(cfg)
        copies = replicates(cfg, platform)     # control copied per 32-bit lane (replica.py)
        lanes = max(1, cfg.link_bytes // 4) if copies else 1
        slice_bits = 32 if copies else None
        # The result slice and the two sink slices face readies from afar (the fork; the
        # SRAM, memory writer and NIC): SkidFifo, whose payload load enables are registers (a
        # copy per 32-bit lane), so a far ready reaches only their pointers and counts.
        m.submodules.write_out = write_out = SkidFifo(
            data.StructLayout({"data": 8 * B, "last": 1}), slice_bits=slice_bits)
        gated_clock = uses_gated_clock(cfg, platform)
        load = Signal()          # a plan is taken this cycle
        plan = Signal(StepPlan(cfg))
        # The write slice's output can be valid next cycle only if it holds or takes a beat now,
        # and it goes to the memory writer only under a plan that writes memory (the plan
        # changes only with ``load``).
        beat_coming = (write_out.i.valid | write_out.o.valid) & plan.w_mem
        will_act = {}
        for name, dma, coming in (("mem_a", mem_a, load), ("mem_b", mem_b, load),
                                  ("mem_w", mem_w, load | beat_coming)):
            m.submodules[name], will_act[name] = self._gated(m, name, dma, coming, gated_clock)
        m.d.comb += [
            self.mem_read_active.eq(will_act["mem_a"] | will_act["mem_b"] | ResetSignal()),
            self.mem_write_active.eq(will_act["mem_w"] | ResetSignal()),
        ]
        m.submodules.alu = alu = AluArray(cfg, ready_copies=lanes)
        # Register slices on both sides of the ALU: the operand join (FIFO reads, operand mux,
        # count compare) and the result fork (the sinks' readies) stay out of the ALU's cycle.
        # One copy of their control per 32-bit lane, so a ready reaches 64-odd flip-flops, not
        # the whole word (SkidBuffer's slices; SkidFifo's replicated load enables).
        m.submodules.send_out = send_out = SkidFifo(NicTxBeat(cfg), slice_bits=slice_bits)
        m.submodules.operand_a = operand_a = SkidBuffer(8 * B, slices=lanes, ready_per_slice=True)
        m.submodules.operand_b = operand_b = SkidBuffer(8 * B, slices=lanes, ready_per_slice=True)
        m.submodules.operands = operands = SkidBuffer(alu.i.signature.members["payload"].shape,
                                                      slices=lanes, ready_per_slice=True)
        m.submodules.result = result = SkidFifo(alu.o.signature.members["payload"].shape,
                                                slice_bits=slice_bits)
        wiring.connect(m, operands.o, alu.i)
        # each operand slice's ready from an ALU ready register of its own (the same value)
        m.d.comb += [copy.eq(ready) for copy, ready in
                     zip(operands.out_ready_copies, alu.ready_copies)]
        wiring.connect(m, alu.o, result.i)
        wiring.connect(m, sram_a.port, wiring.flipped(self.sram_rd_a))
        wiring.connect(m, sram_b.port, wiring.flipped(self.sram_rd_b))
        wiring.connect(m, sram_w.port, wiring.flipped(self.sram_wr))
        wiring.connect(m, mem_a.axi, wiring.flipped(self.mem_rd_a))
        wiring.connect(m, mem_b.axi, wiring.flipped(self.mem_rd_b))
        wiring.connect(m, mem_w.axi, wiring.flipped(self.mem_wr))
        m.d.comb += [
            self.mem_read_bytes.eq(mem_a.bytes + mem_b.bytes),
            self.mem_write_bytes.eq(mem_w.bytes),
        ]

        # -- the step's plan and per-unit progress ----------------------------------------------
        # ``active`` and ``join_more`` are replicated (replica.py): copy ``k`` makes operand
        # slice ``k``'s ready and one group of the plan's load enables, so no copy's net reaches
        # the whole datapath. Their next values are ``active_next``, ``join_more_next``.
        active_next = Signal()
        actives = replicas(m, platform, active_next, lanes + 1, name="active", distinct=copies)
        active = actives[lanes]
        nwords = Signal(DMA_LENGTH_BITS)
        last_mask = Signal(B)
        tail = self.plan.payload.bytes[:lb]
        m.d.comb += [
            nwords.eq((self.plan.payload.bytes + (B - 1)) >> lb),
            last_mask.eq(Mux(tail == 0, (1 << B) - 1, (1 << tail) - 1)),
        ]
        pend_a = Signal()        # operand A command not yet taken (SRAM or memory reader)
        pend_b = Signal()
        pend_w = Signal()
        wait_a = Signal()        # memory completion not yet in
        wait_b = Signal()
        wait_w = Signal()
        join_left = Signal(DMA_LENGTH_BITS)
        join_more_next = Signal()
        join_mores = replicas(m, platform, join_more_next, lanes, name="join_more",
                              distinct=copies)
        join_more = join_mores[0]   # join_left != 0, registered
        join_last = Signal()     # join_left == 1, registered
        # The packets still to offer, counted: every packet but a message's last carries P bytes,
        # so the next length is a mux of two registers, not a compare of the bytes left.
        send_pkts_left = Signal(DMA_LENGTH_BITS + 1 - P_log2)
        send_more = Signal()     # send_pkts_left != 0, registered
        send_one = Signal()      # send_pkts_left == 1, registered
        send_last_len = Signal(range(P + 1))     # bytes of the message's last packet
        send_data_left = Signal(DMA_LENGTH_BITS)
        send_pkt = Signal(NIC_TAG_BITS)
        recv_left = Signal(DMA_LENGTH_BITS)      # bytes of the message still to receive
        recv_pkt = Signal(NIC_TAG_BITS)
        w_mask = Signal(B)
        step_words = Signal(DMA_LENGTH_BITS)

        p = self.plan.payload
        # A new plan's counts are ceil(bytes / unit); whether one is 0 or 1 is tested on the
        # bytes without their carry chains (the flags load with the counts).
        any_bytes = p.bytes.any()
        one_word = _one_unit(p.bytes, lb)
        packets = Signal.like(send_pkts_left)
        last_len = p.bytes[:P_log2]
        # ``load`` once per copy of ``active``: the plan register, the counters and the rest
        # each take their load enable from a copy of their own.
        loads = [Signal(name=f"load_{k}") for k in range(len(actives))]
        m.d.comb += [self.plan.ready.eq(~active), load.eq(loads[lanes]),
                     packets.eq((p.bytes + (P - 1)) >> P_log2)]
        m.d.comb += [load_k.eq(self.plan.valid & ~active_k)
                     for load_k, active_k in zip(loads, actives)]
        # a plan's bits, then its counters, by halves of the copies (the same copy when
        # there are none)
        with m.If(loads[0]):
            m.d.sync += plan.eq(p)
        with m.If(loads[len(loads) // 2]):
            m.d.sync += [
                pend_a.eq(p.a_src != ASource.NIC),
                wait_a.eq(p.a_src == ASource.MEM),
                pend_b.eq(p.b_use),
                wait_b.eq(p.b_use & p.b_mem),
                pend_w.eq(p.w_use),
                wait_w.eq(p.w_use & p.w_mem),
                join_left.eq(nwords),
                join_last.eq(one_word),
                send_pkts_left.eq(Mux(p.send, packets, 0)),
                send_more.eq(p.send & any_bytes),
                send_one.eq(p.send & _one_unit(p.bytes, P_log2)),
                send_last_len.eq(Mux(last_len == 0, P, last_len)),
                send_data_left.eq(Mux(p.send, nwords, 0)),
                send_pkt.eq(0),
                recv_left.eq(Mux(p.a_src == ASource.NIC, p.bytes, 0)),
                recv_pkt.eq(0),
                w_mask.eq(last_mask),
                step_words.eq(nwords),
                self.mem_error.eq(0),
                self.recv_error.eq(0),
            ]

        # -- unit commands -------------------------------------------------------------------
        # Operand A's source, one-hot in registers loaded with the plan (not a decode of it).
        a_mem = Signal()
        a_sram = Signal()
        a_nic = Signal()
        # The link the NIC's receive mux selects, in a register of its own (the plan's value):
        # it drives only that mux, so it sits by the NIC, and the packetizer's path through the
        # mux (``data_here``) crosses between the two blocks once, not there and back.
        recv_link = Signal.like(plan.recv_link, name="recv_link")
        with m.If(loads[1 % len(loads)]):
            m.d.sync += [a_mem.eq(p.a_src == ASource.MEM), a_sram.eq(p.a_src == ASource.SRAM),
                         a_nic.eq(p.a_src == ASource.NIC), recv_link.eq(p.recv_link)]
        # ``abort`` registered, in copies: one per 32-bit lane of operand A's data (the zeros
        # an abort feeds the step) and one for the control (the packetizer's ``data_here``, the
        # NIC's ready, ``quiet``), so the control's copy is not pulled to the wide data mux.
        abortings = replicas(m, platform, self.abort, lanes + 1, name="aborting",
                             distinct=copies)
        aborting = abortings[lanes]
        for reader, is_mem, pend, addr in (
                (sram_a, 0, pend_a & a_sram, plan.a_addr), (mem_a, 1, pend_a & a_mem, plan.a_addr),
                (sram_b, 0, pend_b & ~plan.b_mem, plan.b_addr),
                (mem_b, 1, pend_b & plan.b_mem, plan.b_addr)):
            if is_mem:          # memory to the reader's stream (id 0)
                m.d.comb += [reader.cmd.payload.stream.eq(1),
                             reader.cmd.payload.length.eq(plan.bytes),
                             reader.cmd.payload.mem_addr.eq(addr[:cfg.mem_addr_bits])]
            else:
                m.d.comb += [reader.cmd.payload.addr.eq(addr[:cfg.sram_addr_bits]),
                             reader.cmd.payload.words.eq(step_words)]
            m.d.comb += reader.cmd.valid.eq(pend)
        with m.If((sram_a.cmd.valid & sram_a.cmd.ready) | (mem_a.cmd.valid & mem_a.cmd.ready)):
            m.d.sync += pend_a.eq(0)
        with m.If((sram_b.cmd.valid & sram_b.cmd.ready) | (mem_b.cmd.valid & mem_b.cmd.ready)):
            m.d.sync += pend_b.eq(0)

        m.d.comb += [
            sram_w.cmd.payload.addr.eq(plan.w_addr[:cfg.sram_addr_bits]),
            sram_w.cmd.payload.words.eq(step_words),
            sram_w.cmd.payload.last_mask.eq(w_mask),
            sram_w.cmd.valid.eq(pend_w & ~plan.w_mem),
            mem_w.cmd.payload.stream.eq(1),
            mem_w.cmd.payload.length.eq(plan.bytes),
            mem_w.cmd.payload.mem_addr.eq(plan.w_addr[:cfg.mem_addr_bits]),
            mem_w.cmd.valid.eq(pend_w & plan.w_mem),
        ]
        with m.If((sram_w.cmd.valid & sram_w.cmd.ready) | (mem_w.cmd.valid & mem_w.cmd.ready)):
            m.d.sync += pend_w.eq(0)

        # Memory completions: always taken; a failed one marks the step.
        for dma, wait in ((mem_a, wait_a), (mem_b, wait_b), (mem_w, wait_w)):
            m.d.comb += dma.cpl.ready.eq(1)
            with m.If(dma.cpl.valid):
                m.d.sync += wait.eq(0)
                with m.If(dma.cpl.payload.status != DmaStatus.OKAY):
                    m.d.sync += self.mem_error.eq(1)

        # -- operands and the join -------------------------------------------------------------
        a_valid = Signal()
        a_data = Signal(8 * B)
        b_valid = Signal()
        b_data = Signal(8 * B)
        with m.If(a_nic):
            recv_data = self.nic_recv.payload.data
            m.d.comb += a_valid.eq(aborting | self.nic_recv.valid)
            for k in range(lanes):
                lo, hi = len(a_data) * k // lanes, len(a_data) * (k + 1) // lanes
                m.d.comb += a_data[lo:hi].eq(Mux(abortings[k], 0, recv_data[lo:hi]))
        with m.Elif(a_sram):
            m.d.comb += [a_valid.eq(sram_a.o.valid), a_data.eq(sram_a.o.payload.data)]
        with m.Else():
            m.d.comb += [a_valid.eq(mem_a.rd_stream.tvalid), a_data.eq(mem_a.rd_stream.tdata)]
        with m.If(plan.b_mem):           # (B's valid only counts with ``plan.b_use``, below)
            m.d.comb += [b_valid.eq(mem_b.rd_stream.tvalid), b_data.eq(mem_b.rd_stream.tdata)]
        with m.Else():
            m.d.comb += [b_valid.eq(sram_b.o.valid), b_data.eq(sram_b.o.payload.data)]

        # Each operand enters a register slice of its own before the join, so a source's ready
        # is a flip-flop of its slice (and the step's flags) and never depends on the other
        # operand's valid: the sources sit across the channel from each other (and the NIC's
        # receive skid across the die), and a join made of their valids would reach both sides'
        # load enables in one cycle. Operand A's entries are counted (``a_in_left``): its
        # sources include the link, which holds the next step's beats, and ``abort``'s zeros;
        # B's sources (SRAM and memory readers) deliver exactly the step's words.
        a_in_left = Signal(DMA_LENGTH_BITS)
        a_in_more = Signal()     # a_in_left != 0, registered
        a_in_last = Signal()     # a_in_left == 1, registered
        recv_tail = Signal(range(B + 1))         # bytes of the message's last beat
        with m.If(loads[-2]):
            m.d.sync += [a_in_left.eq(nwords), a_in_more.eq(any_bytes),
                         a_in_last.eq(one_word), recv_tail.eq(Mux(tail == 0, B, tail))]
        a_in = operand_a.i

        def copy(copies, k):
            """Copy ``k`` of a replicated register (the same value as every other copy)."""
            return copies[k % len(copies)]

        # Each source's ready from copies of its own (of ``active`` and of the operand slice's
        # ready): the same values, but no one net reaches every source and the packetizer.
        a_enters = [copy(actives, k) & a_in_more & copy(operand_a.ready_copies, k)
                    for k in (1, 2, 3)]
        b_enters = [copy(actives, k) & copy(operand_b.ready_copies, k) & plan.b_use
                    for k in (1, 2)]
        m.d.comb += [
            a_in.valid.eq(active & a_in_more & a_valid),
            a_in.payload.eq(a_data),
            operand_b.i.valid.eq(active & plan.b_use & b_valid),
            operand_b.i.payload.eq(b_data),
            self.nic_recv.ready.eq(a_enters[0] & a_nic & ~aborting),
            sram_a.o.ready.eq(a_enters[1] & a_sram),
            mem_a.rd_stream.tready.eq(a_enters[2] & a_mem),
            sram_b.o.ready.eq(b_enters[0] & ~plan.b_mem),
            mem_b.rd_stream.tready.eq(b_enters[1] & plan.b_mem),
            self.nic_recv_link.eq(recv_link),
        ]
        with m.If(a_in.valid & a_in.ready):
            m.d.sync += [a_in_left.eq(a_in_left - 1), a_in_more.eq(~a_in_last),
                         a_in_last.eq(a_in_left == 2)]

        # The join, from the two slices' registers: both operands (B only when the step has one)
        # and the beats left; a slice's ready is the other's valid and the ALU side's ready.
        fire = Signal()
        join = operands.i
        a_here = operand_a.o.valid
        b_here = ~plan.b_use | operand_b.o.valid
        # Each operand slice's ready from its own copies (of ``active``, ``join_more``, the join
        # slice's ready and the other operand's valid): the same value as the port's.
        for k in range(lanes):
            joined_k = actives[k] & join_mores[k] & copy(operands.ready_copies, k)
            a_here_k = copy(operand_a.valid_copies, k)
            b_here_k = ~plan.b_use | copy(operand_b.valid_copies, k)
            for skid, ready in ((operand_a, joined_k & b_here_k),
                                (operand_b, joined_k & plan.b_use & a_here_k)):
                if skid.out_ready_copies:
                    m.d.comb += skid.out_ready_copies[k].eq(ready)
        joined = active & join_more & join.ready
        m.d.comb += [
            join.valid.eq(active & join_more & a_here & b_here),
            join.payload.a.eq(operand_a.o.payload),
            join.payload.b.eq(operand_b.o.payload),
            join.payload.op.eq(plan.op),
            join.payload.dtype.eq(plan.dtype),
            join.payload.last.eq(join_last),
            fire.eq(join.valid & join.ready),
            operand_a.o.ready.eq(joined & b_here),
            operand_b.o.ready.eq(joined & plan.b_use & a_here),
            self.alu_beat.eq(fire),
        ]
        with m.If(fire):
            m.d.sync += [join_left.eq(join_left - 1), join_last.eq(join_left == 2)]
        # (a plan is taken only while not active, a beat joins only while active)
        m.d.comb += join_more_next.eq(Mux(load, any_bytes, Mux(fire, ~join_last, join_more)))

        # -- receive checks ------------------------------------------------------------------
        beat = self.nic_recv.payload
        took = self.nic_recv.valid & self.nic_recv.ready
        beat_bytes = Signal(range(B + 1))        # message bytes of the beat at nic_recv
        # What the next beat must carry, in registers computed from the counters' next values
        # (with them: at a plan's load and at each beat taken), so that the checks of a beat
        # are compares of its fields (through the NIC's link mux) with flip-flops only:
        expect_len = Signal(range(P + 1))        # min(recv_left, P): a new packet's length
        pkt_left = Signal(range(P + 1))          # the packet's bytes still to come
        new_packet = Signal(init=1)              # pkt_left == 0 before: the beat opens one
        pkt_last = Signal(init=1)                # pkt_left <= B: the beat closes it

        def expected(left, pkt_left_value):
            """The four registers' values for the bytes left of the message and of the packet (a
            new packet closes with its first beat when ``min(left, P) <= B``, that is, as
            ``B <= P``, when ``left <= B``: a compare of ``left`` itself, not of the min)."""
            length = _at_most(left, P)
            opens = pkt_left_value == 0
            return [expect_len.eq(length), pkt_left.eq(Mux(opens, length, pkt_left_value)),
                    new_packet.eq(opens),
                    pkt_last.eq(Mux(opens, ~_above(left, B), pkt_left_value <= B))]

        # A beat's bytes, min(pkt_left, B), from two registers: P is a multiple of B, so every
        # beat but the message's last carries B bytes, and operand A's entry count (a_in_last)
        # marks that beat (A's entries are the beats taken here until an abort, which stops
        # the taking). It feeds the packetizer's flags.
        m.d.comb += beat_bytes.eq(Mux(a_in_last, recv_tail, B))
        with m.If(loads[len(loads) // 2]):
            m.d.sync += expected(Mux(p.a_src == ASource.NIC, p.bytes, 0), 0)
        with m.If(took):
            bad = Signal()
            m.d.comb += bad.eq(
                (beat.src != plan.recv_peer)
                | (beat.first != new_packet)
                | (new_packet & ((beat.length != expect_len) | (beat.tag != recv_pkt)))
                | (beat.last != pkt_last))
            with m.If(bad):
                m.d.sync += self.recv_error.eq(1)
            m.d.sync += [recv_left.eq(recv_left - beat_bytes),
                         *expected(recv_left - beat_bytes, pkt_left - beat_bytes)]
            with m.If(beat.last):
                m.d.sync += recv_pkt.eq(recv_pkt + 1)

        # -- result fork: eager, each sink takes the beat once ----------------------------------
        # Into a register slice per sink (the write slice feeds the SRAM or the memory writer,
        # the send slice the NIC), so the fork decides from flip-flops (the slices' readies,
        # ``taken_*``, the plan) and no sink's ready reaches another sink or the result slice.
        taken_w = Signal()
        taken_s = Signal()
        w_ready = Signal()
        s_ready = Signal()
        o = result.o
        w_in, w_out = write_out.i, write_out.o
        m.d.comb += [
            w_in.payload.data.eq(o.payload.result),
            w_in.payload.last.eq(o.payload.last),
            w_in.valid.eq(o.valid & plan.w_use & ~taken_w),
            w_ready.eq(~plan.w_use | taken_w | w_in.ready),
            send_out.i.payload.data.eq(o.payload.result),
            send_out.i.valid.eq(o.valid & plan.send & ~taken_s),
            s_ready.eq(~plan.send | taken_s | send_out.i.ready),
            o.ready.eq(w_ready & s_ready),
            sram_w.i.payload.eq(w_out.payload.data),
            sram_w.i.valid.eq(w_out.valid & ~plan.w_mem),
            mem_w.wr_stream.tdata.eq(w_out.payload.data),
            mem_w.wr_stream.tlast.eq(w_out.payload.last),
            mem_w.wr_stream.tvalid.eq(w_out.valid & plan.w_mem),
            w_out.ready.eq(Mux(plan.w_mem, mem_w.wr_stream.tready, sram_w.i.ready)),
        ]
        wiring.connect(m, send_out.o, wiring.flipped(self.nic_send_data))
        with m.If(o.valid):
            with m.If(w_ready & s_ready):
                m.d.sync += [taken_w.eq(0), taken_s.eq(0)]
            with m.Else():
                m.d.sync += [taken_w.eq(w_ready & plan.w_use), taken_s.eq(s_ready & plan.send)]
        with m.If(self.nic_send_data.valid & self.nic_send_data.ready):
            m.d.sync += send_data_left.eq(send_data_left - 1)

        # -- packetizer ------------------------------------------------------------------------
        # A forwarding step (operand A from the NIC: rcs, rrcs, rrs) offers a packet's command
        # only once the packet it forwards is here: the join is inside it, or has taken every
        # earlier packet and the packet's first beat is at nic_recv (the NIC commits a packet
        # whole, so all of it is in the receive buffer). So a granted packet never waits for
        # another link, and no link is held while its data is still on the way (the wait cycle
        # of issue 18; docs/engine.md, "Deadlock freedom"). With send_cmd_left the message bytes
        # not yet offered (not a register: the packets are counted), fwd_ahead / fwd_even are
        # recv_left < / == send_cmd_left, registered from the next values (no compare on the
        # handshake). They come from fwd_gap, send_cmd_left - recv_left kept in a register of
        # its own and moved by the same two amounts (two subtractions and a compare before). A
        # packet's length is at most send_cmd_left and a beat's bytes at most recv_left, so in a
        # forwarding step fwd_gap is always their difference and the flags are those of the
        # compare (shown by induction with yosys `sat`, issue 14). Only a forwarding step reads
        # the flags (``data_here``: another step either does not take A from the NIC or sends
        # nothing), and its first gap is 0 (it sends what it receives), so every plan starts
        # the gap at 0, with no subtraction behind the plan register. The next gap and its flags
        # are computed for each of the four outcomes of the two handshakes from registers
        # alone, and the handshakes pick one: they come late in the cycle (through the NIC's
        # link mux and the join), so no add waits for them (docs/synthesis.md, issue 14
        # session 13).
        fwd_ahead = Signal()
        fwd_even = Signal()
        gap_shape = signed(DMA_LENGTH_BITS + 1)
        fwd_gap = Signal(gap_shape)
        send_bytes = self.nic_send.payload.length
        # One next gap for each pair (beat taken, command taken), with its flags: its sign bit
        # and the carry-free zero test. Taking a plan rides on "neither": both handshakes need
        # ``active``.
        gaps, aheads, evens = {}, {}, {}
        for took_it in (0, 1):
            for sent_it in (0, 1):
                gap_sum = CarrySaveSum(fwd_gap, plus=beat_bytes if took_it else None,
                                        minus=send_bytes if sent_it else None)
                suffix = ("_took" if took_it else "") + ("_sent" if sent_it else "")
                gaps[took_it, sent_it] = gap = Signal(gap_shape, name=f"gap{suffix or '_kept'}")
                zero = gap_sum.is_zero()
                m.d.comb += gap.eq(gap_sum.sum())
                aheads[took_it, sent_it] = ~gap[-1] & ~zero
                evens[took_it, sent_it] = zero
        # a plan taken: the step's first gap, 0, "not ahead, even" (only a forwarding step
        # reads them, above)
        gaps[0, 0] = Mux(load, 0, gaps[0, 0])
        aheads[0, 0] = ~load & aheads[0, 0]
        evens[0, 0] = load | evens[0, 0]
        cmd_taken = self.nic_send.valid & self.nic_send.ready

        def pick(values):
            return Mux(cmd_taken, Mux(took, values[1, 1], values[0, 1]),
                       Mux(took, values[1, 0], values[0, 0]))

        m.d.sync += [fwd_gap.eq(pick(gaps)), fwd_ahead.eq(pick(aheads)),
                     fwd_even.eq(pick(evens))]
        # (the NIC's valid itself, not operand A's mux of sources: a_nic selects it anyway)
        data_here = ~a_nic | fwd_ahead | (fwd_even & (aborting | self.nic_recv.valid))
        m.d.comb += [
            self.nic_send.valid.eq(active & send_more & data_here),
            self.nic_send.payload.link.eq(plan.send_link),
            self.nic_send.payload.tag.eq(send_pkt),
            self.nic_send.payload.length.eq(Mux(send_one, send_last_len, P)),
        ]
        with m.If(self.nic_send.valid & self.nic_send.ready):
            m.d.sync += [send_pkts_left.eq(send_pkts_left - 1), send_more.eq(~send_one),
                         send_one.eq(send_pkts_left == 2),
                         send_pkt.eq(send_pkt + 1)]

        # -- completion ------------------------------------------------------------------------
        finished = Signal()
        m.d.comb += finished.eq(
            active & ~Cat(pend_a, pend_b, pend_w, wait_a, wait_b, wait_w).any()
            & (join_left == 0) & ~send_more & (send_data_left == 0)
            & ~sram_w.busy & ~o.valid & ~alu.o.valid)
        m.d.sync += self.done.eq(0)
        with m.If(finished):
            m.d.sync += self.done.eq(1)
        # (``finished`` needs ``active``, ``load`` its absence)
        m.d.comb += active_next.eq(load | (active & ~finished))
        m.d.comb += self.quiet.eq(~active & ~self.done & ~aborting
                                  & ~Cat(*will_act.values()).any())
        return m
