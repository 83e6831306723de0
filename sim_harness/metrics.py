"""Metrics of a trace replay: raw measurements of one collective in one mode -> the figures of
docs/architecture.md, "What is measured", and the bounds they are compared with.

Everything here is a pure function of plain dicts and numbers (no simulation, no files), so the
replay runner, the report writers and the tests share one definition of every figure.

Notation: ``S`` is the collective's vector length in bytes per node (:mod:`sim_harness.trace`),
``p`` the number of nodes, ``B`` the link rate in payload bytes per cycle, ``L`` the link latency
in cycles, ``f`` the clock in MHz, ``T`` the measured cycles (command issue to done status).

Bound (:func:`bound_terms`, :func:`bound_cycles`): a true lower bound of the algorithm's time
    ``bound = max(W / B + L, steps * L)``: ``W`` is the payload of the algorithm's busiest
    directed link over the whole collective, so no run can carry it in fewer than ``W / B``
    cycles, and its last byte still takes ``L`` to arrive; ``steps`` is the algorithm's chain
    of dependent communication steps (:func:`latency_steps`), each a link crossing, so the
    collective takes at least ``steps * L`` whatever the bandwidth. Adding ``steps * L`` to
    ``W / B`` instead would not be a bound: with chunks pipelined, one chunk's hops overlap
    the others' bytes. ``time_over_bound = T / bound`` is therefore at least 1.

    Per-phase link bytes of one topology dimension of ``g`` nodes, for a phase whose full
    vector is ``D`` bytes per node (reduce-scatter: its input; all-gather: its output), on
    each directed link of a node the phase uses (:func:`link_bytes_by_link` names them):

    ==================  =================================  ==================================
    algorithm           reduce-scatter / all-gather        all-reduce
    ==================  =================================  ==================================
    ring                (g-1)/g * D on the +1 link          2 (g-1)/g * D
    direct              D/g on the link to each peer        2 D/g each
    halving_doubling    D/2^k to the partner of step k      2 D/2^k each
                        (member xor 2^(k-1))
    bidirectional_ring  (g-1)/g * D/2 on the +1 and on the  (g-1)/g * D each; g = 2:
                        -1 link; g = 2: (g-1)/g * D          2 (g-1)/g * D on one link
    switch (any)        a node's links share its port: the port carries (g-1)/g * D
                        (all-reduce 2 (g-1)/g * D)
    ==================  ====================================================================

    The bidirectional ring runs half of every chunk each way (``+1`` and ``-1`` neighbour);
    in a dimension of size 2 both halves go to the one neighbour on the same link. Ring sends
    on one link per dimension (the ``+1`` neighbour, as :mod:`ace.sw.compiler` emits it).

    All-to-all (one-dimensional topologies only, as the compiler): ``direct`` puts ``S/p`` on
    each link (switch: ``(p-1)/p * S`` on its one port); ``ring`` forwards every block hop by
    hop in one direction, so the block for the peer ``r`` hops away crosses ``r`` links:
    ``sum_{r=1}^{p-1} r * S/p = (p-1)/2 * S`` per link.

    Hierarchical (multi-dimensional) collectives compose ASTRA-sim style, as the compiler
    does: all-reduce = reduce-scatter on dims ``0..k-2`` (the data shrinking by each
    dimension's size), all-reduce on dim ``k-1``, all-gather back on ``k-2..0``; a
    reduce-scatter visits the dims from the last to the first, an all-gather from the first to
    the last. Dimensions of size 1 are skipped. A link carries the bytes of every phase that
    uses it (a torus dimension's phases share its links; on a switch every phase shares the
    port), and ``W`` is the busiest link's sum: on a 4x4 torus all-reduce the dimension-0
    links carry 3/4 S + 3/4 S and the dimension-1 links 2 x 3/16 S, so ``W = 1.5 S`` (the
    sum over the phases, 1.875 S, was beaten by runs whose chunks overlap the dimensions).

    Not modelled exactly: ``msccl`` (the XML's schedule) and ``double_binary_tree`` in any
    dimension. For these ``W = max(program_link_bytes)``, the busiest link of the program the
    engines actually ran (its planned payload, which the engine counters must match).

Latency steps (:func:`latency_steps`), per phase of ``g`` nodes, summed over the phases:
    ring and bidirectional_ring ``g-1`` (all-reduce ``2(g-1)``; all-to-all ``p-1``), direct ``1`` (all-reduce ``2``;
    all-to-all ``1``), halving_doubling ``log2 g`` (all-reduce ``2 log2 g``), double_binary_tree
    ``2 ceil(log2 g)`` (all-reduce phases only). MSCCL: the runner counts them from the XML.

Per-collective figures (:func:`collective_metrics`; ``n`` a node, ``(n, l)`` a link):
    time_us = T / f; link_utilization(n, l) = payload(n, l) / (B * T), averaged over the
    links the program sends on; header_overhead = (wire - payload) / payload, totals;
    memory traffic = bytes read + written on each engine's memory port; mem_over_2S =
    mean per-node traffic / 2S (all-reduce); mem_bytes_per_link_byte = total memory traffic /
    total payload sent; memory bandwidth = mean per-node traffic / T (bytes/cycle, and
    x f / 1000 in GB/s); algbw = S / time; busbw = algbw x 2(p-1)/p for all-reduce, (p-1)/p for
    reduce-scatter, all-gather and all-to-all (nccl-tests). GB are 10^9 bytes.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from fractions import Fraction

from ace.sw.program import Topology
from ace.vocab import Algorithm, Collective, Mode, VocabError, parse_collective

from .trace import COLLECTIVE_NAMES, MSCCL

__all__ = ["CollectiveRecord", "ALGORITHM_NAMES", "parse_topology", "split_algorithms", "phases",
           "latency_steps", "ideal_link_bytes", "link_bytes_by_link", "bound_terms",
           "bound_cycles", "busbw_factor", "mem_min_bytes_per_node", "collective_metrics", "run_summary", "compare",
           "compare_collectives", "link_key"]

#: Algorithm names, longest first so that ``ring_double_binary_tree`` splits unambiguously.
ALGORITHM_NAMES = tuple(sorted((*Algorithm, MSCCL), key=len, reverse=True))


@dataclass(frozen=True)
class CollectiveRecord:
    """One collective in one mode: a RECORD of ``results.json``, its fields in the file's
    order. Every field is defined (unit and formula) in ``docs/results_format.md``; ratios
    whose denominator is 0 are None. :meth:`to_json` and :meth:`from_json` are the one place
    a record becomes JSON and back."""
    name: str
    collective: str
    op: str
    algorithm: str
    topology: str
    nodes: int
    bytes: int
    dtype: str
    mode: str
    chunks: int
    start_cycle: int
    end_cycle: int
    cycles: int
    time_us: float
    latency_steps: int
    bound_cycles: float
    bound_bandwidth_cycles: float
    bound_latency_cycles: float
    bound_link_bytes: float
    bound_model: str
    time_over_bound: float | None
    link_utilization: float | None
    link_utilization_per_link: dict[str, float | None]
    link_payload_bytes: int
    link_wire_bytes: int
    header_overhead: float | None
    link_bytes_match_program: bool | None
    mem_read_bytes: int
    mem_write_bytes: int
    mem_read_bytes_by_node: list[int]
    mem_write_bytes_by_node: list[int]
    mem_bytes: int
    mem_bytes_per_node: float
    mem_over_2S: float | None
    mem_over_min: float | None
    mem_bytes_per_link_byte: float | None
    mem_bandwidth_bytes_per_cycle: float | None
    mem_bandwidth_gbps: float | None
    algbw_gbps: float | None
    busbw_gbps: float | None
    busbw_collective: str
    correct: bool

    def to_json(self) -> dict:
        """The record as ``results.json`` holds it: every field, in order, plain JSON types."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_json(cls, doc: dict, where: str = "record") -> "CollectiveRecord":
        """The record of a ``results.json`` entry; ``ValueError`` naming ``where`` and the
        fields when a field is missing or unknown."""
        names = [f.name for f in dataclasses.fields(cls)]
        missing = [n for n in names if n not in doc]
        unknown = [k for k in doc if k not in names]
        if missing or unknown:
            raise ValueError(f"{where}: not a results.json record: " + "; ".join(
                f"{what} {', '.join(keys)}" for what, keys in (("missing", missing),
                                                               ("unknown", unknown)) if keys))
        return cls(**{n: doc[n] for n in names})


