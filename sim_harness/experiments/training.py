"""``training``: iteration time of ResNet-50, a GNMT-sized transformer and DLRM with ACE, with
each baseline and with no communication at all (ideal), across node balances
(``--mem-ratio``).

Collective times come from a model calibrated on the RTL (:class:`CollectiveModel`), per
system, mode and collective::

    cycles(S, M) = a + S x max(1 / r, k / (eta x M))

the larger of the network-bound and the memory-bound time of ``S`` bytes per node with ``M``
bytes per cycle of memory left to the collective. ``a`` and ``r`` are fitted (relative least
squares, :func:`~.common.fit_latency_bandwidth`) to a ladder of sizes at the highest balance
with the memory idle, where every mode is network-bound; ``k`` is the measured memory traffic
per node per collective byte (exact counters: 2 for ACE's all-reduce); ``eta``, the share of
the memory the collective turns into progress when memory-bound, is fitted to the reference
size at every balance and compute memory share. The model's largest relative error against
every RTL point it was made from is reported.

No collective is timed beyond the calibrated sizes: the largest ladder size is close to the
largest program the engine's instruction memory holds (``program_words``: a 6 MiB all-reduce
fits the ``harness`` engines, 8 MiB does not), so a larger workload collective (GNMT's 131 MB
embedding gradient, DLRM's 27 MB all-to-all) runs as it would have to on this engine: as
back-to-back collectives of at most the largest RTL size, each paying ``a``. The summary
lists, per workload, its largest collective and the pieces it runs as.

The iteration (:mod:`.overlap`): compute tasks of :mod:`.workloads` scaled onto our cycles
(:func:`~.workloads.compute_scale`: at every balance the compute keeps the reference NPU's
ratio to memory bandwidth), each gradient collective issued as soon as its layer's backward
ends and overlapped with the remaining compute, one collective at a time. Every setting below
is tried for each mode and the fastest is kept (the paper compares with the *best* baseline
configuration):

* resource policy ``compute_first``: compute keeps its memory share; a collective beside
  compute gets the rest (alone: all of it). ``comm_first``: a collective always gets the
  memory it would use alone, and compute slows in proportion to the memory bandwidth it then
  lacks: ``rate = min(1, (M - m_c) / (share x M))``, ``m_c`` the collective's memory bandwidth;
* the baselines' core share (:data:`CORE_SHARES`): the collective kernels take that share of
  the compute cores while they run (compute slows by it), and drive the collective at full
  speed only from :data:`CORES_SATURATE` up (below, proportionally slower).

ACE uses no compute cores. Ideal = the compute alone. Link utilization is reported averaged
over the iteration's collectives (payload per link over the time collectives run) and over the
whole iteration.
"""

from __future__ import annotations

from pathlib import Path

from ace.vocab import Mode

from .common import (BASELINES, MODES, ExperimentError, Plan, figure, fit_latency_bandwidth,
                     fits, link_rate, mark_accelerators, md_table, mean, mem_rate, save_figure,
                     settings_for, write_json)
from .membw import SETTINGS as MEMBW_SETTINGS
from .overlap import simulate
from .workloads import COMPUTE_MEM_SHARE, PLATFORM, WORKLOAD_NAMES, compute_scale, load_workload

__all__ = ["SETTINGS", "CORE_SHARES", "CORES_SATURATE", "POLICIES",
           "check_inputs", "settings", "sizes", "plan", "calibrate", "fit_eta",
           "CollectiveModel", "iteration", "analyze", "write", "SCALE_FACTORS"]

#: Shares of the compute cores the baselines' collective kernels may take while they run; the
#: best per workload and balance is kept. Assumption: NCCL runs one thread block per channel
#: and uses a few to a few tens of channels, of a V100's 80 SMs.
CORE_SHARES = (0.05, 0.1, 0.2)
#: The core share from which a baseline's kernels drive the collective as fast as the RTL
#: measures it (assumption: 8 of 80 SMs); below it the collective is proportionally slower.
CORES_SATURATE = 0.1
POLICIES = ("compute_first", "comm_first")
#: The compute per iteration is also tried at these multiples (model only, no extra RTL runs):
#: for ResNet-50, batches of 2 (about the ASTRA-sim file's own compute), 8 and 32 per NPU.
SCALE_FACTORS = (0.0625, 0.25, 1.0)

