"""Sweeps: a grid of replays, run in parallel on a local process pool or a Dask cluster.

A sweep spec (YAML or JSON) is a base point plus ``grid:`` axes whose cartesian product gives
the points (the last axis varies fastest)::

    system: ring8
    trace: null                      # the bundled default (1 MiB fp32 all-reduce)
    label: {study: background}
    grid:
      background: [0, 0.25, 0.5]
      bytes: [65536, 262144]

:func:`expand` turns a spec into :class:`SweepPoint` objects; :func:`run_points` runs the
pre-flight of every distinct point once (:func:`~sim_harness.preflight.preflight`: each
collective compiled and assembled once per mode and checked to fit), builds every distinct
system once (:func:`~sim_harness.replay.build_system`), then runs :func:`run_point` for each
point with its pre-flight, in a :class:`~concurrent.futures.ProcessPoolExecutor` or
with ``dask.distributed.Client(scheduler).map``. Each point is one
:func:`~sim_harness.replay.replay` (modes one after another) and gives the ``results.json``
document of :func:`~sim_harness.report.build_results`, normalised to plain JSON types, so both
paths return identical results. See ``docs/sweep.md``.
"""

from __future__ import annotations

import csv
import itertools
import json
import multiprocessing
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from ace.errors import ConfigError
from ace.sw.program import ProgramError
from ace.vocab import Mode, parse_modes

from .preflight import Plan, ReplayError, preflight
from .replay import build_system, replay
from .report import CSV_COLUMNS, build_results, records_of
from .simulator import SimulatorError, build_key
from .systems import DEFAULT_SYSTEM, NAMED_SYSTEMS, load_system
from .trace import TraceError
from .traces import DEFAULT_TRACE, detect_format, load_trace

__all__ = ["SweepError", "SweepPoint", "AXES", "expand", "load_spec", "run_point", "run_points",
           "write_sweep", "format_sweep_table", "SWEEP_CSV_COLUMNS"]

#: Point fields a grid may sweep (``label`` is fixed per spec).
AXES = ("system", "trace", "modes", "background", "seed", "bytes", "topology", "system_keys")


class SweepError(ValueError):
    """A bad sweep spec or point: one line naming the file, the key and what is allowed."""


@dataclass(frozen=True)
class SweepPoint:
    """One replay of a sweep.

    system : a named system (:data:`~sim_harness.systems.NAMED_SYSTEMS`) or a system file.
    trace : a trace file (any format :func:`~sim_harness.traces.load_trace` detects); ``None``
        is the bundled default.
    modes : any of ``ace``, ``staged``, ``p2p`` (default: all three); a spec may also say
        ``all``, ``both`` (ace and staged) or the alias ``baseline`` (staged).
    background : share of memory bandwidth taken by background traffic, as
        ``ace replay --background``.
    seed : seed of the input data (collective ``i`` uses ``seed + i``).
    bytes : the size S of every collective (an MSCCL trace's size, as ``ace replay --bytes``;
        for the other formats it replaces each collective's ``bytes``); ``None`` keeps them.
    topology : overrides the system's topology (``ring:16``).
    system_keys : system-file keys that override the system's (``{mem_ratio: 4,
        mem_bytes: 1073741824}``; :data:`~sim_harness.systems.SYSTEM_KEYS`), as pairs.
    label : free ``(key, value)`` pairs carried into the result.
    """
    system: str
    trace: str | None
    modes: tuple[Mode, ...] = tuple(Mode)
    background: float = 0.0
    seed: int = 1
    bytes: int | None = None
    topology: str | None = None
    system_keys: tuple = ()
    label: tuple = ()


# -- spec ----------------------------------------------------------------------------------------

def _system(value, where):
    if not isinstance(value, str) or not value:
        raise SweepError(f"{where}: {value!r}; allowed: a named system "
                         f"({', '.join(NAMED_SYSTEMS)}) or a system file path")
    if value not in NAMED_SYSTEMS and not Path(value).is_file():
        raise SweepError(f"{where}: {value!r} is neither a named system "
                         f"({', '.join(NAMED_SYSTEMS)}) nor a file")
    return value


