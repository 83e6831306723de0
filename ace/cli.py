"""The ``ace`` command line.

Subcommands:
  generate   write the Verilog, file lists and FuseSoC core of a configuration (``--check``)
  lint       run ``verilator --lint-only -Wall`` on generated Verilog with the waiver file
  replay     the main job: replay a collective trace on the multi-node RTL, ACE and baseline
  bench-sim  simulator speed: node-cycles/s on Verilator and on the Amaranth simulator
  experiment reproduce the paper's figures on the RTL: membw, utilization, training, paper
  demo       random fp32/bf16 beats through the ALU array, checked
  synth      synthesize a top for an FPGA and report LUTs, FFs, BRAMs, DSPs and Fmax

User errors (bad config, missing files) print one line and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ace.config import NAMED_CONFIGS, load_config
from ace.errors import ConfigError, ToolchainError, UserError
from ace.vocab import parse_modes

__all__ = ["main"]


def _configs(name_or_path: str | None, all_named: bool):
    if all_named:
        return list(NAMED_CONFIGS.values())
    return [load_config(name_or_path)]


def cmd_generate(args) -> int:
    from ace.flow.generate import RTL_DIR, check, write

    status = 0
    for config in _configs(args.config, args.config is None):
        out_dir = Path(args.out) / config.name if args.out else RTL_DIR / config.name
        if args.check:
            stale = check(config, out_dir)
            for line in stale:
                print(f"stale: {line}", file=sys.stderr)
            if stale:
                print(f"rtl is stale for '{config.name}': run 'ace generate'", file=sys.stderr)
                status = 1
            else:
                print(f"{out_dir}: up to date")
        else:
            paths = write(config, out_dir)
            print(f"{out_dir}: wrote {len(paths)} files")
    return status


def cmd_lint(args) -> int:
    from ace.flow.lint import lint_config

    status = 0
    for config in _configs(args.config, args.config is None):
        problems = lint_config(config)
        for line in problems:
            print(line)
        print(f"{config.name}: {len(problems)} lint warnings")
        status |= bool(problems)
    return status


def cmd_demo(args) -> int:
    from testbench.demo import run_demo

    return run_demo(load_config(args.config), beats=args.beats, seed=args.seed)


def cmd_synth(args) -> int:
    from ace.flow.synth import run_synth

    if args.config == "harness":  # the harness systems' engine (sim_harness/systems.py)
        from sim_harness.systems import HARNESS_CONFIG as config
    else:
        config = load_config(args.config)
    return run_synth(config, top=args.top, target=args.target, board=args.board,
                     out_dir=Path(args.out) if args.out else None, jobs=args.jobs,
                     pnr=args.pnr, pnr_timeout=args.pnr_timeout, speed=args.speed,
                     seed=args.seed, router=args.router, placer=args.placer, freq=args.freq,
                     floorplan=args.floorplan)


def _layers(text: str | None):
    """``A:B``, ``A:``, ``:B`` or ``A`` -> ``(A, B)`` (None: open), for ``--layers``."""
    if text is None:
        return None
    low, sep, high = text.partition(":")
    try:
        bounds = (int(low) if low else None,
                  (int(high) if high else None) if sep else int(low) + 1)
    except ValueError:
        bounds = None
    if bounds is None or (sep and not low and not high) or any(
            b is not None and b < 0 for b in bounds):
        raise UserError(f"--layers: {text!r}; allowed: A:B, A:, :B or A (layer indices >= 0, "
                        "B exclusive)")
    return bounds


def cmd_replay(args) -> int:
    from sim_harness.replay import CollectiveTooLarge, ReplayError, replay, scale_trace
    from sim_harness.report import format_table, write_results
    from sim_harness.systems import load_system, pick_system
    from sim_harness.trace import TraceError
    from sim_harness.traces import DEFAULT_TRACE, folding_notes, load_trace

    from ace.sw.program import ProgramError

    try:
        trace = load_trace(args.trace or DEFAULT_TRACE, system_file=args.astra_system,
                           network_file=args.astra_network, msccl_bytes=args.bytes)
        if args.system is None:
            choice = pick_system(trace)
            system = choice.system
            if choice.describe():
                print(choice.describe(), flush=True)
        else:
            system = load_system(args.system)
        for note in folding_notes(trace, system.config.num_channels):
            print(note, flush=True)
        modes = parse_modes(args.mode, lambda text: UserError(f"--mode: {text}"))
        if not 0 <= args.background < 1:
            raise UserError(f"--background: {args.background}; allowed: 0 <= share < 1")
        if args.waves and args.pgo:
            raise UserError("--waves, --pgo: separate builds; choose one")
        if args.scale is not None and not 0 < args.scale < float("inf"):
            raise UserError(f"--scale: {args.scale}; allowed: a number above 0")
        if args.max_bytes is not None and args.max_bytes < 1:
            raise UserError(f"--max-bytes: {args.max_bytes}; allowed: at least 1 (bytes)")
        layers = _layers(args.layers)
        cut = ""
        if args.scale is not None or args.max_bytes is not None or layers is not None:
            try:
                trace = scale_trace(trace, scale=args.scale, max_bytes=args.max_bytes,
                                    layers=layers)
            except ValueError as error:
                raise UserError(f"--{error}") from None
            cut = ", ".join(f"{name} {value}" for name, value in (
                ("--scale", args.scale), ("--max-bytes", args.max_bytes),
                ("--layers", args.layers)) if value is not None)
            cut = f", {cut}: {sum(c.bytes for c in trace.collectives):,} bytes in all"
        print(f"replaying {trace.path} ({trace.format}, {len(trace.collectives)} "
              f"collectives{cut}) on {system.topology} [{system.config.name}], modes: "
              f"{', '.join(modes)}", flush=True)
        if args.estimate:
            return _print_estimate(trace, system, modes, args.pgo)
        results = replay(trace, system, modes=modes, seed=args.seed, interval=args.interval,
                         background_share=args.background, waves=args.waves,
                         waves_dir=Path(args.out), progress=not args.quiet, pgo=args.pgo)
    except CollectiveTooLarge as error:
        hint = f"--scale {error.scale:g} fits the largest collectives" if error.scale else \
            "--scale F"
        raise UserError(f"{error}; replay a smaller version: {hint} (or --max-bytes N, "
                        "--layers A:B)") from None
    except (TraceError, ProgramError) as error:
        raise UserError(str(error)) from None
    except ReplayError as error:
        print(f"ace replay: failed: {error}", file=sys.stderr)
        return 1
    out = Path(args.out)
    write_results(out, results["system"], results["runs"])
    with open(out / "results.json") as f:
        document = json.load(f)
    print(format_table(document))
    print(f"results in {out}/ (results.json, summary.csv, plots, timeline.json"
          f"{', waves_<mode>.fst' if args.waves else ''})")
    return _golden_verdict("replay", [r["name"] + f" ({run['mode']})"
                                      for run in document["runs"]
                                      for r in run["collectives"] if not r["correct"]])


def _print_estimate(trace, system, modes, pgo: bool) -> int:
    """``ace replay --estimate``: expected cycles and time of each mode, nothing run."""
    from sim_harness.preflight import preflight
    from sim_harness.simulator import speed_file
    from sim_harness.speed import estimate

    est = estimate(preflight(trace, system, modes), speed_file(), pgo=pgo)
    for mode, m in est["modes"].items():
        print(f"{mode}: about {m['cycles']:,} cycles, {m['seconds']:,.0f} CPU seconds")
    source = ("measured here" if est["measured"] else
              "the documented ring8 figure, no run measured here yet")
    print(f"expected time: about {est['seconds'] / 60:,.1f} min with a core per mode, the "
          f"build aside ({est['node_cycles_per_cpu_s']:,.0f} node-cycles per CPU second, "
          f"{source}; longer on shared cores)")
    return 0


def _golden_verdict(command: str, wrong: list[str]) -> int:
    """Exit status 1, naming them, if any result differs from the golden model; else 0."""
    if wrong:
        print(f"ace {command}: results differ from the golden model: {', '.join(wrong)}",
              file=sys.stderr)
        return 1
    return 0


#: ``--pgo`` of ``replay`` and ``bench-sim``.
PGO_HELP = ("gcc profile-guided build of the engine: the first use per engine configuration "
            "adds a training replay and a second compilation (minutes), later replays run "
            "about 12%% faster (docs/harness.md)")


def cmd_bench_sim(args) -> int:
    from sim_harness.bench import amaranth_speed, format_bench, verilator_speed
    from sim_harness.systems import NAMED_SYSTEMS

    names = [name.strip() for name in args.systems.split(",") if name.strip()]
    unknown = [name for name in names if name not in NAMED_SYSTEMS]
    if not names or unknown:
        raise UserError(f"--systems: {args.systems!r}; allowed: named systems "
                        f"({', '.join(NAMED_SYSTEMS)}), comma-separated")
    if args.cycles < 0 or args.bytes < 4 or args.bytes % 4:
        raise UserError(f"--cycles {args.cycles} / --bytes {args.bytes}; allowed: cycles >= 0, "
                        "bytes a positive multiple of 4")
    records = []
    for name in names:
        print(f"{name}: Verilator, all-reduce of {args.bytes} bytes", flush=True)
        records.append(verilator_speed(name, nbytes=args.bytes, pgo=args.pgo, log=print))
    if args.cycles:     # one comparison run: minutes of elaboration per system
        print(f"{names[0]}: Amaranth simulator, up to {args.cycles} cycles", flush=True)
        records.append(amaranth_speed(names[0], cycles=args.cycles, log=print))
    print(format_bench(records))
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=1) + "\n")
    return 0


def cmd_sweep(args) -> int:
    from sim_harness.replay import ReplayError
    from sim_harness.sweep import SweepError, format_sweep_table, load_spec, run_points, write_sweep

    if args.workers is not None and args.scheduler is not None:
        raise UserError("--workers: applies to the local pool only; with --scheduler the "
                        "cluster's workers run the points")
    try:
        points = load_spec(args.spec)
        where = f"Dask scheduler {args.scheduler}" if args.scheduler else "local processes"
        print(f"sweeping {len(points)} points from {args.spec} on {where}", flush=True)
        results = run_points(points, scheduler=args.scheduler, workers=args.workers,
                             pgo=args.pgo)
    except SweepError as error:
        raise UserError(str(error)) from None
    except ReplayError as error:
        print(f"ace sweep: failed: {error}", file=sys.stderr)
        return 1
    paths = write_sweep(args.out, results)
    print(format_sweep_table(results))
    print(f"results in {', '.join(map(str, paths))}")
    return _golden_verdict("sweep", [f"point {i} {rec['name']} ({run['mode']})"
                                     for i, r in enumerate(results)
                                     for run in r["results"]["runs"]
                                     for rec in run["collectives"] if not rec["correct"]])


def cmd_experiment(args) -> int:
    from sim_harness.experiments import ExperimentError, run_experiment
    from sim_harness.replay import ReplayError
    from sim_harness.sweep import SweepError

    if args.workers is not None and args.workers < 1:
        raise UserError(f"--workers: {args.workers}; allowed: an integer >= 1")
    try:
        run_experiment(args.name, quick=args.quick, out=args.out, workers=args.workers,
                       reuse=args.reuse, ratios=args.mem_ratio, pgo=args.pgo,
                       systems=args.systems.split(",") if args.systems else None)
    except (ExperimentError, SweepError) as error:
        raise UserError(str(error)) from None
    except (ReplayError, RuntimeError) as error:
        print(f"ace experiment: failed: {error}", file=sys.stderr)
        return 1
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ace", description="ACE: Accelerator Collectives Engine")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("generate", help="write Verilog, file lists and a FuseSoC core")
    p.add_argument("--config", help="named configuration or .toml/.json file "
                                    "(default: every named configuration)")
    p.add_argument("--out", help="output root (default: rtl/); files go to OUT/<config name>/")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 naming each file that is stale")
    p.set_defaults(func=cmd_generate)

    p = sub.add_parser("lint", help="verilator --lint-only -Wall on generated Verilog")
    p.add_argument("--config", help="named configuration or file (default: every named one)")
    p.set_defaults(func=cmd_lint)

    p = sub.add_parser("replay", help="replay a collective trace on the RTL system and measure")
    p.add_argument("trace", nargs="?", help="trace file (ACE YAML/JSON, ASTRA-sim workload, "
                   "Chakra .et or directory, MSCCL .xml); default: the bundled 8-node ring "
                   "1 MiB fp32 all-reduce")
    p.add_argument("--system", help="named system (ring4, ring8, ring16, torus4x2) or a "
                   ".toml/.json system file (default: ring8, or the trace's topology)")
    p.add_argument("--mode", default="all", metavar="MODE",
                   help="ace (buffers in SRAM), staged (memory-staged baseline, NCCL over a "
                   "network transport; alias: baseline), p2p (point-to-point baseline, NCCL "
                   "over NVLink), all (the three, default) or both (ace and staged)")
    p.add_argument("--out", default="build/replay", help="output directory")
    p.add_argument("--bytes", type=int, help="collective size for MSCCL traces (bytes per node)")
    p.add_argument("--astra-system", help="ASTRA-sim system file for a workload trace")
    p.add_argument("--astra-network", help="ASTRA-sim network file for a workload trace")
    p.add_argument("--background", type=float, default=0.0,
                   help="share of memory bandwidth taken by background traffic, 0 to <1")
    p.add_argument("--seed", type=int, default=1, help="random seed of the input data")
    p.add_argument("--interval", type=int, help="sampling interval, cycles (default: auto)")
    p.add_argument("--scale", type=float, metavar="F", help="multiply every collective's "
                   "size by F (whole elements, at least one): replay a large trace scaled down")
    p.add_argument("--max-bytes", type=int, metavar="N",
                   help="cap every collective's size at N bytes (whole elements)")
    p.add_argument("--layers", metavar="A:B", help="replay only the collectives of layers "
                   "A to B-1 (ASTRA-sim layer index; else the collective's position)")
    p.add_argument("--waves", action="store_true", help="record an FST waveform per mode, "
                   "OUT/waves_<mode>.fst (a separate Verilator build with tracing)")
    p.add_argument("--pgo", action="store_true", help=PGO_HELP)
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--estimate", action="store_true", help="print the expected cycles and "
                   "time of the replay and stop (builds and simulates nothing)")
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser("bench-sim", help="simulator speed: node-cycles/s of harness systems on "
                       "Verilator and on the Amaranth simulator")
    p.add_argument("--systems", default="ring8,ring16",
                   help="named systems, comma-separated (default: ring8,ring16)")
    p.add_argument("--bytes", type=int, default=1 << 20,
                   help="all-reduce size of the Verilator run, bytes per node (default 1 MiB)")
    p.add_argument("--cycles", type=int, default=3000, help="most cycles of the Amaranth "
                   "simulator run, on the first system (default 3000; 0: Verilator only)")
    p.add_argument("--pgo", action="store_true", help=PGO_HELP)
    p.add_argument("--json", metavar="PATH", help="also write the records as JSON")
    p.set_defaults(func=cmd_bench_sim)

    p = sub.add_parser("sweep", help="replay a grid of systems and traces in parallel "
                       "(local processes or a Dask cluster)")
    p.add_argument("spec", help="sweep spec, YAML or JSON: a base point plus grid: axes "
                   "(docs/sweep.md)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="dask.distributed scheduler address (default: a local process pool)")
    p.add_argument("--workers", type=int, metavar="N",
                   help="local worker processes (default: CPU count)")
    p.add_argument("--out", default="build/sweep", help="output directory (sweep.json, "
                   "sweep.csv)")
    p.add_argument("--pgo", action="store_true", help=PGO_HELP)
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("experiment", help="reproduce the ACE paper's figures on the RTL: "
                       "membw, utilization, training, paper (all three)")
    p.add_argument("name", help="membw, utilization, training or paper (docs/results.md)")
    p.add_argument("--quick", action="store_true",
                   help="fewer points and smaller sizes (minutes instead of hours)")
    p.add_argument("--out", help="output directory (default: build/experiment/NAME)")
    p.add_argument("--workers", type=int, metavar="N",
                   help="local worker processes (default: CPU count)")
    p.add_argument("--pgo", action="store_true", help=PGO_HELP)
    p.add_argument("--reuse", metavar="DIR", help="take the RTL points an earlier run saved "
                   "in DIR/rtl_points.json (same engine configuration) instead of running them")
    p.add_argument("--systems", metavar="A,B", help="named systems to run on instead of the "
                   "experiment's own (quick: ring8, torus4x2; full: ring8, ring16, torus4x4)")
    p.add_argument("--mem-ratio", metavar="R,R", default=None,
                   help="node balances to run at: memory bytes per cycle per link byte per "
                   "cycle per direction (default 2,4,6,8; at most 2 x the memory port / link "
                   "width = 8 on the harness engines)")
    p.set_defaults(func=cmd_experiment)

    p = sub.add_parser("demo", help="random fp32/bf16 beats through the ALU array, checked")
    p.add_argument("--config", default="default", help="named configuration or file")
    p.add_argument("--beats", type=int, default=20000, help="beats per data type")
    p.add_argument("--seed", type=int, default=1, help="random seed")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("synth", help="FPGA synthesis: LUTs, FFs, BRAMs, DSPs, Fmax")
    p.add_argument("--config", default="small",
                   help="named configuration (default, small, harness) or file")
    p.add_argument("--target", help="ecp5 (default), xilinx, or generic (gates and logic "
                   "levels for an ASIC flow, no device)")
    p.add_argument("--board", help="ulx3s-85f (ecp5, default) or arty-a7-100 (xilinx)")
    p.add_argument("--top", default="all",
                   help="alu_array, sram, dma, nic, channel, engine (ace_ prefix optional) "
                   "or all")
    p.add_argument("--jobs", type=int, help="tops synthesized at once (default: CPU count)")
    p.add_argument("--pnr", default="route", help="ECP5: route (default: place and route, "
                   "Fmax), place (placement only, Fmax estimate) or none (resources only)")
    p.add_argument("--pnr-timeout", type=float, metavar="MIN", default=60.0,
                   help="stop nextpnr after MIN minutes; report its estimate after placement "
                   "if it got that far (default 60)")
    p.add_argument("--speed", type=int, help="ECP5 speed grade: 6, 7 or 8 (default: the "
                   "board's, 6 on the ulx3s-85f)")
    p.add_argument("--seed", type=int, help="ECP5: nextpnr's placer seed (default: "
                   "nextpnr's); one netlist routes several MHz apart on different seeds")
    p.add_argument("--router", default="router2", help="ECP5 with --pnr route: nextpnr's "
                   "router2 (default) or router1 (slower; converges where router2's overuse "
                   "grows, as on the whole engine)")
    p.add_argument("--placer", default="heap", help="ECP5 with --pnr route or place: nextpnr's "
                   "heap (default), static (spreads cells by density: shorter wires, less "
                   "congestion, a lower Fmax estimate on the whole engine) or sa (small designs)")
    p.add_argument("--freq", type=float, metavar="MHZ", help="ECP5 with --pnr route or "
                   "place: nextpnr's target clock (default: the configuration's clock_mhz); "
                   "a lower target leaves the router more slack on a design that misses its "
                   "clock")
    p.add_argument("--floorplan", help="ECP5 with --pnr route or place: rams (default: the "
                   "engine's block RAMs pinned block by block, docs/synthesis.md) or none "
                   "(nextpnr places them)")
    p.add_argument("--out", help="work directory (default: build/synth/<config>-<board>)")
    p.set_defaults(func=cmd_synth)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ConfigError, ToolchainError, UserError) as error:
        print(f"ace {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
