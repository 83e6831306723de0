"""The project's own phase-trace format, JSON or YAML (version 1).

::

    version: 1                      # required
    nodes: 8                        # optional: ranks the trace is written for
    system:                         # optional hints (the replay's --system overrides them)
      topology: torus:4x2           # kind:DIMS (ring, torus, fully_connected, switch)
      link_gbps: [50, 25]           # one number, or one per dimension
      link_latency_ns: 500
      mem_gbps: 370
      chunks: 4
      algorithms: {allreduce: [ring, ring]}
      extra: {anything: verbatim}
    defaults: {dtype: fp32, op: sum, algorithm: ring}    # optional
    collectives:                    # required, at least one, issued in this order
      - name: conv1.wg              # unique
        collective: allreduce       # allreduce, reduce_scatter, allgather, alltoall, msccl
        bytes: 37632                # S in bytes; or count: S in elements of dtype
        dtype: fp32                 # fp32, bf16, fp16, int32
        op: sum                     # sum, max, min (reductions; sum otherwise)
        algorithm: ring             # or one per dimension: [ring, direct]
        compute_cycles: 32291       # compute before it is issued
        deps: [fc1000.wg]           # earlier collectives that must finish first
        extra: {layer: conv1}       # verbatim
      - name: custom
        collective: msccl
        msccl_xml: algo.xml         # relative to this file
        bytes: 1048576
    meta: {model: resnet50}         # verbatim

``ace_trace.schema.json`` (next to this file) is the JSON Schema of these rules; the loader
checks the same rules by hand and names file, line and field in every message. An algorithm a
collective does not give comes from ``defaults``, then ``system.algorithms``, then ``ring``.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import yaml

from ace.sw.compiler import COLLECTIVES
from ace.sw.program import ProgramError, Topology

from ..trace import CollectiveSpec, SystemHints, Trace, TraceError
from ._common import (ALGORITHM_CHOICES, COLLECTIVE_CHOICES, DTYPE_BYTES, JSON_NUMBER, OPS,
                      REDUCING, Doc, check_algorithms, err, load_doc, norm_algorithm,
                      norm_collective, read_text)
from .msccl_format import msccl_granule, read_msccl_header

__all__ = ["FORMAT_VERSION", "load_ace_trace", "dump_ace_trace", "write_ace_trace",
           "trace_to_dict", "SCHEMA_PATH"]

FORMAT_VERSION = 1
SCHEMA_PATH = Path(__file__).with_name("ace_trace.schema.json")
TOP_KEYS = ("version", "nodes", "system", "defaults", "collectives", "meta")
SYSTEM_KEYS = ("topology", "link_gbps", "link_latency_ns", "mem_gbps", "chunks", "algorithms",
               "extra")
DEFAULT_KEYS = ("dtype", "op", "algorithm")
COLLECTIVE_KEYS = ("name", "collective", "bytes", "count", "dtype", "op", "algorithm",
                   "compute_cycles", "deps", "msccl_xml", "extra")
_TOPOLOGY_CHOICES = "kind:DIMS such as ring:8, torus:4x2, fully_connected:8, switch:8"


def load_ace_trace(path: str | Path) -> Trace:
    """Read and check an ACE trace file (JSON or YAML)."""
    path = Path(path)
    source = str(path)
    doc = load_doc(read_text(path), source)
    top = doc.mapping(TOP_KEYS)
    if "version" not in top:
        raise err(source, doc.line, "version", f"missing; allowed: {FORMAT_VERSION}")
    if top["version"].scalar() != FORMAT_VERSION or isinstance(top["version"].scalar(), bool):
        raise top["version"].err(f"{top['version'].describe()} is not allowed; allowed: "
                                 f"{FORMAT_VERSION}")
    nodes = top["nodes"].integer(1) if "nodes" in top else None
    system = _system(top["system"], nodes) if "system" in top else SystemHints()
    defaults = top["defaults"].mapping(DEFAULT_KEYS) if "defaults" in top else {}
    if "collectives" not in top:
        raise err(source, doc.line, "collectives", "missing; allowed: a list of collectives")
    items = top["collectives"].items()
    if not items:
        raise top["collectives"].err("an empty list is not allowed; allowed: a list of at "
                                     "least one collective")
    default_dtype = _dtype(defaults["dtype"]) if "dtype" in defaults else "fp32"
    default_op = _op(defaults["op"]) if "op" in defaults else "sum"
    default_alg = defaults.get("algorithm")
    if default_alg is not None:
        _algorithm(default_alg, None)
    seen: dict[str, Doc] = {}
    specs, dep_docs = [], []
    for item in items:
        spec, deps_doc = _collective(item, path, nodes, seen, default_dtype, default_op,
                                     default_alg, system)
        specs.append(spec)
        dep_docs.append(deps_doc)
    index = {s.name: k for k, s in enumerate(specs)}
    final = []
    for k, (spec, deps_doc) in enumerate(zip(specs, dep_docs)):
        deps = []
        for d in deps_doc.items() if deps_doc is not None else ():
            name = d.string("the name of an earlier collective")
            if name == spec.name:
                raise d.err(f"{name!r} is the collective itself; allowed: earlier collectives")
            if name not in index:
                raise d.err(f"{name!r} is not a collective of this trace; allowed: names of "
                            "earlier collectives")
            if index[name] > k:
                raise d.err(f"{name!r} is a later collective (collectives[{index[name]}]); "
                            "allowed: earlier collectives")
            if name in deps:
                raise d.err(f"{name!r} is listed twice")
            deps.append(name)
        final.append(replace(spec, deps=tuple(deps)))
    meta = _free(top["meta"]) if "meta" in top else {}
    return Trace(path=source, format="ace", collectives=final, system=system, nodes=nodes,
                 meta=meta)


def _free(doc: Doc) -> dict:
    """A free-form mapping (``extra``, ``meta``), as plain Python."""
    doc.mapping()
    return doc.value()


def _dtype(doc: Doc) -> str:
    value = doc.scalar()
    if not isinstance(value, str) or value.lower() not in DTYPE_BYTES:
        raise doc.err(f"{doc.describe()} is not a dtype; allowed: {', '.join(DTYPE_BYTES)}")
    return value.lower()


def _op(doc: Doc) -> str:
    value = doc.scalar()
    if not isinstance(value, str) or value.lower() not in OPS:
        raise doc.err(f"{doc.describe()} is not an op; allowed: {', '.join(OPS)}")
    return value.lower()


def _algorithm(doc: Doc, collective: str | None) -> str | tuple[str, ...]:
    """One algorithm name or a non-empty list of them (one per topology dimension)."""
    if collective == "msccl":
        if doc.scalar() != "msccl":
            raise doc.err(f"{doc.describe()} is not allowed; allowed: msccl (the steps come "
                          "from msccl_xml)")
        return "msccl"
    parts = doc.items() if doc.kind == "list" else [doc]
    if not parts:
        raise doc.err("an empty list is not allowed; allowed: one algorithm, or one per "
                      "topology dimension")
    names = []
    for part in parts:
        value = part.scalar()
        name = norm_algorithm(value) if isinstance(value, str) else None
        if name is None:
            raise part.err(f"{part.describe()} is not an algorithm; allowed: {ALGORITHM_CHOICES}")
        names.append(name)
    if collective is not None:
        problem = check_algorithms(collective, tuple(names))
        if problem:
            raise doc.err(problem)
    return names[0] if doc.kind != "list" else tuple(names)


def _system(doc: Doc, nodes: int | None) -> SystemHints:
    m = doc.mapping(SYSTEM_KEYS)
    topology = dims = None
    if "topology" in m:
        topology = m["topology"].string(_TOPOLOGY_CHOICES).strip()
        try:
            topo = Topology.parse(topology)
        except ProgramError:
            raise m["topology"].err(f"{topology!r} is not a topology; allowed: "
                                    f"{_TOPOLOGY_CHOICES}") from None
        dims = topo.dims
        if nodes is not None and topo.num_nodes != nodes:
            raise m["topology"].err(f"{topology!r} has {topo.num_nodes} nodes but nodes is "
                                    f"{nodes}; allowed: a topology of {nodes} nodes")
    link = None
    if "link_gbps" in m:
        d = m["link_gbps"]
        parts = d.items() if d.kind == "list" else [d]
        link = tuple(float(p.number(positive=True)) for p in parts)
        if not link or (dims is not None and len(link) not in (1, len(dims))):
            raise d.err(f"{len(link)} values are not allowed; allowed: one number, or one per "
                        f"topology dimension ({len(dims) if dims else 'at least one'})")
    algorithms = None
    if "algorithms" in m:
        algorithms = {}
        for key, value in m["algorithms"].mapping().items():
            coll = norm_collective(key)
            if coll is None or coll == "msccl":
                raise value.err(f"{key!r} is not allowed; allowed: "
                                f"{', '.join(COLLECTIVES)}")
            algorithms[coll] = _algorithm(value, coll)
    return SystemHints(
        topology=topology, link_gbps=link,
        link_latency_ns=float(m["link_latency_ns"].number()) if "link_latency_ns" in m else None,
        mem_gbps=float(m["mem_gbps"].number(positive=True)) if "mem_gbps" in m else None,
        chunks=m["chunks"].integer(1) if "chunks" in m else None,
        algorithms=algorithms,
        extra=_free(m["extra"]) if "extra" in m else {})


def _collective(item: Doc, path: Path, nodes, seen, default_dtype, default_op, default_alg,
                system: SystemHints):
    m = item.mapping(COLLECTIVE_KEYS)
    for key in ("name", "collective"):
        if key not in m:
            raise err(item.source, item.line, item.child_field(key), "missing")
    name = m["name"].string()
    if name in seen:
        raise m["name"].err(f"{name!r} is already the name of {seen[name].field} (line "
                            f"{seen[name].line}); allowed: a unique name")
    seen[name] = item
    coll_value = m["collective"].scalar()
    collective = norm_collective(coll_value) if isinstance(coll_value, str) else None
    if collective is None:
        raise m["collective"].err(f"{m['collective'].describe()} is not a collective; allowed: "
                                  f"{COLLECTIVE_CHOICES}")
    dtype = _dtype(m["dtype"]) if "dtype" in m else default_dtype
    size = DTYPE_BYTES[dtype]
    if ("bytes" in m) == ("count" in m):
        raise err(item.source, item.line, item.child_field("bytes"),
                  "both bytes and count given" if "bytes" in m else
                  "missing; allowed: bytes (S in bytes) or count (S in elements)")
    if "bytes" in m:
        nbytes = m["bytes"].whole()
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 1 or nbytes % size:
            raise m["bytes"].err(f"{m['bytes'].describe()} is not allowed; allowed: a positive "
                                 f"multiple of the dtype size ({size} for {dtype})")
    else:
        nbytes = m["count"].integer(1, "a positive number of elements") * size
    reduces = collective in REDUCING or collective == "msccl"
    op = _op(m["op"]) if "op" in m else (default_op if reduces else "sum")
    if op != "sum" and not reduces:
        raise m["op"].err(
            f"{op!r} is not allowed for {collective}, which does not reduce; allowed: sum")
    msccl_xml = None
    if collective == "msccl":
        if "msccl_xml" not in m:
            raise err(item.source, item.line, item.child_field("msccl_xml"),
                      "missing; allowed: the path of an MSCCL XML file")
        msccl_xml = _msccl_file(m["msccl_xml"], path, nbytes, dtype, nodes,
                                m.get("bytes") or m["count"])
    elif "msccl_xml" in m:
        raise m["msccl_xml"].err(f"not allowed for {collective}; allowed: only with "
                                 "collective: msccl")
    if "algorithm" in m:
        algorithm = _algorithm(m["algorithm"], collective)
    elif collective == "msccl":
        algorithm = "msccl"
    elif default_alg is not None:
        algorithm = _algorithm(default_alg, collective)
    elif system.algorithms and collective in system.algorithms:
        algorithm = system.algorithms[collective]
    else:
        algorithm = "ring"
    compute = m["compute_cycles"].integer(0) if "compute_cycles" in m else 0
    deps_doc = m.get("deps")
    if deps_doc is not None and deps_doc.kind != "list":
        raise deps_doc.err(f"{deps_doc.describe()} is not allowed; allowed: a list of names of "
                           "earlier collectives")
    extra = _free(m["extra"]) if "extra" in m else {}
    spec = CollectiveSpec(name=name, collective=collective, bytes=nbytes, dtype=dtype, op=op,
                          algorithm=algorithm, msccl_xml=msccl_xml, compute_cycles=compute,
                          source=f"{item.source}:{item.line}", extra=extra)
    return spec, deps_doc


def _msccl_file(doc: Doc, path: Path, nbytes: int, dtype: str, nodes, size_doc: Doc) -> str:
    rel = doc.string("the path of an MSCCL XML file, relative to this trace")
    xml = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(path)), rel))
    if not os.path.isfile(xml):
        raise doc.err(f"{rel!r}: no such file ({xml}); allowed: the path of an MSCCL XML file, "
                      "relative to this trace")
    header = read_msccl_header(xml)
    granule = msccl_granule(header, dtype)
    if nbytes % granule:
        raise size_doc.err(f"{size_doc.scalar()!r} is not allowed; allowed: a positive multiple "
                           f"of {granule} bytes ({header.nchunksperloop} chunks per loop in "
                           f"{rel}, {DTYPE_BYTES[dtype]}-byte {dtype})")
    if nodes is not None and header.ngpus != nodes:
        raise doc.err(f"{rel!r} is written for {header.ngpus} gpus but nodes is {nodes}; "
                      f"allowed: an algorithm for {nodes} gpus")
    return xml


# -- writing ------------------------------------------------------------------------------------

def _plain(value):
    """JSON/YAML-safe copy: tuples become lists, bytes hex strings."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    return value


