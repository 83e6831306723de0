"""Chakra execution traces (``et_def.proto``): one file per rank, ``<prefix>.<rank>.et``.

A file is a sequence of varint-length-prefixed protobuf messages: a ``GlobalMetadata``, then
``Node``\\ s. The protobuf wire format is decoded here (varints, zigzag ``sint``, fixed 32/64,
length-delimited, packed and unpacked repeated fields), driven by the field numbers of
``et_def.proto``; unknown fields are skipped, as protobuf does.

Every ``COMM_COLL_NODE`` becomes one collective: attribute ``comm_type`` (ALL_REDUCE,
ALL_GATHER, ALL_TO_ALL, REDUCE_SCATTER, REDUCE_SCATTER_BLOCK) gives the collective and
``comm_size`` S in bytes (fp32 when a multiple of 4, else bf16). Collectives are listed in
dependency order (file order among independent ones). ``deps`` are the nearest collectives
upstream through ``data_deps`` and ``ctrl_deps``; ``compute_cycles`` sums ``duration_micros``
of the ``COMP_NODE``\\ s upstream of it not already counted for an earlier collective, at
1 GHz as ASTRA-sim does (1 us = 1000 cycles). All ranks are read and must run the same
collectives (type and size, in order); the trace's nodes is the number of ranks.
"""

from __future__ import annotations

import glob
import heapq
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

from ..trace import CollectiveSpec, Trace, TraceError
from ._common import infer_dtype

__all__ = ["EtNode", "EtFile", "decode_et", "read_et", "load_chakra", "looks_like_chakra",
           "NODE_TYPES", "COMM_TYPES", "rank_files"]

NODE_TYPES = ("INVALID_NODE", "METADATA_NODE", "MEM_LOAD_NODE", "MEM_STORE_NODE", "COMP_NODE",
              "COMM_SEND_NODE", "COMM_RECV_NODE", "COMM_COLL_NODE")
COMM_TYPES = ("ALL_REDUCE", "REDUCE", "ALL_GATHER", "GATHER", "SCATTER", "BROADCAST",
              "ALL_TO_ALL", "REDUCE_SCATTER", "REDUCE_SCATTER_BLOCK", "BARRIER")
_OURS = {"ALL_REDUCE": "allreduce", "ALL_GATHER": "allgather", "ALL_TO_ALL": "alltoall",
         "REDUCE_SCATTER": "reduce_scatter", "REDUCE_SCATTER_BLOCK": "reduce_scatter"}
CYCLES_PER_MICRO = 1000


# -- protobuf wire format -------------------------------------------------------------------------

