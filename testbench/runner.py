"""Build a top's Verilog once per configuration and run cocotb test modules on it.

Builds live in ``build/cocotb/<top>-<config digest>[-waves]/`` beside the repository and are
reused while the generated Verilog is unchanged (a stamp file holds its hash), so many tests share
one Verilator build. The configuration reaches the testbench as JSON in ``ACE_CONFIG``.

Environment: ``SIM=icarus`` selects Icarus instead of Verilator; ``ACE_WAVES=1`` records
waveforms into the build directory (FST on Verilator where liblz4 is installed, else VCD; VCD
on Icarus).
"""

from __future__ import annotations

import hashlib
import os
import random
from pathlib import Path

from ace.config import AceConfig
from ace.flow.generate import module_name, verilog_text
from ace.errors import ToolchainError
from ace.flow.toolchain import build_lock, check_waves_toolchain, prepare_environment

__all__ = ["BUILD_ROOT", "build_sources", "build_top", "run_built", "run_cocotb",
           "waves_requested"]

REPO = Path(__file__).resolve().parent.parent
BUILD_ROOT = Path(os.environ.get("ACE_BUILD_DIR", REPO / "build")) / "cocotb"


def waves_requested() -> bool:
    return os.environ.get("ACE_WAVES", "0") not in ("", "0", "false", "no")


def _simulator() -> str:
    return os.environ.get("SIM", "verilator")


def _public_top_only(runner, toplevel: str, texts: dict) -> dict:
    """cocotb's Verilator build makes every signal public (``--public-flat-rw``), which keeps
    Verilator from optimising and makes a multi-engine system about 12x slower. For testbenches
    that touch only the top level's ports, drop the flag and make just the top module public
    with a Verilator configuration file."""
    build_command = runner._build_command
    runner._build_command = lambda: [[arg for arg in cmd if arg != "--public-flat-rw"]
                                     for cmd in build_command()]
    vlt = f'`verilator_config\npublic_flat_rw -module "{toplevel}" -var "*"\n'
    return {**texts, "public_top.vlt": vlt}


#: The C++ optimisation of cocotb's Verilator builds, as make variables. Verilator's default
#: (``-Os`` for both) spends more compile time than a testbench's short run gets back: the
#: engine's cocotb tests took 206 CPU seconds with it and 126 with ``-O1`` for the evaluation
#: code (``OPT_FAST``), build included. The code that runs once, at construction and the first
#: settle (``OPT_SLOW``), is compiled without optimisation: the cocotb ``ring4`` system test,
#: build included, 186 -> 178 CPU seconds (docs/benchmarks.md, Test suite).
COCOTB_MAKE_VARIABLES = ("OPT_FAST=-O1", "OPT_SLOW=-O0")


def _compile_options(runner) -> None:
    """Compile the Verilated C++ with :data:`COCOTB_MAKE_VARIABLES` (cocotb's runner sets no
    optimisation of its own; make variables override Verilator's defaults)."""
    build_command = runner._build_command
    runner._build_command = lambda: [cmd + list(COCOTB_MAKE_VARIABLES) if cmd[0] == "make"
                                     else cmd for cmd in build_command()]


def _fst_writer_builds() -> bool:
    """Whether Verilator's FST writer compiles here (it needs the lz4 and zlib headers, which no
    pip package brings); the waveforms are VCD otherwise."""
    try:
        check_waves_toolchain()
    except ToolchainError:
        return False
    return True


def build_sources(key: str, sources, toplevel: str, *, waves: bool | None = None,
                  quiet: bool = False, top_only: bool = False):
    """Compile Verilog ``sources`` (file name -> text) with ``toplevel`` as the top, in
    ``build/cocotb/<key>-<sim>``, unless that build is fresh (a stamp file holds the hash of
    the sources and the build options). ``top_only``: the testbench uses the top module's ports only, so the rest of
    the design stays private and fast (see :func:`_public_top_only`). Returns
    ``(runner, build_dir)``."""
    from cocotb_tools.runner import get_runner

    prepare_environment()
    waves = waves_requested() if waves is None else waves
    sim = _simulator()
    build_dir = BUILD_ROOT / f"{key}-{sim}{'-waves' if waves else ''}"
    runner = get_runner(sim)
    texts = sources
    if sim == "verilator":
        _compile_options(runner)
    if top_only and sim == "verilator":
        texts = _public_top_only(runner, toplevel, texts)
    # ``--x-initial unique``: what no initial value sets (the memories, see ace.flow.convert)
    # starts from the run's random contents (:func:`run_built`). Functions of at most 1,000
    # statements: the cocotb ring4 system test, build included, 167 -> 98 CPU seconds
    # (docs/benchmarks.md, Test suite).
    args = ["-Wno-fatal", "-Wno-WIDTH", "-Wno-CASEINCOMPLETE", "--x-initial", "unique",
            "--output-split-cfuncs", "1000"] if sim == "verilator" else ["-g2005"]
    if sim == "verilator" and waves:
        args += ["--trace-fst" if _fst_writer_builds() else "--trace", "--trace-structs"]
    digest = hashlib.sha256("".join(f"{name}\0{text}\0" for name, text
                                    in sorted(texts.items())).encode()
                            + " ".join([*COCOTB_MAKE_VARIABLES, *args]).encode()).hexdigest()
    with build_lock(build_dir.with_suffix(".lock")):
        stamp = build_dir / "ace_build.stamp"
        fresh = stamp.exists() and stamp.read_text() == digest
        if not fresh:
            build_dir.mkdir(parents=True, exist_ok=True)
            paths = []
            for name, text in texts.items():
                path = build_dir / name
                path.write_text(text)
                paths.append(path)
            runner.build(sources=paths, hdl_toplevel=toplevel, build_dir=build_dir,
                         build_args=args, always=True, timescale=("1ns", "1ps"), waves=waves,
                         log_file=build_dir / "build.log" if quiet else None)
            stamp.write_text(digest)
        else:
            # A runner that did not build still needs to know where the build is.
            runner.build_dir = build_dir
    return runner, build_dir


