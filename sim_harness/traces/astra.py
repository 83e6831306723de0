"""ASTRA-sim inputs: 1.0 text workloads, system files (1.0 ``key: value`` or 2.0 JSON) and
analytical network files (1.0 JSON or 2.0 YAML).

Workload (whitespace-separated, one layer per line)::

    DATA                                  # parallelism, with its options (see PARALLELISM)
    54                                    # number of layers
    conv1 -1 13003 NONE 0 12864 NONE 0 32291 ALLREDUCE 37632 3229
    # name reserved fwd_compute fwd_comm fwd_bytes ig_compute ig_comm ig_bytes
    #      wg_compute wg_comm wg_bytes [update_delay] [parallelism: HYBRID_CUSTOMIZED only]

Every pass whose comm type is not ``NONE`` and whose size is > 0 becomes one collective named
``<layer>.fwd``, ``<layer>.ig`` or ``<layer>.wg`` (a repeated layer name gets ``#2``, ``#3``...).
They are listed in one training iteration's issue order: the forward pass over layers 0..L-1,
then the backward pass over layers L-1..0, weight gradient before input gradient. A
collective's ``compute_cycles`` is all the compute since the previous collective in that order
(its own pass's compute plus that of passes without communication); the rest is in ``extra``.
Sizes are S in bytes; the dtype is fp32 when the size is a multiple of 4, else bf16.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..trace import CollectiveSpec, SystemHints, Trace
from ._common import (Doc, check_algorithms, err, infer_dtype, int_choices, load_doc,
                      read_text, topology_text)

__all__ = ["PARALLELISM", "COMM_TYPES", "load_astra_workload", "load_astra_system",
           "load_astra_network", "looks_like_astra"]

#: Parallelism types of ASTRA-sim 1.0 (``Workload::decode_parallelsim``).
PARALLELISM = ("DATA", "MODEL", "HYBRID_TRANSFORMER", "HYBRID_TRANSFORMER_FWD_IN_BCKWD",
               "HYBRID_DLRM", "HYBRID_DLRM_ENHANCED", "HYBRID_DATA_MODEL", "HYBRID_MODEL_DATA",
               "HYBRID_CUSTOMIZED", "MICRO", "DISTRIBUTED_INFERENCE")
#: Comm types and our collectives (``NONE``: no communication in that pass).
COMM_TYPES = {"NONE": None, "ALLREDUCE": "allreduce", "ALLGATHER": "allgather",
              "ALLTOALL": "alltoall", "REDUCESCATTER": "reduce_scatter"}
_PASSES = ("fwd", "ig", "wg")
_FIELDS = ("name", "reserved", "fwd_compute", "fwd_comm_type", "fwd_comm_size", "ig_compute",
           "ig_comm_type", "ig_comm_size", "wg_compute", "wg_comm_type", "wg_comm_size",
           "update_delay")
_INT = re.compile(r"[-+]?\d+")


def looks_like_astra(text: str) -> bool:
    """The first word is an ASTRA-sim 1.0 parallelism type (detection only)."""
    words = text.split(None, 1)
    return bool(words) and words[0] in PARALLELISM


class _Lines:
    """Non-blank lines as (line number, words)."""

    def __init__(self, text: str, source: str):
        self.source = source
        self.lines = [(n, line.split()) for n, line in enumerate(text.splitlines(), 1)
                      if line.strip()]
        self.last = len(text.splitlines()) or 1

    def int_word(self, line, field, word, low=None, allowed=None):
        if not _INT.fullmatch(word) or (low is not None and int(word) < low):
            raise err(self.source, line, field, f"{word!r} is not allowed; allowed: "
                      f"{allowed or int_choices(low)}")
        return int(word)


def _header(lines: _Lines, line: int, words: list[str]) -> tuple[str, dict]:
    """Parallelism type and its options from line 1."""
    src = lines.source
    ptype = words[0]
    if ptype not in PARALLELISM:
        raise err(src, line, "parallelism", f"{ptype!r} is not allowed; allowed: "
                  f"{', '.join(PARALLELISM)}")
    rest, options = words[1:], {}
    if ptype in ("HYBRID_DLRM", "HYBRID_DLRM_ENHANCED"):
        if not rest:
            raise err(src, line, "dlrm_last_bottom_layer", f"missing; allowed: the index of "
                      f"the last bottom-MLP layer after {ptype} (e.g. '{ptype} 4')")
        options["dlrm_last_bottom_layer"] = lines.int_word(line, "dlrm_last_bottom_layer",
                                                           rest[0], 0)
        rest = rest[1:]
    elif ptype == "HYBRID_TRANSFORMER_FWD_IN_BCKWD":
        for key in ("checkpoints", "checkpoint_initiates"):
            if not rest or rest[0] != f"{key}:":
                found = f"{rest[0]!r} is not allowed" if rest else "missing"
                raise err(src, line, key, f"{found}; allowed: '{key}: N' and N layer indices")
            if len(rest) < 2:
                raise err(src, line, key, "the count is missing; allowed: N and N layer indices")
            count = lines.int_word(line, key, rest[1], 0)
            if len(rest) < 2 + count:
                raise err(src, line, key, f"{count} layers announced, {len(rest) - 2} given")
            options[key] = [lines.int_word(line, key, w, 0) for w in rest[2:2 + count]]
            rest = rest[2 + count:]
    if rest:
        raise err(src, line, "parallelism", f"{rest[0]!r} after {ptype} is not allowed; "
                  f"allowed: {_header_help(ptype)}")
    return ptype, options


def _header_help(ptype: str) -> str:
    if ptype.startswith("HYBRID_DLRM"):
        return f"'{ptype} <last bottom layer>'"
    if ptype == "HYBRID_TRANSFORMER_FWD_IN_BCKWD":
        return f"'{ptype} checkpoints: N l1..lN checkpoint_initiates: M l1..lM'"
    return f"nothing after {ptype}"


def load_astra_workload(path: str | Path) -> Trace:
    """Read an ASTRA-sim 1.0 text workload (errors name file, line and field)."""
    path = Path(path)
    src = str(path)
    lines = _Lines(read_text(path), src)
    if not lines.lines:
        raise err(src, 1, "parallelism", f"empty file; allowed: {', '.join(PARALLELISM)}")
    (hline, hwords), rest = lines.lines[0], lines.lines[1:]
    ptype, options = _header(lines, hline, hwords)
    if not rest:
        raise err(src, lines.last, "layers", "missing; allowed: the number of layers")
    (cline, cwords), layer_lines = rest[0], rest[1:]
    count = lines.int_word(cline, "layers", cwords[0], 1, "the number of layers (>= 1)")
    if len(cwords) > 1:
        raise err(src, cline, "layers", f"{cwords[1]!r} after the layer count is not allowed; "
                  "allowed: the number of layers alone on its line")
    if len(layer_lines) < count:
        raise err(src, lines.last, "layers", f"{count} layers declared on line {cline}, "
                  f"{len(layer_lines)} found")
    if len(layer_lines) > count:
        raise err(src, layer_lines[count][0], "layers", f"more layer lines than the {count} "
                  f"declared on line {cline}")
    for key in ("dlrm_last_bottom_layer",):
        if key in options and options[key] >= count:
            raise err(src, hline, key, f"{options[key]} is not allowed; allowed: a layer index "
                      f"0..{count - 1}")
    for key in ("checkpoints", "checkpoint_initiates"):
        for value in options.get(key, ()):
            if value >= count:
                raise err(src, hline, key, f"{value} is not allowed; allowed: layer indices "
                          f"0..{count - 1}")
    layers = [_layer(lines, line, words, index, ptype, options)
              for index, (line, words) in enumerate(layer_lines)]
    _unique_names(layers)
    # One iteration's issue order: forward 0..L-1, then backward L-1..0 (wg, then ig).
    order = [(layer, "fwd") for layer in layers]
    order += [(layer, p) for layer in reversed(layers) for p in ("wg", "ig")]
    specs, pending = [], 0
    for layer, p in order:
        compute, coll, size, line = layer["passes"][p]
        pending += compute
        if coll is None or size == 0:
            continue
        dtype = infer_dtype(size)
        if dtype is None:
            raise err(src, line, f"{layer['name']}.{p}_comm_size", f"{size} is not allowed; "
                      "allowed: a whole number of elements (a multiple of 4 bytes for fp32, "
                      "or of 2 for bf16)")
        extra = {"layer": layer["name"], "layer_index": layer["index"], "pass": p,
                 "pass_compute_cycles": compute, **layer["extra"]}
        specs.append(CollectiveSpec(name=f"{layer['key']}.{p}", collective=coll, bytes=size,
                                    dtype=dtype, compute_cycles=pending,
                                    source=f"{src}:{line}", extra=extra))
        pending = 0
    meta = {"parallelism": ptype, "layers": count, **options}
    if pending:
        meta["trailing_compute_cycles"] = pending
    return Trace(path=src, format="astra-sim", collectives=specs, meta=meta)


def _layer(lines: _Lines, line: int, words: list[str], index: int, ptype: str,
           options: dict) -> dict:
    src = lines.source
    name = words[0]
    if len(words) < 11:
        raise err(src, line, f"{name}.{_FIELDS[len(words)]}", f"missing; a layer line has 11 "
                  f"fields ({' '.join(_FIELDS[:11])}) and an optional update_delay")
    extra: dict = {"reserved": lines.int_word(line, f"{name}.reserved", words[1])}
    tail = words[11:]
    if ptype == "HYBRID_CUSTOMIZED":
        if not tail or tail[-1] not in PARALLELISM:
            found = f"{tail[-1]!r} is not allowed" if tail else "missing"
            raise err(src, line, f"{name}.parallelism", f"{found}; allowed (last on a "
                      "HYBRID_CUSTOMIZED layer line): "
                      f"{', '.join(p for p in PARALLELISM if p != 'HYBRID_CUSTOMIZED')}")
        extra["parallelism"] = tail[-1]
        tail = tail[:-1]
    if len(tail) > 1:
        raise err(src, line, name, f"{tail[1]!r} after the update delay is not allowed; "
                  "allowed: 11 fields and an optional update_delay")
    if tail:
        extra["update_delay"] = lines.int_word(line, f"{name}.update_delay", tail[0], 0)
    passes = {}
    for k, p in enumerate(_PASSES):
        compute = lines.int_word(line, f"{name}.{p}_compute", words[2 + 3 * k], 0)
        ctype = words[3 + 3 * k]
        if ctype not in COMM_TYPES:
            hint = (" (an all-reduce combined with an all-to-all has no ACE equivalent)"
                    if ctype == "ALLREDUCEALLTOALL" else "")
            raise err(src, line, f"{name}.{p}_comm_type", f"{ctype!r} is not allowed{hint}; "
                      f"allowed: {', '.join(COMM_TYPES)}")
        size = lines.int_word(line, f"{name}.{p}_comm_size", words[4 + 3 * k], 0)
        passes[p] = (compute, COMM_TYPES[ctype], size, line)
    if index in options.get("checkpoints", ()):
        extra["checkpoint"] = True
    if index in options.get("checkpoint_initiates", ()):
        extra["initiates_fwd_in_bckwd"] = True
    return {"name": name, "index": index, "passes": passes, "extra": extra}


def _unique_names(layers: list[dict]) -> None:
    """``key``: the layer name, with ``#2``, ``#3``... on repeats."""
    used: set[str] = set()
    counts: dict[str, int] = {}
    for layer in layers:
        name = layer["name"]
        counts[name] = counts.get(name, 0) + 1
        key = name if counts[name] == 1 else f"{name}#{counts[name]}"
        while key in used:
            counts[name] += 1
            key = f"{name}#{counts[name]}"
        used.add(key)
        layer["key"] = key


