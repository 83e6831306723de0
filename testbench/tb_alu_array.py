"""cocotb testbench of the ``ace_alu_array`` top (:class:`ace.hw.tops.alu_array.AluArrayTop`).

Every op and dtype is sent mixed beat by beat, with random bit patterns, random well-scaled
values and the directed special values of :mod:`ace.numerics`, under three flow patterns:
no pauses, idle source cycles and sink backpressure. Each flow covers its share of
:data:`ELEMENTS_PER_COMBO` element operations per (op, dtype); the shares add up to 1, so the
suite covers at least that many per combination. ``test_throughput`` measures accepted beats
per cycle on a full stream and the latency, and writes them to ``alu_throughput.json`` in the
test directory.

Seeds: cocotb seeds each test with a value derived from ``COCOTB_RANDOM_SEED`` and the test's
name (``cocotb.RANDOM_SEED``); the numpy generators here start from that. cocotb prints
``COCOTB_RANDOM_SEED`` at start and on failure; ``ACE_SEED=<it>`` in the pytest wrapper reruns
the same stimulus. The derived test seed is logged and written into the JSON figures.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import os
from pathlib import Path

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.simtime import get_sim_time
from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi import AxiStreamBus, AxiStreamFrame, AxiStreamSink, AxiStreamSource

from ace.hw.alu.array import AluArray
from ace.hw.tops.alu_array import TUSER_DTYPE, TUSER_OP, TUSER_TAG
from ace.config import AceConfig
from ace.layouts import Dtype, ReduceOp
from ace.numerics import directed_pairs, elements_per_beat
from testbench.alu_stimulus import AluBeats, describe_mismatch, make_beats
from testbench.inputs import zero_inputs

#: Element operations per (op, dtype) that the whole suite covers (COPY is extra).
ELEMENTS_PER_COMBO = 100_000
#: Share of ELEMENTS_PER_COMBO covered by each flow pattern.
FLOW_SHARE = {"no_pauses": 0.6, "source_idle": 0.2, "sink_backpressure": 0.2, "bursts": 0.05}
REDUCTIONS = [ReduceOp.SUM, ReduceOp.MAX, ReduceOp.MIN]


def _config() -> AceConfig:
    return AceConfig(**json.loads(os.environ["ACE_CONFIG"]))


def _pauses(rng: np.random.Generator):
    """Pause pattern: paused three cycles in four for a while, then paused at random (p=1/2)."""
    yield from itertools.islice(itertools.cycle([1, 1, 1, 0]), 8000)
    while True:
        yield int(rng.random() < 0.5)


def _bursts(rng: np.random.Generator):
    """Pause pattern: bursts of 1 to 16 cycles, then 0 to 40 paused cycles, so that the lanes
    often drain and stop (``config.clock_gating``) and restart with a beat already waiting."""
    while True:
        yield from [0] * int(rng.integers(1, 17))
        yield from [1] * int(rng.integers(0, 41))


class TB:
    """Clock, reset, the AXI-Stream source and sink, and the scoreboard."""

    def __init__(self, dut):
        self.dut = dut
        zero_inputs(dut)
        self.config = _config()
        self.seed = cocotb.RANDOM_SEED
        self.log = logging.getLogger("cocotb.tb")
        self.log.setLevel(logging.INFO)
        cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
        # One "byte" per beat: frames are lists of beat integers (fast, and tuser per beat).
        self.source = AxiStreamSource(AxiStreamBus.from_prefix(dut, "s_axis_"), dut.clk,
                                      dut.rst, byte_lanes=1)
        self.sink = AxiStreamSink(AxiStreamBus.from_prefix(dut, "m_axis_"), dut.clk,
                                  dut.rst, byte_lanes=1)
        for model in (self.source, self.sink):
            model.log.setLevel(logging.WARNING)

    def rng(self, salt: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, salt])

    async def reset(self):
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, 3)
        self.dut.rst.value = 0
        await ClockCycles(self.dut.clk, 2)

    def set_flow(self, flow: str, rng: np.random.Generator):
        if flow == "no_pauses":
            self.source.set_pause_generator(None)
            self.sink.set_pause_generator(None)
        elif flow == "source_idle":
            self.source.set_pause_generator(_pauses(rng))
            self.sink.set_pause_generator(None)
        elif flow == "sink_backpressure":
            self.source.set_pause_generator(None)
            self.sink.set_pause_generator(_pauses(rng))
        elif flow == "bursts":
            self.source.set_pause_generator(_bursts(rng))
            self.sink.set_pause_generator(_bursts(rng))
        else:
            raise ValueError(f"flow: {flow!r}")

    def frames(self, beats: AluBeats) -> list[AxiStreamFrame]:
        """Operand frames: consecutive beats up to one with ``last`` set."""
        frames, data, user = [], [], []
        shift = 8 * self.config.link_bytes
        for k in range(len(beats)):
            data.append(beats.a[k] | (beats.b[k] << shift))
            user.append((beats.op[k].value << TUSER_OP) | (beats.dtype[k].value << TUSER_DTYPE)
                        | (beats.tag[k] << TUSER_TAG))
            if beats.last[k]:
                frames.append(AxiStreamFrame(tdata=data, tuser=user))
                data, user = [], []
        assert not data, "the final beat must have last set"
        return frames

    async def run(self, beats: AluBeats, *, timeout_cycles: int | None = None) -> None:
        """Send ``beats``, receive every result and compare beat by beat (result, tag, last)."""
        frames = self.frames(beats)
        for frame in frames:
            await self.source.send(frame)
        index = 0
        errors = []
        for frame_number, sent in enumerate(frames):
            received = await self.sink.recv()
            if len(received.tdata) != len(sent.tdata):
                errors.append(f"frame {frame_number}: {len(received.tdata)} beats, "
                              f"expected {len(sent.tdata)} (last misplaced)")
            tusers = received.tuser if isinstance(received.tuser, list) \
                else [received.tuser] * len(received.tdata)
            for got, tag in zip(received.tdata, tusers):
                if got != beats.expected[index]:
                    errors.append(describe_mismatch(self.config, beats, index, got))
                if tag != beats.tag[index]:
                    errors.append(f"beat {index}: tag {tag}, expected {beats.tag[index]}")
                index += 1
            if len(errors) >= 10:
                break
        assert not errors, (f"test seed {self.seed} (rerun: ACE_SEED=<COCOTB_RANDOM_SEED>): "
                            f"{len(errors)} mismatches\n"
                            + "\n".join(errors[:10]))
        await ClockCycles(self.dut.clk, 2 * AluArray.LATENCY)
        assert self.sink.empty(), f"test seed {self.seed}: extra result beats after the last one"
        assert index == len(beats)

    async def run_measured(self, beats: AluBeats) -> dict:
        """:meth:`run` while counting handshakes each cycle; returns throughput and latency.

        Throughput is measured from the first result (pipeline full) to the last operand
        accepted, so pipeline fill and drain do not dilute it."""
        accepted_cycles, delivered_cycles = [], []
        dut = self.dut

        async def monitor():
            cycle = 0
            while True:
                await RisingEdge(dut.clk)
                if dut.s_axis__tvalid.value and dut.s_axis__tready.value:
                    accepted_cycles.append(cycle)
                if dut.m_axis__tvalid.value and dut.m_axis__tready.value:
                    delivered_cycles.append(cycle)
                cycle += 1

        watcher = cocotb.start_soon(monitor())
        await self.run(beats)
        watcher.cancel()
        assert len(accepted_cycles) == len(beats) == len(delivered_cycles)
        window = [c for c in accepted_cycles if c >= delivered_cycles[0]]
        cycles = window[-1] - window[0] + 1 if window else 1
        rate = len(window) / cycles
        return {
            "config": self.config.name, "lanes": self.config.alu_lanes,
            "beats": len(beats), "window_beats": len(window), "window_cycles": cycles,
            "beats_per_cycle": rate, "latency_cycles": delivered_cycles[0] - accepted_cycles[0],
            "documented_latency_cycles": AluArray.LATENCY,
            "bytes_per_cycle": rate * self.config.link_bytes,
            "gbytes_per_s_at_clock": rate * self.config.link_bytes * self.config.clock_mhz / 1000,
            "seed": self.seed,
        }


def flow_plan(config: AceConfig, flow: str, rng: np.random.Generator):
    """Batches covering this flow's share of ELEMENTS_PER_COMBO for each (op, dtype).

    The no-pause flow sends every directed pair of every dtype under every op; the other flows
    send a random slice of them. The rest is random: half bit patterns, half well-scaled
    values, some mixed. COPY gets a few beats of everything.
    """
    share = FLOW_SHARE[flow]
    plan = []
    for dtype in Dtype:
        per_beat = elements_per_beat(dtype, config.link_bytes)
        directed = directed_pairs(dtype)[0].size
        target = math.ceil(share * ELEMENTS_PER_COMBO / per_beat)
        directed_beats = math.ceil(directed / per_beat) if flow == "no_pauses" \
            else min(target // 4, math.ceil(directed / per_beat))
        rest = max(0, target - directed_beats)
        for op in REDUCTIONS:
            plan += [(op, dtype, "directed", directed_beats), (op, dtype, "bits", rest // 3),
                     (op, dtype, "scaled", rest // 3),
                     (op, dtype, "mixed", rest - 2 * (rest // 3))]
        plan += [(ReduceOp.COPY, dtype, "mixed", 50), (ReduceOp.COPY, dtype, "directed", 50)]
    return plan


async def run_flow(dut, flow: str):
    tb = TB(dut)
    rng = tb.rng(sorted(FLOW_SHARE).index(flow))
    tb.log.info("flow %s, test seed %d (derived from COCOTB_RANDOM_SEED; rerun with "
                "ACE_SEED=<COCOTB_RANDOM_SEED>)", flow, tb.seed)
    beats = make_beats(tb.config, rng, flow_plan(tb.config, flow, rng))
    tb.set_flow(flow, rng)
    await tb.reset()
    start = get_sim_time("ns")
    await tb.run(beats)
    cycles = int((get_sim_time("ns") - start) // 10)
    share = FLOW_SHARE[flow]
    for op in REDUCTIONS:
        for dtype in Dtype:
            count = beats.elements.get((op.name, dtype.name), 0)
            assert count >= share * ELEMENTS_PER_COMBO, \
                f"{op.name}/{dtype.name}: only {count} element operations"
    summary = {f"{op}/{dtype}": n for (op, dtype), n in sorted(beats.elements.items())}
    tb.log.info("flow %s: %d beats in %d cycles; element operations per op/dtype: %s",
                flow, len(beats), cycles, summary)
    Path(f"alu_elements_{flow}.json").write_text(json.dumps(
        {"flow": flow, "seed": tb.seed, "beats": len(beats), "cycles": cycles,
         "elements": summary}, indent=2, sort_keys=True))


@cocotb.test()
async def test_no_pauses(dut):
    """Full-rate stream, source never idle, sink always ready."""
    await run_flow(dut, "no_pauses")


@cocotb.test()
async def test_source_idle(dut):
    """Idle source cycles: three in four, then random."""
    await run_flow(dut, "source_idle")


@cocotb.test()
async def test_sink_backpressure(dut):
    """Sink backpressure: not ready three cycles in four, then random."""
    await run_flow(dut, "sink_backpressure")


@cocotb.test()
async def test_bursts(dut):
    """Source and sink in bursts with long pauses: the lanes stop and restart."""
    await run_flow(dut, "bursts")


@cocotb.test()
async def test_throughput(dut):
    """Full stream, no pauses: accepted beats per cycle once the pipeline is full, and latency.

    Writes ``alu_throughput.json``. The stream is every op and dtype mixed beat by beat."""
    tb = TB(dut)
    rng = tb.rng(99)
    beats_per_combo = 250
    plan = [(op, dtype, "mixed", beats_per_combo) for op in ReduceOp for dtype in Dtype]
    beats = make_beats(tb.config, rng, plan, last_probability=0.0)
    tb.set_flow("no_pauses", rng)
    await tb.reset()

    figures = await tb.run_measured(beats)
    tb.log.info("throughput: %s", figures)
    Path("alu_throughput.json").write_text(json.dumps(figures, indent=2, sort_keys=True))
    assert figures["window_beats"] >= 2000, \
        f"only {figures['window_beats']} beats in the measurement window"
    rate, latency = figures["beats_per_cycle"], figures["latency_cycles"]
    assert rate >= 0.999, f"throughput {rate:.4f} beats/cycle, expected 1.0"
    assert latency == AluArray.LATENCY, f"latency {latency}, documented {AluArray.LATENCY}"
