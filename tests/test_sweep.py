"""Sweeps (``sim_harness.sweep``, ``ace sweep``): spec expansion and its one-line errors, the
build lock that keeps concurrent workers from building a system twice, and one small grid on
``ring8`` run on the local process pool and on a Dask ``LocalCluster``, with identical and
correct results.

The real test shares the ``ring8`` Verilator build with ``tests/test_harness.py``.
"""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ace.sw import golden
from ace.cli import main
from sim_harness import simulator, sweep
from sim_harness.preflight import compile_spec
from sim_harness.replay import make_inputs
from sim_harness.sweep import (SweepError, SweepPoint, expand, load_spec, run_points,
                               write_sweep)
from sim_harness.systems import load_system
from sim_harness.traces import DEFAULT_TRACE, load_trace


# -- spec ----------------------------------------------------------------------------------------

def test_grid_is_the_cartesian_product_last_axis_fastest():
    points = expand({"system": "ring8", "modes": "ace", "label": {"study": "bg"},
                     "grid": {"background": [0, 0.5], "bytes": [4096, 8192, 16384]}}, "s.yaml")
    assert [(p.background, p.bytes) for p in points] == [
        (0.0, 4096), (0.0, 8192), (0.0, 16384), (0.5, 4096), (0.5, 8192), (0.5, 16384)]
    assert all(p.modes == ("ace",) and p.label == (("study", "bg"),) and p.trace is None
               and p.system == "ring8" for p in points)
    assert expand({}, "s.yaml") == [SweepPoint(system="ring8", trace=None)]
    ratios = expand({"grid": {"system_keys": [{"mem_ratio": 2}, {"mem_ratio": 8,
                                                                  "mem_bytes": 1 << 24}]}},
                    "s.yaml")
    assert [p.system_keys for p in ratios] == [(("mem_ratio", 2),),
                                               (("mem_bytes", 1 << 24), ("mem_ratio", 8))]
    grid = expand({"grid": {"modes": ["both", ["baseline"], "all", "p2p"]}}, "s.yaml")
    assert [p.modes for p in grid] == [("ace", "staged"), ("staged",), ("ace", "staged", "p2p"),
                                       ("p2p",)]


@pytest.mark.parametrize("spec, message", [
    ([1], "s.yaml: expected a mapping"),
    ({"sytem": "ring8"}, "s.yaml: unknown key 'sytem'; allowed: system, trace"),
    ({"system": "ring9"}, "s.yaml: system: 'ring9' is neither a named system (ring4"),
    ({"trace": "no/such.yaml"}, "s.yaml: trace: no/such.yaml: no such file"),
    ({"modes": "hbm"}, "s.yaml: modes: 'hbm'; allowed: ace, staged, p2p (alias: baseline), all, "
                       "both, or a list"),
    ({"background": 1}, "s.yaml: background: 1; allowed: a number, 0 <= share < 1"),
    ({"seed": True}, "s.yaml: seed: True; allowed: an integer >= 0"),
    ({"bytes": -4}, "s.yaml: bytes: -4; allowed: a positive integer"),
    ({"topology": 8}, "s.yaml: topology: 8; allowed: kind:DIMS"),
    ({"topology": "torus:4x2"}, "s.yaml: system ring8: topology: torus:4x2 needs 4 links"),
    ({"label": {"a": [1]}}, "s.yaml: label.a: [1]; allowed: a string, number"),
    ({"grid": [1]}, "s.yaml: grid: expected a mapping of axes"),
    ({"grid": {"label": [{}]}}, "s.yaml: grid.label: not a sweepable key; allowed: system"),
    ({"grid": {"seed": 3}}, "s.yaml: grid.seed: 3; allowed: a non-empty list"),
    ({"grid": {"seed": []}}, "s.yaml: grid.seed: []; allowed: a non-empty list"),
    ({"seed": 1, "grid": {"seed": [2]}}, "s.yaml: grid.seed: seed is also given outside"),
    ({"grid": {"background": [0, 0.9, 2]}}, "s.yaml: grid.background[2]: 2; allowed:"),
    ({"system_keys": [1]}, "s.yaml: system_keys: [1]; allowed: a mapping of system-file keys"),
    ({"system_keys": {"topology": "ring:4"}}, "s.yaml: system_keys.topology: not a system key"),
    ({"system_keys": {"mem_ratio": 40}}, "s.yaml: system ring8 with mem_ratio = 40: mem_ratio: "
                                         "40 is out of range"),
])
def test_spec_errors_name_the_file_and_key(spec, message):
    with pytest.raises(SweepError) as error:
        expand(spec, "s.yaml")
    assert str(error.value).startswith(message)
    assert "\n" not in str(error.value)


