"""Replay a trace on the RTL system: compile each collective, run it on the Verilated engines in
ACE mode and/or baseline mode, check every node's result against the golden model and return
the raw measurements (:mod:`sim_harness.metrics` turns them into the reported figures).

Per collective and mode: compile (:func:`ace.sw.compiler.compile_collective`, or the MSCCL reader),
make random inputs from a seed, run the golden model on the same program, load the input images
into the memory models (no simulated cycles), load the programs through the CSRs (all nodes at
once), start every engine in the same cycle, run until every engine interrupts (sampling the
memory and link counters and each channel's STEPS_DONE every ``interval`` cycles), read the
engine counters and the outputs back, and compare.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path

import numpy as np

from ace.sw import golden
from ace.sw.compiler import compile_collective, max_message_bytes
from ace.regmap import steps_done_offset
from ace.hw.engine import counter_names
from ace.sw.host import staging_area
from ace.layouts import DTYPE_BYTES, Dtype
from ace.sw.msccl import MscclError, load_msccl
from ace.sw.program import ProgramError, assemble, dtype_from_name, link_traffic
from ace.errors import ToolchainError

from .metrics import latency_steps
from .simulator import SystemSimulator, build_driver, run_hosts
from .system import SystemSpec
from .trace import CollectiveSpec, Trace, TraceError

__all__ = ["ReplayError", "CollectiveTooLarge", "check_trace", "check_waves_toolchain",
           "compile_spec", "make_inputs", "replay", "scale_trace", "system_record"]

#: Engine watchdog (TIMEOUT CSR): a channel that sees no progress anywhere in its engine for
#: this many cycles stops with the TIMEOUT error, so a hang ends as a reported error.
WATCHDOG_CYCLES = 200_000


class ReplayError(RuntimeError):
    """A collective that cannot run on the chosen system, or an engine that failed."""


class CollectiveTooLarge(ReplayError, ProgramError):
    """A collective whose program does not fit the instruction memories or whose buffers do
    not fit the system's memory. ``scale`` is a size factor at which the trace's largest
    collectives fit (see :func:`scale_trace`), or None."""

    def __init__(self, message: str, scale: float | None = None):
        super().__init__(message)
        self.scale = scale


def make_inputs(rng: np.random.Generator, dtype: Dtype, count: int) -> np.ndarray:
    """Training-like data: normal values for floats, moderate integers for int32."""
    if dtype == Dtype.INT32:
        return rng.integers(-(1 << 20), 1 << 20, size=count, dtype=np.int32).view(np.uint32)
    values = rng.standard_normal(count).astype(np.float32)
    if dtype == Dtype.FP32:
        return values.view(np.uint32)
    import ml_dtypes
    return values.astype(ml_dtypes.bfloat16).view(np.uint16)


def compile_spec(spec: CollectiveSpec, system: SystemSpec, mode: str, *, check: bool = True):
    """The program of one collective on ``system`` in ``mode`` (``check``: assemble it for
    the system's engine too; MSCCL programs are always checked)."""
    dtype = dtype_from_name(spec.dtype)
    esize = DTYPE_BYTES[dtype]
    if spec.bytes % esize or spec.bytes <= 0:
        raise TraceError(f"{spec.source}: bytes: {spec.bytes} is not a positive multiple of "
                         f"{esize} ({spec.dtype})")
    count = spec.bytes // esize
    if spec.collective == "msccl":
        return _msccl_program(spec, system, mode, count, dtype)
    algorithm = spec.algorithm if isinstance(spec.algorithm, str) else list(spec.algorithm)
    return compile_collective(spec.collective, count, topology=system.topology,
                              algorithm=algorithm, dtype=dtype, op=spec.op, mode=mode,
                              config=system.config, check=check)


def _msccl_program(spec: CollectiveSpec, system: SystemSpec, mode: str, count: int, dtype):
    """The MSCCL algorithm in as few passes (loops) as keep every message within
    ``packet_bytes`` (the deadlock rule, docs/engine.md) and fit the SRAM and the instruction
    memories."""
    limit = system.config.packet_bytes
    reason = "no number of passes divides the count"
    for loops in (d for d in range(1, count + 1) if count % d == 0):
        try:
            program = load_msccl(spec.msccl_xml, count=count, loops=loops, dtype=dtype,
                                 op=spec.op, mode=mode, topology=system.topology)
        except MscclError as error:
            if "not a multiple" in str(error):
                continue
            raise
        biggest = max_message_bytes(program)
        if biggest > limit:
            reason = f"{biggest}-byte messages exceed packet_bytes = {limit}"
            continue
        try:
            assemble(program, system.config)
        except ProgramError as error:
            raise ReplayError(f"{spec.name}: {spec.msccl_xml} at {spec.bytes} bytes does not "
                              f"fit the engine in {loops} passes: {error}") from None
        return program
    raise ReplayError(f"{spec.name}: {spec.msccl_xml} at {spec.bytes} bytes: {reason}")


def _algorithm_name(program) -> str:
    alg = program.algorithm
    return alg if isinstance(alg, str) else "_".join(alg)


def _latency_steps(spec: CollectiveSpec, program, system: SystemSpec) -> int:
    if spec.collective == "msccl":
        # The longest chain of communicating steps in any channel.
        return max(sum(1 for s in ch.steps if {"send", "recv"} & s.uses)
                   for node in program.nodes for ch in node.channels)
    return latency_steps(program.collective, program.algorithm, str(system.topology))


def system_record(spec: SystemSpec, background_share: float = 0.0) -> dict:
    cfg = spec.config
    return {"config": cfg.to_dict(), "topology": str(spec.topology), "nodes":
            spec.topology.num_nodes, "clock_mhz": cfg.clock_mhz,
            "link_bytes_per_cycle": float(cfg.link_bytes), "link_latency": spec.link_latency,
            "mem_bytes_per_cycle": float(spec.mem_rate),
            "mem_latency": spec.mem_latency, "mem_bytes": spec.mem_bytes,
            "background_share": background_share}


def _run_one(sim: SystemSimulator, spec: CollectiveSpec, system: SystemSpec, mode: str, *,
             seed: int, interval: int, progress) -> dict:
    cfg = system.config
    program = compile_spec(spec, system, mode)
    p = program.num_nodes
    if p != system.topology.num_nodes:
        raise ReplayError(f"{spec.name}: the program has {p} nodes; the system has "
                          f"{system.topology.num_nodes}")
    rng = np.random.default_rng(seed)
    inputs = [make_inputs(rng, program.dtype, node.in_elems) for node in program.nodes]
    expect = golden.run(program, inputs)
    images = golden.place_inputs(program, inputs)
    top = max(len(im) for im in expect.memory)
    stage, _ = staging_area(program, cfg)
    for k, image in enumerate(images):
        padded = np.zeros(-(-top // 4) * 4, np.uint8)
        padded[:len(image)] = image
        sim.load(k, 0, padded.tobytes())
    assembled = assemble(program, cfg)
    names = counter_names(cfg)
    hosts = sim.hosts(cfg, names)

    async def prepare(host, node):
        await host.load_program(node, stage_base=stage)
        await host.set_irq_enable(done=True, error=True)
        await host.set_timeout(WATCHDOG_CYCLES)
        await host.clear_counters()

    run_hosts(sim, [prepare(h, n) for h, n in zip(hosts, assembled.nodes)])
    sim.flush()
    run_hosts(sim, [h.start() for h in hosts])
    sim.flush()
    start_cycle = sim.cycle

    # Run in slices so a progress bar can move; samples continue across slices.
    S = program.bytes_per_node
    budget = 100_000 + 200 * (S // cfg.link_bytes + 1) * max(1, p)
    regs = [steps_done_offset(c) for c in range(cfg.num_channels)]
    samples, done, elapsed = [], False, 0
    while not done and elapsed < budget:
        piece = sim.run(timeout=min(1 << 16, budget - elapsed), interval=interval,
                        registers=regs)
        for s in piece["samples"]:
            if not samples or s["cycle"] > samples[-1]["cycle"]:
                samples.append(s)
        done = piece["done"]
        elapsed = piece["cycle"] - start_cycle
        if progress:
            progress(elapsed)
    statuses = run_hosts(sim, [h.status() for h in hosts])
    counters = run_hosts(sim, [h.counters() for h in hosts])
    errors = [f"node {k}: {hosts[k].describe_error(st)}" for k, st in enumerate(statuses)
              if st["error"]]
    if errors or not done:
        raise ReplayError(f"{spec.name} ({mode}): " + ("; ".join(errors) if errors else
                          f"not done after {elapsed} cycles"))
    esize = DTYPE_BYTES[program.dtype]
    correct = True
    for k, node in enumerate(program.nodes):
        n = node.out_elems * esize
        got = sim.dump(k, node.output_addr, n)
        want = expect.memory[k][node.output_addr:node.output_addr + n].tobytes()
        correct &= got == want
    links = link_traffic(program)
    L = cfg.num_links
    base = samples[0]
    return {
        "name": spec.name, "collective": program.collective if spec.collective != "msccl"
        else "msccl", "msccl_coll": getattr(program, "collective", None),
        "algorithm": "msccl" if spec.collective == "msccl" else _algorithm_name(program),
        "msccl_algorithm": program.algorithm if spec.collective == "msccl" else None,
        "topology": str(system.topology), "nodes": p,
        "bytes": S, "dtype": spec.dtype, "op": spec.op, "mode": mode, "chunks": program.chunks,
        "seed": seed, "start_cycle": start_cycle, "end_cycle": start_cycle + max(
            c["cycles"] for c in counters),
        "cycles": max(c["cycles"] for c in counters),
        "mem_read_bytes": [c["mem_read_bytes"] for c in counters],
        "mem_write_bytes": [c["mem_write_bytes"] for c in counters],
        "golden_mem_read_bytes": list(expect.mem_read_bytes),
        "golden_mem_write_bytes": list(expect.mem_write_bytes),
        "link_tx_payload_bytes": [[c[f"link{l}_tx_payload_bytes"] for l in range(L)]
                                  for c in counters],
        "link_tx_wire_bytes": [[_wire(samples, sim.links, k, l, base) for l in range(L)]
                               for k in range(p)],
        "links_used": sorted([k, l] for (k, d, l) in links if d == "tx"),
        "program_link_bytes": [[links.get((k, "tx", l), 0) for l in range(L)]
                               for k in range(p)],
        "latency_steps": _latency_steps(spec, program, system),
        "correct": bool(correct),
        "samples": {
            "interval": interval, "cycle": [s["cycle"] for s in samples],
            "mem_read_bytes": [[v - b for v, b in zip(s["mem_read_bytes"],
                                                      base["mem_read_bytes"])] for s in samples],
            "mem_write_bytes": [[v - b for v, b in zip(s["mem_write_bytes"],
                                                       base["mem_write_bytes"])]
                                for s in samples],
            "link_wire_bytes": [[[_link(s, sim.links, k, l) - _link(base, sim.links, k, l)
                                  for l in range(L)] for k in range(p)] for s in samples],
            "steps_done": [s["registers"] for s in samples]},
        "steps": [[[[st.type, st.nbytes] for st in ch.steps] for ch in node.channels]
                  for node in program.nodes],
    }


def _link(sample, links, node, link) -> int:
    try:
        return sample["link_bytes"][links.index((node, link))]
    except ValueError:
        return 0


def _wire(samples, links, node, link, base) -> int:
    return _link(samples[-1], links, node, link) - _link(base, links, node, link)


def replay(trace: Trace, system: SystemSpec, *, modes=("ace", "baseline"), seed: int = 1,
           interval: int | None = None, background_share: float = 0.0, waves: bool = False,
           waves_dir=None, log=print, progress: bool = True, parallel: bool = True) -> dict:
    """Run every collective of ``trace`` in every mode; return
    ``{"system": system_record, "runs": [{"mode", "raws": [raw...]}]}``.

    ``waves`` records an FST waveform of each mode's whole run, ``waves_<mode>.fst`` in
    ``waves_dir`` (default: the waves build's folder), with a separate Verilator build.

    With ``parallel`` each mode runs in its own simulator process at the same time (the modes
    are independent runs of the same system); results are identical either way."""
    from concurrent.futures import ThreadPoolExecutor

    check_trace(trace, system, modes)     # compile and size errors before any build
    if waves:
        check_waves_toolchain()
    exe = build_driver(system, waves=waves, log=log)

    def run_mode(position: int, mode: str) -> dict:
        from tqdm import tqdm

        raws = []
        path = None
        if waves:
            where = Path(waves_dir) if waves_dir else exe.parent.parent
            where.mkdir(parents=True, exist_ok=True)
            path = where / f"waves_{mode}.fst"
        with SystemSimulator(system, waves=waves, waves_path=path, log=log) as sim:
            sim.reset(background_share=background_share)
            for i, spec in enumerate(trace.collectives):
                bar = tqdm(total=None, unit="cyc", unit_scale=True, leave=False,
                           position=position, desc=f"{mode} {spec.name}") if progress else None

                def advance(elapsed, bar=bar):
                    if bar is not None:
                        bar.update(elapsed - bar.n)
                step = interval or max(64, spec.bytes // system.config.link_bytes // 256)
                raws.append(_run_one(sim, spec, system, mode, seed=seed + i, interval=step,
                                     progress=advance))
                if bar is not None:
                    bar.close()
        out = {"mode": mode, "raws": raws}
        if waves:
            out["waves"] = str(sim.waves_path)
        return out

    if parallel and len(modes) > 1 and not waves:
        with ThreadPoolExecutor(len(modes)) as pool:
            runs = list(pool.map(run_mode, range(len(modes)), modes))
    else:
        runs = [run_mode(0, mode) for mode in modes]
    return {"system": system_record(system, background_share), "runs": runs}


def _check_fits(spec: CollectiveSpec, program, system: SystemSpec) -> None:
    """Refuse, before any simulation, a collective whose buffers and staging area do not fit
    the system's memory."""
    _, need = staging_area(program, system.config)
    if need > system.mem_bytes:
        raise ReplayError(f"{spec.name}: needs {need} bytes of memory per node; the system has "
                          f"mem_bytes = {system.mem_bytes}")


def check_waves_toolchain() -> None:
    """Raise :class:`~ace.flow.toolchain.ToolchainError` unless the C++ compiler finds the headers
    of Verilator's FST writer (``lz4.h``, ``zlib.h``), before a waves build fails on them."""
    cxx = os.environ.get("CXX", "c++")
    try:
        result = subprocess.run([cxx, "-fsyntax-only", "-x", "c++", "-"], capture_output=True,
                                text=True, input="#include <lz4.h>\n#include <zlib.h>\n")
    except OSError as error:
        raise ToolchainError(f"--waves: cannot run the C++ compiler {cxx!r}: {error}") from None
    if result.returncode:
        missing = [h for h in ("lz4.h", "zlib.h") if h in result.stderr] or ["lz4.h/zlib.h"]
        raise ToolchainError(f"--waves: Verilator's FST writer needs {', '.join(missing)}, "
                             f"which {cxx} does not find; install liblz4-dev and zlib1g-dev "
                             "(Debian/Ubuntu) or lz4-devel and zlib-devel (Fedora)")


def _fit_problem(spec: CollectiveSpec, system: SystemSpec, mode: str):
    """``(message, need / limit)`` when the collective's program or buffers do not fit
    ``system``, else None; other program errors raise :class:`ProgramError`."""
    program = compile_spec(spec, system, mode, check=False)
    what = f"{spec.name} ({spec.source}, {mode} mode): {spec.collective} of {spec.bytes} bytes"
    cfg = system.config
    words = max(len(ch.steps) + 1 for node in program.nodes for ch in node.channels)
    if words > cfg.program_words:
        return (f"{what} needs {words} instructions per channel; the engine has "
                f"program_words = {cfg.program_words}", words / cfg.program_words)
    _, need = staging_area(program, cfg)
    if need > system.mem_bytes:
        return (f"{what} needs {need} bytes of memory per node; the system has mem_bytes = "
                f"{system.mem_bytes}", need / system.mem_bytes)
    if spec.collective != "msccl":
        assemble(program, cfg)
    return None


def check_trace(trace: Trace, system: SystemSpec, modes=("ace", "baseline")) -> None:
    """Compile every collective in every mode; raise :class:`CollectiveTooLarge` for the
    first that does not fit ``system`` (with a scale at which the largest ones fit), or the
    compiler's error."""
    for spec in trace.collectives:
        for mode in modes:
            problem = _fit_problem(spec, system, mode)
            if problem:
                raise CollectiveTooLarge(problem[0], _fitting_scale(trace, spec, problem[1],
                                                                    system, modes))


def _fitting_scale(trace: Trace, failed: CollectiveSpec, excess: float, system: SystemSpec,
                   modes) -> float | None:
    """A round factor (two significant digits) at which the largest collective of each kind
    in ``trace`` fits: the linear estimate from ``failed``, lowered until it checks out."""
    largest = {}
    for spec in trace.collectives:
        key = (spec.collective, spec.dtype, spec.algorithm, spec.msccl_xml)
        if spec.collective != "msccl" and (key not in largest
                                           or spec.bytes > largest[key].bytes):
            largest[key] = spec
    if failed.collective == "msccl" or not largest:
        return None
    scale = 0.9 / excess * failed.bytes / max(s.bytes for s in largest.values())
    for _ in range(8):
        scale = float(f"{scale:.2g}")
        try:
            scaled = scale_trace(Trace(trace.path, trace.format, list(largest.values())),
                                 scale=scale)
            if not any(_fit_problem(s, system, m) for s in scaled.collectives for m in modes):
                return scale
        except ProgramError:
            return None
        scale *= 0.8
    return None


def _layer(spec: CollectiveSpec, position: int) -> int:
    return spec.extra.get("layer_index", position) if isinstance(spec.extra, dict) else position


def scale_trace(trace: Trace, *, scale: float | None = None, max_bytes: int | None = None,
                layers: tuple[int | None, int | None] | None = None) -> Trace:
    """A copy of ``trace`` cut down to run on a small system.

    ``layers=(a, b)`` keeps the collectives whose layer index is in ``a <= i < b`` (either
    end None: open): the workload layer (``extra["layer_index"]`` of ASTRA-sim traces), else
    the collective's position in the trace. ``scale`` multiplies every size and ``max_bytes``
    caps it, both rounded to whole elements, at least one. Dependencies on collectives left
    out are dropped; each changed size keeps the file's in ``extra["unscaled_bytes"]``.
    """
    if scale is not None and not scale > 0:
        raise ValueError(f"scale: {scale}; allowed: a number above 0")
    if max_bytes is not None and max_bytes < 1:
        raise ValueError(f"max_bytes: {max_bytes}; allowed: at least 1")
    specs = list(trace.collectives)
    if layers is not None:
        low, high = layers
        specs = [s for i, s in enumerate(trace.collectives)
                 if (low is None or _layer(s, i) >= low) and (high is None or _layer(s, i) < high)]
        if not specs:
            indices = [_layer(s, i) for i, s in enumerate(trace.collectives)]
            raise ValueError(f"layers: {low if low is not None else ''}:"
                             f"{high if high is not None else ''} selects no collective; the "
                             f"trace's layers are {min(indices)} to {max(indices)}")
    kept = {s.name for s in specs}
    out = []
    for spec in specs:
        esize = DTYPE_BYTES[dtype_from_name(spec.dtype)]
        count = spec.bytes // esize
        if scale is not None:
            count = max(1, round(count * scale))
        if max_bytes is not None:
            count = max(1, min(count, max_bytes // esize))
        changes = {"deps": tuple(d for d in spec.deps if d in kept)}
        if count * esize != spec.bytes:
            changes.update(bytes=count * esize,
                           extra={**spec.extra, "unscaled_bytes": spec.bytes})
        out.append(dataclasses.replace(spec, **changes))
    meta = {**trace.meta, "scaled": {"scale": scale, "max_bytes": max_bytes,
                                     "layers": list(layers) if layers else None}}
    return dataclasses.replace(trace, collectives=out, meta=meta)