# -- system file ---------------------------------------------------------------------------------

#: ASTRA-sim algorithm names (lower case) -> ours.
ASTRA_ALGORITHMS = {"ring": "ring", "direct": "direct", "doublebinarytree": "double_binary_tree",
                    "halvingdoubling": "halving_doubling"}
#: One flat ring/direct/halving-doubling over all NPUs: no per-dimension ACE equivalent.
FLAT_ALGORITHMS = ("onering", "onedirect", "onehalvingdoubling")
_ASTRA_ALG_NAMES = "ring, direct, doubleBinaryTree, halvingDoubling, oneRing, oneDirect, " \
                   "oneHalvingDoubling"
_IMPLEMENTATIONS = {"all-reduce-implementation": "allreduce",
                    "reduce-scatter-implementation": "reduce_scatter",
                    "all-gather-implementation": "allgather",
                    "all-to-all-implementation": "alltoall"}


def _scalar_text(value: str):
    if _INT.fullmatch(value):
        return int(value)
    try:
        return float(value)
    except ValueError:
        return value


def _system_entries(path: Path) -> dict[str, tuple[object, int]]:
    """key -> (value, line) from a 1.0 text or 2.0 JSON system file."""
    src = str(path)
    text = read_text(path)
    if text.lstrip().startswith("{"):
        doc = load_doc(text, src)
        return {k: (v.value(), v.line) for k, v in doc.mapping().items()}
    entries: dict[str, tuple[object, int]] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, colon, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if not colon or not key:
            raise err(src, n, None, f"{line!r} is not allowed; allowed: 'key: value' lines")
        if not value:
            raise err(src, n, key, "the value is missing; allowed: 'key: value'")
        if key in entries:
            raise err(src, n, key, f"duplicate key (first on line {entries[key][1]})")
        entries[key] = (_scalar_text(value), n)
    return entries


