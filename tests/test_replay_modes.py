"""The three modes on the Verilated 4-engine ring (``ring4``): ACE, the memory-staged baseline
and the point-to-point baseline run the same programs bit-exact, each node's measured memory
bytes equal its mode's documented accounting (``testbench.replay_checks.check_replay``), and
``ace replay --mode all`` reports the three side by side with each baseline against ACE.
"""

from __future__ import annotations

import json
import subprocess
import sys

from sim_harness.replay import replay
from sim_harness.systems import load_system
from testbench.replay_checks import check_replay, collective_spec, trace_of

SYSTEM = load_system("ring4")


def _node_bytes(raw, k):
    return raw["mem_read_bytes"][k] + raw["mem_write_bytes"][k]


def test_three_modes_on_ring4():
    """Every collective in the three modes, bit-exact with the documented accounting. The p2p
    baseline moves less memory than the staged one exactly where reductions are sent on
    (all-reduce, reduce-scatter), the same where they are not (all-gather), and every mode
    carries the same payload on the links."""
    specs = [collective_spec("ar", "allreduce", 8192, "fp32"),
             collective_spec("rs", "reduce_scatter", 4004, "bf16", "max"),
             collective_spec("ag", "allgather", 2048, "int32")]
    results = replay(trace_of(*specs), SYSTEM, modes=("ace", "baseline", "p2p"),
                     progress=False, log=None)
    assert [run["mode"] for run in results["runs"]] == ["ace", "staged", "p2p"]
    raws = {run["mode"]: {raw["name"]: raw for raw in run["raws"]} for run in results["runs"]}
    for by_name in raws.values():
        for raw in by_name.values():
            check_replay(raw, SYSTEM)
    for name in ("ar", "rs", "ag"):
        ace, staged, p2p = (raws[mode][name] for mode in ("ace", "staged", "p2p"))
        assert ace["link_tx_payload_bytes"] == staged["link_tx_payload_bytes"] \
            == p2p["link_tx_payload_bytes"], name
        for k in range(SYSTEM.topology.num_nodes):
            if name == "ag":
                assert _node_bytes(p2p, k) == _node_bytes(staged, k), (name, k)
            else:
                assert _node_bytes(ace, k) < _node_bytes(p2p, k) < _node_bytes(staged, k), \
                    (name, k)


def test_cli_replay_mode_all(tmp_path):
    """``ace replay --mode all`` on ring4: exit 0, the table with both comparisons, and a
    results.json naming each run's mode, every record bit-exact."""
    trace = tmp_path / "t.yaml"
    trace.write_text("version: 1\ncollectives:\n"
                     "  - {name: ar, collective: allreduce, bytes: 16384, dtype: fp32}\n")
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "ace.cli", "replay", str(trace), "--system",
                             "ring4", "--mode", "all", "--out", str(out), "--quiet"],
                            capture_output=True, text=True, cwd=tmp_path, timeout=1800)
    assert result.returncode == 0, result.stderr + result.stdout
    assert "staged / ACE: memory traffic" in result.stdout
    assert "p2p / ACE: memory traffic" in result.stdout
    doc = json.loads((out / "results.json").read_text())
    assert [run["mode"] for run in doc["runs"]] == ["ace", "staged", "p2p"]
    assert all(rec["correct"] and rec["mode"] == run["mode"]
               for run in doc["runs"] for rec in run["collectives"])
    assert list(doc["comparison"]) == ["staged", "p2p"]
    staged, p2p = (doc["comparison"][b]["memory_traffic_reduction"] for b in ("staged", "p2p"))
    assert staged > p2p > 1


def test_cli_replay_rejects_an_unknown_mode(tmp_path):
    result = subprocess.run([sys.executable, "-m", "ace.cli", "replay", "--mode", "hbm"],
                            capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert result.returncode == 2
    assert "--mode: 'hbm'; allowed: ace, staged, p2p (alias: baseline), all, both" \
        in result.stderr
