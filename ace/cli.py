"""The ``ace`` command line.

Subcommands:
  generate   write the Verilog, file lists and FuseSoC core of a configuration (``--check``)
  lint       run ``verilator --lint-only -Wall`` on generated Verilog with the waiver file
  demo       the main job until the harness exists: random fp32/bf16 beats through the ALU array
  synth      synthesize a top for an FPGA and report LUTs, FFs, BRAMs, DSPs and Fmax

User errors (bad config, missing files) print one line and exit with status 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .config import NAMED_CONFIGS, ConfigError, load_config
from .toolchain import ToolchainError

__all__ = ["main"]


class UserError(Exception):
    """A mistake in the command line or its inputs: reported in one line, exit status 2."""


def _configs(name_or_path: str | None, all_named: bool):
    if all_named:
        return list(NAMED_CONFIGS.values())
    return [load_config(name_or_path)]


def cmd_generate(args) -> int:
    from .generate import RTL_DIR, check, write

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
    from .lint import lint_config

    status = 0
    for config in _configs(args.config, args.config is None):
        problems = lint_config(config)
        for line in problems:
            print(line)
        print(f"{config.name}: {len(problems)} lint warnings")
        status |= bool(problems)
    return status


def cmd_demo(args) -> int:
    from .demo import run_demo

    return run_demo(load_config(args.config), beats=args.beats, seed=args.seed)


def cmd_synth(args) -> int:
    from .synth import run_synth

    return run_synth(load_config(args.config), top=args.top, target=args.target,
                     out_dir=Path(args.out) if args.out else None)


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

    p = sub.add_parser("demo", help="random fp32/bf16 beats through the ALU array, checked")
    p.add_argument("--config", default="default", help="named configuration or file")
    p.add_argument("--beats", type=int, default=20000, help="beats per data type")
    p.add_argument("--seed", type=int, default=1, help="random seed")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("synth", help="FPGA synthesis: LUTs, FFs, BRAMs, DSPs, Fmax")
    p.add_argument("--config", default="small", help="named configuration or file")
    p.add_argument("--top", default="ace_alu_array", help="which top to synthesize")
    p.add_argument("--target", default="ecp5", choices=["ecp5"], help="FPGA family")
    p.add_argument("--out", help="work directory (default: build/synth/<config>-<top>)")
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
