"""Tests of the replay result writers (sim_harness/report.py): results.json shape, summary.csv,
the plots, the Perfetto timeline reconstructed from a synthetic sample series, and the table.

The synthetic collective: a ring all-reduce of S = 4096 bytes on ring:2 at 16 B/cycle, issued
at cycle 5000 (+ an offset per collective), sampled every 100 cycles, done 350 cycles later.
"""

import csv
import json

import pytest

from sim_harness.metrics import link_key
from sim_harness.report import (CSV_COLUMNS, build_results, format_table, sample_series,
                                step_spans, write_results)

SYSTEM = {"config": {"name": "small", "num_links": 4}, "topology": "ring:2", "clock_mhz": 500.0,
          "link_bytes_per_cycle": 16.0, "link_latency": 10, "mem_bytes_per_cycle": 32.0,
          "mem_latency": 8, "background_share": 0.0}

NODE0_STEPS = [["load", 4096], ["s", 2048], ["rrc", 2048], ["s", 2048], ["r", 2048],
               ["store", 4096]]


def raw(name="grad0", mode="ace", offset=0, mem_scale=1):
    """Node 0 link 0 carries 800, 1600, 1600 wire bytes in the three 100-cycle intervals
    (utilization 0.5, 1.0, 1.0); node 1 link 0 carries 1600, 1600, 960 (1.0, 1.0, 0.6)."""
    t0 = 5000 + offset
    k = mem_scale
    return {
        "name": name, "collective": "allreduce", "algorithm": "ring", "topology": "ring:2",
        "nodes": 2, "bytes": 4096, "dtype": "fp32", "op": "sum", "mode": mode, "chunks": 1,
        "start_cycle": t0, "end_cycle": t0 + 350, "cycles": 350,
        "mem_read_bytes": [4096 * k, 4096 * k], "mem_write_bytes": [4096 * k, 4096 * k],
        "link_tx_payload_bytes": [[4096, 0], [4096, 0]],
        "link_tx_wire_bytes": [[4160, 0], [4160, 0]],
        "links_used": [[0, 0], [1, 0]],
        "program_link_bytes": [[4096, 0], [4096, 0]],
        "latency_steps": 2, "correct": True,
        "samples": {
            "interval": 100, "cycle": [t0 + 100, t0 + 200, t0 + 300],
            "mem_read_bytes": [[1000 * k, 0], [2000 * k, 0], [4000 * k, 0]],
            "mem_write_bytes": [[0, 0], [0, 0], [2000 * k, 100 * k]],
            "link_wire_bytes": [[[800, 0], [1600, 0]], [[2400, 0], [3200, 0]],
                                [[4000, 0], [4160, 0]]],
            "steps_done": [[[1, 0], [0]], [[3, 0], [1]], [[3, 2], [1]]],
        },
        "steps": [[NODE0_STEPS, [["r", 2048], ["store", 2048]]],
                  [[["load", 4096], ["store", 4096]]]],
    }


# The staged run is given by its old name, ``baseline``: results name it ``staged``.
RUNS = [{"mode": "ace", "raws": [raw("grad0"), raw("grad1", offset=1000)]},
        {"mode": "baseline", "raws": [raw("grad0", "baseline", mem_scale=3),
                                      raw("grad1", "baseline", offset=1000, mem_scale=3)]},
        {"mode": "p2p", "raws": [raw("grad0", "p2p", mem_scale=2),
                                 raw("grad1", "p2p", offset=1000, mem_scale=2)]}]


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    path = tmp_path_factory.mktemp("replay")
    written = write_results(path, SYSTEM, RUNS)
    return path, written


# -- sample series and step reconstruction --------------------------------------------------------

def test_sample_series():
    s = sample_series(raw(), 16.0)
    assert s["start"] == [5000, 5100, 5200] and s["end"] == [5100, 5200, 5300]
    assert s["link"] == {"n0.l0": [0.5, 1.0, 1.0], "n1.l0": [1.0, 1.0, 0.6]}
    assert s["mem_read"] == [[10.0, 0.0], [10.0, 0.0], [20.0, 0.0]]
    assert s["mem_write"] == [[0.0, 0.0], [0.0, 0.0], [20.0, 1.0]]


def test_sample_series_without_samples():
    r = raw()
    r["samples"] = {}
    assert sample_series(r, 16.0) == {"start": [], "end": [], "link": {"n0.l0": [], "n1.l0": []},
                                      "mem_read": [], "mem_write": []}
    assert all(sp["start"] == 5000 and sp["end"] == 5350 for sp in step_spans(r)
               if sp["index"] == 0)


