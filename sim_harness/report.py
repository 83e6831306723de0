"""Result files of a trace replay (``ace replay ... --out DIR``) and the terminal table.

::

    raw measurements (runner) --collective_metrics--> records --run_summary / compare--+
          |                                                                            v
          +--samples--> link_utilization.png, memory_bandwidth.png            results.json
          +--steps_done samples--> timeline.json (Perfetto)           summary.csv, table
                                              ace_vs_baseline.png (ACE and a baseline)

The formats are described in ``docs/results_format.md``; every figure is defined in
:mod:`sim_harness.metrics`. Plots use matplotlib's Agg canvas directly (no pyplot, no global
backend switch), imported only when plots are written.
"""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

from ace.vocab import BASELINE_MODES, Mode

from .metrics import (CollectiveRecord, collective_metrics, compare, compare_collectives,
                      link_key, run_summary)

__all__ = ["CSV_COLUMNS", "build_results", "records_of", "write_results", "format_table",
           "sample_series", "step_spans", "timeline_events"]

#: Columns of summary.csv, one row per mode x collective (record fields of results.json).
CSV_COLUMNS = ("mode", "name", "collective", "algorithm", "topology", "nodes", "bytes", "dtype",
               "op", "chunks", "cycles", "time_us", "bound_cycles", "time_over_bound",
               "link_utilization", "header_overhead", "mem_read_bytes", "mem_write_bytes",
               "mem_bytes_per_node", "mem_over_2S", "mem_bytes_per_link_byte",
               "mem_bandwidth_bytes_per_cycle", "mem_bandwidth_gbps", "algbw_gbps",
               "busbw_gbps", "correct")

_MODE_ORDER = tuple(Mode)


def build_results(system: dict, runs: list[dict]) -> dict:
    """The results.json document: ``{"system", "runs": [{"mode", "collectives", "summary"}],
    "comparison": {baseline: ...}}``, ``comparison`` holding each baseline (``staged``,
    ``p2p``) that ran against ``ace``, when ``ace`` ran. Run modes are written by their names
    (the alias ``baseline`` becomes ``staged``). Its records are
    :class:`~sim_harness.metrics.CollectiveRecord` serialised by
    :meth:`~sim_harness.metrics.CollectiveRecord.to_json`; :func:`records_of` reads them
    back."""
    out_runs, records_by_mode = [], {}
    for run in runs:
        mode = Mode(run["mode"]).value
        records = [collective_metrics(raw, system) for raw in run["raws"]]
        for rec in records:
            if rec.mode != mode:
                raise ValueError(f"run {mode}: collective {rec.name!r} was measured in "
                                 f"mode {rec.mode!r}")
        summary = run_summary(records)
        summary["mode"] = mode
        records_by_mode.setdefault(mode, records)          # the first run of each mode
        out_runs.append({"mode": mode, "collectives": [r.to_json() for r in records],
                         "summary": summary})
    results = {"system": system, "runs": out_runs}
    summaries = {r["mode"]: r["summary"] for r in reversed(out_runs)}
    baselines = [b.value for b in BASELINE_MODES if b in records_by_mode]
    if Mode.ACE in records_by_mode and baselines:
        results["comparison"] = {
            base: dict(compare(summaries[Mode.ACE], summaries[base]),
                       per_collective=compare_collectives(records_by_mode[Mode.ACE],
                                                          records_by_mode[base]))
            for base in baselines}
    return results


def records_of(run: dict) -> list[CollectiveRecord]:
    """The records of one run of a results document (:func:`build_results` or a loaded
    results.json)."""
    return [CollectiveRecord.from_json(doc, f"run {run['mode']} collective {i}")
            for i, doc in enumerate(run["collectives"])]


def _json_default(obj):
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "item"):                    # numpy scalars
        return obj.item()
    if hasattr(obj, "tolist"):                  # numpy arrays
        return obj.tolist()
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    raise TypeError(f"results: {type(obj).__name__} is not JSON serializable")


def _write_json(path: Path, doc) -> None:
    with open(path, "w") as f:
        json.dump(doc, f, indent=1, default=_json_default, allow_nan=False)
        f.write("\n")


