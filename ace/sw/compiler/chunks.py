"""Where the data goes: each node's block of the vector, its buffer sizes, and the chunks.

A collective of S elements is cut into chunks that fit one SRAM *slot* (the package docstring,
"chunking"). Chunk ``c`` maps to :class:`Segment`\\ s: one for an all-reduce (a word-aligned
slice of the vector), one per node's block otherwise (the chunk's share of every block, laid out
one after another in the slot). Every start is a multiple of one SRAM word (``epw`` elements).
"""

from __future__ import annotations

from dataclasses import dataclass

from ace.sw.program import Topology, split_aligned
from ace.vocab import Collective

from .errors import CompileError

__all__ = ["pad", "nested_split", "collective_blocks", "buffer_sizes", "Segment", "ChunkPlan"]


def pad(n: int, align: int) -> int:
    """``n`` rounded up to a multiple of ``align``."""
    return -(-n // align) * align


def nested_split(start: int, length: int, radices: list[int], align: int) -> list[tuple]:
    """Split [start, start+length) by ``radices`` (first most significant), word aligned."""
    if not radices:
        return [(start, length)]
    out = []
    for s, n in split_aligned(length, radices[0], align):
        out.extend(nested_split(start + s, n, radices[1:], align))
    return out


def collective_blocks(collective: str, count: int, topology: Topology, epw: int):
    """Node n's block ``(start, length)`` of the S-element vector (reduce-scatter output,
    all-gather input, all-to-all block): split by the last dimension first, then the others,
    every start a multiple of ``epw`` elements (one SRAM word)."""
    # Node id = x0 + d0*x1 + ...: the last dimension is the most significant digit.
    return nested_split(0, count, list(reversed(topology.dims)), epw)


def buffer_sizes(collective: str, count: int, blocks, node: int, epw: int) -> tuple[int, int]:
    """(input elements, output elements) of ``node``."""
    b = blocks[node][1]
    p = len(blocks)
    if collective == Collective.ALLREDUCE:
        return count, count
    if collective == Collective.REDUCE_SCATTER:
        return count, b
    if collective == Collective.ALLGATHER:
        return b, count
    return count, (p - 1) * pad(b, epw) + b


@dataclass(frozen=True)
class Segment:
    """A piece of a chunk: ``local`` start in the chunk's slot, ``glob`` start in the vector,
    ``length`` elements, and the ``block`` (node) it belongs to, or -1 (all-reduce)."""
    local: int
    glob: int
    length: int
    block: int


class ChunkPlan:
    """The chunks of one collective: how many (:attr:`count`), each chunk's segments
    (:meth:`segments`) and the words a chunk needs in an input and an output slot
    (:attr:`slot_in`, :attr:`slot_out`).

    Of the C channels, ``movers`` move data (0 or more, see :mod:`ace.sw.compiler`) and
    K = C - ``movers`` communicate. Each channel that communicates has two SRAM slots when
    there are movers (one fills while the other works), and the one channel of a
    single-channel configuration one: ``slots`` = 2K or 1. The count is the fewest chunks
    that fit a slot, at least ``slots`` when the data allows one word per node per chunk, or
    ``requested``. *Taper*: with at least 4K chunks, the first and the last chunk of every
    communicating channel are half-size, so that the pipeline fills and drains sooner.
    """

    def __init__(self, collective: str, count: int, blocks, epw: int, config,
                 requested: int | None, movers: int = 1):
        self.collective, self.total, self.blocks, self.epw = collective, count, blocks, epw
        self.communicating = max(1, config.num_channels - movers)
        self.slots = 2 * self.communicating if movers else 1
        self.count = self._choose(config.input_buffer_words // self.slots,
                                  config.output_buffer_words // self.slots, requested)
        self.slot_in, self.slot_out = self._slot_need(self.count)

    def segments(self, c: int) -> list[Segment]:
        """Chunk ``c``'s segments (chunk-local layout, word-aligned)."""
        return self._segments(self.count, c)

    def _weights(self, n: int) -> list[int] | None:
        """Relative chunk sizes when split into ``n`` (the taper), or None for equal sizes."""
        k = self.communicating
        if n < 4 * k:
            return None
        return [1 if c < k or c >= n - k else 2 for c in range(n)]

    def _segments(self, n: int, c: int) -> list[Segment]:
        weights, epw = self._weights(n), self.epw
        if self.collective == Collective.ALLREDUCE:
            start, length = split_aligned(self.total, n, epw, weights)[c]
            return [Segment(0, start, length, -1)]
        segs, local = [], 0
        for j, (bstart, blen) in enumerate(self.blocks):
            s, length = split_aligned(blen, n, epw, weights)[c]
            segs.append(Segment(local, bstart + s, length, j))
            local += pad(length, epw)
        return segs

    def _slot_need(self, n: int) -> tuple[int, int]:
        """Max (input slot, output slot) words over the chunks when split into ``n``. An
        all-to-all's output slot holds a sub-block from every node."""
        need_in = need_out = 0
        epw = self.epw
        for c in range(n):
            total = sum(pad(s.length, epw) for s in self._segments(n, c)) // epw
            out = total
            if self.collective == Collective.ALLTOALL:
                subs = [split_aligned(blen, n, epw, self._weights(n))[c][1]
                        for _, blen in self.blocks]
                out = max(len(self.blocks) * pad(sub, epw) // epw for sub in subs)
            need_in, need_out = max(need_in, total), max(need_out, out)
        return need_in, need_out

    def _choose(self, cap_in: int, cap_out: int, requested: int | None) -> int:
        words = -(-self.total // self.epw)
        n = max(1, -(-words // max(1, min(cap_in, cap_out))))
        while True:
            need_in, need_out = self._slot_need(n)
            if need_in <= cap_in and need_out <= cap_out:
                break
            n += 1
            if n > max(words, 1) * 2 + 8:
                raise CompileError(f"cannot split {self.total} elements into chunks that fit "
                                   f"{cap_in}/{cap_out} SRAM words per channel slot")
        if requested is None:
            return max(n, min(self.slots, max(1, words // len(self.blocks))))
        if requested < n:
            raise CompileError(f"chunks: {requested} chunks do not fit the SRAM ({cap_in} "
                               f"input / {cap_out} output words per channel slot); at least "
                               f"{n} are needed")
        return requested