class _WireError(Exception):
    """A decoding problem; the caller adds file, node and field."""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise _WireError("truncated varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift >= 70:
            raise _WireError("varint longer than 10 bytes")


def _fields(buf: bytes):
    """(field number, wire type, raw value) of every field of one message."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise _WireError("field number 0")
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            length, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + length], pos + length
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise _WireError(f"field {number}: wire type {wire} (groups) is not supported")
        if pos > len(buf):
            raise _WireError(f"field {number}: truncated")
        yield number, wire, value


def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


_VARINT_KINDS = {
    "int32": lambda v: _signed(v, 32), "int64": lambda v: _signed(v, 64),
    "uint32": lambda v: v & 0xFFFFFFFF, "uint64": lambda v: v & 0xFFFFFFFFFFFFFFFF,
    "sint32": lambda v: ((v & 0xFFFFFFFF) >> 1) ^ -(v & 1),
    "sint64": lambda v: ((v & 0xFFFFFFFFFFFFFFFF) >> 1) ^ -(v & 1),
    "bool": lambda v: v != 0, "enum": lambda v: _signed(v, 32)}
_FIXED_KINDS = {"double": "<d", "fixed64": "<Q", "sfixed64": "<q",
                "float": "<f", "fixed32": "<I", "sfixed32": "<i"}


def _scalar(kind: str, wire: int, raw):
    if kind in _VARINT_KINDS:
        if wire != 0:
            raise _WireError(f"wire type {wire}, expected 0 (varint) for {kind}")
        return _VARINT_KINDS[kind](raw)
    if kind in _FIXED_KINDS:
        fmt = _FIXED_KINDS[kind]
        want = 1 if fmt[1] in "dQq" else 5
        if wire != want:
            raise _WireError(f"wire type {wire}, expected {want} for {kind}")
        return struct.unpack(fmt, raw)[0]
    if wire != 2:
        raise _WireError(f"wire type {wire}, expected 2 (length-delimited) for {kind}")
    if kind == "string":
        try:
            return bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            raise _WireError("a string that is not UTF-8") from None
    return bytes(raw)


def _packed(kind: str, raw: bytes) -> list:
    """A packed repeated scalar field."""
    out, pos = [], 0
    if kind in _VARINT_KINDS:
        while pos < len(raw):
            value, pos = _varint(raw, pos)
            out.append(_VARINT_KINDS[kind](value))
        return out
    fmt = _FIXED_KINDS[kind]
    size = struct.calcsize(fmt)
    if len(raw) % size:
        raise _WireError(f"packed {kind} list of {len(raw)} bytes")
    return [v[0] for v in struct.iter_unpack(fmt, raw)]


def _decode(buf: bytes, schema: dict) -> dict:
    """Decode one message: ``schema`` maps field number -> (name, kind, repeated), kind a
    scalar kind or a nested schema. Missing fields are absent (proto3 defaults by caller)."""
    out: dict = {}
    for number, wire, raw in _fields(buf):
        if number not in schema:
            continue
        name, kind, repeated = schema[number]
        try:
            if isinstance(kind, dict):
                if wire != 2:
                    raise _WireError(f"wire type {wire}, expected 2 for a message")
                value = _decode(raw, kind)
            elif repeated and wire == 2 and kind not in ("string", "bytes"):
                out.setdefault(name, []).extend(_packed(kind, raw))
                continue
            else:
                value = _scalar(kind, wire, raw)
        except _WireError as error:
            raise _WireError(f"{name}: {error}") from None
        if repeated:
            out.setdefault(name, []).append(value)
        else:
            out[name] = value
    return out


_LIST_KINDS = ("double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64",
               "fixed32", "fixed64", "sfixed32", "sfixed64", "bool", "string", "bytes")
# AttributeProto: 1 name, 2 doc_string, then for each kind k (in _LIST_KINDS order) a scalar
# ``<k>_val`` (field 3 + 2i) and a ``<k>_list`` message of repeated ``values = 1`` (4 + 2i).
_ATTR = {1: ("name", "string", False), 2: ("doc_string", "string", False)}
for _i, _k in enumerate(_LIST_KINDS):
    _ATTR[3 + 2 * _i] = (f"{_k}_val", _k, False)
    _ATTR[4 + 2 * _i] = (f"{_k}_list", {1: ("values", _k, True)}, False)
_IOINFO = {1: ("values", "string", False), 2: ("shapes", "string", False),
           3: ("types", "string", False)}
_GLOBAL = {1: ("version", "string", False), 2: ("attr", _ATTR, True)}
_NODE = {1: ("id", "uint64", False), 2: ("name", "string", False), 3: ("type", "enum", False),
         4: ("ctrl_deps", "uint64", True), 5: ("data_deps", "uint64", True),
         6: ("start_time_micros", "uint64", False), 7: ("duration_micros", "uint64", False),
         8: ("inputs", _IOINFO, False), 9: ("outputs", _IOINFO, False),
         10: ("attr", _ATTR, True)}


def _attributes(raw_attrs: list[dict]) -> dict:
    """name -> value (lists for the ``*_list`` kinds; the last value kind set wins, as in a
    oneof)."""
    out = {}
    for attr in raw_attrs:
        value = None
        for key, item in attr.items():
            if key not in ("name", "doc_string"):
                value = item.get("values", []) if isinstance(item, dict) else item
        out[attr.get("name", "")] = value
    return out


@dataclass
class EtNode:
    """One decoded ``Node``; ``offset``: byte offset of its message in the file."""
    id: int
    name: str
    type: int
    ctrl_deps: list[int]
    data_deps: list[int]
    start_time_micros: int
    duration_micros: int
    inputs: dict
    outputs: dict
    attrs: dict
    offset: int = 0

    @property
    def type_name(self) -> str:
        return NODE_TYPES[self.type] if 0 <= self.type < len(NODE_TYPES) else str(self.type)


@dataclass
class EtFile:
    """A decoded rank file: ``GlobalMetadata`` (version and attributes) and the nodes."""
    version: str
    attrs: dict
    nodes: list[EtNode] = field(default_factory=list)


def decode_et(data: bytes, source: str = "<et>") -> EtFile:
    """Decode the bytes of a Chakra ``.et`` file."""
    pos, index, messages = 0, 0, []
    while pos < len(data):
        start = pos
        try:
            length, pos = _varint(data, pos)
        except _WireError as error:
            raise TraceError(f"{source}: message {index} at byte {start}: length: {error}") \
                from None
        if pos + length > len(data):
            raise TraceError(f"{source}: message {index} at byte {start}: length: {length} "
                             f"bytes but only {len(data) - pos} left (truncated file)")
        messages.append((start, data[pos:pos + length]))
        pos += length
        index += 1
    if not messages:
        raise TraceError(f"{source}: empty file; allowed: a GlobalMetadata message then Nodes")
    start, body = messages[0]
    try:
        meta = _decode(body, _GLOBAL)
    except _WireError as error:
        raise TraceError(f"{source}: GlobalMetadata (byte {start}): {error}") from None
    et = EtFile(version=meta.get("version", ""), attrs=_attributes(meta.get("attr", [])))
    for k, (start, body) in enumerate(messages[1:], 1):
        try:
            raw = _decode(body, _NODE)
        except _WireError as error:
            raise TraceError(f"{source}: node message {k} (byte {start}): {error}") from None
        et.nodes.append(EtNode(
            id=raw.get("id", 0), name=raw.get("name", ""), type=raw.get("type", 0),
            ctrl_deps=raw.get("ctrl_deps", []), data_deps=raw.get("data_deps", []),
            start_time_micros=raw.get("start_time_micros", 0),
            duration_micros=raw.get("duration_micros", 0), inputs=raw.get("inputs", {}),
            outputs=raw.get("outputs", {}), attrs=_attributes(raw.get("attr", [])),
            offset=start))
    return et


def looks_like_chakra(head: bytes) -> bool:
    """The bytes start with a length-prefixed GlobalMetadata holding a version string
    (detection only; ``head`` may be the start of the file)."""
    try:
        length, pos = _varint(head, 0)
        if pos + length > len(head):
            return length < 1 << 20 and head[pos:pos + 1] == b"\x0a"
        return "version" in _decode(head[pos:pos + length], _GLOBAL)
    except _WireError:
        return False


def read_et(path: str | Path) -> EtFile:
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise TraceError(f"{path}: cannot read: {error.strerror}") from None
    return decode_et(data, str(path))


# -- ranks --------------------------------------------------------------------------------------

_RANK = re.compile(r"(.+)\.(\d+)\.et")


def rank_files(path: str | Path) -> tuple[Path, dict[int, Path]]:
    """The file to take names and compute from, and every rank's file. ``path``: one rank's
    file (its ``<prefix>.<rank>.et`` siblings are read too), a directory of them, or the
    prefix itself."""
    path = Path(path)
    if path.is_dir():
        files = sorted(path.glob("*.et"))
        prefixes = {m.group(1) for f in files if (m := _RANK.fullmatch(f.name))}
        if not files:
            raise TraceError(f"{path}: no .et files in this directory")
        if len(prefixes) != 1 or any(not _RANK.fullmatch(f.name) for f in files):
            if len(files) == 1:
                return files[0], {0: files[0]}
            raise TraceError(f"{path}: the .et files are not one <prefix>.<rank>.et set (prefixes "
                             f"{', '.join(sorted(prefixes)) or 'none'}); allowed: one trace "
                             "per directory")
        base = path / prefixes.pop()
    elif path.is_file():
        match = _RANK.fullmatch(path.name)
        if not match:
            return path, {0: path}
        base = path.with_name(match.group(1))
    else:
        base = path
    ranks = {}
    for f in base.parent.glob(f"{glob.escape(base.name)}.*.et"):
        match = _RANK.fullmatch(f.name)
        if match and match.group(1) == base.name:
            ranks[int(match.group(2))] = f
    if not ranks:
        raise TraceError(f"{path}: no such file, and no {base.name}.<rank>.et files")
    missing = [r for r in range(max(ranks) + 1) if r not in ranks]
    if missing:
        raise TraceError(f"{base}.{missing[0]}.et: missing; ranks found: "
                         f"{', '.join(str(r) for r in sorted(ranks))}; allowed: ranks 0..N-1")
    main = path if path.is_file() else ranks[0]
    return main, dict(sorted(ranks.items()))


# -- nodes -> collectives -------------------------------------------------------------------------

def _where(source: str, node: EtNode) -> str:
    label = f" ({node.name!r})" if node.name else ""
    return f"{source}: node {node.id}{label}"


def _integer_attr(source, node, key) -> int:
    if key not in node.attrs:
        raise TraceError(f"{_where(source, node)}: attr {key}: missing; a COMM_COLL_NODE "
                         "needs comm_type and comm_size")
    value = node.attrs[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise TraceError(f"{_where(source, node)}: attr {key}: {value!r} is not allowed; "
                         "allowed: an integer value")
    return value


def _order(source: str, nodes: list[EtNode]) -> tuple[list[EtNode], dict[int, list[int]]]:
    """Nodes in dependency order (file order among ready ones) and each node's deps."""
    by_id: dict[int, EtNode] = {}
    for node in nodes:
        if node.id in by_id:
            raise TraceError(f"{_where(source, node)}: id: {node.id} is used twice; allowed: "
                             "unique node ids")
        by_id[node.id] = node
    position = {node.id: k for k, node in enumerate(nodes)}
    deps: dict[int, list[int]] = {}
    users: dict[int, list[int]] = {n.id: [] for n in nodes}
    for node in nodes:
        mine = []
        for fname in ("data_deps", "ctrl_deps"):
            for dep in getattr(node, fname):
                if dep not in by_id:
                    raise TraceError(f"{_where(source, node)}: {fname}: node {dep} does not "
                                     "exist in this file")
                if dep == node.id:
                    raise TraceError(f"{_where(source, node)}: {fname}: the node depends on "
                                     "itself")
                if dep not in mine:
                    mine.append(dep)
                    users[dep].append(node.id)
        deps[node.id] = mine
    waiting = {nid: len(d) for nid, d in deps.items()}
    ready = [(position[nid], nid) for nid, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, nid = heapq.heappop(ready)
        order.append(by_id[nid])
        for user in users[nid]:
            waiting[user] -= 1
            if waiting[user] == 0:
                heapq.heappush(ready, (position[user], user))
    if len(order) != len(nodes):
        stuck = sorted((position[n], n) for n, w in waiting.items() if w > 0)
        node = by_id[stuck[0][1]]
        raise TraceError(f"{_where(source, node)}: data_deps/ctrl_deps: dependency cycle "
                         f"among nodes {', '.join(str(n) for _, n in stuck[:8])}")
    return order, deps


def _collectives(source: str, et: EtFile) -> tuple[list[CollectiveSpec], dict]:
    order, deps = _order(source, et.nodes)
    by_id = {n.id: n for n in et.nodes}
    names: dict[int, str] = {}
    rank_of: dict[int, int] = {}
    used: dict[str, int] = {}
    counted: set[int] = set()
    specs = []
    for node in order:
        tname = node.type_name
        if tname in ("COMM_SEND_NODE", "COMM_RECV_NODE"):
            raise TraceError(f"{_where(source, node)}: type: {tname} (point-to-point) is not "
                             "supported; allowed: COMM_COLL_NODE, COMP_NODE, MEM_LOAD_NODE, "
                             "MEM_STORE_NODE, METADATA_NODE, INVALID_NODE")
        if tname not in NODE_TYPES:
            raise TraceError(f"{_where(source, node)}: type: {node.type} is not allowed; "
                             f"allowed: 0..7 ({', '.join(NODE_TYPES)})")
        if tname != "COMM_COLL_NODE":
            continue
        ctype = _integer_attr(source, node, "comm_type")
        cname = COMM_TYPES[ctype] if 0 <= ctype < len(COMM_TYPES) else str(ctype)
        if cname not in _OURS:
            allowed = ", ".join(f"{COMM_TYPES.index(c)} {c}" for c in _OURS)
            raise TraceError(f"{_where(source, node)}: attr comm_type: {ctype} ({cname}) is not "
                             f"supported; allowed: {allowed}")
        size = _integer_attr(source, node, "comm_size")
        if size < 0:
            raise TraceError(f"{_where(source, node)}: attr comm_size: {size} is not allowed; "
                             "allowed: a number of bytes >= 0")
        if size == 0:
            continue            # nothing to move: the node only passes its dependencies on
        dtype = infer_dtype(size)
        if dtype is None:
            raise TraceError(f"{_where(source, node)}: attr comm_size: {size} is not allowed; "
                             "allowed: a whole number of elements (a multiple of 4 bytes for "
                             "fp32, or of 2 for bf16)")
        # Walk upstream through non-collective nodes: nearest collectives are deps, compute
        # nodes not yet counted add their duration.
        upstream, compute, stack, seen = [], 0, list(deps[node.id]), set()
        while stack:
            nid = stack.pop()
            if nid in seen:
                continue
            seen.add(nid)
            if nid in names:
                upstream.append(nid)
                continue
            up = by_id[nid]
            if up.type_name == "COMP_NODE" and nid not in counted:
                counted.add(nid)
                compute += up.duration_micros * CYCLES_PER_MICRO
            stack.extend(deps[nid])
        base = node.name or f"coll_{node.id}"
        used[base] = used.get(base, 0) + 1
        name = base if used[base] == 1 else f"{base}#{used[base]}"
        names[node.id] = name
        rank_of[node.id] = len(rank_of)
        extra = {"node_id": node.id, "comm_type": cname,
                 "start_time_micros": node.start_time_micros,
                 "duration_micros": node.duration_micros,
                 "attrs": {k: v for k, v in node.attrs.items()
                           if k not in ("comm_type", "comm_size")}}
        for io in ("inputs", "outputs"):
            if getattr(node, io):
                extra[io] = getattr(node, io)
        specs.append(CollectiveSpec(
            name=name, collective=_OURS[cname], bytes=size, dtype=dtype,
            compute_cycles=compute,
            deps=tuple(names[d] for d in sorted(upstream, key=rank_of.get)),
            source=f"{source}: node {node.id}", extra=extra))
    trailing = sum(n.duration_micros for n in et.nodes
                   if n.type_name == "COMP_NODE" and n.id not in counted) * CYCLES_PER_MICRO
    return specs, ({"trailing_compute_cycles": trailing} if trailing else {})


def load_chakra(path: str | Path) -> Trace:
    """Read a Chakra trace: one rank's file (its siblings are read too), a directory of rank
    files, or their common prefix."""
    main, ranks = rank_files(path)
    per_rank = {}
    for rank, f in ranks.items():
        et = read_et(f)
        per_rank[rank] = (f, et, _collectives(str(f), et))
    main_file, main_et, (specs, extra_meta) = next(v for v in per_rank.values()
                                                   if v[0] == main)
    for rank, (f, et, (others, _)) in per_rank.items():
        if len(others) != len(specs):
            raise TraceError(f"{f}: {len(others)} collectives but {main_file} has {len(specs)}; "
                             "all ranks must run the same collectives")
        for k, (a, b) in enumerate(zip(specs, others)):
            if (a.collective, a.bytes) != (b.collective, b.bytes):
                raise TraceError(f"{b.source}: collective {k} ({b.name!r}) is {b.collective} of "
                                 f"{b.bytes} bytes but in {main_file} it is {a.collective} of "
                                 f"{a.bytes} bytes; all ranks must run the same collectives")
    if not specs:
        raise TraceError(f"{main_file}: no COMM_COLL_NODE with a comm_size > 0; nothing to "
                         "replay")
    meta = {"version": main_et.version, "metadata": main_et.attrs,
            "ranks": [str(f) for f in ranks.values()], **extra_meta}
    return Trace(path=str(path), format="chakra", collectives=specs, nodes=len(ranks),
                 meta=meta)
