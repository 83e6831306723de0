"""Amaranth-simulator tests of :class:`ace.hw.csr.AceCsr` and of the host driver
:class:`ace.sw.host.AceHost` running against it.

A small AXI4-Lite master written here drives the port (AW and W in the same cycle or either one
first, random ``bready``/``rready`` delays); a background monitor records every output pulse
with the cycle it was high in. A free-running cycle counter in the harness drives the counter
inputs, so snapshot values are known exactly.
"""

import random
from pathlib import Path

import pytest
from amaranth.hdl import Elaboratable, Module, Signal
from amaranth.sim import Simulator

from ace.sw.compiler import compile_collective
from ace.config import NAMED_CONFIGS
from ace.hw.csr import AceCsr
from ace.regmap import (
    COUNTER_BASE,
    CSR,
    ERROR_CAUSE_TEXT,
    FIELDS,
    ID_MAGIC,
    MAX_COUNTERS,
    STEPS_DONE_BASE,
    ErrorCause,
    counter_offset,
    csr_fields_markdown,
    csr_map,
    csr_table_markdown,
    error_cause_markdown,
    field_decode,
    field_value,
    params_value,
    steps_done_offset,
)
from ace.sw.host import AceError, AceHost, default_limits
from ace.isa import INSTR_WORDS, from_words
from ace.sw.program import assemble

OKAY, SLVERR = 0, 2
COUNTERS = ("cnt_cycles", "cnt_busy_cycles", "cnt_mem_read_bytes", "cnt_mem_write_bytes")
PULSES = ("start", "error_clear", "counter_clear", "imem_we")
SMALL = NAMED_CONFIGS["small"]
TIMEOUT_CYCLES = 40_000


def counter_value(k: int, cycle: int) -> int:
    """What the harness drives on counter ``k`` in ``cycle``: every counter differs and the
    high word moves too."""
    return ((k + 1) * 0x1_0000_0000 * 3 + cycle * (k + 2) * 0x0100_0001) % (1 << 48)


class Harness(Elaboratable):
    """The CSR block, a free-running cycle counter, and the counters driven from it."""

    def __init__(self, dut):
        self.dut = dut
        self.cycle = Signal(32)

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = self.dut
        m.d.sync += self.cycle.eq(self.cycle + 1)
        for k, name in enumerate(self.dut.counter_names):
            m.d.comb += getattr(self.dut, name).eq(
                ((k + 1) * 0x1_0000_0000 * 3 + self.cycle * ((k + 2) * 0x0100_0001))[:48])
        return m


class AxiLiteMaster:
    """AXI4-Lite master for one testbench. ``order`` is ``same`` (AW and W together), ``aw``
    (AW first), ``w`` (W first) or ``random``; response ready is delayed 0..``max_delay``
    cycles at random."""

    def __init__(self, harness, rng, order="random", max_delay=3):
        self.bus = harness.dut.s_axil
        self.cycle = harness.cycle
        self.rng = rng
        self.order = order
        self.max_delay = max_delay
        self.b_cycle = None  # cycle in which bvalid of the last write rose

    async def write(self, ctx, addr, data, strb=0xF, order=None):
        bus, rng = self.bus, self.rng
        order = order or self.order
        if order == "random":
            order = rng.choice(("same", "aw", "w"))
        gap = rng.randint(1, 3)
        start = {"same": (0, 0), "aw": (0, gap), "w": (gap, 0)}[order]
        pending = {"aw": True, "w": True}
        cycle = 0
        while any(pending.values()):
            if pending["aw"] and cycle >= start[0]:
                ctx.set(bus.awvalid, 1)
                ctx.set(bus.awaddr, addr)
            if pending["w"] and cycle >= start[1]:
                ctx.set(bus.wvalid, 1)
                ctx.set(bus.wdata, data)
                ctx.set(bus.wstrb, strb)
            taken = {"aw": ctx.get(bus.awvalid) and ctx.get(bus.awready),
                     "w": ctx.get(bus.wvalid) and ctx.get(bus.wready)}
            await ctx.tick()
            cycle += 1
            for channel, done in taken.items():
                if done:
                    pending[channel] = False
                    ctx.set(getattr(bus, f"{channel}valid"), 0)
        delay = rng.randint(0, self.max_delay)
        self.b_cycle = None
        while True:
            if ctx.get(bus.bvalid) and self.b_cycle is None:
                self.b_cycle = ctx.get(self.cycle)
            if delay == 0:
                ctx.set(bus.bready, 1)
                if ctx.get(bus.bvalid):
                    break
            else:
                delay -= 1
            await ctx.tick()
        resp = ctx.get(bus.bresp)
        await ctx.tick()
        ctx.set(bus.bready, 0)
        return resp

    async def read(self, ctx, addr):
        bus = self.bus
        ctx.set(bus.arvalid, 1)
        ctx.set(bus.araddr, addr)
        while True:
            taken = ctx.get(bus.arready)
            await ctx.tick()
            if taken:
                break
        ctx.set(bus.arvalid, 0)
        delay = self.rng.randint(0, self.max_delay)
        while True:
            if delay == 0:
                ctx.set(bus.rready, 1)
                if ctx.get(bus.rvalid):
                    break
            else:
                delay -= 1
            await ctx.tick()
        data, resp = ctx.get(bus.rdata), ctx.get(bus.rresp)
        await ctx.tick()
        ctx.set(bus.rready, 0)
        return data, resp