#: RTL ladder sizes per collective (at the highest balance, memory idle); a size the engine
#: cannot hold on a system is left out there (:func:`sizes`). ``ref_alltoall`` is the all-to-all
#: size measured at every balance and DLRM's compute share (the all-reduce's is membw's size).
SETTINGS = {
    "quick": {"systems": ["ring8", "torus4x2"],
              "allreduce_sizes": [16384, 65536, 131072, 524288],
              "alltoall_sizes": [65536, 131072, 262144], "ref_alltoall": 131072},
    "full": {"systems": ["ring8", "ring16", "torus4x4"],
             "allreduce_sizes": [65536, 1048576, 4194304, 6291456],
             "alltoall_sizes": [262144, 1048576, 3145728], "ref_alltoall": 1048576},
}


def settings(quick: bool, systems=None, ratios=None) -> dict:
    s = settings_for(SETTINGS, quick, systems, ratios)
    s["ref_allreduce"] = settings_for(MEMBW_SETTINGS, quick)["bytes"]
    return s


def sizes(s: dict, system: str, collective: str) -> list[int]:
    """The RTL ladder sizes of ``collective`` on ``system``: the settings' sizes that fit."""
    return [n for n in s[f"{collective}_sizes"] if fits(system, collective, n, s["mem_bytes"])]


def _shares(collective: str) -> list[float]:
    if collective == "alltoall":
        return [0.0, COMPUTE_MEM_SHARE["dlrm"]]
    return [0.0, *sorted(set(COMPUTE_MEM_SHARE.values()))]


def check_inputs() -> None:
    """Load every workload (the ResNet-50 file must be readable) before any RTL run."""
    for name in WORKLOAD_NAMES:
        load_workload(name)


def _keys(s: dict, system: str, collective: str) -> list[tuple]:
    """The point keys the model of ``collective`` on ``system`` is made from: the ladder at the
    highest balance (memory idle), then the reference size at every balance and share."""
    p = Plan()
    for n in sizes(s, system, collective):
        p.add(system, collective, n, 0.0, max(s["ratios"]))
    for r in s["ratios"]:
        for b in _shares(collective):
            p.add(system, collective, s[f"ref_{collective}"], b, r)
    return p.keys


def collectives(s: dict, system: str) -> list[str]:
    """The collectives modelled on ``system``: those with two ladder sizes that fit (the
    all-to-all is compiled for rings, fully connected and switch systems only, so a torus runs
    no DLRM). Raises :class:`ExperimentError` if the all-reduce is not among them."""
    have = [c for c in ("allreduce", "alltoall") if len(sizes(s, system, c)) >= 2]
    if "allreduce" not in have:
        tried = ", ".join(str(n) for n in s["allreduce_sizes"])
        raise ExperimentError(
            f"training: {system}: fewer than two of the allreduce sizes ({tried} bytes) fit "
            f"its engines' instruction memory and memory; the collective model needs two; "
            f"leave {system} out of --systems")
    return have


def plan(s: dict) -> Plan:
    p = Plan()
    for system in s["systems"]:
        for collective in collectives(s, system):
            for key in _keys(s, system, collective):
                p.add(*key)
    return p


def fit_eta(points, a: float, r: float, k: float) -> tuple[float, float]:
    """The ``eta`` in (0, 1] that minimises the squared relative error of
    ``a + S max(1/r, k/(eta M))`` over ``points`` ``(S, M, cycles)``, on a grid of 0.005;
    returns ``(eta, max relative error)``."""
    def errors(eta):
        return [abs(a + n * max(1 / r, k / (eta * m)) - c) / c for n, m, c in points]

    best = min((sum(e * e for e in errors(eta)), eta)
               for eta in (j / 200 for j in range(20, 201)))[1]
    return best, max(errors(best))


def _fit_ladder(sizes_, cycles) -> dict:
    """:func:`~.common.fit_latency_bandwidth`, with the fixed cost held at 0 when the free fit
    makes it negative (then ``r`` by relative least squares through the origin)."""
    fit = fit_latency_bandwidth(sizes_, cycles)
    if fit["a"] >= 0:
        return fit
    xs = [n / c for n, c in zip(sizes_, cycles)]
    return {"a": 0.0, "r": sum(x * x for x in xs) / sum(xs)}


