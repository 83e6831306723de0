"""cocotb tests of the ``ace_sram`` top (one engine SRAM buffer with the engine's port set).

The ports are Amaranth ``lib.stream`` ports flattened to ``rd{i}__req__{payload,valid,ready}``,
``rd{i}__resp__{payload,valid,ready}`` and ``wr{j}__{payload,valid,ready}``; ``wr{j}__payload``
is an :class:`ace.layouts.SramWrite` packed low field first. cocotbext-axi does not match these
names, so :class:`StreamSource` and :class:`StreamSink` drive them.

Timing discipline: one loop per cycle (:meth:`TB.run`). Inputs change only just after a rising
edge; handshakes are sampled at the falling edge, when every combinational ``ready``/``valid`` has
settled to the values the next rising edge will see. The :class:`Scoreboard` holds the reference
memory: reads transferred in a cycle see the memory before that cycle's writes (the SRAM's
documented read-before-write rule).

Environment: ``ACE_CONFIG`` (JSON of the :class:`AceConfig`), ``ACE_SEED`` (seed of the random
traffic; defaults to cocotb's seed, logged either way).
"""

from __future__ import annotations

import itertools
import json
import os
import random
from collections import deque

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, RisingEdge

from ace.config import AceConfig
from ace.layouts import SramWrite
from ace.hw.sram.banked import EngineSramPorts
from ace.hw.tops.sram import SramBufferTop
from testbench.inputs import zero_inputs

MAX_CYCLES = 20_000


def load_config() -> AceConfig:
    return AceConfig(**json.loads(os.environ["ACE_CONFIG"]))


class StreamSource:
    """Drives one flattened stream (``<prefix>__payload/valid/ready``) from a queue of packed
    payloads; ``idle`` is the chance of an idle cycle before each new item. ``valid`` and
    ``payload`` hold until the transfer, as the stream rules require."""

    def __init__(self, dut, prefix: str, rng: random.Random, *, idle: float = 0.0):
        self.valid = getattr(dut, f"{prefix}__valid")
        self.ready = getattr(dut, f"{prefix}__ready")
        self.payload = getattr(dut, f"{prefix}__payload")
        self.rng = rng
        self.idle = idle
        self.queue: deque = deque()
        self.current = None
        self.transfers = 0
        self._valid_driven = None

    def _set_valid(self, value: int):
        if value != self._valid_driven:
            self.valid.value = value
            self._valid_driven = value

    def drive(self):
        """Call just after a rising edge."""
        if self.current is None and self.queue and not (self.idle and
                                                        self.rng.random() < self.idle):
            self.current = self.queue.popleft()
            self.payload.value = self.current
        self._set_valid(0 if self.current is None else 1)

    def sample(self):
        """Call at the falling edge; returns the payload transferred at the next rising edge."""
        if self.current is not None and int(self.ready.value):
            item, self.current = self.current, None
            self.transfers += 1
            return item
        return None

    @property
    def busy(self) -> bool:
        return self.current is not None or bool(self.queue)


class StreamSink:
    """Accepts one flattened stream; ``ready`` follows ``pattern`` (an iterator of 0/1)."""

    def __init__(self, dut, prefix: str, pattern=None):
        self.valid = getattr(dut, f"{prefix}__valid")
        self.ready = getattr(dut, f"{prefix}__ready")
        self.payload = getattr(dut, f"{prefix}__payload")
        self.pattern = pattern if pattern is not None else itertools.repeat(1)
        self.transfers = 0
        self._ready = None

    def drive(self):
        ready = next(self.pattern)
        if ready != self._ready:
            self.ready.value = ready
            self._ready = ready

    def sample(self):
        if self._ready and int(self.valid.value):
            self.transfers += 1
            return int(self.payload.value)
        return None


class ReadPort:
    """Driver and monitor of read port ``rd{index}``: address source plus response sink."""

    def __init__(self, dut, index: int, rng, *, idle=0.0, pattern=None):
        self.index = index
        self.req = StreamSource(dut, f"rd{index}__req", rng, idle=idle)
        self.resp = StreamSink(dut, f"rd{index}__resp", pattern)

    def drive(self):
        self.req.drive()
        self.resp.drive()


