"""``training``: iteration time of ResNet-50, a GNMT-like transformer and DLRM with ACE, with the
memory-staged baseline and with no communication at all (ideal).

What is measured on the RTL: all-reduce (and, for DLRM, all-to-all) time in both modes at
several sizes, with the memory model's background share at 0 (compute idle) and at each
workload's compute memory share (:data:`~.workloads.COMPUTE_MEM_SHARE`). A model
``cycles = a + bytes / r`` per (system, mode, collective, share) is fitted to those points
(relative least squares, :func:`~.common.fit_latency_bandwidth`) and its largest error against
the RTL points is reported; the layer-sized collectives of the workloads (1 KB to 131 MB) are
then timed by this model, extrapolated linearly beyond the largest RTL size.

The iteration (:mod:`.overlap`): compute tasks of :mod:`.workloads` scaled onto our cycles
(:func:`~.workloads.compute_scale`), each gradient collective issued as soon as its layer's
backward ends and overlapped with the remaining compute, one collective at a time. Two
resource policies are tried for each mode and the faster one is kept (the paper compares with
the *best* baseline configuration):

* ``compute_first``: compute keeps its memory share; a collective beside compute takes the time
  measured at that background share (alone: at share 0). The baseline's kernels also take
  :data:`CORE_SHARE` of the compute cores while they run.
* ``comm_first``: a collective always gets the memory it would use alone (its time at share 0),
  and compute slows in proportion to the memory bandwidth it then lacks:
  ``rate = min(1, (M - m_c) / (share x M))``, ``m_c`` the collective's measured memory
  bandwidth; the baseline's core share applies too.

ACE uses no compute cores (core share 0). Ideal = the compute alone.
"""

from __future__ import annotations

from pathlib import Path

from ace.vocab import Mode

from .common import (BASELINE, ExperimentError, Plan, figure, fit_latency_bandwidth, fits,
                     md_table, mem_rate, save_figure, settings_for, write_json)
from .overlap import simulate
from .workloads import COMPUTE_MEM_SHARE, PLATFORM, WORKLOAD_NAMES, compute_scale, load_workload

__all__ = ["SETTINGS", "CORE_SHARE", "POLICIES", "check_inputs", "sizes", "plan", "calibrate",
           "CollectiveModel", "iteration", "analyze", "write", "SCALE_FACTORS"]

#: Share of the compute cores the baseline's collective kernels occupy while they run
#: (assumption: NCCL runs one thread block per channel; 8 of a V100's 80 SMs).
CORE_SHARE = 0.1
POLICIES = ("compute_first", "comm_first")
#: The compute scale is also tried at these multiples (model only, no extra RTL runs).
SCALE_FACTORS = (0.5, 1.0, 2.0)
_MODES = (Mode.ACE, BASELINE)

#: RTL sizes per collective; a size the engine cannot hold on a system (instruction memory:
#: a 2 MiB all-reduce or a 512 KiB all-to-all on 16 nodes) is left out there (:func:`sizes`).
SETTINGS = {
    "quick": {"systems": ["ring8"], "allreduce_sizes": [16384, 65536, 131072],
              "alltoall_sizes": [65536, 131072]},
    "full": {"systems": ["ring8", "ring16"],
             "allreduce_sizes": [16384, 65536, 262144, 1048576, 2097152],
             "alltoall_sizes": [65536, 262144, 1048576]},
}


def sizes(settings: dict, system: str, collective: str) -> list[int]:
    """The RTL sizes of ``collective`` on ``system``: the settings' sizes that fit."""
    return [s for s in settings[f"{collective}_sizes"] if fits(system, collective, s)]


def _shares(collective: str) -> list[float]:
    if collective == "alltoall":
        return [0.0, COMPUTE_MEM_SHARE["dlrm"]]
    return [0.0, *sorted(set(COMPUTE_MEM_SHARE.values()))]


def check_inputs() -> None:
    """Load every workload (the ResNet-50 file must be readable) before any RTL run."""
    for name in WORKLOAD_NAMES:
        load_workload(name)