def _alg_out(algorithm):
    return list(algorithm) if isinstance(algorithm, tuple) else algorithm


def trace_to_dict(trace: Trace, relative_to: str | Path | None = None) -> dict:
    """The document :func:`dump_ace_trace` writes. MSCCL paths are made relative to the
    directory ``relative_to`` when given."""
    out: dict = {"version": FORMAT_VERSION}
    if trace.nodes is not None:
        out["nodes"] = trace.nodes
    hints = trace.system
    system = {}
    for key in ("topology", "link_gbps", "link_latency_ns", "mem_gbps", "chunks"):
        value = getattr(hints, key)
        if value is not None:
            system[key] = list(value) if isinstance(value, tuple) else value
    if hints.algorithms:
        system["algorithms"] = {k: _alg_out(v) for k, v in hints.algorithms.items()}
    if hints.extra:
        system["extra"] = _plain(hints.extra)
    if system:
        out["system"] = system
    collectives = []
    for spec in trace.collectives:
        item = {"name": spec.name, "collective": spec.collective, "bytes": spec.bytes,
                "dtype": spec.dtype, "op": spec.op, "algorithm": _alg_out(spec.algorithm),
                "compute_cycles": spec.compute_cycles}
        if spec.deps:
            item["deps"] = list(spec.deps)
        if spec.msccl_xml is not None:
            item["msccl_xml"] = (os.path.relpath(spec.msccl_xml, relative_to)
                                 if relative_to is not None else spec.msccl_xml)
        if spec.extra:
            item["extra"] = _plain(spec.extra)
        collectives.append(item)
    out["collectives"] = collectives
    if trace.meta:
        out["meta"] = _plain(trace.meta)
    return out


class _Dumper(yaml.SafeDumper):
    """Quotes strings that the loader would read as JSON numbers (``1e3``)."""


def _str(dumper, value):
    style = '"' if JSON_NUMBER.fullmatch(value) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump_ace_trace(trace: Trace, fmt: str = "yaml", relative_to: str | Path | None = None
                   ) -> str:
    """Any :class:`Trace` as ACE-format text (``fmt``: ``yaml`` or ``json``)."""
    data = trace_to_dict(trace, relative_to)
    if fmt == "json":
        return json.dumps(data, indent=2) + "\n"
    if fmt == "yaml":
        return yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=None,
                         allow_unicode=True, width=100)
    raise TraceError(f"fmt: {fmt!r}; allowed: yaml, json")


def write_ace_trace(trace: Trace, path: str | Path) -> None:
    """Write ``trace`` to ``path`` in the ACE format (JSON for ``.json``, else YAML)."""
    path = Path(path)
    fmt = "json" if path.suffix.lower() == ".json" else "yaml"
    path.write_text(dump_ace_trace(trace, fmt, relative_to=path.parent.absolute()))
