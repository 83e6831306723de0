"""The replay's pre-flight (``sim_harness.preflight``): each collective compiled and assembled
once per mode, the fit checks in one place, the prepared programs handed to the run; and the
replay's input data (``make_inputs``) in every dtype.

The last test replays on ``ring8`` and reuses the build of ``tests/test_harness.py``.
"""

from __future__ import annotations

import sys
from dataclasses import replace

import ml_dtypes
import numpy as np
import pytest

import ace.sw.compiler
import ace.sw.program
from ace.layouts import Dtype
from ace.sw.host import staging_area
from ace.sw.program import ProgramError
from ace.vocab import Mode
from sim_harness.preflight import CollectiveTooLarge, preflight, prepare
from sim_harness.replay import make_inputs, replay
from sim_harness.systems import load_system
from sim_harness.trace import split_collective
from testbench.replay_checks import check_replay, collective_spec, trace_of

SYSTEM = load_system("ring8")


# -- input data ----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype, element", [(Dtype.FP32, np.float32), (Dtype.FP16, np.float16),
                                            (Dtype.BF16, ml_dtypes.bfloat16)])
def test_float_inputs_are_normal_values_rounded_to_their_dtype(dtype, element):
    """The bit patterns read as ``dtype`` are the seed's standard normal values rounded to
    ``dtype``. fp16 used to get bf16 bit patterns, which read as fp16 are other numbers
    (0x3F80 is 1.0 in bf16 and 1.875 in fp16): this test fails on that."""
    got = make_inputs(np.random.default_rng(11), dtype, 4096)
    want = np.random.default_rng(11).standard_normal(4096).astype(np.float32).astype(element)
    assert got.dtype.itemsize == np.dtype(element).itemsize
    values = got.view(element).astype(np.float64)
    assert np.array_equal(values, want.astype(np.float64))
    assert np.all(np.abs(values) < 8) and 0.9 < values.std() < 1.1


def test_int32_inputs_are_moderate_integers():
    got = make_inputs(np.random.default_rng(3), Dtype.INT32, 1000).view(np.int32)
    want = np.random.default_rng(3).integers(-(1 << 20), 1 << 20, size=1000, dtype=np.int32)
    assert np.array_equal(got, want)


# -- pre-flight without a simulator -------------------------------------------------------------

def _counting(monkeypatch) -> dict:
    """Count every call of the compiler and the assembler, wherever they were imported."""
    counts = {"compile": 0, "assemble": 0}
    originals = {"compile": ace.sw.compiler.compile_collective,
                 "assemble": ace.sw.program.assemble}
    names = {"compile": "compile_collective", "assemble": "assemble"}

    def counted(kind):
        def call(*args, **kwargs):
            counts[kind] += 1
            return originals[kind](*args, **kwargs)
        return call

    for kind, original in originals.items():
        wrapper = counted(kind)
        for module in list(sys.modules.values()):
            if getattr(module, names[kind], None) is original:
                monkeypatch.setattr(module, names[kind], wrapper)
    return counts


def _specs():
    return [collective_spec("ar", "allreduce", 4096), collective_spec("ag", "allgather", 2048),
            collective_spec("rs", "reduce_scatter", 1024, dtype="fp16")]


def test_preflight_compiles_and_assembles_each_collective_once_per_mode(monkeypatch):
    counts = _counting(monkeypatch)
    plan = preflight(trace_of(*_specs()), SYSTEM, ("ace", "baseline", "p2p"))
    assert counts == {"compile": 9, "assemble": 9}
    assert plan.modes == (Mode.ACE, Mode.STAGED, Mode.P2P)      # "baseline" is staged
    for mode in plan.modes:
        prepared = plan.collectives[mode]
        assert [p.spec.name for p in prepared] == ["ar", "ag", "rs"]
        for p in prepared:
            assert p.mode == mode and p.program.mode == mode
            assert len(p.assembled.nodes) == SYSTEM.topology.num_nodes
            # What the run loads: the assembler's words and the host's staging area.
            assert p.assembled == ace.sw.program.assemble(p.program, SYSTEM.config)
            assert (p.stage_base, p.mem_bytes) == staging_area(p.program, SYSTEM.config)


