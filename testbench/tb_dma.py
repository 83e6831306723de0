"""cocotb testbench of the DMA engine (top ``ace_dma``).

The TB owns the clock and reset, a cocotbext-axi RAM behind ``m_axi`` (:class:`ErrorAxiRam`,
which can answer SLVERR), the SRAM model (:class:`testbench.sram_model.SramModel`) on
``sram_w``/``sram_r``, cocotbext-axi stream models on ``rd_stream``/``wr_stream``, a descriptor
source and a completion sink. Every scenario runs three ways: ``plain`` (no pauses), ``idle``
(idle cycles on every source feeding the DUT: R, B, ``wr_stream``, SRAM responses, descriptors)
and ``backpressure`` (random ``ready`` low on every sink: AR, AW, W, ``rd_stream``, SRAM ports,
completions).

Scoreboards are byte exact: memory and SRAM are prefilled with random bytes and every byte
outside a descriptor's target must keep its value. Seeds are printed; ``DMA_SEED`` sets the base.

The memory port may be wider than the SRAM/stream words (``mem_bytes`` = 1, 2 or 4 x
``link_bytes``): ``W`` below is the SRAM and stream word, ``M`` the memory beat; every scenario
places starts and lengths relative to both.
"""

from __future__ import annotations

import json
import logging
import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import RisingEdge
from cocotbext.axi import AxiBus, AxiStreamBus, AxiStreamSink, AxiStreamSource
from cocotbext.axi.stream import define_stream

from ace.config import AceConfig
from ace.layouts import DmaCompletion, DmaDescriptor, DmaKind, DmaStatus
from testbench.axi_error_ram import ErrorAxiRam
from testbench.sram_model import SramModel
from testbench.inputs import zero_inputs

DescBus, _, DescSource, _, _ = define_stream(
    "DmaDesc", signals=["payload", "valid", "ready"])
CplBus, _, _, CplSink, _ = define_stream(
    "DmaCpl", signals=["payload", "valid", "ready"])

MODES = ("plain", "idle", "backpressure")
MEM_SIZE = 1 << 21
SRC_BASE, SRC_SIZE = 0x0000_0000, 1 << 20      # memory read by LOAD / MEM_TO_STREAM
DST_BASE, DST_SIZE = 0x0010_0000, 1 << 20      # memory written by STORE / STREAM_TO_MEM
READ_KINDS = (DmaKind.LOAD, DmaKind.MEM_TO_STREAM)


def _pauses(rng, probability):
    while True:
        yield rng.random() < probability


class Desc:
    def __init__(self, kind, ident, length, mem_addr, sram_addr, data=None):
        self.kind = kind
        self.id = ident
        self.length = length
        self.mem_addr = mem_addr
        self.sram_addr = sram_addr
        self.data = data        # STREAM_TO_MEM payload
        self.expect_error = None    # the injected AXI response, "SLVERR" or "DECERR"

    def __repr__(self):
        return (f"Desc({self.kind.name}, id={self.id}, len={self.length}, "
                f"mem=0x{self.mem_addr:x}, sram={self.sram_addr})")


