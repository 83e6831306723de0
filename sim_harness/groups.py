"""Collectives that span groups of nodes: the model- and data-parallel groups of an ASTRA-sim
workload, an all-reduce run one topology dimension at a time, a "one ring over all NPUs".

A collective's ``extra["span"]`` (set by the trace readers, :mod:`sim_harness.traces.astra`)
says which nodes each instance spans; every group runs its own instance at the same time, on
the links between its members:

==================  ==========================================================================
span                groups
==================  ==========================================================================
``["lead", G]``     G consecutive nodes (ids ``kG .. kG+G-1``): the leading topology dimensions
                    whose sizes multiply to G (ASTRA-sim's model-parallel group; G None: the
                    first dimension)
``["trail", G]``    the nodes with the same place in those groups (``j, j+G, j+2G...``): the
                    other dimensions (the data-parallel group)
``["dims", [k]]``   the nodes that differ only in the coordinates of dimensions ``k``
``["flat"]``        every node, as one one-dimensional group (ASTRA-sim's ``oneRing``...)
==================  ==========================================================================

A group is a sub-topology of the same kind over its dimensions; on a fully connected or switch
system of one dimension G may also split it. On a torus every group must be made of whole
dimensions (a group that cuts a ring has no link between its ends), else the span is refused.

:func:`grouped_program` compiles the collective once on the sub-topology and gives every
member of every group its node's program, with peers and links mapped onto the system.
"""

from __future__ import annotations

import dataclasses

from ace.sw.compiler import compile_collective
from ace.sw.program import CollectiveProgram, NodeProgram, Topology

from .trace import CollectiveSpec, TraceError

__all__ = ["span_groups", "grouped_program", "SPAN_FORMS"]

SPAN_FORMS = "['lead', G], ['trail', G], ['dims', [k, ...]] or ['flat']"


def _prefix(topology: Topology, size: int | None) -> int | None:
    """How many leading dimensions multiply to ``size`` (None: one), or None."""
    if size is None:
        return 1
    product = 1
    for k, d in enumerate(topology.dims):
        product *= d
        if product == size:
            return k + 1
    return None


def _span_dims(span, topology: Topology, where: str) -> list[int] | None:
    """The dimensions a span covers, or None when it splits a dimension."""
    how = span[0]
    if how == "dims":
        dims = list(span[1])
        if not dims or any(not isinstance(k, int) or not 0 <= k < len(topology.dims)
                           for k in dims):
            raise TraceError(f"{where}: span {span}: dimensions 0 to "
                             f"{len(topology.dims) - 1} of {topology}")
        return sorted(set(dims))
    if how == "flat":
        return list(range(len(topology.dims))) if len(topology.dims) == 1 else None
    b = _prefix(topology, span[1])
    if b is None:
        return None
    return list(range(b)) if how == "lead" else list(range(b, len(topology.dims)))


def span_groups(span, topology: Topology, where: str = "span") -> tuple[list[list[int]],
                                                                        Topology]:
    """The groups of ``span`` on ``topology`` (each a list of node ids, in the order of the
    sub-topology's node ids) and the sub-topology every group is."""
    if not isinstance(span, (list, tuple)) or not span or span[0] not in (
            "lead", "trail", "dims", "flat"):
        raise TraceError(f"{where}: span {span!r}; allowed: {SPAN_FORMS}")
    dims = _span_dims(span, topology, where)
    if dims is not None:
        return _dimension_groups(topology, dims), Topology(
            topology.kind, tuple(topology.dims[k] for k in dims) or (1,))
    return _split_groups(span, topology, where)


def _dimension_groups(topology: Topology, dims: list[int]) -> list[list[int]]:
    groups: dict[tuple, list[int]] = {}
    for node in range(topology.num_nodes):
        coords = topology.coords(node)
        key = tuple(c for k, c in enumerate(coords) if k not in dims)
        groups.setdefault(key, []).append(node)   # in node order = sub-topology order
    return list(groups.values())


