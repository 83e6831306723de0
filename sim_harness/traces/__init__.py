"""Trace importers: every format is read into one :class:`~sim_harness.trace.Trace`.

=========  ==================================================  ==============================
format     file                                                reader
=========  ==================================================  ==============================
ace        our phase trace, JSON or YAML (``version: 1``)      :mod:`.ace_format`
astra-sim  ASTRA-sim 1.0 text workload                         :mod:`.astra`
chakra     Chakra ``.et`` files, one per rank                  :mod:`.chakra`
msccl      MSCCL XML algorithm                                 :mod:`.msccl_format`
=========  ==================================================  ==============================

:func:`load_trace` detects the format from the content (the extension only breaks ties) and
can add hints from an ASTRA-sim system file and network file (see ``docs/traces.md``).
"""

from __future__ import annotations

import glob
from dataclasses import replace
from pathlib import Path

from ..trace import SystemHints, Trace, TraceError
from ._common import load_doc, read_text
from .ace_format import dump_ace_trace, load_ace_trace, write_ace_trace
from .astra import (load_astra_network, load_astra_system, load_astra_workload,
                    looks_like_astra, read_astra_implementations)
from .chakra import load_chakra, looks_like_chakra
from .msccl_format import folding_notes, load_msccl_trace

#: The trace ``ace replay`` runs when given none: a 1 MiB fp32 all-reduce on an 8-node ring.
DEFAULT_TRACE = Path(__file__).with_name("default_allreduce.yaml")

__all__ = ["DEFAULT_TRACE", "FORMATS", "load_trace", "detect_format", "dump_ace_trace",
           "write_ace_trace", "load_astra_system", "load_astra_network", "folding_notes"]

#: The formats :func:`load_trace` reads.
FORMATS = ("ace", "astra-sim", "chakra", "msccl")
_ALLOWED = ("ace (JSON/YAML with version and collectives), astra-sim (1.0 text workload), "
            "chakra (.et protobuf files), msccl (XML)")


def _unknown(path, hint: str = "") -> TraceError:
    return TraceError(f"{path}: unknown trace format{hint}; allowed: {_ALLOWED}")


def _is_text(head: bytes) -> bool:
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as error:
        if error.start < len(head) - 4:     # not just a character cut at the end of `head`
            return False
        text = head[:error.start].decode("utf-8")
    return not any(ord(c) < 32 and c not in "\t\n\r\f\v" for c in text)


def detect_format(path: str | Path) -> str:
    """One of :data:`FORMATS`, from the content; raise :class:`TraceError` if none fits."""
    path = Path(path)
    if path.is_dir():
        if any(path.glob("*.et")):
            return "chakra"
        raise _unknown(path, " (a directory without .et files)")
    if not path.exists():
        if any(path.parent.glob(f"{glob.escape(path.name)}.*.et")):
            return "chakra"                 # an ASTRA-sim style prefix of rank files
        raise TraceError(f"{path}: no such file")
    suffix = path.suffix.lower()
    try:
        with path.open("rb") as f:
            head = f.read(4096)
    except OSError as error:
        raise TraceError(f"{path}: cannot read: {error.strerror}") from None
    if not head.strip():
        raise TraceError(f"{path}: empty file; allowed: {_ALLOWED}")
    if not _is_text(head):
        if suffix == ".et" or looks_like_chakra(head):
            return "chakra"
        raise _unknown(path, " (binary)")
    text = head.decode("utf-8", errors="ignore").lstrip("\ufeff")
    if text.lstrip().startswith("<"):
        if "<algo" in text or suffix == ".xml":
            return "msccl"
        raise _unknown(path, " (XML without <algo>)")
    if looks_like_astra(text):
        return "astra-sim"
    if suffix == ".et":
        return "chakra"
    full = read_text(path)
    try:
        doc = load_doc(full, str(path))
    except TraceError:
        if suffix in (".json", ".yaml", ".yml"):
            raise                           # a broken trace of ours: say where it breaks
        doc = None
    if doc is not None and doc.kind == "mapping" and {"version", "collectives"} & _keys(doc):
        return "ace"
    if suffix == ".txt":
        return "astra-sim"                  # its reader names the bad parallelism type
    if suffix == ".xml":
        return "msccl"
    if doc is not None and doc.kind == "mapping":
        if _keys(doc) & {"npus_count", "units-count", "topology", "topology-name",
                         "all-reduce-implementation", "scheduling-policy"}:
            raise _unknown(path, " (an ASTRA-sim network or system file? give it as "
                                 "network_file/system_file)")
    raise _unknown(path)