def _plain(value):
    """JSON types for a record field: lists and dicts copied, tuples as lists."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def link_key(node: int, link: int) -> str:
    """The name of link ``link`` of node ``node`` in results: ``n3.l1``."""
    return f"n{node}.l{link}"


def parse_topology(topology: str) -> tuple[str, tuple[int, ...]]:
    """``ring:8`` -> ``("torus", (8,))``; ``torus:4x2``, ``fully_connected:8``, ``switch:8``
    (:meth:`ace.sw.program.Topology.parse`; its errors are ``ValueError``)."""
    parsed = Topology.parse(str(topology))
    return parsed.kind, parsed.dims


def split_algorithms(algorithm, ndims: int) -> list[str]:
    """One algorithm name per topology dimension, from ``"ring"`` (the same for every
    dimension), ``"ring_direct"`` / ``"ring+direct"`` (one per dimension) or a sequence."""
    if isinstance(algorithm, str):
        text, names = algorithm.lower().replace("+", "_"), []
        while text:
            text = text.lstrip("_")
            for name in ALGORITHM_NAMES:
                if text.startswith(name) and (len(text) == len(name) or text[len(name)] == "_"):
                    names.append(name)
                    text = text[len(name):]
                    break
            else:
                raise ValueError(f"algorithm: {algorithm!r}; allowed: names from "
                                 f"{', '.join(ALGORITHM_NAMES)} joined by '_', one per dimension")
    else:
        names = [str(a).lower() for a in algorithm]
        bad = [a for a in names if a not in ALGORITHM_NAMES]
        if bad:
            raise ValueError(f"algorithm: {bad[0]!r}; allowed: {', '.join(ALGORITHM_NAMES)}")
    if len(names) == 1:
        return names * ndims
    if len(names) != ndims:
        raise ValueError(f"algorithm: {algorithm!r} names {len(names)} algorithms for "
                         f"{ndims} topology dimensions")
    return names


def phases(collective: str, algorithms, topology: str) -> list[dict]:
    """The communication phases of a (hierarchical) collective, in execution order.

    Each phase is ``{"kind": "rs"|"ag"|"ar"|"a2a", "dim": k, "size": g, "algorithm": name,
    "fraction": Fraction}``: ``fraction * S`` is the phase's full vector per node (see the
    module docstring). ``msccl`` has no phases (an empty list)."""
    kind, dims = parse_topology(topology)
    algs = split_algorithms(algorithms, len(dims))
    if collective == MSCCL or MSCCL in algs:
        return []
    active = [k for k, d in enumerate(dims) if d > 1]
    if not active:
        raise ValueError(f"topology: {topology!r} has fewer than 2 nodes")

    def phase(kind_, k, frac):
        return {"kind": kind_, "dim": k, "size": dims[k], "algorithm": algs[k],
                "fraction": frac}

    if collective == Collective.ALLTOALL:
        if len(active) != 1:
            raise ValueError(f"alltoall runs on one-dimensional topologies only; got {topology}")
        return [phase("a2a", active[0], Fraction(1))]
    if collective in (Collective.REDUCE_SCATTER, Collective.ALLGATHER):
        out, frac = [], Fraction(1)
        for k in reversed(active):
            out.append(phase("rs", k, frac))
            frac /= dims[k]
        if collective == Collective.ALLGATHER:
            out = [dict(ph, kind="ag") for ph in reversed(out)]
        return out
    if collective == Collective.ALLREDUCE:
        rs, frac = [], Fraction(1)
        for k in active[:-1]:
            rs.append(phase("rs", k, frac))
            frac /= dims[k]
        return rs + [phase("ar", active[-1], frac)] + [dict(ph, kind="ag")
                                                      for ph in reversed(rs)]
    raise ValueError(f"collective: {collective!r}; allowed: {', '.join(COLLECTIVE_NAMES)}")


def _phase_steps(ph: dict) -> int:
    g, alg, kind = ph["size"], ph["algorithm"], ph["kind"]
    mult = 2 if kind == "ar" else 1
    if alg in (Algorithm.RING, Algorithm.BIDIRECTIONAL_RING):
        return mult * (g - 1)
    if alg == Algorithm.DIRECT:
        return mult
    if alg == Algorithm.HALVING_DOUBLING:
        return mult * math.ceil(math.log2(g))
    if alg == Algorithm.DOUBLE_BINARY_TREE:
        if kind != "ar":
            raise ValueError(f"double_binary_tree runs only all-reduce phases (dimension "
                             f"{ph['dim']} runs a {kind} phase)")
        return 2 * math.ceil(math.log2(g))
    raise ValueError(f"algorithm: {alg!r} has no latency-step formula")


def latency_steps(collective: str, algorithms, topology: str) -> int:
    """Sequential communication steps of the algorithm: the sum over its phases (see the module
    docstring). MSCCL raises ``ValueError``: count the XML's sequential steps instead."""
    if collective == MSCCL or MSCCL in split_algorithms(
            algorithms, len(parse_topology(topology)[1])):
        raise ValueError("latency_steps: msccl schedules have no formula; count the sequential "
                         "steps of the XML")
    return sum(_phase_steps(ph) for ph in phases(collective, algorithms, topology))


