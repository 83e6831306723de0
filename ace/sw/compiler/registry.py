"""The phase algorithms by name: what phases each runs, and what group sizes it needs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ace.vocab import Algorithm, Collective

from . import bidirectional_ring, direct, double_binary_tree, halving_doubling, ring
from .emit import NodeChunk, Phase

__all__ = ["PhaseAlgorithm", "PHASE_ALGORITHMS"]

PhaseFunction = Callable[[NodeChunk, Phase], None]


@dataclass(frozen=True)
class PhaseAlgorithm:
    """The phases (reduce-scatter, all-gather, all-reduce) an algorithm runs over one topology
    dimension. Without its own all-reduce, an all-reduce phase is its reduce-scatter followed
    by its all-gather. ``power_of_two``: the group size must be a power of two. ``lanes``:
    how many parts of every chunk run at once, each on its own channel (the bidirectional
    ring's two directions)."""
    phases: dict[Collective, PhaseFunction]
    power_of_two: bool = False
    lanes: int = 1

    def runs(self, kind: Collective) -> bool:
        return kind in self.phases or (
            kind == Collective.ALLREDUCE and Collective.REDUCE_SCATTER in self.phases
            and Collective.ALLGATHER in self.phases)

    def run(self, kind: Collective, nc: NodeChunk, phase: Phase) -> None:
        """Emit node ``nc.node``'s steps of a ``kind`` phase."""
        if kind in self.phases:
            self.phases[kind](nc, phase)
            return
        self.phases[Collective.REDUCE_SCATTER](nc, phase)
        self.phases[Collective.ALLGATHER](nc, phase)


def _rs_ag(module) -> dict[Collective, PhaseFunction]:
    return {Collective.REDUCE_SCATTER: module.reduce_scatter,
            Collective.ALLGATHER: module.all_gather}


PHASE_ALGORITHMS: dict[Algorithm, PhaseAlgorithm] = {
    Algorithm.RING: PhaseAlgorithm(_rs_ag(ring)),
    Algorithm.DIRECT: PhaseAlgorithm(_rs_ag(direct)),
    Algorithm.HALVING_DOUBLING: PhaseAlgorithm(_rs_ag(halving_doubling), power_of_two=True),
    Algorithm.DOUBLE_BINARY_TREE: PhaseAlgorithm(
        {Collective.ALLREDUCE: double_binary_tree.all_reduce}),
    Algorithm.BIDIRECTIONAL_RING: PhaseAlgorithm(_rs_ag(bidirectional_ring),
                                                 lanes=bidirectional_ring.LANES),
}
assert set(PHASE_ALGORITHMS) == set(Algorithm)
