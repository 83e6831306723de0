"""Hierarchical (multi-dimensional) collectives, composed ASTRA-sim style from one phase per
topology dimension, each run by that dimension's algorithm (:mod:`.registry`).

* all-reduce: reduce-scatter on dimensions 0..k-2, all-reduce on dimension k-1, all-gather on
  dimensions k-2..0 (each phase works on the region the previous phases left to the node's
  group, 1/d of it per reduce-scatter);
* reduce-scatter: phases from the last dimension to the first; all-gather: from the first to
  the last; so that node n ends with (or starts from) block n.

Dimensions of size 1 have no phase. A single-dimension collective is one phase.
"""

from __future__ import annotations

from ace.vocab import Collective

from .emit import NodeChunk, Phase
from .errors import CompileError
from .registry import PHASE_ALGORITHMS

__all__ = ["phase_order", "phases", "run_phase"]


def phase_order(collective: str, dims: list[int]) -> list[int]:
    """The dimensions in the order the reduce-scatter phases visit them."""
    return list(dims) if collective == Collective.ALLREDUCE else list(reversed(dims))


def phases(collective: str, count: int) -> list[tuple[Collective, int]]:
    """The (phase kind, position in the phase order) of a collective over ``count`` dims."""
    last = count - 1
    if collective == Collective.ALLREDUCE:
        return ([(Collective.REDUCE_SCATTER, q) for q in range(last)]
                + [(Collective.ALLREDUCE, last)]
                + [(Collective.ALLGATHER, q) for q in range(last - 1, -1, -1)])
    if collective == Collective.REDUCE_SCATTER:
        return [(Collective.REDUCE_SCATTER, q) for q in range(last + 1)]
    return [(Collective.ALLGATHER, q) for q in range(last, -1, -1)]


def _check(comp, kind: Collective, q: int) -> None:
    dim = comp.order[q]
    name = comp.algorithms[dim]
    alg = PHASE_ALGORITHMS[name]
    if not alg.runs(kind):
        others = [str(a) for a, other in PHASE_ALGORITHMS.items() if other.runs(kind)]
        article = "a reduce-scatter" if kind == Collective.REDUCE_SCATTER else "an all-gather"
        raise CompileError(f"{name} runs only all-reduce phases; dimension {dim} runs {article} "
                           f"phase (collective {comp.collective}); use "
                           f"{', '.join(others[:-1])} or {others[-1]} there")
    g = comp.topology.dims[dim]
    if alg.power_of_two and g & (g - 1):
        raise CompileError(f"{name} needs a power-of-two group size; dimension {dim} has {g} "
                           "nodes (use ring or direct)")


def _phase_of(comp, nc: NodeChunk, q: int) -> Phase:
    """Node ``nc.node``'s group in the phase at position ``q`` of the order, and the region
    ranges (of ``nc.chunk.nest``) of each member: the regions the earlier phases left to the
    group, split by the remaining dimensions."""
    topo, order = comp.topology, comp.order
    coords = topo.coords(nc.node)
    prefix = 0
    for k in order[:q]:
        prefix = prefix * topo.dims[k] + coords[k]
    below = 1
    for k in order[q + 1:]:
        below *= topo.dims[k]
    d = topo.dims[order[q]]
    ranges = [((prefix * d + m) * below, (prefix * d + m + 1) * below) for m in range(d)]
    pieces = nc.chunk.pieces
    return Phase(topo.group(nc.node, order[q]), coords[order[q]],
                 [pieces(lo, hi) for lo, hi in ranges], pieces(ranges[0][0], ranges[-1][1]))


def run_phase(comp, emitters: list[NodeChunk], kind: Collective, q: int) -> None:
    """Emit every node's steps of the phase ``(kind, q)``."""
    _check(comp, kind, q)
    alg = PHASE_ALGORITHMS[comp.algorithms[comp.order[q]]]
    for nc in emitters:
        alg.run(kind, nc, _phase_of(comp, nc, q))