class PulseMonitor:
    """Background testbench: every cycle in which a pulse output is high, as
    ``(cycle, name, extra)``; ``extra`` is (channel, addr, data) for ``imem_we``."""

    def __init__(self, harness):
        self.harness = harness
        self.events = []

    async def run(self, ctx):
        dut = self.harness.dut
        while True:
            await ctx.tick()
            cycle = ctx.get(self.harness.cycle)
            for name in PULSES:
                if ctx.get(getattr(dut, name)):
                    extra = None
                    if name == "imem_we":
                        extra = (ctx.get(dut.imem_channel), ctx.get(dut.imem_addr),
                                 ctx.get(dut.imem_data))
                    self.events.append((cycle, name, extra))

    def take(self):
        events, self.events = self.events, []
        return events


def simulate(harness, testbench, background=()):
    sim = Simulator(harness)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    for bench in background:
        sim.add_testbench(bench, background=True)

    async def watchdog(ctx):
        await ctx.delay(TIMEOUT_CYCLES * 1e-8)
        raise AssertionError("watchdog: simulation did not finish")
    sim.add_testbench(watchdog, background=True)
    sim.run()


def make(config=SMALL, counters=COUNTERS, seed=0, **master_args):
    harness = Harness(AceCsr(config, counters))
    return harness, AxiLiteMaster(harness, random.Random(seed), **master_args), \
        PulseMonitor(harness)


def mask(reg) -> int:
    return (1 << reg.bits) - 1


# -- register access ----------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["small", "default"])
def test_reset_values_and_rw_readback(name):
    config = NAMED_CONFIGS[name]
    harness, axil, _ = make(config, seed=1)
    dut = harness.dut
    regs = csr_map(config, COUNTERS)
    rw = [r for r in regs if r.access == "RW" and r.name != "IADDR"]
    rng = random.Random(2)
    errors = []

    async def testbench(ctx):
        for reg in regs:
            data, resp = await axil.read(ctx, reg.offset)
            want = {"STATUS": None, "CONTROL": 0}.get(reg.name, reg.reset)
            if reg.access == "RO" and (reg.name.startswith("STEPS_DONE")
                                       or reg.name.endswith(("_LO", "_HI"))):
                want = 0  # inputs idle, snapshot bank empty
            if resp != OKAY or (want is not None and data != want):
                errors.append(("reset", reg.name, hex(data), resp, want))
        written = {}
        for order in ("same", "aw", "w", "random"):
            for reg in rw:
                value = rng.getrandbits(32)
                resp = await axil.write(ctx, reg.offset, value, order=order)
                written[reg.name] = value & mask(reg)
                if resp != OKAY:
                    errors.append(("write", reg.name, resp))
            for reg in rw:
                data, resp = await axil.read(ctx, reg.offset)
                if (data, resp) != (written[reg.name], OKAY):
                    errors.append(("readback", order, reg.name, hex(data), resp))
        # Outputs follow the registers.
        for reg, member in (("NODE_ID", "node_id"), ("PLACEMENT", "placement"),
                            ("CHANNEL_ENABLE", "channel_enable"), ("TIMEOUT", "timeout")):
            if ctx.get(getattr(dut, member)) != written[reg]:
                errors.append(("output", member))
        for b in "ios":
            base = written[f"BUF_BASE_{b.upper()}_LO"] | written[f"BUF_BASE_{b.upper()}_HI"] << 32
            if ctx.get(getattr(dut, f"buf_base_{b}")) != base:
                errors.append(("output", f"buf_base_{b}"))
            if ctx.get(getattr(dut, f"buf_limit_{b}")) != written[f"BUF_LIMIT_{b.upper()}"]:
                errors.append(("output", f"buf_limit_{b}"))
        stage = written["STAGE_BASE_LO"] | written["STAGE_BASE_HI"] << 32
        if ctx.get(dut.stage_base) != stage:
            errors.append(("output", "stage_base"))
        # IADDR reads back every in-range value written.
        for _ in range(4):
            value = field_value("IADDR", CHANNEL=rng.randrange(config.num_channels),
                                INDEX=rng.randrange(config.program_words))
            resp = await axil.write(ctx, CSR["IADDR"], value)
            data, _ = await axil.read(ctx, CSR["IADDR"])
            if (resp, data) != (OKAY, value):
                errors.append(("IADDR", hex(value), resp, hex(data)))

    simulate(harness, testbench)
    assert not errors, errors


