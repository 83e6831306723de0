"""``utilization``: effective network-bandwidth utilization of ACE over the baseline while the
training compute loads memory.

What is measured on the RTL: the all-reduce of the ``membw`` size on each system, both modes,
with the memory model's background share set to each workload's compute memory share
(:data:`~.workloads.COMPUTE_MEM_SHARE`: the memory bandwidth the compute of ResNet-50, the
transformer and DLRM keeps busy; values and reasoning in :mod:`.workloads`), and at share 0 for
reference. The figure is the link utilization of docs/architecture.md, "What is measured"
(payload bytes over link capacity, averaged over the links used); the gain is ACE's over the baseline's, which is also
the ratio of their bus bandwidths. Mean and maximum are over systems x workloads, as the paper
gives "1.44x on average, up to 2.67x" over its workloads and network sizes.
"""

from __future__ import annotations

from pathlib import Path

from .common import BASELINE, Plan, figure, md_table, save_figure, settings_for, write_json
from .membw import SETTINGS as MEMBW_SETTINGS
from .workloads import COMPUTE_MEM_SHARE, WORKLOAD_NAMES

__all__ = ["plan", "analyze", "write", "markdown"]


def _settings(quick: bool, systems=None) -> dict:
    s = settings_for(MEMBW_SETTINGS, quick, systems)
    return {"systems": s["systems"], "bytes": s["bytes"],
            "shares": {"none": 0.0, **COMPUTE_MEM_SHARE}}


def plan(quick: bool, systems=None) -> Plan:
    s = _settings(quick, systems)
    p = Plan()
    for system in s["systems"]:
        for share in s["shares"].values():
            p.add(system, "allreduce", s["bytes"], share)
    return p


def analyze(measured: dict, quick: bool, systems=None) -> dict:
    s = _settings(quick, systems)
    rows, gains = [], []
    for system in s["systems"]:
        for load, share in s["shares"].items():
            entry = measured[(system, "allreduce", s["bytes"], round(share, 6))]
            a, b = entry["ace"], entry[BASELINE]
            gain = a.link_utilization / b.link_utilization
            rows.append({"system": system, "workload": load, "background": share,
                         "ace_link_utilization": a.link_utilization,
                         "baseline_link_utilization": b.link_utilization,
                         "ace_busbw_gbps": a.busbw_gbps, "baseline_busbw_gbps": b.busbw_gbps,
                         "gain": gain})
            if load in WORKLOAD_NAMES:
                gains.append(gain)
    return {"experiment": "utilization", "quick": quick, "settings": s, "rows": rows,
            "link_util_gain": sum(gains) / len(gains), "link_util_gain_max": max(gains),
            "link_util_gain_min": min(gains),
            "paper": {"link_util_gain": 1.44, "link_util_gain_max": 2.67}}


def markdown(summary: dict) -> str:
    rows = [[r["system"], r["workload"], f"{r['background']:g}",
             f"{100 * r['ace_link_utilization']:.1f}%",
             f"{100 * r['baseline_link_utilization']:.1f}%",
             f"{r['ace_busbw_gbps']:.2f} / {r['baseline_busbw_gbps']:.2f}",
             f"**{r['gain']:.2f}x**" if r["workload"] != "none" else f"{r['gain']:.2f}x"]
            for r in summary["rows"]]
    return "\n".join([
        "# utilization: link utilization under the training compute's memory load", "",
        f"All-reduce of {summary['settings']['bytes'] // 1024} KiB per node; background share "
        "= the workload's compute memory share (none: 0).", "",
        md_table(["system", "compute load", "background share", "ACE link util",
                  "baseline link util", "busbw GB/s ACE / base", "ACE / baseline"], rows), "",
        f"Gain over systems x workloads: mean **{summary['link_util_gain']:.2f}x**, "
        f"max {summary['link_util_gain_max']:.2f}x, min {summary['link_util_gain_min']:.2f}x "
        "(paper: 1.44x on average, up to 2.67x).", ""])


def _plot(out: Path, summary: dict) -> Path:
    systems = summary["settings"]["systems"]
    loads = list(summary["settings"]["shares"])
    fig, axes = figure(1, len(systems), width=3.6 * len(systems), height=3.2)
    by = {(r["system"], r["workload"]): r for r in summary["rows"]}
    for ax, system in zip(axes[0], systems):
        xs = range(len(loads))
        for off, (key, label, color) in enumerate(
                (("ace_link_utilization", "ACE", "tab:blue"),
                 ("baseline_link_utilization", "baseline", "tab:orange"))):
            ax.bar([x + (off - 0.5) * 0.38 for x in xs],
                   [100 * by[(system, w)][key] for w in loads], 0.38, color=color, label=label)
        ax.set_xticks(list(xs), [f"{w}\n{by[(system, w)]['gain']:.2f}x" for w in loads],
                      fontsize=8)
        ax.set_ylabel("link utilization (%)")
        ax.set_ylim(0, 100)
        ax.set_title(system, fontsize=9)
        ax.legend(fontsize=7)
    return save_figure(fig, out / "utilization.png")


def write(out: Path, summary: dict) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    md = out / "summary.md"
    md.write_text(markdown(summary) + "\n")
    return [write_json(out / "summary.json", summary), md, _plot(out, summary)]
