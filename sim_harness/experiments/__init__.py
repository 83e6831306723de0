"""Experiments that reproduce the ACE paper's headline figures on the RTL (``ace experiment``).

=============  ==============================================================================
name           what
=============  ==============================================================================
membw          link utilization against the memory bandwidth left to an all-reduce, memory
               bytes per link byte per balance, and the memory bandwidth each mode needs
               for 90% utilization
utilization    link utilization of ACE over each baseline under the training compute's
               memory load, per balance
training       iteration time of ResNet-50, a GNMT-sized transformer and DLRM: ACE, both
               baselines, ideal (collective times from a model calibrated on RTL runs), per
               balance
paper          all three; ``summary.json`` holds their figures per balance (``by_ratio``)
=============  ==============================================================================

:func:`run_experiment` plans the RTL points of the experiments asked for, measures their union
once (:func:`~.common.measure`, on :func:`sim_harness.sweep.run_points`), then analyses and
writes each one. Every experiment runs ACE and both baselines (``staged``, ``p2p``) at every node balance of
``ratios`` (``--mem-ratio``: memory bytes per cycle per link byte per cycle per direction,
default 2, 4, 6, 8) and writes ``summary.json`` (with ``by_ratio``: balance -> figures),
``summary.md`` and PNG plots, the real accelerators' balances marked.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from . import membw, paper, training, utilization
from .common import (ExperimentError, Plan, check_ratios, load_points, measure, parse_ratios,
                     save_points, write_json)

__all__ = ["EXPERIMENTS", "run_experiment", "ExperimentError"]

EXPERIMENTS = {"membw": membw, "utilization": utilization, "training": training}
NAMES = (*EXPERIMENTS, "paper")


def _check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise ExperimentError(f"--out: {out} exists and is not a directory")


def _check_systems(systems) -> None:
    from sim_harness.systems import NAMED_SYSTEMS

    for system in systems:
        if system not in NAMED_SYSTEMS:
            raise ExperimentError(f"--systems: {system!r} is not a named system; allowed: "
                                  f"{', '.join(NAMED_SYSTEMS)}")


def run_experiment(name: str, *, quick: bool = False, out: str | Path | None = None,
                   workers: int | None = None, reuse: str | Path | None = None,
                   systems: list[str] | None = None, ratios=None, progress: bool = True,
                   pgo: bool = False, log=print) -> dict:
    """Run experiment ``name`` (or ``paper``: all of them) and write its files into ``out``
    (default ``build/experiment/<name>``); return the summary written to ``summary.json``.

    The RTL points are saved in ``out/rtl_points.json``; ``reuse`` (a folder or file of an
    earlier run) takes the points it holds from there instead of running them again, as long
    as they were measured on the current engine configuration. ``systems`` (named systems)
    replaces the experiments' own choice of systems; ``ratios`` (numbers, or a comma-separated
    string) the default balances. ``pgo``: run on the profile-guided builds (same results)."""
    if name not in NAMES:
        raise ExperimentError(f"experiment: {name!r}; allowed: {', '.join(NAMES)}")
    out = Path(out) if out is not None else Path("build") / "experiment" / name
    _check_out(out)
    names = list(EXPERIMENTS) if name == "paper" else [name]
    if systems:
        _check_systems(systems)
    ratios = parse_ratios(ratios) if ratios is not None else None
    settings = {n: EXPERIMENTS[n].settings(quick, systems, ratios) for n in names}
    check_ratios({sy for s in settings.values() for sy in s["systems"]},
                 next(iter(settings.values()))["ratios"])
    start = time.monotonic()
    if "training" in names:
        training.check_inputs()
    plan = Plan()
    for n in names:
        plan.merge(EXPERIMENTS[n].plan(settings[n]))
    if log:
        on = sorted({k[0] for k in plan.keys})
        rs = ", ".join(f"{r:g}" for r in next(iter(settings.values()))["ratios"])
        log(f"experiment {name}{' (quick)' if quick else ''}: {len(plan.keys)} RTL points "
            f"(ace, staged and p2p each) on {', '.join(on)}, memory/link ratios {rs}")
    measured = {}
    if reuse is not None:
        path = Path(reuse)
        measured = load_points(path / "rtl_points.json" if path.is_dir() else path, log)
        measured = {k: v for k, v in measured.items() if k in plan.keys}
    missing = Plan([k for k in plan.keys if k not in measured])
    if log and reuse is not None:
        log(f"--reuse: {len(measured)} points from {reuse}, {len(missing.keys)} to run")
    mem_bytes = next(iter(settings.values()))["mem_bytes"]
    measured.update(measure(missing, mem_bytes=mem_bytes, workers=workers, progress=progress,
                            pgo=pgo) if missing.keys else {})
    out.mkdir(parents=True, exist_ok=True)
    save_points(out / "rtl_points.json", {k: measured[k] for k in plan.keys})
    rtl_seconds = time.monotonic() - start
    summaries = {}
    for n in names:
        folder = out if name != "paper" else out / n
        summary = EXPERIMENTS[n].analyze(measured, settings[n])
        summary["rtl_points"] = len(EXPERIMENTS[n].plan(settings[n]).keys)
        EXPERIMENTS[n].write(folder, summary)
        summaries[n] = summary
    wall = time.monotonic() - start
    if name != "paper":
        doc = json.loads((out / "summary.json").read_text())
        doc["wall_seconds"] = round(wall, 1)
        write_json(out / "summary.json", doc)
        if log:
            log(f"{name}: results in {out}/ (summary.json, summary.md, plots); "
                f"{wall:.0f} s")
        return doc
    doc = paper.write(out, summaries, quick, wall, rtl_seconds, len(plan.keys))
    if log:
        log(f"paper: results in {out}/ (summary.json, summary.md, paper.png and one folder "
            f"per experiment); {wall:.0f} s")
    return doc