def test_wstrb_byte_enables():
    harness, axil, monitor = make(seed=3)
    results = {}

    async def testbench(ctx):
        await axil.write(ctx, CSR["TIMEOUT"], 0xFFFF_FFFF)
        await axil.write(ctx, CSR["TIMEOUT"], 0x1234_5678, strb=0b0101)
        results["timeout"] = (await axil.read(ctx, CSR["TIMEOUT"]))[0]
        await axil.write(ctx, CSR["BUF_BASE_S_LO"], 0xAABB_CCDD, strb=0b1000)
        results["base_s"] = (await axil.read(ctx, CSR["BUF_BASE_S_LO"]))[0]
        await axil.write(ctx, CSR["NODE_ID"], 0x5A)
        await axil.write(ctx, CSR["NODE_ID"], 0xA5, strb=0b1110)  # byte 0 not enabled
        results["node_id"] = (await axil.read(ctx, CSR["NODE_ID"]))[0]
        results["control_resp"] = await axil.write(ctx, CSR["CONTROL"], 0xF, strb=0b1110)
        for _ in range(3):
            await ctx.tick()

    simulate(harness, testbench, [monitor.run])
    assert results == {"timeout": 0xFF34_FF78, "base_s": 0xAA00_0000, "node_id": 0x5A,
                       "control_resp": OKAY}
    assert monitor.take() == []  # CONTROL with byte 0 disabled pulses nothing


def test_read_only_and_unmapped_answer_slverr():
    harness, axil, monitor = make(seed=4)
    regs = csr_map(SMALL, COUNTERS)
    mapped = {r.offset for r in regs}
    unmapped = [0x024, 0x03C, 0x06C, 0x07C, 0x0A4, 0x0FC,
                steps_done_offset(SMALL.num_channels), counter_offset(COUNTERS[-1], COUNTERS) + 8,
                0x1000, 0xFFFC]
    assert not mapped & set(unmapped)
    rng = random.Random(5)
    errors = []

    async def testbench(ctx):
        for reg in regs:
            if reg.access != "RO":
                continue
            before = await axil.read(ctx, reg.offset)
            resp = await axil.write(ctx, reg.offset, rng.getrandbits(32))
            after = await axil.read(ctx, reg.offset)
            if resp != SLVERR or (reg.name != "STATUS" and before != after):
                errors.append(("RO", reg.name, resp, before, after))
        for offset in unmapped:
            data, resp = await axil.read(ctx, offset)
            wresp = await axil.write(ctx, offset, 0xFFFF_FFFF)
            if (data, resp, wresp) != (0, SLVERR, SLVERR):
                errors.append(("unmapped", hex(offset), data, resp, wresp))
        # Nothing aliased: every RW register still holds its reset value.
        for reg in regs:
            if reg.access == "RW":
                data, resp = await axil.read(ctx, reg.offset)
                if (data, resp) != (reg.reset, OKAY):
                    errors.append(("changed", reg.name, hex(data)))

    simulate(harness, testbench, [monitor.run])
    assert not errors, errors
    assert monitor.take() == []


