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
from dataclasses import dataclass
from pathlib import Path

from ace.vocab import Algorithm, Collective

from ..trace import CollectiveSpec, SystemHints, Trace
from ._common import (Doc, check_algorithms, err, infer_dtype, int_choices, load_doc,
                      read_text, topology_text)

__all__ = ["PARALLELISM", "COMM_TYPES", "load_astra_workload", "load_astra_system",
           "load_astra_network", "looks_like_astra", "Implementation",
           "read_astra_implementations"]

#: Parallelism types of ASTRA-sim 1.0 (``Workload::decode_parallelsim``).
PARALLELISM = ("DATA", "MODEL", "HYBRID_TRANSFORMER", "HYBRID_TRANSFORMER_FWD_IN_BCKWD",
               "HYBRID_DLRM", "HYBRID_DLRM_ENHANCED", "HYBRID_DATA_MODEL", "HYBRID_MODEL_DATA",
               "HYBRID_CUSTOMIZED", "MICRO", "DISTRIBUTED_INFERENCE")
#: Comm types and our collectives (``NONE``: no communication in that pass).
COMM_TYPES = {"NONE": None, "ALLREDUCE": Collective.ALLREDUCE.value,
              "ALLGATHER": Collective.ALLGATHER.value, "ALLTOALL": Collective.ALLTOALL.value,
              "REDUCESCATTER": Collective.REDUCE_SCATTER.value}
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


#: Header options after the parallelism type (ASTRA-sim 1.0's reader, and the keys its
#: AICB/SimAI descendants write), each ``key: value``: which types take them, and the least
#: value allowed.
_INT_OPTIONS = {"model_parallel_NPU_group:": 1, "ep:": 1, "pp:": 1, "vpp:": 1, "ga:": 1,
                "all_gpus:": 1}
_TRANSFORMERS = ("HYBRID_TRANSFORMER", "HYBRID_TRANSFORMER_FWD_IN_BCKWD")
_LIST_OPTIONS = ("checkpoints:", "checkpoint_initiates:")


def _allowed_options(ptype: str) -> list[str]:
    keys = ["pp_comm"]
    if ptype in _TRANSFORMERS:
        keys = list(_INT_OPTIONS) + keys
    if ptype == "HYBRID_TRANSFORMER_FWD_IN_BCKWD":
        keys += list(_LIST_OPTIONS)
    if ptype.startswith("HYBRID_DLRM"):
        keys = ["DLRM_LAST_BOTTOM_LAYER:"] + keys
    return keys


def _header(lines: _Lines, line: int, words: list[str]) -> tuple[str, dict]:
    """Parallelism type and its options from line 1 (any order; each at most once)."""
    src = lines.source
    ptype = words[0]
    if ptype not in PARALLELISM:
        raise err(src, line, "parallelism", f"{ptype!r} is not allowed; allowed: "
                  f"{', '.join(PARALLELISM)}")
    rest, options = words[1:], {}
    if ptype.startswith("HYBRID_DLRM") and rest and _INT.fullmatch(rest[0]):
        rest = ["DLRM_LAST_BOTTOM_LAYER:"] + rest        # 1.0: the index alone
    allowed = _allowed_options(ptype)
    while rest:
        key, rest = rest[0], rest[1:]
        name = key.rstrip(":").lower()
        if key not in allowed and not (key == "pp_comm:" and "pp_comm" in allowed):
            raise err(src, line, "parallelism", f"{key!r} after {ptype} is not allowed; "
                      f"allowed: {_header_help(ptype)}")
        if name in options:
            raise err(src, line, name, "given twice")
        if not rest:
            raise err(src, line, name, "the value is missing")
        if key in _LIST_OPTIONS:
            count = lines.int_word(line, name, rest[0], 0)
            if len(rest) < 1 + count:
                raise err(src, line, name, f"{count} layers announced, {len(rest) - 1} given")
            options[name] = [lines.int_word(line, name, w, 0) for w in rest[1:1 + count]]
            rest = rest[1 + count:]
        else:
            options[name] = lines.int_word(line, name, rest[0], _INT_OPTIONS.get(key, 0))
            rest = rest[1:]
    required = ["dlrm_last_bottom_layer"] if ptype.startswith("HYBRID_DLRM") else []
    if ptype == "HYBRID_TRANSFORMER_FWD_IN_BCKWD":
        required += ["checkpoints", "checkpoint_initiates"]
    for key in required:
        if key not in options:
            raise err(src, line, key, f"missing; allowed: {_header_help(ptype)}")
    _check_group(src, line, options)
    return ptype, options