def _trace(value, where):
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise SweepError(f"{where}: {value!r}; allowed: a trace file path, or null for the "
                         "bundled default")
    try:
        detect_format(value)
    except TraceError as error:
        raise SweepError(f"{where}: {error}") from None
    return value


def _modes(value, where):
    return parse_modes(value, lambda text: SweepError(f"{where}: {text}"))


def _background(value, where):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise SweepError(f"{where}: {value!r}; allowed: a number, 0 <= share < 1")
    return float(value)


def _seed(value, where):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SweepError(f"{where}: {value!r}; allowed: an integer >= 0")
    return value


def _bytes(value, where):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise SweepError(f"{where}: {value!r}; allowed: a positive integer (bytes per node), "
                         "or null to keep the trace's sizes")
    return value


def _topology(value, where):
    if value is None:
        return None
    if not isinstance(value, str) or ":" not in value:
        raise SweepError(f"{where}: {value!r}; allowed: kind:DIMS such as ring:16 or "
                         "torus:4x2, or null for the system's own")
    return value


def _label(value, where):
    if not isinstance(value, dict):
        raise SweepError(f"{where}: {value!r}; allowed: a mapping of names to values")
    for key, item in value.items():
        if not isinstance(key, str) or not (item is None or
                                            isinstance(item, (str, int, float, bool))):
            raise SweepError(f"{where}.{key}: {item!r}; allowed: a string, number, boolean "
                             "or null under a string key")
    return tuple(value.items())


def _system_keys(value, where):
    from .systems import SYSTEM_KEYS

    if not isinstance(value, dict):
        raise SweepError(f"{where}: {value!r}; allowed: a mapping of system-file keys "
                         f"({', '.join(SYSTEM_KEYS)}) to values")
    for key in value:
        if key not in SYSTEM_KEYS or key == "topology":
            raise SweepError(f"{where}.{key}: not a system key a point may override; allowed: "
                             f"{', '.join(k for k in SYSTEM_KEYS if k != 'topology')} "
                             "(topology has its own key)")
    return tuple(sorted(value.items()))


_CHECKS = {"system": _system, "trace": _trace, "modes": _modes, "background": _background,
           "seed": _seed, "bytes": _bytes, "topology": _topology, "system_keys": _system_keys,
           "label": _label}
_SPEC_KEYS = (*_CHECKS, "grid")


def expand(spec: dict, source: str) -> list[SweepPoint]:
    """The points of a sweep spec (the cartesian product of its ``grid`` axes, in the order
    they are written, the last varying fastest). ``source`` names the spec in errors
    (:class:`SweepError`). Relative paths are relative to the current directory."""
    if not isinstance(spec, dict):
        raise SweepError(f"{source}: expected a mapping of point keys ({', '.join(_CHECKS)}) "
                         "and grid")
    unknown = [k for k in spec if k not in _SPEC_KEYS]
    if unknown:
        raise SweepError(f"{source}: unknown key {unknown[0]!r}; allowed: "
                         f"{', '.join(_SPEC_KEYS)}")
    base = {"system": DEFAULT_SYSTEM, "trace": None}
    for key, value in spec.items():
        if key != "grid":
            base[key] = _CHECKS[key](value, f"{source}: {key}")
    grid = spec.get("grid") or {}
    if not isinstance(grid, dict):
        raise SweepError(f"{source}: grid: expected a mapping of axes ({', '.join(AXES)}) to "
                         "lists of values")
    axes = []
    for key, values in grid.items():
        where = f"{source}: grid.{key}"
        if key not in AXES:
            raise SweepError(f"{where}: not a sweepable key; allowed: {', '.join(AXES)}")
        if key in spec:
            raise SweepError(f"{where}: {key} is also given outside the grid; allowed: one "
                             "of the two")
        if not isinstance(values, list) or not values:
            raise SweepError(f"{where}: {values!r}; allowed: a non-empty list of values")
        axes.append((key, [_CHECKS[key](v, f"{where}[{i}]") for i, v in enumerate(values)]))
    points = [SweepPoint(**base, **dict(zip([k for k, _ in axes], combo)))
              for combo in itertools.product(*(vals for _, vals in axes))]
    checked = set()
    for point in points:        # every system and topology the grid combines
        if (point.system, point.topology, point.system_keys) not in checked:
            checked.add((point.system, point.topology, point.system_keys))
            try:
                load_system(point.system, topology=point.topology,
                            overrides=dict(point.system_keys))
            except ConfigError as error:
                raise SweepError(f"{source}: {error}") from None
    return points


