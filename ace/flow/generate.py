"""Verilog generation for the named configurations: ``ace generate``.

For a configuration ``NAME`` the output folder ``rtl/NAME/`` holds, for each top in
:func:`ace.hw.tops.shipped_tops`, ``<top>.v`` and a file list ``<top>.f``, plus ``config.json`` (the
parameters that produced it) and a FuseSoC CAPI2 core ``ace_NAME.core`` with one target per
top. Output is deterministic: no source locations, no timestamps, sorted keys.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path

from ace.config import AceConfig
from ace.flow.convert import to_verilog
from ace.hw.tops import TOPS, shipped_tops

__all__ = ["GeneratedFile", "render", "write", "check", "verilog_text", "RTL_DIR"]

RTL_DIR = Path(__file__).resolve().parents[2] / "rtl"


@dataclass(frozen=True)
class GeneratedFile:
    relpath: str
    text: str


def module_name(top: str, config: AceConfig) -> str:
    """Verilog module name of a top in a configuration, unique across configurations."""
    return f"{top}_{config.name}"


@functools.lru_cache(maxsize=None)
def verilog_text(top: str, config: AceConfig) -> str:
    """Verilog of one top, with the module named by :func:`module_name`. Cached per process:
    the engine of the default configuration takes minutes to convert, and generation, the
    freshness check and lint all need the same text."""
    component = TOPS[top].build(config)
    return to_verilog(component, name=module_name(top, config))


def _core_file(config: AceConfig) -> str:
    lines = [
        "CAPI=2:",
        f"name: ace:ace:ace_{config.name}:0.1.0",
        f"description: ACE (Accelerator Collectives Engine) RTL, configuration '{config.name}'",
        "",
        "filesets:",
    ]
    for top in shipped_tops():
        lines += [f"  {top}:", "    file_type: verilogSource", "    files:",
                  f"      - {top}.v"]
    lines += ["", "targets:", "  default:", "    filesets:"]
    lines += [f"      - {top}" for top in shipped_tops()]
    for top in shipped_tops():
        lines += [f"  {top}:", f"    filesets: [{top}]",
                  f"    toplevel: {module_name(top, config)}",
                  "    default_tool: verilator", "    tools:", "      verilator:",
                  "        mode: lint-only", "        verilator_options: [-Wall]"]
    return "\n".join(lines) + "\n"


def render(config: AceConfig) -> list[GeneratedFile]:
    """Every file of ``rtl/<config.name>/``, in a fixed order."""
    files = []
    for top in shipped_tops():
        files.append(GeneratedFile(f"{top}.v", verilog_text(top, config)))
        files.append(GeneratedFile(f"{top}.f", f"{top}.v\n"))
    files.append(GeneratedFile("config.json", json.dumps(config.to_dict(), indent=2,
                                                         sort_keys=True) + "\n"))
    files.append(GeneratedFile(f"ace_{config.name}.core", _core_file(config)))
    return files


def write(config: AceConfig, out_dir: Path) -> list[Path]:
    """Write :func:`render` output into ``out_dir``, touching only files whose text changed."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for generated in render(config):
        path = out_dir / generated.relpath
        if not path.exists() or path.read_text() != generated.text:
            path.write_text(generated.text)
        written.append(path)
    return written


def check(config: AceConfig, out_dir: Path) -> list[str]:
    """Names of files in ``out_dir`` that are missing or differ from fresh output."""
    stale = []
    for generated in render(config):
        path = out_dir / generated.relpath
        if not path.exists():
            stale.append(f"{path}: missing")
        elif path.read_text() != generated.text:
            stale.append(f"{path}: stale")
    return stale
