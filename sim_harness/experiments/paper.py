"""``paper``: the three headline figures of the ACE paper from the ``membw``, ``utilization``
and ``training`` experiments, next to the paper's values.

``summary.json`` keys: ``mem_bw_reduction`` (mean over systems of the baseline / ACE memory
bandwidth needed for 90% link utilization; ``mem_bw_reduction_basis`` says whether it is
interpolated from RTL points or estimated from the fitted model), ``link_util_gain`` (mean ACE /
baseline link utilization under the workloads' compute memory load) and ``iteration_speedup``
(``{"resnet50", "gnmt", "dlrm"}``: baseline / ACE iteration time, mean over systems).
"""

from __future__ import annotations

from pathlib import Path

from .common import figure, md_table, save_figure, write_json

__all__ = ["write"]


def write(out: Path, s: dict, quick: bool, wall: float, rtl_seconds: float,
          points: int) -> dict:
    """Write ``summary.json`` (the three headline figures next to the paper's), ``summary.md``
    and ``paper.png`` from the summaries of the three experiments."""
    mem, util, train = s["membw"], s["utilization"], s["training"]
    doc = {
        "experiment": "paper", "quick": quick,
        "mem_bw_reduction": mem["mem_bw_reduction"],
        "mem_bw_reduction_basis": mem["mem_bw_reduction_basis"],
        "mem_bw_reduction_matched": mem["mem_bw_reduction_matched"],
        "link_util_gain": util["link_util_gain"],
        "link_util_gain_max": util["link_util_gain_max"],
        "iteration_speedup": train["iteration_speedup"],
        "paper": {"mem_bw_reduction": 3.5, "link_util_gain": 1.44, "link_util_gain_max": 2.67,
                  "iteration_speedup": train["paper"]},
        "rtl_points": points, "wall_seconds": round(wall, 1),
        "rtl_seconds": round(rtl_seconds, 1),
    }
    write_json(out / "summary.json", doc)
    rows = [["memory bandwidth for 90% link utilization, baseline / ACE",
             f"{doc['mem_bw_reduction']:.2f}x ({doc['mem_bw_reduction_basis']}; "
             f"{doc['mem_bw_reduction_matched']:.2f}x at a level both reach on the RTL)",
             "3.5x (average)"],
            ["link utilization under training memory load, ACE / baseline",
             f"{doc['link_util_gain']:.2f}x (max {doc['link_util_gain_max']:.2f}x)",
             "1.44x (up to 2.67x)"]]
    for n, v in doc["iteration_speedup"].items():
        rows.append([f"iteration time speedup, {n}", f"{v:.2f}x",
                     f"{train['paper'][n]}x (average, over the best baseline)"])
    (out / "summary.md").write_text("\n".join([
        "# ACE paper figures on the RTL", "",
        md_table(["figure", "ours", "paper"], rows), "",
        "Details: [membw](membw/summary.md), [utilization](utilization/summary.md), "
        "[training](training/summary.md).", ""]))
    fig, axes = figure(1, 1, width=7.0, height=3.2)
    ax = axes[0][0]
    labels = ["mem BW\nreduction", "link util\ngain", *(f"speedup\n{n}" for n in
                                                        doc["iteration_speedup"])]
    ours = [doc["mem_bw_reduction"], doc["link_util_gain"], *doc["iteration_speedup"].values()]
    paper = [3.5, 1.44, *train["paper"].values()]
    xs = range(len(labels))
    ax.bar([x - 0.19 for x in xs], ours, 0.38, label="ours (RTL)", color="tab:blue")
    ax.bar([x + 0.19 for x in xs], paper, 0.38, label="paper", color="0.6")
    ax.axhline(1.0, color="0.3", lw=0.8)
    ax.set_xticks(list(xs), labels, fontsize=8)
    ax.set_ylabel("ACE over baseline (x)")
    ax.legend(fontsize=8)
    save_figure(fig, out / "paper.png")
    return doc