def plan(quick: bool, systems=None) -> Plan:
    s = settings_for(SETTINGS, quick, systems)
    p = Plan()
    for system in s["systems"]:
        for collective in ("allreduce", "alltoall"):
            fitting = sizes(s, system, collective)
            if len(fitting) < 2:
                tried = ", ".join(str(n) for n in s[f"{collective}_sizes"])
                raise ExperimentError(
                    f"training: {system}: {len(fitting)} of the {collective} sizes ({tried} "
                    f"bytes) fit its engines' instruction memory and memory; the collective "
                    f"model needs two; leave {system} out of --systems")
            for share in _shares(collective):
                for size in fitting:
                    p.add(system, collective, size, share)
    return p


def calibrate(measured: dict, system: str, quick: bool) -> dict:
    """Fits per (mode, collective, share): ``{key: fit}`` with ``key = "mode/collective/share"``,
    and each mode's memory bytes per node per collective byte (the mean over sizes)."""
    s = SETTINGS["quick" if quick else "full"]
    fits, mem_per_byte = {}, {}
    for collective in ("allreduce", "alltoall"):
        for mode in _MODES:
            ratios = []
            for share in _shares(collective):
                recs = [measured[(system, collective, size, round(share, 6))][mode]
                        for size in sizes(s, system, collective)]
                fit = fit_latency_bandwidth([r.bytes for r in recs], [r.cycles for r in recs])
                fits[f"{mode}/{collective}/{share:g}"] = dict(fit, mode=mode,
                                                             collective=collective, share=share)
                ratios += [r.mem_bytes_per_node / r.bytes for r in recs]
            mem_per_byte[f"{mode}/{collective}"] = sum(ratios) / len(ratios)
    return {"fits": fits, "mem_per_byte": mem_per_byte}


class CollectiveModel:
    """Collective time and memory bandwidth from the calibrated fits."""

    def __init__(self, calibration: dict, mode: str):
        self.fits, self.mem, self.mode = calibration["fits"], calibration["mem_per_byte"], mode

    def cycles(self, collective: str, nbytes: float, share: float) -> float:
        fit = self.fits[f"{self.mode}/{collective}/{share:g}"]
        return fit["a"] + nbytes / fit["r"]

    def mem_bandwidth(self, collective: str, nbytes: float) -> float:
        """Memory bytes per cycle per node the collective uses when it runs alone."""
        return self.mem[f"{self.mode}/{collective}"] * nbytes / self.cycles(collective, nbytes,
                                                                            0.0)


def iteration(workload, model: CollectiveModel, *, mode: str, policy: str, scale: float,
              mem_rate_bpc: float, core_share: float = CORE_SHARE) -> dict:
    """One iteration of ``workload`` in ``mode`` under ``policy`` (see the module docstring)."""
    share = workload.mem_share
    cores = core_share if Mode(mode).in_memory else 0.0
    tasks = [t.cycles * scale for t in workload.tasks]

    def coll_time(comm, compute_busy):
        s = share if (compute_busy and policy == "compute_first") else 0.0
        return model.cycles(comm.collective, comm.nbytes, s)

    def compute_rate(comm):
        if comm is None:
            return 1.0
        rate = 1.0 - cores
        if policy == "comm_first" and share > 0:
            m_c = model.mem_bandwidth(comm.collective, comm.nbytes)
            rate *= max(0.01, min(1.0, (mem_rate_bpc - m_c) / (share * mem_rate_bpc)))
        return rate

    result = simulate(tasks, workload.comms, coll_time, compute_rate)
    result["ideal_cycles"] = sum(tasks)
    return result


def _best(workload, models, scale, rate) -> dict:
    out = {}
    for mode in _MODES:
        runs = {pol: iteration(workload, models[mode], mode=mode, policy=pol, scale=scale,
                               mem_rate_bpc=rate) for pol in POLICIES}
        best = min(POLICIES, key=lambda pol: runs[pol]["cycles"])
        out[mode] = {"best_policy": best, "runs": runs, "cycles": runs[best]["cycles"]}
    return out