class WritePort:
    """Driver and monitor of write port ``wr{index}``."""

    def __init__(self, dut, index: int, rng, layout: SramWrite, *, idle=0.0):
        self.index = index
        self.layout = layout
        self.source = StreamSource(dut, f"wr{index}", rng, idle=idle)

    def push(self, addr: int, data: int, mask: int):
        self.source.queue.append(
            self.layout.const({"addr": addr, "data": data, "mask": mask}).as_bits())

    def drive(self):
        self.source.drive()


class Scoreboard:
    """Reference memory, expected read responses per port, latency and collision counts.

    The SRAM has no power-up contents (ace.flow.convert; the simulation starts it random), so
    the reference knows a byte only once it is written, and a read is compared on its known
    bytes. ``checked_bytes`` counts the bytes compared, ``read_bytes`` all bytes read."""

    def __init__(self, words: int, word_bytes: int, read_ports: int, layout: SramWrite):
        self.word_bytes = word_bytes
        self.layout = layout
        self.memory = [0] * words
        self.known = [0] * words            # bit mask of the bits written so far
        self.expected = [deque() for _ in range(read_ports)]
        self.errors: list[str] = []
        self.latencies: list[int] = []
        self.collisions = 0
        self.checked = 0
        self.checked_bytes = 0
        self.read_bytes = 0

    def read_issued(self, port: int, addr: int, cycle: int):
        self.expected[port].append((addr, self.memory[addr], self.known[addr], cycle))

    def response(self, port: int, data: int, cycle: int):
        if not self.expected[port]:
            self.errors.append(f"cycle {cycle}: rd{port} response {data:#x} without request")
            return
        addr, want, known, issued = self.expected[port].popleft()
        self.latencies.append(cycle - issued)
        self.checked += 1
        self.read_bytes += self.word_bytes
        self.checked_bytes += known.bit_count() // 8
        if (data ^ want) & known:
            self.errors.append(f"cycle {cycle}: rd{port} addr {addr:#x}: got {data:#x}, "
                               f"expected {want:#x} in the written bytes {known:#x}")

    def write(self, packed: int, read_addrs: set):
        value = self.layout.from_bits(packed)
        addr, data, mask = int(value.addr), int(value.data), int(value.mask)
        self.collisions += addr in read_addrs
        old = self.memory[addr]
        for byte in range(self.word_bytes):
            if mask >> byte & 1:
                sel = 0xFF << (8 * byte)
                old = (old & ~sel) | (data & sel)
                self.known[addr] |= sel
        self.memory[addr] = old

    @property
    def idle(self) -> bool:
        return not any(self.expected)