def calibrate(measured: dict, s: dict, system: str) -> dict:
    """The collective model's parameters per ``"mode/collective"``: ``a``, ``r``, ``k``,
    ``eta``, ``link_bytes_per_byte`` (payload per link used per collective byte), the RTL
    points and the largest relative error against them."""
    out = {}
    top = max(s["ratios"])
    for collective in collectives(s, system):
        keys = _keys(s, system, collective)
        ladder = [k for k in keys if k[3] == 0 and k[4] == top
                  and k[2] in sizes(s, system, collective)]
        for mode in MODES:
            recs = [measured[k][mode] for k in ladder]
            fit = _fit_ladder([r.bytes for r in recs], [r.cycles for r in recs])
            everything = [(k, measured[k][mode]) for k in keys]
            kmem = sum(r.mem_bytes_per_node / r.bytes for _, r in everything) / len(everything)
            pts = [(r.bytes, mem_rate(system, k[4]) * (1 - k[3]), r.cycles)
                   for k, r in everything]
            eta, err = fit_eta(pts, fit["a"], fit["r"], kmem)
            per_link = [r.link_utilization * link_rate(system) * r.cycles / r.bytes
                        for r in recs]
            out[f"{mode}/{collective}"] = {
                "mode": mode, "collective": collective, "a": fit["a"], "r": fit["r"],
                "k": kmem, "eta": eta, "max_rel_error": err,
                "link_bytes_per_byte": sum(per_link) / len(per_link),
                "largest_rtl_bytes": max(r.bytes for r in recs),
                "points": [[n, m, c] for n, m, c in pts]}
    return out


