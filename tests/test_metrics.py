"""Tests of the replay metrics (sim_harness/metrics.py) on synthetic raw measurements.

Every expected number is derived by hand in the test (the comment next to it shows how), from
the definitions in docs/architecture.md, "What is measured" and the module docstring of ``sim_harness.metrics``.
"""

import json
import math
import re
from dataclasses import replace
from pathlib import Path

import pytest

from sim_harness.metrics import (CollectiveRecord, bound_cycles, bound_terms, busbw_factor,
                                 collective_metrics, compare, compare_collectives,
                                 ideal_link_bytes, latency_steps, mem_min_bytes_per_node,
                                 parse_topology, phases, run_summary, split_algorithms)

MiB = 1 << 20
SYSTEM = {"config": {"name": "default"}, "topology": "ring:8", "clock_mhz": 1000.0,
          "link_bytes_per_cycle": 16.0, "link_latency": 10, "mem_bytes_per_cycle": 64.0,
          "mem_latency": 8, "background_share": 0.0}


def ring_allreduce_raw(mode="ace", cycles=120_000, reads=MiB, writes=MiB, name="grad0"):
    """Ring all-reduce of S = 1 MiB on ring:8: every node sends 2*7/8*S on its link 0 in
    4096-byte packets (448 of them), each with a 16-byte header on the wire."""
    p, payload = 8, 2 * 7 * MiB // 8                      # 1_835_008 bytes per link
    return {
        "name": name, "collective": "allreduce", "algorithm": "ring", "topology": "ring:8",
        "nodes": p, "bytes": MiB, "dtype": "fp32", "op": "sum", "mode": mode, "chunks": 4,
        "start_cycle": 1000, "end_cycle": 1000 + cycles, "cycles": cycles,
        "mem_read_bytes": [reads] * p, "mem_write_bytes": [writes] * p,
        "link_tx_payload_bytes": [[payload, 0] for _ in range(p)],
        "link_tx_wire_bytes": [[payload + 448 * 16, 0] for _ in range(p)],
        "links_used": [[n, 0] for n in range(p)],
        "program_link_bytes": [[payload, 0] for _ in range(p)],
        "latency_steps": 14, "correct": True,
        "samples": {"interval": 1000, "cycle": [], "mem_read_bytes": [],
                    "mem_write_bytes": [], "link_wire_bytes": [], "steps_done": []},
        "steps": [],
    }


# -- topology and algorithm names -----------------------------------------------------------------

def test_parse_topology():
    assert parse_topology("ring:8") == ("torus", (8,))
    assert parse_topology("torus:4x2") == ("torus", (4, 2))
    assert parse_topology("fully_connected:8") == ("fully_connected", (8,))
    assert parse_topology("switch:8") == ("switch", (8,))
    for bad in ("ring:4x2", "mesh:4", "ring", "torus:4x"):
        with pytest.raises(ValueError, match="topology"):
            parse_topology(bad)


def test_split_algorithms():
    assert split_algorithms("ring", 2) == ["ring", "ring"]
    assert split_algorithms("ring_direct", 2) == ["ring", "direct"]
    assert split_algorithms("ring+direct", 2) == ["ring", "direct"]
    assert split_algorithms("halving_doubling_ring", 2) == ["halving_doubling", "ring"]
    assert split_algorithms("ring_double_binary_tree", 2) == ["ring", "double_binary_tree"]
    assert split_algorithms(["direct", "ring"], 2) == ["direct", "ring"]
    with pytest.raises(ValueError, match="algorithm"):
        split_algorithms("ring_direct", 3)
    with pytest.raises(ValueError, match="algorithm"):
        split_algorithms("ringo", 1)
    with pytest.raises(ValueError, match="algorithm"):
        split_algorithms(["ring", "tree"], 2)