def _phase_link_bytes(ph: dict, topo_kind: str, nbytes: int) -> dict | None:
    """The phase's payload bytes on each of a node's directed links, by link: ``("port",)``
    (a switch: every virtual link shares the node's port), ``(dim, "+1")`` / ``(dim, "-1")``
    (the ring neighbours), ``(dim, "to", j)`` (the peer j members on) or ``(dim, "xor", m)``
    (the halving-doubling partner, member index xor m); ``None`` where not modelled."""
    g, alg, kind, dim = ph["size"], ph["algorithm"], ph["kind"], ph["dim"]
    data = ph["fraction"] * nbytes
    mult = 2 if kind == "ar" else 1
    if topo_kind == "switch":
        per_port = {Algorithm.RING: mult * Fraction(g - 1, g) * data,
                    Algorithm.DIRECT: mult * Fraction(g - 1, g) * data,
                    Algorithm.HALVING_DOUBLING: mult * Fraction(g - 1, g) * data}
        if kind == "a2a":
            per_port[Algorithm.RING] = Fraction(g - 1, 2) * data
            per_port[Algorithm.DIRECT] = Fraction(g - 1, g) * data
        return {("port",): per_port[alg]} if alg in per_port else None
    if kind == "a2a":
        if alg == Algorithm.RING:
            return {(dim, "+1"): Fraction(g - 1, 2) * data}
        return {(dim, "to", j): data / g for j in range(1, g)} if alg == Algorithm.DIRECT \
            else None
    if alg == Algorithm.RING:
        return {(dim, "+1"): mult * Fraction(g - 1, g) * data}
    if alg == Algorithm.DIRECT:
        return {(dim, "to", j): mult * data / g for j in range(1, g)}
    if alg == Algorithm.HALVING_DOUBLING:   # step k: data / 2^k with the partner xor 2^(k-1)
        steps = math.ceil(math.log2(g))
        return {(dim, "xor", 1 << k): mult * data / (2 << k) for k in range(steps)}
    if alg == Algorithm.BIDIRECTIONAL_RING:     # half each way; one link if g == 2
        if g == 2:
            return {(dim, "+1"): mult * Fraction(g - 1, g) * data}
        half = mult * Fraction(g - 1, g) * data / 2
        return {(dim, "+1"): half, (dim, "-1"): half}
    return None                       # double_binary_tree: not modelled exactly


