"""``membw``: link utilization against the memory bandwidth left to the collective, ACE and
baseline, for a ring all-reduce on 8 and 16 nodes and a hierarchical all-reduce on a 4x4 torus.

What is measured on the RTL, per system and background share ``b`` (the memory model's
background traffic): the available memory bandwidth ``M = mem_bytes_per_cycle x (1 - b)``, the
mean link utilization and the utilization of the busiest link (equal on a ring; on the torus
the second dimension's links carry a quarter of the first's bytes, so only the busiest link
can approach 100%), memory bytes per link byte, and the memory bandwidth actually used.

Memory bandwidth needed for 90% link utilization (busiest link), per mode:
* *RTL*: where the measured curve first reaches 90%, interpolated linearly between points;
* when it never does on the RTL, "not reached", and an *estimate* from the fitted model
  ``u = min(u_sat, M / a)`` (:func:`~.common.fit_roofline`): ``0.9 x a``, the memory bandwidth
  at which memory would stop holding the link below 90%. When the plateau ``u_sat`` is below
  90%, something other than memory limits the link there (for the baseline on this engine, the
  16-byte read port; for ACE, its channels), and the estimate is the memory-side need only.
  The model's largest error against the RTL points is reported with it.
The ratio baseline / ACE of these is the paper's "memory bandwidth to drive the same network
bandwidth" figure. Also reported without any model: the same ratio at the highest utilization
both modes reach on the RTL (90% of the lower of their maxima).
"""

from __future__ import annotations

from pathlib import Path

from ace.vocab import Mode

from .common import (BASELINE, Plan, busiest_link_utilization, crossing, figure, fit_roofline,
                     md_table, mem_rate, roofline, save_figure, settings_for, write_json)
from .workloads import COMPUTE_MEM_SHARE

__all__ = ["SETTINGS", "TARGET", "plan", "analyze", "requirement", "write", "markdown"]

TARGET = 0.9
_MODES = (Mode.ACE, BASELINE)
_BASE_SHARES = {"quick": [0.0, 0.8], "full": [0.0, 0.25, 0.5, 0.75, 0.875]}

SETTINGS = {
    "quick": {"systems": ["ring8"], "bytes": 131072,
              "backgrounds": sorted({*_BASE_SHARES["quick"], *COMPUTE_MEM_SHARE.values()})},
    "full": {"systems": ["ring8", "ring16", "torus4x4"], "bytes": 1048576,
             "backgrounds": sorted({*_BASE_SHARES["full"], *COMPUTE_MEM_SHARE.values()})},
}


def plan(quick: bool, systems=None) -> Plan:
    s = settings_for(SETTINGS, quick, systems)
    p = Plan()
    for system in s["systems"]:
        for b in s["backgrounds"]:
            p.add(system, "allreduce", s["bytes"], b)
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


def analyze(measured: dict, quick: bool, systems=None) -> dict:
    s = settings_for(SETTINGS, quick, systems)
    systems = {}
    for system in s["systems"]:
        rate = mem_rate(system)
        points = []
        for b in s["backgrounds"]:
            entry = measured[(system, "allreduce", s["bytes"], round(b, 6))]
            clock = entry["system"]["clock_mhz"]
            row = {"background": b, "mem_available": rate * (1 - b),
                   "mem_available_gbps": rate * (1 - b) * clock / 1000}
            for mode in _MODES:
                r = entry[mode]
                row[mode] = {"cycles": r.cycles, "time_over_bound": r.time_over_bound,
                             "link_utilization": r.link_utilization,
                             "busiest_link_utilization": busiest_link_utilization(r),
                             "mem_bytes_per_link_byte": r.mem_bytes_per_link_byte,
                             "mem_bandwidth_bytes_per_cycle": r.mem_bandwidth_bytes_per_cycle,
                             "mem_over_2S": r.mem_over_2S}
            points.append(row)
        ms = [p["mem_available"] for p in points]
        req = {mode: requirement(ms, [p[mode]["busiest_link_utilization"] for p in points])
               for mode in _MODES}
        ratio = req[BASELINE]["needed"] / req["ace"]["needed"]
        top = min(max(p[m]["busiest_link_utilization"] for p in points) for m in _MODES)
        level = TARGET * top
        matched = {m: crossing(ms, [p[m]["busiest_link_utilization"] for p in points], level)
                   for m in _MODES}
        systems[system] = {
            "mem_bytes_per_cycle": rate, "bytes": s["bytes"], "points": points,
            "requirement": req, "ratio_90": ratio,
            "ratio_90_basis": "rtl" if all(req[m]["basis"] == "rtl" for m in _MODES)
            else "model",
            "matched_level": level, "matched_mem": matched,
            "ratio_matched": matched[BASELINE] / matched["ace"],
            "mem_bytes_per_link_byte": {m: sum(p[m]["mem_bytes_per_link_byte"] for p in points)
                                        / len(points) for m in _MODES},
        }
    mean = sum(v["ratio_90"] for v in systems.values()) / len(systems)
    mean_matched = sum(v["ratio_matched"] for v in systems.values()) / len(systems)
    return {"experiment": "membw", "quick": quick, "settings": s, "target": TARGET,
            "systems": systems, "mem_bw_reduction": mean,
            "mem_bw_reduction_basis": "rtl" if all(v["ratio_90_basis"] == "rtl"
                                                   for v in systems.values()) else "model",
            "mem_bw_reduction_matched": mean_matched, "paper": {"mem_bw_reduction": 3.5}}


