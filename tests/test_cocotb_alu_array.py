"""Run the cocotb testbench ``testbench/tb_alu_array.py`` on the ``ace_alu_array`` top.

The three flow patterns run as separate testcases on the small configuration (4 lanes);
the throughput measurement runs on it too and prints beats per cycle and latency. The
``benchmark`` test measures throughput on the default configuration (16 lanes).

The random seed is cocotb's and is logged; ``ACE_SEED=<seed>`` reruns with a given one.
"""

import json
import os

import pytest

from ace.config import CLOCK_GATING, NAMED_CONFIGS
from testbench.runner import run_cocotb

SMALL = NAMED_CONFIGS["small"]
SEED = int(os.environ["ACE_SEED"]) if os.environ.get("ACE_SEED") else None


def _print_json(results, name):
    path = results.parent / name
    figures = json.loads(path.read_text())
    print(f"{name}: {json.dumps(figures, sort_keys=True)}")
    return figures


@pytest.mark.parametrize("flow", ["no_pauses", "source_idle", "sink_backpressure"])
def test_alu_array_flow(flow):
    results = run_cocotb("ace_alu_array", SMALL, "tb_alu_array", testcase=f"test_{flow}",
                         seed=SEED)
    _print_json(results, f"alu_elements_{flow}.json")


@pytest.mark.parametrize("gating", CLOCK_GATING)
def test_alu_array_bursts_both_gating_forms(gating):
    """Bursts and long pauses on source and sink, with the lanes held by a clock enable and by
    a gated clock (the form the harness simulates; Amaranth's simulator cannot run it)."""
    results = run_cocotb("ace_alu_array", SMALL.replace(clock_gating=gating), "tb_alu_array",
                         testcase="test_bursts", seed=SEED)
    _print_json(results, "alu_elements_bursts.json")


def test_alu_array_throughput():
    results = run_cocotb("ace_alu_array", SMALL, "tb_alu_array", testcase="test_throughput",
                         seed=SEED)
    figures = _print_json(results, "alu_throughput.json")
    assert figures["beats_per_cycle"] >= 0.999


@pytest.mark.benchmark
def test_alu_array_throughput_benchmark():
    """Throughput and latency of the default configuration (builds a 16-lane array)."""
    config = NAMED_CONFIGS["default"]
    results = run_cocotb("ace_alu_array", config, "tb_alu_array", testcase="test_throughput",
                         seed=SEED)
    figures = _print_json(results, "alu_throughput.json")
    assert figures["beats_per_cycle"] >= 0.999