def link_bytes_by_link(collective: str, algorithm, topology: str, nbytes: int
                       ) -> dict | None:
    """Each of a node's directed links (named as in :func:`_phase_link_bytes`) and the
    payload bytes it carries over the whole collective: the sum over the phases that use it;
    ``None`` where the algorithm is not modelled exactly (msccl, double_binary_tree)."""
    kind, _ = parse_topology(topology)
    phs = phases(collective, algorithm, topology)
    if not phs:
        return None
    links: dict = {}
    for ph in phs:
        part = _phase_link_bytes(ph, kind, nbytes)
        if part is None:
            return None
        for link, value in part.items():
            links[link] = links.get(link, Fraction(0)) + value
    return links


def ideal_link_bytes(collective: str, algorithm, topology: str, nbytes: int) -> float | None:
    """``W``: the payload bytes of the algorithm's busiest directed link over the whole
    collective (:func:`link_bytes_by_link`), or ``None`` where it is not modelled exactly
    (msccl, double_binary_tree)."""
    links = link_bytes_by_link(collective, algorithm, topology, nbytes)
    return None if links is None else float(max(links.values()))


def bound_terms(collective, algorithm, topology, nodes, nbytes, link_bytes_per_cycle,
                link_latency, latency_steps, program_link_bytes=None) -> dict:
    """The bound and its parts: ``{"link_bytes": W, "bandwidth_cycles": W / B,
    "latency_cycles": steps * L, "bound_cycles": sum, "model": "ideal"|"program"}``.

    ``model`` is ``program`` where ``W = max(program_link_bytes)`` (msccl, double binary
    tree); ``program_link_bytes`` (per node, per link) is then required."""
    kind, dims = parse_topology(topology)
    if math.prod(dims) != nodes:
        raise ValueError(f"nodes: {nodes} but topology {topology} has {math.prod(dims)}")
    if link_bytes_per_cycle <= 0:
        raise ValueError(f"link_bytes_per_cycle: {link_bytes_per_cycle}; must be > 0")
    width = ideal_link_bytes(collective, algorithm, topology, nbytes)
    model = "ideal"
    if width is None:
        if program_link_bytes is None:
            raise ValueError(f"{collective}/{algorithm}: no exact bandwidth model; pass "
                             "program_link_bytes (the bound uses its busiest link)")
        width = float(max((b for row in program_link_bytes for b in row), default=0))
        model = "program"
    bandwidth = width / link_bytes_per_cycle
    # The last byte on the busiest link still crosses it (L); the chain of latency_steps
    # dependent hops takes steps x L on its own, whatever the bandwidth.
    latency = max(link_latency, latency_steps * link_latency - bandwidth)
    return {"link_bytes": width, "bandwidth_cycles": bandwidth, "latency_cycles": latency,
            "bound_cycles": bandwidth + latency, "model": model}