class TB:
    """Clock, reset, every port's driver/monitor and the scoreboard of one ``ace_sram``."""

    def __init__(self, dut, *, idle=0.0, backpressure=None, seed=None):
        zero_inputs(dut)
        self.dut = dut
        self.config = load_config()
        self.ports = EngineSramPorts(self.config.num_links)
        self.words = self.config.input_buffer_words
        self.word_bytes = self.config.link_bytes
        self.banks = self.config.sram_banks
        top = SramBufferTop(self.config)
        self.read_latency = top.read_latency
        top._MustUse__silence = True
        env_seed = os.environ.get("ACE_SEED")
        self.seed = int(env_seed) if env_seed else (seed if seed is not None
                                                    else random.getrandbits(32))
        dut._log.info(f"seed {self.seed} (rerun with ACE_SEED={self.seed})")
        self.rng = random.Random(self.seed)
        self.layout = SramWrite(self.words, self.word_bytes)
        self.rd = [ReadPort(dut, i, self.rng, idle=idle,
                            pattern=backpressure(i) if backpressure else None)
                   for i in range(self.ports.read_ports)]
        self.wr = [WritePort(dut, j, self.rng, self.layout, idle=idle)
                   for j in range(self.ports.write_ports)]
        self.scoreboard = Scoreboard(self.words, self.word_bytes, len(self.rd), self.layout)
        self.cycle = 0
        # Transfer cycles per port, for throughput.
        self.read_fires = [[] for _ in self.rd]
        self.write_fires = [[] for _ in self.wr]
        cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())

    async def reset(self):
        for port in self.rd:
            port.req.valid.value = 0
            port.resp.ready.value = 0
        for port in self.wr:
            port.source.valid.value = 0
        self.dut.rst.value = 1
        for _ in range(3):
            await RisingEdge(self.dut.clk)
        self.dut.rst.value = 0

    def busy(self) -> bool:
        return (any(p.req.busy for p in self.rd) or any(p.source.busy for p in self.wr)
                or not self.scoreboard.idle)

    async def run(self, *, cycles: int | None = None):
        """Run until every queue is drained and answered (or for ``cycles`` cycles)."""
        board = self.scoreboard
        end = self.cycle + cycles if cycles is not None else None
        while (self.cycle < end) if end is not None else self.busy():
            assert self.cycle < MAX_CYCLES, (
                f"watchdog: still busy after {MAX_CYCLES} cycles (seed {self.seed})")
            await RisingEdge(self.dut.clk)
            for port in self.rd:
                port.drive()
            for port in self.wr:
                port.drive()
            await FallingEdge(self.dut.clk)
            read_addrs = set()
            for port in self.rd:
                data = port.resp.sample()
                if data is not None:
                    board.response(port.index, data, self.cycle)
                addr = port.req.sample()
                if addr is not None:
                    self.read_fires[port.index].append(self.cycle)
                    read_addrs.add(addr)
                    board.read_issued(port.index, addr, self.cycle)
            for port in self.wr:
                packed = port.source.sample()
                if packed is not None:
                    self.write_fires[port.index].append(self.cycle)
                    board.write(packed, read_addrs)
            self.cycle += 1
        assert not board.errors, f"{len(board.errors)} mismatches (seed {self.seed}): " \
            + "; ".join(board.errors[:5])

    # -- traffic -------------------------------------------------------------------------------

    def random_traffic(self, count: int):
        """``count`` random operations per port. Most addresses fall in a small hot set, so
        bank conflicts and same-word reads and writes in one cycle are frequent."""
        hot = [self.rng.randrange(self.words) for _ in range(3 * self.banks)]

        def addr():
            return self.rng.choice(hot) if self.rng.random() < 0.7 \
                else self.rng.randrange(self.words)

        full = (1 << self.word_bytes) - 1
        for port in self.rd:
            port.req.queue.extend(addr() for _ in range(count))
        for port in self.wr:
            for _ in range(count):
                mask = full if self.rng.random() < 0.5 else self.rng.getrandbits(self.word_bytes)
                port.push(addr(), self.rng.getrandbits(8 * self.word_bytes), mask)

    def streaming_traffic(self, count: int, read_ports, write_ports):
        """Sequential addresses on the given ports, every stream starting in bank 0."""
        for n, i in enumerate(read_ports):
            base = self.banks * 11 * n
            self.rd[i].req.queue.extend((base + k) % self.words for k in range(count))
        for n, j in enumerate(write_ports):
            base = self.words // 2 + self.banks * 13 * n
            for k in range(count):
                self.wr[j].push((base + k) % self.words, self.rng.getrandbits(8 * self.word_bytes),
                                (1 << self.word_bytes) - 1)

    def rates(self, fires, warmup: int, window: int):
        return [sum(warmup <= c < warmup + window for c in port) / window for port in fires]


async def random_flow(dut, *, idle, backpressure, seed):
    tb = TB(dut, idle=idle, backpressure=backpressure, seed=seed)
    await tb.reset()
    tb.random_traffic(1000)
    await tb.run()
    board = tb.scoreboard
    dut._log.info(f"{board.checked} reads checked in {tb.cycle} cycles "
                  f"({board.checked_bytes} of {board.read_bytes} bytes written before), "
                  f"{board.collisions} same-word read/write cycles, "
                  f"latency min {min(board.latencies)} max {max(board.latencies)}")
    assert board.checked == 1000 * len(tb.rd)
    # Most reads fall in the hot set, which the writes fill within the first cycles.
    assert board.checked_bytes >= board.read_bytes // 2, "too few reads of written bytes"
    assert board.collisions > 0, "no same-word read and write in one cycle was exercised"
    assert min(board.latencies) >= tb.read_latency
    return tb


