"""ASTRA-sim 1.0 inputs as its own reader takes them: every header option of the workload
(model_parallel_NPU_group: and the AICB/SimAI keys, checkpoints, pp_comm), the collectives'
spans (which nodes each one covers: model- and data-parallel groups), every system-file key,
and a double binary tree on every dimension (an all-reduce dimension by dimension). Group
collectives are checked against numpy sums over the groups the header sets."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sim_harness.groups import span_groups
from sim_harness.preflight import compile_spec
from sim_harness.systems import load_system
from sim_harness.trace import TraceError
from sim_harness.traces import load_astra_system, load_trace
from ace.sw import golden
from ace.sw.program import Topology

TRANSFORMER = ("HYBRID_TRANSFORMER model_parallel_NPU_group: 4\n2\n"
               "attn -1 1000 ALLREDUCE 4096 1000 ALLREDUCE 4096 1000 ALLREDUCE 8192 10\n"
               "mlp -1 1000 ALLGATHER 4096 1000 REDUCESCATTER 4096 1000 ALLREDUCE 8192 10\n")
AICB = ("HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: 1 pp: 1 vpp: 8 ga: 1 "
        "all_gpus: 8 checkpoints: 0 checkpoint_initiates: 0 pp_comm 0\n1\n"
        "mlp_norm\t-1\t1055\tALLGATHER\t8192\t1055\tNONE\t0\t1055\tALLREDUCE\t4096\t100\n")


def _trace(tmp_path, text, name="w.txt"):
    path = tmp_path / name
    path.write_text(text)
    return load_trace(path)


def test_transformer_header_sets_the_groups(tmp_path):
    trace = _trace(tmp_path, TRANSFORMER)
    assert trace.meta["model_parallel_npu_group"] == 4
    spans = {s.name: s.extra["span"] for s in trace.collectives}
    assert spans == {"attn.fwd": ["lead", 4], "mlp.fwd": ["lead", 4], "mlp.wg": ["trail", 4],
                     "mlp.ig": ["lead", 4], "attn.wg": ["trail", 4], "attn.ig": ["lead", 4]}


def test_aicb_header_every_key(tmp_path):
    trace = _trace(tmp_path, AICB)
    assert trace.nodes == 8
    assert {k: trace.meta[k] for k in ("model_parallel_npu_group", "ep", "pp", "vpp", "ga",
                                       "all_gpus", "checkpoints", "checkpoint_initiates",
                                       "pp_comm")} == {
        "model_parallel_npu_group": 2, "ep": 1, "pp": 1, "vpp": 8, "ga": 1, "all_gpus": 8,
        "checkpoints": [], "checkpoint_initiates": [], "pp_comm": 0}
    assert [(s.name, s.extra["span"]) for s in trace.collectives] == [
        ("mlp_norm.fwd", ["lead", 2]), ("mlp_norm.wg", ["trail", 2])]


@pytest.mark.parametrize("header, field, problem", [
    ("HYBRID_TRANSFORMER model_parallel_NPU_group: 0", "model_parallel_npu_group",
     "'0' is not allowed; allowed: an integer >= 1"),
    ("HYBRID_TRANSFORMER model_parallel_NPU_group: 3 all_gpus: 8", "model_parallel_npu_group",
     "3 is not allowed; allowed: a divisor of all_gpus = 8"),
    ("HYBRID_TRANSFORMER model_parallel_NPU_group:", "model_parallel_npu_group",
     "the value is missing"),
    ("HYBRID_TRANSFORMER ep: 1 ep: 2", "ep", "given twice"),
    ("HYBRID_TRANSFORMER tp: 2", "parallelism", "'tp:' after HYBRID_TRANSFORMER is not allowed"),
    ("DATA model_parallel_NPU_group: 2", "parallelism",
     "'model_parallel_NPU_group:' after DATA is not allowed; allowed: nothing after DATA but "
     "'pp_comm BYTES'"),
    ("HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2", "checkpoints", "missing"),
])
def test_header_errors_name_file_line_field(tmp_path, header, field, problem):
    path = tmp_path / "bad.txt"
    path.write_text(header + "\n1\nl -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 1024 5\n")
    with pytest.raises(TraceError) as info:
        load_trace(path)
    assert str(info.value).startswith(f"{path}:1: {field}: ") and problem in str(info.value)


@pytest.mark.parametrize("header, fwd, wg", [
    ("DATA", None, "all"), ("MICRO", None, "all"), ("MODEL", "all", None),
    ("DISTRIBUTED_INFERENCE", "all", None), ("HYBRID_DATA_MODEL", ["lead", None],
                                             ["trail", None]),
    ("HYBRID_MODEL_DATA", ["trail", None], ["lead", None]),
    ("HYBRID_TRANSFORMER model_parallel_NPU_group: 1", None, "all"),
    ("HYBRID_DLRM 0", "all", "all"),          # the first layer of a DLRM spans every node
])
def test_every_parallelism_spans_what_astra_sim_involves(tmp_path, header, fwd, wg):
    """ASTRA-sim 1.0's decode_involved_dimensions: a pass that involves no dimension moves
    nothing (no collective here, listed in meta['not_communicated'])."""
    trace = _trace(tmp_path, header + "\n1\nl -1 5 ALLGATHER 1024 5 NONE 0 5 ALLREDUCE 1024 5\n")
    spans = {s.extra["pass"]: s.extra.get("span", "all") for s in trace.collectives}
    assert spans.get("fwd") == fwd and spans.get("wg") == wg
    silent = [f"l.{p}" for p, span in (("fwd", fwd), ("wg", wg)) if span is None]
    assert trace.meta.get("not_communicated", []) == silent


@pytest.mark.parametrize("topology, span, groups, sub", [
    ("fully_connected:8", ["lead", 4], [[0, 1, 2, 3], [4, 5, 6, 7]], "fully_connected:4"),
    ("fully_connected:8", ["trail", 4], [[0, 4], [1, 5], [2, 6], [3, 7]], "fully_connected:2"),
    ("torus:4x2", ["lead", 4], [[0, 1, 2, 3], [4, 5, 6, 7]], "torus:4"),
    ("torus:4x2", ["trail", 4], [[0, 4], [1, 5], [2, 6], [3, 7]], "torus:2"),
    ("torus:4x2", ["dims", [1]], [[0, 4], [1, 5], [2, 6], [3, 7]], "torus:2"),
    ("torus:2x2x2", ["dims", [0, 2]], [[0, 1, 4, 5], [2, 3, 6, 7]], "torus:2x2"),
    ("switch:8", ["flat"], [list(range(8))], "switch:8"),
])
def test_span_groups(topology, span, groups, sub):
    got, sub_topology = span_groups(span, Topology.parse(topology))
    assert got == groups and str(sub_topology) == str(Topology.parse(sub))


def test_a_group_that_cuts_a_ring_is_refused():
    with pytest.raises(TraceError, match=r"cuts a dimension of torus:8; on a torus a group "
                                         r"must be whole dimensions \(sizes 8\)"):
        span_groups(["lead", 4], Topology.parse("ring:8"))


def _group_sums(program, inputs, groups, collective):
    out = golden.run(program, [x.view(np.uint32) for x in inputs]).outputs
    for members in groups:
        total = np.stack([inputs[m] for m in members]).astype(np.int64).sum(0).astype(np.int32)
        for k, m in enumerate(members):
            got = out[m].view(np.int32)
            if collective == "allreduce":
                np.testing.assert_array_equal(got, total, err_msg=f"node {m}")
            elif collective == "allgather":
                np.testing.assert_array_equal(
                    got, np.concatenate([inputs[x] for x in members]), err_msg=f"node {m}")
            else:                                   # reduce_scatter: member k's block
                start, length = program.blocks[m]
                np.testing.assert_array_equal(got, total[start:start + length])


@pytest.mark.parametrize("system", ["full8", "torus4x2", "switch8"])
@pytest.mark.parametrize("mode", ["ace", "baseline"])
def test_group_collectives_reduce_over_their_groups(tmp_path, system, mode):
    """Every collective of the transformer workload, each group against numpy."""
    trace = _trace(tmp_path, TRANSFORMER)
    spec_system = load_system(system)
    rng = np.random.default_rng(7)
    for spec in trace.collectives:
        spec = dataclasses.replace(spec, dtype="int32")
        program = compile_spec(spec, spec_system, mode)
        groups, _ = span_groups(spec.extra["span"], spec_system.topology)
        inputs = [rng.integers(-1000, 1000, n.in_elems).astype(np.int32) for n in program.nodes]
        _group_sums(program, inputs, groups, spec.collective)


SYSTEM_DBT = ("scheduling-policy: LIFO\nendpoint-delay: 10\nactive-chunks-per-dimension: 1\n"
              "preferred-dataset-splits: 4\nboost-mode: 0\n"
              "all-reduce-implementation: doubleBinaryTree_doubleBinaryTree_doubleBinaryTree\n"
              "all-gather-implementation: ring_ring_ring\n"
              "reduce-scatter-implementation: ring_ring_ring\n"
              "all-to-all-implementation: direct_direct_direct\n"
              "collective-optimization: localBWAware\nintra-dimension-scheduling: FIFO\n"
              "inter-dimension-scheduling: ascending\nmodel-shared-bus: 0\nL: 0\no: 0\n"
              "g: 0\nG: 0\nlocal-reduction-delay: 1\nseprate-log: 1\n")
WORKLOAD = "DATA\n1\nconv1 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE 4096 5\n"
NETWORK_4X2 = ('{"topology-name": "Torus2D", "dimensions-count": 2, "units-count": [4, 2], '
               '"link-latency": [500, 500], "link-bandwidth": [50, 50]}')


def test_double_binary_tree_on_every_dimension(tmp_path):
    """All-reduce on dimension 0, then on dimension 1: the sum over all nodes."""
    (tmp_path / "sys.txt").write_text(SYSTEM_DBT)
    (tmp_path / "net.json").write_text(NETWORK_4X2)
    (tmp_path / "w.txt").write_text(WORKLOAD.replace("4096", "8192"))
    trace = load_trace(tmp_path / "w.txt", system_file=tmp_path / "sys.txt",
                       network_file=tmp_path / "net.json")
    assert [(s.name, s.algorithm, s.extra["span"], s.deps) for s in trace.collectives] == [
        ("conv1.wg@dim0", "double_binary_tree", ["dims", [0]], ()),
        ("conv1.wg@dim1", "double_binary_tree", ["dims", [1]], ("conv1.wg@dim0",))]
    system = load_system("torus4x2")
    rng = np.random.default_rng(3)
    values = None
    for spec in trace.collectives:
        program = compile_spec(dataclasses.replace(spec, dtype="int32"), system, "ace")
        if values is None:
            values = [rng.integers(-99, 99, n.in_elems).astype(np.int32) for n in program.nodes]
            first = [v.copy() for v in values]
        out = golden.run(program, [v.view(np.uint32) for v in values]).outputs
        values = [o.view(np.int32).copy() for o in out]
    for v in values:
        np.testing.assert_array_equal(v, np.stack(first).sum(0))


def test_baseline_optimization_and_one_ring(tmp_path):
    (tmp_path / "w.txt").write_text(WORKLOAD)
    (tmp_path / "s1.txt").write_text("all-reduce-implementation: ring_direct\n"
                                     "collective-optimization: baseline\n")
    trace = load_trace(tmp_path / "w.txt", system_file=tmp_path / "s1.txt")
    assert [(s.algorithm, s.extra["span"]) for s in trace.collectives] == [
        ("ring", ["dims", [0]]), ("direct", ["dims", [1]])]
    (tmp_path / "s2.txt").write_text("all-reduce-implementation: oneRing\n")
    trace = load_trace(tmp_path / "w.txt", system_file=tmp_path / "s2.txt")
    assert [(s.algorithm, s.extra["span"]) for s in trace.collectives] == [("ring", ["flat"])]
    (tmp_path / "s3.txt").write_text("all-reduce-implementation: direct8_oneDirect4\n")
    assert load_trace(tmp_path / "w.txt", system_file=tmp_path / "s3.txt").collectives[
        0].extra["span"] == ["flat"]


@pytest.mark.parametrize("line, field, problem", [
    ("scheduling-policy: RANDOM", "scheduling-policy", "'RANDOM' is not allowed; allowed: "
                                                       "LIFO, FIFO"),
    ("intra-dimension-scheduling: best", "intra-dimension-scheduling", "allowed: FIFO, RG"),
    ("inter-dimension-scheduling: x", "inter-dimension-scheduling", "offlineGreedyFlex"),
    ("boost-mode: 2", "boost-mode", "allowed: 0, 1"),
    ("endpoint-delay: -1", "endpoint-delay", "allowed: an integer >= 0"),
    ("L: fast", "L", "allowed: a number >= 0"),
    ("reduce-scatter-implementation: doubleBinaryTree_ring", "reduce-scatter-implementation",
     "double_binary_tree is only for an all-reduce"),
    ("warp-speed: 9", "warp-speed", "unknown key; allowed: all-reduce-implementation"),
])
def test_system_file_errors(tmp_path, line, field, problem):
    path = tmp_path / "sys.txt"
    path.write_text("preferred-dataset-splits: 2\n" + line + "\n")
    with pytest.raises(TraceError) as info:
        load_astra_system(path)
    assert str(info.value).startswith(f"{path}:2: {field}: ") and problem in str(info.value)