def bound_cycles(collective, algorithm, topology, nodes, nbytes, link_bytes_per_cycle,
                 link_latency, latency_steps, program_link_bytes=None) -> float:
    """``max(W / B + L, latency_steps * L)`` cycles (see :func:`bound_terms` and the module
    docstring)."""
    return bound_terms(collective, algorithm, topology, nodes, nbytes, link_bytes_per_cycle,
                       link_latency, latency_steps, program_link_bytes)["bound_cycles"]


def _norm_coll(name) -> Collective | None:
    """The collective an MSCCL XML names (any alias of :data:`ace.vocab.COLLECTIVE_ALIASES`),
    or None."""
    if name is None:
        return None
    try:
        return parse_collective(str(name).replace(" ", "_"))
    except VocabError:
        return None


def busbw_factor(collective: str, nodes: int) -> float:
    """nccl-tests bus-bandwidth factor: ``2(p-1)/p`` for all-reduce, ``(p-1)/p`` for
    reduce-scatter, all-gather and all-to-all."""
    p = nodes
    if collective == Collective.ALLREDUCE:
        return 2 * (p - 1) / p
    if collective in (Collective.REDUCE_SCATTER, Collective.ALLGATHER, Collective.ALLTOALL):
        return (p - 1) / p
    raise ValueError(f"collective: {collective!r} has no bus-bandwidth factor")


def mem_min_bytes_per_node(collective: str, nbytes: int, nodes: int) -> float:
    """The least memory traffic per node: its input read once plus its output written once
    (all-reduce ``2S``; reduce-scatter and all-gather ``S + S/p``; all-to-all ``2S``)."""
    s, p = nbytes, nodes
    if collective in (Collective.ALLREDUCE, Collective.ALLTOALL):
        return 2.0 * s
    if collective in (Collective.REDUCE_SCATTER, Collective.ALLGATHER):
        return s + s / p
    raise ValueError(f"collective: {collective!r} has no memory lower bound")


