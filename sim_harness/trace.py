"""The one internal representation every trace format is read into.

A :class:`Trace` is an ordered list of :class:`CollectiveSpec` (what to run) plus optional
:class:`SystemHints` (what the file says about the machine: topology, link and memory rates).
The importers (:mod:`sim_harness.traces`) produce it; the replay runs it collective by
collective on the RTL system and checks every result against the golden model.

Sizes follow the compiler's convention (:mod:`ace.sw.compiler`): ``bytes`` is S, the collective's
vector length in bytes (all-reduce: the input and output per node; reduce-scatter: the input per
node; all-gather: the output per node; all-to-all: the input per node).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ace.layouts import DTYPE_BYTES
from ace.sw.program import dtype_from_name
from ace.vocab import Collective

__all__ = ["TraceError", "CollectiveSpec", "SystemHints", "Trace", "COLLECTIVE_NAMES", "MSCCL",
           "scale_trace", "split_collective"]

#: The collective of a trace entry whose steps come from an MSCCL XML file.
MSCCL = "msccl"
#: The collectives the compiler runs (:class:`ace.vocab.Collective`), and :data:`MSCCL`.
COLLECTIVE_NAMES = (*Collective, MSCCL)


class TraceError(ValueError):
    """A malformed or unsupported trace. The message starts with ``file:line: field:`` (the line
    and field where they are known) and says what is allowed."""


@dataclass(frozen=True)
class CollectiveSpec:
    """One collective to replay.

    name : label, unique within the trace (``conv1.weight_grad``, ``allreduce_0``).
    collective : one of :data:`COLLECTIVE_NAMES`.
    bytes : S in bytes (see the module docstring); a multiple of the dtype's size.
    dtype : ``fp32``, ``bf16``, ``fp16`` or ``int32``.
    op : ``sum``, ``max`` or ``min`` (reductions only; ``sum`` otherwise).
    algorithm : one name per topology dimension, or one for all (``ring``, ``direct``,
        ``halving_doubling``, ``double_binary_tree``); ``msccl`` for ``collective == "msccl"``.
    msccl_xml : path of the MSCCL XML file when ``collective == "msccl"``.
    compute_cycles : compute time before the collective is issued (workload traces), cycles.
    deps : names of collectives that must finish before this one is issued.
    source : ``file:line`` it came from, for messages.
    extra : what else the file says about it (layer, pass, node id...), verbatim; not compared.
    """
    name: str
    collective: str
    bytes: int
    dtype: str = "fp32"
    op: str = "sum"
    algorithm: str | tuple[str, ...] = "ring"
    msccl_xml: str | None = None
    compute_cycles: int = 0
    deps: tuple[str, ...] = ()
    source: str = ""
    extra: dict = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class SystemHints:
    """What a trace (or its companion system/network files) says about the machine; ``None``
    where it says nothing. The replay's ``--system`` option overrides these."""
    topology: str | None = None                 # "ring:8", "torus:4x4", "switch:16" ...
    link_gbps: tuple[float, ...] | None = None  # per dimension, GB/s
    link_latency_ns: float | None = None
    mem_gbps: float | None = None
    chunks: int | None = None                   # preferred dataset splits
    algorithms: dict | None = None              # collective -> algorithm (as CollectiveSpec)
    extra: dict = field(default_factory=dict)   # everything else the file had, verbatim


@dataclass
class Trace:
    """path: the file read; format: ``ace``, ``astra-sim``, ``chakra`` or ``msccl``."""
    path: str
    format: str
    collectives: list[CollectiveSpec]
    system: SystemHints = field(default_factory=SystemHints)
    nodes: int | None = None                    # ranks the trace describes, if it says
    meta: dict = field(default_factory=dict)    # trace-level details (parallelism...), verbatim


def _layer(spec: CollectiveSpec, position: int) -> int:
    return spec.extra.get("layer_index", position) if isinstance(spec.extra, dict) else position


def split_collective(spec: CollectiveSpec, pieces: int) -> list[CollectiveSpec]:
    """``spec`` as ``pieces`` back-to-back collectives of the same kind over consecutive parts
    of its vector, as equal as whole elements allow (the first ones one element longer), named
    ``<name>#<i>/<pieces>``. The first keeps the compute time and the dependencies, each later
    one depends on the one before; ``extra`` records the piece and the whole size."""
    esize = DTYPE_BYTES[dtype_from_name(spec.dtype)]
    count = spec.bytes // esize
    if not 1 <= pieces <= count:
        raise ValueError(f"pieces: {pieces}; allowed: 1 to {count} (the elements of "
                         f"{spec.name})")
    out = []
    for i in range(pieces):
        elements = count // pieces + (i < count % pieces)
        name = f"{spec.name}#{i + 1}/{pieces}"
        out.append(dataclasses.replace(
            spec, name=name, bytes=elements * esize,
            compute_cycles=spec.compute_cycles if i == 0 else 0,
            deps=spec.deps if i == 0 else (out[-1].name,),
            extra={**spec.extra, "piece": [i + 1, pieces], "whole_bytes": spec.bytes}))
    return out


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