def load_astra_system(path: str | Path, dims: int | None = None) -> SystemHints:
    """Read an ASTRA-sim system file into hints: ``preferred-dataset-splits`` -> chunks, the
    ``*-implementation`` keys -> algorithms (one name when all dimensions agree; with ``dims``,
    entries beyond the network's dimensions are dropped), ``local-mem-bw`` -> mem_gbps; every
    other key (and an implementation with no ACE equivalent, such as ``oneRing``) verbatim in
    ``extra``."""
    path = Path(path)
    src = str(path)
    entries = _system_entries(path)
    chunks = mem = None
    algorithms: dict = {}
    extra: dict = {}
    for key, (value, line) in entries.items():
        if key == "preferred-dataset-splits":
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise err(src, line, key, f"{value!r} is not allowed; allowed: an integer >= 1")
            chunks = value
        elif key == "local-mem-bw":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise err(src, line, key, f"{value!r} is not allowed; allowed: a positive "
                          "number (GB/s)")
            mem = float(value)
        elif key in _IMPLEMENTATIONS:
            algs = _implementation(src, line, key, value, dims)
            if algs is None:
                extra[key] = value
            else:
                algorithms[_IMPLEMENTATIONS[key]] = algs
        else:
            extra[key] = value
    return SystemHints(chunks=chunks, mem_gbps=mem, algorithms=algorithms or None, extra=extra)


