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
    slow = _record("amaranth", "ring8", 8, 300, 0, 30.0, 20.0)
    assert fast["node_cycles_per_s"] == 10000 * 8 / 2.0
    assert fast["node_cycles_per_cpu_s"] == 10000 * 8 / 1.0
    assert fast["run_node_cycles_per_s"] == 9000 * 8 / 1.0
    assert slow["run_node_cycles_per_s"] == 0.0
    table = format_bench([fast, slow])
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
