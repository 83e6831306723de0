"""Shared parts of the experiments: running RTL points, the small fitted models, plots and
output files.

Every RTL measurement goes through :func:`sim_harness.sweep.run_points` (each system is built
once, points run on a process pool). An experiment *plans* the points it needs
(:class:`Plan`), the runner measures the union of several plans at once (so ``ace experiment
paper`` runs each point once even when two experiments need it), and each experiment then
*analyses* the measured records. The fits here are plain least squares on a few numbers; they
are pure functions so the tests can check them against hand-computed values.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from ace.vocab import Mode

from ..metrics import CollectiveRecord
from ..report import records_of
from ..sweep import SweepPoint, run_points
from ..systems import load_system

__all__ = ["ExperimentError", "Plan", "PointKey", "fits", "measure", "save_points", "settings_for",
           "load_points", "point_key", "mem_rate", "parse_ratios", "link_rate",
           "busiest_link_utilization", "fit_linear", "fit_latency_bandwidth", "crossing",
           "fit_roofline", "roofline", "md_table", "figure", "save_figure", "write_json",
           "mark_accelerators", "check_ratios", "mean", "ALLTOALL_TRACE", "BASELINES", "MODES", "RATIOS", "ACCELERATORS",
           "FULL_MEM_BYTES", "SEED"]

#: Seed of every RTL point's input data (the results do not depend on the data, but runs are
#: reproducible bit for bit).
SEED = 1
#: The baselines ACE is compared with, both measured at every point: ``staged`` (NCCL over a
#: network transport: every received and every sent buffer goes through memory) and ``p2p``
#: (NCCL between GPUs over NVLink: a reduction's output goes straight to the link);
#: ``docs/engine.md``, "Placement".
BASELINES = (Mode.STAGED, Mode.P2P)
#: The modes every RTL point runs.
MODES = (Mode.ACE, *BASELINES)
#: The default memory/network balances (``--mem-ratio``): memory bytes per cycle per link byte
#: per cycle per direction (:attr:`~sim_harness.system.SystemSpec.mem_ratio`).
RATIOS = (2, 4, 6, 8)
#: Node memory of the full runs' systems (sparse, so it costs no host memory): large enough
#: for every size of the training calibration. Quick runs keep the named systems' 8 MiB, so
#: they reuse the test suite's builds (node memory size is part of a build).
FULL_MEM_BYTES = 1 << 30
#: A one-collective all-to-all trace; its size is set per point (``SweepPoint.bytes``).
ALLTOALL_TRACE = str(Path(__file__).with_name("alltoall.yaml"))

#: Real accelerators' balance: HBM bandwidth over the NVLink bandwidth of one direction (all
#: links together), from the vendors' data sheets. A collective that drives every link of the
#: node at once sees this ratio; on our systems a ring (or a torus dimension) drives one link
#: per direction, so ``mem_ratio`` is the same quantity.
ACCELERATORS = (
    {"name": "V100", "mem_gbps": 900.0, "link_gbps_per_direction": 150.0,
     "source": "NVIDIA Tesla V100 data sheet (SXM2: 900 GB/s HBM2, NVLink 300 GB/s = 6 links "
               "x 25 GB/s per direction x 2)"},
    {"name": "A100", "mem_gbps": 2039.0, "link_gbps_per_direction": 300.0,
     "source": "NVIDIA A100 data sheet (SXM 80 GB: 2,039 GB/s HBM2e, NVLink 600 GB/s = 12 "
               "links x 25 GB/s per direction x 2)"},
    {"name": "H100", "mem_gbps": 3350.0, "link_gbps_per_direction": 450.0,
     "source": "NVIDIA H100 data sheet (SXM: 3.35 TB/s HBM3, NVLink 900 GB/s = 18 links x "
               "25 GB/s per direction x 2)"},
)
for _acc in ACCELERATORS:
    _acc["ratio"] = round(_acc["mem_gbps"] / _acc["link_gbps_per_direction"], 2)


class ExperimentError(ValueError):
    """A bad experiment name, option or output folder: reported in one line (exit 2)."""


def parse_ratios(text) -> tuple[float, ...]:
    """``--mem-ratio``: a comma-separated list of positive numbers (or a sequence of them),
    returned sorted without repeats; the systems check each against their memory port."""
    items = text.split(",") if isinstance(text, str) else list(text)
    ratios = []
    for item in items:
        try:
            value = float(item)
        except (TypeError, ValueError):
            value = None
        if value is None or not value > 0 or value != value:
            raise ExperimentError(f"--mem-ratio: {item!r} is not a positive number; allowed: "
                                  "a comma-separated list such as 2,4,6,8")
        ratios.append(int(value) if value == int(value) else value)
    if not ratios:
        raise ExperimentError("--mem-ratio: empty; allowed: a comma-separated list such as "
                              "2,4,6,8")
    return tuple(sorted(set(ratios)))


#: ``(system, collective, bytes, background, mem_ratio)``: what identifies one RTL point.
PointKey = tuple


def point_key(system: str, collective: str, nbytes: int, background: float,
              ratio: float) -> PointKey:
    return (system, collective, int(nbytes), round(float(background), 6),
            round(float(ratio), 6))


@dataclass
class Plan:
    """The RTL points an experiment needs: keys of all-mode runs of one collective."""
    keys: list = field(default_factory=list)

    def add(self, system: str, collective: str, nbytes: int, background: float,
            ratio: float) -> PointKey:
        key = point_key(system, collective, nbytes, background, ratio)
        if key not in self.keys:
            self.keys.append(key)
        return key

    def merge(self, other: "Plan") -> "Plan":
        for key in other.keys:
            if key not in self.keys:
                self.keys.append(key)
        return self


def _system_keys(ratio: float, mem_bytes: int | None) -> tuple:
    keys = {"mem_ratio": ratio}
    if mem_bytes is not None:
        keys["mem_bytes"] = mem_bytes
    return tuple(sorted(keys.items()))


def _sweep_point(key: PointKey, mem_bytes: int | None) -> SweepPoint:
    system, collective, nbytes, background, ratio = key
    trace = None if collective == "allreduce" else ALLTOALL_TRACE
    if collective not in ("allreduce", "alltoall"):
        raise ExperimentError(f"collective: {collective!r}; allowed: allreduce, alltoall")
    return replace(SweepPoint(system=system, trace=trace), bytes=nbytes, background=background,
                   seed=SEED, modes=MODES, system_keys=_system_keys(ratio, mem_bytes),
                   label=(("experiment", "ace"),))


def check_ratios(systems, ratios) -> None:
    """Every system takes every ratio (its memory port bounds it): else
    :class:`ExperimentError` naming the allowed range."""
    from ace.errors import ConfigError

    for system in systems:
        for ratio in ratios:
            try:
                load_system(system, overrides={"mem_ratio": ratio})
            except ConfigError as error:
                raise ExperimentError(f"--mem-ratio: {error}") from None


@functools.lru_cache(maxsize=None)
def fits(system: str, collective: str, nbytes: int, mem_bytes: int | None = None) -> bool:
    """Whether the collective passes the replay's pre-flight on the system (with ``mem_bytes``
    of node memory; None: the system's) in every mode (:func:`~sim_harness.preflight.prepare`:
    instruction memory, SRAM, the node's memory); the plans leave out sizes that do not.
    Cached: planning and calibration ask again, and a large size takes seconds to compile."""
    from ace.errors import ConfigError
    from ace.sw.program import ProgramError

    from ..preflight import ReplayError, prepare
    from ..trace import TraceError
    from ..traces import DEFAULT_TRACE, load_trace

    trace = load_trace(ALLTOALL_TRACE if collective == "alltoall" else DEFAULT_TRACE)
    spec = replace(trace.collectives[0], bytes=int(nbytes))
    overrides = None if mem_bytes is None else {"mem_bytes": mem_bytes}
    try:
        for mode in MODES:
            prepare(spec, load_system(system, overrides=overrides), mode)
    except (ProgramError, ConfigError, ReplayError, TraceError):
        return False
    return True


def measure(plan: Plan, *, mem_bytes: int | None = None, workers: int | None = None,
            progress: bool = True, pgo: bool = False) -> dict:
    """Run every point of ``plan`` on the RTL (every mode of :data:`MODES`, node memory
    ``mem_bytes``, None: the system's) and return ``{key: {"ace": record, "staged": record,
    "p2p": record, "system": system record}}`` (records:
    :class:`~sim_harness.metrics.CollectiveRecord`, as in ``results.json``). A result
    that differs from the golden model raises :class:`RuntimeError`: no figure is made from a
    wrong run."""
    keys = list(plan.keys)
    results = run_points([_sweep_point(k, mem_bytes) for k in keys], workers=workers,
                         progress=progress, pgo=pgo)
    out = {}
    for key, result in zip(keys, results):
        doc = result["results"]
        entry = {"system": doc["system"]}
        for run in doc["runs"]:
            (record,) = records_of(run)
            if not record.correct:
                raise RuntimeError(f"{key}: {run['mode']} result differs from the golden model")
            entry[run["mode"]] = record
        out[key] = entry
    return out


def save_points(path: Path, measured: dict) -> Path:
    """Write measured points (``{key: {"system", "ace", "staged"}}``) as JSON."""
    return write_json(Path(path), {"points": [
        {"key": list(k), **{name: value.to_json() if isinstance(value, CollectiveRecord)
                            else value for name, value in v.items()}}
        for k, v in measured.items()]})


def load_points(path: Path, log=None) -> dict:
    """Points of an earlier run (:func:`save_points`) whose engine configuration and topology
    are still those of the named system (others are left out, so they are measured again)."""
    try:
        doc = json.loads(Path(path).read_text())
        entries = [e for e in doc["points"] if len(e["key"]) == 5
                   and all(m in e for m in MODES)]       # older runs: no ratio, no p2p
        for i, entry in enumerate(entries):
            for mode in MODES:
                entry[mode] = CollectiveRecord.from_json(entry[mode], f"point {i} {mode}")
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ExperimentError(f"--reuse: {path}: not a readable rtl_points.json ({error})") \
            from None
    out, stale = {}, len(doc["points"]) - len(entries)
    for entry in entries:
        key = point_key(*entry["key"])
        spec = load_system(key[0])
        if (entry["system"]["config"] != spec.config.to_dict()
                or entry["system"]["topology"] != str(spec.topology)):
            stale += 1
            continue
        out[key] = {k: v for k, v in entry.items() if k != "key"}
    if log and stale:
        log(f"--reuse: {stale} points of {path} were measured on another engine configuration "
            "and are measured again")
    return out


def link_rate(system: str) -> float:
    """Bandwidth of one link of a named system in one direction, bytes per cycle."""
    return float(load_system(system).link_rate)


def mem_rate(system: str, ratio: float) -> float:
    """Memory bandwidth of one node of a named system at balance ``ratio``, bytes per cycle
    (reads and writes share it)."""
    return float(load_system(system, overrides={"mem_ratio": ratio}).mem_rate)


def busiest_link_utilization(record: CollectiveRecord) -> float:
    """Utilization of the busiest link the collective used. On a ring every link carries the
    same bytes, so this is the mean link utilization; on a hierarchical torus the links of the
    last dimension carry less, and this is the one that can approach 100%."""
    return max(v for v in record.link_utilization_per_link.values() if v is not None)


def mean(values) -> float:
    """The arithmetic mean of an iterable of numbers."""
    values = list(values)
    return sum(values) / len(values)


# -- fits ----------------------------------------------------------------------------------------

def fit_linear(xs, ys, weights=None) -> tuple[float, float]:
    """Weighted least squares ``y = a + b x``; returns ``(a, b)``."""
    xs, ys = [float(x) for x in xs], [float(y) for y in ys]
    ws = [1.0] * len(xs) if weights is None else [float(w) for w in weights]
    if len(xs) < 2 or len(set(xs)) < 2:
        raise ValueError("fit_linear: needs at least two distinct x values")
    sw = sum(ws)
    mx = sum(w * x for w, x in zip(ws, xs)) / sw
    my = sum(w * y for w, y in zip(ws, ys)) / sw
    sxx = sum(w * (x - mx) ** 2 for w, x in zip(ws, xs))
    sxy = sum(w * (x - mx) * (y - my) for w, x, y in zip(ws, xs, ys))
    b = sxy / sxx
    return my - b * mx, b


def fit_latency_bandwidth(sizes, cycles) -> dict:
    """Fit ``cycles = a + bytes / r`` to measured points, minimising the squared *relative*
    error (weights ``1 / cycles**2``, so a 16 KiB point counts as much as a 1 MiB one).
    Returns ``{"a": cycles, "r": bytes per cycle, "max_rel_error", "points"}``."""
    weights = [1.0 / float(c) ** 2 for c in cycles]
    a, slope = fit_linear(sizes, cycles, weights)
    if slope <= 0:
        raise ValueError("fit_latency_bandwidth: time does not grow with size")
    model = [a + s * slope for s in sizes]
    errors = [abs(m - c) / c for m, c in zip(model, cycles)]
    return {"a": a, "r": 1.0 / slope, "max_rel_error": max(errors),
            "points": [[int(s), float(c)] for s, c in zip(sizes, cycles)]}


def crossing(xs, ys, target: float) -> float | None:
    """The smallest ``x`` at which the piecewise-linear curve through ``(xs, ys)`` (sorted by
    ``x``) reaches ``target``: linear interpolation inside the first segment that crosses it,
    the first ``x`` itself if ``ys`` starts at or above it, ``None`` if it is never reached."""
    pts = sorted(zip((float(x) for x in xs), (float(y) for y in ys)))
    if not pts:
        return None
    if pts[0][1] >= target:
        return pts[0][0]
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if y1 >= target > y0:
            return x0 + (target - y0) * (x1 - x0) / (y1 - y0)
    return None


def roofline(m: float, u_sat: float | None, a: float) -> float:
    """The fitted utilization model at available memory bandwidth ``m``:
    ``min(u_sat, m / a)`` (``u_sat`` None: no plateau was observed)."""
    u = m / a
    return u if u_sat is None else min(u_sat, u)


def fit_roofline(ms, us) -> dict:
    """Fit ``u = min(u_sat, m / a)`` to points ``(m, u)``: the link utilization ``u`` reached
    with ``m`` bytes per cycle of memory bandwidth, where the link is memory-bound below the
    knee (``a`` bytes per cycle of memory per unit of utilization) and held at ``u_sat`` by
    something else above it.

    Every split of the points sorted by ``m`` into a memory-bound lower part (at least one
    point; ``1/a`` by least squares through the origin) and a plateau (``u_sat`` = the mean of
    the rest; none when the split puts every point below the knee) is tried, and the split with
    the smallest squared error whose pieces are consistent (memory-bound points below the
    plateau) wins; on a tie, the one with fewer plateau points (no plateau unless the points
    show one). Returns ``{"a", "u_sat", "knee" (= a * u_sat), "max_abs_error",
    "rms_error"}``."""
    pts = sorted(zip((float(m) for m in ms), (float(u) for u in us)))
    if len(pts) < 2:
        raise ValueError("fit_roofline: needs at least two points")
    best = None
    for k in range(len(pts), 0, -1):
        low, high = pts[:k], pts[k:]
        inv_a = sum(m * u for m, u in low) / sum(m * m for m, _ in low)
        if inv_a <= 0:
            continue
        a = 1.0 / inv_a
        u_sat = sum(u for _, u in high) / len(high) if high else None
        if u_sat is not None and any(m / a > u_sat * (1 + 1e-9) for m, _ in low):
            continue                           # a "memory-bound" point above the plateau
        sse = sum((roofline(m, u_sat, a) - u) ** 2 for m, u in pts)
        if best is None or sse < best[0] - 1e-12:
            best = (sse, a, u_sat)
    if best is None:
        raise ValueError("fit_roofline: no consistent fit")
    sse, a, u_sat = best
    errors = [abs(roofline(m, u_sat, a) - u) for m, u in pts]
    return {"a": a, "u_sat": u_sat, "knee": None if u_sat is None else a * u_sat,
            "max_abs_error": max(errors), "rms_error": math.sqrt(sse / len(pts))}


# -- output --------------------------------------------------------------------------------------

def md_table(headers, rows) -> str:
    """A Markdown table (cells converted with ``str``)."""
    lines = ["| " + " | ".join(map(str, headers)) + " |",
             "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def figure(rows: int = 1, cols: int = 1, width: float = 7.0, height: float = 3.4):
    """A matplotlib figure on the Agg canvas (no pyplot, no global backend) and its axes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height * rows), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, squeeze=False)
    return fig, axes