def test_phases_hierarchical_order_and_fractions():
    # all-reduce on a 4x2 torus: RS dim 0 on all of S, AR dim 1 on S/4, AG dim 0 on S.
    ph = phases("allreduce", "ring", "torus:4x2")
    assert [(p["kind"], p["dim"], p["size"], p["fraction"]) for p in ph] == [
        ("rs", 0, 4, 1), ("ar", 1, 2, 0.25), ("ag", 0, 4, 1)]
    # reduce-scatter from the last dimension to the first; all-gather the reverse.
    rs = phases("reduce_scatter", "ring", "torus:4x2")
    assert [(p["kind"], p["dim"], p["fraction"]) for p in rs] == [("rs", 1, 1), ("rs", 0, 0.5)]
    ag = phases("allgather", "ring", "torus:4x2")
    assert [(p["kind"], p["dim"], p["fraction"]) for p in ag] == [("ag", 0, 0.5), ("ag", 1, 1)]
    # Dimensions of size 1 have no phase.
    assert [p["dim"] for p in phases("allreduce", "ring", "torus:1x8")] == [1]
    assert phases("msccl", "msccl", "ring:8") == []
    with pytest.raises(ValueError, match="one-dimensional"):
        phases("alltoall", "ring", "torus:4x2")


# -- latency steps --------------------------------------------------------------------------------

@pytest.mark.parametrize("collective, algorithm, topology, steps", [
    ("allreduce", "ring", "ring:8", 14),                          # 2(p-1)
    ("reduce_scatter", "ring", "ring:8", 7),                      # p-1
    ("allgather", "ring", "ring:8", 7),
    ("alltoall", "ring", "ring:8", 7),                            # farthest block: p-1 hops
    ("reduce_scatter", "direct", "fully_connected:8", 1),
    ("allreduce", "direct", "fully_connected:8", 2),
    ("alltoall", "direct", "fully_connected:8", 1),
    ("reduce_scatter", "halving_doubling", "switch:8", 3),        # log2 8
    ("allreduce", "halving_doubling", "switch:8", 6),
    ("allreduce", "double_binary_tree", "ring:8", 6),             # 2 ceil(log2 8)
    ("allreduce", "double_binary_tree", "ring:5", 6),             # 2 ceil(log2 5)
    ("allreduce", "ring", "torus:4x2", 8),                        # 3 + 2(2-1) + 3
    ("allreduce", "ring_direct", "torus:4x2", 8),                 # 3 + 2 + 3
    ("reduce_scatter", "ring", "torus:4x2", 4),                   # 1 + 3
    ("allreduce", "ring", "torus:4x4x2", 3 + 3 + 2 + 3 + 3),
    ("allreduce", "ring", "torus:8x1", 14),
])
def test_latency_steps(collective, algorithm, topology, steps):
    assert latency_steps(collective, algorithm, topology) == steps


def test_latency_steps_errors():
    with pytest.raises(ValueError, match="msccl"):
        latency_steps("msccl", "msccl", "ring:8")
    with pytest.raises(ValueError, match="double_binary_tree"):
        latency_steps("reduce_scatter", "double_binary_tree", "ring:8")


# -- bound ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("collective, algorithm, topology, per_link", [
    ("allreduce", "ring", "ring:8", 2 * 7 / 8),                   # 2(p-1)/p S
    ("reduce_scatter", "ring", "ring:8", 7 / 8),                  # (p-1)/p S
    ("allgather", "ring", "ring:8", 7 / 8),
    ("allreduce", "ring", "switch:8", 2 * 7 / 8),
    ("reduce_scatter", "direct", "fully_connected:8", 1 / 8),     # (p-1)/p S over p-1 links
    ("allreduce", "direct", "fully_connected:8", 2 / 8),
    ("allreduce", "direct", "switch:8", 2 * 7 / 8),               # one link carries it all
    ("reduce_scatter", "halving_doubling", "switch:8", 7 / 8),    # S/2 + S/4 + S/8
    ("allreduce", "halving_doubling", "fully_connected:8", 2 * 1 / 2),  # xor 1: S/2 twice
    ("alltoall", "ring", "ring:8", 3.5),                          # sum r S/p, r = 1..7
    ("alltoall", "direct", "fully_connected:8", 1 / 8),
    ("alltoall", "direct", "switch:8", 7 / 8),
    ("allreduce", "ring", "torus:4x2", 3 / 4 + 3 / 4),             # dim 0: RS and AG
    ("reduce_scatter", "ring", "torus:4x2", 1 / 2),               # dim 1 first, on S
    ("allgather", "ring", "torus:4x2", 1 / 2),                    # dim 1 last, on S
    ("allreduce", "ring", "torus:4x4", 3 / 4 + 3 / 4),            # dim 1: 2 x 3/16 only
    ("allreduce", "ring_halving_doubling", "switch:4x2", 3 / 4 + 1 / 4 + 3 / 4),
    ("allreduce", "ring", "torus:8x1", 2 * 7 / 8),
])
def test_ideal_link_bytes(collective, algorithm, topology, per_link):
    assert ideal_link_bytes(collective, algorithm, topology, MiB) == pytest.approx(per_link * MiB)