def build_top(top: str, config: AceConfig, *, waves: bool | None = None, quiet: bool = False):
    """Generate and compile ``top`` for ``config`` if not already built.

    Returns ``(runner, build_dir)``. With ``quiet`` the compiler output goes to
    ``build_dir/build.log`` instead of the terminal. Every testbench drives and reads the top's
    ports only, so the rest of the design stays private (``top_only``: the cocotb engine test,
    build included, 146 -> 50 s, docs/benchmarks.md)."""
    name = module_name(top, config)
    return build_sources(f"{top}-{config.name}-{config.digest}",
                         {f"{name}.v": verilog_text(top, config)}, name, waves=waves,
                         quiet=quiet, top_only=True)


def run_built(runner, build_dir: Path, toplevel: str, module: str, *,
              testcase: str | None = None, env: dict[str, str] | None = None,
              seed: int | None = None, quiet: bool = False) -> Path:
    """Run the cocotb test module ``testbench.<module>`` on a build; raise if any test fails.
    Returns the results file.

    On Verilator every memory starts from random contents (the hardware has no power-up
    contents, :mod:`ace.flow.convert`), drawn from ``ACE_CONTENTS_SEED`` if set, else at random;
    a failure names the seed."""
    from cocotb_tools.runner import get_results

    waves = waves_requested()
    plusargs, contents = [], ""
    if _simulator() == "verilator":
        contents_seed = int(os.environ.get("ACE_CONTENTS_SEED") or random.randrange(1, 1 << 31))
        plusargs = ["+verilator+rand+reset+2", f"+verilator+seed+{contents_seed}"]
        contents = f"; memories started from random contents, ACE_CONTENTS_SEED={contents_seed}"
    test_dir = build_dir / "runs" / (module + (f"-{testcase}" if testcase else ""))
    results = test_dir / "results.xml"
    try:
        runner.test(test_module=f"testbench.{module}", hdl_toplevel=toplevel,
                    hdl_toplevel_lang="verilog", testcase=testcase, build_dir=build_dir,
                    test_dir=test_dir, extra_env=env or {}, waves=waves, seed=seed,
                    results_xml=str(results), timescale=("1ns", "1ps"), plusargs=plusargs,
                    log_file=test_dir / "sim.log" if quiet else None)
    except SystemExit as exit_:
        where = f"log in {test_dir / 'sim.log'}" if quiet else "log above"
        raise AssertionError(f"cocotb {module} on {toplevel} failed (exit {exit_.code}); "
                             f"{where}, results in {results}{contents}") from None
    tests, failed = get_results(results)
    assert tests > 0, f"cocotb {module} ran no test"
    assert failed == 0, f"cocotb {module}: {failed} of {tests} tests failed{contents}"
    return results


def run_cocotb(top: str, config: AceConfig, module: str, *, testcase: str | None = None,
               extra_env: dict[str, str] | None = None, seed: int | None = None,
               quiet: bool = False) -> Path:
    """Run the cocotb test module ``testbench.<module>`` on ``top``; raise if any test fails.

    Returns the results file; the test's own outputs sit beside it. With ``quiet`` the build
    and simulation logs go to files (``build.log``, ``sim.log``) instead of the terminal."""
    runner, build_dir = build_top(top, config, quiet=quiet)
    env = {"ACE_CONFIG": config.to_json(), "ACE_TOP": top, **(extra_env or {})}
    return run_built(runner, build_dir, module_name(top, config), module, testcase=testcase,
                     env=env, seed=seed, quiet=quiet)