def _needed(req: dict) -> str:
    if req["rtl"] is not None:
        return f"{req['rtl']:.1f} (RTL)"
    m = req["model"]
    plateau = "" if m["u_sat"] is None else f", plateau {100 * m['u_sat']:.0f}%"
    return f"not reached; model estimate {m['estimate']:.1f}{plateau}"


def markdown(summary: dict) -> str:
    lines = ["# membw: link utilization against available memory bandwidth", "",
             f"All-reduce of {summary['settings']['bytes'] // 1024} KiB per node (fp32, ring "
             "algorithm per dimension). Memory bandwidth in bytes per cycle (= GB/s at 1 GHz).",
             ""]
    for system, sy in summary["systems"].items():
        rows = []
        for p in sy["points"]:
            a, b = p["ace"], p[BASELINE]
            rows.append([f"{p['background']:g}", f"{p['mem_available']:.1f}",
                         f"{100 * a['link_utilization']:.1f}%",
                         f"{100 * a['busiest_link_utilization']:.1f}%",
                         f"{100 * b['link_utilization']:.1f}%",
                         f"{100 * b['busiest_link_utilization']:.1f}%",
                         f"{a['mem_bytes_per_link_byte']:.2f}",
                         f"{b['mem_bytes_per_link_byte']:.2f}",
                         f"{a['mem_bandwidth_bytes_per_cycle']:.1f}",
                         f"{b['mem_bandwidth_bytes_per_cycle']:.1f}"])
        lines += [f"## {system}", "",
                  md_table(["background", "M available", "ACE util (mean)", "ACE util (busiest)",
                            "base util (mean)", "base util (busiest)", "ACE mem/link byte",
                            "base mem/link byte", "ACE mem used", "base mem used"], rows), ""]
    rows = []
    for system, sy in summary["systems"].items():
        req = sy["requirement"]
        errs = " / ".join(f"{100 * req[m]['model']['max_abs_error']:.1f}" for m in _MODES)
        rows.append([system, _needed(req["ace"]), _needed(req[BASELINE]),
                     f"**{sy['ratio_90']:.2f}x** ({sy['ratio_90_basis']})", errs,
                     f"{100 * sy['matched_level']:.0f}%",
                     f"{sy['matched_mem']['ace']:.1f} / {sy['matched_mem'][BASELINE]:.1f}",
                     f"{sy['ratio_matched']:.2f}x"])
    lines += ["## Memory bandwidth needed for 90% link utilization (busiest link)", "",
              md_table(["system", "ACE", "baseline", "baseline / ACE",
                        "model max error ACE / base (util. points)", "matched level",
                        "M at matched level ACE / base (RTL)", "ratio at matched level"], rows),
              "", f"Mean over systems: **{summary['mem_bw_reduction']:.2f}x** "
              f"({summary['mem_bw_reduction_basis']}); at the matched RTL level "
              f"{summary['mem_bw_reduction_matched']:.2f}x. Paper: 3.5x on average.", ""]
    return "\n".join(lines)


def _plots(out: Path, summary: dict) -> list[Path]:
    systems = list(summary["systems"])
    fig, axes = figure(1, len(systems), width=4.0 * len(systems), height=3.4)
    colors = {"ace": "tab:blue", BASELINE: "tab:orange"}
    for ax, system in zip(axes[0], systems):
        sy = summary["systems"][system]
        ms = [p["mem_available"] for p in sy["points"]]
        top = max(max(ms), *(sy["requirement"][m]["needed"] for m in _MODES))
        grid = [top * k / 100 for k in range(1, 101)]
        for mode in _MODES:
            us = [100 * p[mode]["busiest_link_utilization"] for p in sy["points"]]
            model = sy["requirement"][mode]["model"]
            ax.plot(ms, us, "o", color=colors[mode], label=f"{mode} RTL")
            ax.plot(grid, [100 * roofline(m, model["u_sat"], model["a"]) for m in grid], "--",
                    color=colors[mode], lw=1, label=f"{mode} model")
            ax.axvline(sy["requirement"][mode]["needed"], color=colors[mode], lw=0.8, ls=":")
        ax.axhline(100 * summary["target"], color="0.5", lw=0.8)
        ax.set_xlabel("memory bandwidth left to the collective (B/cycle)")
        ax.set_ylabel("busiest-link utilization (%)")
        ax.set_ylim(0, 105)
        ax.set_title(f"{system}: {sy['ratio_90']:.2f}x ({sy['ratio_90_basis']})", fontsize=9)
        ax.legend(fontsize=7)
    paths = [save_figure(fig, out / "membw_utilization.png")]

    fig, axes = figure(1, 1, width=6.0, height=3.0)
    ax = axes[0][0]
    xs = range(len(systems))
    for off, mode in enumerate(_MODES):
        vals = [summary["systems"][s]["mem_bytes_per_link_byte"][mode] for s in systems]
        ax.bar([x + (off - 0.5) * 0.38 for x in xs], vals, 0.38, color=colors[mode],
               label=mode)
    ax.set_xticks(list(xs), systems)
    ax.set_ylabel("memory bytes per link byte")
    ax.legend(fontsize=8)
    paths.append(save_figure(fig, out / "membw_bytes_per_link_byte.png"))
    return paths


def write(out: Path, summary: dict) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    md = out / "summary.md"
    md.write_text(markdown(summary) + "\n")
    return [write_json(out / "summary.json", summary), md, *_plots(out, summary)]