@pytest.mark.parametrize("name", ["small", "default"])
def test_read_pipeline_latency_backpressure_and_back_to_back(name):
    """Reads driven cycle by cycle: ``rvalid`` rises exactly ``read_latency`` edges after the
    AR handshake; with ``rready`` held low ``rvalid``, ``rdata`` and ``rresp`` hold and no
    further read is accepted; ``arready`` does not follow ``arvalid`` in the same cycle; a read
    waiting with ``arvalid`` high is taken in the cycle after the R handshake. Every register
    of the map (each read group) and unmapped addresses between and after them, in random
    order, with random ``rready`` holds of 0 to 5 cycles."""
    config = NAMED_CONFIGS[name]
    harness, axil, _ = make(config, seed=13)
    dut, bus = harness.dut, harness.dut.s_axil
    regs = csr_map(config, COUNTERS)
    rng = random.Random(14)
    mapped = {r.offset for r in regs}
    unmapped = sorted({r.offset + 4 for r in regs} - mapped | {0xFFFC, 0x1000, 0x7FF0})
    steps = [rng.getrandbits(16) for _ in range(config.num_channels)]
    written = {}
    errors = []

    def expect(offset):
        reg = next((r for r in regs if r.offset == offset), None)
        if reg is None:
            return 0, SLVERR
        if reg.name in written:
            return written[reg.name], OKAY
        if reg.name.startswith("STEPS_DONE"):
            return steps[int(reg.name[len("STEPS_DONE"):])], OKAY
        if reg.name.endswith(("_LO", "_HI")) and reg.access == "RO":
            return 0, OKAY  # no snapshot taken
        return {"ID": ID_MAGIC, "CONTROL": 0, "STATUS": field_value("STATUS", IDLE=1),
                "PARAMS": params_value(config, len(COUNTERS))}.get(reg.name, reg.reset), OKAY

    async def testbench(ctx):
        for c, value in enumerate(steps):
            ctx.set(getattr(dut, f"steps_done{c}"), value)
        for reg in regs:
            if reg.access == "RW" and reg.name != "IADDR":
                value = rng.getrandbits(32) & mask(reg)
                await axil.write(ctx, reg.offset, value)
                written[reg.name] = value
        order = [r.offset for r in regs] + unmapped
        rng.shuffle(order)
        ctx.set(bus.rready, 0)
        pending = list(order)
        ctx.set(bus.arvalid, 1)
        ctx.set(bus.araddr, pending[0])
        ar_cycle, holds, results, last_r = None, 0, [], None
        for cycle in range(40 * len(order)):
            # arready depends only on internal state: the same with arvalid low and high.
            ctx.set(bus.arvalid, 0)
            ready_low = ctx.get(bus.arready)
            ctx.set(bus.arvalid, 1 if pending else 0)
            if ctx.get(bus.arready) != ready_low:
                errors.append(("arready follows arvalid", cycle))
            ar_taken = bool(pending) and ctx.get(bus.arready)
            rvalid = ctx.get(bus.rvalid)
            if rvalid:
                seen = (ctx.get(bus.rdata), ctx.get(bus.rresp))
                if results and results[-1][2] == "held" and results[-1][1] != seen:
                    errors.append(("changed while held", results[-1], seen))
                if ar_cycle is not None:
                    # the first cycle of rvalid: exactly read_latency edges after AR
                    if cycle - ar_cycle != dut.read_latency:
                        errors.append(("latency", hex(addr), cycle - ar_cycle))
                    ar_cycle = None
                    holds = rng.randint(0, 5)
                    results.append((addr, seen, "held"))
                if ar_taken:
                    errors.append(("AR taken while rvalid", cycle))
                ctx.set(bus.rready, int(holds == 0))
                if holds == 0:
                    results[-1] = (addr, seen, "taken")
                holds -= 1
            else:
                ctx.set(bus.rready, rng.getrandbits(1))  # rready without rvalid does nothing
            if ar_taken:
                if ar_cycle is not None or (results and results[-1][2] == "held"):
                    errors.append(("AR taken during a read", cycle))
                if results and results[-1][2] == "taken" and last_r != cycle - 1:
                    errors.append(("not back to back", cycle, last_r))
                addr, ar_cycle = pending.pop(0), cycle
            if rvalid and holds < 0:
                last_r = cycle
            await ctx.tick()
            if ar_taken:
                ctx.set(bus.araddr, pending[0] if pending else 0)
            if not pending and results and len(results) == len(order) \
                    and results[-1][2] == "taken":
                break
        ctx.set(bus.arvalid, 0)
        ctx.set(bus.rready, 0)
        for addr, (data, resp), state in results:
            if state != "taken" or (data, resp) != expect(addr):
                errors.append(("value", hex(addr), hex(data), resp, expect(addr), state))
        if len(results) != len(order):
            errors.append(("answered", len(results), len(order)))

    simulate(harness, testbench)
    assert not errors, errors[:10]