def analyze(measured: dict, quick: bool, systems=None) -> dict:
    s = settings_for(SETTINGS, quick, systems)
    workloads = {name: load_workload(name) for name in WORKLOAD_NAMES}
    systems, timelines = {}, {}
    for system in s["systems"]:
        cal = calibrate(measured, system, quick)
        sysrec = next(v["system"] for k, v in measured.items() if k[0] == system)
        rate = mem_rate(system)
        scale = compute_scale(rate, sysrec["clock_mhz"])
        models = {mode: CollectiveModel(cal, mode) for mode in _MODES}
        per_workload = {}
        for name, wl in workloads.items():
            res = _best(wl, models, scale, rate)
            ideal = res["ace"]["runs"]["compute_first"]["ideal_cycles"]
            sens = {}
            for factor in SCALE_FACTORS:
                r = res if factor == 1.0 else _best(wl, models, scale * factor, rate)
                sens[f"{factor:g}"] = r[BASELINE]["cycles"] / r["ace"]["cycles"]
            per_workload[name] = {
                "ideal_cycles": ideal,
                "ace_cycles": res["ace"]["cycles"], "baseline_cycles": res[BASELINE]["cycles"],
                "ace_policy": res["ace"]["best_policy"],
                "baseline_policy": res[BASELINE]["best_policy"],
                "policy_cycles": {mode: {pol: res[mode]["runs"][pol]["cycles"]
                                         for pol in POLICIES} for mode in _MODES},
                "speedup": res[BASELINE]["cycles"] / res["ace"]["cycles"],
                "ace_over_ideal": res["ace"]["cycles"] / ideal,
                "baseline_over_ideal": res[BASELINE]["cycles"] / ideal,
                "speedup_vs_compute_scale": sens,
                "comm_bytes": wl.comm_bytes(), "compute_mem_share": wl.mem_share,
            }
            timelines[(system, name)] = {mode: res[mode]["runs"][res[mode]["best_policy"]]
                                         for mode in _MODES}
        systems[system] = {"compute_scale": scale, "mem_bytes_per_cycle": rate,
                           "calibration": cal, "workloads": per_workload,
                           "calibration_max_rel_error": max(f["max_rel_error"] for f in
                                                            cal["fits"].values())}
    speedup = {name: sum(systems[sy]["workloads"][name]["speedup"] for sy in systems)
               / len(systems) for name in WORKLOAD_NAMES}
    return {"experiment": "training", "quick": quick, "settings": s, "platform": PLATFORM,
            "core_share": CORE_SHARE, "compute_mem_share": COMPUTE_MEM_SHARE,
            "workload_params": {n: _params(w) for n, w in workloads.items()},
            "systems": systems, "iteration_speedup": speedup,
            "paper": {"resnet50": 1.41, "gnmt": 1.12, "dlrm": 1.13},
            "_timelines": timelines, "_workloads": workloads}


def _params(wl) -> dict:
    return {"tasks": len(wl.tasks), "collectives": len(wl.comms),
            "compute_reference_cycles": wl.compute_cycles,
            "allreduce_bytes": wl.comm_bytes("allreduce"),
            "alltoall_bytes": wl.comm_bytes("alltoall"),
            **{k: v for k, v in wl.params.items()}}


def _fmt_cycles(c: float) -> str:
    return f"{c / 1e6:,.2f} M"


def markdown(summary: dict) -> str:
    lines = ["# training: iteration time, ACE vs baseline vs ideal", ""]
    rows = []
    for system, srec in summary["systems"].items():
        for name, w in srec["workloads"].items():
            rows.append([system, name, _fmt_cycles(w["ideal_cycles"]),
                         _fmt_cycles(w["ace_cycles"]) + f" ({w['ace_policy']})",
                         _fmt_cycles(w["baseline_cycles"]) + f" ({w['baseline_policy']})",
                         f"{w['ace_over_ideal']:.2f}", f"{w['baseline_over_ideal']:.2f}",
                         f"**{w['speedup']:.2f}x**",
                         " / ".join(f"{v:.2f}" for v in w["speedup_vs_compute_scale"].values())])
    lines += [md_table(["system", "workload", "ideal", "ACE (policy)", "baseline (policy)",
                        "ACE / ideal", "baseline / ideal", "speedup",
                        "speedup at compute x" + "/".join(f"{f:g}" for f in SCALE_FACTORS)],
                       rows), ""]
    paper = summary["paper"]
    lines += ["Mean speedup over systems (paper, over its best baseline): " + ", ".join(
        f"{n} {summary['iteration_speedup'][n]:.2f}x ({paper[n]}x)" for n in WORKLOAD_NAMES),
        ""]
    lines += ["## Collective model fits (cycles = a + bytes / r)", ""]
    rows = []
    for system, srec in summary["systems"].items():
        for fit in srec["calibration"]["fits"].values():
            rows.append([system, fit["mode"], fit["collective"], f"{fit['share']:g}",
                         f"{fit['a']:,.0f}", f"{fit['r']:.2f}",
                         f"{100 * fit['max_rel_error']:.1f}%",
                         ", ".join(f"{s // 1024}K" for s, _ in fit["points"])])
    lines += [md_table(["system", "mode", "collective", "background share", "a (cycles)",
                        "r (bytes/cycle)", "max error vs RTL", "RTL sizes"], rows), ""]
    return "\n".join(lines)


