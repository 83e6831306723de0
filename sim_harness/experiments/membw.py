"""``membw``: link utilization against the memory bandwidth left to the collective, for ACE and
both baselines, across node balances (``--mem-ratio``), for a ring all-reduce (ring8, ring16)
and a hierarchical all-reduce on a 2D torus.

What is measured on the RTL, per system, balance ``R`` (memory bytes per cycle per link byte
per cycle per direction: the node's memory gives ``M0 = R x link rate``) and background share
``b`` (the memory model's background traffic): the available memory bandwidth
``M = M0 x (1 - b)``, the mean link utilization and that of the busiest link (equal on a ring;
on a torus only the busiest link can approach 100%), memory bytes per link byte and the memory
bandwidth actually used. ``b`` runs over 0 and the training compute's memory shares
(:data:`~.workloads.COMPUTE_MEM_SHARE`, shared with ``utilization``) at every balance, and
over :data:`SETTINGS`' ``low_backgrounds`` at the lowest, so the points cover ``M`` from a
quarter of the lowest balance to the whole of the highest.

Two figures come out:

* **per balance** (``by_ratio``): with the node's whole memory (``b = 0``), each mode's link
  utilization and memory bandwidth, and the paper's "memory bandwidth for the same network
  bandwidth": memory bytes per link byte, baseline over ACE (each mode's memory bandwidth
  divided by the network bandwidth it drives);
* **across balances** (``requirement``): the memory bandwidth each mode needs for 90%
  busiest-link utilization, where its measured curve ``u(M)`` (every point of every balance)
  first reaches 90%, interpolated linearly; when no point reaches it, an *estimate* from the
  fitted model ``u = min(u_sat, M / a)`` (:func:`~.common.fit_roofline`), ``0.9 x a``, marked
  as such. The ratio baseline / ACE of these is the paper's 3.5x figure read as "memory
  bandwidth needed to drive the links at 90%".
"""

from __future__ import annotations

from pathlib import Path

from .common import (BASELINES, MODES, Plan, busiest_link_utilization, crossing, figure,
                     fit_roofline, mark_accelerators, md_table, mean, mem_rate, roofline,
                     save_figure, settings_for, write_json)
from .workloads import COMPUTE_MEM_SHARE

__all__ = ["SETTINGS", "TARGET", "settings", "plan", "analyze", "requirement", "write",
           "markdown"]

TARGET = 0.9

SETTINGS = {
    "quick": {"systems": ["ring8", "torus4x2"], "bytes": 131072, "low_backgrounds": [0.75]},
    "full": {"systems": ["ring8", "ring16", "torus4x4"], "bytes": 1048576,
             "low_backgrounds": [0.75]},
}


def settings(quick: bool, systems=None, ratios=None) -> dict:
    s = settings_for(SETTINGS, quick, systems, ratios)
    s["backgrounds"] = sorted({0.0, *COMPUTE_MEM_SHARE.values()})
    return s


def _points(s: dict):
    """``(ratio, background)`` of every point on one system."""
    pts = [(r, b) for r in s["ratios"] for b in s["backgrounds"]]
    pts += [(min(s["ratios"]), b) for b in s["low_backgrounds"]]
    return pts


def plan(s: dict) -> Plan:
    p = Plan()
    for system in s["systems"]:
        for ratio, b in _points(s):
            p.add(system, "allreduce", s["bytes"], b, ratio)
    return p


def requirement(ms, us, target: float = TARGET) -> dict:
    """The memory bandwidth needed for ``target`` utilization from points ``(m, u)``:
    ``{"rtl": interpolated or None, "model": fit_roofline(...) with "estimate" = target x a,
    "needed", "basis": "rtl"|"model"}``."""
    rtl = crossing(ms, us, target)
    fit = fit_roofline(ms, us)
    estimate = target * fit["a"]
    return {"rtl": rtl, "model": dict(fit, estimate=estimate),
            "needed": rtl if rtl is not None else estimate,
            "basis": "rtl" if rtl is not None else "model"}


def _mode_row(r) -> dict:
    return {"cycles": r.cycles, "time_over_bound": r.time_over_bound,
            "link_utilization": r.link_utilization,
            "busiest_link_utilization": busiest_link_utilization(r),
            "mem_bytes_per_link_byte": r.mem_bytes_per_link_byte,
            "mem_bandwidth_bytes_per_cycle": r.mem_bandwidth_bytes_per_cycle,
            "mem_over_2S": r.mem_over_2S}


