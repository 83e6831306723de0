"""Trace importers: every sample in ../shared/data, checked against values read independently
from the file text; round trips of the ACE format; format detection; malformed inputs whose
messages must name file, line (or node) and field."""

import json
import math
import re
import shutil
import struct
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from ace.sw.msccl import load_msccl
from sim_harness.trace import TraceError
from sim_harness.traces import (FORMATS, detect_format, dump_ace_trace, load_astra_network,
                                load_astra_system, load_trace, write_ace_trace)
from sim_harness.traces.ace_format import (COLLECTIVE_KEYS, DEFAULT_KEYS, SCHEMA_PATH,
                                           SYSTEM_KEYS, TOP_KEYS)
from sim_harness.traces.chakra import decode_et

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
WORKLOADS = DATA / "astra-sim" / "workload"
SYSTEM = DATA / "astra-sim" / "system" / "sample_torus_sys.txt"
TORUS = DATA / "astra-sim" / "network" / "sample_Torus2D.json"
RING = DATA / "astra-sim" / "network" / "Ring_8npus.yml"
CHAKRA = DATA / "chakra" / "all_reduce_8npus_1MB"
MSCCL = DATA / "msccl" / "ring_allreduce_8npus.xml"

needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="../shared/data is not present")


def _raises(fn, *parts, where=None):
    """Call ``fn``, expect a one-line TraceError starting with ``where`` (``file:line:``) and
    containing every one of ``parts``."""
    with pytest.raises(TraceError) as info:
        fn()
    msg = str(info.value)
    assert "\n" not in msg, msg
    if where is not None:
        assert msg.startswith(where), (where, msg)
    for part in parts:
        assert part in msg, (part, msg)
    return msg


def _line_of(text: str, needle: str, nth: int = 1) -> int:
    """1-based line of the nth line containing ``needle``."""
    hits = [n for n, line in enumerate(text.splitlines(), 1) if needle in line]
    return hits[nth - 1]


# -- ASTRA-sim workloads ----------------------------------------------------------------------

COMM = {"ALLREDUCE": "allreduce", "ALLGATHER": "allgather", "ALLTOALL": "alltoall",
        "REDUCESCATTER": "reduce_scatter"}


def _expected_astra(text: str):
    """(collectives in issue order as (name, collective, bytes), total compute) from the text:
    forward 0..L-1, then backward L-1..0 with the weight gradient before the input gradient."""
    rows = [line.split() for line in text.splitlines() if line.strip()]
    count = int(rows[1][0])
    layers = rows[2:]
    assert len(layers) == count
    cols = {"fwd": (3, 4), "ig": (6, 7), "wg": (9, 10)}
    order = [(row, "fwd") for row in layers]
    order += [(row, p) for row in reversed(layers) for p in ("wg", "ig")]
    out = [(f"{row[0]}.{p}", COMM[row[cols[p][0]]], int(row[cols[p][1]])) for row, p in order
           if row[cols[p][0]] != "NONE" and int(row[cols[p][1]]) > 0]
    total = sum(int(row[c]) for row in layers for c in (2, 5, 8))
    return rows[0][0], count, out, total


@needs_data
@pytest.mark.parametrize("name", ["Resnet50_DataParallel.txt", "MLP_ModelParallel.txt",
                                  "microAllReduce.txt", "microAllToAll.txt"])
def test_astra_samples(name):
    path = WORKLOADS / name
    text = path.read_text()
    ptype, count, expected, total = _expected_astra(text)
    trace = load_trace(path)
    assert trace.format == "astra-sim" and trace.nodes is None
    assert trace.meta["parallelism"] == ptype and trace.meta["layers"] == count
    assert [(s.name, s.collective, s.bytes) for s in trace.collectives] == expected
    assert all(s.dtype == "fp32" and s.algorithm == "ring" and s.deps == ()
               for s in trace.collectives)
    # Every pass's compute is counted exactly once: before a collective, or after the last.
    assert sum(s.compute_cycles for s in trace.collectives) \
        + trace.meta.get("trailing_compute_cycles", 0) == total
    # Per-layer details are kept, and the update delay is the last number on the line.
    rows = {row[0]: row for row in (line.split() for line in text.splitlines()[2:])
            if row}
    for spec in trace.collectives:
        row = rows[spec.extra["layer"]]
        assert spec.extra["update_delay"] == int(row[11])
        assert spec.extra["reserved"] == int(row[1])
        column = {"fwd": 2, "ig": 5, "wg": 8}[spec.extra["pass"]]
        assert spec.extra["pass_compute_cycles"] == int(row[column])
        line = next(n for n, words in enumerate((t.split() for t in text.splitlines()), 1)
                    if words[:1] == [row[0]])
        assert spec.source == f"{path}:{line}"


@needs_data
def test_resnet50_is_the_ace_paper_workload():
    text = (WORKLOADS / "Resnet50_DataParallel.txt").read_text()
    rows = [line.split() for line in text.splitlines()[2:] if line.strip()]
    trace = load_trace(WORKLOADS / "Resnet50_DataParallel.txt")
    # One weight-gradient all-reduce per layer, issued from the last layer to the first.
    assert len(trace.collectives) == len(rows) == int(text.splitlines()[1])
    assert [s.name for s in trace.collectives] == [f"{r[0]}.wg" for r in reversed(rows)]
    # The first one waits for the whole forward pass and the last layer's weight gradient.
    first = trace.collectives[0]
    assert first.compute_cycles == sum(int(r[2]) for r in rows) + int(rows[-1][8])
    # Then each waits for the previous layer's input gradient and its own weight gradient.
    for k, spec in enumerate(trace.collectives[1:], 1):
        later, this = rows[-k], rows[-k - 1]
        assert spec.compute_cycles == int(later[5]) + int(this[8])
    assert trace.meta["trailing_compute_cycles"] == int(rows[0][5])