def test_ideal_link_bytes_not_modelled():
    assert ideal_link_bytes("allreduce", "double_binary_tree", "ring:8", MiB) is None
    assert ideal_link_bytes("allreduce", "ring_double_binary_tree", "torus:4x2", MiB) is None
    assert ideal_link_bytes("msccl", "msccl", "ring:8", MiB) is None


def test_bound_ring_allreduce_by_hand():
    # S = 1 MiB, p = 8, 16 B/cycle: 2 * 7/8 * 2^20 / 16 = 114688 cycles, + one link latency
    # (10 cycles): the 14 steps x 10 cycles of the chain are far less than that.
    assert bound_cycles("allreduce", "ring", "ring:8", 8, MiB, 16, 10, 14) == 114_688 + 10
    terms = bound_terms("allreduce", "ring", "ring:8", 8, MiB, 16, 10, 14)
    assert terms == {"link_bytes": 1_835_008, "bandwidth_cycles": 114_688,
                     "latency_cycles": 10, "bound_cycles": 114_698, "model": "ideal"}


def test_bound_latency_chain_when_it_is_longer():
    # 1 KiB all-reduce on 8 nodes: W / B = 2 * 7/8 * 1024 / 16 = 112 cycles; 14 dependent
    # steps of 100 cycles of link latency take 1400 on their own, the bound.
    terms = bound_terms("allreduce", "ring", "ring:8", 8, 1024, 16, 100, 14)
    assert terms["bandwidth_cycles"] == 112 and terms["bound_cycles"] == 1400


def test_bound_uses_program_bytes_where_not_modelled():
    program = [[1000, 3000], [2000, 0]]
    # msccl: W = max(program_link_bytes) = 3000 -> 3000 / 8 = 375 cycles + one latency, 20
    # (more than the chain's 3 x 20).
    assert bound_cycles("msccl", "msccl", "ring:2", 2, 4096, 8, 20, 3, program) == 375 + 20
    terms = bound_terms("allreduce", "double_binary_tree", "ring:2", 2, 4096, 8, 20, 2, program)
    assert terms["model"] == "program" and terms["link_bytes"] == 3000
    with pytest.raises(ValueError, match="program_link_bytes"):
        bound_cycles("msccl", "msccl", "ring:8", 8, 4096, 8, 20, 3)
    # The ideal model ignores the program's bytes.
    assert bound_cycles("allreduce", "ring", "ring:2", 2, 4096, 8, 0, 2, program) == 4096 / 8


def test_bound_checks_nodes():
    with pytest.raises(ValueError, match="nodes"):
        bound_cycles("allreduce", "ring", "ring:8", 4, MiB, 16, 10, 14)