def write_results(out_dir, system: dict, runs: list[dict]) -> list[Path]:
    """Write results.json, summary.csv, the plots and timeline.json into ``out_dir`` (created
    if missing). ``runs`` = ``[{"mode": "ace"|"staged"|"p2p", "raws": [raw, ...]}]``. Returns the
    paths written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    runs = [dict(run, mode=Mode(run["mode"]).value) for run in runs]
    results = build_results(system, runs)
    written = []

    path = out / "results.json"
    _write_json(path, results)
    written.append(path)

    path = out / "summary.csv"
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_COLUMNS)
        for run in results["runs"]:
            for rec in records_of(run):
                writer.writerow(["" if getattr(rec, c) is None else getattr(rec, c)
                                 for c in CSV_COLUMNS])
    written.append(path)

    written += _write_plots(out, system, runs, results)

    path = out / "timeline.json"
    _write_json(path, {"traceEvents": timeline_events(system, runs), "displayTimeUnit": "ns",
                       "otherData": {"clock_mhz": system["clock_mhz"],
                                     "time_unit": "microseconds at clock_mhz"}})
    written.append(path)
    return written


# -- samples -------------------------------------------------------------------------------------

def sample_series(raw: dict, link_bytes_per_cycle: float) -> dict:
    """Rates per sampling interval of one collective.

    Returns ``{"start": [cycle], "end": [cycle], "link": {"n0.l0": [utilization]},
    "mem_read": [[bytes/cycle per node]], "mem_write": [[...]]}``, one entry per interval
    ``(previous sample, sample]``; the first interval starts at ``start_cycle`` with all
    counters at 0. Link utilization here is WIRE bytes (payload and headers) over
    ``interval x link_bytes_per_cycle``; links are those in ``links_used``."""
    samples = raw.get("samples") or {}
    cycles = list(samples.get("cycle") or [])
    links = [tuple(lk) for lk in raw.get("links_used", [])]
    p = int(raw["nodes"])
    out = {"start": [], "end": [], "link": {link_key(n, lk): [] for n, lk in links},
           "mem_read": [], "mem_write": []}
    wire = samples.get("link_wire_bytes") or []
    reads = samples.get("mem_read_bytes") or []
    writes = samples.get("mem_write_bytes") or []
    prev_cycle = raw["start_cycle"]
    prev_wire = {lk: 0 for lk in links}
    prev_r, prev_w = [0] * p, [0] * p
    for k, cyc in enumerate(cycles):
        dt = cyc - prev_cycle
        if dt <= 0:
            continue
        out["start"].append(prev_cycle)
        out["end"].append(cyc)
        for n, lk in links:
            now = wire[k][n][lk] if k < len(wire) else prev_wire[(n, lk)]
            out["link"][link_key(n, lk)].append((now - prev_wire[(n, lk)]) /
                                                (dt * link_bytes_per_cycle))
            prev_wire[(n, lk)] = now
        r = list(reads[k]) if k < len(reads) else prev_r
        w = list(writes[k]) if k < len(writes) else prev_w
        out["mem_read"].append([(r[n] - prev_r[n]) / dt for n in range(p)])
        out["mem_write"].append([(w[n] - prev_w[n]) / dt for n in range(p)])
        prev_r, prev_w, prev_cycle = r, w, cyc
    return out


def step_spans(raw: dict) -> list[dict]:
    """Step spans reconstructed from the ``steps_done`` samples.

    Step ``i`` (0-based) of a channel spans from the first sample at which that channel's
    done count was ``>= i`` (``start_cycle`` for step 0) to the first sample at which it was
    ``>= i + 1``. All steps count as done at ``end_cycle``. Steps that finish within the same
    sampling interval as their predecessor therefore get zero length at that sample's cycle.
    Returns ``[{"node", "channel", "index", "type", "bytes", "start", "end"}]`` in cycles."""
    samples = raw.get("samples") or {}
    cycles = list(samples.get("cycle") or [])
    done = samples.get("steps_done") or []
    start, end = raw["start_cycle"], raw["end_cycle"]
    spans = []
    for n, channels in enumerate(raw.get("steps") or []):
        for c, steps in enumerate(channels):
            total = len(steps)
            points = [(start, 0)]
            for k, cyc in enumerate(cycles):
                if k < len(done) and start < cyc < end:
                    points.append((cyc, min(int(done[k][n][c]), total)))
            points.append((max(end, points[-1][0]), total))
            first_seen = [None] * (total + 1)       # first cycle with count >= i
            best = 0
            for cyc, count in points:
                for i in range(best, max(best, count) + 1):
                    if first_seen[i] is None:
                        first_seen[i] = cyc
                best = max(best, count)
            for i, step in enumerate(steps):
                kind, nbytes = step[0], step[1]
                spans.append({"node": n, "channel": c, "index": i, "type": str(kind),
                              "bytes": int(nbytes), "start": first_seen[i],
                              "end": first_seen[i + 1]})
    return spans


# -- timeline ------------------------------------------------------------------------------------

def timeline_events(system: dict, runs: list[dict]) -> list[dict]:
    """Chrome JSON trace events (Perfetto): per mode one ``<mode> collectives`` process (one
    span per collective, a mean link utilization counter) and one ``<mode> node n`` process
    per node with a thread per channel (a complete event per step) and counters ``link
    utilization`` (wire, per link) and ``memory bandwidth B/cycle`` (read, write).
    Timestamps are microseconds: cycle / clock_mhz."""
    clock = float(system["clock_mhz"])
    lbpc = float(system["link_bytes_per_cycle"])
    events, pid = [], 0

    def ts(cycle):
        return cycle / clock

    def meta(kind, pid_, name, tid=0, sort=None):
        events.append({"ph": "M", "name": kind, "pid": pid_, "tid": tid, "args": {"name": name}})
        if sort is not None:
            events.append({"ph": "M", "name": kind.replace("_name", "_sort_index"),
                           "pid": pid_, "tid": tid, "args": {"sort_index": sort}})

    for run in runs:
        mode, raws = run["mode"], run["raws"]
        coll_pid = pid = pid + 1
        meta("process_name", coll_pid, f"{mode} collectives", sort=coll_pid)
        meta("thread_name", coll_pid, "collectives")
        nodes = max((int(r["nodes"]) for r in raws), default=0)
        node_pid = {}
        for n in range(nodes):
            pid += 1
            node_pid[n] = pid
            meta("process_name", pid, f"{mode} node {n}", sort=pid)
        named = set()
        for raw in raws:
            start, end = raw["start_cycle"], raw["end_cycle"]
            events.append({"ph": "X", "cat": "collective", "name": raw["name"], "pid": coll_pid,
                           "tid": 0, "ts": ts(start), "dur": ts(end) - ts(start),
                           "args": {k: raw.get(k) for k in ("collective", "algorithm", "bytes",
                                                            "dtype", "op", "chunks", "cycles",
                                                            "correct")}})
            for sp in step_spans(raw):
                key = (sp["node"], sp["channel"])
                if key not in named:
                    named.add(key)
                    meta("thread_name", node_pid[sp["node"]], f"channel {sp['channel']}",
                         tid=sp["channel"], sort=sp["channel"])
                events.append({"ph": "X", "cat": "step", "name": sp["type"],
                               "pid": node_pid[sp["node"]], "tid": sp["channel"],
                               "ts": ts(sp["start"]), "dur": ts(sp["end"]) - ts(sp["start"]),
                               "args": {"bytes": sp["bytes"], "step": sp["index"],
                                        "collective": raw["name"], "start_cycle": sp["start"],
                                        "end_cycle": sp["end"]}})
            series = sample_series(raw, lbpc)
            per_node_links = {}
            for key in series["link"]:
                n, lk = key[1:].split(".l")
                per_node_links.setdefault(int(n), []).append((f"l{lk}", key))
            for k, t0 in enumerate(series["start"]):
                for n, keys in per_node_links.items():
                    events.append({"ph": "C", "name": "link utilization", "pid": node_pid[n],
                                   "ts": ts(t0), "args": {lname: series["link"][key][k]
                                                          for lname, key in keys}})
                for n in range(int(raw["nodes"])):
                    events.append({"ph": "C", "name": "memory bandwidth B/cycle",
                                   "pid": node_pid[n], "ts": ts(t0),
                                   "args": {"read": series["mem_read"][k][n],
                                            "write": series["mem_write"][k][n]}})
                utils = [v[k] for v in series["link"].values()]
                events.append({"ph": "C", "name": "mean link utilization", "pid": coll_pid,
                               "ts": ts(t0), "args": {"wire": sum(utils) / len(utils)
                                                      if utils else 0.0}})
            if series["start"]:                       # back to 0 when the collective ends
                t_end = ts(series["end"][-1])
                for n, keys in per_node_links.items():
                    events.append({"ph": "C", "name": "link utilization", "pid": node_pid[n],
                                   "ts": t_end, "args": {lname: 0.0 for lname, _ in keys}})
                for n in range(int(raw["nodes"])):
                    events.append({"ph": "C", "name": "memory bandwidth B/cycle",
                                   "pid": node_pid[n], "ts": t_end,
                                   "args": {"read": 0.0, "write": 0.0}})
                events.append({"ph": "C", "name": "mean link utilization", "pid": coll_pid,
                               "ts": t_end, "args": {"wire": 0.0}})
    return events


# -- plots ---------------------------------------------------------------------------------------

def _figure(rows: int, cols: int = 1, height: float = 3.2, width: float = 9.0):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=(width, height * rows), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, squeeze=False)
    return fig, axes


def _step_xy(starts, ends, values):
    """Piecewise-constant series: each interval's value held from its start to its end."""
    xs, ys = [], []
    for s, e, v in zip(starts, ends, values):
        xs += [s, e]
        ys += [v, v]
    return xs, ys


