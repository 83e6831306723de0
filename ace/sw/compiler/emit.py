"""One node's steps of one chunk: the operations the algorithms are written in.

An algorithm names *pieces* ``(chunk-local start, length)`` of the chunk and calls
:meth:`NodeChunk.s`, :meth:`~NodeChunk.r`, :meth:`~NodeChunk.rrc`, :meth:`~NodeChunk.rrs` and
:meth:`~NodeChunk.rcs` with the peer nodes, as MSCCL writes its steps. :class:`NodeChunk` turns
a piece into a buffer slice: in ``ace`` mode the chunk's SRAM slot (input ``i`` until the node
has written the piece, then its working copy in ``o``); in the baselines (``staged``, ``p2p``) the same place of
the node's buffers in main memory. It tracks which pieces the node has written, so that a send
reads the input before the first reduction and the partial result after it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ace.sw.program import Step, split_aligned
from ace.vocab import Buffer, Collective, Mode, StepType

from .chunks import Segment, nested_split, pad

__all__ = ["ChunkLayout", "NodeChunk", "Phase"]


@dataclass(frozen=True)
class ChunkLayout:
    """Lane ``lane`` of chunk ``index``: its segments, the element offsets of its chunk's input
    and output slot, and ``nest``, the (start, length) regions by hierarchical group member (an
    all-reduce chunk is split by the dimensions in phase order; otherwise one region per node's
    block). A chunk has one lane, or ``comp.lanes`` (the bidirectional ring's two): lane k holds
    the k-th word-aligned part of every segment, in the same slot."""
    index: int
    segments: list[Segment]
    base_in: int
    base_out: int
    nest: list[tuple[int, int]]
    merged: bool           # all-reduce: consecutive regions merge into one piece
    lane: int = 0

    @classmethod
    def of(cls, comp, c: int, lane: int = 0) -> "ChunkLayout":
        """Lane ``lane`` of chunk ``c`` of the compilation ``comp``
        (:class:`~.build.Compilation`)."""
        plan, epw = comp.plan, comp.epw
        segs = [_lane_part(seg, lane, comp.lanes, epw) for seg in plan.segments(c)]
        slot = c % plan.slots
        merged = comp.collective == Collective.ALLREDUCE
        if merged:
            nest = nested_split(segs[0].local, segs[0].length,
                                [comp.topology.dims[k] for k in comp.order], epw)
        else:
            nest = [(s.local, s.length) for s in segs]
        return cls(c, segs, slot * plan.slot_in * epw, slot * plan.slot_out * epw, nest, merged,
                   lane)

    def pieces(self, lo: int, hi: int) -> list[tuple[int, int]]:
        """Pieces covering regions [lo, hi): one per non-empty region, or one merged piece."""
        parts = self.nest[lo:hi]
        if self.merged:
            start, end = parts[0][0], parts[-1][0] + parts[-1][1]
            return [(start, end - start)] if end > start else []
        return [pc for pc in parts if pc[1] > 0]

    def segment_at(self, local: int) -> Segment:
        for seg in self.segments:
            if seg.length and seg.local <= local < seg.local + seg.length:
                return seg
        raise AssertionError(f"local offset {local} is in no segment")


def _lane_part(seg: Segment, lane: int, lanes: int, epw: int) -> Segment:
    """Part ``lane`` of ``lanes`` of a segment (word aligned, the first parts the larger)."""
    start, length = split_aligned(seg.length, lanes, epw)[lane]
    return Segment(seg.local + start, seg.glob + start, length, seg.block)


class NodeChunk:
    """Node ``node``'s steps of chunk ``chunk``: communication steps go to ``steps``, loads
    to ``loads`` and stores to ``stores`` (a mover channel's lists, or ``steps`` itself)."""

    def __init__(self, comp, chunk: ChunkLayout, node: int, steps: list, loads: list,
                 stores: list | None = None):
        self.comp, self.chunk, self.node = comp, chunk, node
        self.steps, self.loads = steps, loads
        self.stores = steps if stores is None else stores
        self.block = comp.blocks[node]
        self.written: list[tuple[int, int]] = []     # chunk-local [start, end) written

    # -- steps ------------------------------------------------------------------------------

    def emit(self, type_: StepType, count: int, *, src=None, dst=None, to=None, frm=None,
             mem=None, into: list | None = None) -> Step:
        """Append one step (to ``into``, default ``steps``), with the links to its peers."""
        comp, me = self.comp, self.node
        step = Step(type=type_, count=count, src=src, dst=dst, dtype=comp.dtype, op=comp.op,
                    mem_addr=mem)
        if to is not None:
            step.send_peer, step.send_link = to, comp.topology.send_link(me, to)
        if frm is not None:
            step.recv_peer, step.recv_link = frm, comp.topology.recv_link(me, frm)
        (self.steps if into is None else into).append(step)
        return step

    def s(self, pieces, to: int) -> None:
        """Send each piece to node ``to``."""
        for pc in pieces:
            self.emit(StepType.SEND, pc[1], src=self._src(pc), to=to)

    def r(self, pieces, frm: int) -> None:
        """Receive each piece from node ``frm``."""
        for pc in pieces:
            self.emit(StepType.RECV, pc[1], dst=self._dst(pc), frm=frm)

    def rrc(self, pieces, frm: int) -> None:
        """Receive each piece, reduce it with the local one and keep the result."""
        for pc in pieces:
            src = self._src(pc)
            self.emit(StepType.RRC, pc[1], src=src, dst=self._dst(pc), frm=frm)

    def rrs(self, pieces, frm: int, to: int) -> None:
        """Receive each piece, reduce it with the local one and send the result on."""
        for pc in pieces:
            self.emit(StepType.RRS, pc[1], src=self._src(pc), frm=frm, to=to)

    def rcs(self, pieces, frm: int, to: int) -> None:
        """Receive each piece, keep it and send it on."""
        for pc in pieces:
            self.emit(StepType.RCS, pc[1], dst=self._dst(pc), frm=frm, to=to)

    # -- where a piece lives ----------------------------------------------------------------

    def slice_of(self, kind: str, local: int) -> tuple[Buffer, int]:
        """The buffer slice of chunk-local ``local``: ``kind`` is ``in`` (the input), ``work``
        (the node's result so far) or ``fwd`` (an all-to-all block passing through)."""
        chunk = self.chunk
        if self.comp.mode == Mode.ACE:
            if kind == "work":
                return Buffer.OUTPUT, chunk.base_out + local
            return Buffer.INPUT, chunk.base_in + local
        seg = chunk.segment_at(local)
        glob = seg.glob + (local - seg.local)
        mine = self.block[0]
        coll = self.comp.collective
        if kind == "in":
            return Buffer.INPUT, glob - mine if coll == Collective.ALLGATHER else glob
        if kind == "fwd":
            return Buffer.SCRATCH, glob
        if coll == Collective.REDUCE_SCATTER and seg.block != self.node:
            return Buffer.SCRATCH, glob
        return Buffer.OUTPUT, glob - mine if coll == Collective.REDUCE_SCATTER else glob

    def alltoall_out(self, origin: int, sub_len: int, sub_off: int) -> tuple[Buffer, int]:
        """Where node ``origin``'s sub-block for this node lands (``sub_len`` elements at
        ``sub_off`` within the block)."""
        epw = self.comp.epw
        if self.comp.mode == Mode.ACE:
            return Buffer.OUTPUT, self.chunk.base_out + origin * pad(sub_len, epw)
        return Buffer.OUTPUT, origin * pad(self.block[1], epw) + sub_off

    def _is_written(self, start: int, length: int) -> bool:
        end = start + length
        for a, b in self.written:
            if a <= start and end <= b:
                return True
            if a < end and start < b:
                raise AssertionError(f"node {self.node}: slice [{start}, {end}) is partly "
                                     "written")
        return False

    def mark(self, start: int, length: int) -> None:
        """Record that the node has written [start, start + length) (merged intervals)."""
        lo, hi = start, start + length
        kept = []
        for a, b in self.written:
            if b < lo or hi < a:
                kept.append((a, b))
            else:
                lo, hi = min(lo, a), max(hi, b)
        self.written[:] = kept + [(lo, hi)]

    def _src(self, piece) -> tuple[Buffer, int]:
        return self.slice_of("work" if self._is_written(*piece) else "in", piece[0])

    def _dst(self, piece) -> tuple[Buffer, int]:
        self.mark(*piece)
        return self.slice_of("work", piece[0])


@dataclass(frozen=True)
class Phase:
    """One node's view of one phase over one topology dimension: ``group`` (the node ids by
    member index), ``me`` (this node's member index), ``parts[k]`` (the pieces member ``k``
    ends up owning after a reduce-scatter) and ``whole`` (the phase's region as pieces)."""
    group: list[int]
    me: int
    parts: list[list[tuple[int, int]]]
    whole: list[tuple[int, int]]

    @property
    def size(self) -> int:
        return len(self.group)

    def member(self, k: int) -> int:
        """The node id of member ``k`` (mod the group size)."""
        return self.group[k % len(self.group)]

    def part(self, k: int) -> list[tuple[int, int]]:
        """The pieces of member ``k`` (mod the group size)."""
        return self.parts[k % len(self.parts)]

    def reversed(self) -> "Phase":
        """The same phase with the members numbered the other way round (a ring over it runs
        in the opposite direction); every node keeps its parts."""
        return Phase(self.group[::-1], self.size - 1 - self.me, self.parts[::-1], self.whole)