@pytest.mark.parametrize("collective, topology, algorithm", [
    ("allreduce", "ring:4", "ring"),
    ("reduce_scatter", "ring:4", "ring"),
    ("allgather", "ring:4", "ring"),
    ("alltoall", "ring:4", "ring"),
    ("alltoall", "fully_connected:4", "direct"),
    ("allreduce", "fully_connected:4", "direct"),
    ("allreduce", "switch:4", "direct"),
    ("allreduce", "switch:4", "halving_doubling"),
    ("allreduce", "switch:4x2", "ring"),
    ("allreduce", "fully_connected:4", "halving_doubling"),
    ("reduce_scatter", "fully_connected:8", "halving_doubling"),
    ("allreduce", "torus:4x2", "ring"),
    ("allreduce", "torus:4x4", "ring"),
    ("reduce_scatter", "torus:4x2", "ring"),
    ("allgather", "torus:2x4", "ring"),
    ("allreduce", "torus:4x2", ("ring", "direct")),
    ("allreduce", "ring:4", "bidirectional_ring"),
    ("allreduce", "torus:4x2", "bidirectional_ring"),
])
def test_ideal_link_bytes_match_the_compiler(collective, topology, algorithm):
    """The ideal bytes of the busiest link are exactly what the compiled program puts on its
    busiest directed link, counted independently from its steps (S and each of the 4 chunks
    divide evenly, so no word rounding; a switch's virtual links summed per port)."""
    from ace.sw.compiler import compile_collective, link_traffic
    count = 4096
    from ace.config import NAMED_CONFIGS
    program = compile_collective(collective, count, topology=topology, algorithm=algorithm,
                                 dtype="int32", chunks=4,
                                 config=NAMED_CONFIGS["default"].replace(num_links=7))
    tx = {key: v for key, v in link_traffic(program).items() if key[1] == "tx"}
    if topology.startswith("switch"):     # a node's virtual links share its one port
        ports = {}
        for (node, _, _), v in tx.items():
            ports[node] = ports.get(node, 0) + v
        tx = ports
    assert ideal_link_bytes(collective, algorithm, topology, 4 * count) == max(tx.values())


# -- per-collective metrics -----------------------------------------------------------------------

def test_ring_allreduce_metrics_by_hand():
    m = collective_metrics(ring_allreduce_raw(), SYSTEM)
    payload = 1_835_008
    assert (m.name, m.op, m.algorithm, m.nodes, m.bytes, m.dtype, m.mode,
            m.chunks, m.cycles) == ("grad0", "sum", "ring", 8, MiB, "fp32", "ace", 4,
                                          120_000)
    assert m.bound_cycles == 114_698
    assert m.bound_bandwidth_cycles == 114_688 and m.bound_latency_cycles == 10
    assert m.time_over_bound == pytest.approx(120_000 / 114_698)
    assert m.time_us == 120.0                                  # 120000 cycles at 1000 MHz
    # payload / (16 B/cycle x 120000 cycles), the same on all 8 links used.
    util = payload / (16 * 120_000)
    assert m.link_utilization == pytest.approx(util)
    assert m.link_utilization_per_link == {f"n{n}.l0": pytest.approx(util) for n in range(8)}
    assert m.header_overhead == pytest.approx(16 / 4096)       # one 16 B header per 4 KiB
    assert m.link_payload_bytes == 8 * payload
    assert m.link_wire_bytes == 8 * (payload + 448 * 16)
    assert m.link_bytes_match_program is True
    assert m.mem_read_bytes == 8 * MiB and m.mem_write_bytes == 8 * MiB
    assert m.mem_read_bytes_by_node == [MiB] * 8 and m.mem_write_bytes_by_node == [MiB] * 8
    assert m.mem_bytes == 16 * MiB and m.mem_bytes_per_node == 2 * MiB
    assert m.mem_over_2S == 1.0 and m.mem_over_min == 1.0
    # 2S of memory per 2 * 7/8 * S sent: 8/7.
    assert m.mem_bytes_per_link_byte == pytest.approx(8 / 7)
    assert m.mem_bandwidth_bytes_per_cycle == pytest.approx(2 * MiB / 120_000)
    assert m.mem_bandwidth_gbps == pytest.approx(2 * MiB / 120e-6 / 1e9)
    algbw = MiB / 120e-6 / 1e9                                    # S / time
    assert m.algbw_gbps == pytest.approx(algbw)
    assert m.busbw_gbps == pytest.approx(algbw * 2 * 7 / 8)
    assert m.correct is True


