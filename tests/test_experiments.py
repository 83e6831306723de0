"""Experiments (``sim_harness.experiments``, ``ace experiment``): the pure model parts against
values worked out by hand (least-squares fits, the 90% crossing, the utilization model, the
overlap scheduler, workload construction and parsing), the analyses on synthetic records,
the command line's one-line errors, and one tiny real ``membw`` run on ``ring8``.

The real test shares the ``ring8`` Verilator build with ``tests/test_harness.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from ace.cli import main
from sim_harness.experiments import (ExperimentError, membw, run_experiment, training,
                                     utilization)
from sim_harness.experiments.common import (crossing, fit_latency_bandwidth, fit_linear,
                                            fit_roofline, parse_ratios, point_key, roofline)
from sim_harness.experiments.overlap import ScheduleError, simulate
from sim_harness.metrics import CollectiveRecord
from sim_harness.experiments.workloads import (COMPUTE_MEM_SHARE, DLRM, GNMT, RESNET50_FILE,
                                               compute_scale, dlrm, from_trace, gnmt, resnet50)
from sim_harness.traces.astra import load_astra_workload


# -- fits ----------------------------------------------------------------------------------------

def test_fit_linear_by_hand():
    # x = 0, 1, 2; y = 1, 3, 4: mean x 1, mean y 8/3, Sxx 2, Sxy 3 -> slope 1.5, a = 7/6.
    a, b = fit_linear([0, 1, 2], [1, 3, 4])
    assert b == pytest.approx(1.5)
    assert a == pytest.approx(7 / 6)
    # Weight 0 on the middle point: the line through the other two.
    a, b = fit_linear([0, 1, 2], [1, 3, 4], weights=[1, 0, 1])
    assert (a, b) == (pytest.approx(1.0), pytest.approx(1.5))
    with pytest.raises(ValueError):
        fit_linear([1, 1], [2, 3])


def test_latency_bandwidth_fit_recovers_exact_line_and_reports_relative_error():
    sizes = [1000, 4000, 16000]
    fit = fit_latency_bandwidth(sizes, [500 + s / 4 for s in sizes])
    assert fit["a"] == pytest.approx(500)
    assert fit["r"] == pytest.approx(4)
    assert fit["max_rel_error"] == pytest.approx(0, abs=1e-12)
    # Two points define the line; a third one 10% off that line: the fit errs somewhere.
    fit = fit_latency_bandwidth([1000, 2000, 3000], [1000, 2000, 3300])
    assert 0 < fit["max_rel_error"] < 0.1


def test_crossing_interpolates_the_first_segment_that_reaches_the_target():
    # Between (16, 0.7) and (32, 0.95): 16 + (0.9 - 0.7) / 0.25 * 16 = 28.8.
    assert crossing([32, 4, 16, 8], [0.95, 0.2, 0.7, 0.4], 0.9) == pytest.approx(28.8)
    assert crossing([4, 8], [0.2, 0.4], 0.9) is None
    assert crossing([4, 8], [0.92, 0.95], 0.9) == 4
    # A dip after the first crossing does not move it.
    assert crossing([1, 2, 3], [0.5, 1.0, 0.5], 0.75) == pytest.approx(1.5)


def test_roofline_fit_of_exact_points():
    # a = 20 bytes/cycle per unit utilization, plateau 0.8 from m = 16 on.
    ms = [4, 8, 12, 16, 24, 32]
    us = [0.2, 0.4, 0.6, 0.8, 0.8, 0.8]
    fit = fit_roofline(ms, us)
    assert fit["a"] == pytest.approx(20)
    assert fit["u_sat"] == pytest.approx(0.8)
    assert fit["knee"] == pytest.approx(16)
    assert fit["max_abs_error"] == pytest.approx(0, abs=1e-12)
    assert roofline(10, fit["u_sat"], fit["a"]) == pytest.approx(0.5)
    # Memory-bound everywhere: no plateau; 90% needs 0.9 x 80 = 72 (model estimate).
    fit = fit_roofline([8, 16, 32], [0.1, 0.2, 0.4])
    assert fit["u_sat"] is None and fit["a"] == pytest.approx(80)
    req = membw.requirement([8, 16, 32], [0.1, 0.2, 0.4])
    assert req["rtl"] is None and req["basis"] == "model"
    assert req["needed"] == pytest.approx(72)


def test_requirement_uses_the_rtl_crossing_when_reached():
    req = membw.requirement([10, 20, 30], [0.5, 0.8, 1.0])
    assert req["basis"] == "rtl"
    assert req["needed"] == pytest.approx(25)      # 20 + (0.9 - 0.8) / 0.2 * 10


# -- overlap scheduler ---------------------------------------------------------------------------

def _comm(after, before=None):
    return SimpleNamespace(after=after, before=before)


def test_overlap_collective_hidden_under_compute():
    r = simulate([100], [_comm(-1)], lambda c, busy: 50, lambda c: 1.0)
    assert r["cycles"] == pytest.approx(100)
    assert r["comm_spans"] == [(0.0, pytest.approx(50), 0)]
    assert r["comm_overlap_cycles"] == pytest.approx(50)


def test_overlap_compute_slowed_while_a_collective_runs():
    # Half speed for the first 50 cycles (25 cycles of work), then 75 at full speed: 125.
    r = simulate([100], [_comm(-1)], lambda c, busy: 50,
                 lambda c: 1.0 if c is None else 0.5)
    assert r["cycles"] == pytest.approx(125)


def test_overlap_collective_speeds_up_when_compute_ends():
    # 40 cycles beside compute, 20 alone. Compute ends at 10: a quarter done, the other three
    # quarters take 15 -> 25.
    r = simulate([10], [_comm(-1)], lambda c, busy: 40 if busy else 20, lambda c: 1.0)
    assert r["cycles"] == pytest.approx(25)
    assert r["comm_spans"] == [(0.0, pytest.approx(25), 0)]


def test_overlap_blocking_collective_and_fifo_order():
    # Task 0 (10) issues A (needed by task 2) and B; task 1 (5) runs beside A; A takes 20
    # (busy or not), B 30. A: 10..30, task 1: 10..15, task 2 waits 15..30 then runs 30..34,
    # B starts when A ends (first in, first out): 30..60.
    comms = [_comm(0, before=2), _comm(0)]
    r = simulate([10, 5, 4], comms, lambda c, busy: 20 if c is comms[0] else 30,
                 lambda c: 1.0)
    assert r["cycles"] == pytest.approx(60)
    assert r["compute_spans"][2] == (pytest.approx(30), pytest.approx(34), 2)
    assert r["compute_wait_cycles"] == pytest.approx(15)
    assert [s[2] for s in r["comm_spans"]] == [0, 1]


def test_overlap_waiting_on_a_collective_that_never_comes_is_an_error():
    with pytest.raises(ScheduleError):
        simulate([1, 1], [_comm(1, before=1)], lambda c, busy: 1, lambda c: 1.0)


# -- workloads -----------------------------------------------------------------------------------

ASTRA_TEXT = """DATA
2
l0 -1 10 NONE 0 20 NONE 0 30 ALLREDUCE 400 5
l1 -1 11 NONE 0 21 NONE 0 31 ALLREDUCE 800 5
"""


def test_workload_from_astra_text(tmp_path):
    path = tmp_path / "w.txt"
    path.write_text(ASTRA_TEXT)
    wl = from_trace(load_astra_workload(path), "w", 0.5)
    # Forward l0, l1 (10 + 11), then l1.wg (31) -> the first collective; l1.ig (21) and l0.wg
    # (30) -> the second; l0.ig (20) trails.
    assert [t.cycles for t in wl.tasks] == [52, 51, 20]
    assert [(c.name, c.nbytes, c.after, c.before) for c in wl.comms] == [
        ("l1.wg", 800, 0, None), ("l0.wg", 400, 1, None)]
    assert wl.compute_cycles == 10 + 20 + 30 + 11 + 21 + 31


def test_forward_collectives_block_the_next_compute(tmp_path):
    path = tmp_path / "m.txt"
    path.write_text("MODEL\n1\nl0 -1 7 ALLGATHER 64 8 NONE 0 9 NONE 0 1\n")
    wl = from_trace(load_astra_workload(path), "m", 0.0)
    assert [t.cycles for t in wl.tasks] == [7, 17]
    assert [(c.after, c.before) for c in wl.comms] == [(0, 1)]


@pytest.mark.skipif(not RESNET50_FILE.is_file(), reason="../shared/data is not present")
def test_resnet50_workload_keeps_every_cycle_and_byte_of_the_file():
    rows = [line.split() for line in RESNET50_FILE.read_text().splitlines()[2:] if line.strip()]
    from sim_harness.experiments.workloads import (PLATFORM, RESNET50_BATCH,
                                                   RESNET50_TRAIN_FLOPS_PER_IMAGE)
    wl = resnet50()
    raw = from_trace(load_astra_workload(RESNET50_FILE), "raw", 0.5)
    assert len(wl.comms) == len(rows) == 54
    assert raw.compute_cycles == sum(int(r[2]) + int(r[5]) + int(r[8]) for r in rows)
    # The file's compute, layer by layer, scaled to the batch's FLOPs at 40 TFLOP/s.
    k = RESNET50_BATCH * RESNET50_TRAIN_FLOPS_PER_IMAGE / PLATFORM["ref_flops_per_cycle"] \
        / raw.compute_cycles
    assert [t.cycles for t in wl.tasks] == pytest.approx([t.cycles * k for t in raw.tasks])
    assert wl.comm_bytes("allreduce") == sum(int(r[10]) for r in rows)
    # The backward pass issues the last layer's gradient first.
    assert wl.comms[0].name.startswith(rows[-1][0]) and wl.comms[0].nbytes == int(rows[-1][10])
    assert wl.mem_share == COMPUTE_MEM_SHARE["resnet50"]


def test_gnmt_and_dlrm_sizes_from_their_parameters():
    d, ff, v = GNMT["d_model"], GNMT["d_ff"], GNMT["vocab"]
    enc, dec = 4 * d * d + 2 * d * ff, 8 * d * d + 2 * d * ff
    wl = gnmt()
    assert wl.comm_bytes() == 4 * (GNMT["encoder_layers"] * enc + GNMT["decoder_layers"] * dec
                                   + d * v)
    assert wl.comms[-1].name == "embedding.wg" and wl.comms[-1].after == len(wl.tasks) - 1
    w = dlrm()
    a2a = DLRM["tables"] * DLRM["local_batch"] * DLRM["dim"] * 4
    assert w.comm_bytes("alltoall") == 2 * a2a
    fwd, bwd = (c for c in w.comms if c.collective == "alltoall")
    assert w.tasks[fwd.before].name == "interaction forward"
    assert w.tasks[bwd.before].name == "embedding update"
    mlp = DLRM["bottom_mlp"], DLRM["top_mlp"]
    assert w.comm_bytes("allreduce") == 4 * sum(i * o + o for sizes in mlp
                                                 for i, o in zip(sizes, sizes[1:]))


def test_compute_scale_is_the_memory_bandwidth_ratio():
    assert compute_scale(32.0, 1000.0) == pytest.approx(900 / 32)
    assert compute_scale(64.0, 1000.0) == pytest.approx(900 / 64)


# -- training model on synthetic measurements ----------------------------------------------------

def _fields(**values) -> CollectiveRecord:
    """A record with the given fields (the analyses read no others)."""
    return CollectiveRecord(**dict(dict.fromkeys(CollectiveRecord.__dataclass_fields__),
                                   **values))


def _record(cycles, nbytes, mem_per_byte):
    return _fields(cycles=cycles, bytes=nbytes, mem_bytes_per_node=mem_per_byte * nbytes,
                   correct=True)


def test_fit_eta_by_hand():
    # a = 100, r = 10, k = 2, S = 2000: network-bound 200 cycles; at M = 20 with eta 0.5,
    # memory-bound 2000 x 2 / (0.5 x 20) = 400. At M = 1000 memory never binds.
    points = [(2000, 20.0, 100 + 400), (2000, 1000.0, 100 + 200)]
    eta, err = training.fit_eta(points, 100.0, 10.0, 2.0)
    assert eta == pytest.approx(0.5) and err == pytest.approx(0, abs=1e-12)


def _calibration(a=100.0, r=10.0, k=2.0, eta=1.0, largest=1 << 20, per_link=1.0,
                 collectives=("allreduce",)):
    return {f"{m}/{c}": {"mode": m, "collective": c, "a": a, "r": r, "k": k, "eta": eta,
                         "largest_rtl_bytes": largest, "link_bytes_per_byte": per_link,
                         "max_rel_error": 0.0, "points": []}
            for m in ("ace", "staged", "p2p") for c in collectives}


def test_collective_model_takes_the_slower_of_network_and_memory_and_runs_in_pieces():
    model = training.CollectiveModel(_calibration(largest=1000), "ace")
    # 1000 bytes: network 1000 / 10 = 100, memory 1000 x 2 / 40 = 50 -> 100 + 100.
    assert model.cycles("allreduce", 1000, 40.0) == pytest.approx(200)
    # Memory 10 B/cycle: 1000 x 2 / 10 = 200 > 100 -> 300.
    assert model.cycles("allreduce", 1000, 10.0) == pytest.approx(300)
    # 2500 bytes: three pieces of at most 1000, each paying a = 100.
    assert model.pieces("allreduce", 2500) == 3
    assert model.cycles("allreduce", 2500, 40.0) == pytest.approx(300 + 250)
    assert model.mem_bandwidth("allreduce", 1000, 40.0) == pytest.approx(2000 / 200)


def test_iteration_by_hand():
    cal = _calibration()
    # One task of 1000 reference cycles x scale 2, one 1000-byte all-reduce issued at once.
    wl = SimpleNamespace(tasks=[SimpleNamespace(cycles=1000)], mem_share=0.5,
                         comms=[SimpleNamespace(collective="allreduce", nbytes=1000,
                                                after=-1, before=None)])
    ace = training.iteration(wl, training.CollectiveModel(cal, "ace"), mode="ace",
                             policy="compute_first", scale=2.0, mem_rate_bpc=32.0,
                             link_bpc=16.0)
    # 100 + max(100, 1000 x 2 / 16 = 125) = 225 beside compute, hidden under 2000.
    assert ace["cycles"] == pytest.approx(2000) and ace["ideal_cycles"] == 2000
    assert ace["link_utilization_comm"] == pytest.approx(1000 / (225 * 16))
    assert ace["link_utilization_iteration"] == pytest.approx(1000 / (2000 * 16))
    base = training.CollectiveModel(_calibration(k=6.0), "staged")
    # Baseline, compute first, core share 0.1 (saturating): the collective takes
    # 100 + 1000 x 6 / 16 = 475 beside compute, during which compute runs at 0.9: 427.5
    # done, 1572.5 left alone -> 2047.5.
    b = training.iteration(wl, base, mode="staged", policy="compute_first", scale=2.0,
                           mem_rate_bpc=32.0, link_bpc=16.0, core_share=0.1)
    assert b["cycles"] == pytest.approx(2047.5)
    # Core share 0.05: the kernels drive it at half speed (950 cycles), compute at 0.95:
    # 902.5 done, 1097.5 left -> 2047.5 again.
    b = training.iteration(wl, base, mode="staged", policy="compute_first", scale=2.0,
                           mem_rate_bpc=32.0, link_bpc=16.0, core_share=0.05)
    assert b["cycles"] == pytest.approx(950 + 1097.5)
    # Comm first: alone, 100 + 1000 x 6 / 32 = 287.5 cycles at 6000 / 287.5 B/cycle of
    # memory; compute needs 16 and gets 32 - 20.87 -> rate 0.9 x 11.13 / 16.
    b = training.iteration(wl, base, mode="staged", policy="comm_first", scale=2.0,
                           mem_rate_bpc=32.0, link_bpc=16.0, core_share=0.1)
    rate = 0.9 * (32 - 6000 / 287.5) / 16
    assert b["cycles"] == pytest.approx(287.5 + (2000 - 287.5 * rate))


def test_resnet50_compute_is_scaled_to_its_batch():
    from sim_harness.experiments.workloads import RESNET50_TRAIN_FLOPS_PER_IMAGE, PLATFORM
    if not RESNET50_FILE.is_file():
        pytest.skip("../shared/data is not present")
    small, large = resnet50(batch=2), resnet50(batch=32)
    assert large.compute_cycles == pytest.approx(16 * small.compute_cycles)
    assert large.compute_cycles * PLATFORM["ref_flops_per_cycle"] == pytest.approx(
        32 * RESNET50_TRAIN_FLOPS_PER_IMAGE)
    assert large.comm_bytes() == small.comm_bytes()


# -- membw analysis on synthetic measurements ----------------------------------------------------

def test_membw_requirement_and_per_ratio_figures_from_exact_points(monkeypatch):
    monkeypatch.setitem(membw.SETTINGS, "quick", {"systems": ["ring8"], "bytes": 4096,
                                                  "low_backgrounds": [0.75]})
    monkeypatch.setattr(membw, "COMPUTE_MEM_SHARE", {"x": 0.5})
    s = membw.settings(True, None, [2])
    assert s["backgrounds"] == [0.0, 0.5]
    # ring8 at ratio 2: M = 32, 16, 8. ACE: a = 20, plateau 0.8 (from 16 on); baselines:
    # a = 64, no plateau; memory per link byte 1 (ACE), 3 (staged), 2 (p2p).
    measured = {}
    for b in (0.0, 0.5, 0.75):
        m = 32 * (1 - b)
        entry = {"system": {"clock_mhz": 1000.0}}
        for mode, u, per in (("ace", min(0.8, m / 20), 1.0), ("staged", m / 64, 3.0),
                             ("p2p", m / 64, 2.0)):
            entry[mode] = _fields(cycles=1000, time_over_bound=1.0, link_utilization=u,
                                  link_utilization_per_link={"n0.l0": u, "n1.l0": u},
                                  mem_bytes_per_link_byte=per,
                                  mem_bandwidth_bytes_per_cycle=m, mem_over_2S=1.0)
        measured[point_key("ring8", "allreduce", 4096, b, 2)] = entry
    doc = membw.analyze(measured, s)
    ring = doc["systems"]["ring8"]
    assert ring["requirement"]["ace"]["needed"] == pytest.approx(18)       # 0.9 x 20, model
    assert ring["requirement"]["staged"]["needed"] == pytest.approx(57.6)
    assert ring["ratio_90"]["staged"] == pytest.approx(3.2)
    assert ring["ratio_90_basis"]["p2p"] == "model"
    assert doc["by_ratio"]["2"]["mem_bw_reduction"] == {"staged": pytest.approx(3.0),
                                                        "p2p": pytest.approx(2.0)}
    assert doc["by_ratio"]["2"]["link_utilization"]["ace"] == pytest.approx(0.8)


def test_saved_points_are_reused_only_on_the_same_engine_configuration(tmp_path):
    from sim_harness.experiments.common import load_points, save_points
    from sim_harness.systems import load_system

    spec = load_system("ring8")
    system = {"config": spec.config.to_dict(), "topology": str(spec.topology)}
    other = dict(system, config=dict(system["config"], num_channels=1))
    ace, base = _fields(cycles=1, name="a"), _fields(cycles=2, name="b")
    measured = {point_key("ring8", "allreduce", 4096, 0.5, 4): {
                    "system": system, "ace": ace, "staged": base, "p2p": base},
                point_key("ring8", "allreduce", 8192, 0.5, 4): {
                    "system": other, "ace": base, "staged": ace, "p2p": ace}}
    save_points(tmp_path / "rtl_points.json", measured)
    back = load_points(tmp_path / "rtl_points.json")
    assert list(back) == [("ring8", "allreduce", 4096, 0.5, 4)]
    assert back[("ring8", "allreduce", 4096, 0.5, 4)]["ace"] == ace
    assert back[("ring8", "allreduce", 4096, 0.5, 4)]["p2p"] == base
    with pytest.raises(ExperimentError, match="not a readable rtl_points.json"):
        load_points(tmp_path / "missing.json")


# -- command line --------------------------------------------------------------------------------

def test_cli_errors_are_one_line(capsys, tmp_path):
    assert main(["experiment", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "allowed: membw, utilization, training, paper" in err
    file = tmp_path / "f"
    file.write_text("")
    assert main(["experiment", "membw", "--out", str(file)]) == 2
    assert "is not a directory" in capsys.readouterr().err
    assert main(["experiment", "membw", "--workers", "0"]) == 2
    capsys.readouterr()
    assert main(["experiment", "membw", "--systems", "ring8,ring9"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--systems: 'ring9' is not a named system" in err
    with pytest.raises(ExperimentError):
        run_experiment("paperz")


def test_mem_ratio_is_checked_and_parsed(capsys):
    assert parse_ratios("8,2,4,4") == (2, 4, 8)
    assert parse_ratios("2.5") == (2.5,)
    for bad in ("", "2,x", "0", "-1"):
        with pytest.raises(ExperimentError, match="--mem-ratio"):
            parse_ratios(bad)
    # The harness engines' memory port (64 bytes) bounds the memory at 128 B/cycle: 8 x 16.
    assert main(["experiment", "membw", "--mem-ratio", "2,9"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "mem_ratio: 9 is out of range" in err and "8" in err


def test_systems_and_ratios_replace_each_experiments_own():
    for module in (membw, utilization):
        s = module.settings(False)
        assert {k[0] for k in module.plan(s).keys} == {"ring8", "ring16", "torus4x4"}
        assert {k[4] for k in module.plan(s).keys} == {2, 4, 6, 8}
        s = module.settings(False, ["torus4x2"], [3])
        assert {(k[0], k[4]) for k in module.plan(s).keys} == {("torus4x2", 3)}
    for module in (membw, utilization, training):
        s = module.settings(True)
        assert {k[0] for k in module.plan(s).keys} == {"ring8", "torus4x2"}
        assert {k[0] for k in module.plan(module.settings(True, ["ring4"])).keys} == {"ring4"}
    # All-to-all is compiled for one-dimensional systems only: a torus models no DLRM.
    s = training.settings(True, ["torus4x2"])
    assert training.collectives(s, "torus4x2") == ["allreduce"]
    assert {k[1] for k in training.plan(s).keys} == {"allreduce"}


def test_paper_analyses_each_experiment_on_its_own_systems(monkeypatch, tmp_path):
    """``paper`` measures the union of the experiments' points once, then analyses each
    experiment on the systems it planned (here: one system each), not on the union."""
    import sim_harness.experiments as experiments
    from sim_harness.experiments.common import Plan

    own = {"membw": "ring16", "utilization": "ring4", "training": "ring8"}
    seen = {}
    monkeypatch.setattr(training, "check_inputs", lambda: None)
    monkeypatch.setattr(experiments, "measure", lambda plan, **kw: {
        k: {"system": {"config": {}, "topology": ""}} for k in plan.keys})
    monkeypatch.setattr(experiments.paper, "write", lambda out, s, *args: {})
    for name, module in experiments.EXPERIMENTS.items():
        def settings(quick, systems=None, ratios=None, name=name):
            return {"systems": systems or [own[name]], "ratios": list(ratios or [2]),
                    "mem_bytes": None}

        def plan(s, name=name):
            return Plan([point_key(s["systems"][0], "allreduce", 4, 0.0, s["ratios"][0])])

        def analyze(measured, s, name=name, plan=plan):
            seen[name] = {(k[0], k[4]) for k in plan(s).keys if k in measured}
            return {}

        monkeypatch.setattr(module, "settings", settings)
        monkeypatch.setattr(module, "plan", plan)
        monkeypatch.setattr(module, "analyze", analyze)
        monkeypatch.setattr(module, "write", lambda folder, summary: None)
    run_experiment("paper", out=tmp_path, progress=False, log=lambda *a: None)
    assert seen == {name: {(system, 2)} for name, system in own.items()}
    run_experiment("paper", out=tmp_path, progress=False, log=None, systems=["switch4"],
                   ratios="4")
    assert seen == {name: {("switch4", 4)} for name in own}


# -- one real run --------------------------------------------------------------------------------

@pytest.mark.slow
def test_membw_tiny_on_ring8(monkeypatch, tmp_path):
    """Two balances and a starved point of a 64 KiB all-reduce on ring8, every mode, through
    the whole experiment path (run_points, analysis, files)."""
    monkeypatch.setitem(membw.SETTINGS, "quick", {"systems": ["ring8"], "bytes": 65536,
                                                  "low_backgrounds": [0.75]})
    monkeypatch.setattr(membw, "COMPUTE_MEM_SHARE", {})
    doc = run_experiment("membw", quick=True, out=tmp_path, workers=2, progress=False,
                         log=None, ratios="2,8")
    assert {p.name for p in tmp_path.iterdir()} >= {"summary.json", "summary.md",
                                                    "membw_utilization.png",
                                                    "membw_by_ratio.png"}
    assert json.loads((tmp_path / "summary.json").read_text()) == doc
    ring = doc["systems"]["ring8"]
    low, high, starved = ring["points"]
    assert (low["ratio"], high["ratio"], starved["ratio"]) == (2, 8, 2)
    assert high["mem_available"] == 128 and starved["mem_available"] == 8
    # A quarter of the memory bandwidth hurts every mode; four times as much helps the
    # memory-staged baselines, which read and write memory more per link byte than ACE.
    for mode in ("ace", "staged", "p2p"):
        assert starved[mode]["link_utilization"] < low[mode]["link_utilization"]
    for mode in ("staged", "p2p"):
        assert high[mode]["link_utilization"] > low[mode]["link_utilization"]
        assert low[mode]["mem_bytes_per_link_byte"] > low["ace"]["mem_bytes_per_link_byte"]
    assert low["ace"]["link_utilization"] > low["staged"]["link_utilization"]
    assert doc["by_ratio"]["2"]["mem_bw_reduction"]["staged"] > 2.5
    assert Path(tmp_path / "summary.md").read_text().startswith("# membw")
