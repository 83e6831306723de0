"""cocotb testbench of one ACE engine (top ``ace_engine``) with its links in loopback.

The TB owns the clock and reset, a cocotbext-axi ``AxiLiteMaster`` on the CSRs (driven through
:class:`ace.sw.host.AceHost`), an ``AxiRam`` behind ``m_axi`` and, per link, an AXI-Stream sink on
``tx{l}`` whose packets come back on ``rx{l}`` after ``LINK_LATENCY`` cycles (loopback: the
engine is its own peer). Expected results, memory traffic and link bytes come from the golden
model (:mod:`ace.sw.golden`) running the same program.

Scenarios: random one-node programs that use every step type on every channel, with a
cross-channel dependency, in fp32/bf16/int32 with sum and max, in the three placements (``sram``
= ACE mode, ``memory`` = the staged baseline, ``p2p`` = the point-to-point baseline), with and
without backpressure; one small program per step type and mode whose measured memory bytes
must equal the documented accounting (:mod:`testbench.accounting`); and bad programs, each of
which must stop with its error cause and leave the engine able to run the next program.
``ENGINE_SEED`` sets the base seed; seeds are printed.
"""

from __future__ import annotations

import json
import os
import random

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles
from cocotbext.axi import (AxiBus, AxiLiteBus, AxiLiteMaster, AxiRam, AxiStreamBus,
                           AxiStreamSink, AxiStreamSource)

from ace.sw import golden
from ace.config import AceConfig
from ace.regmap import CSR, ErrorCause
from ace.hw.engine import counter_names
from ace.sw.host import AceHost
from ace.isa import encode, to_words
from ace.layouts import DTYPE_BYTES, Dtype, ReduceOp
from ace.numerics import special_values
from ace.sw.program import (Channel, CollectiveProgram, NodeProgram, Step, assemble)
from ace.vocab import Mode
from testbench.accounting import documented_bytes
from testbench.inputs import zero_inputs

MEM_SIZE = 1 << 20
LINK_LATENCY = 8
STAGE_BASE = 0xF0000


def _pauses(rng, probability):
    while True:
        yield rng.random() < probability


class EngineTB:
    def __init__(self, dut, config: AceConfig, *, backpressure: bool = False, seed: int = 1):
        self.dut = dut
        zero_inputs(dut)
        self.config = config
        self.rng = random.Random(seed)
        cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil_"), dut.clk, dut.rst)
        self.ram = AxiRam(AxiBus.from_prefix(dut, "m_axi_"), dut.clk, dut.rst, size=MEM_SIZE)
        self.names = counter_names(config)
        self.host = AceHost(self._write32, self._read32, config, self.names, sleep=self._sleep)
        self.tx = [AxiStreamSink(AxiStreamBus.from_prefix(dut, f"tx{l}_"), dut.clk, dut.rst)
                   for l in range(config.num_links)]
        self.rx = [AxiStreamSource(AxiStreamBus.from_prefix(dut, f"rx{l}_"), dut.clk, dut.rst)
                   for l in range(config.num_links)]
        if backpressure:
            for ch in (self.ram.write_if.aw_channel, self.ram.write_if.w_channel,
                       self.ram.read_if.ar_channel):
                ch.set_pause_generator(_pauses(self.rng, 0.3))
            for ch in (self.ram.read_if.r_channel, self.ram.write_if.b_channel):
                ch.set_pause_generator(_pauses(self.rng, 0.3))
            for tx in self.tx:
                tx.set_pause_generator(_pauses(self.rng, 0.25))
        for l in range(config.num_links):
            cocotb.start_soon(self._loop(l))

    async def _write32(self, addr, value):
        await self.axil.write_dword(addr, value)

    async def _read32(self, addr):
        return await self.axil.read_dword(addr)

    async def _sleep(self, cycles):
        await ClockCycles(self.dut.clk, cycles)

    async def _loop(self, l):
        while True:
            frame = await self.tx[l].recv()
            await ClockCycles(self.dut.clk, LINK_LATENCY)
            await self.rx[l].send(frame)

    async def reset(self):
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, 5)
        self.dut.rst.value = 0
        await ClockCycles(self.dut.clk, 5)
        await self.host.check_params()
        await self.axil.write_dword(CSR["STAGE_BASE_LO"], STAGE_BASE)

    async def run(self, program: CollectiveProgram, inputs, *, timeout: int = 0,
                  clear_every: int | None = None):
        """Load, start, wait; return (status, golden result, counters, output bytes). With
        ``clear_every``, the counters are snapshot and cleared in one write every
        ``clear_every`` cycles of the run, and the counters returned are the sums of those
        snapshots and the last one (equal to a run's counts when no count is lost)."""
        expect = golden.run(program, inputs)
        assembled = assemble(program, self.config).nodes[0]
        self.ram.write(0, bytes(MEM_SIZE))
        image = expect.memory[0]
        initial = golden.place_inputs(program, inputs)[0]
        self.ram.write(0, initial.tobytes())
        await self.host.load_program(assembled)
        await self.host.set_timeout(timeout)
        await self.host.clear_counters()
        await self.host.start()
        if clear_every is None:
            status = await self.host.wait_done(interval=50, max_polls=20000,
                                               raise_on_error=False)
            counters = await self.host.counters()
        else:
            snapshots = []
            for _ in range(20000):
                await ClockCycles(self.dut.clk, clear_every)
                status = await self.host.status()
                snapshots.append(await self.host.counters(clear=True))
                if status["done"] or status["error"]:
                    break
            else:
                raise TimeoutError(f"engine not done after {20000 * clear_every} cycles")
            snapshots.append(await self.host.counters())
            counters = {name: sum(snap[name] for snap in snapshots)
                        for name in self.host.counter_names}
        node = program.nodes[0]
        esize = DTYPE_BYTES[program.dtype]
        out = self.ram.read(node.output_addr, node.out_elems * esize)
        want = image[node.output_addr:node.output_addr + node.out_elems * esize].tobytes()
        return status, expect, counters, out, want