def load_spec(path: str | Path) -> list[SweepPoint]:
    """The points of a sweep spec file (``.json``: JSON; anything else: YAML)."""
    import yaml

    path = Path(path)
    try:
        text = path.read_text()
    except OSError as error:
        raise SweepError(f"{path}: cannot read: {error.strerror}") from None
    try:
        doc = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as error:
        kind = "JSON" if path.suffix == ".json" else "YAML"
        raise SweepError(f"{path}: not valid {kind}: " + " ".join(str(error).split())) from None
    return expand(doc, str(path))


# -- running -------------------------------------------------------------------------------------

def _prepare(point: SweepPoint):
    """The trace (sizes set from ``point.bytes``) and the system of a point."""
    trace = load_trace(point.trace or DEFAULT_TRACE, msccl_bytes=point.bytes)
    if point.bytes is not None:
        trace.collectives = [replace(c, bytes=point.bytes) for c in trace.collectives]
    return trace, load_system(point.system, topology=point.topology,
                              overrides=dict(point.system_keys))


def run_point(point: SweepPoint, plan: Plan | None = None, pgo: bool = False) -> dict:
    """Replay one point (modes one after another, no progress output) with its pre-flight
    ``plan`` (made here when None), on the profile-guided build if ``pgo``; return the
    ``results.json`` document, in plain JSON types. This is what each worker runs."""
    trace, system = _prepare(point)
    raw = replay(trace, system, modes=point.modes, seed=point.seed,
                 background_share=point.background, log=None, progress=False, parallel=False,
                 plan=plan, pgo=pgo)
    # Only simulated quantities go in (no wall-clock or host fields); the JSON round trip
    # gives both paths the same plain types.
    return json.loads(json.dumps(build_results(raw["system"], raw["runs"]), allow_nan=False))


_PLAIN = SweepPoint(system=DEFAULT_SYSTEM, trace=None)


def _describe(index: int, point: SweepPoint) -> str:
    fields = ", ".join(f"{k}={getattr(point, k)}" for k in AXES
                       if getattr(point, k) != getattr(_PLAIN, k))
    return f"point {index} ({fields})"


def _key(point: SweepPoint) -> tuple:
    """What a point's pre-flight depends on."""
    return (point.system, point.trace, point.bytes, point.topology, point.system_keys,
            point.modes)


def _check(points) -> tuple[dict, list]:
    """Load every point and run its pre-flight (:func:`~sim_harness.preflight.preflight`:
    compile, assemble, size check) before anything is built or run; return the plans (by
    :func:`_key`) and the distinct systems (one per build)."""
    systems, plans = {}, {}
    for i, point in enumerate(points):
        if _key(point) in plans:
            continue
        try:
            trace, system = _prepare(_absolute(point))      # as the worker will load it
            plans[_key(point)] = preflight(trace, system, point.modes)
        except (TraceError, ProgramError, ConfigError, ReplayError) as error:
            raise SweepError(f"{_describe(i, point)}: {error}") from None
        systems.setdefault(build_key(system), system)
    return plans, list(systems.values())


