"""Bidirectional ring: two rings in opposite directions, each carrying half of every chunk.

The compiler cuts every chunk into two *lanes* (word-aligned halves of each of its segments,
:meth:`~.emit.ChunkLayout.of`) and runs each lane on its own channel (:class:`~.build.Compilation`,
``lanes``), so that both run at once. Lane 0 runs the :mod:`.ring` steps as they are, member m
sending to member m+1; lane 1 runs them over the members in the opposite order
(:meth:`~.emit.Phase.reversed`), member m sending to member m-1. Every member keeps its parts,
so lane 1 ends with the same blocks in the same places.

Reduce-scatter of a region of S bytes over g members: each lane g-1 steps of S/(2g) bytes, one
lane on the link to the next member, the other on the link to the previous one, so each
direction of each link carries (g-1)/g * S/2: half the ring's bytes in the same number of steps
(the bandwidth term halves, the latency term stays g-1 steps). All-gather is the mirror. In a
dimension of size 2 both lanes go to the one neighbour over the same link, and nothing is
gained. Element order of a reduction: lane 0 accumulates part m from member m+1 onwards
(m+1, m+2, ..., m), lane 1 from member m-1 downwards (m-1, m-2, ..., m).

Deadlock-free: each lane is a ring (see :mod:`.ring`) on its own channel, the NIC keeps
channels apart (per-channel receive buffers and credits), and lanes share no data.
"""

from __future__ import annotations

from . import ring
from .emit import NodeChunk, Phase

__all__ = ["LANES", "reduce_scatter", "all_gather"]

#: Lanes (channels) per chunk.
LANES = 2


def _direction(nc: NodeChunk, ph: Phase) -> Phase:
    """The phase as lane ``nc.chunk.lane`` runs it: odd lanes the other way round."""
    return ph.reversed() if nc.chunk.lane % 2 else ph


def reduce_scatter(nc: NodeChunk, ph: Phase) -> None:
    ring.reduce_scatter(nc, _direction(nc, ph))


def all_gather(nc: NodeChunk, ph: Phase) -> None:
    ring.all_gather(nc, _direction(nc, ph))