def test_spec_files_and_cli_errors_are_one_line_exit_2(tmp_path, capsys):
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"system": "ring4", "grid": {"seed": [1, 2]}}))
    assert [p.seed for p in load_spec(good)] == [1, 2]
    cases = {
        "bad.yaml": ("system: ring8\ngrid: {bytes: [1, 2]\n", "bad.yaml: not valid YAML"),
        "bad.json": ("{", "bad.json: not valid JSON"),
        "key.yaml": ("grid:\n  bites: [4096]\n", "key.yaml: grid.bites: not a sweepable key"),
        # Checked before anything is built or run: 6 bytes is not a whole number of fp32.
        "size.yaml": ("grid:\n  bytes: [8, 6]\n", "point 1 (bytes=6): "),
    }
    for name, (text, message) in cases.items():
        (tmp_path / name).write_text(text)
        assert main(["sweep", str(tmp_path / name), "--out", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("ace sweep: error: ") and message in err, err
        assert err.count("\n") == 1, err
    assert main(["sweep", str(good), "--workers", "2", "--scheduler", "tcp://x:1"]) == 2
    assert "--workers: applies to the local pool only" in capsys.readouterr().err
    assert main(["sweep", str(tmp_path / "none.yaml")]) == 2
    assert "none.yaml: cannot read" in capsys.readouterr().err


# -- one build per system ------------------------------------------------------------------------

def _build_with_stub(root, runs_file, out):
    """A process calling build_driver with Verilator replaced by a stub that logs each call."""
    def fake_run(cmd, **kwargs):
        time.sleep(1.0)
        mdir = Path(cmd[cmd.index("--Mdir") + 1])
        with open(runs_file, "a") as f:
            f.write(f"{mdir}\n")
        mdir.mkdir(parents=True, exist_ok=True)
        (mdir / "ace_driver").write_text("")
        return subprocess.CompletedProcess(cmd, 0)

    simulator.HARNESS_BUILD_ROOT = root
    simulator.system_sources = lambda spec: {"system.v": "module top; endmodule\n"}
    simulator.prepare_environment = dict
    simulator.subprocess.run = fake_run
    exe = simulator.build_driver(load_system("ring4"))
    with open(out, "a") as f:
        f.write(f"{exe}\n")


def test_points_that_differ_in_background_or_seed_share_one_preflight(monkeypatch):
    """The sweep's check runs the pre-flight once per distinct (system, trace, bytes, topology,
    modes): here 2 sizes x 3 modes = 6 compilations for 8 points, and every point of a size
    gets that size's plan."""
    import sim_harness.preflight as preflight

    calls = []
    original = preflight.compile_collective
    monkeypatch.setattr(preflight, "compile_collective",
                        lambda *args, **kwargs: calls.append(args) or original(*args, **kwargs))
    points = expand({"system": "ring4", "grid": {"bytes": [4096, 8192],
                                                 "background": [0, 0.5], "seed": [1, 2]}},
                    "test")
    plans, systems = sweep._check(points)
    assert len(points) == 8 and len(calls) == 6 and len(plans) == 2 and len(systems) == 1
    for point in points:
        (prepared,) = plans[sweep._key(point)].collectives["ace"]
        assert prepared.spec.bytes == point.bytes and prepared.program.bytes_per_node == \
            point.bytes


def test_concurrent_workers_build_a_system_once(tmp_path):
    """Processes that ask for the same build at once: the build locks let one process build the
    engine library and the system once each, the others wait and reuse them (what sweep workers do if a build is not there yet)."""
    context = multiprocessing.get_context("spawn")
    args = (tmp_path / "harness", tmp_path / "runs.txt", tmp_path / "exes.txt")
    procs = [context.Process(target=_build_with_stub, args=args) for _ in range(3)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(300)              # spawned interpreters import numpy and amaranth: slow when loaded
        assert proc.exitcode == 0
    # Two builds in all, each once: the engine library and the system linked with it.
    runs = (tmp_path / "runs.txt").read_text().split()
    assert len(runs) == 2 and len(set(runs)) == 2
    exes = (tmp_path / "exes.txt").read_text().split()
    assert len(exes) == 3 and len(set(exes)) == 1


# -- a real sweep --------------------------------------------------------------------------------

SPEC = {"system": "ring8", "trace": None, "background": 0.25, "seed": 7,
        "label": {"test": "sweep"}, "grid": {"bytes": [4096, 8192, 16384]}}


def _golden_traffic(point: SweepPoint, mode: str, system) -> list[tuple]:
    """Per collective, the memory bytes each node reads and writes in the golden model."""
    trace = load_trace(DEFAULT_TRACE)
    out = []
    for i, spec in enumerate(trace.collectives):
        program = compile_spec(replace(spec, bytes=point.bytes), system, mode)
        rng = np.random.default_rng(point.seed + i)
        inputs = [make_inputs(rng, program.dtype, n.in_elems) for n in program.nodes]
        expect = golden.run(program, inputs)
        out.append((list(expect.mem_read_bytes), list(expect.mem_write_bytes)))
    return out


def test_local_pool_and_dask_give_identical_correct_results(tmp_path):
    from distributed import LocalCluster

    points = expand(SPEC, "test")
    system = load_system("ring8")
    simulator.build_driver(system)              # shared with test_harness.py
    exe = simulator.build_driver(system)
    before = exe.stat().st_mtime_ns

    start = time.monotonic()
    local = run_points(points, workers=2, progress=False)
    local_s = time.monotonic() - start
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster:
        start = time.monotonic()
        remote = run_points(points, scheduler=cluster.scheduler_address, progress=False)
        dask_s = time.monotonic() - start
    print(f"sweep of {len(points)} points: local pool {local_s:.1f} s, Dask {dask_s:.1f} s")

    assert exe.stat().st_mtime_ns == before, "a sweep rebuilt the system"
    assert local == remote
    assert [r["point"]["bytes"] for r in local] == [4096, 8192, 16384]
    for point, result in zip(points, local):
        assert result["point"]["label"] == (("test", "sweep"),)
        doc = result["results"]
        assert doc["system"]["background_share"] == 0.25
        assert [run["mode"] for run in doc["runs"]] == ["ace", "staged", "p2p"]
        for run in doc["runs"]:
            want = _golden_traffic(point, run["mode"], system)
            for rec, (reads, writes) in zip(run["collectives"], want, strict=True):
                where = f"bytes={point.bytes} {run['mode']} {rec['name']}"
                assert rec["correct"] and rec["bytes"] == point.bytes, where
                assert rec["mem_read_bytes_by_node"] == reads, where
                assert rec["mem_write_bytes_by_node"] == writes, where
                assert rec["link_bytes_match_program"], where
                if run["mode"] == "ace":                    # all-reduce: 2S per node
                    assert rec["mem_over_2S"] == 1.0, where

    paths = write_sweep(tmp_path, local)
    assert json.loads(paths[0].read_text())["results"] == json.loads(json.dumps(local))
    rows = paths[1].read_text().splitlines()
    assert len(rows) == 1 + 3 * 3 and rows[0].startswith("point,system,trace,background,seed,"
                                                         "system_keys,label.test,mode,name")
