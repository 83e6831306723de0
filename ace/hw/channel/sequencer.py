"""One sequencer channel: instruction memory, fetch, decode and checks, the cross-channel
dependency wait, and a :class:`~ace.hw.channel.datapath.StepDatapath` that executes the step.

::

    imem (program_words x 256 bit) --> FETCH --> DECODE --> PICK --> ADDR --> CHECK --> DEP
      ^ written through the CSRs              (table entries)(plan, flags)(first) |  (scoreboard:
                                                   v error <----------------------+  steps_done
                                                 ERROR <-- datapath errors, watchdog  of others)
                                                   ^                                      v
                                         +------ EXEC <-- ISSUE --> planned, offer --> datapath
                                         | done: steps_done += 1, pc += 1

States: ``IDLE`` (after reset or an error clear), ``FETCH``, ``DECODE`` (the instruction
register), ``PICK`` (the buffer table entries the instruction names, and its byte count,
registered), ``ADDR`` (plan, slice addresses and every check's flag, registered), ``CHECK``
(the first failing check), ``DEP``, ``ISSUE``,
``EXEC``, ``ABORT`` (waiting for an aborted step to drain), ``DONE`` (reached ``end``, or not
enabled at start) and ``ERROR``. A step is checked before anything moves: an undefined opcode or
reserved bits, a count of zero or over 2**24 - 1 bytes (or, in memory placement, a receive
longer than the staging area's ``packet_bytes``), a link out of range, a buffer selector
3 (``BAD_BUFFER``), a slice past the buffer's limit or the SRAM, or a memory address past
``mem_addr_bits`` (``BAD_ADDRESS``), a
dependency on a channel that does not exist or on a later step of its own channel: each stops
the channel in ``ERROR`` with its :class:`~ace.hw.csr.ErrorCause`. A dependency on a channel that
halts (``DONE`` or ``ERROR``) before reaching the step is ``DEP_NEVER``. The watchdog stops a
channel whose engine made no progress for ``timeout`` cycles (0: off). ``FETCH`` refuses the
reserved ``PLACEMENT`` value 3 (``BAD_PLACEMENT``), so a bad placement never runs a step.

In the memory placements (PLACEMENT 1 ``memory``, the staged baseline, and 2 ``p2p``, the
point-to-point baseline) the buffers are main-memory regions and a receiving step runs as up to
three micro-steps (:class:`~ace.hw.channel.microsteps.MicroStepPlanner`), each one pass of the
datapath: ``ISSUE`` and ``EXEC`` repeat per micro-step.

Per-step overhead: 6 cycles (fetch, decode, pick, addr, check, dependency) before ``ISSUE``,
plus the datapath's latency. The plan reaches the datapath from registers, the dependency flags
and the watchdog's compare are registered (one cycle old in ``DEP`` and ``EXEC``). Decode
arithmetic is sized to what the sums can reach: a slice's end ``nbytes + off * B`` (under
2**(33 + log2 B)) against its bounds, with flags registered beside the bounds for their higher
bits, and a memory access's end against ``2**mem_addr_bits`` on its low ``DMA_LENGTH_BITS``
bits, with an AND of the address bits above; a ``far`` flag for any address bits past the
space.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ace.hw.channel.datapath import ASource, StepDatapath, StepPlan, datapath_ports
from ace.hw.channel.microsteps import MAX_MICRO_STEPS, MicroStepPlanner
from ace.hw.common.carry_save import CarrySaveSum
from ace.hw.common.clock_gate import gate_while_busy, uses_gated_clock
from ace.regmap import ErrorCause
from ace.isa import INSTR_BITS, Instruction, Opcode
from ace.layouts import DMA_LENGTH_BITS, Dtype, ReduceOp
from ace.vocab import Mode

__all__ = ["AceChannel", "STEP_BITS"]

#: Width of a channel's completed-step counter (the ISA's ``dep_step`` is 16 bits).
STEP_BITS = 16
#: PLACEMENT values (:attr:`ace.vocab.Mode.placement_bit`); 3 is reserved.
PLACEMENT_SRAM = Mode.ACE.placement_bit
PLACEMENT_P2P = Mode.P2P.placement_bit

# Opcode -> (operand A, B from, writes, sends): A is "mem", "nic" or "src"; B is "src", "dst"
# or None; writes is "dst", "mem" or None.
_STEPS = {
    Opcode.LOAD: ("mem", None, "dst", False),
    Opcode.STORE: ("src", None, "mem", False),
    Opcode.S: ("src", None, None, True),
    Opcode.R: ("nic", None, "dst", False),
    Opcode.RRC: ("nic", "src", "dst", False),
    Opcode.RRS: ("nic", "src", None, True),
    Opcode.RRCS: ("nic", "src", "dst", True),
    Opcode.RCS: ("nic", None, "dst", True),
    Opcode.CPY: ("src", None, "dst", False),
    Opcode.RE: ("src", "dst", "dst", False),
}


class AceChannel(wiring.Component):
    """One channel (see the module docstring).

    Parameters
    ----------
    config : AceConfig
    index : int
        This channel's number (for the own-channel dependency check).

    Members
    -------
    imem_we, imem_addr, imem_data : In, instruction memory write port (from the CSRs)
    start : In(1), run from step 0 (ignored unless ``IDLE`` or ``DONE``)
    enable : In(1), sampled at ``start``; a disabled channel goes straight to ``DONE``
    error_clear : In(1), leaves ``ERROR`` (or aborts a running step) back to ``IDLE``
    placement : In(2), 0: buffers in SRAM (word addresses); 1 (memory-staged) or 2
        (point-to-point): in memory (byte addresses), receives expanded into micro-steps
        (:mod:`ace.hw.channel.microsteps`); 3: reserved, ``BAD_PLACEMENT`` at the next fetch
    stage_base : In(64), memory placements: byte address of the staging area; this channel uses
        ``2 * packet_bytes`` bytes at ``stage_base + index * 2 * packet_bytes``
    buf_base : In(64).array(3), buf_limit : In(32).array(3), the buffer table (i, o, s; limits
        in words)
    timeout : In(32), activity : In(1), the watchdog: engine-wide ``progress`` (the OR of every
        channel's), registered here, so an idle count restarts two cycles after a beat
    dep_steps : In(16).array(C), dep_halted : In(1).array(C), every channel's progress
    steps_done : Out(16), halted, running, finished : Out(1)
    error : Out(1), error_cause : Out(ErrorCause), error_pc : Out(16)
    progress : Out(1), registered: a beat entered the ALU or a step completed last cycle
    alu_beat, step_done : Out(1), a beat entered the ALU / a step completed, this cycle
    sram_rd_a, sram_rd_b, sram_wr, mem_rd_a, mem_rd_b, mem_wr, nic_* : the datapath's ports
    mem_read_bytes, mem_write_bytes : Out, bytes moved on the memory ports this cycle
    mem_read_active, mem_write_active : Out(1), high in every cycle where the datapath's
        memory read (write) ports can move
    """

    def __init__(self, config, index: int):
        self.config = config
        self.index = index
        C = config.num_channels
        members = {
            "imem_we": In(1), "imem_addr": In(range(config.program_words)),
            "imem_data": In(INSTR_BITS),
            "start": In(1), "enable": In(1), "error_clear": In(1),
            "placement": In(2), "stage_base": In(64), "timeout": In(32), "activity": In(1),
            "steps_done": Out(16), "halted": Out(1), "running": Out(1), "finished": Out(1),
            "error": Out(1), "error_cause": Out(ErrorCause), "error_pc": Out(16),
            "progress": Out(1), "alu_beat": Out(1), "step_done": Out(1),
            **datapath_ports(config),
        }
        members |= {"buf_base": In(64).array(3), "buf_limit": In(32).array(3),
                    "dep_steps": In(STEP_BITS).array(C), "dep_halted": In(1).array(C)}
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        C = cfg.num_channels

        dp = StepDatapath(cfg)
        if uses_gated_clock(cfg, platform):
            # In the gated-clock form the datapath is clocked only while it is not quiet
            # (:class:`StepDatapath`), a plan is offered or ``abort`` is high: in any other
            # cycle none of its registers would change.
            gate_while_busy(m, "datapath", ~dp.quiet | dp.plan.valid | dp.abort, dp)
        else:
            m.submodules.datapath = dp
        # The decode's registers (the instruction memory's read port, the instruction, what
        # PICK and ADDR register, the buffer table's rooms, the placement's copies, the
        # dependency flags, the planner's plan) load only from FETCH to ISSUE, or recompute
        # there from the CSRs, which hold during a run: in the gated-clock form their clock runs
        # only in those states (and a cycle after), so a running step costs the simulator none
        # of their logic. ``decoding`` is set below, from the state machine.
        decoding = Signal()
        dom = (gate_while_busy(m, "decode", decoding) if uses_gated_clock(cfg, platform)
               else "sync")
        for name in ("sram_rd_a", "sram_rd_b", "sram_wr", "mem_rd_a", "mem_rd_b", "mem_wr",
                     "nic_send", "nic_send_data"):
            wiring.connect(m, getattr(dp, name), wiring.flipped(getattr(self, name)))
        wiring.connect(m, wiring.flipped(self.nic_recv), dp.nic_recv)
        m.d.comb += [
            self.nic_recv_link.eq(dp.nic_recv_link),
            self.mem_read_bytes.eq(dp.mem_read_bytes),
            self.mem_write_bytes.eq(dp.mem_write_bytes),
            self.mem_read_active.eq(dp.mem_read_active),
            self.mem_write_active.eq(dp.mem_write_active),
        ]

        # -- instruction memory ----------------------------------------------------------------
        m.submodules.imem = imem = Memory(shape=INSTR_BITS, depth=cfg.program_words, init=[])
        wr = imem.write_port()
        rd = imem.read_port(domain=dom, transparent_for=())
        m.d.comb += [wr.en.eq(self.imem_we), wr.addr.eq(self.imem_addr),
                     wr.data.eq(self.imem_data)]

        pc = Signal(16)
        instr = Signal(Instruction)
        plan = Signal(StepPlan(cfg))
        cause = Signal(ErrorCause)
        idle_cycles = Signal(32)
        m.d.comb += [rd.addr.eq(pc[:len(rd.addr)]), rd.en.eq(1)]

        # -- decode, in three registered stages: PICK registers what the instruction selects
        # (its buffers' table entries, byte count, use flags); ADDR registers the plan and every
        # check's flag (``_decode``: each bound one short carry chain, from registers); CHECK
        # picks the first failing check (``_check``, no arithmetic).
        in_memory = Signal()        # PLACEMENT 1 or 2: buffers in main memory (registered)
        p2p = Signal()              # PLACEMENT 2
        bad_placement = Signal()    # PLACEMENT 3, reserved
        f = instr
        decoded = Signal(StepPlan(cfg))
        values = self._decode(m, f, pc, decoded, in_memory, self._rooms(m, dom), dom)
        held = {name: Signal(name=f"held_{name}") for name in values}
        check = self._check(m, self._flags(held))

        # -- dependency scoreboard -------------------------------------------------------------
        # Registered, so DEP decides from flip-flops: both flags are computed every cycle from
        # the instruction register (set in DECODE), and are one cycle old in DEP. That is safe:
        # during a run a channel's ``steps_done`` only grows and ``halted`` stays set, so a
        # dependency met (or dead) a cycle ago still is.
        dep_met = Signal()
        dep_dead = Signal()
        m.d[dom] += [dep_met.eq(0), dep_dead.eq(0)]
        with m.Switch(f.dep_channel):
            for k in range(C):
                with m.Case(k):
                    steps = self.dep_steps[k]
                    m.d[dom] += [dep_met.eq(steps > f.dep_step),
                                 dep_dead.eq(self.dep_halted[k] & ~(steps > f.dep_step))]

        # -- placement and the memory placements' micro-steps (microsteps.py) ---------------
        P = dp.packet_bytes
        micro = Signal(range(MAX_MICRO_STEPS))
        stage = Signal(cfg.mem_addr_bits)      # registered: the CSRs are set before a run starts
        stage2 = Signal(cfg.mem_addr_bits)
        m.d[dom] += [stage.eq(self.stage_base + self.index * 2 * P), stage2.eq(stage + P),
                     in_memory.eq(self.placement != PLACEMENT_SRAM),
                     p2p.eq(self.placement == PLACEMENT_P2P)]
        m.d.sync += bad_placement.eq(self.placement > PLACEMENT_P2P)     # read in FETCH
        m.submodules.microsteps = planner = MicroStepPlanner(cfg)
        # The plan reaches the datapath from registers: ``planned`` (the planner's output, taken
        # every cycle) and ``offer`` (set on entering ISSUE), so the datapath's load enables
        # (its counters, flags and plan register) come from flip-flops, not from this state
        # machine or the planner. The planner is one micro-step ahead (``plan_micro``, set to
        # ``micro + 1`` when a micro-step starts), so ``planned`` holds the next micro-step's
        # plan when EXEC returns to ISSUE; after ADDR it holds the first (DEP lasts a cycle).
        planned = Signal(StepPlan(cfg))
        offer = Signal()
        plan_micro = Signal(range(MAX_MICRO_STEPS + 1))
        m.d[dom] += planned.eq(planner.plan)
        m.d.comb += [planner.step.eq(plan), planner.opcode.eq(instr.opcode),
                     planner.in_memory.eq(in_memory), planner.p2p.eq(p2p),
                     planner.stage.eq(stage), planner.stage2.eq(stage2),
                     planner.micro.eq(plan_micro), dp.plan.payload.eq(planned),
                     dp.plan.valid.eq(offer)]
        # Another micro-step after this one, registered: ``micro`` and the plan are stable from
        # ISSUE to the end of EXEC, which is longer than a cycle.
        more_micro = Signal()
        m.d[dom] += more_micro.eq(micro + 1 < planner.count)

        # -- sequencer -------------------------------------------------------------------------
        watch = Signal()
        expired = Signal()
        # The watchdog's compare registered: it fires one cycle after the count reaches it.
        m.d.sync += expired.eq((self.timeout != 0) & (idle_cycles >= self.timeout))
        # Engine-wide progress crosses the die to every channel: registered at both ends
        # (``progress`` here, ``activity_seen`` on arrival), so its wire has a cycle of its own.
        activity_seen = Signal()
        m.d.sync += activity_seen.eq(self.activity)
        with m.If(watch & ~activity_seen):
            m.d.sync += idle_cycles.eq(idle_cycles + 1)
        with m.Else():
            m.d.sync += idle_cycles.eq(0)

        m.d.sync += self.progress.eq(dp.alu_beat | dp.done)
        m.d.comb += [
            self.error_cause.eq(cause),
            self.error_pc.eq(pc),
            self.alu_beat.eq(dp.alu_beat),
        ]

        def fail(why):
            m.d.sync += cause.eq(why)
            m.next = "ERROR"

        with m.FSM() as fsm:
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += [pc.eq(0), self.steps_done.eq(0), cause.eq(ErrorCause.NONE)]
                    with m.If(self.enable):
                        m.next = "FETCH"
                    with m.Else():
                        m.next = "DONE"
            with m.State("FETCH"):
                m.d.comb += [self.running.eq(1)]
                with m.If(pc >= cfg.program_words):
                    fail(ErrorCause.PC_OVERFLOW)
                with m.Elif(bad_placement):
                    fail(ErrorCause.BAD_PLACEMENT)
                with m.Else():
                    m.next = "DECODE"
            with m.State("DECODE"):
                m.d.comb += self.running.eq(1)
                m.d[dom] += instr.eq(rd.data)
                m.next = "PICK"
            with m.State("PICK"):
                m.d.comb += self.running.eq(1)
                m.next = "ADDR"
            with m.State("ADDR"):
                m.d.comb += self.running.eq(1)
                m.d.sync += [micro.eq(0), plan_micro.eq(0)]
                m.d[dom] += [plan.eq(decoded),
                             *(held[name].eq(value) for name, value in values.items())]
                m.next = "CHECK"
            with m.State("CHECK"):
                m.d.comb += self.running.eq(1)
                with m.If(check != ErrorCause.NONE):
                    fail(check)
                with m.Elif(f.opcode == Opcode.END):
                    m.next = "DONE"
                with m.Else():
                    m.next = "DEP"
            with m.State("DEP"):
                m.d.comb += [self.running.eq(1), watch.eq(1)]
                with m.If(~f.dep_valid | dep_met):
                    with m.If(f.opcode == Opcode.NOP):
                        m.d.comb += self.step_done.eq(1)
                        m.d.sync += [pc.eq(pc + 1), self.steps_done.eq(self.steps_done + 1)]
                        m.next = "FETCH"
                    with m.Else():
                        m.d.sync += offer.eq(1)
                        m.next = "ISSUE"
                with m.Elif(dep_dead):
                    fail(ErrorCause.DEP_NEVER)
                with m.Elif(expired):
                    fail(ErrorCause.TIMEOUT)
                with m.Elif(self.error_clear):
                    m.next = "IDLE"
            with m.State("ISSUE"):
                m.d.comb += self.running.eq(1)
                with m.If(dp.plan.ready):
                    m.d.sync += [offer.eq(0), plan_micro.eq(micro + 1)]
                    m.next = "EXEC"
            with m.State("EXEC"):
                m.d.comb += [self.running.eq(1), watch.eq(1)]
                with m.If(dp.done):
                    with m.If(dp.mem_error):
                        fail(ErrorCause.MEM_ERROR)
                    with m.Elif(dp.recv_error):
                        fail(ErrorCause.RECV_MISMATCH)
                    with m.Elif(more_micro):
                        m.d.sync += [micro.eq(micro + 1), offer.eq(1)]
                        m.next = "ISSUE"
                    with m.Else():
                        m.d.comb += self.step_done.eq(1)
                        m.d.sync += [pc.eq(pc + 1), self.steps_done.eq(self.steps_done + 1)]
                        m.next = "FETCH"
                with m.Elif(expired):
                    m.d.sync += cause.eq(ErrorCause.TIMEOUT)
                    m.next = "ABORT"
                with m.Elif(self.error_clear):
                    m.next = "ABORT"
            with m.State("ABORT"):
                m.d.comb += [self.running.eq(1), dp.abort.eq(1)]
                with m.If(dp.done):
                    with m.If(cause == ErrorCause.NONE):
                        m.next = "IDLE"
                    with m.Else():
                        m.next = "ERROR"
            with m.State("DONE"):
                m.d.comb += [self.halted.eq(1), self.finished.eq(1)]
                with m.If(self.start):
                    m.d.sync += [pc.eq(0), self.steps_done.eq(0)]
                    with m.If(self.enable):
                        m.next = "FETCH"
            with m.State("ERROR"):
                m.d.comb += [self.halted.eq(1), self.error.eq(1)]
                with m.If(self.error_clear):
                    m.d.sync += cause.eq(ErrorCause.NONE)
                    m.next = "IDLE"
        m.d.comb += decoding.eq(Cat(*(fsm.ongoing(state) for state in (
            "FETCH", "DECODE", "PICK", "ADDR", "CHECK", "DEP", "ISSUE"))).any())
        return m

    def _rooms(self, m, dom="sync"):
        """Per buffer, registered from the buffer table (the CSRs are set before a run starts):
        what ``_slice`` bounds a slice with, in bytes, the low :meth:`_bound_width` bits:
        ``limit_bytes`` (the limit in words, times ``link_bytes``; it has no more bits),
        ``mem_room`` (bytes from the base to the end of the memory space) and ``sram_room`` (the
        same for the SRAM), with flags that decide the space test alone: ``*_clear``, the room
        is 2**_bound_width bytes or more, so every slice fits; ``*_far``, the base reaches past
        the space (for the SRAM also: its room is negative), so none does. Registered in clock
        domain ``dom``."""
        cfg = self.config
        lb = (cfg.link_bytes - 1).bit_length()
        mem_bits, sram_bits = cfg.mem_addr_bits, cfg.sram_addr_bits
        width = self._bound_width()
        rooms = {name: [Signal(width, name=f"buf{b}_{name}") for b in range(3)]
                 for name in ("limit_bytes", "mem_room", "sram_room")}
        rooms |= {name: [Signal(name=f"buf{b}_{name}") for b in range(3)]
                  for name in ("mem_clear", "sram_clear", "mem_far", "sram_far")}
        for b in range(3):
            base = self.buf_base[b]
            mem_room = Signal(mem_bits + 1, name=f"buf{b}_mem_room_full")     # 1 .. 2**mem_bits
            sram_room = Signal(signed(sram_bits + lb + 2), name=f"buf{b}_sram_room_full")
            m.d.comb += [mem_room.eq((1 << mem_bits) - base[:mem_bits]),
                         sram_room.eq((cfg.sram_words - base[:sram_bits]) << lb)]
            m.d[dom] += [
                rooms["limit_bytes"][b].eq(self.buf_limit[b] << lb),
                rooms["mem_room"][b].eq(mem_room[:width]),
                rooms["sram_room"][b].eq(sram_room[:width]),
                rooms["mem_clear"][b].eq(mem_room[width:].any() if len(mem_room) > width
                                         else 0),
                rooms["sram_clear"][b].eq(~sram_room[-1] & sram_room[width:-1].any()
                                          if len(sram_room) - 1 > width else 0),
                rooms["mem_far"][b].eq(base[mem_bits:].any()),
                rooms["sram_far"][b].eq(base[sram_bits:].any() | sram_room[-1]),
            ]
        return rooms

    def _bound_width(self):
        """Bits of a slice's end in bytes, ``nbytes + off * B`` (``nbytes`` under
        2**DMA_LENGTH_BITS, 32-bit word offsets): 33 + log2 B. The slice's bounds are compared
        with it at this width; their higher bits are flags (:meth:`_rooms`)."""
        lb = (self.config.link_bytes - 1).bit_length()
        off_bits = Instruction["src_off"].width
        return ((1 << DMA_LENGTH_BITS) - 1 + (((1 << off_bits) - 1) << lb)).bit_length()

    def _fits(self, nbytes, plus, bound):
        """``nbytes + plus <= bound``, the sum and ``bound`` both under 2**_bound_width: the
        sign of ``nbytes + plus - bound - 1`` one bit wider, a row of full adders and one carry
        chain (:meth:`~ace.hw.common.carry_save.CarrySaveSum.at_most_zero`)."""
        width = self._bound_width() + 1
        total = CarrySaveSum(Cat(nbytes, Const(0, width - len(nbytes))), plus=plus, minus=bound)
        return total.at_most_zero()

    def _mem_fits(self, mem_addr, nbytes):
        """``mem_addr + nbytes <= 2**mem_addr_bits`` (``nbytes`` under 2**DMA_LENGTH_BITS), with
        a carry chain over the low DMA_LENGTH_BITS bits only: below the space's top
        2**DMA_LENGTH_BITS bytes (address bits DMA_LENGTH_BITS to ``mem_addr_bits - 1`` not all
        set, an AND tree beside the chain) every count fits; inside them ``mem_addr``'s low bits
        plus ``nbytes`` must not pass 2**DMA_LENGTH_BITS. Address bits past the space fail."""
        mem_bits = self.config.mem_addr_bits
        low = min(mem_bits, DMA_LENGTH_BITS)
        width = max(low, len(nbytes)) + 2
        total = CarrySaveSum(Cat(nbytes, Const(0, width - len(nbytes))), plus=mem_addr[:low],
                             minus=Const(1 << low, width))
        top = mem_addr[low:mem_bits].all() if mem_bits > low else Const(1)
        return ~mem_addr[mem_bits:].any() & (~top | total.at_most_zero())

    def _slice(self, m, buf, off, nbytes, name, in_memory, rooms, dom="sync"):
        """A buffer slice's address (memory byte address or SRAM word address, per
        ``placement``; combinational) and ``ok``, whether it lies inside the buffer's limit and
        inside its space. ``off + ceil(nbytes / B) <= limit`` is ``nbytes + off * B <= limit *
        B``, and the space test likewise ``nbytes + off * B <= room``: each one carry chain as
        wide as the slice's end (:meth:`_fits`), the room's higher bits decided by its flags
        (``clear`` passes, ``far`` fails; :meth:`_rooms`). The buffer's table
        entry (base, ``rooms``) is picked into registers in PICK, so the instruction's buffer
        selector drives only those multiplexers, not the sums (its fan-out is several hundred
        loads). The picked entry's registers are in clock domain ``dom``."""
        cfg = self.config
        lb = (cfg.link_bytes - 1).bit_length()
        mem_bits, sram_bits = cfg.mem_addr_bits, cfg.sram_addr_bits
        base = Signal(64, name=f"{name}_base")
        limit_bytes = Signal.like(rooms["limit_bytes"][0], name=f"{name}_limit_bytes")
        room = Signal.like(rooms["mem_room"][0], name=f"{name}_room")
        room_clear = Signal(name=f"{name}_room_clear")
        base_far = Signal(name=f"{name}_base_far")
        m.d[dom] += [base.eq(0), limit_bytes.eq(0), room.eq(0), room_clear.eq(0), base_far.eq(1)]
        with m.Switch(buf):
            for b in range(3):
                with m.Case(b):
                    m.d[dom] += [
                        base.eq(self.buf_base[b]),
                        limit_bytes.eq(rooms["limit_bytes"][b]),
                        room.eq(Mux(in_memory, rooms["mem_room"][b], rooms["sram_room"][b])),
                        room_clear.eq(Mux(in_memory, rooms["mem_clear"][b],
                                          rooms["sram_clear"][b])),
                        base_far.eq(Mux(in_memory, rooms["mem_far"][b], rooms["sram_far"][b])),
                    ]
        off_bytes = off << lb
        addr = Signal(max(mem_bits, sram_bits), name=f"{name}_addr")
        far = Signal(name=f"{name}_far")
        m.d.comb += [
            addr.eq(Mux(in_memory, base + off_bytes, base + off)),
            far.eq(base_far | Mux(in_memory, off_bytes[mem_bits:].any(),
                                  off[sram_bits:].any())),
        ]
        ok = (~far & self._fits(nbytes, off_bytes, limit_bytes)
              & (room_clear | self._fits(nbytes, off_bytes, room)))
        return addr, ok

    def _decode(self, m, f, pc, decoded, in_memory, rooms, dom="sync"):
        """ADDR stage, combinational from the instruction ``f`` and what PICK registered from
        it (each slice's table entry, the byte count): the step's plan into ``decoded``, and a
        dict of the checks' flags (registered by the caller; :meth:`_flags` makes the six
        from them: the address check's ``ok`` and use flags stay apart, so each register takes
        a carry chain's sign). PICK's registers are in clock domain ``dom`` (:meth:`_slice`'s
        too)."""
        cfg = self.config
        B, L, C = cfg.link_bytes, cfg.num_links, cfg.num_channels
        esize_log2 = Signal(2)
        nbytes_full = Signal(len(f.count) + 2)
        # A length of 2**DMA_LENGTH_BITS bytes or more fails BAD_COUNT before any address check,
        # so the address sums need only its low DMA_LENGTH_BITS bits.
        nbytes = Signal(DMA_LENGTH_BITS)     # registered in PICK
        m.d.comb += [
            esize_log2.eq(Mux((f.dtype == Dtype.INT32) | (f.dtype == Dtype.FP32), 2, 1)),
            nbytes_full.eq(f.count << esize_log2),
        ]
        m.d[dom] += nbytes.eq(nbytes_full[:DMA_LENGTH_BITS])
        src_addr, src_ok = self._slice(m, f.src_buf, f.src_off, nbytes, "src", in_memory, rooms,
                                       dom)
        dst_addr, dst_ok = self._slice(m, f.dst_buf, f.dst_off, nbytes, "dst", in_memory, rooms,
                                       dom)
        # Which fields the opcode uses, registered in PICK: the opcode bits reach the whole
        # decode, and the checks below then start from these flip-flops.
        uses = {}
        for key, value in self._plan(m, f, src_addr, dst_addr, decoded, in_memory).items():
            uses[key] = Signal(name=f"picked_uses_{key}")
            m.d[dom] += uses[key].eq(value)
        m.d.comb += [
            decoded.send_link.eq(f.send_link),
            decoded.recv_link.eq(f.recv_link),
            decoded.recv_peer.eq(f.recv_peer),
            decoded.dtype.eq(f.dtype),
            decoded.bytes.eq(nbytes),
        ]
        mem_ok = self._mem_fits(f.mem_addr, nbytes)
        values = {}
        values["bad_opcode"] = ~uses["defined"] | Cat(f.rsvd0, f.rsvd1, f.rsvd2, f.rsvd3).any()
        values["bad_count"] = uses["data"] & (
            (f.count == 0) | (nbytes_full >> DMA_LENGTH_BITS != 0) |
            (in_memory & uses["recv"] & (nbytes_full > cfg.packet_bytes)))
        values["bad_link"] = ((uses["send"] & (f.send_link >= L)) |
                              (uses["recv"] & (f.recv_link >= L)))
        values["bad_buffer"] = ((uses["src"] & (f.src_buf.as_value() == 3)) |
                                (uses["dst"] & (f.dst_buf.as_value() == 3)))
        # The address checks' flags are registered as they leave their carry chains, beside
        # the use flags; CHECK combines them (``_flags``), so ADDR ends at the chains.
        values["src_ok"], values["dst_ok"], values["mem_ok"] = src_ok, dst_ok, mem_ok
        for key in ("src", "dst", "mem"):
            values[f"uses_{key}"] = uses[key]
        values["bad_dep"] = f.dep_valid & ((f.dep_channel >= C) | (
            (f.dep_channel == self.index) & (f.dep_step >= pc)))
        return values

    def _plan(self, m, f, src_addr, dst_addr, decoded, in_memory):
        """The opcode's operand sources and sinks into ``decoded``; returns which fields the
        step uses (combinational)."""
        uses = {k: Signal(name=f"uses_{k}") for k in
                ("data", "src", "dst", "mem", "send", "recv", "defined")}
        with m.Switch(f.opcode):
            with m.Case(Opcode.NOP, Opcode.END):
                m.d.comb += uses["defined"].eq(1)
            for opcode, (a, b, w, send) in _STEPS.items():
                with m.Case(opcode):
                    m.d.comb += [uses["defined"].eq(1), uses["data"].eq(1),
                                 uses["send"].eq(send), decoded.send.eq(send),
                                 decoded.b_use.eq(b is not None),
                                 decoded.w_use.eq(w is not None),
                                 decoded.op.eq(f.op if b is not None else ReduceOp.COPY),
                                 decoded.b_mem.eq(in_memory)]
                    if a == "mem":
                        m.d.comb += [uses["mem"].eq(1), decoded.a_src.eq(ASource.MEM),
                                     decoded.a_addr.eq(f.mem_addr)]
                    elif a == "nic":
                        m.d.comb += [uses["recv"].eq(1), decoded.a_src.eq(ASource.NIC)]
                    else:
                        m.d.comb += [uses["src"].eq(1), decoded.a_addr.eq(src_addr),
                                     decoded.a_src.eq(Mux(in_memory, ASource.MEM,
                                                          ASource.SRAM))]
                    if b is not None:
                        m.d.comb += [uses[b].eq(1),
                                     decoded.b_addr.eq(src_addr if b == "src" else dst_addr)]
                    if w == "dst":
                        m.d.comb += [uses["dst"].eq(1), decoded.w_addr.eq(dst_addr),
                                     decoded.w_mem.eq(in_memory)]
                    elif w == "mem":
                        m.d.comb += [uses["mem"].eq(1), decoded.w_addr.eq(f.mem_addr),
                                     decoded.w_mem.eq(1)]
        return uses

    @staticmethod
    def _flags(values):
        """The six check flags from ``_decode``'s values (combinational): ``bad_address`` from
        the slices' and the memory access's ``ok`` flags and the use flags."""
        flags = {name: values[name] for name in ("bad_opcode", "bad_count", "bad_link",
                                                 "bad_buffer", "bad_dep")}
        flags["bad_address"] = ((values["uses_src"] & ~values["src_ok"]) |
                                (values["uses_dst"] & ~values["dst_ok"]) |
                                (values["uses_mem"] & ~values["mem_ok"]))
        return flags

    def _check(self, m, held):
        """CHECK stage, combinational from the registered ADDR flags: the first failing check's
        cause, or ``NONE`` (a priority encoder of six flags, no arithmetic)."""
        check = Signal(ErrorCause)
        with m.If(held["bad_opcode"]):
            m.d.comb += check.eq(ErrorCause.BAD_OPCODE)
        with m.Elif(held["bad_count"]):
            m.d.comb += check.eq(ErrorCause.BAD_COUNT)
        with m.Elif(held["bad_link"]):
            m.d.comb += check.eq(ErrorCause.BAD_LINK)
        with m.Elif(held["bad_buffer"]):
            m.d.comb += check.eq(ErrorCause.BAD_BUFFER)
        with m.Elif(held["bad_address"]):
            m.d.comb += check.eq(ErrorCause.BAD_ADDRESS)
        with m.Elif(held["bad_dep"]):
            m.d.comb += check.eq(ErrorCause.BAD_DEP)
        return check
