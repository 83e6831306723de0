"""A chunk's way in and out of the engine: loads (or the baseline's local copy) before the
communication steps, stores after them (ACE mode only: in the baselines the buffers already are
main memory). Each function emits node ``nc.node``'s steps of chunk ``nc.chunk``."""

from __future__ import annotations

from ace.vocab import Buffer, Collective, Mode, StepType

from .chunks import pad
from .emit import NodeChunk

__all__ = ["load_chunk", "store_chunk"]


def load_chunk(nc: NodeChunk) -> None:
    """All-reduce / reduce-scatter: load the chunk's whole input. All-gather: put the node's
    own block in place (it counts as written). All-to-all: load the blocks for the others, and
    the node's own block straight to its output position."""
    comp, chunk = nc.comp, nc.chunk
    node = comp.nodes[nc.node]
    esize, ace = comp.esize, comp.mode == Mode.ACE
    if comp.collective in (Collective.ALLREDUCE, Collective.REDUCE_SCATTER):
        for seg in chunk.segments:
            if ace and seg.length:
                nc.emit(StepType.LOAD, seg.length, dst=(Buffer.INPUT, chunk.base_in + seg.local),
                        mem=node.input_addr + seg.glob * esize, into=nc.loads)
        return
    mine = chunk.segments[nc.node]
    if comp.collective == Collective.ALLGATHER:
        in_block = mine.glob - nc.block[0]
        if mine.length and ace:
            nc.emit(StepType.LOAD, mine.length, dst=(Buffer.OUTPUT, chunk.base_out + mine.local),
                    mem=node.input_addr + in_block * esize, into=nc.loads)
        elif mine.length:
            nc.emit(StepType.CPY, mine.length, src=(Buffer.INPUT, in_block),
                    dst=(Buffer.OUTPUT, mine.glob), into=nc.loads)
        nc.mark(mine.local, mine.length)
    else:
        own = nc.alltoall_out(nc.node, mine.length, mine.glob - nc.block[0])
        for j, seg in enumerate(chunk.segments):
            if ace and seg.length and j != nc.node:
                nc.emit(StepType.LOAD, seg.length, dst=(Buffer.INPUT, chunk.base_in + seg.local),
                        mem=node.input_addr + seg.glob * esize, into=nc.loads)
        if mine.length and ace:
            nc.emit(StepType.LOAD, mine.length, dst=own, mem=node.input_addr + mine.glob * esize,
                    into=nc.loads)
        elif mine.length:
            nc.emit(StepType.CPY, mine.length, src=(Buffer.INPUT, mine.glob), dst=own,
                    into=nc.loads)


def store_chunk(nc: NodeChunk) -> None:
    """Store the chunk's results (ACE mode): the all-reduced slice, the node's reduced block,
    every gathered block, or the sub-block received from every node."""
    comp, chunk = nc.comp, nc.chunk
    if comp.mode != Mode.ACE:
        return
    out_addr, esize = comp.nodes[nc.node].output_addr, comp.esize
    mine = chunk.segments[nc.node] if comp.collective != Collective.ALLREDUCE else None

    def store(seg, src, offset):
        if seg.length:
            nc.emit(StepType.STORE, seg.length, src=src, mem=out_addr + offset * esize,
                    into=nc.stores)

    if comp.collective == Collective.ALLREDUCE:
        seg = chunk.segments[0]
        store(seg, (Buffer.OUTPUT, chunk.base_out + seg.local), seg.glob)
    elif comp.collective == Collective.REDUCE_SCATTER:
        store(mine, (Buffer.OUTPUT, chunk.base_out + mine.local), mine.glob - nc.block[0])
    elif comp.collective == Collective.ALLGATHER:
        for seg in chunk.segments:
            store(seg, (Buffer.OUTPUT, chunk.base_out + seg.local), seg.glob)
    elif mine.length:
        sub_off = mine.glob - nc.block[0]
        padded = pad(nc.block[1], comp.epw)
        for origin in range(comp.num_nodes):
            store(mine, nc.alltoall_out(origin, mine.length, sub_off), origin * padded + sub_off)
