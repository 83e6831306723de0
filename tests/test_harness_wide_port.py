"""The harness with a memory port wider than a link (``mem_bytes`` at least 2 x ``link_bytes``).

A 4-node ring of the harness engine (``small`` at 1 GHz, four channels, 16-byte links) with its
own 64-byte AXI4 memory port (4 x the link; a 32-byte copy if ``harness``'s port were narrower). A 256 KiB
fp32 all-reduce per node runs bit-exact in both modes, with the engines' memory counters equal
to :func:`ace.sw.program.memory_traffic` of the program.
With the memory bandwidth to spare (one read and one write beat of the port per cycle)
the memory-staged baseline's link utilization passes 50%, which a port as wide as a link caps
(the baseline reads 2 bytes of memory per link byte sent, and one link-wide port reads one link
beat per cycle); with the memory model limited to 32 bytes per cycle, the memory bandwidth is
what bounds it.

One Verilator build (engine library and 4-node fabric, cached in ``build/harness/``) serves the
tests; the memory bandwidth is a run-time setting of that build. About 5 s with the build cached;
the cold build took about 7 minutes on the shared 2-core machine.
"""

from __future__ import annotations

import dataclasses

import pytest

from ace.sw.program import Topology, memory_traffic
from sim_harness.metrics import collective_metrics
from sim_harness.replay import compile_spec, replay
from sim_harness.system import SystemSpec
from sim_harness.systems import HARNESS_CONFIG
from testbench.replay_checks import check_replay, collective_spec, trace_of

#: The harness engine with a port of at least two link widths: ``harness`` itself once its port
#: is that wide (then the test shares the other harness tests' engine build), else a copy.
CONFIG = HARNESS_CONFIG if HARNESS_CONFIG.mem_beat_words >= 2 else HARNESS_CONFIG.replace(
    name="harness_mem2x", mem_bytes=2 * HARNESS_CONFIG.link_bytes)
SYSTEM = SystemSpec(CONFIG, Topology.parse("ring:4"), link_latency=32, mem_latency=32,
                    mem_bytes=8 << 20, mem_bytes_per_cycle=2.0 * CONFIG.mem_bytes, host="driver")
SPEC = collective_spec("ar256k", "allreduce", 256 << 10, "fp32")


def _run(system, modes):
    results = replay(trace_of(SPEC), system, modes=modes, progress=False, log=None)
    out = {}
    for run in results["runs"]:
        raw = run["raws"][0]
        check_replay(raw, system)
        out[run["mode"]] = (raw, collective_metrics(raw, results["system"]))
    return out


@pytest.fixture(scope="module")
def ample():
    return _run(SYSTEM, ("ace", "staged"))


def test_bit_exact_and_memory_bytes_as_the_program_says(ample):
    """Both modes bit-exact (``check_replay``), and each node's memory reads and writes are
    those of :func:`memory_traffic` of the mode's program; ACE mode moves 2S per node."""
    S = SPEC.bytes
    for mode, (raw, _) in ample.items():
        expected = memory_traffic(compile_spec(SPEC, SYSTEM, mode))["per_node"]
        measured = list(zip(raw["mem_read_bytes"], raw["mem_write_bytes"]))
        assert measured == expected, f"{mode}: measured {measured}, program {expected}"
    ace = ample["ace"][0]
    assert [r + w for r, w in zip(ace["mem_read_bytes"], ace["mem_write_bytes"])] == [2 * S] * 4


def test_baseline_passes_half_the_link_with_memory_to_spare(ample):
    """The staged baseline moves more than 2 bytes of memory per link byte, yet with a port
    at least twice as wide as a link and memory to spare its link utilization is above 50%."""
    _, base = ample["staged"]
    _, ace = ample["ace"]
    print(f"\nring4, {CONFIG.mem_bytes}-byte port, memory {SYSTEM.mem_rate} B/cycle: baseline "
          f"link utilization {base.link_utilization:.3f} "
          f"({base.mem_bytes_per_link_byte:.2f} memory bytes per link byte, {base.cycles} "
          f"cycles); ACE {ace.link_utilization:.3f} "
          f"({ace.cycles} cycles)")
    assert base.mem_bytes_per_link_byte > 2
    assert base.link_utilization > 0.5
    assert ace.link_utilization > base.link_utilization


def test_memory_bandwidth_bounds_the_baseline():
    """The memory model limited to 32 bytes per cycle (reads and writes together): the
    baseline's link utilization is at most, and close to, what that bandwidth allows
    (rate / memory bytes per link byte / link bytes per cycle)."""
    limited = dataclasses.replace(SYSTEM, mem_bytes_per_cycle=32.0)
    _, base = _run(limited, ("staged",))["staged"]
    bound = 32.0 / base.mem_bytes_per_link_byte / CONFIG.link_bytes
    print(f"\nring4, {CONFIG.mem_bytes}-byte port, memory 32 B/cycle: baseline link "
          f"utilization {base.link_utilization:.3f}, memory bound {bound:.3f}")
    assert base.link_utilization <= bound * 1.01
    assert base.link_utilization >= 0.85 * bound