def test_step_spans_from_samples():
    spans = {(sp["node"], sp["channel"], sp["index"]): (sp["type"], sp["bytes"], sp["start"],
                                                        sp["end"]) for sp in step_spans(raw())}
    assert len(spans) == 6 + 2 + 2
    # node 0 channel 0: done counts 1, 3, 3 at 5100, 5200, 5300; all 6 done at 5350.
    assert spans[(0, 0, 0)] == ("load", 4096, 5000, 5100)
    assert spans[(0, 0, 1)] == ("s", 2048, 5100, 5200)
    assert spans[(0, 0, 2)] == ("rrc", 2048, 5200, 5200)      # done in the same interval
    assert spans[(0, 0, 3)] == ("s", 2048, 5200, 5350)
    assert spans[(0, 0, 4)] == ("r", 2048, 5350, 5350)
    assert spans[(0, 0, 5)] == ("store", 4096, 5350, 5350)
    # node 0 channel 1: 0, 0, 2.
    assert spans[(0, 1, 0)] == ("r", 2048, 5000, 5300)
    assert spans[(0, 1, 1)] == ("store", 2048, 5300, 5300)
    # node 1 channel 0: 0, 1, 1.
    assert spans[(1, 0, 0)] == ("load", 4096, 5000, 5200)
    assert spans[(1, 0, 1)] == ("store", 4096, 5200, 5350)


# -- results.json ---------------------------------------------------------------------------------

def test_written_files(out):
    path, written = out
    names = sorted(p.name for p in written)
    assert names == sorted(["results.json", "summary.csv", "link_utilization.png",
                            "memory_bandwidth.png", "ace_vs_baseline.png", "timeline.json"])
    for p in written:
        assert p.parent == path and p.stat().st_size > 0
        if p.suffix == ".png":
            assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_results_json_shape(out):
    path, _ = out
    doc = json.loads((path / "results.json").read_text())
    assert set(doc) == {"system", "runs", "comparison"}
    assert doc["system"] == SYSTEM
    assert [r["mode"] for r in doc["runs"]] == ["ace", "staged", "p2p"]
    for run in doc["runs"]:
        assert set(run) == {"mode", "collectives", "summary"}
        assert [c["name"] for c in run["collectives"]] == ["grad0", "grad1"]
        assert run["summary"]["mode"] == run["mode"]
        assert run["summary"]["collectives"] == 2
    rec = doc["runs"][0]["collectives"][0]
    for key in ("name", "op", "algorithm", "nodes", "bytes", "dtype", "mode", "chunks", "cycles",
                "bound_cycles", "time_over_bound", "time_us", "link_utilization",
                "link_utilization_per_link", "header_overhead", "mem_read_bytes",
                "mem_write_bytes", "mem_read_bytes_by_node", "mem_write_bytes_by_node",
                "mem_bytes_per_node", "mem_over_2S", "mem_bytes_per_link_byte",
                "mem_bandwidth_bytes_per_cycle", "mem_bandwidth_gbps", "algbw_gbps",
                "busbw_gbps", "correct"):
        assert key in rec, key
    # bound: 2 * 1/2 * 4096 / 16 + 10 (one link latency; the 2-step chain, 20, is less
    # than 256 + 10) = 266 cycles; 350 cycles measured.
    assert rec["bound_cycles"] == 266 and rec["time_over_bound"] == pytest.approx(350 / 266)
    assert rec["time_us"] == pytest.approx(0.7)                   # 350 cycles at 500 MHz
    assert rec["link_utilization"] == pytest.approx(4096 / (16 * 350))
    assert rec["mem_over_2S"] == 1.0
    assert list(doc["comparison"]) == ["staged", "p2p"]
    for base, reduction in (("staged", 3.0), ("p2p", 2.0)):
        comp = doc["comparison"][base]
        assert comp["memory_traffic_reduction"] == reduction
        assert comp["speedup"] == 1.0 and comp["link_utilization_gain"] == 1.0
        assert [c["name"] for c in comp["per_collective"]] == ["grad0", "grad1"]
        assert [c["memory_traffic_reduction"] for c in comp["per_collective"]] == [
            reduction, reduction]


def test_comparison_with_one_baseline(tmp_path):
    doc = build_results(SYSTEM, [RUNS[0], RUNS[2]])
    assert list(doc["comparison"]) == ["p2p"]
    assert "ace" not in build_results(SYSTEM, RUNS[1:]).get("comparison", {})


def test_single_mode_has_no_comparison(tmp_path):
    written = write_results(tmp_path / "ace_only", SYSTEM, RUNS[:1])
    names = {p.name for p in written}
    assert "ace_vs_baseline.png" not in names and "results.json" in names
    doc = json.loads((tmp_path / "ace_only" / "results.json").read_text())
    assert set(doc) == {"system", "runs"}


def test_mode_mismatch_is_rejected():
    with pytest.raises(ValueError, match="mode"):
        build_results(SYSTEM, [{"mode": "ace", "raws": [raw(mode="baseline")]}])


# -- summary.csv ----------------------------------------------------------------------------------

