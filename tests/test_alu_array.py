"""Amaranth-simulator unit tests of the reduction ALU array and its parts, against the numpy
golden model (:mod:`ace.numerics`)."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from ace.hw.alu.array import AluArray
from ace.hw.alu.minmax import MinMaxUnit
from ace.config import NAMED_CONFIGS
from ace.hw.alu.simd_add import SimdFpAdder
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


def _words(dtype, elements):
    """Lane words of ``elements``: one fp32 element, or two 16-bit elements (low half first)."""
    elements = elements.astype(np.uint64)
    if dtype is Dtype.FP32:
        return elements
    return elements[0::2] | (elements[1::2] << 16)


def _exponent_table(dtype, rng):
    """Every pair of the exponents that matter (all of them for fp16) with every sign pair,
    once with random fractions and once with fraction extremes (0, 1, all ones, half)."""
    exp_bits, man_bits = FLOAT_FORMATS[dtype]
    exp_all = (1 << exp_bits) - 1
    bias = exp_all >> 1
    if dtype is Dtype.FP16:
        exponents = np.arange(exp_all + 1)
    else:
        edges = [0, 1, 2, 3, 4, man_bits, man_bits + 1, man_bits + 2, man_bits + 3, 30, 31, 32]
        exponents = np.unique(np.array(edges + [bias - 1, bias, bias + 1]
                                       + [exp_all - k for k in range(5)]))
    ea, eb, sa, sb = (g.ravel().astype(np.int64)
                      for g in np.meshgrid(exponents, exponents, [0, 1], [0, 1]))
    frac_all = (1 << man_bits) - 1
    extremes = np.array([0, 1, frac_all, 1 << (man_bits - 1)])
    halves = []
    for fa, fb in ((rng.integers(0, frac_all + 1, ea.size), rng.integers(0, frac_all + 1, ea.size)),
                   (rng.choice(extremes, ea.size), rng.choice(extremes, ea.size))):
        a = (sa << (exp_bits + man_bits)) | (ea << man_bits) | fa
        b = (sb << (exp_bits + man_bits)) | (eb << man_bits) | fb
        halves.append((a, b))
    bits_dtype = np.uint32 if dtype is Dtype.FP32 else np.uint16
    return (np.concatenate([h[0] for h in halves]).astype(bits_dtype),
            np.concatenate([h[1] for h in halves]).astype(bits_dtype))


def _adder_cases(dtype, seed, count):
    """(dtype, a word, b word, expected word) for the directed pairs, the exponent table and
    ``count`` random bit patterns and well-scaled values, from the golden model."""
    rng = np.random.default_rng(seed)
    da, db = directed_pairs(dtype)
    ta, tb = _exponent_table(dtype, rng)
    a = np.concatenate([da, ta, random_elements(dtype, count, rng),
                        random_elements(dtype, count, rng, mode="scaled")])
    b = np.concatenate([db, tb, random_elements(dtype, count, rng),
                        random_elements(dtype, count, rng, mode="scaled")])
    if dtype is not Dtype.FP32 and a.size % 2:
        a, b = a[:-1], b[:-1]
    expected = to_bits(dtype, reduce_elements(ReduceOp.SUM, dtype, a, b))
    return [(dtype, int(x), int(y), int(e))
            for x, y, e in zip(_words(dtype, a), _words(dtype, b), _words(dtype, expected))]


def _run_adder(cases, seed, input_domain=None):
    """One case per cycle through a SimdFpAdder; report the mismatches with the seed."""
    dut = SimdFpAdder(input_domain)
    assert dut.latency == SimdFpAdder.LATENCY + (input_domain is not None)
    got = []

    async def testbench(ctx):
        for i in range(len(cases) + dut.latency):
            if i < len(cases):
                dtype, a, b, _ = cases[i]
                ctx.set(dut.a, a)
                ctx.set(dut.b, b)
                ctx.set(dut.dtype, dtype)
            await ctx.tick()
            if i + 1 >= dut.latency:
                got.append(ctx.get(dut.result))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    bad = [(case, result) for case, result in zip(cases, got) if case[3] != result]
    assert not bad, f"seed {seed}: {len(bad)} of {len(cases)} wrong\n" + "\n".join(
        f"{d.name} {a:#010x} + {b:#010x}: expected {e:#010x} got {r:#010x}"
        for (d, a, b, e), r in bad[:10])


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
def test_simd_adder(dtype):
    """Every directed pair, the exponent table, and random bit patterns and well-scaled
    values (1500 each), one word per cycle, against the golden model."""
    seed = 1 + dtype.value
    _run_adder(_adder_cases(dtype, seed, 1500), seed)


def test_simd_adder_input_registers():
    """With its own input registers (as in a lane) the adder is one cycle longer and gives
    the same results, dtypes interleaved."""
    seed = 30
    cases = [case for dtype in FLOATS for case in _adder_cases(dtype, seed, 300)[-600:]]
    np.random.default_rng(seed).shuffle(cases)
    _run_adder(cases, seed, input_domain="sync")


def test_simd_adder_mixed_dtypes():
    """fp32, bf16 and fp16 words interleaved at random from cycle to cycle: the stages carry
    each word's dtype with it."""
    seed = 20
    cases = [case for dtype in FLOATS for case in _adder_cases(dtype, seed, 600)[-1200:]]
    np.random.default_rng(seed).shuffle(cases)
    _run_adder(cases, seed)