def _check_group(src: str, line: int, options: dict) -> None:
    group, gpus = options.get("model_parallel_npu_group"), options.get("all_gpus")
    if group and gpus and gpus % group:
        raise err(src, line, "model_parallel_npu_group", f"{group} is not allowed; allowed: a "
                  f"divisor of all_gpus = {gpus}")


def _header_help(ptype: str) -> str:
    keys = [k for k in _allowed_options(ptype)]
    forms = {"checkpoints:": "checkpoints: N l1..lN", "checkpoint_initiates:":
             "checkpoint_initiates: M l1..lM", "pp_comm": "pp_comm BYTES"}
    text = " ".join(forms.get(k, f"{k} N") for k in keys)
    if ptype.startswith("HYBRID_DLRM"):
        return f"'{ptype} <last bottom layer> [pp_comm BYTES]' or '{ptype} {text}'"
    if ptype in _TRANSFORMERS:
        return f"'{ptype} {text}' (keys in any order)"
    return f"nothing after {ptype} but 'pp_comm BYTES'"


#: Which nodes each pass's collective spans, per parallelism type: ASTRA-sim 1.0's
#: ``decode_involved_dimensions``. ``all``: every node; ``none``: no dimension is involved,
#: so ASTRA-sim moves nothing (no collective here); ``("lead", G)``: the groups of G
#: consecutive nodes that the leading topology dimensions make up (G None: the first
#: dimension), ``("trail", G)``: the nodes with the same place in those groups (the other
#: dimensions). Per pass: fwd, ig, wg.
def _spans(ptype: str, group: int | None) -> dict:
    if ptype in ("DATA", "HYBRID_DLRM", "HYBRID_DLRM_ENHANCED", "MICRO"):
        return {"fwd": "none", "ig": "none", "wg": "all"}
    if ptype in ("MODEL", "DISTRIBUTED_INFERENCE"):
        return {"fwd": "all", "ig": "all", "wg": "none"}
    if ptype == "HYBRID_DATA_MODEL":        # model on the first dimension, data on the others
        return {"fwd": ("lead", None), "ig": ("lead", None), "wg": ("trail", None)}
    if ptype == "HYBRID_MODEL_DATA":        # data on the first dimension, model on the others
        return {"fwd": ("trail", None), "ig": ("trail", None), "wg": ("lead", None)}
    if ptype in _TRANSFORMERS and group is not None:
        if group == 1:
            return {"fwd": "none", "ig": "none", "wg": "all"}
        return {"fwd": ("lead", group), "ig": ("lead", group), "wg": ("trail", group)}
    return {"fwd": "all", "ig": "all", "wg": "all"}


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
    specs, pending, silent = [], 0, []
    for layer, p in order:
        compute, coll, size, line = layer["passes"][p]
        pending += compute
        if coll is None or size == 0:
            continue
        span = _layer_spans(ptype, layer, options)[p]
        if span == "none":
            silent.append(f"{layer['key']}.{p}")
            continue
        dtype = infer_dtype(size)
        if dtype is None:
            raise err(src, line, f"{layer['name']}.{p}_comm_size", f"{size} is not allowed; "
                      "allowed: a whole number of elements (a multiple of 4 bytes for fp32, "
                      "or of 2 for bf16)")
        extra = {"layer": layer["name"], "layer_index": layer["index"], "pass": p,
                 "pass_compute_cycles": compute, **layer["extra"]}
        if span != "all":
            extra["span"] = list(span)
        specs.append(CollectiveSpec(name=f"{layer['key']}.{p}", collective=coll, bytes=size,
                                    dtype=dtype, compute_cycles=pending,
                                    source=f"{src}:{line}", extra=extra))
        pending = 0
    meta = {"parallelism": ptype, "layers": count, **options}
    if pending:
        meta["trailing_compute_cycles"] = pending
    if silent:
        meta["not_communicated"] = silent
    return Trace(path=src, format="astra-sim", collectives=specs, meta=meta,
                 nodes=options.get("all_gpus"))


def _layer_spans(ptype: str, layer: dict, options: dict) -> dict:
    """The spans of a layer's passes: its own parallelism on a HYBRID_CUSTOMIZED line, every
    node for the first layer of a DLRM (its embedding all-to-all)."""
    if ptype.startswith("HYBRID_DLRM") and layer["index"] == 0:
        return {"fwd": "all", "ig": "all", "wg": "all"}
    return _spans(layer["extra"].get("parallelism", ptype),
                  options.get("model_parallel_npu_group"))


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

