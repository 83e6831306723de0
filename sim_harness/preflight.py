"""The pre-flight of a replay: every collective of a trace compiled and assembled once per mode
and checked against the system, before any Verilator build or simulated cycle.

:func:`preflight` turns ``(trace, system, modes)`` into a :class:`Plan`: one
:class:`PreparedCollective` per collective and mode, holding the compiled program, its
instruction words for the system's engine and the staging area it needs. The replay
(:func:`sim_harness.replay.replay`), the sweep (one plan per distinct point, handed to its
workers), the experiments (:func:`sim_harness.experiments.common.fits`) and ``ace bench-sim``
all start here, so "does it fit" is decided in one place:

* instruction memory: the longest channel's steps plus ``end`` within ``program_words``;
* system memory: the buffers and the staging area within the system's ``mem_bytes``;
* everything else the assembler checks (SRAM regions in ``sram`` placement, channels, links).

A collective whose programs are longer than the instruction memories runs as back-to-back
pieces, as a host runtime would issue it (:func:`~sim_harness.trace.split_collective`: the
fewest equal pieces that fit, in every mode); the plan lists them in its place
(:attr:`Plan.pieces` says which). A collective that does not fit otherwise raises
:class:`CollectiveTooLarge`, whose ``scale`` is a size factor at which the trace's largest
collectives fit (``ace replay --scale``); other compile errors are the compiler's
:class:`~ace.sw.program.ProgramError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ace.layouts import DTYPE_BYTES
from ace.sw.compiler import compile_collective, program_words
from ace.sw.host import staging_area
from ace.sw.msccl import read_msccl
from ace.sw.program import (AssembledProgram, CollectiveProgram, ProgramError, assemble,
                            dtype_from_name)
from ace.vocab import Mode

from .groups import grouped_program
from .system import SystemSpec
from .trace import CollectiveSpec, Trace, TraceError, scale_trace, split_collective

__all__ = ["ReplayError", "CollectiveTooLarge", "PreparedCollective", "Plan", "compile_spec",
           "prepare", "preflight"]


class ReplayError(RuntimeError):
    """A collective that cannot run on the chosen system, or an engine that failed."""


class CollectiveTooLarge(ReplayError, ProgramError):
    """A collective whose program does not fit the instruction memories or whose buffers do
    not fit the system's memory. ``excess`` is need / limit of the resource that ran out
    (``resource``: ``instructions`` or ``memory``); ``scale`` is a size factor at which the
    trace's largest collectives fit, or None."""

    def __init__(self, message: str, scale: float | None = None, excess: float | None = None,
                 resource: str | None = None):
        super().__init__(message)
        self.scale = scale
        self.excess = excess
        self.resource = resource


@dataclass(frozen=True)
class PreparedCollective:
    """One collective in one mode, compiled, assembled and checked for one system.

    spec : the trace's collective.
    mode : where the program's buffers live (:class:`~ace.vocab.Mode`).
    program : the compiled program (what the golden model runs).
    assembled : its instruction words for the system's engine (what the hosts load).
    stage_base, mem_bytes : the staging area's base (``STAGE_BASE``) and the memory the
        collective needs per node, buffers and staging area together (at most the system's).
    """
    spec: CollectiveSpec
    mode: Mode
    program: CollectiveProgram
    assembled: AssembledProgram
    stage_base: int
    mem_bytes: int


@dataclass(frozen=True)
class Plan:
    """The pre-flight of a trace: ``collectives[mode]`` lists the prepared collectives of that
    mode in trace order, a collective run in pieces replaced by its pieces; ``specs`` are the
    trace's collectives and ``pieces`` maps the name of each one run in pieces to their count."""
    system: SystemSpec
    modes: tuple[Mode, ...]
    collectives: dict[Mode, tuple[PreparedCollective, ...]]
    specs: tuple[CollectiveSpec, ...] = ()
    pieces: dict[str, int] = field(default_factory=dict)

    def matches(self, trace: Trace, system: SystemSpec, modes) -> bool:
        """Whether this plan was made for ``trace`` (same collectives), ``system`` and every
        mode of ``modes``."""
        modes = [Mode(m) for m in modes]
        return (system == self.system and set(modes) <= set(self.modes)
                and list(self.specs) == list(trace.collectives))


def compile_spec(spec: CollectiveSpec, system: SystemSpec, mode: str) -> CollectiveProgram:
    """The program of one collective on ``system`` in ``mode``, not yet assembled (MSCCL
    programs are assembled while their number of passes is chosen)."""
    return _compile(spec, system, mode)[0]


def _compile(spec: CollectiveSpec, system: SystemSpec, mode: str):
    """``(program, assembled or None)``: MSCCL programs come assembled."""
    dtype = dtype_from_name(spec.dtype)
    esize = DTYPE_BYTES[dtype]
    if spec.bytes % esize or spec.bytes <= 0:
        raise TraceError(f"{spec.source}: bytes: {spec.bytes} is not a positive multiple of "
                         f"{esize} ({spec.dtype})")
    count = spec.bytes // esize
    if spec.collective == "msccl":
        return _msccl_program(spec, system, mode, count, dtype)
    if spec.extra.get("span"):                      # model/data-parallel groups, one dimension
        return grouped_program(spec, system, mode, count, dtype), None
    algorithm = system.run_algorithm(spec.algorithm if isinstance(spec.algorithm, str)
                                     else list(spec.algorithm))
    program = compile_collective(spec.collective, count, topology=system.topology,
                                 algorithm=algorithm, dtype=dtype, op=spec.op, mode=mode,
                                 config=system.config, check=False)
    return program, None


