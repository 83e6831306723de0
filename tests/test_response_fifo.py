"""Amaranth-simulator tests of :class:`ace.hw.sram.response_fifo.ResponseFifo`: words in
order, the stated latency, the full capacity, under a writer that counts credits as the SRAM
does and a reader with random stalls (back to back, stall-every-cycle patterns, and a reset
in the middle of a stream)."""

import random

import pytest
from amaranth.hdl import Module, ResetSignal, Signal
from amaranth.sim import Simulator

from ace.hw.sram.response_fifo import ResponseFifo


def run(dut, *, writes, ready, cycles, reset_at=None):
    """Drive ``dut`` with a credit-counting writer (``writes(cycle)``: whether it wants to
    write) and a reader (``ready(cycle)``); return (written, read) as (cycle, word) lists and
    the peak occupancy. ``reset_at``: a cycle in which reset is asserted; the counts restart."""
    m = Module()
    m.submodules.dut = dut
    rst = Signal()
    m.d.comb += ResetSignal().eq(rst)
    written, read = [], []
    held = {"now": 0, "peak": 0}

    async def testbench(ctx):
        word = 1
        for cycle in range(cycles):
            resetting = cycle == reset_at
            ctx.set(rst, resetting)
            if resetting:
                held["now"] = 0
                written.clear()
                read.clear()
            write = not resetting and writes(cycle) and held["now"] < dut.depth
            ctx.set(dut.w_en, (1 << len(dut.slices)) - 1 if write else 0)
            ctx.set(dut.w_data, word)
            ctx.set(dut.o.ready, ready(cycle))
            popped = not resetting and ctx.get(dut.o.valid) and ready(cycle)
            if popped:
                read.append((cycle, ctx.get(dut.o.payload)))
            if write:
                written.append((cycle, word))
                word += 1
            held["now"] += write - popped
            held["peak"] = max(held["peak"], held["now"])
            await ctx.tick()

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    return written, read, held["peak"]


@pytest.mark.parametrize("depth, slice_bits", [(16, 8), (16, None), (4, 8), (3, None)])
@pytest.mark.parametrize("pattern", ["back_to_back", "stall_every_other", "random"])
def test_order_latency_capacity(depth, slice_bits, pattern):
    rng = random.Random(depth * 7 + len(pattern))
    rolls = [rng.random() for _ in range(600)]
    ready = {"back_to_back": lambda c: True,
             "stall_every_other": lambda c: c % 2 == 0,
             "random": lambda c: rolls[c] < 0.4}[pattern]
    dut = ResponseFifo(32, depth, slice_bits=slice_bits)
    written, read, peak = run(dut, writes=lambda c: c < 500, ready=ready, cycles=600)
    assert [w for _, w in read] == [w for _, w in written]
    if pattern == "back_to_back":
        assert [r - w for (w, _), (r, _) in zip(written, read)] == [dut.latency] * len(read)
    else:
        assert peak == depth          # the reader fell behind: the FIFO held depth words


def test_reader_stalled_then_drained():
    """A reader that stalls until the FIFO is full, then takes a word every cycle."""
    dut = ResponseFifo(16, 16, slice_bits=8)
    written, read, peak = run(dut, writes=lambda c: True, ready=lambda c: c >= 40, cycles=120)
    assert peak == 16
    assert [w for _, w in read] == [w for _, w in written[:len(read)]]
    cycles = [c for c, _ in read]
    assert cycles[:20] == list(range(40, 60))   # one word per cycle once it reads


def test_reset_mid_stream():
    """Reset while words are held: afterwards the FIFO is empty and the stream restarts in
    order."""
    dut = ResponseFifo(16, 8, slice_bits=8)
    rng = random.Random(3)
    rolls = [rng.random() for _ in range(300)]
    written, read, _ = run(dut, writes=lambda c: c % 3 != 0, ready=lambda c: rolls[c] < 0.5,
                           cycles=300, reset_at=100)
    assert read and [w for _, w in read] == [w for _, w in written[:len(read)]]
    assert read[0][0] > 100


@pytest.mark.parametrize("kwargs, name", [
    (dict(width=0, depth=4), "width"),
    (dict(width=8, depth=2), "depth"),
])
def test_bad_parameters(kwargs, name):
    with pytest.raises(ValueError, match=name):
        ResponseFifo(**kwargs)
