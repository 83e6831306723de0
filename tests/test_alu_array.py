"""Amaranth-simulator unit tests of the reduction ALU array and its parts, against the numpy
golden model (:mod:`ace.numerics`)."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from ace.hw.alu.array import AluArray
from ace.hw.alu.minmax import MinMaxUnit
from ace.config import NAMED_CONFIGS
from ace.hw.alu.fp_add import FpAdder
from ace.layouts import Dtype, ReduceOp
from ace.numerics import FLOAT_FORMATS, directed_pairs, random_elements, reduce_elements, to_bits
from testbench.alu_stimulus import describe_mismatch, make_beats

CONFIG = NAMED_CONFIGS["small"]
FLOATS = [Dtype.FP32, Dtype.BF16, Dtype.FP16]


def _watchdog(cycles):
    async def watchdog(ctx):
        for _ in range(cycles):
            await ctx.tick()
        raise AssertionError(f"watchdog: simulation still running after {cycles} cycles")
    return watchdog


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
def test_fp_adder(dtype):
    """Every directed pair plus random bit patterns and well-scaled values, one per cycle."""
    exp_bits, man_bits = FLOAT_FORMATS[dtype]
    dut = FpAdder(exp_bits, man_bits)
    rng = np.random.default_rng(1)
    da, db = directed_pairs(dtype)
    a = np.concatenate([da, random_elements(dtype, 1500, rng),
                        random_elements(dtype, 1500, rng, mode="scaled")])
    b = np.concatenate([db, random_elements(dtype, 1500, rng),
                        random_elements(dtype, 1500, rng, mode="scaled")])
    expected = to_bits(dtype, reduce_elements(ReduceOp.SUM, dtype, a, b))
    got = []

    async def testbench(ctx):
        for i in range(a.size + dut.latency):
            if i < a.size:
                ctx.set(dut.a, int(a[i]))
                ctx.set(dut.b, int(b[i]))
            await ctx.tick()
            if i + 1 >= dut.latency:
                got.append(ctx.get(dut.result))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    got = np.array(got[:a.size], dtype=expected.dtype)
    bad = np.flatnonzero(got != expected)
    assert bad.size == 0, "\n".join(
        f"{int(a[i]):#x} + {int(b[i]):#x}: expected {int(expected[i]):#x} got {int(got[i]):#x}"
        for i in bad[:10])


def test_minmax_unit():
    """max/min of every pair of special values of every dtype (combinational)."""
    dut = MinMaxUnit()
    cases = []
    for dtype in Dtype:
        da, db = directed_pairs(dtype)
        if dtype in (Dtype.INT32, Dtype.FP32):
            la, lb, count = da.astype(np.uint64), db.astype(np.uint64), da.size
        else:
            # Two 16-bit elements per lane: pair element k with element k + half.
            half = da.size // 2
            count = half
            la = da[:half].astype(np.uint64) | (da[half:2 * half].astype(np.uint64) << 16)
            lb = db[:half].astype(np.uint64) | (db[half:2 * half].astype(np.uint64) << 16)
            da = np.concatenate([da[:half], da[half:2 * half]])
            db = np.concatenate([db[:half], db[half:2 * half]])
        for op in (ReduceOp.MAX, ReduceOp.MIN):
            expected = to_bits(dtype, reduce_elements(op, dtype, da, db)).astype(np.uint64)
            if dtype not in (Dtype.INT32, Dtype.FP32):
                expected = expected[:count] | (expected[count:] << 16)
            cases.append((dtype, op, la, lb, expected))

    async def testbench(ctx):
        for dtype, op, la, lb, expected in cases:
            ctx.set(dut.dtype, dtype)
            ctx.set(dut.is_max, op == ReduceOp.MAX)
            for x, y, e in zip(la, lb, expected):
                ctx.set(dut.a, int(x))
                ctx.set(dut.b, int(y))
                got = ctx.get(dut.result)
                assert got == e, (f"{op.name} {dtype.name} {int(x):#010x} {int(y):#010x}: "
                                  f"expected {int(e):#010x} got {got:#010x}")

    sim = Simulator(dut)
    sim.add_testbench(testbench)
    sim.run()


def _run_array(beats, *, idle=0.0, stall=0.0, seed=0, check_latency=False):
    """Stream ``beats`` through an AluArray with random idle input cycles and output stalls;
    check results, tags, last bits and order. Returns (cycles, input transfer cycles,
    output transfer cycles)."""
    dut = AluArray(CONFIG)
    rng = np.random.default_rng(seed)
    received = []
    in_cycles, out_cycles = [], []
    cycle = [0]

    async def clock_counter(ctx):
        async for _ in ctx.tick():
            cycle[0] += 1

    async def source(ctx):
        for k in range(len(beats)):
            while rng.random() < idle:
                await ctx.tick()
            ctx.set(dut.i.valid, 1)
            ctx.set(dut.i.payload.a, beats.a[k])
            ctx.set(dut.i.payload.b, beats.b[k])
            ctx.set(dut.i.payload.op, beats.op[k])
            ctx.set(dut.i.payload.dtype, beats.dtype[k])
            ctx.set(dut.i.payload.tag, beats.tag[k])
            ctx.set(dut.i.payload.last, beats.last[k])
            await ctx.tick().until(dut.i.ready)
            in_cycles.append(cycle[0])
            ctx.set(dut.i.valid, 0)

    async def sink(ctx):
        while len(received) < len(beats):
            ready = rng.random() >= stall
            ctx.set(dut.o.ready, ready)
            _, _, valid, result, tag, last = await ctx.tick().sample(
                dut.o.valid, dut.o.payload.result, dut.o.payload.tag, dut.o.payload.last)
            if valid and ready:
                received.append((result, tag, last))
                out_cycles.append(cycle[0])
        ctx.set(dut.o.ready, 0)
        # Nothing more may come out.
        for _ in range(2 * dut.latency):
            assert not ctx.get(dut.o.valid), "a result beat was duplicated"
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(clock_counter, background=True)
    sim.add_testbench(_watchdog(40 * len(beats) + 200), background=True)
    sim.add_testbench(source)
    sim.add_testbench(sink)
    sim.run()

    for k, (result, tag, last) in enumerate(received):
        assert result == beats.expected[k], describe_mismatch(CONFIG, beats, k, result)
        assert tag == beats.tag[k], f"beat {k}: tag {tag} expected {beats.tag[k]}"
        assert last == beats.last[k], f"beat {k}: last {last} expected {beats.last[k]}"
    if check_latency:
        assert out_cycles[0] - in_cycles[0] == dut.latency
    return cycle[0], in_cycles, out_cycles


def _plan(dtypes, beats_per_combo, modes=("mixed", "directed")):
    plan = []
    for dtype in dtypes:
        for op in ReduceOp:
            for mode in modes:
                plan.append((op, dtype, mode, beats_per_combo))
    return plan


@pytest.mark.parametrize("dtype", list(Dtype), ids=lambda d: d.name)
def test_array_one_dtype_backpressure(dtype):
    """All four ops of one dtype, mixed beat by beat, with idle input cycles and stalls."""
    beats = make_beats(CONFIG, np.random.default_rng(dtype.value + 10), _plan([dtype], 40))
    _run_array(beats, idle=0.3, stall=0.4, seed=dtype.value)


def test_array_mixed_full_rate():
    """Every op and dtype mixed beat by beat at full rate: one beat per cycle, in order, with
    the documented latency."""
    beats = make_beats(CONFIG, np.random.default_rng(5), _plan(list(Dtype), 12, ("mixed",)))
    cycles, in_cycles, out_cycles = _run_array(beats, check_latency=True)
    assert in_cycles == list(range(in_cycles[0], in_cycles[0] + len(beats))), \
        "the input was not accepted on every cycle"
    assert out_cycles == [c + AluArray.LATENCY for c in in_cycles]


def test_array_credit_stall():
    """With the output stalled the array accepts exactly its credits, then nothing more; all
    beats come out once the output is released."""
    dut = AluArray(CONFIG)
    beats = make_beats(CONFIG, np.random.default_rng(7), _plan([Dtype.FP32], 4, ("mixed",)))
    received = []

    async def testbench(ctx):
        ctx.set(dut.o.ready, 0)
        accepted = 0
        ctx.set(dut.i.valid, 1)
        for _ in range(3 * dut.latency):
            k = accepted
            ctx.set(dut.i.payload.a, beats.a[k])
            ctx.set(dut.i.payload.b, beats.b[k])
            ctx.set(dut.i.payload.op, beats.op[k])
            ctx.set(dut.i.payload.dtype, beats.dtype[k])
            ctx.set(dut.i.payload.tag, beats.tag[k])
            ctx.set(dut.i.payload.last, beats.last[k])
            _, _, ready = await ctx.tick().sample(dut.i.ready)
            accepted += ready
        assert accepted == dut.fifo_depth
        ctx.set(dut.i.valid, 0)
        ctx.set(dut.o.ready, 1)
        for _ in range(3 * dut.latency):
            _, _, valid, result = await ctx.tick().sample(dut.o.valid, dut.o.payload.result)
            if valid:
                received.append(result)
        assert received == beats.expected[:accepted]

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
