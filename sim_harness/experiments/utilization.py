"""``utilization``: effective network-bandwidth utilization of ACE over each baseline while the
training compute loads memory, across node balances (``--mem-ratio``).

What is measured on the RTL: the all-reduce of the ``membw`` size on each system, every mode,
at every balance ``R``, with the memory model's background share set to each workload's compute
memory share (:data:`~.workloads.COMPUTE_MEM_SHARE`: the memory bandwidth the compute of
ResNet-50, the transformer and DLRM keeps busy; values and reasoning in :mod:`.workloads`), and
at share 0 for reference. The figure is the link utilization of docs/architecture.md, "What is
measured" (payload bytes over link capacity, averaged over the links used); the gain is ACE's
over a baseline's, which is also the ratio of their bus bandwidths. Mean and maximum are over
systems x workloads per balance (``by_ratio``), as the paper gives "1.44x on average, up to
2.67x" over its workloads and network sizes. The training experiment adds the same figure
averaged over a simulated iteration.
"""

from __future__ import annotations

from pathlib import Path

from .common import (BASELINES, MODES, Plan, figure, mark_accelerators, md_table, save_figure,
                     settings_for, write_json)
from .membw import SETTINGS as MEMBW_SETTINGS
from .workloads import COMPUTE_MEM_SHARE, WORKLOAD_NAMES

__all__ = ["settings", "plan", "analyze", "write", "markdown"]


def settings(quick: bool, systems=None, ratios=None) -> dict:
    s = settings_for(MEMBW_SETTINGS, quick, systems, ratios)
    del s["low_backgrounds"]                   # membw's own starved points
    return dict(s, shares={"none": 0.0, **COMPUTE_MEM_SHARE})


def plan(s: dict) -> Plan:
    p = Plan()
    for system in s["systems"]:
        for ratio in s["ratios"]:
            for share in s["shares"].values():
                p.add(system, "allreduce", s["bytes"], share, ratio)
    return p


def analyze(measured: dict, s: dict) -> dict:
    rows, by_ratio = [], {}
    for ratio in s["ratios"]:
        gains = {b: [] for b in BASELINES}
        per_system = {}
        for system in s["systems"]:
            mine = {b: [] for b in BASELINES}
            for load, share in s["shares"].items():
                entry = measured[(system, "allreduce", s["bytes"], round(share, 6),
                                  round(ratio, 6))]
                row = {"system": system, "ratio": ratio, "workload": load, "background": share,
                       **{f"{m}_link_utilization": entry[m].link_utilization for m in MODES},
                       **{f"{m}_busbw_gbps": entry[m].busbw_gbps for m in MODES},
                       "gain": {b: entry["ace"].link_utilization / entry[b].link_utilization
                                for b in BASELINES}}
                rows.append(row)
                if load in WORKLOAD_NAMES:
                    for b in BASELINES:
                        gains[b].append(row["gain"][b])
                        mine[b].append(row["gain"][b])
            per_system[system] = {"link_util_gain": {b: sum(g) / len(g)
                                                     for b, g in mine.items()}}
        by_ratio[f"{ratio:g}"] = {
            "systems": per_system,
            "link_util_gain": {b: sum(g) / len(g) for b, g in gains.items()},
            "link_util_gain_max": {b: max(g) for b, g in gains.items()},
            "link_util_gain_min": {b: min(g) for b, g in gains.items()}}
    return {"experiment": "utilization", "settings": s, "rows": rows, "by_ratio": by_ratio,
            "paper": {"link_util_gain": 1.44, "link_util_gain_max": 2.67}}


def markdown(summary: dict) -> str:
    s = summary["settings"]
    rows = [[r["system"], f"{r['ratio']:g}", r["workload"], f"{r['background']:g}",
             *(f"{100 * r[f'{m}_link_utilization']:.1f}%" for m in MODES),
             *((f"**{r['gain'][b]:.2f}x**" if r["workload"] != "none"
                else f"{r['gain'][b]:.2f}x") for b in BASELINES)]
            for r in summary["rows"]]
    per_ratio = [[key, *(f"**{v['link_util_gain'][b]:.2f}x** (max {v['link_util_gain_max'][b]:.2f}x,"
                         f" min {v['link_util_gain_min'][b]:.2f}x)" for b in BASELINES)]
                 for key, v in summary["by_ratio"].items()]
    return "\n".join([
        "# utilization: link utilization under the training compute's memory load", "",
        f"All-reduce of {s['bytes'] // 1024} KiB per node; background share = the workload's "
        "compute memory share (none: 0); R = memory / link bandwidth per direction.", "",
        "## Gain over systems x workloads, per balance (paper: 1.44x on average, up to "
        "2.67x)", "",
        md_table(["R", *(f"ACE / {b}" for b in BASELINES)], per_ratio), "",
        "## Every point", "",
        md_table(["system", "R", "compute load", "background share",
                  *(f"{m} link util" for m in MODES), *(f"ACE / {b}" for b in BASELINES)],
                 rows), ""])


_COLORS = {"staged": "tab:orange", "p2p": "tab:green"}


def _plot(out: Path, summary: dict) -> Path:
    fig, axes = figure(1, 1, width=5.6, height=3.4)
    ax = axes[0][0]
    ratios = [float(k) for k in summary["by_ratio"]]
    for b in BASELINES:
        vals = list(summary["by_ratio"].values())
        ax.plot(ratios, [v["link_util_gain"][b] for v in vals], "o-", color=_COLORS[b],
                label=f"ACE / {b} (mean)")
        ax.fill_between(ratios, [v["link_util_gain_min"][b] for v in vals],
                        [v["link_util_gain_max"][b] for v in vals], color=_COLORS[b],
                        alpha=0.15)
    ax.axhline(1.44, color="0.4", lw=0.8, ls="--", label="paper 1.44x (mean)")
    ax.axhline(2.67, color="0.6", lw=0.8, ls=":", label="paper 2.67x (max)")
    ax.axhline(1.0, color="0.3", lw=0.6)
    ax.set_xlabel("memory / link bandwidth per direction (R)")
    ax.set_ylabel("link utilization gain under compute load")
    mark_accelerators(ax)
    ax.legend(fontsize=7)
    return save_figure(fig, out / "utilization.png")


def write(out: Path, summary: dict) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    md = out / "summary.md"
    md.write_text(markdown(summary) + "\n")
    return [write_json(out / "summary.json", summary), md, _plot(out, summary)]