def _split_groups(span, topology: Topology, where: str):
    """Groups that cut a dimension: only where every pair of nodes has a link."""
    n = topology.num_nodes
    if topology.kind == "torus":
        sizes = ", ".join(str(_product(topology.dims[:k + 1]))
                          for k in range(len(topology.dims)))
        raise TraceError(f"{where}: span {span} cuts a dimension of {topology}; on a torus a "
                         f"group must be whole dimensions (sizes {sizes}) so that its ring "
                         "closes; use a fully_connected or switch system")
    if span[0] == "flat":
        return [list(range(n))], Topology(topology.kind, (n,))
    size = span[1]
    if not isinstance(size, int) or size < 1 or n % size:
        raise TraceError(f"{where}: span {span}: group size {size!r} does not divide the "
                         f"{n} nodes of {topology}")
    if span[0] == "lead":
        return [list(range(k * size, (k + 1) * size)) for k in range(n // size)], \
            Topology(topology.kind, (size,))
    return [list(range(j, n, size)) for j in range(size)], Topology(topology.kind, (n // size,))


def _product(values) -> int:
    out = 1
    for v in values:
        out *= v
    return out


def grouped_program(spec: CollectiveSpec, system, mode: str, count: int,
                    dtype) -> CollectiveProgram:
    """``spec`` compiled once for the sub-topology of its span and run by every group of it
    on ``system`` (see the module docstring)."""
    topology = system.topology
    groups, sub = span_groups(spec.extra["span"], topology, f"{spec.source}: {spec.name}")
    if sub.num_nodes < 2:
        raise TraceError(f"{spec.source}: {spec.name}: span {spec.extra['span']} has one node "
                         f"per group on {topology}; a collective needs at least two")
    base = compile_collective(spec.collective, count, topology=sub,
                              algorithm=_algorithms(spec, topology, sub), dtype=dtype,
                              op=spec.op, mode=mode, config=system.config, check=False)
    nodes: list[NodeProgram | None] = [None] * topology.num_nodes
    blocks = [None] * topology.num_nodes if base.blocks else None
    for members in groups:
        for k, node in enumerate(members):
            nodes[node] = _moved(base.nodes[k], node, members, topology)
            if blocks is not None:
                blocks[node] = base.blocks[k]
    return dataclasses.replace(base, nodes=nodes, topology=topology, blocks=blocks)


def _algorithms(spec: CollectiveSpec, topology: Topology, sub: Topology):
    """The spec's algorithm for the sub-topology: one name for all, or one per dimension of
    the system (the span's dimensions are kept) or of the sub-topology."""
    alg = spec.algorithm
    if isinstance(alg, str) or len(alg) == len(sub.dims):
        return alg if isinstance(alg, str) else list(alg)
    dims = _span_dims(spec.extra["span"], topology, spec.name)
    if len(alg) == len(topology.dims) and dims is not None:
        return [alg[k] for k in dims]
    raise TraceError(f"{spec.source}: {spec.name}: algorithm {list(alg)} has "
                     f"{len(alg)} entries; allowed: one, or one per dimension of {topology} "
                     f"or of its group {sub}")


def _moved(program: NodeProgram, node: int, members: list[int],
           topology: Topology) -> NodeProgram:
    """A copy of the sub-topology node program for system node ``node``: peers are group
    members, links the system's links to them."""
    channels = []
    for channel in program.channels:
        steps = [_moved_step(step, node, members, topology) for step in channel.steps]
        channels.append(_moved_step(dataclasses.replace(channel, steps=steps), node, members,
                                    topology))
    return dataclasses.replace(program, node=node, channels=channels)


def _moved_step(item, node: int, members: list[int], topology: Topology):
    """``item`` (a step or a channel) with its send/receive peers and links mapped."""
    changes = {}
    for side, link_of in (("send", topology.send_link), ("recv", topology.recv_link)):
        peer = getattr(item, f"{side}_peer")
        if peer is not None:
            changes[f"{side}_peer"] = members[peer]
            changes[f"{side}_link"] = link_of(node, members[peer])
    return dataclasses.replace(item, **changes)