def _ratio(num, den):
    return num / den if den else None


def _mean(values):
    values = list(values)
    return sum(values) / len(values) if values else None


def collective_metrics(raw: dict, system: dict) -> CollectiveRecord:
    """The results.json record of one collective in one mode (``docs/results_format.md``)."""
    lbpc = float(system["link_bytes_per_cycle"])
    clock = float(system["clock_mhz"])
    cycles = int(raw["cycles"])
    nbytes, p = int(raw["bytes"]), int(raw["nodes"])
    coll = raw["collective"]
    # The collective the figures are normalised as (an MSCCL XML says which, else all-reduce).
    as_coll = coll if coll != MSCCL else (_norm_coll(raw.get("msccl_coll")) or Collective.ALLREDUCE)

    terms = bound_terms(coll, raw["algorithm"], raw["topology"], p, nbytes, lbpc,
                        int(system["link_latency"]), int(raw["latency_steps"]),
                        raw.get("program_link_bytes"))
    payload = raw["link_tx_payload_bytes"]
    wire = raw["link_tx_wire_bytes"]
    if parse_topology(raw["topology"])[0] == "switch":
        # The virtual links (one per peer) of a node share its one switch port: per port.
        per_link = {f"n{n}.port": _ratio(sum(payload[n]), lbpc * cycles)
                    for n in sorted({n for n, _ in raw["links_used"]})}
    else:
        per_link = {link_key(n, lk): _ratio(payload[n][lk], lbpc * cycles)
                    for n, lk in raw["links_used"]}
    payload_total = sum(sum(row) for row in payload)
    wire_total = sum(sum(row) for row in wire)

    reads = [int(b) for b in raw["mem_read_bytes"]]
    writes = [int(b) for b in raw["mem_write_bytes"]]
    mem_total = sum(reads) + sum(writes)
    per_node = mem_total / p
    mem_bpc = _ratio(per_node, cycles)
    time_us = cycles / clock
    algbw = _ratio(nbytes, time_us * 1e3)       # bytes / (us * 1e3) = 1e9 bytes / s
    program = raw.get("program_link_bytes")
    utils = [u for u in per_link.values() if u is not None]
    return CollectiveRecord(
        name=raw["name"], collective=coll, op=raw["op"],
        algorithm=raw["algorithm"], topology=raw["topology"], nodes=p,
        bytes=nbytes, dtype=raw["dtype"], mode=Mode(raw["mode"]).value, chunks=raw["chunks"],
        start_cycle=raw["start_cycle"], end_cycle=raw["end_cycle"],
        cycles=cycles, time_us=time_us,
        latency_steps=raw["latency_steps"],
        bound_cycles=terms["bound_cycles"],
        bound_bandwidth_cycles=terms["bandwidth_cycles"],
        bound_latency_cycles=terms["latency_cycles"],
        bound_link_bytes=terms["link_bytes"], bound_model=terms["model"],
        time_over_bound=_ratio(cycles, terms["bound_cycles"]),
        link_utilization=_mean(utils) if utils else 0.0,
        link_utilization_per_link=per_link,
        link_payload_bytes=payload_total, link_wire_bytes=wire_total,
        header_overhead=_ratio(wire_total - payload_total, payload_total),
        link_bytes_match_program=None if program is None else [
            list(map(int, row)) for row in payload] == [list(map(int, row)) for row in program],
        mem_read_bytes=sum(reads), mem_write_bytes=sum(writes),
        mem_read_bytes_by_node=reads, mem_write_bytes_by_node=writes,
        mem_bytes=mem_total, mem_bytes_per_node=per_node,
        mem_over_2S=_ratio(per_node, 2 * nbytes) if as_coll == Collective.ALLREDUCE else None,
        mem_over_min=_ratio(per_node, mem_min_bytes_per_node(as_coll, nbytes, p)),
        mem_bytes_per_link_byte=_ratio(mem_total, payload_total),
        mem_bandwidth_bytes_per_cycle=mem_bpc,
        mem_bandwidth_gbps=None if mem_bpc is None else mem_bpc * clock / 1e3,
        algbw_gbps=algbw,
        busbw_gbps=None if algbw is None else algbw * busbw_factor(as_coll, p),
        busbw_collective=as_coll,
        correct=bool(raw["correct"]),
    )