def test_metrics_per_link_average_and_clock():
    raw = ring_allreduce_raw()
    raw["link_tx_payload_bytes"][3][0] = 960_000                  # node 3 sent less
    raw["links_used"] = [[n, 0] for n in range(8)]
    system = dict(SYSTEM, clock_mhz=500.0)
    m = collective_metrics(raw, system)
    u, u3 = 1_835_008 / 1_920_000, 960_000 / 1_920_000
    assert m.link_utilization_per_link["n3.l0"] == pytest.approx(0.5)
    assert m.link_utilization == pytest.approx((7 * u + u3) / 8)
    assert m.link_bytes_match_program is False
    assert m.time_us == 240.0                                  # 120000 cycles at 500 MHz
    assert m.algbw_gbps == pytest.approx(MiB / 240e-6 / 1e9)
    assert m.mem_bandwidth_gbps == pytest.approx(2 * MiB / 240e-6 / 1e9)


def test_baseline_memory_ratios():
    m = collective_metrics(ring_allreduce_raw("baseline", 150_000, 4 * MiB, 3 * MiB), SYSTEM)
    assert m.mem_bytes_per_node == 7 * MiB
    assert m.mem_over_2S == 3.5                                # 7S / 2S
    assert m.mem_bytes_per_link_byte == pytest.approx(7 * MiB / 1_835_008)


