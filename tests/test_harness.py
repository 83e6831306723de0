"""The trace-replay harness on the Verilated 8-engine ring (``ring8``, the default system of
``ace replay``): every collective in the three modes (ACE, staged, p2p), bit-exact against
the golden model, with the engines' memory and link counters equal to the bytes the golden
model moves, the memory model's own byte counters (sampled by the C++ driver) equal to the
engines', and the CLI's files and errors.

One Verilator build (cached in ``build/harness/``) serves every test here; ``ace replay``
reuses it.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest

from ace.sw.program import ProgramError, link_traffic, step_memory_traffic
from sim_harness.replay import ReplayError, compile_spec, replay
from sim_harness.systems import load_system
from testbench.replay_checks import check_replay, collective_spec, trace_of

SYSTEM = load_system("ring8")


def _cases():
    out, k = [], 0
    for collective in ("allreduce", "reduce_scatter", "allgather", "alltoall"):
        for nbytes in (4, 4004):
            dtype = ("fp32", "bf16", "int32")[k % 3]
            size = nbytes if dtype != "bf16" else nbytes // 2 * 2
            op = ("sum", "max")[k % 2] if collective in ("allreduce", "reduce_scatter") \
                else "sum"
            out.append(collective_spec(f"{collective}_{size}_{dtype}", collective, size, dtype, op))
            k += 1
    return out


def test_every_collective_every_mode():
    """Four collectives x {one element, 1001 elements (unaligned)} x the three modes, dtypes
    and ops rotating, back to back on one system."""
    results = replay(trace_of(*_cases()), SYSTEM, progress=False, log=None)
    for run in results["runs"]:
        assert len(run["raws"]) == 8
        for raw in run["raws"]:
            check_replay(raw, SYSTEM)


def test_larger_than_sram_all_reduce_is_2S_in_ace_mode():
    """512 KiB fp32 all-reduce per node (2x the 256 KiB input SRAM): bit-exact in the three
    modes; ACE mode moves exactly 2S per node on the memory port; the p2p baseline moves more
    and the staged one more still, and the same payload crosses every link in every mode."""
    S = 512 << 10
    assert S > SYSTEM.config.input_buffer_bytes
    results = replay(trace_of(collective_spec("ar512k", "allreduce", S)), SYSTEM, progress=False,
                     log=None)
    ace, staged, p2p = (run["raws"][0] for run in results["runs"])
    beat = SYSTEM.config.mem_bytes
    for raw, run in zip((ace, staged, p2p), results["runs"]):
        check_replay(raw, SYSTEM)
        # The memory model counts whole port beats, the engine payload bytes: the model sees
        # at most the partial first and last beat of each of a step's (up to 3) read streams.
        program = compile_spec(collective_spec("ar512k", "allreduce", S), SYSTEM, run["mode"])
        for k, node in enumerate(program.nodes):
            reading = sum(1 for ch in node.channels for st in ch.steps
                          if step_memory_traffic(st, node.placement)[0])
            extra = raw["samples"]["mem_read_bytes"][-1][k] - raw["mem_read_bytes"][k]
            assert 0 <= extra <= 3 * 2 * beat * reading, (run["mode"], k, extra, reading)
    for k in range(8):
        node = [raw["mem_read_bytes"][k] + raw["mem_write_bytes"][k] for raw in (ace, staged, p2p)]
        assert node[0] == 2 * S and node[1] > 2.5 * S * 2 and node[0] < node[2] < node[1]
    assert ace["link_tx_payload_bytes"] == staged["link_tx_payload_bytes"] \
        == p2p["link_tx_payload_bytes"]
    program = compile_spec(collective_spec("ar512k", "allreduce", S), SYSTEM, "ace")
    assert ace["chunks"] == program.chunks > 8
    # Every chunk piece crosses 2 x 7 links (node shares differ by a word where chunks do
    # not divide by 8 words).
    traffic = link_traffic(program)
    assert sum(traffic[(n, "tx", 0)] for n in range(8)) == 2 * 7 * S


def test_background_traffic_slows_the_baseline_not_the_result():
    """Half the memory bandwidth taken by background traffic: results still bit-exact, and
    the memory-bound baseline takes longer than without it."""
    spec = collective_spec("ar64k", "allreduce", 64 << 10, "bf16")
    quiet = replay(trace_of(spec), SYSTEM, modes=("baseline",), progress=False, log=None)
    busy = replay(trace_of(spec), SYSTEM, modes=("baseline",), background_share=0.5,
                  progress=False, log=None)
    check_replay(quiet["runs"][0]["raws"][0], SYSTEM)
    check_replay(busy["runs"][0]["raws"][0], SYSTEM)
    assert busy["runs"][0]["raws"][0]["cycles"] > 1.2 * quiet["runs"][0]["raws"][0]["cycles"]


def test_a_collective_the_system_cannot_hold_is_refused_before_running():
    """Too many steps for the instruction memory even in pieces, or buffers past the memory
    model's end: a clear error before any simulation."""
    few_words = dataclasses.replace(SYSTEM, config=SYSTEM.config.replace(program_words=16))
    with pytest.raises(ProgramError, match="program_words"):
        replay(trace_of(collective_spec("huge", "allreduce", 1 << 20)), few_words, modes=("ace",),
               progress=False, log=None)
    small = dataclasses.replace(SYSTEM, mem_bytes=1 << 16)
    with pytest.raises(ReplayError, match="mem_bytes = 65536"):
        replay(trace_of(collective_spec("big", "allgather", 64 << 10)), small, progress=False,
               log=None)