def test_status_is_sampled_in_the_ar_handshake_cycle():
    """STATUS and STEPS_DONE read the inputs of the AR handshake's cycle: inputs that differ
    only in that one cycle are what the read returns."""
    harness, _, _ = make(seed=15)
    dut, bus = harness.dut, harness.dut.s_axil
    got = []

    async def read_with_pulse(ctx, addr, member, during, around):
        ctx.set(getattr(dut, member), around)
        ctx.set(bus.rready, 1)
        await ctx.tick().repeat(2)
        assert ctx.get(bus.arready)
        ctx.set(bus.araddr, addr)
        ctx.set(bus.arvalid, 1)
        ctx.set(getattr(dut, member), during)  # this cycle is the AR handshake's
        await ctx.tick()
        ctx.set(bus.arvalid, 0)
        ctx.set(getattr(dut, member), around)
        while not ctx.get(bus.rvalid):
            await ctx.tick()
        data = ctx.get(bus.rdata)
        await ctx.tick()
        return data

    async def testbench(ctx):
        status = await read_with_pulse(ctx, CSR["STATUS"], "busy", 1, 0)
        got.append(field_decode("STATUS", status)["BUSY"])
        status = await read_with_pulse(ctx, CSR["STATUS"], "error_pc", 0x1234, 0x4321)
        got.append(field_decode("STATUS", status)["ERROR_PC"])
        got.append(await read_with_pulse(ctx, STEPS_DONE_BASE + 4, "steps_done1", 77, 5))

    simulate(harness, testbench)
    assert got == [1, 0x1234, 77]


def test_control_pulses_last_one_cycle():
    harness, axil, monitor = make(seed=6)
    bit = {f.name: 1 << f.lsb for f in FIELDS["CONTROL"]}
    cases = [
        (bit["START"], {"start"}),
        (bit["ERROR_CLEAR"], {"error_clear"}),
        (bit["COUNTER_CLEAR"], {"counter_clear"}),
        (bit["SNAPSHOT"], set()),
        (bit["START"] | bit["ERROR_CLEAR"] | bit["COUNTER_CLEAR"],
         {"start", "error_clear", "counter_clear"}),
        (0, set()),
        (0xFFFF_FFF0, set()),
    ]
    seen = []

    async def testbench(ctx):
        for value, _ in cases:
            resp = await axil.write(ctx, CSR["CONTROL"], value)
            for _ in range(4):
                await ctx.tick()
            events = monitor.take()
            seen.append((resp, axil.b_cycle, events))
        # Other registers pulse nothing.
        await axil.write(ctx, CSR["TIMEOUT"], 0xFFFF_FFFF)
        await axil.write(ctx, CSR["IWORD0"], 0xFFFF_FFFF)
        for _ in range(4):
            await ctx.tick()
        seen.append(monitor.take())

    simulate(harness, testbench, [monitor.run])
    for (value, names), (resp, b_cycle, events) in zip(cases, seen):
        assert resp == OKAY
        # each pulse high exactly once, in the first cycle of bvalid
        assert sorted(name for _, name, _ in events) == sorted(names), (value, events)
        assert all(cycle == b_cycle for cycle, _, _ in events), (value, b_cycle, events)
    assert seen[-1] == []


# -- instruction loading ------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["small", "default"])
def test_instruction_staging_and_commit(name):
    config = NAMED_CONFIGS[name]
    harness, axil, monitor = make(config, seed=7)
    rng = random.Random(8)
    targets = [(0, 0), (config.num_channels - 1, config.program_words - 1),
               (rng.randrange(config.num_channels), rng.randrange(config.program_words))]
    bad = [(config.num_channels, 0), (0, config.program_words),
           (0xFFFF, 0xFFFF), (config.num_channels, config.program_words)]
    log = []

    async def testbench(ctx):
        for channel, index in targets:
            words = [rng.getrandbits(32) for _ in range(INSTR_WORDS)]
            for k, word in enumerate(words):
                await axil.write(ctx, CSR[f"IWORD{k}"], word)
            staged = monitor.take()
            resp = await axil.write(ctx, CSR["IADDR"],
                                    field_value("IADDR", CHANNEL=channel, INDEX=index))
            for _ in range(3):
                await ctx.tick()
            log.append(("good", channel, index, words, resp, axil.b_cycle, staged,
                        monitor.take()))
        before = (await axil.read(ctx, CSR["IADDR"]))[0]
        for channel, index in bad:
            resp = await axil.write(ctx, CSR["IADDR"], channel << 16 | index)
            after = (await axil.read(ctx, CSR["IADDR"]))[0]
            log.append(("bad", channel, index, resp, before, after, monitor.take()))

    simulate(harness, testbench, [monitor.run])
    for entry in log:
        if entry[0] == "good":
            _, channel, index, words, resp, b_cycle, staged, events = entry
            assert staged == [] and resp == OKAY
            assert events == [(b_cycle, "imem_we", (channel, index, from_words(words)))]
        else:
            _, channel, index, resp, before, after, events = entry
            assert (resp, after, events) == (SLVERR, before, []), entry


