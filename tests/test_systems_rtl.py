"""The named systems on the RTL: the default replay (a 1 MiB fp32 sum all-reduce per node,
``sim_harness/traces/default_allreduce.yaml``) run with each system's algorithm
(:meth:`~sim_harness.system.SystemSpec.run_algorithm`: the bidirectional ring on
``ring8bi``), both modes, every node bit-exact against the golden model, the engines' memory
and link counters equal to the golden model's and the program's (``check_replay``), and ACE
mode moving exactly 2S per node.

The bidirectional ring on the ``ring8`` build (shared with ``tests/test_harness.py``: no build
of its own) is in the default suite; the systems with builds of their own (``ring8bi``'s
7-channel engine, the 16-node 2D torus, the 27- and 64-node 3D tori) are behind the ``large``
marker. Figures of these runs: docs/harness.md, "Systems"."""

from __future__ import annotations

import dataclasses

import pytest

from sim_harness.metrics import collective_metrics
from sim_harness.replay import replay
from sim_harness.systems import load_system
from sim_harness.traces import load_trace
from testbench.replay_checks import check_replay

DEFAULT_TRACE = "sim_harness/traces/default_allreduce.yaml"


def _replay_default(system, algorithm=None):
    """Replay the default trace on ``system`` with its algorithm (or ``algorithm``); check
    every run; return the records by mode."""
    trace = load_trace(DEFAULT_TRACE)
    trace.collectives = [dataclasses.replace(
        spec, algorithm=algorithm or system.run_algorithm(spec.algorithm))
        for spec in trace.collectives]
    results = replay(trace, system, progress=False, log=None)
    records = {}
    for run in results["runs"]:
        (raw,) = run["raws"]
        check_replay(raw, system)
        assert set(raw["algorithm"].split("+")) == {algorithm or system.run_algorithm("ring")}
        records[raw["mode"]] = collective_metrics(raw, results["system"])
    ace = records["ace"]
    assert ace.mem_read_bytes_by_node == [ace.bytes] * ace.nodes
    assert ace.mem_write_bytes_by_node == [ace.bytes] * ace.nodes
    return records


def _links_used(record) -> set[int]:
    return {int(key.split(".l")[1]) for key in record.link_utilization_per_link}


def test_bidirectional_ring_on_the_ring8_build():
    """The bidirectional ring on ``ring8``'s engine: both links of every node carry half the
    data each way (16 directed links, 8 for the one-way ring)."""
    records = _replay_default(load_system("ring8"), "bidirectional_ring")
    for record in records.values():
        assert _links_used(record) == {0, 1} and len(record.link_utilization_per_link) == 16
        assert record.link_payload_bytes == 8 * 2 * 7 * (1 << 20) // 8


@pytest.mark.large
def test_ring8bi():
    records = _replay_default(load_system("ring8bi"))
    assert all(_links_used(r) == {0, 1} for r in records.values())


@pytest.mark.large
@pytest.mark.parametrize("name, links", [("torus4x4", {0, 2}), ("torus3x3x3", {0, 2, 4})])
def test_torus(name, links):
    """The hierarchical ring all-reduce sends on the +1 link of every dimension."""
    records = _replay_default(load_system(name))
    assert all(_links_used(r) == links for r in records.values())


@pytest.mark.large
def test_torus4x4x4():
    """The 64-node 3D torus, its fabric made in parts (``sim_harness.fabric``): the whole
    fabric top would have 64 x 2,991 = 191,424 port bits, and Amaranth converts at most 2**16.
    Its ACE mode hung until forwarding steps stopped holding links (``tests/test_link_hold.py``,
    docs/harness.md)."""
    system = load_system("torus4x4x4")
    records = _replay_default(system)
    assert all(_links_used(r) == {0, 2, 4} for r in records.values())