def test_the_three_fit_checks():
    """Instruction memory, system memory and SRAM (assembler), each naming the limit."""
    words = replace(SYSTEM, config=SYSTEM.config.replace(program_words=64))
    with pytest.raises(CollectiveTooLarge, match="program_words = 64") as error:
        prepare(collective_spec("big", "allreduce", 1 << 20), words, "ace")
    assert error.value.excess > 1 and error.value.scale is None
    memory = replace(SYSTEM, mem_bytes=1 << 16)
    with pytest.raises(CollectiveTooLarge, match="mem_bytes = 65536") as error:
        prepare(collective_spec("big", "allgather", 64 << 10), memory, "baseline")
    assert error.value.excess > 1
    # A scale that fits, checked by the same pre-flight.
    with pytest.raises(CollectiveTooLarge) as error:
        preflight(trace_of(collective_spec("big", "allgather", 64 << 10)), memory)
    assert 0 < error.value.scale < 1
    fitting = int((64 << 10) * error.value.scale) // 4 * 4
    preflight(trace_of(collective_spec("big", "allgather", fitting)), memory)
    with pytest.raises(ProgramError):
        prepare(collective_spec("bad", "allreduce", 4096, op="copy"), SYSTEM, "ace")


def test_too_long_for_the_instruction_memory_runs_in_pieces():
    """A collective whose programs exceed program_words runs as the fewest equal pieces that
    fit, in every mode; the plan keeps the trace's specs and names the split."""
    words = replace(SYSTEM, config=SYSTEM.config.replace(program_words=64))
    spec = collective_spec("big", "allreduce", (1 << 20) + 4)
    whole = ace.sw.compiler.program_words(
        ace.sw.compiler.compile_collective("allreduce", spec.bytes // 4, topology="ring:8",
                                           dtype="fp32", config=words.config, check=False))
    assert whole > 64
    trace = trace_of(collective_spec("small", "allreduce", 4096), spec)
    plan = preflight(trace, words)
    assert plan.matches(trace, words, tuple(Mode))
    pieces = plan.pieces["big"]
    assert list(plan.pieces) == ["big"] and pieces >= 2
    for mode in Mode:
        prepared = plan.collectives[mode]
        assert [p.spec.name for p in prepared] == (
            ["small"] + [f"big#{i}/{pieces}" for i in range(1, pieces + 1)])
        assert sum(p.spec.bytes for p in prepared[1:]) == spec.bytes
        assert all(len(ch.steps) + 1 <= 64 for p in prepared for node in p.program.nodes
                   for ch in node.channels)
    # The fewest: with one piece fewer some mode's pieces do not fit.
    fewer = split_collective(spec, pieces - 1)
    too_long = 0
    for mode in Mode:
        for piece in fewer:
            try:
                prepare(piece, words, mode)
            except CollectiveTooLarge:
                too_long += 1
    assert too_long


def test_a_plan_for_another_system_or_trace_is_refused():
    system = load_system("ring4")
    plan = preflight(trace_of(collective_spec("ar", "allreduce", 4096)), system, ("ace",))
    with pytest.raises(ValueError, match="another trace, system or modes"):
        replay(trace_of(collective_spec("ar", "allreduce", 4096)), SYSTEM, modes=("ace",),
               plan=plan, log=None, progress=False)
    with pytest.raises(ValueError, match="another trace, system or modes"):
        replay(trace_of(collective_spec("ar", "allreduce", 8192)), system, modes=("ace",),
               plan=plan, log=None, progress=False)


# -- one replay ----------------------------------------------------------------------------------

def test_one_replay_compiles_and_assembles_each_collective_once_per_mode(monkeypatch):
    """A whole replay (pre-flight, the three modes on the RTL, checks) compiles and assembles
    each collective once per mode, and the results are bit-exact with the memory bytes of
    each mode's documented accounting (``check_replay``)."""
    counts = _counting(monkeypatch)
    results = replay(trace_of(*_specs()), SYSTEM, progress=False, log=None)
    assert counts == {"compile": 9, "assemble": 9}
    assert [run["mode"] for run in results["runs"]] == ["ace", "staged", "p2p"]
    for run in results["runs"]:
        assert [raw["name"] for raw in run["raws"]] == ["ar", "ag", "rs"]
        for raw in run["raws"]:
            check_replay(raw, SYSTEM)