@pytest.mark.parametrize("input_domain", [None, "sync"])
def test_minmax_unit(input_domain):
    """max/min of every pair of special values of every dtype, and copy (``pass_a``), one pair
    per cycle; without and with the unit's own input registers."""
    dut = MinMaxUnit(input_domain)
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
        for op in (ReduceOp.MAX, ReduceOp.MIN, ReduceOp.COPY):
            expected = to_bits(dtype, reduce_elements(op, dtype, da, db)).astype(np.uint64)
            if dtype not in (Dtype.INT32, Dtype.FP32):
                expected = expected[:count] | (expected[count:] << 16)
            cases.append((dtype, op, la, lb, expected))

    flat = [(dtype, op, int(x), int(y), int(e))
            for dtype, op, la, lb, expected in cases for x, y, e in zip(la, lb, expected)]

    async def testbench(ctx):
        # One pair per cycle, dtype and op changing between the batches; results follow
        # dut.latency cycles later.
        for i in range(len(flat) + dut.latency):
            if i < len(flat):
                dtype, op, x, y, _ = flat[i]
                ctx.set(dut.dtype, dtype)
                ctx.set(dut.is_max, op == ReduceOp.MAX)
                ctx.set(dut.pass_a, op == ReduceOp.COPY)
                ctx.set(dut.a, x)
                ctx.set(dut.b, y)
            await ctx.tick()
            if i + 1 >= dut.latency and i + 1 - dut.latency < len(flat):
                dtype, op, x, y, e = flat[i + 1 - dut.latency]
                got = ctx.get(dut.result)
                assert got == e, (f"{op.name} {dtype.name} {x:#010x} {y:#010x}: "
                                  f"expected {e:#010x} got {got:#010x}")

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()


def _run_array(beats, *, idle=0.0, stall=0.0, seed=0, check_latency=False, config=CONFIG):
    """Stream ``beats`` through an AluArray with random idle input cycles and output stalls;
    check results, tags, last bits and order. Returns (cycles, input transfer cycles,
    output transfer cycles)."""
    dut = AluArray(config)
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


def test_array_lanes_stop_and_restart():
    """The lanes hold while no beat is in them (clock enable): golden results and the
    free-running timing (accepted and delivered in the same cycles as at full rate allows)
    under idle gaps long enough to stop the lanes, and output stalls. The gated-clock form
    runs in cocotb (tests/test_cocotb_alu_array.py): Amaranth's simulator does not order a
    derived clock's edge before the registers of the clock it comes from."""
    beats = make_beats(CONFIG, np.random.default_rng(23), _plan(list(Dtype), 3, ("mixed",)))
    cycles, in_cycles, out_cycles = _run_array(beats, idle=0.9, seed=23, check_latency=True)
    gaps = np.diff(in_cycles)
    assert gaps.max() > 2 * AluArray.LATENCY, f"no idle gap long enough to stop the lanes: {gaps}"
    assert out_cycles == [c + AluArray.LATENCY for c in in_cycles]


def test_array_credit_stall():
    """With the output stalled the array accepts exactly its credits, then nothing more; all
    beats come out once the output is released."""
    dut = AluArray(CONFIG)
    # More beats than credits (one batch per op).
    per_op = dut.fifo_depth // len(ReduceOp) + 2
    beats = make_beats(CONFIG, np.random.default_rng(7), _plan([Dtype.FP32], per_op, ("mixed",)))
    assert len(beats) > dut.fifo_depth
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