def run_summary(records: list[CollectiveRecord]) -> dict:
    """Totals of one mode's records: cycles and time add up, link utilization is the mean
    weighted by each collective's cycles, memory traffic adds up (``mem_bytes_per_node`` is
    the sum of the per-collective means)."""
    modes = {r.mode for r in records}
    if len(modes) > 1:
        raise ValueError(f"run_summary: records of several modes {sorted(modes)}; "
                         "summarise one mode at a time")
    cycles = sum(r.cycles for r in records)
    bound = sum(r.bound_cycles for r in records)
    time_us = sum(r.time_us for r in records)
    mem = sum(r.mem_bytes for r in records)
    per_node = sum(r.mem_bytes_per_node for r in records)
    payload = sum(r.link_payload_bytes for r in records)
    wire = sum(r.link_wire_bytes for r in records)
    nbytes = sum(r.bytes for r in records)
    mem_bpc = _ratio(per_node, cycles)
    return {
        "mode": next(iter(modes), None), "collectives": len(records),
        "total_cycles": cycles, "total_time_us": time_us, "total_bound_cycles": bound,
        "time_over_bound": _ratio(cycles, bound), "bytes": nbytes,
        "link_utilization": _ratio(sum(r.link_utilization * r.cycles for r in records),
                                   cycles),
        "link_payload_bytes": payload, "link_wire_bytes": wire,
        "header_overhead": _ratio(wire - payload, payload),
        "mem_read_bytes": sum(r.mem_read_bytes for r in records),
        "mem_write_bytes": sum(r.mem_write_bytes for r in records),
        "mem_bytes": mem, "mem_bytes_per_node": per_node,
        "mem_bytes_per_link_byte": _ratio(mem, payload),
        "mem_bandwidth_bytes_per_cycle": mem_bpc,
        "mem_bandwidth_gbps": _ratio(per_node, time_us * 1e3),
        "algbw_gbps": _ratio(nbytes, time_us * 1e3),
        "all_correct": all(r.correct for r in records),
    }


def compare(ace_summary: dict, baseline_summary: dict) -> dict:
    """ACE against one baseline (``staged`` or ``p2p``): ``memory_traffic_reduction`` =
    baseline / ACE memory bytes,
    ``mem_bytes_per_link_byte_reduction`` = baseline / ACE, ``link_utilization_gain`` = ACE /
    baseline utilization, ``speedup`` = baseline / ACE cycles (``None`` where a denominator
    is 0)."""
    a, b = ace_summary, baseline_summary
    return {
        "memory_traffic_reduction": _ratio(b["mem_bytes"], a["mem_bytes"]),
        "mem_bytes_per_link_byte_reduction": _ratio(b["mem_bytes_per_link_byte"] or 0,
                                                    a["mem_bytes_per_link_byte"] or 0),
        "link_utilization_gain": _ratio(a["link_utilization"] or 0, b["link_utilization"] or 0),
        "speedup": _ratio(b["total_cycles"], a["total_cycles"]),
    }


def compare_collectives(ace_records: list[CollectiveRecord],
                        baseline_records: list[CollectiveRecord]) -> list[dict]:
    """The same ratios per collective, matched by name (in ACE order; unmatched ones are
    left out)."""
    base = {r.name: r for r in baseline_records}
    out = []
    for a in ace_records:
        b = base.get(a.name)
        if b is None:
            continue
        out.append({"name": a.name,
                    "memory_traffic_reduction": _ratio(b.mem_bytes, a.mem_bytes),
                    "link_utilization_gain": _ratio(a.link_utilization,
                                                    b.link_utilization),
                    "speedup": _ratio(b.cycles, a.cycles)})
    return out