def _absolute(point: SweepPoint) -> SweepPoint:
    """The point with its file paths made absolute (a worker's directory may differ)."""
    system = point.system if point.system in NAMED_SYSTEMS else str(Path(point.system).resolve())
    trace = None if point.trace is None else str(Path(point.trace).resolve())
    return replace(point, system=system, trace=trace)


def run_points(points, *, scheduler: str | None = None, workers: int | None = None,
               progress: bool = True, pgo: bool = False) -> list[dict]:
    """Run every point; return ``[{"point": asdict(point), "results": results.json document}]``
    in the order of ``points``.

    Every point is compiled and checked first (:class:`SweepError`), and every distinct
    system is built once before any point runs: in this process for the local pool
    (``workers`` processes, default ``os.cpu_count()``), as one task per system on the
    cluster for ``scheduler`` (a ``dask.distributed`` scheduler address), whose workers must
    see the same build folder (``ACE_BUILD_DIR``). ``pgo``: the profile-guided builds
    (:func:`~sim_harness.replay.build_system`). A point that fails to run raises
    :class:`~sim_harness.replay.ReplayError` naming it."""
    from tqdm import tqdm

    points = list(points)
    if scheduler is not None and workers is not None:
        raise SweepError("workers: applies to the local pool only; with a scheduler the "
                         "cluster's workers run the points")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                or workers < 1):
        raise SweepError(f"workers: {workers!r}; allowed: an integer >= 1")
    if not points:
        return []
    plans, systems = _check(points)
    jobs = [(_absolute(p), plans[_key(p)], pgo) for p in points]
    bar = tqdm(total=len(points), unit="point", desc="sweep", disable=not progress)
    log = bar.write if progress else None
    try:
        if scheduler is None:
            _build(lambda: [build_system(system, pgo=pgo, log=log) for system in systems])
            documents = _run_local(jobs, points, workers or os.cpu_count() or 1, bar)
        else:
            documents = _run_dask(jobs, points, scheduler, systems, pgo, bar, log)
    finally:
        bar.close()
    return [{"point": asdict(p), "results": d} for p, d in zip(points, documents)]


def _build(run) -> None:
    try:
        run()
    except SimulatorError as error:
        raise ReplayError(str(error)) from None


def _run_local(jobs, points, workers: int, bar) -> list[dict]:
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    # spawn: a fresh interpreter per worker, not a fork of this one (its threads, its pools).
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(min(workers, len(jobs)), mp_context=context) as pool:
        futures = [pool.submit(run_point, *job) for job in jobs]
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)  # progress per point
            bar.update(len(done))
            for future in done:
                if future.exception() is not None:
                    for other in pending:
                        other.cancel()
                    i = futures.index(future)
                    _raise(i, points[i], future.exception())
        return [f.result() for f in futures]


def _raise(index, point, error):
    """Re-raise a point's failure naming the point (other exceptions are bugs: as they are)."""
    if isinstance(error, (ReplayError, SimulatorError)):
        raise ReplayError(f"{_describe(index, point)}: {error}") from None
    raise error


def _run_dask(jobs, points, scheduler: str, systems, pgo: bool, bar, log) -> list[dict]:
    from distributed import Client, as_completed

    try:
        client = Client(scheduler, timeout="20s", set_as_default=False)
    except (OSError, TimeoutError, ValueError) as error:
        raise SweepError(f"scheduler: cannot connect to {scheduler!r}: {error}") from None
    with client:
        if log:
            log(f"building {len(systems)} system(s) on the cluster (a cached build returns at "
                "once)")
        _build(lambda: client.gather([client.submit(build_system, s, pgo=pgo, log=None, pure=False)
                                      for s in systems]))
        futures = client.map(run_point, *zip(*jobs), pure=False)
        index = {f.key: i for i, f in enumerate(futures)}
        for future in as_completed(futures, loop=client.loop):
            bar.update(1)
            if future.status == "error":
                client.cancel(futures)
                i = index[future.key]
                _raise(i, points[i], future.exception())
        return client.gather(futures)