class TB:
    def __init__(self, dut, mode: str, seed: int):
        self.dut = dut
        zero_inputs(dut)
        self.mode = mode
        self.seed = seed
        self.rng = random.Random(seed)
        self.cfg = AceConfig(**json.loads(os.environ["ACE_CONFIG"]))
        self.W = self.cfg.link_bytes       # SRAM and stream word
        self.M = self.cfg.mem_bytes        # memory beat
        self.words = self.cfg.input_buffer_words + self.cfg.output_buffer_words
        self.desc_layout = DmaDescriptor(self.cfg)
        self.cpl_layout = DmaCompletion()
        dut._log.info("DMA TB: mode=%s seed=%d, %d-byte words, %d-byte memory beats", mode, seed,
                      self.W, self.M)
        for port in ("m_axi_", "rd_stream_", "wr_stream_", "desc_", "cpl_"):
            logging.getLogger(f"cocotb.{dut._name}.{port}").setLevel(logging.WARNING)

        idle = 0.3 if mode == "idle" else 0.0
        stall = 0.3 if mode == "backpressure" else 0.0
        self.ram = ErrorAxiRam(AxiBus.from_prefix(dut, "m_axi_"), dut.clk, dut.rst,
                               size=MEM_SIZE)
        self.sram = SramModel(dut, dut.clk, self.words, self.W, rng=random.Random(seed + 1),
                              write_stall=stall, req_stall=stall, resp_idle=idle,
                              latency=(1, 4) if mode == "idle" else (1, 1))
        self.rd_sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "rd_stream_"), dut.clk,
                                     dut.rst)
        self.wr_src = AxiStreamSource(AxiStreamBus.from_prefix(dut, "wr_stream_"), dut.clk,
                                      dut.rst)
        self.desc_src = DescSource(DescBus.from_prefix(dut, "desc_"), dut.clk, dut.rst)
        self.cpl_sink = CplSink(CplBus.from_prefix(dut, "cpl_"), dut.clk, dut.rst)
        prng = random.Random(seed + 2)
        if idle:
            for ch in (self.ram.read_if.r_channel, self.ram.write_if.b_channel, self.wr_src,
                       self.desc_src):
                ch.set_pause_generator(_pauses(prng, idle))
        if stall:
            for ch in (self.ram.read_if.ar_channel, self.ram.write_if.aw_channel,
                       self.ram.write_if.w_channel, self.rd_sink, self.cpl_sink):
                ch.set_pause_generator(_pauses(prng, stall))
        dut.err_clear.value = 0
        self.cycle = 0
        self.overlap_cycles = 0     # cycles with an R and a W handshake at once
        self.reads_outstanding = 0
        self.max_reads_outstanding = 0
        self.completions = []

    async def start(self):
        Clock(self.dut.clk, 10, unit="ns").start()
        self.dut.rst.value = 1
        for _ in range(4):
            await RisingEdge(self.dut.clk)
        self.dut.rst.value = 0
        await RisingEdge(self.dut.clk)
        cocotb.start_soon(self._monitor())

    async def _monitor(self):
        d = self.dut
        while True:
            await RisingEdge(d.clk)
            self.cycle += 1
            r = int(d.m_axi__rvalid.value) and int(d.m_axi__rready.value)
            w = int(d.m_axi__wvalid.value) and int(d.m_axi__wready.value)
            if r and w:
                self.overlap_cycles += 1
            if int(d.m_axi__arvalid.value) and int(d.m_axi__arready.value):
                self.reads_outstanding += 1
            if r and int(d.m_axi__rlast.value):
                self.reads_outstanding -= 1
            self.max_reads_outstanding = max(self.max_reads_outstanding, self.reads_outstanding)
            assert self.reads_outstanding <= self.cfg.max_reads_in_flight, \
                f"{self.reads_outstanding} read bursts outstanding"
            while not self.cpl_sink.empty():
                raw = int(self.cpl_sink.recv_nowait().payload)
                cpl = self.cpl_layout.from_bits(raw)
                self.completions.append((int(cpl.id), DmaStatus(cpl.status)))

    # -- stimulus --------------------------------------------------------------------------

    def prefill(self):
        self.ram.write(SRC_BASE, self.rng.randbytes(SRC_SIZE))
        self.ram.write(DST_BASE, self.rng.randbytes(DST_SIZE))
        self.sram.mem[:] = self.rng.randbytes(len(self.sram.mem))
        self.mem_start = bytearray(self.ram.read(0, MEM_SIZE))
        self.sram_start = bytes(self.sram.mem)

    def submit(self, descs):
        for d in descs:
            raw = self.desc_layout.const({
                "kind": d.kind, "id": d.id, "length": d.length, "mem_addr": d.mem_addr,
                "sram_addr": d.sram_addr}).as_bits()
            self.desc_src.send_nowait(self.desc_src._transaction_obj(payload=raw))
            if d.kind == DmaKind.STREAM_TO_MEM and d.length:
                padded = -(-d.length // self.W) * self.W
                self.wr_src.send_nowait(d.data + self.rng.randbytes(padded - d.length))

    async def wait_completions(self, count, limit=50_000):
        start = self.cycle
        while len(self.completions) < count:
            await RisingEdge(self.dut.clk)
            assert self.cycle - start < limit, (
                f"timeout: {len(self.completions)} of {count} completions after {limit} cycles")

    async def wait_idle(self):
        """Until the engine is idle and every stream model has drained."""
        while int(self.dut.busy.value):
            await RisingEdge(self.dut.clk)
        for _ in range(10):
            await RisingEdge(self.dut.clk)

    # -- checking ---------------------------------------------------------------------------

    def check(self, descs, *, counters=True):
        """Byte-exact scoreboard of every descriptor's effect, plus completions and counters."""
        W = self.W
        mem_expect = bytearray(self.mem_start)
        sram_expect = bytearray(self.sram_start)
        frames = []
        for d in descs:
            if d.expect_error or d.length == 0:
                continue
            src = bytes(self.mem_start[d.mem_addr:d.mem_addr + d.length])
            if d.kind == DmaKind.LOAD:
                sram_expect[d.sram_addr * W:d.sram_addr * W + d.length] = src
            elif d.kind == DmaKind.MEM_TO_STREAM:
                frames.append((d.id, src))
            elif d.kind == DmaKind.STORE:
                mem_expect[d.mem_addr:d.mem_addr + d.length] = \
                    self.sram_start[d.sram_addr * W:d.sram_addr * W + d.length]
            else:
                mem_expect[d.mem_addr:d.mem_addr + d.length] = d.data
        bad = [d for d in descs if d.expect_error]
        mem_now = bytearray(self.ram.read(0, MEM_SIZE))
        sram_now = bytearray(self.sram.mem)
        for d in bad:   # a failed descriptor's target is undefined
            if d.kind == DmaKind.LOAD:
                lo, hi = d.sram_addr * W, d.sram_addr * W + d.length
                sram_now[lo:hi] = sram_expect[lo:hi]
            elif d.kind in (DmaKind.STORE, DmaKind.STREAM_TO_MEM):
                mem_now[d.mem_addr:d.mem_addr + d.length] = \
                    mem_expect[d.mem_addr:d.mem_addr + d.length]
        _compare("memory", mem_now, mem_expect, descs, self.M)
        _compare("SRAM", sram_now, sram_expect, descs, W)

        got_frames = []
        while not self.rd_sink.empty():
            frame = self.rd_sink.recv_nowait()
            got_frames.append((frame.tuser[0] if isinstance(frame.tuser, list) else frame.tuser,
                               bytes(frame.tdata)))
        bad_stream_ids = {d.id for d in bad if d.kind == DmaKind.MEM_TO_STREAM}
        got_frames = [f for f in got_frames if f[0] not in bad_stream_ids]
        assert len(got_frames) == len(frames), \
            f"{len(got_frames)} rd_stream frames, expected {len(frames)}"
        for (gid, gdata), (eid, edata) in zip(got_frames, frames):
            assert gid == eid and gdata == edata, f"rd_stream frame id {eid} differs (got {gid})"

        # Completions: each id once, with its status; in order per side.
        status = {d.id: expected_status(d) for d in descs}
        assert sorted(i for i, _ in self.completions) == sorted(status), \
            f"completion ids {sorted(i for i, _ in self.completions)}"
        for ident, st in self.completions:
            assert st == status[ident], f"descriptor {ident}: status {st}, expected {status[ident]}"
        by_id = {d.id: d for d in descs}
        for side in (True, False):
            order = [i for i, _ in self.completions
                     if by_id[i].length and (by_id[i].kind in READ_KINDS) == side]
            submitted = [d.id for d in descs if d.length and (d.kind in READ_KINDS) == side]
            assert order == submitted, f"completion order {order}, submitted {submitted}"

        if counters:
            rd = sum(d.length for d in descs if d.kind in READ_KINDS)
            wr = sum(d.length for d in descs if d.kind not in READ_KINDS)
            assert int(self.dut.bytes_read.value) == rd, \
                f"bytes_read {int(self.dut.bytes_read.value)}, moved {rd}"
            assert int(self.dut.bytes_written.value) == wr, \
                f"bytes_written {int(self.dut.bytes_written.value)}, moved {wr}"
            busy = int(self.dut.busy_cycles.value)
            assert 0 < busy <= self.cycle, f"busy_cycles {busy} of {self.cycle}"
        self.dut._log.info("checked %d descriptors (%d read bytes, %d written bytes), "
                           "%d cycles, %d cycles with R and W beats together, "
                           "up to %d read bursts outstanding",
                           len(descs), int(self.dut.bytes_read.value),
                           int(self.dut.bytes_written.value), self.cycle, self.overlap_cycles,
                           self.max_reads_outstanding)


def expected_status(d) -> DmaStatus:
    """The completion status of descriptor ``d``: OKAY, or the injected response on its side."""
    if not d.expect_error:
        return DmaStatus.OKAY
    side = "READ" if d.kind in READ_KINDS else "WRITE"
    return DmaStatus[f"{side}_{d.expect_error}"]


def _compare(what, got, expect, descs, unit):
    if got == expect:
        return
    diff = [i for i in range(len(got)) if got[i] != expect[i]]
    first = diff[0]
    raise AssertionError(f"{what}: {len(diff)} bytes differ, first at 0x{first:x} "
                         f"(got {got[first]:02x}, expected {expect[first]:02x}); "
                         f"descriptors near it: "
                         f"{[d for d in descs if _near(d, first, what, unit)][:4]}")


def _near(d, addr, what, unit):
    """Whether byte ``addr`` of the SRAM or memory lies within a word/beat (``unit`` bytes) of
    descriptor ``d``'s target."""
    if what == "SRAM":
        return d.kind in (DmaKind.LOAD, DmaKind.STORE) and \
            d.sram_addr * unit - unit <= addr < d.sram_addr * unit + d.length + unit
    return d.mem_addr - unit <= addr < d.mem_addr + d.length + unit


# -- descriptor generation -----------------------------------------------------------------

class Allocator:
    """Disjoint targets, so the final state is independent of the order of concurrent work."""

    def __init__(self, rng, cfg):
        self.rng = rng
        self.W = cfg.link_bytes
        self.words = cfg.input_buffer_words + cfg.output_buffer_words
        self.dst = DST_BASE
        self.sram_load = 0                  # LOAD targets: lower half of the SRAM space
        self.sram_store = self.words // 2   # STORE sources: upper half

    def make(self, kind, ident, length, *, mem_offset=None):
        rng = self.rng
        words = -(-length // self.W)
        if kind in READ_KINDS:
            mem = SRC_BASE + rng.randrange(SRC_SIZE - length - 64)
            if mem_offset is not None:
                mem = mem - mem % 4096 + mem_offset
        else:
            self.dst += rng.choice([0, 0, 1, rng.randrange(64)])
            if mem_offset is not None:
                self.dst += (mem_offset - self.dst) % 4096
            mem = self.dst
            self.dst += length
            assert self.dst < DST_BASE + DST_SIZE, "test allocates too much memory"
        sram = 0
        if kind == DmaKind.LOAD:
            if self.sram_load + words > self.words // 2:
                self.sram_load = 0
            sram = self.sram_load
            self.sram_load += words + rng.choice([0, 0, 1, 3])
        elif kind == DmaKind.STORE:
            sram = self.sram_store + rng.randrange(self.words // 2 - words)
        data = rng.randbytes(length) if kind == DmaKind.STREAM_TO_MEM else None
        return Desc(kind, ident, length, mem, sram, data)


def random_length(rng, cfg):
    W, M, burst = cfg.link_bytes, cfg.mem_bytes, cfg.max_burst_beats * cfg.mem_bytes
    return rng.choice([
        rng.randrange(1, W + 1),
        rng.randrange(1, 2 * M + 1),
        rng.randrange(1, 4 * M),
        rng.randrange(M, burst),
        rng.randrange(burst - M, burst + 2 * M),
        rng.randrange(burst, 3 * burst),
    ])


def random_mix(rng, cfg, count):
    alloc = Allocator(rng, cfg)
    kinds = list(DmaKind)
    descs = []
    sram_load_budget = (cfg.input_buffer_words + cfg.output_buffer_words) // 2 * cfg.link_bytes
    used = 0
    for ident in range(count):
        kind = rng.choice(kinds)
        length = 0 if rng.random() < 0.04 else random_length(rng, cfg)
        if kind == DmaKind.LOAD:
            used += length + 4 * cfg.link_bytes
            if used > sram_load_budget:
                kind = DmaKind.STORE
        descs.append(alloc.make(kind, ident, length))
    return descs


#: The longest descriptor of the directed cases (the SRAM space's LOAD half is 64 KiB in the
#: configurations the suite runs; the length field allows 16 MiB - 1, see docs/dma.md).
LONG_BYTES = 24 * 1024 + 5


def directed(rng, cfg):
    """Corner cases: start offsets at and around every word boundary of a memory beat, lengths
    around word, beat and burst sizes, zero length, 4 KiB crossings, single bytes at the end of
    a 4 KiB page, longest bursts back to back, and one long unaligned descriptor per kind."""
    W, M, burst = cfg.link_bytes, cfg.mem_bytes, cfg.max_burst_beats * cfg.mem_bytes
    alloc = Allocator(rng, cfg)
    descs = []
    cases = []
    offsets = sorted({o % M for n in range(0, M, W) for o in (n - 1, n, n + 1)}
                     | set(rng.sample(range(M), min(M, 6))))
    for kind in DmaKind:
        for off in offsets:
            cases.append((kind, rng.choice([1, W - off % W, M - off, M - off + 1, 2 * M]), off))
        for length in (0, 1, 2, W - 1, W, W + 1, M - 1, M, M + 1, 3 * W + 1, burst - 1, burst,
                       burst + 1, 2 * burst + 3):
            cases.append((kind, length, rng.randrange(M)))
        cases.append((kind, 1, 4095))                     # last byte of a page
        cases.append((kind, 2, 4095))                     # crosses a page with two bytes
        cases.append((kind, M + 2, 4096 - M // 2 - 1))    # crosses a page inside a beat run
        cases.append((kind, 4096, 4096 - 3 * M - 5))      # crosses a page mid-burst
        cases.append((kind, 3 * burst, 0))                # longest bursts back to back
        cases.append((kind, LONG_BYTES, W + 3))           # long, unaligned at both ends
    assert len(cases) <= 256, "descriptor ids are 8 bits"
    for ident, (kind, length, off) in enumerate(cases):
        descs.append(alloc.make(kind, ident, length, mem_offset=off))
    return descs


def _seed(offset):
    return int(os.environ.get("DMA_SEED", "1")) * 1000 + offset


async def _scenario(dut, make, name, mode):
    seed = _seed(MODES.index(mode))
    tb = TB(dut, mode, seed)
    await tb.start()
    tb.prefill()
    descs = make(tb.rng, tb.cfg)
    dut._log.info("%s/%s: %d descriptors, seed %d", name, mode, len(descs), seed)
    tb.submit(descs)
    await tb.wait_completions(len(descs))
    await tb.wait_idle()
    tb.check(descs)
    if mode == "plain" and name == "mix":
        assert tb.overlap_cycles > 0, "reads and writes never moved data in the same cycle"
    if mode == "backpressure" and name == "mix":
        assert tb.max_reads_outstanding >= min(4, tb.cfg.max_reads_in_flight), \
            f"at most {tb.max_reads_outstanding} read bursts were outstanding"


@cocotb.test()
@cocotb.parametrize(mode=MODES)
async def test_random_mix(dut, mode):
    """Random descriptors of every kind, 0 bytes to several bursts, unaligned, back to back."""
    await _scenario(dut, lambda rng, cfg: random_mix(rng, cfg, 150), "mix", mode)


@cocotb.test()
@cocotb.parametrize(mode=MODES)
async def test_directed(dut, mode):
    """Corner cases of offsets, lengths, page crossings and bursts (see :func:`directed`)."""
    await _scenario(dut, directed, "directed", mode)


#: The injected failures: (kind of the failing descriptor, AXI response the memory answers).
ERROR_CASES = ((DmaKind.LOAD, "SLVERR"), (DmaKind.STORE, "DECERR"),
               (DmaKind.MEM_TO_STREAM, "DECERR"), (DmaKind.STREAM_TO_MEM, "SLVERR"))


@cocotb.test()
@cocotb.parametrize(mode=MODES)
async def test_errors(dut, mode):
    """SLVERR and DECERR on reads and writes of every kind: the descriptor fails with its
    cause, the error register holds its id and cause, the queue pauses until ``err_clear`` and
    then continues; nothing hangs."""
    seed = _seed(10 + MODES.index(mode))
    tb = TB(dut, mode, seed)
    await tb.start()
    tb.prefill()
    cfg = tb.cfg
    burst = cfg.max_burst_beats * tb.M
    alloc = Allocator(tb.rng, cfg)
    all_descs = []
    for bad_kind, resp in ERROR_CASES:
        base = len(all_descs)
        descs = [alloc.make(DmaKind.LOAD, base, 3072)]
        bad = alloc.make(bad_kind, base + 1, 3 * burst + 7)
        bad.expect_error = resp
        # The error sits in the middle burst: the engine must drain the rest.
        mid = bad.mem_addr + bad.length // 2
        tb.ram.error_ranges[:] = [(mid, mid + 1, resp)]
        descs.append(bad)
        for ident in range(base + 2, base + 32):
            descs.append(alloc.make(tb.rng.choice(list(DmaKind)), ident,
                                    tb.rng.randrange(1, 3 * tb.M)))
        all_descs += descs
        tb.submit(descs)
        expected_before = len(tb.completions)
        while not int(dut.err_valid.value):
            await RisingEdge(dut.clk)
            assert len(tb.completions) < expected_before + len(descs), "no error latched"
        status = expected_status(bad)
        assert int(dut.err_id.value) == bad.id, f"err_id {int(dut.err_id.value)}"
        assert int(dut.err_status.value) == status.value, \
            f"err_status {int(dut.err_status.value)}, expected {status!r}"
        # Paused: whatever was dispatched finishes (until 300 cycles pass without a
        # completion), then nothing more completes.
        done = -1
        for _ in range(40):
            if len(tb.completions) == done:
                break
            done = len(tb.completions)
            for _ in range(300):
                await RisingEdge(dut.clk)
        for _ in range(300):
            await RisingEdge(dut.clk)
        assert len(tb.completions) == done, "descriptors completed while err_valid was set"
        assert done < expected_before + len(descs), "queue did not pause on the error"
        assert int(dut.busy.value) == 1
        dut._log.info("%s: %s latched for id %d, %d of %d done while paused",
                      mode, resp, bad.id, done - expected_before, len(descs))
        dut.err_clear.value = 1
        await RisingEdge(dut.clk)
        dut.err_clear.value = 0
        await tb.wait_completions(expected_before + len(descs))
        await tb.wait_idle()
        assert not int(dut.err_valid.value)
        tb.ram.error_ranges[:] = []
    assert tb.ram.errors_answered > 0
    tb.check(all_descs)


@cocotb.test()
async def test_throughput(dut):
    """Benchmark: zero wait states, long aligned loads and stores; figures to DMA_BENCH_OUT.
    The fraction is of one word per cycle (the SRAM/stream side's rate); the memory port is
    busy ``link_bytes / mem_bytes`` of that."""
    tb = TB(dut, "plain", _seed(20))
    await tb.start()
    tb.prefill()
    cfg, W = tb.cfg, tb.W
    alloc = Allocator(tb.rng, cfg)
    results = []
    ident = 0
    cases = []
    for label, kinds in (("load", [DmaKind.LOAD]), ("store", [DmaKind.STORE]),
                         ("load+store", [DmaKind.LOAD, DmaKind.STORE]),
                         ("mem_to_stream", [DmaKind.MEM_TO_STREAM]),
                         ("stream_to_mem", [DmaKind.STREAM_TO_MEM])):
        for size in (4096, 16384, 32768):
            cases.append((label, [(kind, size) for kind in kinds]))
    for label, kinds in (("load 8x4KiB", [DmaKind.LOAD]), ("store 8x4KiB", [DmaKind.STORE]),
                         ("ld+st 8x4KiB", [DmaKind.LOAD, DmaKind.STORE])):
        cases.append((label, [(kind, 4096) for _ in range(8) for kind in kinds]))
    for label, items in cases:
        descs = []
        for kind, size in items:
            descs.append(alloc.make(kind, ident % 256, size, mem_offset=0))
            ident += 1
        before = len(tb.completions)
        start = tb.cycle
        tb.submit(descs)
        await tb.wait_completions(before + len(descs))
        cycles = tb.cycle - start
        per_direction = max(sum(s for k, s in items if (k in READ_KINDS) == side)
                            for side in (True, False))
        fraction = per_direction / (cycles * W)
        results.append({"transfer": label, "bytes": per_direction, "cycles": cycles,
                        "fraction_of_word_rate": round(fraction, 4),
                        "memory_port_busy": round(per_direction / (cycles * tb.M), 4)})
        dut._log.info("throughput %-13s %6d B: %6d cycles, %.1f%% of one word per cycle "
                      "(per direction)", label, per_direction, cycles, 100 * fraction)
        while not tb.rd_sink.empty():
            tb.rd_sink.recv_nowait()
        alloc.sram_load = 0
        alloc.dst = DST_BASE
    out = os.environ.get("DMA_BENCH_OUT")
    if out:
        with open(out, "w") as f:
            json.dump(results, f, indent=1)