#: ASTRA-sim 1.0 implementation names (``Sys::generate_collective_implementation_from_input``,
#: lower case) -> ours. ``directN``/``oneDirectN`` (a window of N) are direct.
ASTRA_ALGORITHMS = {"ring": Algorithm.RING, "direct": Algorithm.DIRECT,
                    "doublebinarytree": Algorithm.DOUBLE_BINARY_TREE,
                    "halvingdoubling": Algorithm.HALVING_DOUBLING}
#: One flat ring/direct/halving-doubling over all NPUs, whatever the dimensions.
FLAT_ALGORITHMS = {"onering": Algorithm.RING, "onedirect": Algorithm.DIRECT,
                   "onehalvingdoubling": Algorithm.HALVING_DOUBLING}
_ASTRA_ALG_NAMES = "ring, direct[N], doubleBinaryTree, halvingDoubling, oneRing, oneDirect[N], " \
                   "oneHalvingDoubling"
_IMPLEMENTATIONS = {"all-reduce-implementation": Collective.ALLREDUCE,
                    "reduce-scatter-implementation": Collective.REDUCE_SCATTER,
                    "all-gather-implementation": Collective.ALLGATHER,
                    "all-to-all-implementation": Collective.ALLTOALL}
#: Every other key of a 1.0 system file (``Sys::parse_var``): its allowed words, or the least
#: number (``int`` / ``float``).
_SYSTEM_KEYS: dict[str, tuple] = {
    "scheduling-policy": ("LIFO", "FIFO"),
    "collective-optimization": ("baseline", "localBWAware"),
    "intra-dimension-scheduling": ("FIFO", "RG", "smallestFirst", "SCF",
                                   "lessRemainingPhaseFirst"),
    "inter-dimension-scheduling": ("ascending", "baseline", "offlineGreedy",
                                   "offlineGreedyFlex", "roundRobin"),
    "boost-mode": (0, 1), "model-shared-bus": (0, 1),
    "endpoint-delay": (int, 0), "local-reduction-delay": (int, 0),
    "active-chunks-per-dimension": (int, 1), "preferred-dataset-splits": (int, 1),
    "seprate-log": (int, 0), "L": (float, 0), "o": (float, 0), "g": (float, 0),
    "G": (float, 0), "local-mem-bw": (float, 0),
}


def _scalar_text(value: str):
    if _INT.fullmatch(value):
        return int(value)
    try:
        return float(value)
    except ValueError:
        return value


def _system_entries(path: Path) -> tuple[dict[str, tuple[object, int]], bool]:
    """key -> (value, line) from a 1.0 text or 2.0 JSON system file, and whether it is text."""
    src = str(path)
    text = read_text(path)
    if text.lstrip().startswith("{"):
        doc = load_doc(text, src)
        return {k: (v.value(), v.line) for k, v in doc.mapping().items()}, False
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
    return entries, True


def _check_system_value(src: str, line: int, key: str, value, text_form: bool) -> None:
    """A 1.0 key's value as ``Sys::parse_var`` takes it; an unknown key of a 1.0 text file is
    refused (ASTRA-sim exits on it), a 2.0 JSON file's other keys are kept."""
    rule = _SYSTEM_KEYS.get(key)
    if rule is None:
        if text_form and key not in _IMPLEMENTATIONS:
            raise err(src, line, key, "unknown key; allowed: "
                      f"{', '.join([*_IMPLEMENTATIONS, *_SYSTEM_KEYS])}")
        return
    if rule[0] in (int, float):
        kind, low = rule
        ok = not isinstance(value, bool) and isinstance(value, (int, float)) and value >= low \
            and (kind is float or isinstance(value, int))
        if not ok:
            what = "an integer" if kind is int else "a number"
            raise err(src, line, key, f"{value!r} is not allowed; allowed: {what} >= {low}")
    elif value not in rule:
        raise err(src, line, key, f"{value!r} is not allowed; allowed: "
                  f"{', '.join(str(v) for v in rule)}")


@dataclass(frozen=True)
class Implementation:
    """How a system file runs one collective: ``algorithms`` (ours, one per dimension, or one
    for all); ``flat``: one algorithm over all NPUs as one dimension (``oneRing``...);
    ``per_dimension``: an all-reduce on every dimension in turn (a double binary tree below
    the last dimension, or ``collective-optimization: baseline``)."""
    algorithms: tuple[str, ...]
    flat: bool = False
    per_dimension: bool = False

    @property
    def plain(self) -> str | tuple[str, ...]:
        """The algorithm as a :class:`CollectiveSpec` names it."""
        return self.algorithms[0] if len(set(self.algorithms)) == 1 else self.algorithms