# -- output --------------------------------------------------------------------------------------

#: Columns of sweep.csv before the per-record ones (:data:`sim_harness.report.CSV_COLUMNS`),
#: then one ``label.KEY`` column per label key.
SWEEP_CSV_COLUMNS = ("point", "system", "trace", "background", "seed", "system_keys")


def _label_keys(results) -> list[str]:
    keys = []
    for result in results:
        for key, _ in result["point"]["label"]:
            if key not in keys:
                keys.append(key)
    return keys


def _rows(results):
    """``(point index, result, run, record)`` for every point x mode x collective, the record
    a :class:`~sim_harness.metrics.CollectiveRecord`."""
    for i, result in enumerate(results):
        for run in result["results"]["runs"]:
            for rec in records_of(run):
                yield i, result, run, rec


def write_sweep(out_dir, results: list[dict]) -> list[Path]:
    """Write ``sweep.json`` (every result) and ``sweep.csv`` (one row per point x mode x
    collective) into ``out_dir``; return their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    json_path, csv_path = out / "sweep.json", out / "sweep.csv"
    with open(json_path, "w") as f:
        json.dump({"results": results}, f, indent=1, allow_nan=False)
        f.write("\n")
    labels = _label_keys(results)
    with open(csv_path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([*SWEEP_CSV_COLUMNS, *(f"label.{k}" for k in labels), *CSV_COLUMNS])
        for i, result, _, rec in _rows(results):
            point = result["point"]
            label = dict(point["label"])
            writer.writerow([i, point["system"], point["trace"] or "", point["background"],
                             point["seed"], ";".join(f"{k}={v}" for k, v in
                                                     point["system_keys"]),
                             *("" if label.get(k) is None else label[k]
                                              for k in labels),
                             *("" if getattr(rec, c) is None else getattr(rec, c)
                               for c in CSV_COLUMNS)])
    return [json_path, csv_path]


def format_sweep_table(results: list[dict]) -> str:
    """A fixed-width table: one row per point x mode x collective, with the point fields and
    labels that differ between points."""
    points = [r["point"] for r in results]
    varying = [k for k in AXES if len({json.dumps(p[k]) for p in points}) > 1]
    labels = [k for k in _label_keys(results)
              if len({json.dumps(dict(p["label"]).get(k)) for p in points}) > 1]

    def show(value):
        if value is None:
            return "default"
        if isinstance(value, (list, tuple)):
            return "+".join(f"{v[0]}={v[1]}" if isinstance(v, (list, tuple)) else str(v)
                            for v in value)
        return Path(value).name if isinstance(value, str) and "/" in value else str(value)

    names = ["#", *varying, *labels, "collective", "mode", "cycles", "x bound", "link util",
             "mem/node", "busbw GB/s", "ok"]
    rows = []
    for i, result, run, rec in _rows(results):
        point, label = result["point"], dict(result["point"]["label"])
        util, bound = rec.link_utilization, rec.time_over_bound
        rows.append([str(i), *(show(point[k]) for k in varying),
                     *(show(label.get(k)) for k in labels), rec.name, run["mode"],
                     f"{rec.cycles:,}", "-" if bound is None else f"{bound:.2f}",
                     "-" if util is None else f"{100 * util:.1f}%",
                     f"{rec.mem_bytes_per_node:,.0f}",
                     "-" if rec.busbw_gbps is None else f"{rec.busbw_gbps:.2f}",
                     "yes" if rec.correct else "NO"])
    widths = [max(len(r[c]) for r in [names, *rows]) for c in range(len(names))]
    left = 1 + len(varying) + len(labels) + 2          # text columns; numbers right-aligned

    def line(cells):
        return "  ".join(c.ljust(w) if k < left and k else c.rjust(w)
                         for k, (c, w) in enumerate(zip(cells, widths))).rstrip()
    head = line(names)
    return "\n".join([head, "-" * len(head), *map(line, rows)])
