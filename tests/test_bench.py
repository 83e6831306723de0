"""Simulator speed (``sim_harness.bench``, ``ace bench-sim``): the table and the option
errors here; the measurements themselves are benchmarks (``pytest -m benchmark -s``), not
gated: the Verilator runs reuse the ``ring8``/``ring16`` builds (``ring16`` is built if
missing), and the Amaranth run spends minutes elaborating eight engines."""

from __future__ import annotations

import pytest

from ace.cli import main
from sim_harness.bench import _rates, amaranth_speed, format_bench, verilator_speed


def _record(simulator, system, nodes, csr, run, seconds, cpu):
    out = {"simulator": simulator, "system": system, "nodes": nodes, "csr_cycles": csr,
           "run_cycles": run, "csr_seconds": seconds / 2, "run_seconds": seconds / 2,
           "csr_cpu_seconds": cpu / 2, "run_cpu_seconds": cpu / 2}
    return _rates(out, nodes)


def test_rates_and_table():
    fast = _record("verilator", "ring8", 8, 1000, 9000, 2.0, 1.0)
    fast.update(idle_cycles=5000, idle_seconds=0.5, idle_cpu_seconds=0.25)
    fast = _rates(fast, 8)
    slow = _record("amaranth", "ring8", 8, 300, 0, 30.0, 20.0)
    assert fast["node_cycles_per_s"] == 10000 * 8 / 2.0
    assert fast["node_cycles_per_cpu_s"] == 10000 * 8 / 1.0
    assert fast["run_node_cycles_per_s"] == 9000 * 8 / 1.0
    assert slow["run_node_cycles_per_s"] == 0.0
    # The idle floor is its own phase, outside the totals.
    assert fast["idle_node_cycles_per_cpu_s"] == 5000 * 8 / 0.25
    assert fast["cycles"] == 10000 and slow["idle_node_cycles_per_cpu_s"] == 0.0
    table = format_bench([fast, slow])
    assert f"{5000 * 8 / 0.25:11,.0f}" in table.splitlines()[2]
    ratio = fast["node_cycles_per_s"] / slow["node_cycles_per_s"]
    assert f"{ratio:,.0f}x node-cycles/s" in table and "ring8" in table


@pytest.mark.parametrize("args", [["--systems", "ring9"], ["--systems", ","],
                                  ["--cycles", "-1"], ["--bytes", "6"]])
def test_bad_options_are_one_line_exit_2(capsys, args):
    assert main(["bench-sim", *args]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


@pytest.mark.benchmark
def test_simulator_speed():
    """Verilator on ring8 and ring16 (1 MiB all-reduce, ACE mode), Amaranth on ring8."""
    records = [verilator_speed(name, log=print) for name in ("ring8", "ring16")]
    assert all(r["correct"] for r in records)
    records.append(amaranth_speed("ring8", cycles=3000, log=print))
    print(format_bench(records))
    assert records[0]["node_cycles_per_cpu_s"] > 10 * records[-1]["node_cycles_per_cpu_s"]


def test_speed_record_round_trip(tmp_path):
    """A run's speed is kept per system (short runs are not)."""
    from sim_harness import speed

    path = tmp_path / "speed.json"
    assert speed.recorded_speed(path, "ring8x") is None
    speed.record_speed(path, "ring8x", 100, 8, 1.0)            # too short to say anything
    assert speed.recorded_speed(path, "ring8x") is None
    speed.record_speed(path, "ring8x", 200_000, 8, 4.0)
    speed.record_speed(path, "other", 50_000, 4, 1.0)
    assert speed.recorded_speed(path, "ring8x") == 400_000
    assert speed.recorded_speed(path, "other") == 200_000


def test_estimate_of_the_default_replay(tmp_path, monkeypatch, capsys):
    """``ace replay --estimate``: both modes' run cycles within 20% of the measured default
    replay (123,781 and 259,052 cycles, docs/benchmarks.md), and the time at the recorded
    speed; nothing is built or run."""
    from sim_harness import simulator, speed
    from sim_harness.preflight import preflight
    from sim_harness.systems import load_system
    from sim_harness.traces import DEFAULT_TRACE, load_trace

    monkeypatch.setattr(simulator, "HARNESS_BUILD_ROOT", tmp_path)
    system = load_system("ring8")
    plan = preflight(load_trace(DEFAULT_TRACE), system, ("ace", "staged", "p2p"))
    speed.record_speed(simulator.speed_file(), system.name, 1_000_000, 8, 40.0)  # 200,000/s
    est = speed.estimate(plan, simulator.speed_file())
    assert est["measured"] and est["node_cycles_per_cpu_s"] == 200_000
    for mode, measured in (("ace", 123_781), ("staged", 259_052)):
        (prepared,) = plan.collectives[mode]
        assert abs(speed.expected_cycles(prepared, system, load=False) / measured - 1) < 0.2
        assert est["modes"][mode]["seconds"] == est["modes"][mode]["cycles"] * 8 / 200_000
    # The profile-guided build's own speed once recorded; the plain one's until then.
    assert speed.estimate(plan, simulator.speed_file(), pgo=True) == est
    speed.record_speed(simulator.speed_file(), simulator.speed_key(system.name, pgo=True),
                       1_000_000, 8, 32.0)
    assert speed.estimate(plan, simulator.speed_file(), pgo=True)["node_cycles_per_cpu_s"] \
        == 250_000
    assert speed.estimate(plan, simulator.speed_file()) == est
    assert main(["replay", "--estimate", "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert all(f"{mode}: about" in out for mode in ("ace", "staged", "p2p"))
    assert "measured here" in out
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob("ace_system_*"))


@pytest.mark.large
def test_profile_guided_build_runs_the_same_cycles():
    """``pgo`` (the engine library compiled again with a profile of training replays) changes
    the speed only: the default replay gives the same raw records in every mode, value for
    value, and bit-exact results. Builds the ``ring8`` profile-guided driver (minutes)."""
    from sim_harness.replay import replay
    from sim_harness.systems import load_system
    from sim_harness.traces import DEFAULT_TRACE, load_trace

    trace, system = load_trace(DEFAULT_TRACE), load_system("ring8")
    plain, guided = (replay(trace, system, log=None, progress=False, parallel=False, pgo=pgo)
                     for pgo in (False, True))
    assert all(raw["correct"] for run in guided["runs"] for raw in run["raws"])
    assert guided == plain