HYBRID_SAMPLES = {
    "dlrm.txt": "HYBRID_DLRM\t2\n3\n"
                "emb\t-1\t300\tALLTOALL\t98304\t300\tALLTOALL\t98304\t300\tNONE\t0\t98\n"
                "bot\t-1\t1280\tNONE\t0\t794\tNONE\t0\t896\tALLREDUCE\t13312\t13\n"
                "top\t-1\t6400\tNONE\t0\t6400\tNONE\t0\t4480\tALLREDUCE\t1064960\n",
    "custom.txt": "HYBRID_CUSTOMIZED\n2\n"
                  "a\t-1\t32291\tALLGATHER\t37632\t32291\tREDUCESCATTER\t37632\t32291\tALLREDUCE"
                  "\t37632\t3229 HYBRID_DATA_MODEL\n"
                  "b\t-1\t7488\tNONE\t0\t7488\tNONE\t0\t7488\tALLREDUCE\t65536\tDATA\n",
    "fib.txt": "HYBRID_TRANSFORMER_FWD_IN_BCKWD\tcheckpoints: 1 0 checkpoint_initiates: 1 2\n3\n"
               "emb\t-1\t1000\tALLREDUCE\t32768\t1000\tNONE\t0\t1000\tALLREDUCE\t32768\t10\n"
               "q\t-1\t1000\tNONE\t0\t1000\tALLREDUCE\t32768\t1000\tALLREDUCE\t32768\t10\n"
               "q\t-1\t1000\tNONE\t0\t1000\tNONE\t0\t1000\tALLREDUCE\t6\t10\n",
}


def test_astra_parallelism_options(tmp_path):
    for name, text in HYBRID_SAMPLES.items():
        (tmp_path / name).write_text(text)
    dlrm = load_trace(tmp_path / "dlrm.txt")
    assert dlrm.meta["dlrm_last_bottom_layer"] == 2
    assert [(s.name, s.collective) for s in dlrm.collectives] == [
        ("emb.fwd", "alltoall"), ("top.wg", "allreduce"), ("bot.wg", "allreduce"),
        ("emb.ig", "alltoall")]
    assert "update_delay" not in dlrm.collectives[1].extra      # the optional field left out
    custom = load_trace(tmp_path / "custom.txt")
    assert [s.collective for s in custom.collectives] == [
        "allgather", "allreduce", "allreduce", "reduce_scatter"]
    assert [s.extra["parallelism"] for s in custom.collectives] == [
        "HYBRID_DATA_MODEL", "DATA", "HYBRID_DATA_MODEL", "HYBRID_DATA_MODEL"]
    fib = load_trace(tmp_path / "fib.txt")
    assert fib.meta["checkpoints"] == [0] and fib.meta["checkpoint_initiates"] == [2]
    names = [s.name for s in fib.collectives]
    assert names == ["emb.fwd", "q#2.wg", "q.wg", "q.ig", "emb.wg"]
    assert fib.collectives[1].dtype == "bf16" and fib.collectives[1].bytes == 6
    assert fib.collectives[0].extra["checkpoint"] is True
    assert fib.collectives[1].extra["initiates_fwd_in_bckwd"] is True


GOOD_LAYER = "conv1\t-1\t5\tNONE\t0\t5\tNONE\t0\t5\tALLREDUCE\t1024\t5"


@pytest.mark.parametrize("text, line, field, problem", [
    ("DATAX\n1\n" + GOOD_LAYER, 1, "parallelism", "'DATAX' is not allowed; allowed: DATA,"),
    ("DATA 3\n1\n" + GOOD_LAYER, 1, "parallelism", "nothing after DATA"),
    ("HYBRID_DLRM\n1\n" + GOOD_LAYER, 1, "dlrm_last_bottom_layer", "missing"),
    ("HYBRID_DLRM 5\n1\n" + GOOD_LAYER, 1, "dlrm_last_bottom_layer", "layer index 0..0"),
    ("HYBRID_TRANSFORMER_FWD_IN_BCKWD checkpoints: 2 0\n1\n" + GOOD_LAYER, 1, "checkpoints",
     "2 layers announced, 1 given"),
    ("DATA\nmany\n" + GOOD_LAYER, 2, "layers", "'many' is not allowed"),
    ("DATA\n2\n" + GOOD_LAYER, 3, "layers", "2 layers declared on line 2, 1 found"),
    ("DATA\n1\n" + GOOD_LAYER + "\n" + GOOD_LAYER, 4, "layers", "more layer lines"),
    ("DATA\n1\n" + GOOD_LAYER.replace("ALLREDUCE", "ALLREDUCEX"), 3, "conv1.wg_comm_type",
     "'ALLREDUCEX' is not allowed; allowed: NONE, ALLREDUCE, ALLGATHER, ALLTOALL, REDUCESCATTER"),
    ("DATA\n1\n" + GOOD_LAYER.replace("ALLREDUCE", "ALLREDUCEALLTOALL"), 3,
     "conv1.wg_comm_type", "no ACE equivalent"),
    ("DATA\n1\n" + GOOD_LAYER.replace("-1\t5", "-1\t5x", 1), 3, "conv1.fwd_compute",
     "'5x' is not allowed; allowed: an integer >= 0"),
    ("DATA\n1\n" + GOOD_LAYER.replace("1024", "-1024"), 3, "conv1.wg_comm_size",
     "'-1024' is not allowed"),
    ("DATA\n1\n" + GOOD_LAYER.replace("1024", "1001"), 3, "conv1.wg_comm_size",
     "1001 is not allowed; allowed: a whole number of elements"),
    ("DATA\n1\nconv1 -1 5 NONE 0 5 NONE 0 5 ALLREDUCE", 3, "conv1.wg_comm_size", "missing"),
    ("DATA\n1\n" + GOOD_LAYER + "\t7", 3, "conv1", "'7' after the update delay"),
    ("DATA\n1\n" + GOOD_LAYER[:-1] + "-5", 3, "conv1.update_delay", "'-5' is not allowed"),
    ("HYBRID_CUSTOMIZED\n1\n" + GOOD_LAYER, 3, "conv1.parallelism",
     "last on a HYBRID_CUSTOMIZED layer line"),
])
def test_astra_errors(tmp_path, text, line, field, problem):
    path = tmp_path / "bad.txt"
    path.write_text(text)
    _raises(lambda: load_trace(path), f"{field}", problem, where=f"{path}:{line}: ")


# -- ASTRA-sim system and network files -------------------------------------------------------

@needs_data
def test_astra_system_sample():
    entries = {}
    for line in SYSTEM.read_text().splitlines():
        if line.strip():
            key, value = line.split(":", 1)
            entries[key.strip()] = value.strip()
    hints = load_astra_system(SYSTEM)
    assert hints.chunks == int(entries["preferred-dataset-splits"])
    impls = {k: v for k, v in entries.items() if k.endswith("-implementation")}
    assert len(impls) == 4 and all(set(v.split("_")) == {"ring"} for v in impls.values())
    assert hints.algorithms == {"allreduce": "ring", "allgather": "ring",
                                "reduce_scatter": "ring", "alltoall": "ring"}
    rest = {k: v for k, v in entries.items()
            if k not in impls and k != "preferred-dataset-splits"}
    assert {k: str(v) for k, v in hints.extra.items()} == rest
    assert hints.topology is None and hints.link_gbps is None


