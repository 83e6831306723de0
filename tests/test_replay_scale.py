"""Replaying large workload traces scaled down: ``scale_trace`` (``--scale``, ``--max-bytes``,
``--layers``), the one-line errors of collectives too large for the system, and a real replay
of a few layers of each large ASTRA-sim sample on ``ring8``, bit-exact in both modes.

The real replays reuse the ``ring8`` build of ``tests/test_harness.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ace.cli import _layers, main
from sim_harness.preflight import CollectiveTooLarge, preflight
from sim_harness.systems import load_system
from sim_harness.trace import CollectiveSpec, Trace, scale_trace
from sim_harness.traces import load_trace

WORKLOADS = Path(__file__).resolve().parents[2] / "shared" / "data" / "astra-sim" / "workload"
RESNET = WORKLOADS / "Resnet50_DataParallel.txt"
MLP = WORKLOADS / "MLP_ModelParallel.txt"
needs_samples = pytest.mark.skipif(not RESNET.exists(), reason="../shared/data not present")


def _trace(*sizes, dtype="fp32"):
    specs = [CollectiveSpec(name=f"c{i}", collective="allreduce", bytes=n, dtype=dtype,
                            deps=(f"c{i - 1}",) if i else (), source=f"t:{i}")
             for i, n in enumerate(sizes)]
    return Trace(path="t", format="ace", collectives=specs)


def test_scale_rounds_to_whole_elements_at_least_one():
    out = scale_trace(_trace(4000, 4, 1 << 20), scale=0.01)
    assert [c.bytes for c in out.collectives] == [40, 4, 10484]
    assert [c.extra.get("unscaled_bytes") for c in out.collectives] == [4000, None, 1 << 20]
    bf16 = scale_trace(_trace(6, dtype="bf16"), scale=0.5)
    assert bf16.collectives[0].bytes == 4         # 1.5 elements round to 2


def test_max_bytes_caps_in_whole_elements():
    out = scale_trace(_trace(4000, 100, 16), max_bytes=102)
    assert [c.bytes for c in out.collectives] == [100, 100, 16]
    assert scale_trace(_trace(4000), max_bytes=1).collectives[0].bytes == 4
    both = scale_trace(_trace(4000, 400), scale=0.5, max_bytes=1000)
    assert [c.bytes for c in both.collectives] == [1000, 200]


def test_layers_by_position_and_dropped_deps():
    out = scale_trace(_trace(4, 8, 12, 16), layers=(1, 3))
    assert [c.name for c in out.collectives] == ["c1", "c2"]
    assert out.collectives[0].deps == () and out.collectives[1].deps == ("c1",)
    assert [c.name for c in scale_trace(_trace(4, 8, 12), layers=(2, None)).collectives] == \
        ["c2"]
    with pytest.raises(ValueError, match="selects no collective.*0 to 2"):
        scale_trace(_trace(4, 8, 12), layers=(5, 9))


@needs_samples
def test_layers_follow_the_astra_layer_index():
    trace = load_trace(str(RESNET))
    out = scale_trace(trace, layers=(0, 2))      # ResNet lists its layers last to first
    assert [c.name for c in out.collectives] == ["layer_64_1_conv4.wg", "conv1.wg"]
    mlp = scale_trace(load_trace(str(MLP)), layers=(3, 4))
    assert sorted(c.name for c in mlp.collectives) == ["layer_64_1_mlp3.fwd",
                                                       "layer_64_1_mlp3.ig"]


@pytest.mark.parametrize("text, bounds", [("0:4", (0, 4)), ("3:", (3, None)),
                                          (":7", (None, 7)), ("5", (5, 6))])
def test_layers_option_forms(text, bounds):
    assert _layers(text) == bounds


@pytest.mark.parametrize("args, message", [
    (["--scale", "0"], "--scale"), (["--scale", "-1"], "--scale"),
    (["--scale", "nan"], "--scale"), (["--max-bytes", "0"], "--max-bytes"),
    (["--layers", "a:b"], "--layers"), (["--layers", ":"], "--layers"),
    (["--layers=-2:4"], "--layers"), (["--layers", "900:901"], "selects no collective"),
])
def test_bad_options_are_one_line_exit_2(capsys, args, message):
    assert main(["replay", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


@needs_samples
def test_too_large_names_collective_need_limit_and_option(capsys, tmp_path):
    """ResNet-50 at full size on 8 MiB per node: a collective does not fit the system (the
    longest programs run in pieces; the largest buffers do not fit the memory); the error
    names it, the need, the limit and a --scale that fits."""
    assert main(["replay", str(RESNET), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    line = err[0]
    names = {c.name for c in load_trace(str(RESNET)).collectives}
    assert line.split("error: ")[1].split(" (")[0] in names and "--scale 0." in line
    assert re.search(r"needs \d+ (instructions per channel; the engine has program_words = 2048"
                     r"|bytes of memory per node; the system has mem_bytes = 8388608)", line)
    scale = float(line.split("--scale ")[1].split()[0])
    largest = max(load_trace(str(RESNET)).collectives, key=lambda c: c.bytes)
    preflight(scale_trace(_trace(largest.bytes), scale=scale), load_system("ring8"))


def test_too_large_for_memory(capsys, tmp_path):
    system = tmp_path / "small.toml"
    system.write_text("mem_bytes = 65536\n")
    trace = tmp_path / "t.yaml"
    trace.write_text("version: 1\ncollectives:\n"
                     "  - {name: big, collective: allgather, bytes: 65536, dtype: fp32}\n")
    assert main(["replay", str(trace), "--system", str(system)]) == 2
    line = capsys.readouterr().err.strip()
    assert "big" in line and "mem_bytes = 65536" in line and "--scale 0." in line
    with pytest.raises(CollectiveTooLarge, match="needs .* bytes of memory per node"):
        preflight(load_trace(str(trace)), load_system(str(system)))


@needs_samples
@pytest.mark.parametrize("path, args", [
    (RESNET, ["--layers", "0:3", "--scale", "0.02"]),
    (MLP, ["--layers", "0:2", "--scale", "0.05"]),
])
def test_replay_a_few_scaled_layers_bit_exact(tmp_path, path, args):
    out = tmp_path / "out"
    assert main(["replay", str(path), *args, "--out", str(out), "--quiet"]) == 0
    doc = json.loads((out / "results.json").read_text())
    counts = {"Resnet50_DataParallel.txt": 3, "MLP_ModelParallel.txt": 4}[path.name]
    for run in doc["runs"]:
        assert len(run["collectives"]) == counts
        assert all(record["correct"] for record in run["collectives"])


@needs_samples
@pytest.mark.large
def test_full_size_resnet50_on_ring8_with_1gib_per_node(tmp_path):
    """The whole ResNet-50 sample at its true size (54 all-reduces, 102 MB per node), no
    ``--scale``: only node memory grows (sparse pages), and every collective is bit-exact.
    About 9 CPU minutes of simulation after the ``ring8`` engine library is built."""
    system = tmp_path / "ring8_1gib.toml"
    system.write_text('topology = "ring:8"\nmem_bytes = 1073741824\n')
    out = tmp_path / "out"
    assert main(["replay", str(RESNET), "--system", str(system), "--mode", "ace",
                 "--out", str(out), "--quiet"]) == 0
    (run,) = json.loads((out / "results.json").read_text())["runs"]
    trace = load_trace(str(RESNET))
    assert [r["bytes"] for r in run["collectives"]] == [c.bytes for c in trace.collectives]
    assert all(record["correct"] for record in run["collectives"])