# -- status and counters ------------------------------------------------------------------------

def test_status_packing_steps_done_irq_and_params():
    harness, axil, _ = make(seed=9)
    dut = harness.dut
    rng = random.Random(10)
    errors = []

    async def testbench(ctx):
        ident = await axil.read(ctx, CSR["ID"])
        params = await axil.read(ctx, CSR["PARAMS"])
        if ident != (ID_MAGIC, OKAY) or params != (params_value(SMALL, len(COUNTERS)), OKAY):
            errors.append(("id/params", ident, params))
        decoded = field_decode("PARAMS", params[0])
        if (decoded["NUM_CHANNELS"], decoded["NUM_LINKS"], decoded["NUM_COUNTERS"],
                1 << decoded["LOG2_LINK_BYTES"], 1 << decoded["LOG2_PROGRAM_WORDS"]) != (
                SMALL.num_channels, SMALL.num_links, len(COUNTERS), SMALL.link_bytes,
                SMALL.program_words):
            errors.append(("params fields", decoded))
        for trial in range(24):
            inputs = {"busy": rng.getrandbits(1), "done": rng.getrandbits(1),
                      "error": rng.getrandbits(1), "error_cause": rng.getrandbits(4),
                      "error_channel": rng.getrandbits(4), "error_pc": rng.getrandbits(16)}
            steps = [rng.getrandbits(16) for _ in range(SMALL.num_channels)]
            irq_enable = trial % 4
            for name, value in inputs.items():
                ctx.set(getattr(dut, name), value)
            for c, value in enumerate(steps):
                ctx.set(getattr(dut, f"steps_done{c}"), value)
            await axil.write(ctx, CSR["IRQ_ENABLE"], irq_enable)
            irq = int(bool(inputs["done"] and irq_enable & 1
                           or inputs["error"] and irq_enable & 2))
            want = field_value("STATUS", IDLE=1 - inputs["busy"], BUSY=inputs["busy"],
                               DONE=inputs["done"], ERROR=inputs["error"],
                               ERROR_CAUSE=inputs["error_cause"],
                               ERROR_CHANNEL=inputs["error_channel"], IRQ=irq,
                               ERROR_PC=inputs["error_pc"])
            got = await axil.read(ctx, CSR["STATUS"])
            if got != (want, OKAY) or ctx.get(dut.irq) != irq:
                errors.append(("status", inputs, irq_enable, hex(got[0]), hex(want)))
            for c, value in enumerate(steps):
                got = await axil.read(ctx, STEPS_DONE_BASE + 4 * c)
                if got != (value, OKAY):
                    errors.append(("steps_done", c, got, value))

    simulate(harness, testbench)
    assert not errors, errors


def test_counter_snapshot_is_consistent():
    harness, axil, monitor = make(seed=11)
    results = []

    async def testbench(ctx):
        # Before any SNAPSHOT the bank reads 0.
        results.append(("initial", [await axil.read(ctx, COUNTER_BASE + 4 * k)
                                    for k in range(2 * len(COUNTERS))]))
        for clear in (0, 0, 1):
            value = field_value("CONTROL", SNAPSHOT=1, COUNTER_CLEAR=clear)
            await axil.write(ctx, CSR["CONTROL"], value)
            b_cycle = axil.b_cycle
            for _ in range(37):  # the counters keep moving
                await ctx.tick()
            got = {}
            for name in reversed(COUNTERS):  # any order, any time later
                hi = await axil.read(ctx, counter_offset(name, COUNTERS) + 4)
                lo = await axil.read(ctx, counter_offset(name, COUNTERS))
                got[name] = (hi[0] << 32 | lo[0], lo[1], hi[1])
            results.append(("snap", b_cycle, got, monitor.take()))

    simulate(harness, testbench, [monitor.run])
    assert results[0] == ("initial", [(0, OKAY)] * (2 * len(COUNTERS)))
    for _, b_cycle, got, events in results[1:]:
        # the snapshot holds the counters of bvalid's first cycle, the cycle of the clear
        # pulse (the counters clear at its end)
        want = {name: (counter_value(k, b_cycle), OKAY, OKAY)
                for k, name in enumerate(COUNTERS)}
        assert got == want
        assert all(v[0] >> 32 for v in got.values())  # the high word is exercised
    assert results[3][3] == [(results[3][1], "counter_clear", None)]