def loopback_program(config, rng, dtype, op, placement, channels):
    """One node, ``channels`` channels; each channel runs every step type once or more on its
    own link (its messages come back to it) and its own SRAM/memory regions; channel c > 0
    starts after channel c - 1's third step (a cross-channel dependency)."""
    esize = DTYPE_BYTES[dtype]
    epw = config.link_bytes // esize
    limit = config.packet_bytes // esize
    region = 8 * limit                          # elements per channel in each buffer
    in_elems = channels * limit
    out_slot = 2 * (-(-limit // epw) * epw)
    out_elems = channels * out_slot
    obase = -(-out_elems // epw) * epw          # working o slices start after the output
    input_addr, output_addr, scratch_addr = 0x0, 0x40000, 0x80000
    chans = []
    for c in range(channels):
        n = rng.randint(1, limit)
        link = c % config.num_links
        I = ("i", c * region)
        o = [("o", obase + c * region + k * (-(-limit // epw) * epw)) for k in range(6)]
        to = dict(send_peer=0, send_link=link)
        frm = dict(recv_peer=0, recv_link=link)
        out = output_addr + c * out_slot * esize
        steps = [
            Step("load", n, dst=I, mem_addr=input_addr + c * limit * esize),
            Step("s", n, src=I, **to),
            Step("rrcs", n, src=I, dst=o[0], **frm, **to),
            Step("rcs", n, dst=o[1], **frm, **to),
            Step("rrs", n, src=o[0], **frm, **to),
            Step("r", n, dst=o[2], **frm),
            Step("cpy", n, src=o[2], dst=o[3]),
            Step("re", n, src=I, dst=o[3]),
            Step("s", n, src=o[1], **to),
            Step("rrc", n, src=o[0], dst=o[4], **frm),
            Step("nop"),
            Step("store", n, src=o[3], mem_addr=out),
            Step("store", n, src=o[4], mem_addr=out + (out_slot // 2) * esize),
        ]
        for step in steps:
            step.dtype, step.op = dtype, op
        if c > 0:
            steps[0].dep = (c - 1, 2)
        chans.append(Channel(steps))
    node = NodeProgram(0, chans, placement=placement, input_addr=input_addr,
                       output_addr=output_addr, scratch_addr=scratch_addr, in_elems=in_elems,
                       out_elems=out_elems)
    return CollectiveProgram("custom", "loopback", dtype, op, in_elems, [node])


def random_inputs(rng: np.random.Generator, dtype, count):
    bits = {Dtype.INT32: 32, Dtype.FP32: 32, Dtype.BF16: 16, Dtype.FP16: 16}[dtype]
    raw = rng.integers(0, 1 << bits, size=count, dtype=np.uint64)
    if dtype in (Dtype.FP32, Dtype.BF16, Dtype.FP16):
        specials = np.array(special_values(dtype), dtype=np.uint64)
        pick = rng.random(count) < 0.1
        raw[pick] = rng.choice(specials, size=int(pick.sum()))
        # Mostly ordinary magnitudes so sums do not all overflow to infinity.
        small = rng.random(count) < 0.6
        sign = raw & (1 << (bits - 1))
        raw[small] = sign[small] | (raw[small] & ((1 << (bits - 2)) - 1))
    return raw.astype({32: np.uint32, 16: np.uint16}[bits])


def _check_counters(config, counters, expect, where, program=None):
    """The engine's counters equal the golden model's; with ``program``, its memory bytes
    also equal the documented accounting of the program's steps."""
    if program is not None:
        node = program.nodes[0]
        steps = [(st.type, st.nbytes) for ch in node.channels for st in ch.steps]
        read, written = documented_bytes(node.mode, steps)
        got = (counters["mem_read_bytes"], counters["mem_write_bytes"])
        assert got == (read, written), (
            f"{where}: memory read/written {got} != documented {(read, written)}")
    assert counters["mem_read_bytes"] == expect.mem_read_bytes[0], (
        f"{where}: mem_read_bytes {counters['mem_read_bytes']} != golden "
        f"{expect.mem_read_bytes[0]}")
    assert counters["mem_write_bytes"] == expect.mem_write_bytes[0], (
        f"{where}: mem_write_bytes {counters['mem_write_bytes']} != golden "
        f"{expect.mem_write_bytes[0]}")
    for l in range(config.num_links):
        want = expect.link_tx_bytes.get((0, l), 0)
        got = counters[f"link{l}_tx_payload_bytes"]
        assert got == want, f"{where}: link {l} tx payload {got} != golden {want}"
        got = counters[f"link{l}_rx_payload_bytes"]
        assert got == expect.link_rx_bytes.get((0, l), 0), f"{where}: link {l} rx payload {got}"
    steps = sum(counters[f"ch{c}_steps"] for c in range(config.num_channels))
    assert steps == expect.steps_executed, f"{where}: steps {steps} != {expect.steps_executed}"


async def _random_programs(dut, backpressure):
    config = AceConfig.from_dict(json.loads(os.environ["ACE_CONFIG"]))
    base = int(os.environ.get("ENGINE_SEED", "1"))
    tb = EngineTB(dut, config, backpressure=backpressure, seed=base)
    await tb.reset()
    k = 0
    for placement in (mode.placement for mode in Mode):
        for dtype in (Dtype.FP32, Dtype.BF16, Dtype.INT32):
            for op in (ReduceOp.SUM, ReduceOp.MAX):
                seed = base * 1000 + k
                k += 1
                where = (f"seed {seed} {placement} {dtype.name} {op.name} "
                         f"backpressure={backpressure}")
                dut._log.info("program: %s", where)
                rng = random.Random(seed)
                program = loopback_program(config, rng, dtype, op, placement,
                                           config.num_channels)
                inputs = [random_inputs(np.random.default_rng(seed), dtype,
                                        program.nodes[0].in_elems)]
                # With backpressure the counters are also read and cleared every 97 cycles
                # of the run: their sums must still be the golden model's.
                status, expect, counters, out, want = await tb.run(
                    program, inputs, clear_every=97 if backpressure else None)
                assert not status["error"], f"{where}: {AceHost.describe_error(status)}"
                assert out == want, f"{where}: output differs from the golden model"
                _check_counters(config, counters, expect, where, program)


@cocotb.test()
async def test_loopback_programs(dut):
    await _random_programs(dut, backpressure=False)


@cocotb.test()
async def test_loopback_backpressure(dut):
    await _random_programs(dut, backpressure=True)


#: Per step type, the program that measures it on one looped-back channel, after a ``load``
#: of the input: the step, with a ``s`` that feeds its receive and an ``r`` that takes what it
#: sends (each written output slice is stored at the end). ``I``: the input slice, ``O``/``O2``: output slices.
_STEP_CASES = {
    "load": [],
    "store": [("store", {"src": "I"})],
    "s": [("s", {"src": "I"}), ("r", {"dst": "O"})],
    "r": [("s", {"src": "I"}), ("r", {"dst": "O"})],
    "rcs": [("s", {"src": "I"}), ("rcs", {"dst": "O"}), ("r", {"dst": "O2"})],
    "rrc": [("s", {"src": "I"}), ("rrc", {"src": "I", "dst": "O"})],
    "rrs": [("s", {"src": "I"}), ("rrs", {"src": "I"}), ("r", {"dst": "O"})],
    "rrcs": [("s", {"src": "I"}), ("rrcs", {"src": "I", "dst": "O"}), ("r", {"dst": "O2"})],
    "cpy": [("cpy", {"src": "I", "dst": "O"})],
    "re": [("cpy", {"src": "I", "dst": "O"}), ("re", {"src": "I", "dst": "O"})],
}


def step_case_program(config, step_type, placement, n):
    """The program of ``_STEP_CASES[step_type]`` for ``n`` fp32 elements (at most a packet),
    ending with a store of the output slices."""
    epw = config.link_bytes // 4
    slot = -(-n // epw) * epw
    output_addr = 0x40000
    slices = {"I": ("i", 0), "O": ("o", 0), "O2": ("o", slot)}
    link = dict(send_peer=0, send_link=0, recv_peer=0, recv_link=0)
    steps = []
    case = [("load", {"dst": "I"}), *_STEP_CASES[step_type]]
    for kind, operands in case:
        fields = {name: slices[ref] for name, ref in operands.items()}
        if kind in ("load", "store"):
            fields["mem_addr"] = 0 if kind == "load" else output_addr
        steps.append(Step(kind, n, dtype=Dtype.FP32, op=ReduceOp.SUM, **fields, **link))
    written = sorted({ref for _, ops in case for ref in ops.values()} - {"I"})
    for k, ref in enumerate(written):
        steps.append(Step("store", n, src=slices[ref], mem_addr=output_addr + k * slot * 4,
                          dtype=Dtype.FP32, op=ReduceOp.SUM))
    node = NodeProgram(0, [Channel(steps)], placement=placement, input_addr=0,
                       output_addr=output_addr, scratch_addr=0x80000, in_elems=n,
                       out_elems=2 * slot)
    return CollectiveProgram("custom", "loopback", Dtype.FP32, ReduceOp.SUM, n, [node])


@cocotb.test()
async def test_step_accounting(dut):
    """Every step type in every mode: bit-exact, and the memory bytes the engine counts equal
    the documented accounting (and the golden model's)."""
    config = AceConfig.from_dict(json.loads(os.environ["ACE_CONFIG"]))
    base = int(os.environ.get("ENGINE_SEED", "1"))
    tb = EngineTB(dut, config, seed=base)
    await tb.reset()
    for k, (mode, step_type) in enumerate((m, t) for m in Mode for t in _STEP_CASES):
        seed = base * 1000 + 500 + k
        rng = random.Random(seed)
        n = rng.randint(1, config.packet_bytes // 4)
        where = f"seed {seed} {mode} {step_type} ({n} fp32)"
        program = step_case_program(config, step_type, mode.placement, n)
        inputs = [random_inputs(np.random.default_rng(seed), Dtype.FP32, n)]
        status, expect, counters, out, want = await tb.run(program, inputs)
        assert not status["error"], f"{where}: {AceHost.describe_error(status)}"
        assert out == want, f"{where}: output differs from the golden model"
        _check_counters(config, counters, expect, where, program)
        dut._log.info("%s: read %d written %d", where, counters["mem_read_bytes"],
                      counters["mem_write_bytes"])


def _raw_program(config, words_per_channel):
    """A one-node program given as raw instruction ints per channel (bypasses the assembler's
    checks, as a buggy or hostile host could)."""
    from ace.sw.program import AssembledNode
    base = {"i": 0, "o": config.input_buffer_words, "s": 0}
    words = [[w for i in ints for w in to_words(i)] for ints in words_per_channel]
    return AssembledNode(0, "sram", base, words_per_channel, words)


@cocotb.test()
async def test_bad_programs(dut):
    config = AceConfig.from_dict(json.loads(os.environ["ACE_CONFIG"]))
    tb = EngineTB(dut, config)
    await tb.reset()
    end = encode(opcode="end")
    good_load = encode(opcode="load", dtype="int32", count=4, dst_buf="i", mem_addr=0)
    bad_opcode = good_load & ~0xF | 12
    cases = [
        ("reserved opcode", [[good_load, bad_opcode, end]], ErrorCause.BAD_OPCODE, 0, 1),
        ("reserved bits", [[good_load | (1 << 12), end]], ErrorCause.BAD_OPCODE, 0, 0),
        ("buffer selector 3", [[encode(opcode="cpy", count=4, src_buf="i", dst_buf="o") |
                                (3 << 8), end]], ErrorCause.BAD_BUFFER, 0, 0),
        ("slice past the buffer",
         [[encode(opcode="cpy", count=8, src_buf="i", dst_buf="o",
                  dst_off=config.output_buffer_words - 1), end]], ErrorCause.BAD_ADDRESS, 0, 0),
        ("memory address past mem_addr_bits",
         [[encode(opcode="load", count=4, dst_buf="i", mem_addr=1 << config.mem_addr_bits),
           end]], ErrorCause.BAD_ADDRESS, 0, 0),
        ("link out of range",
         [[encode(opcode="s", count=4, src_buf="i", send_link=config.num_links), end]],
         ErrorCause.BAD_LINK, 0, 0),
        ("zero count", [[encode(opcode="cpy", count=0, src_buf="i", dst_buf="o"), end]],
         ErrorCause.BAD_COUNT, 0, 0),
        ("dependency on a step that never comes",
         [[encode(opcode="nop", dep_valid=1, dep_channel=1, dep_step=5), end],
          [encode(opcode="nop"), end]], ErrorCause.DEP_NEVER, 0, 0),
        ("dependency on a missing channel",
         [[encode(opcode="nop", dep_valid=1, dep_channel=config.num_channels, dep_step=0),
           end]], ErrorCause.BAD_DEP, 0, 0),
        ("no end", [[encode(opcode="nop")] * config.program_words], ErrorCause.PC_OVERFLOW, 0,
         config.program_words),
    ]
    for name, channels, cause, channel, pc in cases:
        node = _raw_program(config, channels)
        await tb.host.load_program(node)
        await tb.host.start()
        status = await tb.host.wait_done(interval=20, max_polls=2000, raise_on_error=False)
        dut._log.info("%s: %s", name, status)
        assert status["error"], f"{name}: no error reported ({status})"
        assert status["error_cause"] == cause, f"{name}: cause {status['error_cause']!r}"
        assert status["error_channel"] == channel and status["error_pc"] == pc, (
            f"{name}: channel {status['error_channel']} pc {status['error_pc']}")
        await tb.host.clear_error()
        status = await tb.host.status()
        assert not status["error"] and not status["busy"], f"{name}: not cleared ({status})"
    # The reserved PLACEMENT value: refused at the first fetch, then cleared.
    await tb.host.load_program(_raw_program(config, [[good_load, end]]))
    await tb.axil.write_dword(CSR["PLACEMENT"], 3)
    await tb.host.start()
    status = await tb.host.wait_done(interval=20, max_polls=2000, raise_on_error=False)
    assert status["error"] and status["error_cause"] == ErrorCause.BAD_PLACEMENT, status
    assert status["error_channel"] == 0 and status["error_pc"] == 0, status
    await tb.host.clear_error()
    # A receive that never comes: the watchdog stops it, and the engine recovers.
    recv = encode(opcode="r", count=4, dst_buf="o", recv_link=0, recv_peer=0)
    await tb.host.load_program(_raw_program(config, [[recv, end]]))
    await tb.host.set_timeout(200)
    await tb.host.start()
    status = await tb.host.wait_done(interval=50, max_polls=200, raise_on_error=False)
    assert status["error"] and status["error_cause"] == ErrorCause.TIMEOUT, status
    await tb.host.clear_error()
    # And then a good program runs to completion, bit-exact.
    rng = random.Random(7)
    program = loopback_program(config, rng, Dtype.FP32, ReduceOp.SUM, "sram", 1)
    inputs = [random_inputs(np.random.default_rng(7), Dtype.FP32, program.nodes[0].in_elems)]
    status, expect, counters, out, want = await tb.run(program, inputs)
    assert not status["error"], AceHost.describe_error(status)
    assert out == want, "the program after the errors differs from the golden model"
