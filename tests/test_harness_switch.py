"""The trace-replay harness on a 4-node switch (``switch4``): each engine's three virtual
links share one switch port each way. A Verilator build of its own (cached in
``build/harness/``), so it is a file of its own that can run beside ``test_harness.py``."""

from __future__ import annotations

from sim_harness.replay import replay
from sim_harness.systems import load_system
from testbench.replay_checks import check_replay, collective_spec, trace_of


def test_switch_4_collectives_share_one_port():
    """A 4-node switch (``switch4``, 3 virtual links per engine sharing one port each way):
    every collective with the switch's algorithms, both modes, bit-exact with exact counters;
    and the direct all-to-all, which sends to all three peers at once, takes at least the
    time its bytes need through one port (a fully connected system would move them three
    links wide)."""
    system = load_system("switch4")
    specs = [collective_spec("ar_hd", "allreduce", 4004, "fp32", "sum", "halving_doubling"),
             collective_spec("ar_direct", "allreduce", 4004, "int32", "max", "direct"),
             collective_spec("ar_ring", "allreduce", 4000, "bf16", "sum", "ring"),
             collective_spec("rs_direct", "reduce_scatter", 4004, "fp32", "sum", "direct"),
             collective_spec("ag_ring", "allgather", 4004, "int32", "sum", "ring"),
             collective_spec("a2a_direct", "alltoall", 48 << 10, "fp32", "sum", "direct")]
    results = replay(trace_of(*specs), system, progress=False, log=None)
    for run in results["runs"]:
        for raw in run["raws"]:
            check_replay(raw, system)
        a2a = run["raws"][-1]
        sent = max(sum(links) for links in a2a["link_tx_payload_bytes"])
        assert sent == 3 * (48 << 10) // 4
        assert a2a["cycles"] >= sent // system.config.link_bytes, a2a["cycles"]