def test_bad_counter_names_are_rejected():
    with pytest.raises(ValueError, match="duplicates"):
        AceCsr(SMALL, ["a", "a"])
    with pytest.raises(ValueError, match="not valid"):
        AceCsr(SMALL, ["not-an-identifier"])
    with pytest.raises(ValueError, match="collides"):
        AceCsr(SMALL, ["start"])
    with pytest.raises(ValueError, match="at most"):
        AceCsr(SMALL, [f"c{k}" for k in range(MAX_COUNTERS + 1)])


# -- the map, the docs and the error causes -----------------------------------------------------

def test_map_is_consistent():
    regs = csr_map(NAMED_CONFIGS["default"], COUNTERS)
    assert len({r.offset for r in regs}) == len(regs)
    assert all(r.access in ("RO", "RW", "WO") for r in regs)
    assert CSR["ID"] == 0 and CSR["IADDR"] == 0x0A0
    assert [counter_offset(n, COUNTERS) for n in COUNTERS] == [0x200, 0x208, 0x210, 0x218]
    for name, fields in FIELDS.items():
        used = 0
        for f in fields:
            span = ((1 << f.width) - 1) << f.lsb
            assert not used & span and f.lsb + f.width <= 32, (name, f)
            used |= span


def test_docs_csr_md_is_current():
    doc = (Path(__file__).resolve().parent.parent / "docs" / "csr.md").read_text()
    assert csr_table_markdown() in doc, "docs/csr.md is stale: paste ace.regmap.csr_table_markdown()"
    assert csr_fields_markdown() in doc, "docs/csr.md is stale: paste csr_fields_markdown()"
    assert error_cause_markdown() in doc, "docs/csr.md is stale: paste error_cause_markdown()"


def test_error_causes():
    assert {c.name: c.value for c in ErrorCause} == {
        "NONE": 0, "BAD_OPCODE": 1, "BAD_BUFFER": 2, "BAD_ADDRESS": 3, "BAD_LINK": 4,
        "BAD_DEP": 5, "DEP_NEVER": 6, "BAD_COUNT": 7, "RECV_MISMATCH": 8, "MEM_ERROR": 9,
        "TIMEOUT": 10, "PC_OVERFLOW": 11, "LINK_ERROR": 12, "BAD_PLACEMENT": 13}
    assert ErrorCause.as_shape().width == 4
    docstring = " ".join(ErrorCause.__doc__.split())
    for cause, text in ERROR_CAUSE_TEXT.items():
        assert f"``{cause.name}`` = {cause.value}: {text}" in docstring, cause


# -- the host driver ----------------------------------------------------------------------------

class EngineModel:
    """Background testbench standing in for the engine: START makes it busy for ``run_cycles``;
    then it is done, or in error with ``fail`` = (cause, channel, pc) when set. ERROR_CLEAR
    clears the error."""

    def __init__(self, dut, run_cycles=60):
        self.dut = dut
        self.run_cycles = run_cycles
        self.fail = None

    async def run(self, ctx):
        dut = self.dut
        while True:
            _, _, start, clear = await ctx.tick().sample(dut.start, dut.error_clear)
            if not start and not clear:
                continue
            if clear:
                ctx.set(dut.error, 0)
                ctx.set(dut.error_cause, 0)
                continue
            ctx.set(dut.busy, 1)
            ctx.set(dut.done, 0)
            for _ in range(self.run_cycles):
                await ctx.tick()
            ctx.set(dut.busy, 0)
            for c in range(len(dut.channel_enable)):
                ctx.set(getattr(dut, f"steps_done{c}"), 10 + c)
            if self.fail is None:
                ctx.set(dut.done, 1)
            else:
                cause, channel, pc = self.fail
                ctx.set(dut.error, 1)
                ctx.set(dut.error_cause, cause)
                ctx.set(dut.error_channel, channel)
                ctx.set(dut.error_pc, pc)