def _implementation(src, line, key, value, dims):
    names = value if isinstance(value, list) else str(value).split("_")
    if not names or not all(isinstance(n, str) and n for n in names):
        raise err(src, line, key, f"{value!r} is not allowed; allowed: one algorithm per "
                  f"dimension ({_ASTRA_ALG_NAMES}) joined by '_' or as a list")
    lowered = [n.lower() for n in names]
    for name, low in zip(names, lowered):
        if low not in ASTRA_ALGORITHMS and low not in FLAT_ALGORITHMS:
            raise err(src, line, key, f"{name!r} is not allowed; allowed: {_ASTRA_ALG_NAMES}")
    if any(low in FLAT_ALGORITHMS for low in lowered):
        return None
    algs = tuple(ASTRA_ALGORITHMS[low] for low in lowered)
    if len(set(algs)) > 1 and dims is not None:
        if len(algs) < dims:
            raise err(src, line, key, f"{len(algs)} dimensions given but the network has "
                      f"{dims}; allowed: one algorithm per network dimension")
        algs = algs[:dims]
    problem = check_algorithms(_IMPLEMENTATIONS[key], algs)
    if problem:
        raise err(src, line, key, problem)
    return algs[0] if len(set(algs)) == 1 else algs


# -- network file --------------------------------------------------------------------------------

_KINDS = {"ring": "torus", "torus": "torus", "fullyconnected": "fully_connected",
          "alltoall": "fully_connected", "switch": "switch"}
_KIND_NAMES = "Ring, FullyConnected, Switch"


def _kind(doc: Doc, name) -> str:
    key = str(name).lower()
    if key.startswith("torus"):
        key = "torus"
    if key not in _KINDS:
        raise doc.err(f"{name!r} is not allowed; allowed: {_KIND_NAMES}")
    return _KINDS[key]


def _per_dim(m: dict, key: str, dims: int, kind: str):
    """A per-dimension list (a single value is accepted for one dimension)."""
    doc = m[key]
    parts = doc.items() if doc.kind == "list" else [doc]
    if len(parts) != dims:
        raise doc.err(f"{len(parts)} values are not allowed; allowed: one per dimension ({dims})")
    if kind == "int":
        return [p.integer(1) for p in parts]
    return [p.number() for p in parts]