def analyze(measured: dict, s: dict) -> dict:
    systems = {}
    for system in s["systems"]:
        points = []
        for ratio, b in _points(s):
            entry = measured[(system, "allreduce", s["bytes"], round(b, 6), round(ratio, 6))]
            clock = entry["system"]["clock_mhz"]
            rate = mem_rate(system, ratio)
            points.append({"ratio": ratio, "background": b, "mem_available": rate * (1 - b),
                           "mem_available_gbps": rate * (1 - b) * clock / 1000,
                           **{mode: _mode_row(entry[mode]) for mode in MODES}})
        ms = [p["mem_available"] for p in points]
        req = {mode: requirement(ms, [p[mode]["busiest_link_utilization"] for p in points])
               for mode in MODES}
        by_ratio = {}
        for p in points:
            if p["background"] != 0:
                continue
            by_ratio[f"{p['ratio']:g}"] = {
                "mem_bytes_per_cycle": p["mem_available"],
                **{mode: p[mode] for mode in MODES},
                "mem_bw_reduction": {b: p[b]["mem_bytes_per_link_byte"]
                                     / p["ace"]["mem_bytes_per_link_byte"] for b in BASELINES}}
        systems[system] = {
            "bytes": s["bytes"], "points": points, "requirement": req, "by_ratio": by_ratio,
            "ratio_90": {b: req[b]["needed"] / req["ace"]["needed"] for b in BASELINES},
            "ratio_90_basis": {b: "rtl" if req[b]["basis"] == req["ace"]["basis"] == "rtl"
                               else "model" for b in BASELINES},
        }
    by_ratio = {}
    for ratio in s["ratios"]:
        key = f"{ratio:g}"
        rows = [sy["by_ratio"][key] for sy in systems.values()]
        by_ratio[key] = {
            "mem_bw_reduction": {b: mean(r["mem_bw_reduction"][b] for r in rows)
                                 for b in BASELINES},
            "link_utilization": {m: mean(r[m]["link_utilization"] for r in rows)
                                 for m in MODES},
            "mem_bandwidth_bytes_per_cycle": {
                m: mean(r[m]["mem_bandwidth_bytes_per_cycle"] for r in rows) for m in MODES}}
    return {"experiment": "membw", "settings": s, "target": TARGET, "systems": systems,
            "by_ratio": by_ratio,
            "mem_bw_reduction_90": {b: mean(sy["ratio_90"][b] for sy in systems.values())
                                    for b in BASELINES},
            "mem_bw_reduction_90_basis": {
                b: "rtl" if all(sy["ratio_90_basis"][b] == "rtl" for sy in systems.values())
                else "model" for b in BASELINES},
            "paper": {"mem_bw_reduction": 3.5}}


def _needed(req: dict) -> str:
    if req["rtl"] is not None:
        return f"{req['rtl']:.1f} (RTL)"
    m = req["model"]
    plateau = "" if m["u_sat"] is None else f", plateau {100 * m['u_sat']:.0f}%"
    return f"not reached; model estimate {m['estimate']:.1f}{plateau}"


def markdown(summary: dict) -> str:
    s = summary["settings"]
    lines = ["# membw: link utilization against available memory bandwidth", "",
             f"All-reduce of {s['bytes'] // 1024} KiB per node (fp32, ring algorithm per "
             "dimension). Memory bandwidth in bytes per cycle (= GB/s at 1 GHz); balance R = "
             "memory bytes per cycle per link byte per cycle per direction.", "",
             "## Per balance, the node's whole memory (mean over systems)", ""]
    rows = []
    for key, r in summary["by_ratio"].items():
        rows.append([key, *(f"{100 * r['link_utilization'][m]:.1f}%" for m in MODES),
                     *(f"{r['mem_bandwidth_bytes_per_cycle'][m]:.1f}" for m in MODES),
                     *(f"**{r['mem_bw_reduction'][b]:.2f}x**" for b in BASELINES)])
    lines += [md_table(["R", *(f"{m} link util" for m in MODES),
                        *(f"{m} mem B/cycle" for m in MODES),
                        *(f"mem per link byte, {b} / ACE" for b in BASELINES)], rows), ""]
    for system, sy in summary["systems"].items():
        rows = []
        for p in sy["points"]:
            rows.append([f"{p['ratio']:g}", f"{p['background']:g}", f"{p['mem_available']:.1f}",
                         *(f"{100 * p[m]['busiest_link_utilization']:.1f}%" for m in MODES),
                         *(f"{p[m]['mem_bytes_per_link_byte']:.2f}" for m in MODES),
                         *(f"{p[m]['time_over_bound']:.2f}" for m in MODES)])
        lines += [f"## {system}", "",
                  md_table(["R", "background", "M available",
                            *(f"{m} busiest-link util" for m in MODES),
                            *(f"{m} mem/link byte" for m in MODES),
                            *(f"{m} x bound" for m in MODES)], rows), ""]
    rows = []
    for system, sy in summary["systems"].items():
        req = sy["requirement"]
        rows.append([system, *(_needed(req[m]) for m in MODES),
                     *(f"**{sy['ratio_90'][b]:.2f}x** ({sy['ratio_90_basis'][b]})"
                       for b in BASELINES)])
    lines += ["## Memory bandwidth needed for 90% busiest-link utilization", "",
              md_table(["system", *MODES, *(f"{b} / ACE" for b in BASELINES)], rows), "",
              "Mean over systems: " + ", ".join(
                  f"{b} / ACE **{summary['mem_bw_reduction_90'][b]:.2f}x** "
                  f"({summary['mem_bw_reduction_90_basis'][b]})" for b in BASELINES)
              + ". Paper: 3.5x on average.", ""]
    return "\n".join(lines)