def read_astra_implementations(path: str | Path, dims: int | None = None
                               ) -> dict[str, Implementation]:
    """Every ``*-implementation`` of a system file, checked, with the file's
    ``collective-optimization`` applied (``baseline``: all-reduce dimension by dimension)."""
    path = Path(path)
    src = str(path)
    entries, _ = _system_entries(path)
    baseline = entries.get("collective-optimization", (None,))[0] == "baseline"
    out = {}
    for key, (value, line) in entries.items():
        if key in _IMPLEMENTATIONS:
            out[_IMPLEMENTATIONS[key].value] = _implementation(
                src, line, key, value, dims, baseline and key == "all-reduce-implementation")
    return out


def load_astra_system(path: str | Path, dims: int | None = None) -> SystemHints:
    """Read an ASTRA-sim system file into hints: ``preferred-dataset-splits`` -> chunks, the
    ``*-implementation`` keys -> algorithms (one name when all dimensions agree; with ``dims``,
    entries beyond the network's dimensions are dropped), ``local-mem-bw`` -> mem_gbps; every
    other key verbatim in ``extra``, and so is an implementation that is not one algorithm per
    dimension (``oneRing``, a double binary tree below the last dimension: see
    :func:`read_astra_implementations`, which the trace loader applies). Every key of a 1.0
    text file and its value are checked as ASTRA-sim 1.0 reads them."""
    path = Path(path)
    src = str(path)
    entries, text_form = _system_entries(path)
    for key, (value, line) in entries.items():
        _check_system_value(src, line, key, value, text_form)
    implementations = read_astra_implementations(path, dims)
    chunks = mem = None
    algorithms: dict = {}
    extra: dict = {}
    for key, (value, line) in entries.items():
        if key == "preferred-dataset-splits":
            chunks = value
        elif key == "local-mem-bw":
            mem = float(value)
        elif key in _IMPLEMENTATIONS:
            impl = implementations[_IMPLEMENTATIONS[key].value]
            if impl.flat or impl.per_dimension:
                extra[key] = value
            else:
                algorithms[_IMPLEMENTATIONS[key].value] = impl.plain
        else:
            extra[key] = value
    return SystemHints(chunks=chunks, mem_gbps=mem, algorithms=algorithms or None, extra=extra)


def _astra_name(src, line, key, name: str) -> tuple[str, bool]:
    """(our algorithm, flat) for one ASTRA-sim implementation name."""
    low = re.sub(r"(direct)\d+$", r"\1", name.lower())
    if low in ASTRA_ALGORITHMS:
        return ASTRA_ALGORITHMS[low].value, False
    if low in FLAT_ALGORITHMS:
        return FLAT_ALGORITHMS[low].value, True
    raise err(src, line, key, f"{name!r} is not allowed; allowed: {_ASTRA_ALG_NAMES}")


def _implementation(src, line, key, value, dims, baseline: bool) -> Implementation:
    names = value if isinstance(value, list) else str(value).split("_")
    if not names or not all(isinstance(n, str) and n for n in names):
        raise err(src, line, key, f"{value!r} is not allowed; allowed: one algorithm per "
                  f"dimension ({_ASTRA_ALG_NAMES}) joined by '_' or as a list")
    parsed = [_astra_name(src, line, key, n) for n in names]
    flat = [alg for alg, is_flat in parsed if is_flat]
    if flat:                    # ASTRA-sim: one logical ring/direct over every NPU
        return Implementation((flat[0],), flat=True)
    algs = tuple(alg for alg, _ in parsed)
    if (len(set(algs)) > 1 or len(algs) > 1 and baseline
            or Algorithm.DOUBLE_BINARY_TREE in algs[:-1]) and dims is not None:
        if len(algs) < dims:
            raise err(src, line, key, f"{len(algs)} dimensions given but the network has "
                      f"{dims}; allowed: one algorithm per network dimension")
        algs = algs[:dims]
    collective = _IMPLEMENTATIONS[key].value
    problem = check_algorithms(collective, algs)
    if problem and collective == Collective.ALLREDUCE:
        return Implementation(algs, per_dimension=True)
    if problem:
        raise err(src, line, key, problem)
    return Implementation(algs, per_dimension=baseline and len(algs) > 1)


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