@needs_data
def test_astra_network_samples():
    torus = json.loads(TORUS.read_text())
    hints, dims = load_astra_network(TORUS)
    assert dims == tuple(torus["units-count"])
    assert set(torus["topologies-per-dim"]) == {"Ring"}
    assert hints.topology == "torus:" + "x".join(str(u) for u in torus["units-count"])
    assert hints.link_gbps == tuple(float(b) for b in torus["link-bandwidth"])
    assert hints.link_latency_ns == torus["link-latency"][0]
    assert hints.mem_gbps == torus["hbm-bandwidth"][0]
    assert hints.extra["topology-name"] == torus["topology-name"]
    assert hints.extra["links-count"] == torus["links-count"]
    ring = yaml.safe_load(RING.read_text())
    hints, dims = load_astra_network(RING)
    assert dims == tuple(ring["npus_count"]) and hints.topology == f"ring:{ring['npus_count'][0]}"
    assert hints.link_gbps == tuple(ring["bandwidth"])
    assert hints.link_latency_ns == ring["latency"][0]


@needs_data
def test_workload_with_system_and_network():
    trace = load_trace(WORKLOADS / "MLP_ModelParallel.txt", system_file=SYSTEM,
                       network_file=TORUS)
    units = json.loads(TORUS.read_text())["units-count"]
    assert trace.nodes == math.prod(units)
    assert trace.system.topology == "torus:4x4" and trace.system.chunks == 4
    assert trace.system.mem_gbps == 370 and trace.system.extra["scheduling-policy"] == "LIFO"
    assert all(s.algorithm == "ring" for s in trace.collectives)


def test_system_algorithms(tmp_path):
    net2 = tmp_path / "net2.yml"
    net2.write_text("topology: [Ring, Switch]\nnpus_count: [4, 2]\nbandwidth: [50, 25]\n"
                    "latency: [500, 700]\n")
    hints, dims = load_astra_network(net2)
    assert dims == (4, 2) and hints.topology is None          # kinds differ
    assert hints.extra["topology"] == ["Ring", "Switch"] and hints.extra["latency"] == [500, 700]
    sys1 = tmp_path / "sys.txt"
    sys1.write_text("all-reduce-implementation: ring_doubleBinaryTree_direct\n"
                    "all-gather-implementation: oneRing\n"
                    "reduce-scatter-implementation: halvingDoubling_direct\n")
    hints = load_astra_system(sys1, dims=2)
    assert hints.algorithms == {"allreduce": ("ring", "double_binary_tree"),
                                "reduce_scatter": ("halving_doubling", "direct")}
    assert hints.extra == {"all-gather-implementation": "oneRing"}
    _raises(lambda: load_astra_system(sys1, dims=4), "all-reduce-implementation",
            "3 dimensions given but the network has 4", where=f"{sys1}:1: ")
    sys2 = tmp_path / "sys.json"
    sys2.write_text('{"all-reduce-implementation": ["ring", "doubleBinaryTree"],\n'
                    ' "preferred-dataset-splits": 8, "local-mem-bw": 1600, "boost-mode": 0}\n')
    hints = load_astra_system(sys2)
    assert hints.algorithms == {"allreduce": ("ring", "double_binary_tree")}
    assert hints.chunks == 8 and hints.mem_gbps == 1600 and hints.extra == {"boost-mode": 0}


@needs_data
def test_chakra_with_system_and_mixed_network(tmp_path):
    net = tmp_path / "net.yml"
    net.write_text("topology: [Ring, Switch]\nnpus_count: [4, 2]\nbandwidth: [50, 25]\n")
    sys_file = tmp_path / "sys.txt"
    sys_file.write_text("all-reduce-implementation: ring_doubleBinaryTree_ring\n"
                        "preferred-dataset-splits: 2\n")
    trace = load_trace(CHAKRA, system_file=sys_file, network_file=net)
    assert trace.nodes == 8 and trace.system.topology is None
    assert trace.system.link_gbps == (50.0, 25.0) and trace.system.chunks == 2
    assert trace.collectives[0].algorithm == ("ring", "double_binary_tree")


@pytest.mark.parametrize("text, line, field, problem", [
    ("scheduling-policy LIFO\n", 1, None, "allowed: 'key: value' lines"),
    ("a: 1\na: 2\n", 2, "a", "duplicate key (first on line 1)"),
    ("preferred-dataset-splits: 0\n", 1, "preferred-dataset-splits", "an integer >= 1"),
    ("boost-mode: 0\nall-reduce-implementation: ring_butterfly\n", 2,
     "all-reduce-implementation", "'butterfly' is not allowed; allowed: ring, direct"),
    ("all-gather-implementation: doubleBinaryTree\n", 1, "all-gather-implementation",
     "double_binary_tree is only for an all-reduce"),
    ("endpoint-delay:\n", 1, "endpoint-delay", "the value is missing"),
])
def test_system_errors(tmp_path, text, line, field, problem):
    path = tmp_path / "sys.txt"
    path.write_text(text)
    _raises(lambda: load_astra_system(path), problem,
            where=f"{path}:{line}: " + (f"{field}: " if field else ""))


@pytest.mark.parametrize("text, line, field, problem", [
    ("topology: [Ring, Ring]\nnpus_count: [8]\n", 2, "npus_count",
     "1 values are not allowed; allowed: one per dimension (2)"),
    ("topology: [Mesh]\nnpus_count: [8]\n", 1, "topology[0]", "'Mesh' is not allowed"),
    ("topology: [Ring]\nnpus_count: [0]\n", 2, "npus_count[0]", "an integer >= 1"),
    ("topology: [Ring]\nnpus_count: [8]\nbandwidth: [-5]\n", 3, "bandwidth[0]",
     "a non-negative number"),
    ('{\n  "units-count": [4, 4],\n  "dimensions-count": 3\n}', 3, "dimensions-count",
     "allowed: 2 (the length of units-count)"),
    ('{"units-count": [4]}', 1, "topologies-per-dim", "missing"),
    ("npus: 3\n", 1, "(top level)", "unknown network file"),
])
def test_network_errors(tmp_path, text, line, field, problem):
    path = tmp_path / "net.yml"
    path.write_text(text)
    _raises(lambda: load_astra_network(path), problem, where=f"{path}:{line}: {field}: ")