_COLORS = {"ace": "tab:blue", "staged": "tab:orange", "p2p": "tab:green"}


def _plots(out: Path, summary: dict) -> list[Path]:
    systems = list(summary["systems"])
    fig, axes = figure(1, len(systems), width=4.0 * len(systems), height=3.4)
    for ax, system in zip(axes[0], systems):
        sy = summary["systems"][system]
        ms = [p["mem_available"] for p in sy["points"]]
        top = max(max(ms), *(sy["requirement"][m]["needed"] for m in MODES))
        grid = [top * k / 100 for k in range(1, 101)]
        for mode in MODES:
            us = [100 * p[mode]["busiest_link_utilization"] for p in sy["points"]]
            model = sy["requirement"][mode]["model"]
            ax.plot(ms, us, "o", ms=3, color=_COLORS[mode], label=f"{mode} RTL")
            ax.plot(grid, [100 * roofline(m, model["u_sat"], model["a"]) for m in grid], "--",
                    color=_COLORS[mode], lw=0.8)
            ax.axvline(sy["requirement"][mode]["needed"], color=_COLORS[mode], lw=0.8, ls=":")
        ax.axhline(100 * summary["target"], color="0.5", lw=0.8)
        ax.set_xlabel("memory bandwidth left to the collective (B/cycle)")
        ax.set_ylabel("busiest-link utilization (%)")
        ax.set_ylim(0, 105)
        ax.set_title(system + ": " + ", ".join(f"{b}/ACE {sy['ratio_90'][b]:.2f}x"
                                               for b in BASELINES), fontsize=8)
        ax.legend(fontsize=7)
    paths = [save_figure(fig, out / "membw_utilization.png")]

    fig, axes = figure(1, 2, width=8.4, height=3.2)
    ratios = [float(k) for k in summary["by_ratio"]]
    ax = axes[0][0]
    for mode in MODES:
        ax.plot(ratios, [100 * r["link_utilization"][mode] for r in summary["by_ratio"].values()],
                "o-", color=_COLORS[mode], label=mode)
    ax.set_ylim(0, 105)
    ax.set_xlabel("memory / link bandwidth per direction (R)")
    ax.set_ylabel("link utilization, whole memory (%)")
    mark_accelerators(ax)
    ax.legend(fontsize=7)
    ax = axes[0][1]
    for b in BASELINES:
        ax.plot(ratios, [r["mem_bw_reduction"][b] for r in summary["by_ratio"].values()], "o-",
                color=_COLORS[b], label=f"{b} / ACE")
    ax.axhline(3.5, color="0.5", lw=0.8, ls="--", label="paper 3.5x")
    ax.set_ylim(0, 4.5)
    ax.set_xlabel("memory / link bandwidth per direction (R)")
    ax.set_ylabel("memory bytes per link byte, over ACE")
    mark_accelerators(ax)
    ax.legend(fontsize=7)
    paths.append(save_figure(fig, out / "membw_by_ratio.png"))
    return paths


def write(out: Path, summary: dict) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    md = out / "summary.md"
    md.write_text(markdown(summary) + "\n")
    return [write_json(out / "summary.json", summary), md, *_plots(out, summary)]