def _keys(doc) -> set:
    return {getattr(k, "value", None) for k, _ in doc.node.value}


def _merge(base: SystemHints, new: SystemHints) -> SystemHints:
    """``new``'s hints over ``base``'s."""
    pick = {f: getattr(new, f) if getattr(new, f) is not None else getattr(base, f)
            for f in ("topology", "link_gbps", "link_latency_ns", "mem_gbps", "chunks")}
    algorithms = {**(base.algorithms or {}), **(new.algorithms or {})} or None
    return SystemHints(**pick, algorithms=algorithms, extra={**base.extra, **new.extra})


def load_trace(path: str | Path, *, system_file: str | Path | None = None,
               network_file: str | Path | None = None, msccl_bytes: int | None = None
               ) -> Trace:
    """Read a trace of any of :data:`FORMATS`.

    system_file, network_file : ASTRA-sim system (1.0 text or 2.0 JSON) and analytical network
        (1.0 JSON or 2.0 YAML) files whose hints override the trace's own. The system file's
        algorithms also become the collectives' algorithms for the formats that do not name
        any (astra-sim, chakra). The network's NPU count must match the trace's ranks.
    msccl_bytes : S of an MSCCL trace (default: the largest allowed size up to 1 MiB).
    """
    fmt = detect_format(path)
    if fmt == "ace":
        trace = load_ace_trace(path)
    elif fmt == "astra-sim":
        trace = load_astra_workload(path)
    elif fmt == "chakra":
        trace = load_chakra(path)
    else:
        trace = load_msccl_trace(path, msccl_bytes=msccl_bytes)
    dims = None
    if network_file is not None:
        hints, dims = load_astra_network(network_file)
        npus = 1
        for d in dims:
            npus *= d
        if trace.nodes is not None and trace.nodes != npus:
            raise TraceError(f"{network_file}: {npus} NPUs but the trace {path} is for "
                             f"{trace.nodes} ranks; allowed: a network of {trace.nodes} NPUs")
        trace.nodes = npus
        trace.system = _merge(trace.system, hints)
    if system_file is not None:
        hints = load_astra_system(system_file, len(dims) if dims else None)
        trace.system = _merge(trace.system, hints)
        if fmt in ("astra-sim", "chakra"):
            implementations = read_astra_implementations(system_file, len(dims) if dims
                                                         else None)
            trace.collectives = _implemented(trace.collectives, implementations)
    return trace


def _implemented(specs: list, implementations: dict) -> list:
    """The collectives with the system file's implementations: its algorithms; ``oneRing``
    and the like as one group of every node (span ``["flat"]``); an all-reduce that the file
    runs dimension by dimension as one all-reduce per dimension (span ``["dims", [k]]``), each
    after the previous, named ``<name>@dim<k>``."""
    out, renamed = [], {}
    for spec in specs:
        spec = replace(spec, deps=tuple(renamed.get(d, d) for d in spec.deps))
        impl = implementations.get(spec.collective)
        if impl is None:
            out.append(spec)
        elif impl.flat:
            extra = spec.extra if "span" in spec.extra else {**spec.extra, "span": ["flat"]}
            out.append(replace(spec, algorithm=impl.plain, extra=extra))
        elif impl.per_dimension and "span" not in spec.extra:
            pieces = [replace(spec, name=f"{spec.name}@dim{k}", algorithm=alg,
                              compute_cycles=spec.compute_cycles if k == 0 else 0,
                              deps=spec.deps if k == 0 else (f"{spec.name}@dim{k - 1}",),
                              extra={**spec.extra, "span": ["dims", [k]],
                                     "dimension_of": spec.name})
                      for k, alg in enumerate(impl.algorithms)]
            renamed[spec.name] = pieces[-1].name
            out.extend(pieces)
        else:
            out.append(replace(spec, algorithm=impl.plain))
    return out