class CollectiveModel:
    """Collective time, memory and link bandwidth of one mode from the calibrated model."""

    def __init__(self, calibration: dict, mode: str):
        self.cal, self.mode = calibration, mode

    def _p(self, collective):
        return self.cal[f"{self.mode}/{collective}"]

    def pieces(self, collective: str, nbytes: float) -> int:
        """How many back-to-back collectives of at most the largest RTL size ``nbytes`` runs
        as."""
        return max(1, -int(-nbytes // self._p(collective)["largest_rtl_bytes"]))

    def cycles(self, collective: str, nbytes: float, mem: float) -> float:
        """Cycles of ``nbytes`` per node with ``mem`` bytes per cycle of memory left to it
        (in :meth:`pieces` pieces, each paying the fixed cost ``a``)."""
        p = self._p(collective)
        return (self.pieces(collective, nbytes) * p["a"]
                + nbytes * max(1 / p["r"], p["k"] / (p["eta"] * mem)))

    def mem_bandwidth(self, collective: str, nbytes: float, mem: float) -> float:
        """Memory bytes per cycle per node the collective uses with ``mem`` left to it."""
        return self._p(collective)["k"] * nbytes / self.cycles(collective, nbytes, mem)

    def link_bytes(self, collective: str, nbytes: float) -> float:
        """Payload bytes on each link the collective uses."""
        return self._p(collective)["link_bytes_per_byte"] * nbytes


def iteration(workload, model: CollectiveModel, *, mode: str, policy: str, scale: float,
              mem_rate_bpc: float, link_bpc: float, core_share: float = 0.0) -> dict:
    """One iteration of ``workload`` in ``mode`` under ``policy`` with the baseline's kernels
    taking ``core_share`` of the cores (see the module docstring)."""
    share = workload.mem_share
    cores = core_share if Mode(mode).in_memory else 0.0
    speed = min(1.0, cores / CORES_SATURATE) if Mode(mode).in_memory else 1.0
    tasks = [t.cycles * scale for t in workload.tasks]

    def coll_time(comm, compute_busy):
        mem = mem_rate_bpc * (1 - share) if (compute_busy and policy == "compute_first") \
            else mem_rate_bpc
        return model.cycles(comm.collective, comm.nbytes, mem) / speed

    def compute_rate(comm):
        if comm is None:
            return 1.0
        rate = 1.0 - cores
        if policy == "comm_first" and share > 0:
            m_c = model.mem_bandwidth(comm.collective, comm.nbytes, mem_rate_bpc) * speed
            rate *= max(0.01, min(1.0, (mem_rate_bpc - m_c) / (share * mem_rate_bpc)))
        return rate

    result = simulate(tasks, workload.comms, coll_time, compute_rate)
    result["ideal_cycles"] = sum(tasks)
    payload = sum(model.link_bytes(c.collective, c.nbytes) for c in workload.comms)
    comm_time = sum(b - a for a, b, _ in result["comm_spans"])
    result["link_utilization_comm"] = payload / (comm_time * link_bpc) if comm_time else 0.0
    result["link_utilization_iteration"] = payload / (result["cycles"] * link_bpc)
    return result


def _best(workload, models, scale, rate, link_bpc) -> dict:
    out = {}
    for mode in MODES:
        shares = CORE_SHARES if Mode(mode).in_memory else (0.0,)
        runs = {f"{pol}@{c:g}": iteration(workload, models[mode], mode=mode, policy=pol,
                                          scale=scale, mem_rate_bpc=rate, link_bpc=link_bpc,
                                          core_share=c)
                for pol in POLICIES for c in shares}
        best = min(runs, key=lambda k: runs[k]["cycles"])
        out[mode] = {"best_setting": best, "runs": runs, "cycles": runs[best]["cycles"]}
    return out


def analyze(measured: dict, s: dict) -> dict:
    workloads = {name: load_workload(name) for name in WORKLOAD_NAMES}
    systems, timelines = {}, {}
    for system in s["systems"]:
        cal = calibrate(measured, s, system)
        sysrec = next(v["system"] for k, v in measured.items() if k[0] == system)
        models = {mode: CollectiveModel(cal, mode) for mode in MODES}
        have = collectives(s, system)
        largest = {c: min(cal[f"{m}/{c}"]["largest_rtl_bytes"] for m in MODES) for c in have}
        runnable = {n: w for n, w in workloads.items()
                    if all(c.collective in have for c in w.comms)}
        skipped = {n: f"needs {', '.join(sorted({c.collective for c in w.comms} - set(have)))},"
                      f" which is not compiled for {system}"
                   for n, w in workloads.items() if n not in runnable}
        pieces = {}
        for name, wl in runnable.items():
            worst = max(wl.comms, key=lambda c: c.nbytes / largest[c.collective])
            pieces[name] = {"collective": worst.name, "bytes": worst.nbytes,
                            "largest_rtl_bytes": largest[worst.collective],
                            "pieces": models["ace"].pieces(worst.collective, worst.nbytes),
                            "collectives_in_pieces": sum(
                                1 for c in wl.comms if c.nbytes > largest[c.collective])}
        by_ratio = {}
        for ratio in s["ratios"]:
            rate = mem_rate(system, ratio)
            scale = compute_scale(rate, sysrec["clock_mhz"])
            per_workload = {}
            for name, wl in runnable.items():
                res = _best(wl, models, scale, rate, link_rate(system))
                ideal = res["ace"]["runs"]["compute_first@0"]["ideal_cycles"]
                sens = {}
                for factor in SCALE_FACTORS:
                    r = res if factor == 1.0 else _best(wl, models, scale * factor, rate,
                                                        link_rate(system))
                    sens[f"{factor:g}"] = {b: r[b]["cycles"] / r["ace"]["cycles"]
                                           for b in BASELINES}
                best_runs = {m: res[m]["runs"][res[m]["best_setting"]] for m in MODES}
                per_workload[name] = {
                    "ideal_cycles": ideal, "compute_scale": scale,
                    **{f"{m}_cycles": res[m]["cycles"] for m in MODES},
                    **{f"{m}_setting": res[m]["best_setting"] for m in MODES},
                    "speedup": {b: res[b]["cycles"] / res["ace"]["cycles"] for b in BASELINES},
                    "over_ideal": {m: res[m]["cycles"] / ideal for m in MODES},
                    "link_utilization_comm": {m: best_runs[m]["link_utilization_comm"]
                                              for m in MODES},
                    "link_utilization_iteration": {
                        m: best_runs[m]["link_utilization_iteration"] for m in MODES},
                    "speedup_vs_compute_scale": sens,
                }
                if ratio == s["ratios"][-1] or len(s["ratios"]) == 1:
                    timelines[(system, name)] = best_runs
            by_ratio[f"{ratio:g}"] = per_workload
        systems[system] = {"calibration": cal, "by_ratio": by_ratio,
                           "pieces": pieces, "skipped": skipped,
                           "calibration_max_rel_error": max(f["max_rel_error"]
                                                            for f in cal.values())}
    by_ratio = {}
    for ratio in s["ratios"]:
        key = f"{ratio:g}"
        rows = {n: [systems[sy]["by_ratio"][key][n] for sy in systems
                    if n in systems[sy]["by_ratio"][key]] for n in WORKLOAD_NAMES}
        by_ratio[key] = {
            "iteration_speedup": {b: {n: mean(w["speedup"][b] for w in rows[n])
                                      for n in WORKLOAD_NAMES} for b in BASELINES},
            "iteration_speedup_by_compute": {
                f"{f:g}": {b: {n: mean(w["speedup_vs_compute_scale"][f"{f:g}"][b]
                                        for w in rows[n]) for n in WORKLOAD_NAMES}
                           for b in BASELINES} for f in SCALE_FACTORS},
            "link_util_gain_comm": {
                b: {n: mean(w["link_utilization_comm"]["ace"] / w["link_utilization_comm"][b]
                             for w in rows[n]) for n in WORKLOAD_NAMES} for b in BASELINES}}
    return {"experiment": "training", "settings": s, "platform": PLATFORM,
            "core_shares": list(CORE_SHARES), "cores_saturate": CORES_SATURATE,
            "compute_mem_share": COMPUTE_MEM_SHARE,
            "workload_params": {n: _params(w) for n, w in workloads.items()},
            "systems": systems, "by_ratio": by_ratio,
            "paper": {"resnet50": 1.41, "gnmt": 1.12, "dlrm": 1.13},
            "_timelines": timelines, "_workloads": workloads}


def _params(wl) -> dict:
    return {"tasks": len(wl.tasks), "collectives": len(wl.comms),
            "compute_reference_cycles": wl.compute_cycles,
            "allreduce_bytes": wl.comm_bytes("allreduce"),
            "alltoall_bytes": wl.comm_bytes("alltoall"),
            "largest_collective_bytes": max(c.nbytes for c in wl.comms),
            **{k: v for k, v in wl.params.items()}}


def _fmt_cycles(c: float) -> str:
    return f"{c / 1e6:,.2f} M"


def markdown(summary: dict) -> str:
    lines = ["# training: iteration time, ACE vs baselines vs ideal", "",
             "Speedup = baseline iteration time / ACE's, each mode at its best setting "
             "(policy @ core share); R = memory / link bandwidth per direction.", "",
             "## Mean speedup over systems, per balance", ""]
    rows = [[key, *(f"{v['iteration_speedup'][b][n]:.2f}x" for b in BASELINES
                    for n in WORKLOAD_NAMES)] for key, v in summary["by_ratio"].items()]
    lines += [md_table(["R", *(f"{n} vs {b}" for b in BASELINES for n in WORKLOAD_NAMES)],
                       rows), "",
              "Paper (over its best baseline): " + ", ".join(
                  f"{n} {v}x" for n, v in summary["paper"].items()) + ".", ""]
    rows = []
    for system, srec in summary["systems"].items():
        for key, per in srec["by_ratio"].items():
            for name, w in per.items():
                rows.append([system, key, name, _fmt_cycles(w["ideal_cycles"]),
                             *(_fmt_cycles(w[f"{m}_cycles"]) + f" ({w[f'{m}_setting']})"
                               for m in MODES),
                             *(f"**{w['speedup'][b]:.2f}x**" for b in BASELINES),
                             *(f"{100 * w['link_utilization_comm'][m]:.0f}% / "
                               f"{100 * w['link_utilization_iteration'][m]:.0f}%"
                               for m in MODES)])
    lines += ["## Every system, balance and workload", "",
              "Link utilization: while collectives run / over the whole iteration.", "",
              md_table(["system", "R", "workload", "ideal",
                        *(f"{m} (setting)" for m in MODES),
                        *(f"speedup vs {b}" for b in BASELINES),
                        *(f"{m} link util" for m in MODES)], rows), ""]
    rows = []
    for system, srec in summary["systems"].items():
        for name, why in srec["skipped"].items():
            rows.append([system, name, f"not run: {why}", "", "", ""])
        for name, e in srec["pieces"].items():
            rows.append([system, name, e["collective"], f"{e['bytes'] / 1e6:.1f} MB",
                         f"{e['largest_rtl_bytes'] // 1024} KiB", e["pieces"]])
    lines += ["## Largest workload collective, and the pieces it runs as", "",
              "A collective larger than the largest RTL size (close to the largest program "
              "the engine's instruction memory holds) runs as back-to-back pieces of that "
              "size; no time is extrapolated beyond the RTL sizes.", "",
              md_table(["system", "workload", "largest collective", "bytes",
                        "largest RTL size", "pieces"], rows), ""]
    rows = []
    for system, srec in summary["systems"].items():
        for fit in srec["calibration"].values():
            rows.append([system, fit["mode"], fit["collective"], f"{fit['a']:,.0f}",
                         f"{fit['r']:.2f}", f"{fit['k']:.3f}", f"{fit['eta']:.3f}",
                         f"{100 * fit['max_rel_error']:.1f}%", len(fit["points"]),
                         f"{fit['largest_rtl_bytes'] // 1024} KiB"])
    lines += ["## Collective model (cycles = a + S max(1/r, k/(eta M)))", "",
              md_table(["system", "mode", "collective", "a (cycles)", "r (B/cycle)",
                        "k (mem B per B)", "eta", "max error vs RTL", "RTL points",
                        "largest RTL size"], rows), ""]
    return "\n".join(lines)


_COLORS = {"ace": "tab:blue", "staged": "tab:orange", "p2p": "tab:green"}


def _plots(out: Path, summary: dict) -> list[Path]:
    paths = []
    ratios = [float(k) for k in summary["by_ratio"]]
    fig, axes = figure(1, len(WORKLOAD_NAMES), width=3.4 * len(WORKLOAD_NAMES), height=3.0)
    for ax, name in zip(axes[0], WORKLOAD_NAMES):
        for b in BASELINES:
            ax.plot(ratios, [v["iteration_speedup"][b][name] for v in
                             summary["by_ratio"].values()], "o-", color=_COLORS[b],
                    label=f"vs {b}")
        ax.axhline(summary["paper"][name], color="0.4", lw=0.8, ls="--",
                   label=f"paper {summary['paper'][name]}x")
        ax.axhline(1.0, color="0.3", lw=0.6)
        ax.set_xlabel("memory / link bandwidth (R)")
        ax.set_ylabel("iteration speedup of ACE")
        ax.set_title(name, fontsize=9)
        mark_accelerators(ax)
        ax.legend(fontsize=7)
    paths.append(save_figure(fig, out / "training_speedup.png"))

    system = list(summary["systems"])[0]
    names = [n for n in WORKLOAD_NAMES if (system, n) in summary["_timelines"]]
    fig, axes = figure(len(names), 1, width=8.0, height=2.2)
    for ax, name in zip(axes[:, 0], names):
        tl = summary["_timelines"][(system, name)]
        labels = []
        for row, mode in enumerate(reversed(MODES)):
            res = tl[mode]
            y = 2 * row
            ax.broken_barh([(a / 1e6, (b - a) / 1e6) for a, b, _ in res["compute_spans"]],
                           (y + 1, 0.8), color="0.6")
            ax.broken_barh([(a / 1e6, (b - a) / 1e6) for a, b, _ in res["comm_spans"]],
                           (y, 0.8), color=_COLORS[mode])
            labels += [f"{mode} comm", f"{mode} compute"]
        ax.set_yticks([0.4 + k for k in range(len(labels))], labels, fontsize=7)
        ax.set_title(f"{name} on {system}, R = {summary['settings']['ratios'][-1]:g} "
                     "(Mcycles)", fontsize=9)
    paths.append(save_figure(fig, out / "training_timeline.png"))

    cal = summary["systems"][system]["calibration"]
    colls = list(dict.fromkeys(f["collective"] for f in cal.values()))
    fig, axes = figure(1, len(colls), width=4.2 * len(colls), height=3.2)
    for ax, collective in zip(axes[0], colls):
        for mode in MODES:
            fit = cal[f"{mode}/{collective}"]
            model = CollectiveModel(cal, mode)
            xs = [p[2] for p in fit["points"]]
            ys = [model.cycles(collective, p[0], p[1]) for p in fit["points"]]
            ax.plot(xs, ys, "o", ms=3, color=_COLORS[mode], label=mode)
        lo = min(p[2] for f in cal.values() for p in f["points"])
        hi = max(p[2] for f in cal.values() for p in f["points"])
        ax.plot([lo, hi], [lo, hi], color="0.5", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("RTL cycles")
        ax.set_ylabel("model cycles")
        ax.set_title(f"{collective} on {system}: model against every RTL point", fontsize=9)
        ax.legend(fontsize=7)
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
