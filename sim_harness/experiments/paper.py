"""``paper``: the three headline figures of the ACE paper from the ``membw``, ``utilization``
and ``training`` experiments, per node balance and against both baselines, next to the
paper's values.

``summary.json`` keys: ``by_ratio`` (balance -> ``mem_bw_reduction``: memory bytes per link
byte, baseline / ACE; ``link_util_gain``: mean ACE / baseline link utilization under the
workloads' compute memory load; ``link_util_gain_max``; ``iteration_speedup``: baseline / ACE
iteration time per workload; each per baseline, mean over systems), ``mem_bw_reduction_90``
(baseline / ACE memory bandwidth needed for 90% link utilization, over every balance's points;
``mem_bw_reduction_90_basis``: RTL or model), ``accelerators`` (real balances) and ``paper``.
"""

from __future__ import annotations

from pathlib import Path

from .common import (ACCELERATORS, BASELINES, figure, mark_accelerators, md_table, save_figure,
                     write_json)
from .training import SCALE_FACTORS

__all__ = ["write", "PAPER"]

PAPER = {"mem_bw_reduction": 3.5, "link_util_gain": 1.44, "link_util_gain_max": 2.67,
         "iteration_speedup": {"resnet50": 1.41, "gnmt": 1.12, "dlrm": 1.13}}
_COLORS = {"staged": "tab:orange", "p2p": "tab:green"}
#: The smallest compute per iteration the training experiment tries (``by_compute`` key).
_SMALL = f"{min(SCALE_FACTORS):g}"


def write(out: Path, s: dict, quick: bool, wall: float, rtl_seconds: float,
          points: int) -> dict:
    """Write ``summary.json``, ``summary.md`` and ``paper.png`` (the figures against the
    balance) from the summaries of the three experiments."""
    mem, util, train = s["membw"], s["utilization"], s["training"]
    by_ratio = {}
    for key in mem["by_ratio"]:
        by_ratio[key] = {
            "mem_bw_reduction": mem["by_ratio"][key]["mem_bw_reduction"],
            "link_util_gain": util["by_ratio"][key]["link_util_gain"],
            "link_util_gain_max": util["by_ratio"][key]["link_util_gain_max"],
            "iteration_speedup": train["by_ratio"][key]["iteration_speedup"],
            "iteration_speedup_by_compute":
                train["by_ratio"][key]["iteration_speedup_by_compute"],
        }
    doc = {
        "experiment": "paper", "quick": quick,
        "systems": {"membw": mem["settings"]["systems"],
                    "utilization": util["settings"]["systems"],
                    "training": train["settings"]["systems"]},
        "by_ratio": by_ratio,
        "mem_bw_reduction_90": mem["mem_bw_reduction_90"],
        "mem_bw_reduction_90_basis": mem["mem_bw_reduction_90_basis"],
        "training_pieces": {sy: v["pieces"] for sy, v in train["systems"].items()},
        "training_skipped": {sy: v["skipped"] for sy, v in train["systems"].items()},
        "accelerators": [{k: a[k] for k in ("name", "ratio", "source")} for a in ACCELERATORS],
        "paper": PAPER, "rtl_points": points, "wall_seconds": round(wall, 1),
        "rtl_seconds": round(rtl_seconds, 1),
    }
    write_json(out / "summary.json", doc)
    (out / "summary.md").write_text(markdown(doc))
    _plot(out, doc)
    return doc


def markdown(doc: dict) -> str:
    workloads = list(PAPER["iteration_speedup"])
    rows = []
    for key, v in doc["by_ratio"].items():
        for b in BASELINES:
            rows.append([key, b, f"{v['mem_bw_reduction'][b]:.2f}x",
                         f"{v['link_util_gain'][b]:.2f}x (max {v['link_util_gain_max'][b]:.2f}x)",
                         *(f"{v['iteration_speedup'][b][n]:.2f}x" for n in workloads)])
    rows.append(["paper", "its best", "3.5x", "1.44x (max 2.67x)",
                 *(f"{PAPER['iteration_speedup'][n]}x" for n in workloads)])
    small = _SMALL
    small_rows = [[key, b, *(f"{v['iteration_speedup_by_compute'][small][b][n]:.2f}x"
                             for n in workloads)]
                  for key, v in doc["by_ratio"].items() for b in BASELINES]
    acc = ", ".join(f"{a['name']} {a['ratio']:g}" for a in doc["accelerators"])
    return "\n".join([
        "# ACE paper figures on the RTL, across memory/network balances", "",
        f"R = memory bandwidth / link bandwidth per direction. Real accelerators: {acc}.", "",
        md_table(["R", "baseline", "memory per link byte, base / ACE",
                  "link util gain under compute load",
                  *(f"speedup {n}" for n in workloads)], rows), "",
        f"Iteration speedup with {small} of the compute per iteration (ResNet-50: a batch of "
        "2 per NPU, about the ASTRA-sim file's own compute):", "",
        md_table(["R", "baseline", *(f"speedup {n}" for n in workloads)], small_rows), "",
        "Memory bandwidth needed for 90% link utilization, baseline / ACE: " + ", ".join(
            f"{b} {doc['mem_bw_reduction_90'][b]:.2f}x ({doc['mem_bw_reduction_90_basis'][b]})"
            for b in BASELINES) + ".", "",
        "Details: [membw](membw/summary.md), [utilization](utilization/summary.md), "
        "[training](training/summary.md).", ""])


def _plot(out: Path, doc: dict) -> Path:
    workloads = list(PAPER["iteration_speedup"])
    ratios = [float(k) for k in doc["by_ratio"]]
    vals = list(doc["by_ratio"].values())
    panels = [("memory per link byte,\nbaseline / ACE", "mem_bw_reduction", None,
               PAPER["mem_bw_reduction"]),
              ("link utilization gain\nunder compute load", "link_util_gain", None,
               PAPER["link_util_gain"])]
    panels += [(f"iteration speedup\n{n}", "iteration_speedup", n, PAPER["iteration_speedup"][n])
               for n in workloads]
    fig, axes = figure(1, len(panels), width=2.9 * len(panels), height=3.0)
    for ax, (label, field, sub, paper) in zip(axes[0], panels):
        for b in BASELINES:
            ys = [v[field][b] if sub is None else v[field][b][sub] for v in vals]
            ax.plot(ratios, ys, "o-", color=_COLORS[b], label=f"vs {b}")
            if sub is not None:
                ax.plot(ratios, [v["iteration_speedup_by_compute"][_SMALL][b][sub]
                                 for v in vals], "o:", ms=3, color=_COLORS[b],
                        label=f"vs {b}, compute x{_SMALL}")
        ax.axhline(paper, color="0.4", lw=0.8, ls="--", label=f"paper {paper}x")
        ax.axhline(1.0, color="0.3", lw=0.6)
        ax.set_xlabel("memory / link bandwidth (R)")
        ax.set_ylabel(label, fontsize=8)
        mark_accelerators(ax)
        ax.legend(fontsize=6)
    return save_figure(fig, out / "paper.png")
