"""MSCCL algorithms of the published shapes and ASTRA-sim group collectives on the RTL: folded
thread blocks, bit-exact in both modes with exact counters (the replay scoreboard), the engine
watchdog armed (``sim_harness.replay.WATCHDOG_CYCLES``) so that an order that deadlocks fails
as a TIMEOUT error instead of hanging.

The default test reuses the ``switch4`` build of ``test_harness_switch.py``; the 8-GPU runs
build ``full8`` (several minutes) and are ``large``: ``pytest -m large
tests/test_msccl_replay.py``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ace.sw.msccl import read_msccl
from sim_harness.replay import WATCHDOG_CYCLES, replay
from sim_harness.systems import load_system
from sim_harness.traces import folding_notes, load_trace
from testbench.replay_checks import check_replay

DATA = Path(__file__).resolve().parent / "data" / "msccl"
ROOT = Path(__file__).resolve().parents[1]


def test_folded_allpairs_on_switch4_bit_exact():
    """8 thread blocks per GPU on 4 channels, in the order whose naive form deadlocks
    (test_msccl_folding.py); every counter as the golden model plans it."""
    path = DATA / "allpairs_allreduce_4gpus_2ch.xml"
    system = load_system("switch4")
    trace = load_trace(path, msccl_bytes=64 << 10)
    assert folding_notes(trace, system.config.num_channels) == [
        f"{path}: 8 thread blocks per GPU on 4 channels: up to 2 thread blocks share a "
        "channel (folded)"]
    assert WATCHDOG_CYCLES > 0
    results = replay(trace, system, progress=False, log=None)
    for run in results["runs"]:
        for raw in run["raws"]:
            check_replay(raw, system)
            assert len(raw["steps"][0]) == 4          # four channels, each with folded steps


def _ace_replay(tmp_path, *args) -> tuple[str, dict]:
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "ace.cli", "replay", *map(str, args),
                             "--quiet", "--out", str(out)], capture_output=True, text=True,
                            cwd=ROOT, timeout=3600)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout, json.loads((out / "results.json").read_text())


@pytest.mark.large
@pytest.mark.parametrize("name", ["allpairs_allreduce_8gpus_2ch.xml",
                                  "allpairs_allreduce_8gpus_4ch.xml",
                                  "ring_allreduce_8gpus_4chperring_LL.xml",
                                  "hierarchical_allreduce_2x4gpus.xml"])
def test_published_shapes_from_ace_replay_with_no_option(tmp_path, name):
    """``ace replay FILE``: full8 picked and named, the folding reported, bit-exact in the
    three modes (the command exits 1 on any difference from the golden model)."""
    stdout, document = _ace_replay(tmp_path, DATA / name)
    assert "using the smallest named system that has them: full8" in stdout
    threads = read_msccl(DATA / name).thread_blocks
    assert f"{threads} thread blocks per GPU on 4 channels" in stdout
    records = [r for run in document["runs"] for r in run["collectives"]]
    assert {r["mode"] for r in records} == {"ace", "staged", "p2p"}
    assert all(r["correct"] for r in records)
    print(name, {r["mode"]: r["cycles"] for r in records})


TRANSFORMER = ("HYBRID_TRANSFORMER model_parallel_NPU_group: 4 all_gpus: 8\n2\n"
               "attn -1 1000 ALLREDUCE 65536 1000 ALLREDUCE 65536 1000 ALLREDUCE 131072 10\n"
               "mlp -1 1000 ALLGATHER 65536 1000 REDUCESCATTER 65536 1000 ALLREDUCE 131072 10\n")


@pytest.mark.large
def test_transformer_groups_on_full8(tmp_path):
    """Tensor-parallel groups of 4 and data-parallel pairs, bit-exact on the RTL."""
    path = tmp_path / "transformer.txt"
    path.write_text(TRANSFORMER)
    stdout, document = _ace_replay(tmp_path, path, "--system", "full8")
    records = [r for run in document["runs"] for r in run["collectives"]]
    assert {r["mode"] for r in records} == {"ace", "staged", "p2p"}
    assert len(records) == 6 * 3 and all(r["correct"] for r in records)
    print({(r["name"], r["mode"]): r["cycles"] for r in records})