def _plots(out: Path, summary: dict) -> list[Path]:
    paths = []
    systems = list(summary["systems"])
    fig, axes = figure(1, len(systems), width=4.2 * len(systems), height=3.2)
    for ax, system in zip(axes[0], systems):
        w = summary["systems"][system]["workloads"]
        xs = range(len(WORKLOAD_NAMES))
        for off, (key, label, color) in enumerate(
                (("ideal_cycles", "ideal", "0.6"), ("ace_cycles", "ACE", "tab:blue"),
                 ("baseline_cycles", "baseline", "tab:orange"))):
            vals = [w[n][key] / w[n]["ideal_cycles"] for n in WORKLOAD_NAMES]
            ax.bar([x + (off - 1) * 0.27 for x in xs], vals, 0.27, label=label, color=color)
        ax.set_xticks(list(xs), [f"{n}\n{w[n]['speedup']:.2f}x" for n in WORKLOAD_NAMES])
        ax.set_ylabel("iteration time / ideal")
        ax.set_title(f"{system}: speedup ACE over baseline")
        ax.legend(fontsize=8)
    paths.append(save_figure(fig, out / "training_iteration.png"))

    system = systems[0]
    fig, axes = figure(len(WORKLOAD_NAMES), 1, width=8.0, height=1.9)
    for ax, name in zip(axes[:, 0], WORKLOAD_NAMES):
        tl = summary["_timelines"][(system, name)]
        for row, mode in enumerate((BASELINE, Mode.ACE)):
            res = tl[mode]
            y = 2 * row
            ax.broken_barh([(a / 1e6, (b - a) / 1e6) for a, b, _ in res["compute_spans"]],
                           (y + 1, 0.8), color="0.6")
            ax.broken_barh([(a / 1e6, (b - a) / 1e6) for a, b, _ in res["comm_spans"]],
                           (y, 0.8), color="tab:blue" if mode == "ace" else "tab:orange")
        ax.set_yticks([0.4, 1.4, 2.4, 3.4], ["baseline comm", "baseline compute", "ACE comm",
                                             "ACE compute"], fontsize=7)
        ax.set_title(f"{name} on {system} (Mcycles)", fontsize=9)
    paths.append(save_figure(fig, out / "training_timeline.png"))

    fig, axes = figure(1, 2, width=8.4, height=3.2)
    fits = summary["systems"][system]["calibration"]["fits"]
    for ax, collective in zip(axes[0], ("allreduce", "alltoall")):
        for fit in fits.values():
            if fit["collective"] != collective:
                continue
            xs = [p[0] for p in fit["points"]]
            ys = [p[1] for p in fit["points"]]
            color = "tab:blue" if fit["mode"] == "ace" else "tab:orange"
            style = "-" if fit["share"] == 0 else ":"
            ax.plot(xs, ys, "o", color=color, ms=3)
            ax.plot(xs, [fit["a"] + x / fit["r"] for x in xs], style, color=color, lw=1,
                    label=f"{fit['mode']} share {fit['share']:g}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("bytes per node")
        ax.set_ylabel("cycles")
        ax.set_title(f"{collective} on {system}: RTL (dots), fit (lines)", fontsize=9)
        ax.legend(fontsize=6)
    paths.append(save_figure(fig, out / "training_calibration.png"))
    return paths


def public(summary: dict) -> dict:
    """The summary without the in-memory parts (timelines, workload objects)."""
    return {k: v for k, v in summary.items() if not k.startswith("_")}


def write(out: Path, summary: dict) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    md = out / "summary.md"
    md.write_text(markdown(summary) + "\n")
    return [write_json(out / "summary.json", public(summary)), md, *_plots(out, summary)]