def _ace(*args, cwd):
    return subprocess.run([sys.executable, "-m", "ace.cli", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=1800)


def test_cli_replay_writes_results(tmp_path):
    """``ace replay`` on our own trace format: exit 0, the table, results.json with the
    documented records, the CSV, the plots and the Perfetto timeline."""
    trace = tmp_path / "t.yaml"
    trace.write_text("version: 1\ncollectives:\n"
                     "  - {name: ar, collective: allreduce, bytes: 65536, dtype: fp32}\n"
                     "  - {name: ag, collective: allgather, bytes: 32768, dtype: int32}\n")
    out = tmp_path / "out"
    result = _ace("replay", str(trace), "--out", str(out), "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stderr + result.stdout
    assert "ar" in result.stdout and "staged" in result.stdout and "p2p" in result.stdout
    doc = json.loads((out / "results.json").read_text())
    assert [run["mode"] for run in doc["runs"]] == ["ace", "staged", "p2p"]
    for run in doc["runs"]:
        names = [r["name"] for r in run["collectives"]]
        assert names == ["ar", "ag"]
        for record in run["collectives"]:
            for key in ("name", "op", "algorithm", "nodes", "bytes", "dtype", "cycles",
                        "bound_cycles", "link_utilization", "mem_read_bytes",
                        "mem_write_bytes", "mem_bytes_per_link_byte", "algbw_gbps",
                        "busbw_gbps", "correct"):
                assert key in record, key
            assert record["correct"] is True
            assert record["nodes"] == 8 and 0 < record["link_utilization"] <= 1
    ace_ar = doc["runs"][0]["collectives"][0]
    assert ace_ar["mem_read_bytes"] + ace_ar["mem_write_bytes"] == 8 * 2 * 65536
    for name in ("summary.csv", "link_utilization.png", "memory_bandwidth.png",
                 "ace_vs_baseline.png", "timeline.json"):
        assert (out / name).stat().st_size > 0, name
    events = json.loads((out / "timeline.json").read_text())["traceEvents"]
    assert any(e.get("ph") == "X" for e in events)


@pytest.mark.parametrize("args, message", [
    (["replay", "missing.yaml"], "missing.yaml"),
    (["replay", "--system", "nosuch"], "nosuch"),
    (["replay", "--background", "1.5"], "--background"),
    (["replay", "--waves", "--pgo"], "--pgo"),
])
def test_cli_user_errors_are_one_line_exit_2(tmp_path, args, message):
    result = _ace(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in result.stderr


def test_cli_bad_trace_names_file_line_field(tmp_path):
    trace = tmp_path / "bad.yaml"
    trace.write_text("version: 1\ncollectives:\n  - {name: a, collective: allreduce, "
                     "bytes: 6, dtype: fp32}\n")
    result = _ace("replay", str(trace), cwd=tmp_path)
    assert result.returncode == 2
    assert "bad.yaml:3" in result.stderr and "bytes" in result.stderr


def test_a_bad_csr_batch_is_refused_whole_and_the_driver_reads_on():
    """A CSR batch with a bad line in the middle: one error naming the line, and the batch's
    remaining lines are consumed with it (not read as commands), so the next command works."""
    from sim_harness.simulator import SimulatorError, SystemSimulator

    with SystemSimulator(SYSTEM) as sim:
        sim.reset()
        before = sim.cycle
        sim._send("csr 3\n0 r 0\n3 x 12\n1 r 4")
        with pytest.raises(SimulatorError, match="bad csr line 2: 3 x 12"):
            sim._reply()
        assert sim.cycle == before      # nothing of the batch ran
        assert len(sim.csr([(0, "r", 0), (1, "r", 0)])) == 2


def test_node_memory_is_sparse():
    """A 1 GiB memory per node costs only the pages written: data loaded near the top of
    node 3's memory reads back, untouched memory reads zeros, and the driver stays small.
    (A 4-node ring: its fabric is a small build, and it links the ring8 engine library.)"""
    from ace.sw.program import Topology
    from sim_harness.simulator import SystemSimulator

    big = dataclasses.replace(SYSTEM, topology=Topology.parse("ring:4"), mem_bytes=1 << 30)
    data = np.random.default_rng(3).integers(0, 256, 1 << 16, dtype=np.uint8).tobytes()
    top = (1 << 30) - len(data) - 4096
    with SystemSimulator(big) as sim:
        for k in range(4):
            sim.load(k, 0, bytes(4096))
        sim.load(3, top, data)
        assert sim.dump(3, top, len(data)) == data
        assert sim.dump(3, top - 4096, 4096) == bytes(4096)
        assert sim.dump(1, 1 << 29, 8192) == bytes(8192)
        with open(f"/proc/{sim.proc.pid}/status") as f:
            rss_kib = next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))
        assert rss_kib < 256 << 10, f"driver RSS {rss_kib} KiB for 4 x 1 GiB of memory"
        with pytest.raises(Exception, match="past the memory end"):
            sim.load(0, (1 << 30) - 4, bytes(8))


def test_make_inputs_are_reproducible():
    from ace.layouts import Dtype
    from sim_harness.replay import make_inputs
    a = make_inputs(np.random.default_rng(5), Dtype.BF16, 100)
    b = make_inputs(np.random.default_rng(5), Dtype.BF16, 100)
    assert a.dtype == np.uint16 and np.array_equal(a, b)


@pytest.mark.large
def test_torus_4x2_collectives_both_modes():
    """The 4x2 2D torus (``torus4x2``, 4 links per engine): hierarchical all-reduce (ring
    reduce-scatter on the 4-ring, all-reduce on the 2-ring, all-gather back), reduce-scatter
    and all-gather, one unaligned size and one larger than the SRAM, both modes, bit-exact with
    exact counters. A second Verilator build, so outside the default suite."""
    system = load_system("torus4x2")
    specs = []
    for k, (collective, nbytes) in enumerate([("allreduce", 4004), ("allreduce", 256 << 10),
                                              ("reduce_scatter", 4004),
                                              ("reduce_scatter", 128 << 10),
                                              ("allgather", 4004), ("allgather", 128 << 10)]):
        dtype = ("fp32", "bf16", "int32")[k % 3]
        op = ("sum", "max")[k % 2] if collective != "allgather" else "sum"
        specs.append(collective_spec(f"{collective}_{nbytes}", collective, nbytes, dtype, op))
    results = replay(trace_of(*specs), system, progress=False, log=None)
    for run in results["runs"]:
        for raw in run["raws"]:
            check_replay(raw, system)
            if raw["mode"] == "ace" and raw["collective"] == "allreduce":
                for k in range(8):
                    assert raw["mem_read_bytes"][k] + raw["mem_write_bytes"][k] == \
                        2 * raw["bytes"]