def _msccl_program(spec: CollectiveSpec, system: SystemSpec, mode: str, count: int, dtype):
    """The MSCCL algorithm (parsed once) folded onto the engine's channels, in as few passes
    as its messages, the SRAM and the instruction memories allow
    (:meth:`ace.sw.msccl.MscclAlgorithm.fit`); ``(program, assembled)``."""
    try:
        program = read_msccl(spec.msccl_xml).fit(count, system.config, dtype=dtype, op=spec.op,
                                                 mode=mode, topology=system.topology)
        return program, assemble(program, system.config)
    except ProgramError as error:
        raise ReplayError(f"{spec.name}: {spec.msccl_xml} at {spec.bytes} bytes does not fit "
                          f"the engine: {error}") from None


def prepare(spec: CollectiveSpec, system: SystemSpec, mode: str) -> PreparedCollective:
    """Compile and assemble one collective for ``system`` in ``mode`` and check that it fits:
    :class:`CollectiveTooLarge` (``scale`` None, ``excess`` set) when its instructions or its
    memory do not, :class:`ReplayError` when the program is for another number of nodes, the
    compiler's or assembler's :class:`~ace.sw.program.ProgramError` otherwise."""
    program, assembled = _compile(spec, system, mode)
    cfg, nodes = system.config, system.topology.num_nodes
    what = f"{spec.name} ({spec.source}, {mode} mode): {spec.collective} of {spec.bytes} bytes"
    if program.num_nodes != nodes:
        raise ReplayError(f"{spec.name}: the program has {program.num_nodes} nodes; the system "
                          f"has {nodes}")
    words = program_words(program)
    if words > cfg.program_words:
        raise CollectiveTooLarge(f"{what} needs {words} instructions per channel; the engine "
                                 f"has program_words = {cfg.program_words}",
                                 excess=words / cfg.program_words, resource="instructions")
    stage_base, need = staging_area(program, cfg)
    if need > system.mem_bytes:
        raise CollectiveTooLarge(f"{what} needs {need} bytes of memory per node; the system "
                                 f"has mem_bytes = {system.mem_bytes}",
                                 excess=need / system.mem_bytes, resource="memory")
    if assembled is None:
        assembled = assemble(program, cfg)
    return PreparedCollective(spec, Mode(mode), program, assembled, stage_base, need)


def preflight(trace: Trace, system: SystemSpec, modes=tuple(Mode)) -> Plan:
    """Prepare every collective of ``trace`` in every mode (:func:`prepare`); raise for the
    first that cannot run, a :class:`CollectiveTooLarge` with the ``scale`` at which the
    trace's largest collectives fit."""
    modes = tuple(Mode(m) for m in modes)
    prepared = {mode: [] for mode in modes}
    pieces = {}
    for spec in trace.collectives:
        try:
            done = {mode: [prepare(spec, system, mode)] for mode in modes}
        except CollectiveTooLarge as error:
            done = _in_pieces(spec, system, modes, error)
            if done is None:
                raise CollectiveTooLarge(str(error), _fitting_scale(
                    trace, spec, error.excess, system, modes), error.excess,
                    error.resource) from None
            pieces[spec.name] = len(done[modes[0]])
        for mode in modes:
            prepared[mode] += done[mode]
    return Plan(system, modes, {mode: tuple(p) for mode, p in prepared.items()},
                tuple(trace.collectives), pieces)


#: Most pieces a collective is cut into before it counts as too large.
MAX_PIECES = 64


def _in_pieces(spec: CollectiveSpec, system: SystemSpec, modes,
               error: CollectiveTooLarge) -> dict | None:
    """``spec`` prepared as the fewest equal pieces that fit the instruction memories in every
    mode, or None when instructions are not what ran out (or no piece count up to
    :data:`MAX_PIECES` fits)."""
    if error.resource != "instructions" or spec.collective == "msccl":
        return None
    count = spec.bytes // DTYPE_BYTES[dtype_from_name(spec.dtype)]
    for k in range(max(2, int(error.excess)), min(MAX_PIECES, count) + 1):
        try:
            return {mode: [prepare(piece, system, mode) for piece in split_collective(spec, k)]
                    for mode in modes}
        except CollectiveTooLarge as again:
            if again.resource != "instructions":
                return None
    return None


def _fits(spec: CollectiveSpec, system: SystemSpec, modes) -> bool:
    try:
        for mode in modes:
            prepare(spec, system, mode)
    except CollectiveTooLarge:
        return False
    return True


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
            if all(_fits(s, system, modes) for s in scaled.collectives):
                return scale
        except ProgramError:
            return None
        scale *= 0.8
    return None