def load_astra_network(path: str | Path) -> tuple[SystemHints, tuple[int, ...]]:
    """Read an ASTRA-sim analytical network file: 2.0 YAML (``topology``, ``npus_count``,
    ``bandwidth`` GB/s, ``latency`` ns) or 1.0 JSON (``topologies-per-dim`` or
    ``topology-name``, ``units-count``, ``link-bandwidth``, ``link-latency``,
    ``hbm-bandwidth``). Returns the hints and the dimensions. The topology is left unset when
    the dimensions are of different kinds; the latency is the first dimension's."""
    path = Path(path)
    doc = load_doc(read_text(path), str(path))
    m = doc.mapping()
    if "npus_count" in m or "topology" in m:
        return _network_v2(doc, m)
    if "units-count" in m:
        return _network_v1(doc, m)
    raise doc.err("unknown network file; allowed: ASTRA-sim 2.0 (topology, npus_count, "
                  "bandwidth, latency) or 1.0 analytical (topology-name, units-count, "
                  "link-bandwidth, ...)")


def _require(doc: Doc, m: dict, keys):
    for key in keys:
        if key not in m:
            raise err(doc.source, doc.line, key, "missing")


def _network_v2(doc, m):
    _require(doc, m, ("topology", "npus_count"))
    t = m["topology"]
    dims = len(t.items()) if t.kind == "list" else 1
    kinds = [_kind(p, p.string()) for p in (t.items() if t.kind == "list" else [t])]
    units = _per_dim(m, "npus_count", dims, "int")
    link = tuple(float(v) for v in _per_dim(m, "bandwidth", dims, "number")) \
        if "bandwidth" in m else None
    lat = _per_dim(m, "latency", dims, "number") if "latency" in m else None
    extra = {k: v.value() for k, v in m.items()
             if k not in ("topology", "npus_count", "bandwidth", "latency")}
    if kinds and len(set(kinds)) > 1:
        extra["topology"] = m["topology"].value()
    if lat and len(set(lat)) > 1:
        extra["latency"] = lat
    return SystemHints(topology=topology_text(kinds, units), link_gbps=link,
                       link_latency_ns=float(lat[0]) if lat else None, extra=extra), tuple(units)


def _network_v1(doc, m):
    units_doc = m["units-count"]
    dims = len(units_doc.items()) if units_doc.kind == "list" else 1
    units = _per_dim(m, "units-count", dims, "int")
    if "dimensions-count" in m and m["dimensions-count"].integer(1) != dims:
        raise m["dimensions-count"].err(f"{m['dimensions-count'].scalar()} is not allowed; "
                                        f"allowed: {dims} (the length of units-count)")
    if "topologies-per-dim" in m:
        per = m["topologies-per-dim"]
        parts = per.items() if per.kind == "list" else [per]
        if len(parts) != dims:
            raise per.err(f"{len(parts)} values are not allowed; allowed: one per dimension "
                          f"({dims})")
        kinds = [_kind(p, p.string()) for p in parts]
    elif "topology-name" in m:
        kinds = [_kind(m["topology-name"], m["topology-name"].string())] * dims
    else:
        raise err(doc.source, doc.line, "topologies-per-dim", "missing (or topology-name)")
    link = tuple(float(v) for v in _per_dim(m, "link-bandwidth", dims, "number")) \
        if "link-bandwidth" in m else None
    lat = _per_dim(m, "link-latency", dims, "number") if "link-latency" in m else None
    mems = []
    if "hbm-bandwidth" in m:
        mem_doc = m["hbm-bandwidth"]
        mems = [p.number(positive=True) for p in
                (mem_doc.items() if mem_doc.kind == "list" else [mem_doc])]
    mapped = ("units-count", "topologies-per-dim", "link-bandwidth", "link-latency",
              "hbm-bandwidth")
    extra = {k: v.value() for k, v in m.items() if k not in mapped}
    if len(set(kinds)) > 1:
        extra["topologies-per-dim"] = m["topologies-per-dim"].value()
    if lat and len(set(lat)) > 1:
        extra["link-latency"] = lat
    if len(set(mems)) > 1:
        extra["hbm-bandwidth"] = mems
    return SystemHints(topology=topology_text(kinds, units), link_gbps=link,
                       link_latency_ns=float(lat[0]) if lat else None,
                       mem_gbps=float(mems[0]) if mems else None, extra=extra), \
        tuple(units)