def _write_plots(out: Path, system: dict, runs: list[dict], results: dict) -> list[Path]:
    lbpc = float(system["link_bytes_per_cycle"])
    runs = [r for r in runs if r["raws"]] or runs
    written = []

    # Link utilization over time: one subplot per mode, a line per link used.
    fig, axes = _figure(max(1, len(runs)))
    for ax, run in zip(axes[:, 0], runs):
        series = [sample_series(raw, lbpc) for raw in run["raws"]]
        keys = sorted({k for s in series for k in s["link"]},
                      key=lambda k: tuple(int(x) for x in k[1:].split(".l")))
        for key in keys:
            xs, ys = [], []
            for s in series:
                if key in s["link"]:
                    x, y = _step_xy(s["start"], s["end"], s["link"][key])
                    xs += x + [float("nan")]
                    ys += y + [float("nan")]
            ax.plot(xs, ys, linewidth=0.8, label=key)
        ax.set_title(f"{run['mode']}: link utilization (wire bytes / capacity) per link used")
        ax.set_xlabel("cycle")
        ax.set_ylabel("utilization")
        ax.set_ylim(0, 1.05)
        _legend(ax, len(keys))
    path = out / "link_utilization.png"
    fig.savefig(path, dpi=90)
    written.append(path)

    # Memory bandwidth over time: one subplot per mode, a thin line per node and the mean.
    mem_peak = system.get("mem_bytes_per_cycle")
    fig, axes = _figure(max(1, len(runs)))
    for ax, run in zip(axes[:, 0], runs):
        nodes = max((int(r["nodes"]) for r in run["raws"]), default=0)
        series = [sample_series(raw, lbpc) for raw in run["raws"]]
        for n in range(nodes):
            xs, ys = [], []
            for s in series:
                total = [r[n] + w[n] for r, w in zip(s["mem_read"], s["mem_write"])]
                x, y = _step_xy(s["start"], s["end"], total)
                xs += x + [float("nan")]
                ys += y + [float("nan")]
            ax.plot(xs, ys, linewidth=0.6, alpha=0.6, label=f"node {n}")
        xs, ys = [], []
        for s in series:
            mean = [(sum(r) + sum(w)) / len(r) if r else 0.0
                    for r, w in zip(s["mem_read"], s["mem_write"])]
            x, y = _step_xy(s["start"], s["end"], mean)
            xs += x + [float("nan")]
            ys += y + [float("nan")]
        ax.plot(xs, ys, color="black", linewidth=1.4, label="mean")
        if mem_peak:
            ax.axhline(float(mem_peak), color="red", linestyle="--", linewidth=0.8,
                       label="configured peak")
        ax.set_title(f"{run['mode']}: memory traffic (read + write) per node")
        ax.set_xlabel("cycle")
        ax.set_ylabel("bytes / cycle")
        _legend(ax, nodes + 2)
    path = out / "memory_bandwidth.png"
    fig.savefig(path, dpi=90)
    written.append(path)

    if "comparison" in results:
        by_mode = {r["mode"]: r for r in reversed(results["runs"])}
        sides = [Mode.ACE.value, *results["comparison"]]
        records = {side: {r.name: r for r in records_of(by_mode[side])} for side in sides}
        names = [name for name in records[Mode.ACE] if all(name in records[side]
                                                              for side in sides)]
        fig, axes = _figure(3, height=2.6, width=max(6.0, 1.0 + 0.9 * len(names)))
        xs = list(range(len(names)))
        width = 0.8 / len(sides)
        for ax, (field, title, scale) in zip(axes[:, 0], (
                ("cycles", "cycles", 1.0),
                ("mem_bytes_per_node", "memory bytes per node", 1.0),
                ("link_utilization", "link utilization (%)", 100.0))):
            for k, side in enumerate(sides):
                offset = (k - (len(sides) - 1) / 2) * width
                ax.bar([x + offset for x in xs],
                       [(getattr(records[side][name], field) or 0) * scale for name in names],
                       width=width, label=side)
            ax.set_title(title)
            ax.set_xticks(xs, names, rotation=30, ha="right", fontsize=7)
            ax.legend(fontsize=7)
        path = out / "ace_vs_baseline.png"
        fig.savefig(path, dpi=90)
        written.append(path)
    return written


