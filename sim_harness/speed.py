"""How long a replay will take: expected simulated cycles of each prepared collective, and the
simulator speed measured on this machine, for the progress bars' ETA and ``ace replay
--estimate``.

Cycles: the collective's program bound, ``W / B + steps * L`` (``W`` the bytes of its busiest
link, ``B`` the link bandwidth, ``steps`` its longest chain of communicating steps over its number
of chunks, which overlap, ``L`` the link latency plus the memory latency), times the time over bound the default replay measures
in that mode (:data:`TIME_OVER_BOUND`), plus the program load through the CSRs
(:data:`CSR_CYCLES_PER_WORD` per instruction word of the largest node).

Speed: every :class:`~sim_harness.simulator.SystemSimulator` records, when it closes, the
simulated node-cycles per CPU second of its driver in a JSON file
(:func:`sim_harness.simulator.speed_file`, ``build/harness/speed.json``; per system name, the
latest run of at least :data:`MIN_RECORD_CYCLES` cycles). Before any such run the
estimate uses :data:`DEFAULT_NODE_CYCLES_PER_CPU_S`, measured on ``ring8``
(docs/benchmarks.md). Both are CPU time: on cores shared with other jobs the wall time is
longer.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ace.sw.program import link_traffic

__all__ = ["TIME_OVER_BOUND", "CSR_CYCLES_PER_WORD", "DEFAULT_NODE_CYCLES_PER_CPU_S",
           "expected_cycles", "recorded_speed", "record_speed", "estimate"]

#: Cycles over the program bound of the default replay (1 MiB fp32 all-reduce on ring8):
#: 1.08 in ACE mode, 2.25 in the staged baseline (docs/benchmarks.md), rounded up; the p2p
#: baseline moves less memory than the staged one, so the staged figure bounds it.
TIME_OVER_BOUND = {"ace": 1.1, "staged": 2.3, "p2p": 2.3}
#: CSR-phase cycles per 32-bit instruction word of the largest node (one AXI4-Lite write
#: each, plus the buffer table, start, status and counter reads), measured on the default
#: replay.
CSR_CYCLES_PER_WORD = 3
#: Node-cycles per CPU second of ``ring8`` when nothing has been measured here yet.
DEFAULT_NODE_CYCLES_PER_CPU_S = 165_000
#: Shorter runs (a few program loads) say little about the speed and are not recorded.
MIN_RECORD_CYCLES = 20_000


def expected_cycles(prepared, system, *, load: bool = True) -> int:
    """Expected cycles of one prepared collective (see the module docstring): the run, and
    with ``load`` the program load through the CSRs before it."""
    program = prepared.program
    traffic = link_traffic(program)
    busiest = max(traffic.values(), default=0)
    steps = max((sum(1 for s in ch.steps if {"send", "recv"} & set(s.uses))
                 for node in program.nodes for ch in node.channels), default=0)
    steps /= max(1, getattr(program, "chunks", 1) or 1)    # chunks overlap their latency
    bound = busiest / system.link_rate + steps * (system.link_latency + system.mem_latency)
    words = max(sum(len(ch) for ch in node.words) for node in prepared.assembled.nodes)
    return int(TIME_OVER_BOUND[prepared.mode] * bound + load * CSR_CYCLES_PER_WORD * words)


def recorded_speed(path: Path, system_name: str) -> float | None:
    """Node-cycles per CPU second last recorded in ``path`` for the system named
    ``system_name`` (:attr:`~sim_harness.system.SystemSpec.name`), or None."""
    try:
        return float(json.loads(Path(path).read_text())[system_name])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def record_speed(path: Path, system_name: str, cycles: int, nodes: int,
                 cpu_seconds: float) -> None:
    """Remember a run's speed in ``path`` (ignored when shorter than
    :data:`MIN_RECORD_CYCLES`)."""
    if cycles < MIN_RECORD_CYCLES or cpu_seconds <= 0:
        return
    path = Path(path)
    try:
        speeds = json.loads(path.read_text())
    except (OSError, ValueError):
        speeds = {}
    speeds[system_name] = round(cycles * nodes / cpu_seconds)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(speeds, indent=1, sort_keys=True))
        tmp.replace(path)
    except OSError:         # a read-only build folder: no record, no failure
        pass


def estimate(plan, path: Path, *, pgo: bool = False) -> dict:
    """``{"modes": {mode: {"cycles", "seconds"}}, "node_cycles_per_cpu_s", "measured",
    "seconds"}`` for a pre-flight ``plan``, at the speed recorded in ``path``: the modes run in
    parallel, so the replay takes about as long as its longest mode (given a core each).
    ``pgo``: at the profile-guided build's speed if one was recorded (else the plain one's)."""
    name = plan.system.name
    speed = (pgo and recorded_speed(path, name + "-pgo")) or recorded_speed(path, name)
    rate = speed or DEFAULT_NODE_CYCLES_PER_CPU_S
    nodes = plan.system.topology.num_nodes
    modes = {}
    for mode, prepared in plan.collectives.items():
        cycles = sum(expected_cycles(p, plan.system) for p in prepared)
        modes[mode] = {"cycles": cycles, "seconds": cycles * nodes / rate}
    return {"modes": modes, "node_cycles_per_cpu_s": rate, "measured": speed is not None,
            "seconds": max((m["seconds"] for m in modes.values()), default=0.0)}