def test_reduce_scatter_and_alltoall_normalisation():
    raw = ring_allreduce_raw()
    payload = 7 * MiB // 8
    raw.update(collective="reduce_scatter", latency_steps=7,
               mem_read_bytes=[MiB] * 8, mem_write_bytes=[MiB // 8] * 8,
               link_tx_payload_bytes=[[payload, 0]] * 8, link_tx_wire_bytes=[[payload, 0]] * 8,
               program_link_bytes=[[payload, 0]] * 8)
    m = collective_metrics(raw, SYSTEM)
    assert m.mem_over_2S is None
    assert m.mem_over_min == 1.0                               # S read + S/p written
    assert m.bound_cycles == 7 * MiB / 8 / 16 + 10
    assert m.busbw_gbps == pytest.approx(m.algbw_gbps * 7 / 8)
    assert m.header_overhead == 0.0


def test_msccl_busbw_collective():
    raw = ring_allreduce_raw()
    raw.update(collective="msccl", algorithm="msccl")
    m = collective_metrics(raw, SYSTEM)
    assert m.busbw_collective == "allreduce"
    assert m.busbw_gbps == pytest.approx(m.algbw_gbps * 2 * 7 / 8)
    assert m.bound_model == "program"
    assert m.bound_cycles == 1_835_008 / 16 + 10
    raw["msccl_coll"] = "all-gather"
    m = collective_metrics(raw, SYSTEM)
    assert m.busbw_collective == "allgather"
    assert m.busbw_gbps == pytest.approx(m.algbw_gbps * 7 / 8)
    assert m.mem_over_2S is None


def test_zero_cycles_gives_null_ratios():
    m = collective_metrics(ring_allreduce_raw(cycles=0), SYSTEM)
    assert m.time_over_bound == 0
    assert m.algbw_gbps is None and m.busbw_gbps is None
    assert m.mem_bandwidth_bytes_per_cycle is None
    assert m.link_utilization_per_link["n0.l0"] is None


def test_factors():
    assert busbw_factor("allreduce", 8) == 1.75
    assert busbw_factor("reduce_scatter", 8) == busbw_factor("alltoall", 8) == 0.875
    assert mem_min_bytes_per_node("allreduce", 1024, 4) == 2048
    assert mem_min_bytes_per_node("allgather", 1024, 4) == 1280
    with pytest.raises(ValueError):
        busbw_factor("msccl", 8)


# -- summary and comparison -----------------------------------------------------------------------

def test_run_summary_weights_utilization_by_cycles():
    a = collective_metrics(ring_allreduce_raw(cycles=120_000, name="a"), SYSTEM)
    b = collective_metrics(ring_allreduce_raw(cycles=240_000, name="b"), SYSTEM)
    s = run_summary([a, b])
    assert s["mode"] == "ace" and s["collectives"] == 2
    assert s["total_cycles"] == 360_000 and s["total_time_us"] == 360.0
    assert s["total_bound_cycles"] == 2 * 114_698
    assert s["time_over_bound"] == pytest.approx(360_000 / (2 * 114_698))
    # (u_a * 120000 + u_b * 240000) / 360000 with u = payload / (16 * cycles): 2 payloads / ...
    assert s["link_utilization"] == pytest.approx(2 * 1_835_008 / (16 * 360_000))
    assert s["mem_bytes"] == 32 * MiB and s["mem_bytes_per_node"] == 4 * MiB
    assert s["mem_read_bytes"] == s["mem_write_bytes"] == 16 * MiB
    assert s["mem_bytes_per_link_byte"] == pytest.approx(8 / 7)
    assert s["mem_bandwidth_bytes_per_cycle"] == pytest.approx(4 * MiB / 360_000)
    assert s["mem_bandwidth_gbps"] == pytest.approx(4 * MiB / 360e-6 / 1e9)
    assert s["algbw_gbps"] == pytest.approx(2 * MiB / 360e-6 / 1e9)
    assert s["all_correct"] is True
    assert run_summary([a, replace(b, correct=False)])["all_correct"] is False


def test_run_summary_rejects_mixed_modes_and_handles_empty():
    a = collective_metrics(ring_allreduce_raw(), SYSTEM)
    b = collective_metrics(ring_allreduce_raw("baseline"), SYSTEM)
    with pytest.raises(ValueError, match="modes"):
        run_summary([a, b])
    empty = run_summary([])
    assert empty["collectives"] == 0 and empty["link_utilization"] is None
    assert empty["all_correct"] is True


def test_compare_by_hand():
    ace = collective_metrics(ring_allreduce_raw(), SYSTEM)
    base = collective_metrics(ring_allreduce_raw("baseline", 150_000, 4 * MiB, 3 * MiB), SYSTEM)
    c = compare(run_summary([ace]), run_summary([base]))
    assert c["memory_traffic_reduction"] == 3.5                   # 7S / 2S per node
    assert c["mem_bytes_per_link_byte_reduction"] == pytest.approx(3.5)
    assert c["speedup"] == 1.25                                   # 150000 / 120000
    assert c["link_utilization_gain"] == pytest.approx(1.25)      # same bytes in fewer cycles
    per = compare_collectives([ace], [base])
    assert per == [{"name": "grad0", "memory_traffic_reduction": 3.5,
                    "link_utilization_gain": pytest.approx(1.25), "speedup": 1.25}]
    assert compare_collectives([ace], []) == []


def test_finite_numbers():
    m = collective_metrics(ring_allreduce_raw(), SYSTEM)
    for key, value in m.to_json().items():
        if isinstance(value, float):
            assert math.isfinite(value), key


# -- the record type -----------------------------------------------------------------------------

def _documented_record_fields() -> list[str]:
    """The field names of the RECORD table in docs/results_format.md, in table order."""
    text = (Path(__file__).resolve().parents[1] / "docs" / "results_format.md").read_text()
    table = text.split("### RECORD")[1].split("###")[0]
    rows = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    return [name for row in rows for name in re.findall(r"`([a-zA-Z_0-9]+)`", row)]


def test_record_fields_are_the_documented_schema():
    documented = _documented_record_fields()
    assert len(documented) == len(set(documented)) > 30
    assert sorted(documented) == sorted(f for f in CollectiveRecord.__dataclass_fields__)


def test_record_json_round_trip_keeps_key_order_and_values():
    m = collective_metrics(ring_allreduce_raw(), SYSTEM)
    doc = json.loads(json.dumps(m.to_json()))
    assert list(doc) == list(CollectiveRecord.__dataclass_fields__)
    assert doc["cycles"] == 120_000
    assert doc["link_utilization_per_link"] == m.link_utilization_per_link
    assert CollectiveRecord.from_json(doc) == m


def test_record_from_json_names_missing_and_unknown_fields():
    doc = collective_metrics(ring_allreduce_raw(), SYSTEM).to_json()
    del doc["cycles"]
    doc["cycels"] = 1
    with pytest.raises(ValueError, match=r"run ace collective 0: .*missing cycles; unknown cycels"):
        CollectiveRecord.from_json(doc, "run ace collective 0")