def _legend(ax, entries: int) -> None:
    if 0 < entries <= 24:
        ax.legend(fontsize=6, ncol=max(1, entries // 8 + 1), loc="upper right")


# -- terminal table ------------------------------------------------------------------------------

def _fmt_bytes(value) -> str:
    if value is None:
        return "-"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(value) >= scale:
            return f"{value / scale:.2f} {unit}"
    return f"{value:.0f} B"


def _fmt(value, spec: str, suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def format_table(results: dict) -> str:
    """A fixed-width text table of a results document (:func:`build_results` or a loaded
    results.json): one row per collective and mode, a total row per mode, and each baseline's
    comparison with ACE (``staged / ACE``, ``p2p / ACE``) when ACE and that baseline ran."""
    head = (f"{'collective':<24} {'mode':<8} {'cycles':>10} {'x bound':>8} {'link util':>9} "
            f"{'mem/node':>11} {'x 2S':>6} {'mem/link B':>10} {'busbw GB/s':>10} {'ok':>3}")
    lines = [head, "-" * len(head)]
    runs = sorted(results["runs"], key=lambda r: (_MODE_ORDER.index(r["mode"])
                                                  if r["mode"] in _MODE_ORDER else 9))
    rows = {(run["mode"], rec.name): rec for run in runs for rec in records_of(run)}
    names = list(dict.fromkeys(name for _, name in rows))
    for name in names:
        for run in runs:
            rec = rows.get((run["mode"], name))
            if rec is None:
                continue
            util = None if rec.link_utilization is None else 100 * rec.link_utilization
            lines.append(
                f"{name[:24]:<24} {run['mode']:<8} {rec.cycles:>10d} "
                f"{_fmt(rec.time_over_bound, '.2f'):>8} {_fmt(util, '.1f', '%'):>9} "
                f"{_fmt_bytes(rec.mem_bytes_per_node):>11} "
                f"{_fmt(rec.mem_over_2S, '.2f'):>6} "
                f"{_fmt(rec.mem_bytes_per_link_byte, '.2f'):>10} "
                f"{_fmt(rec.busbw_gbps, '.2f'):>10} {'yes' if rec.correct else 'NO':>3}")
    lines.append("-" * len(head))
    for run in runs:
        s = run["summary"]
        util = None if s["link_utilization"] is None else 100 * s["link_utilization"]
        lines.append(
            f"{'total (' + str(s['collectives']) + ')':<24} {run['mode']:<8} "
            f"{s['total_cycles']:>10d} {_fmt(s['time_over_bound'], '.2f'):>8} "
            f"{_fmt(util, '.1f', '%'):>9} {_fmt_bytes(s['mem_bytes_per_node']):>11} "
            f"{'':>6} {_fmt(s['mem_bytes_per_link_byte'], '.2f'):>10} {'':>10} "
            f"{'yes' if s['all_correct'] else 'NO':>3}")
    for base, comp in results.get("comparison", {}).items():
        lines.append(
            f"{base} / ACE: memory traffic {_fmt(comp['memory_traffic_reduction'], '.2f', 'x')}"
            f", memory bytes per link byte "
            f"{_fmt(comp['mem_bytes_per_link_byte_reduction'], '.2f', 'x')}; "
            f"ACE link utilization gain {_fmt(comp['link_utilization_gain'], '.2f', 'x')}, "
            f"speedup {_fmt(comp['speedup'], '.2f', 'x')}")
    return "\n".join(lines)