def save_figure(fig, path: Path) -> Path:
    fig.savefig(path, dpi=80)
    return path


def write_json(path: Path, doc) -> Path:
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, allow_nan=False)
        f.write("\n")
    return path


def settings_for(table: dict, quick: bool, systems=None, ratios=None) -> dict:
    """The ``"quick"`` or ``"full"`` entry of an experiment's settings ``table``, with its
    ``systems`` replaced by ``systems`` when given (``ace experiment --systems``), the
    balances ``ratios`` (``--mem-ratio``, default :data:`RATIOS`), ``quick`` and the node
    memory ``mem_bytes`` of the run (None in quick runs: the systems' own)."""
    s = dict(table["quick" if quick else "full"])
    if systems:
        s["systems"] = list(systems)
    s["ratios"] = list(ratios or RATIOS)
    s["quick"] = quick
    s["mem_bytes"] = None if quick else FULL_MEM_BYTES
    return s


def mark_accelerators(ax, xmax: float | None = None) -> None:
    """Vertical lines at the real accelerators' balances (:data:`ACCELERATORS`) on an axis
    whose x is ``mem_ratio``."""
    for acc in ACCELERATORS:
        if xmax is not None and acc["ratio"] > xmax:
            continue
        ax.axvline(acc["ratio"], color="0.55", lw=0.8, ls=":")
        ax.annotate(acc["name"], (acc["ratio"], 1.0), xycoords=("data", "axes fraction"),
                    xytext=(2, -10), textcoords="offset points", fontsize=7, color="0.35")