@cocotb.test()
async def test_random_no_pauses(dut):
    """Random reads and writes on every port at once, sources always valid, sinks always ready;
    the unloaded read latency is exactly the top's ``read_latency``."""
    tb = await random_flow(dut, idle=0.0, backpressure=None, seed=1)
    assert min(tb.scoreboard.latencies) == tb.read_latency


@cocotb.test()
async def test_random_idle_sources(dut):
    """Random traffic with idle source cycles (40% chance before each transfer)."""
    await random_flow(dut, idle=0.4, backpressure=None, seed=2)


@cocotb.test()
async def test_random_backpressure(dut):
    """Random traffic with response backpressure: ``ready`` 1,1,1,0 rotated per port, plus a
    port that is ready only one cycle in four (fills its response FIFO)."""
    def pattern(i):
        if i == 0:
            return itertools.cycle([1, 0, 0, 0])
        return itertools.islice(itertools.cycle([1, 1, 1, 0]), i, None)
    await random_flow(dut, idle=0.0, backpressure=pattern, seed=3)


@cocotb.test()
async def test_throughput(dut):
    """Every port streams sequential addresses with no pauses; words per cycle per port.

    Writes: ``write_ports <= banks`` in the engine's port set, so every write port must reach
    0.95. Reads: ``2L + 1`` read ports share ``banks`` banks; when all stream at once the banks
    saturate and are shared fairly. A second phase streams ``banks`` read ports only, each of
    which must then reach 0.95."""
    tb = TB(dut, seed=4)
    await tb.reset()
    warmup, window = 32, 400
    count = warmup + window + 64
    banks, rd_ports, wr_ports = tb.banks, len(tb.rd), len(tb.wr)

    tb.streaming_traffic(count, range(rd_ports), range(wr_ports))
    start = tb.cycle
    await tb.run(cycles=warmup + window)
    rd = tb.rates([[c - start for c in f] for f in tb.read_fires], warmup, window)
    wr = tb.rates([[c - start for c in f] for f in tb.write_fires], warmup, window)
    dut._log.info(f"all {rd_ports} read + {wr_ports} write ports streaming, {banks} banks: "
                  f"read words/cycle {rd}, write words/cycle {wr}")
    print(f"ace_sram throughput, all ports streaming: read {rd} write {wr}")
    await tb.run()  # drain and check every response
    assert min(wr) >= 0.95, f"write ports below line rate: {wr}"
    fair = min(1.0, banks / rd_ports)
    assert sum(rd) >= 0.95 * min(banks, rd_ports), f"banks not saturated: {rd}"
    assert min(rd) >= 0.95 * fair, f"unfair bank sharing: {rd}"

    active = list(range(min(banks, rd_ports)))
    tb.read_fires = [[] for _ in tb.rd]
    tb.write_fires = [[] for _ in tb.wr]
    tb.streaming_traffic(count, active, range(wr_ports))
    start = tb.cycle
    await tb.run(cycles=warmup + window)
    rd = tb.rates([[c - start for c in f] for f in tb.read_fires], warmup, window)
    wr = tb.rates([[c - start for c in f] for f in tb.write_fires], warmup, window)
    dut._log.info(f"read ports {active} + all write ports streaming: read words/cycle "
                  f"{[rd[i] for i in active]}, write words/cycle {wr}")
    print(f"ace_sram throughput, {len(active)} read ports streaming: "
          f"read {[rd[i] for i in active]} write {wr}")
    await tb.run()
    assert min(rd[i] for i in active) >= 0.95, f"read ports below line rate: {rd}"
    assert min(wr) >= 0.95, f"write ports below line rate: {wr}"