@needs_data
def test_network_must_match_ranks():
    _raises(lambda: load_trace(CHAKRA, network_file=TORUS), "16 NPUs", "8 ranks",
            where=f"{TORUS}: ")


# -- Chakra ------------------------------------------------------------------------------------

@needs_data
@pytest.mark.parametrize("which", ["dir", "file", "prefix"])
def test_chakra_sample(which):
    files = sorted(CHAKRA.glob("*.et"))
    npus, mb = map(int, re.fullmatch(r"all_reduce_(\d+)npus_(\d+)MB", CHAKRA.name).groups())
    assert len(files) == npus
    path = {"dir": CHAKRA, "file": files[3], "prefix": CHAKRA / "all_reduce"}[which]
    trace = load_trace(path)
    assert trace.format == "chakra" and trace.nodes == npus
    assert len(trace.collectives) == 1
    spec = trace.collectives[0]
    assert spec.collective == "allreduce" and spec.bytes == mb << 20 and spec.dtype == "fp32"
    assert spec.name.encode() in files[0].read_bytes()
    assert trace.meta["version"].encode() in files[0].read_bytes()
    assert len(trace.meta["ranks"]) == npus
    assert spec.extra["attrs"] == {"is_cpu_op": False}


# A small protobuf encoder, written from the wire-format rules, to build test traces.
def _v(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _f(number: int, wire: int, payload) -> bytes:
    key = _v(number << 3 | wire)
    if wire == 0:
        return key + _v(payload)
    if wire == 2:
        return key + _v(len(payload)) + payload
    return key + payload


def _zz(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def _attr(name: str, number: int, wire: int, payload) -> bytes:
    return _f(10, 2, _f(1, 2, name.encode()) + _f(number, wire, payload))


def _node(nid, name, ntype, *, data=(), ctrl=(), dur=0, attrs=b"", packed=True) -> bytes:
    body = (_f(1, 0, nid) if nid else b"") + _f(2, 2, name.encode()) + _f(3, 0, ntype)
    if ctrl:
        body += b"".join(_f(4, 0, d) for d in ctrl)          # unpacked repeated
    if data:
        body += (_f(5, 2, b"".join(_v(d) for d in data)) if packed
                 else b"".join(_f(5, 0, d) for d in data))
    if dur:
        body += _f(7, 0, dur)
    return body + attrs


def _coll(nid, name, ctype, size, **kw) -> bytes:
    return _node(nid, name, 7, attrs=_attr("comm_type", 9, 0, ctype)
                 + _attr("comm_size", 9, 0, size), **kw)


def _et(*nodes, version="0.0.4") -> bytes:
    msgs = [_f(1, 2, version.encode())] + list(nodes)
    return b"".join(_v(len(m)) + m for m in msgs)


def test_chakra_attribute_kinds():
    attrs = (_attr("d", 3, 1, struct.pack("<d", -2.5))
             + _attr("dl", 4, 2, _f(1, 2, struct.pack("<2d", 1.0, 2.0)))
             + _attr("f", 5, 5, struct.pack("<f", 0.5))
             + _attr("i32", 7, 0, -3)
             + _attr("i32l", 8, 2, _f(1, 2, _v(-1 & (2**64 - 1)) + _v(7)))
             + _attr("i64", 9, 0, -(2**40))
             + _attr("u32", 11, 0, 4000000000)
             + _attr("u64l", 14, 2, _f(1, 0, 5) + _f(1, 0, 6))          # unpacked
             + _attr("s32", 15, 0, _zz(-7))
             + _attr("s64l", 18, 2, _f(1, 2, _v(_zz(-1)) + _v(_zz(2))))
             + _attr("fx32", 19, 5, struct.pack("<I", 123))
             + _attr("fx64l", 22, 2, _f(1, 2, struct.pack("<2Q", 1, 2**63)))
             + _attr("sfx32", 23, 5, struct.pack("<i", -9))
             + _attr("sfx64", 25, 1, struct.pack("<q", -10))
             + _attr("b", 27, 0, 1)
             + _attr("bl", 28, 2, _f(1, 2, b"\x01\x00\x01"))
             + _attr("s", 29, 2, "héllo".encode())
             + _attr("sl", 30, 2, _f(1, 2, b"a") + _f(1, 2, b"bc"))
             + _attr("by", 31, 2, b"\x00\xff")
             + _attr("byl", 32, 2, _f(1, 2, b"\x01")))
    io = _f(8, 2, _f(1, 2, b"[1]") + _f(2, 2, b"[[2]]") + _f(3, 2, b"[float]"))
    et = decode_et(_et(_node(5, "n", 4, dur=3, attrs=attrs + io) + _f(99, 0, 1)))  # 99: unknown
    assert et.version == "0.0.4"
    node = et.nodes[0]
    assert (node.id, node.name, node.type_name, node.duration_micros) == (5, "n", "COMP_NODE", 3)
    assert node.inputs == {"values": "[1]", "shapes": "[[2]]", "types": "[float]"}
    assert node.attrs == {
        "d": -2.5, "dl": [1.0, 2.0], "f": 0.5, "i32": -3, "i32l": [-1, 7], "i64": -(2**40),
        "u32": 4000000000, "u64l": [5, 6], "s32": -7, "s64l": [-1, 2], "fx32": 123,
        "fx64l": [1, 2**63], "sfx32": -9, "sfx64": -10, "b": True, "bl": [True, False, True],
        "s": "héllo", "sl": ["a", "bc"], "by": b"\x00\xff", "byl": [b"\x01"]}


def test_chakra_graph(tmp_path):
    # comp 1 -> ar 2 -> comp 3 -> ag 4;  comp 5 (independent) -> rs 6 which waits for 2 and 4
    nodes = [_node(1, "fwd", 4, dur=10), _coll(2, "ar", 0, 4096, data=[1]),
             _node(3, "bwd", 4, dur=7, data=[2]), _coll(4, "ag", 2, 1024, data=[3]),
             _node(5, "opt", 4, dur=2, packed=False, data=[1]),
             _coll(6, "rs", 7, 2048, data=[5], ctrl=[4, 2]),
             _node(7, "tail", 4, dur=1, data=[6]), _coll(8, "empty", 0, 0, data=[7])]
    for rank in range(2):
        (tmp_path / f"t.{rank}.et").write_bytes(_et(*nodes))
    trace = load_trace(tmp_path / "t.1.et")
    assert trace.nodes == 2
    got = [(s.name, s.collective, s.bytes, s.compute_cycles, s.deps) for s in trace.collectives]
    assert got == [("ar", "allreduce", 4096, 10000, ()),
                   ("ag", "allgather", 1024, 7000, ("ar",)),
                   ("rs", "reduce_scatter", 2048, 2000, ("ar", "ag"))]
    assert trace.meta["trailing_compute_cycles"] == 1000


def _coll_file(tmp_path, name, *nodes, rank=0):
    path = tmp_path / f"{name}.{rank}.et"
    path.write_bytes(_et(*nodes))
    return path


@pytest.mark.parametrize("nodes, where, parts", [
    ([_coll(3, "bc", 5, 64)], "node 3 ('bc'): attr comm_type",
     ["5 (BROADCAST) is not supported; allowed: 0 ALL_REDUCE, 2 ALL_GATHER"]),
    ([_coll(4, "bar", 9, 64)], "node 4 ('bar'): attr comm_type", ["9 (BARRIER)"]),
    ([_node(2, "x", 7, attrs=_attr("comm_type", 9, 0, 0))], "node 2 ('x'): attr comm_size",
     ["missing"]),
    ([_node(2, "x", 7, attrs=_attr("comm_type", 29, 2, b"AR") + _attr("comm_size", 9, 0, 8))],
     "node 2 ('x'): attr comm_type", ["'AR' is not allowed; allowed: an integer"]),
    ([_coll(2, "odd", 0, 7)], "node 2 ('odd'): attr comm_size", ["a whole number of elements"]),
    ([_node(6, "snd", 5)], "node 6 ('snd'): type", ["COMM_SEND_NODE (point-to-point)"]),
    ([_node(6, "w", 12)], "node 6 ('w'): type", ["12 is not allowed"]),
    ([_coll(2, "a", 0, 8, data=[9])], "node 2 ('a'): data_deps", ["node 9 does not exist"]),
    ([_coll(2, "a", 0, 8, data=[3]), _node(3, "b", 4, data=[2])], "node 2 ('a'): data_deps/ctrl",
     ["dependency cycle among nodes 2, 3"]),
    ([_coll(2, "a", 0, 8), _coll(2, "b", 0, 8)], "node 2 ('b'): id", ["used twice"]),
    ([_node(1, "c", 4)], "", ["no COMM_COLL_NODE"]),
])
def test_chakra_errors(tmp_path, nodes, where, parts):
    path = _coll_file(tmp_path, "t", *nodes)
    _raises(lambda: load_trace(path), *parts, where=f"{path}: {where}")


def test_chakra_directory_of_two_traces(tmp_path):
    _coll_file(tmp_path, "a", _coll(0, "ar", 0, 64))
    _coll_file(tmp_path, "b", _coll(0, "ar", 0, 64))
    _raises(lambda: load_trace(tmp_path), "not one <prefix>.<rank>.et set (prefixes a, b)",
            where=f"{tmp_path}: ")


def test_chakra_rank_errors(tmp_path):
    _coll_file(tmp_path, "t", _coll(0, "ar", 0, 64))
    _coll_file(tmp_path, "t", _coll(1, "ar", 0, 128), rank=1)
    _raises(lambda: load_trace(tmp_path / "t.0.et"), "collective 0 ('ar') is allreduce of 128",
            f"in {tmp_path / 't.0.et'} it is allreduce of 64", where=f"{tmp_path / 't.1.et'}: ")
    _coll_file(tmp_path, "t", _coll(1, "ar", 0, 64), _coll(2, "ar", 0, 64), rank=1)
    _raises(lambda: load_trace(tmp_path), "2 collectives", "has 1",
            where=f"{tmp_path / 't.1.et'}: ")
    (tmp_path / "t.1.et").rename(tmp_path / "t.2.et")
    _raises(lambda: load_trace(tmp_path / "t.0.et"), "missing; ranks found: 0, 2",
            where=f"{tmp_path / 't'}.1.et: ")
    bad = tmp_path / "trunc.et"
    bad.write_bytes(_et(_coll(0, "ar", 0, 64))[:-3])
    _raises(lambda: load_trace(bad), "truncated file", where=f"{bad}: message 1 at byte ")


# -- MSCCL -------------------------------------------------------------------------------------

@needs_data
def test_msccl_sample():
    text = MSCCL.read_text()
    algo = re.search(r"<algo ([^>]*)>", text).group(1)
    attrs = dict(re.findall(r'(\w+)="([^"]*)"', algo))
    trace = load_trace(MSCCL)
    assert trace.format == "msccl" and trace.nodes == int(attrs["ngpus"])
    spec, = trace.collectives
    assert spec.collective == "msccl" and spec.algorithm == "msccl" and spec.dtype == "fp32"
    assert spec.name == attrs["name"] and spec.msccl_xml == str(MSCCL)
    assert spec.bytes == 1 << 20 and (spec.bytes // 4) % int(attrs["nchunksperloop"]) == 0
    program = load_msccl(spec.msccl_xml, count=spec.bytes // 4, dtype="fp32")
    assert program.num_nodes == trace.nodes
    assert load_trace(MSCCL, msccl_bytes=96).collectives[0].bytes == 96
    _raises(lambda: load_trace(MSCCL, msccl_bytes=100), "msccl_bytes: 100 is not allowed; "
            "allowed: a positive multiple of 32 bytes", where=f"{MSCCL}:1: ")


def _pair_gpu(g: int) -> str:
    """One GPU of a 2-GPU all-reduce: send all three chunks, then receive-reduce them."""
    steps = "".join(
        f'      <step s="{k}" type="{kind}" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" '
        f'cnt="3" depid="-1"\n       deps="-1" hasdep="0"/>\n'
        for k, kind in enumerate(("s", "rrc")))
    return (f'  <gpu id="{g}" i_chunks="3" o_chunks="0" s_chunks="0">\n'
            f'    <tb id="0" send="{1 - g}" recv="{1 - g}" chan="0">\n{steps}    </tb>\n'
            "  </gpu>\n")


TWO_GPU = ('<algo name="pair" nchannels="1" nchunksperloop="3" ngpus="2" coll="allreduce"\n'
           ' inplace="1">\n' + _pair_gpu(0) + _pair_gpu(1) + "</algo>\n")


def test_msccl_default_size_rounds_to_the_loop(tmp_path):
    path = tmp_path / "pair.xml"
    path.write_text(TWO_GPU)
    trace = load_trace(path)
    assert trace.nodes == 2 and trace.collectives[0].name == "pair"
    assert trace.collectives[0].bytes == (1 << 20) // 12 * 12
    bad = tmp_path / "bad.xml"
    bad.write_text(TWO_GPU.replace('type="rrc"', 'type="xyz"', 1))
    _raises(lambda: load_trace(bad), "<step> attribute 'type'", "'xyz' is not a step type",
            where=f"{bad}:{_line_of(TWO_GPU, 'rrc')}: ")
    bad.write_text(TWO_GPU.replace('ngpus="2"', 'ngpus="two"'))
    _raises(lambda: load_trace(bad), "<algo> attribute 'ngpus'", where=f"{bad}:1: ")
    bad.write_text(TWO_GPU.replace("</algo>", ""))
    _raises(lambda: load_trace(bad), "not well-formed XML", where=f"{bad}:")


# -- the ACE format ----------------------------------------------------------------------------

FULL = """\
# every field of the format
version: 1
nodes: 8
system:
  topology: torus:4x2
  link_gbps: [50, 25]
  link_latency_ns: 500
  mem_gbps: 370.5
  chunks: 4
  algorithms: {allgather: direct, all_reduce: [ring, dbt]}
  extra: {source: hand-written}
defaults: {dtype: bf16, op: max}
collectives:
  - name: conv1.wg
    collective: allreduce
    bytes: 37632
    dtype: fp32
    op: sum
    algorithm: [ring, double_binary_tree]
    compute_cycles: 32291
    extra: {layer: conv1}
  - name: gather
    collective: all-gather
    count: 1000
    op: sum
    deps: [conv1.wg]
  - name: rs
    collective: rs
    count: 10
    algorithm: hd
    deps: [gather, conv1.wg]
  - name: ar
    collective: allreduce
    bytes: 64
  - name: custom
    collective: msccl
    msccl_xml: algo/ring.xml
    bytes: 1024
    dtype: int32
meta: {model: test, layers: [1, 2]}
"""


def _full(tmp_path) -> Path:
    (tmp_path / "algo").mkdir(exist_ok=True)
    if MSCCL.exists():
        shutil.copy(MSCCL, tmp_path / "algo" / "ring.xml")
    path = tmp_path / "trace.yaml"
    path.write_text(FULL)
    return path


@needs_data
def test_ace_format_full(tmp_path):
    path = _full(tmp_path)
    trace = load_trace(path)
    assert trace.format == "ace" and trace.nodes == 8
    s = trace.system
    assert (s.topology, s.link_gbps, s.link_latency_ns, s.mem_gbps, s.chunks) == (
        "torus:4x2", (50.0, 25.0), 500.0, 370.5, 4)
    assert s.algorithms == {"allgather": "direct", "allreduce": ("ring", "double_binary_tree")}
    assert s.extra == {"source": "hand-written"} and trace.meta == {"model": "test",
                                                                   "layers": [1, 2]}
    c = {spec.name: spec for spec in trace.collectives}
    assert list(c) == ["conv1.wg", "gather", "rs", "ar", "custom"]
    assert (c["conv1.wg"].bytes, c["conv1.wg"].dtype, c["conv1.wg"].op) == (37632, "fp32", "sum")
    assert c["conv1.wg"].algorithm == ("ring", "double_binary_tree")
    assert c["conv1.wg"].compute_cycles == 32291 and c["conv1.wg"].extra == {"layer": "conv1"}
    # defaults: bf16 and max; the system's algorithm for all-gather
    assert (c["gather"].collective, c["gather"].bytes, c["gather"].dtype) == (
        "allgather", 2000, "bf16")
    assert c["gather"].op == "sum" and c["gather"].algorithm == "direct"
    assert c["gather"].deps == ("conv1.wg",) and c["rs"].deps == ("gather", "conv1.wg")
    assert (c["rs"].collective, c["rs"].op, c["rs"].algorithm) == (
        "reduce_scatter", "max", "halving_doubling")
    assert c["ar"].algorithm == ("ring", "double_binary_tree")     # from system.algorithms
    assert c["custom"].msccl_xml == str(tmp_path / "algo" / "ring.xml")
    assert c["custom"].algorithm == "msccl" and c["custom"].bytes == 1024
    assert c["custom"].source == f"{path}:{_line_of(FULL, 'name: custom')}"


def _same(a, b):
    """Traces equal apart from where they were read from."""
    assert a.nodes == b.nodes and a.system == b.system and a.meta == b.meta
    assert [replace(s, source="") for s in a.collectives] == \
        [replace(s, source="") for s in b.collectives]
    assert [s.extra for s in a.collectives] == [s.extra for s in b.collectives]


@needs_data
@pytest.mark.parametrize("suffix", [".json", ".yaml"])
@pytest.mark.parametrize("sample", ["full", "resnet", "chakra", "msccl"])
def test_ace_round_trip(tmp_path, sample, suffix):
    if sample == "full":
        original = load_trace(_full(tmp_path))
    elif sample == "resnet":
        original = load_trace(WORKLOADS / "Resnet50_DataParallel.txt", system_file=SYSTEM,
                              network_file=TORUS)
    elif sample == "chakra":
        original = load_trace(CHAKRA, network_file=RING)
    else:
        original = load_trace(MSCCL, msccl_bytes=4096)
    out = tmp_path / "out" / f"copy{suffix}"
    out.parent.mkdir()
    write_ace_trace(original, out)
    if suffix == ".json":
        json.loads(out.read_text())
    copy = load_trace(out)
    assert copy.format == "ace" and detect_format(out) == "ace"
    _same(original, copy)
    # and once more, through the text itself
    text = dump_ace_trace(copy, "json" if suffix == ".json" else "yaml",
                          relative_to=out.parent)
    assert text == out.read_text()


def test_json_with_tabs_and_line_numbers(tmp_path):
    text = ('{\n\t"version": 1,\n\t"collectives": [\n\t\t{"name": "a", "collective": '
            '"allreduce", "bytes": 1e3},\n\t\t{"name": "b", "collective": "allreduce",\n'
            '\t\t "bytes": 6}\n\t]\n}\n')
    path = tmp_path / "t.json"
    path.write_text(text)
    _raises(lambda: load_trace(path), "collectives[1].bytes: 6 is not allowed",
            where=f"{path}:6: ")
    path.write_text(text.replace('"bytes": 6', '"bytes": 8'))
    assert [s.bytes for s in load_trace(path).collectives] == [1000, 8]
    path.write_text(text.replace('"bytes": 6}', '"bytes": 6,}'))
    _raises(lambda: load_trace(path), "not valid JSON", where=f"{path}:6: ")


HEAD = "version: 1\ncollectives:\n"
ONE = "  - {name: a, collective: allreduce, bytes: 64}\n"


@pytest.mark.parametrize("body, needle, field, problem", [
    (HEAD + "  - name: a\n    collective: allreduce\n    bytes: -5\n", "bytes: -5",
     "collectives[0].bytes", "-5 is not allowed; allowed: a positive multiple of the dtype size "
     "(4 for fp32)"),
    (HEAD + "  - {name: a, collective: allreduce, bytes: 6}\n", "bytes: 6",
     "collectives[0].bytes", "(4 for fp32)"),
    (HEAD + "  - {name: a, collective: allreduce, bytes: 7, dtype: bf16}\n", "bytes: 7",
     "collectives[0].bytes", "(2 for bf16)"),
    (HEAD + "  - name: a\n    colective: allreduce\n", "colective",
     "collectives[0].colective", "unknown key; allowed: name, collective, bytes, count"),
    (HEAD + "  - {name: a, collective: broadcast, bytes: 4}\n", "broadcast",
     "collectives[0].collective", "'broadcast' is not a collective; allowed: allreduce, "
     "reduce_scatter, allgather, alltoall, msccl"),
    (HEAD + "  - {name: a, collective: allreduce, bytes: 4, dtype: fp64}\n", "fp64",
     "collectives[0].dtype", "'fp64' is not a dtype; allowed: fp32, bf16, fp16, int32"),
    (HEAD + "  - {name: a, collective: allreduce, bytes: 4, op: prod}\n", "prod",
     "collectives[0].op", "'prod' is not an op; allowed: sum, max, min"),
    (HEAD + "  - {name: a, collective: alltoall, bytes: 4, op: max}\n", "max",
     "collectives[0].op", "'max' is not allowed for alltoall, which does not reduce"),
    (HEAD + "  - name: a\n    collective: allreduce\n    bytes: 4\n    algorithm:\n"
     "      - ring\n      - butterfly\n", "butterfly", "collectives[0].algorithm[1]",
     "'butterfly' is not an algorithm; allowed: ring, direct, halving_doubling"),
    (HEAD + "  - {name: a, collective: allgather, bytes: 4, algorithm: dbt}\n", "dbt",
     "collectives[0].algorithm", "double_binary_tree is only for an all-reduce"),
    (HEAD + ONE + "  - {name: a, collective: allreduce, bytes: 4}\n", ("name: a", 2),
     "collectives[1].name", "'a' is already the name of collectives[0] (line 3)"),
    (HEAD + ONE + "  - {name: b, collective: allreduce, bytes: 4, deps: [zz]}\n", "zz",
     "collectives[1].deps[0]", "'zz' is not a collective of this trace"),
    (HEAD + "  - {name: b, collective: allreduce, bytes: 4, deps: [a]}\n" + ONE, "deps",
     "collectives[0].deps[0]", "'a' is a later collective (collectives[1])"),
    (HEAD + "  - {name: b, collective: allreduce, bytes: 4, deps: [b]}\n", "deps",
     "collectives[0].deps[0]", "'b' is the collective itself"),
    (HEAD + ONE + "  - {name: b, collective: allreduce, bytes: 4, deps: [a, a]}\n", "deps",
     "collectives[1].deps[1]", "'a' is listed twice"),
    (HEAD + "  - {name: b, collective: allreduce, bytes: 4, deps: a}\n", "deps",
     "collectives[0].deps", "'a' is not allowed; allowed: a list of names"),
    (HEAD + "  - {name: a, collective: allreduce, bytes: 4, count: 1}\n", "name: a",
     "collectives[0].bytes", "both bytes and count given"),
    (HEAD + "  - {name: a, collective: allreduce}\n", "name: a",
     "collectives[0].bytes", "missing; allowed: bytes (S in bytes) or count"),
    (HEAD + "  - {collective: allreduce, bytes: 4}\n", "{collective", "collectives[0].name",
     "missing"),
    (HEAD + "  - {name: 12, collective: allreduce, bytes: 4}\n", "name", "collectives[0].name",
     "12 is not allowed; allowed: a non-empty string"),
    (HEAD + "  - {name: a, collective: allreduce, bytes: 4, compute_cycles: -1}\n", "compute",
     "collectives[0].compute_cycles", "-1 is not allowed; allowed: an integer >= 0"),
    ("version: 2\ncollectives: []\n", "version", "version", "2 is not allowed; allowed: 1"),
    ("nodes: 2\ncollectives:\n" + ONE, "nodes", "version", "missing; allowed: 1"),
    (HEAD + ONE + "colectives: []\n", "colectives", "colectives",
     "unknown key; allowed: version, nodes, system, defaults, collectives, meta"),
    (HEAD.replace("collectives:\n", "collectives: []\n"), "collectives", "collectives",
     "an empty list is not allowed"),
    (HEAD + "  - {name: a, collective: msccl, bytes: 64}\n", "msccl", "collectives[0].msccl_xml",
     "missing; allowed: the path of an MSCCL XML file"),
    (HEAD + "  - {name: a, collective: msccl, bytes: 64, msccl_xml: nope.xml}\n", "nope",
     "collectives[0].msccl_xml", "'nope.xml': no such file"),
    (HEAD + "  - {name: a, collective: allreduce, bytes: 64, msccl_xml: x.xml}\n", "x.xml",
     "collectives[0].msccl_xml", "not allowed for allreduce; allowed: only with collective: "
     "msccl"),
    (HEAD + "  - {name: a, collective: msccl, bytes: 8, msccl_xml: ring.xml}\n", "bytes",
     "collectives[0].bytes", "8 is not allowed; allowed: a positive multiple of 32 bytes"),
    (HEAD + "  - {name: a, collective: msccl, bytes: 64, msccl_xml: ring.xml, algorithm: ring}\n",
     "ring}", "collectives[0].algorithm", "allowed: msccl"),
    ("nodes: 4\nsystem: {topology: 'ring:8'}\n" + HEAD + ONE, "ring:8", "system.topology",
     "'ring:8' has 8 nodes but nodes is 4"),
    ("system:\n  topology: hypercube\n" + HEAD + ONE, "hypercube", "system.topology",
     "'hypercube' is not a topology; allowed: kind:DIMS"),
    ("system:\n  topology: torus:4x2\n  link_gbps: [1, 2, 3]\n" + HEAD + ONE, "link_gbps",
     "system.link_gbps", "3 values are not allowed; allowed: one number, or one per topology "
     "dimension (2)"),
    ("system:\n  link_latency_ns: -1\n" + HEAD + ONE, "latency", "system.link_latency_ns",
     "-1 is not allowed; allowed: a non-negative number"),
    ("system:\n  algorithms: {broadcast: ring}\n" + HEAD + ONE, "broadcast",
     "system.algorithms.broadcast", "'broadcast' is not allowed; allowed: allreduce"),
    ("system:\n  chunks: 0\n" + HEAD + ONE, "chunks", "system.chunks", "an integer >= 1"),
    ("defaults: {dtype: f32}\n" + HEAD + ONE, "f32", "defaults.dtype", "'f32' is not a dtype"),
    (HEAD + "  - name: a\n    name: b\n", "name: b", "collectives[0].name",
     "duplicate key (first on line 3)"),
    (HEAD + "  - {name: a, collective: allreduce, bytes: [4}\n", "[4", None, "not valid YAML"),
])
def test_ace_errors(tmp_path, body, needle, field, problem):
    if MSCCL.exists():
        shutil.copy(MSCCL, tmp_path / "ring.xml")
    path = tmp_path / "trace.yaml"
    path.write_text(body)
    line = _line_of(body, *needle) if isinstance(needle, tuple) else _line_of(body, needle)
    _raises(lambda: load_trace(path), problem,
            where=f"{path}:{line}: " + (f"{field}: " if field else ""))


def test_schema_matches_the_loader():
    schema = json.loads(SCHEMA_PATH.read_text())
    defs = schema["$defs"]
    assert tuple(schema["properties"]) == TOP_KEYS
    assert tuple(defs["system"]["properties"]) == SYSTEM_KEYS
    assert tuple(schema["properties"]["defaults"]["properties"]) == DEFAULT_KEYS
    assert tuple(defs["collective"]["properties"]) == COLLECTIVE_KEYS
    from ace.sw.compiler import _ALG_ALIASES, _COLL_ALIASES, ALGORITHMS, COLLECTIVES
    from sim_harness.traces._common import DTYPE_BYTES, OPS
    assert set(defs["collective_name"]["enum"]) == set(COLLECTIVES) | {"msccl"} | set(
        _COLL_ALIASES)
    assert set(defs["algorithm_name"]["enum"]) == set(ALGORITHMS) | set(_ALG_ALIASES)
    assert defs["dtype"]["enum"] == list(DTYPE_BYTES) and defs["op"]["enum"] == list(OPS)
    assert schema["required"] == ["version", "collectives"]


# -- format detection --------------------------------------------------------------------------

@needs_data
def test_detect_samples(tmp_path):
    assert FORMATS == ("ace", "astra-sim", "chakra", "msccl")
    for path in WORKLOADS.glob("*.txt"):
        assert detect_format(path) == "astra-sim"
    assert detect_format(CHAKRA) == "chakra"
    assert detect_format(next(CHAKRA.glob("*.et"))) == "chakra"
    assert detect_format(CHAKRA / "all_reduce") == "chakra"
    assert detect_format(MSCCL) == "msccl"
    # content wins over the extension
    for src, name, fmt in [(WORKLOADS / "microAllReduce.txt", "w.json", "astra-sim"),
                           (MSCCL, "algo.txt", "msccl"),
                           (next(CHAKRA.glob("*.et")), "rank.bin", "chakra")]:
        shutil.copy(src, tmp_path / name)
        assert detect_format(tmp_path / name) == fmt
    (tmp_path / "t.yml").write_text(HEAD + ONE)
    (tmp_path / "t.dat").write_text('{"version": 1, "collectives": []}')
    assert detect_format(tmp_path / "t.yml") == detect_format(tmp_path / "t.dat") == "ace"


@pytest.mark.parametrize("name, content, parts", [
    ("notes.md", "hello world\n", ["unknown trace format; allowed: ace", "msccl (XML)"]),
    ("blob.bin", "\x00\x01\x02\x03", ["unknown trace format (binary)"]),
    ("net.yml", "topology: [Ring]\nnpus_count: [8]\n", ["network_file/system_file"]),
    ("page.xml.html", "<html></html>", ["(XML without <algo>)"]),
    ("empty.yaml", "   \n", ["empty file"]),
    ("missing.yaml", None, ["no such file"]),
    ("broken.yaml", "version: 1\ncollectives: [\n", ["not valid YAML"]),
])
def test_detect_errors(tmp_path, name, content, parts):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    _raises(lambda: load_trace(path), *parts, where=f"{path}")


def test_detect_empty_directory(tmp_path):
    _raises(lambda: load_trace(tmp_path), "a directory without .et files", where=f"{tmp_path}")


def test_split_collective_pieces_cover_the_vector_in_order():
    from sim_harness.trace import CollectiveSpec, split_collective
    spec = CollectiveSpec(name="g", collective="allreduce", bytes=4 * 10, dtype="fp32",
                          compute_cycles=7, deps=("f",), source="t.txt:3")
    pieces = split_collective(spec, 3)
    assert [p.name for p in pieces] == ["g#1/3", "g#2/3", "g#3/3"]
    assert [p.bytes for p in pieces] == [16, 12, 12]
    assert [p.compute_cycles for p in pieces] == [7, 0, 0]
    assert [p.deps for p in pieces] == [("f",), ("g#1/3",), ("g#2/3",)]
    assert all(p.extra["whole_bytes"] == 40 and p.source == "t.txt:3" for p in pieces)
    assert [p.extra["piece"] for p in pieces] == [[1, 3], [2, 3], [3, 3]]
    with pytest.raises(ValueError, match="pieces: 11; allowed: 1 to 10"):
        split_collective(spec, 11)