def test_summary_csv(out):
    path, _ = out
    with open(path / "summary.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == list(CSV_COLUMNS)
    assert [(r["mode"], r["name"]) for r in rows] == [
        ("ace", "grad0"), ("ace", "grad1"), ("staged", "grad0"), ("staged", "grad1"),
        ("p2p", "grad0"), ("p2p", "grad1")]
    assert rows[0]["cycles"] == "350" and rows[0]["correct"] == "True"
    assert float(rows[0]["mem_over_2S"]) == 1.0 and float(rows[2]["mem_over_2S"]) == 3.0
    assert float(rows[0]["bound_cycles"]) == 266


# -- timeline.json --------------------------------------------------------------------------------

def test_timeline(out):
    path, _ = out
    doc = json.loads((path / "timeline.json").read_text())
    events = doc["traceEvents"]
    procs = {e["args"]["name"]: e["pid"] for e in events
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert set(procs) == {f"{mode} {what}" for mode in ("ace", "staged", "p2p")
                          for what in ("collectives", "node 0", "node 1")}
    assert len(set(procs.values())) == 9
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e["ph"] == "M" and e["name"] == "thread_name"}
    assert threads[(procs["ace node 0"], 0)] == "channel 0"
    assert threads[(procs["ace node 0"], 1)] == "channel 1"

    # One span per collective on the collectives track, in microseconds at 500 MHz.
    colls = [e for e in events if e["ph"] == "X" and e["pid"] == procs["ace collectives"]]
    assert [(e["name"], e["ts"], e["dur"]) for e in colls] == [
        ("grad0", 10.0, pytest.approx(0.7)), ("grad1", 12.0, pytest.approx(0.7))]

    # Steps of node 0, channel 0 of grad0 (see test_step_spans_from_samples).
    steps = [e for e in events if e["ph"] == "X" and e["pid"] == procs["ace node 0"]
             and e["tid"] == 0 and e["args"]["collective"] == "grad0"]
    assert [e["name"] for e in steps] == [s for s, _ in NODE0_STEPS]
    assert [e["args"]["bytes"] for e in steps] == [b for _, b in NODE0_STEPS]
    assert [(e["ts"], e["dur"]) for e in steps[:4]] == [
        (10.0, pytest.approx(0.2)), (10.2, pytest.approx(0.2)), (10.4, 0.0),
        (10.4, pytest.approx(0.3))]

    # Counters: wire utilization per interval, then 0 when the collective's samples end.
    link = [e for e in events if e["ph"] == "C" and e["pid"] == procs["ace node 1"]
            and e["name"] == "link utilization" and e["ts"] < 11]
    assert [(e["ts"], e["args"]) for e in link] == [
        (10.0, {"l0": 1.0}), (10.2, {"l0": 1.0}), (10.4, {"l0": pytest.approx(0.6)}),
        (10.6, {"l0": 0.0})]
    mem = [e for e in events if e["ph"] == "C" and e["pid"] == procs["staged node 0"]
           and e["name"] == "memory bandwidth B/cycle" and e["ts"] < 11]
    assert [e["args"] for e in mem] == [{"read": 30.0, "write": 0.0}, {"read": 30.0,
                                                                       "write": 0.0},
                                        {"read": 60.0, "write": 60.0},
                                        {"read": 0.0, "write": 0.0}]
    mean = [e for e in events if e["ph"] == "C" and e["pid"] == procs["ace collectives"]]
    assert mean[0]["args"] == {"wire": 0.75}                       # (0.5 + 1.0) / 2
    for e in events:
        if e["ph"] in ("X", "C"):
            assert {"name", "pid", "ts"} <= set(e)


# -- table ----------------------------------------------------------------------------------------

def test_format_table(out):
    path, _ = out
    text = format_table(json.loads((path / "results.json").read_text()))
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["collective", "mode", "cycles"]
    rows = [ln for ln in lines if ln.startswith(("grad", "total"))]
    assert [ln.split()[:2] for ln in rows] == [
        ["grad0", "ace"], ["grad0", "staged"], ["grad0", "p2p"],
        ["grad1", "ace"], ["grad1", "staged"], ["grad1", "p2p"],
        ["total", "(2)"], ["total", "(2)"], ["total", "(2)"]]
    assert len({len(ln) for ln in lines[:-2]}) == 1                # fixed width
    ace0 = rows[0].split()
    # cycles, x bound, util %, mem/node (8 KiB), x 2S, mem per link byte, busbw, ok
    assert ace0[2:] == ["350", "1.32", "73.1%", "8.00", "KiB", "1.00", "2.00", "5.85", "yes"]
    assert rows[1].split()[7] == "3.00"                             # staged: 6S / 2S
    assert rows[2].split()[7] == "2.00"                             # p2p: 4S / 2S
    assert lines[-2:] == [
        f"{base} / ACE: memory traffic {r}x, memory bytes per link byte {r}x; ACE link "
        "utilization gain 1.00x, speedup 1.00x" for base, r in (("staged", "3.00"),
                                                                 ("p2p", "2.00"))]
    assert "/ ACE" not in format_table(build_results(SYSTEM, RUNS[:1]))


def test_link_key():
    assert link_key(3, 1) == "n3.l1"