@pytest.mark.parametrize("mode", ["ace", "baseline"])
def test_host_drives_the_block(mode):
    config = SMALL
    program = compile_collective("allreduce", 64, nodes=2, config=config, mode=mode)
    assembled = assemble(program, config)
    harness, axil, monitor = make(config, seed=12, max_delay=1)
    dut = harness.dut
    engine = EngineModel(dut)
    checks = []

    async def testbench(ctx):
        async def write32(addr, value):
            resp = await axil.write(ctx, addr, value)
            if resp != OKAY:
                raise AssertionError(f"SLVERR writing {value:#x} to {addr:#x}")

        async def read32(addr):
            data, resp = await axil.read(ctx, addr)
            if resp != OKAY:
                raise AssertionError(f"SLVERR reading {addr:#x}")
            return data

        async def sleep(cycles):
            await ctx.tick().repeat(cycles)

        host = AceHost(write32, read32, config, COUNTERS, sleep=sleep)
        await host.check_params()
        for node in assembled.nodes:
            monitor.take()
            await host.load_program(node, stage_base=0x8000_0000 + node.node * 0x1000)
            limits = default_limits(node, config)
            checks.append(("imem", node, [e[2] for e in monitor.take() if e[1] == "imem_we"]))
            checks.append(("table", node, limits, {
                "node_id": ctx.get(dut.node_id), "placement": ctx.get(dut.placement),
                "channel_enable": ctx.get(dut.channel_enable),
                "stage_base": ctx.get(dut.stage_base),
                **{f"base_{b}": ctx.get(getattr(dut, f"buf_base_{b}")) for b in "ios"},
                **{f"limit_{b}": ctx.get(getattr(dut, f"buf_limit_{b}")) for b in "ios"}}))
        # A run that completes.
        await host.set_irq_enable(done=True)
        await host.start()
        status = await host.wait_done(interval=8)
        checks.append(("done", status, await host.steps_done(), ctx.get(dut.irq)))
        # A run that fails, and the error clear.
        engine.fail = (ErrorCause.BAD_LINK.value, 1, 3)
        await host.start()
        try:
            await host.wait_done(interval=8)
            checks.append(("error", None))
        except AceError as error:
            checks.append(("error", str(error), error.status))
        await host.clear_error()
        await ctx.tick().repeat(2)
        checks.append(("cleared", await host.status()))
        # Counters: a snapshot taken during the call, and read-and-clear.
        low = counter_value(0, ctx.get(harness.cycle))
        counts = await host.counters()
        high = counter_value(0, ctx.get(harness.cycle))
        monitor.take()
        await host.counters(clear=True)
        checks.append(("counters", low, counts, high, monitor.take()))

    simulate(harness, testbench, [monitor.run, engine.run])
    assert [check[0] for check in checks] == ["imem", "table"] * len(assembled.nodes) + [
        "done", "error", "cleared", "counters"]
    for check in checks:
        kind = check[0]
        if kind == "imem":
            _, node, writes = check
            want = [(c, k, from_words(words[INSTR_WORDS * k:INSTR_WORDS * (k + 1)]))
                    for c, words in enumerate(node.words)
                    for k in range(len(words) // INSTR_WORDS)]
            assert writes == want
            assert [w[2] for w in writes] == [i for ints in node.instructions for i in ints]
        elif kind == "table":
            _, node, limits, got = check
            assert got == {
                "node_id": node.node, "placement": int(node.placement == "memory"),
                "channel_enable": (1 << len(node.words)) - 1,
                "stage_base": 0x8000_0000 + node.node * 0x1000,
                **{f"base_{b}": node.buffer_base[b] for b in "ios"},
                **{f"limit_{b}": limits[b] for b in "ios"}}
            if node.placement == "sram":
                assert limits["i"] == config.input_buffer_words
        elif kind == "done":
            _, status, steps, irq = check
            assert status["done"] and status["idle"] and not status["error"] and status["irq"]
            assert steps == [10 + c for c in range(config.num_channels)] and irq == 1
        elif kind == "error":
            assert check[1] is not None, "wait_done did not raise on ERROR"
            assert "BAD_LINK" in check[1] and "channel 1 pc 3" in check[1]
            assert check[2]["error_cause"] is ErrorCause.BAD_LINK
        elif kind == "cleared":
            assert not check[1]["error"] and check[1]["error_cause"] is ErrorCause.NONE
        elif kind == "counters":
            _, low, counts, high, events = check
            assert set(counts) == set(COUNTERS)
            assert low <= counts["cnt_cycles"] <= high
            cycle = (counts["cnt_cycles"] - counter_value(0, 0)) // 0x0200_0002
            assert counts == {n: counter_value(k, cycle) for k, n in enumerate(COUNTERS)}
            assert [name for _, name, _ in events] == ["counter_clear"]
