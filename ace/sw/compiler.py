"""The collective compiler: collectives x algorithms x topologies -> :class:`CollectiveProgram`.

Collectives (``count`` = S elements, the vector length; ``blocks[j]`` = node j's block, a
nested word-aligned split of S, see :func:`collective_blocks`):

================  ==================  =========================================================
collective        input / output      result
================  ==================  =========================================================
allreduce         S / S               out_n = reduce over nodes of in
reduce_scatter    S / len(block n)    out_n = (reduce over nodes of in)[block n]
allgather         len(block n) / S    out_n[block j] = in_j
alltoall          S / (p-1)*P + b_n   out_n[i*P : i*P + b_n] = in_i[block n], P = b_n rounded
                                      up to whole SRAM words (1-D topologies only)
================  ==================  =========================================================

Algorithms per topology dimension: ``ring``, ``direct`` (all pairs), ``halving_doubling``
(recursive halving / doubling; power-of-two group sizes only, else :class:`CompileError`) and
``double_binary_tree`` (all-reduce phases only: a single-dimension all-reduce or the last
dimension of a hierarchical all-reduce; elsewhere :class:`CompileError`). Multi-dimensional
collectives compose ASTRA-sim style: all-reduce = reduce-scatter on dims 0..k-2, all-reduce on
dim k-1, all-gather on dims k-2..0; reduce-scatter runs its phases from the last dimension to
the first and all-gather from the first to the last, so that node n ends with block n.

Chunking: the collective is split into chunks that fit one SRAM slot; every communication step of
chunk c runs on one channel, through all phases, so several chunks are in flight. Modes: ``ace``
(buffers in SRAM, inputs loaded once, results stored once) and ``baseline`` (the same steps with
buffers in main memory).

In ``ace`` mode with two or more channels, channel 0 is the *loader*: it runs every ``load``,
and channels 1..C-1 communicate (chunk c on channel ``1 + c % (C-1)``) and store their own
results. Each communicating channel has two SRAM slots, so the loader fills a channel's next
chunk while the channel still works on the current one, and loads overlap the network traffic
instead of stalling it (one DMA stream moves at most one beat per cycle, so a single channel
doing both loads and stores would be slower than the link). The hand-offs are ``nop`` steps
with a dependency: a channel's first step of chunk c waits for the loader's last load of c, and
the loader's loads of chunk c+L (L = 2(C-1) slots; c+L reuses c's slot) wait for the last step
(the last store) of chunk c. *Stagger*: communicating channel k > 1 starts its first chunk
once channel 1 has run ``STAGGER x (k-1)/(C-2)`` of chunk 0's communication steps, so that the
channels do not run (and then store) in lockstep. With one channel (or in baseline mode) chunk
c runs wholly on channel ``c % C``. Both modes plan the same chunks, so they send the same messages.
"""

from __future__ import annotations

from dataclasses import dataclass


from ace.config import NAMED_CONFIGS
from ace.layouts import DTYPE_BYTES, ReduceOp
from ace.sw.program import (Channel, CollectiveProgram, NodeProgram, ProgramError, Step, Topology,
                      assemble, dtype_from_name, link_traffic, memory_traffic, op_from_name,
                      split_aligned)
from ace.vocab import (ALGORITHM_ALIASES, COLLECTIVE_ALIASES, Algorithm, Collective,
                       parse_algorithm, parse_collective)

# Fraction of chunk 0's communication steps that communicating channel 1 runs before the next
# channel starts (module docstring, "stagger").
STAGGER = 0.75

__all__ = ["CompileError", "COLLECTIVES", "ALGORITHMS", "compile_collective",
           "collective_blocks", "buffer_sizes", "memory_traffic", "link_traffic",
           "expected_ace_traffic", "max_message_bytes"]


class CompileError(ProgramError):
    """A collective/algorithm/topology combination that cannot be compiled, with the reason."""


COLLECTIVES = tuple(Collective)
ALGORITHMS = tuple(Algorithm)
# The alias tables live in ace.vocab; these names are kept for older imports.
_COLL_ALIASES = COLLECTIVE_ALIASES
_ALG_ALIASES = ALGORITHM_ALIASES


def _norm_collective(name: str) -> Collective:
    return parse_collective(name, CompileError)


def _norm_algorithm(name: str) -> Algorithm:
    return parse_algorithm(name, CompileError)


def _nested_split(start: int, length: int, radices: list[int], align: int) -> list[tuple]:
    """Split [start, start+length) by ``radices`` (first most significant), word aligned."""
    if not radices:
        return [(start, length)]
    out = []
    for s, n in split_aligned(length, radices[0], align):
        out.extend(_nested_split(start + s, n, radices[1:], align))
    return out


def _pad(n: int, align: int) -> int:
    return -(-n // align) * align


def collective_blocks(collective: str, count: int, topology: Topology, epw: int):
    """Node n's block ``(start, length)`` of the S-element vector (reduce-scatter output,
    all-gather input, all-to-all block): split by the last dimension first, then the others,
    every start a multiple of ``epw`` elements (one SRAM word)."""
    dims = [d for d in topology.dims]
    # Node id = x0 + d0*x1 + ...: the last dimension is the most significant digit.
    return _nested_split(0, count, list(reversed(dims)), epw)


def buffer_sizes(collective: str, count: int, blocks, node: int, epw: int) -> tuple[int, int]:
    """(input elements, output elements) of ``node``."""
    b = blocks[node][1]
    p = len(blocks)
    if collective == "allreduce":
        return count, count
    if collective == "reduce_scatter":
        return count, b
    if collective == "allgather":
        return b, count
    return count, (p - 1) * _pad(b, epw) + b


# -- per-chunk emission -------------------------------------------------------------------------

@dataclass
class _Seg:
    local: int      # chunk-local start
    glob: int       # global start in the S-element vector
    length: int
    block: int      # owning block (node) or -1


class _Compiler:
    def __init__(self, collective, count, topology, algorithms, dtype, op, mode, config,
                 chunks, addrs):
        self.coll = collective
        self.S = count
        self.topo = topology
        self.p = topology.num_nodes
        self.algs = algorithms
        self.dtype = dtype
        self.op = op
        self.mode = mode
        self.config = config
        self.esize = DTYPE_BYTES[dtype]
        self.epw = config.link_bytes // self.esize
        self.C = config.num_channels
        self.requested_chunks = chunks
        self.addrs = addrs
        self.dims = [k for k, d in enumerate(topology.dims) if d > 1]
        self.blocks = collective_blocks(collective, count, topology, self.epw)
        # The loader (module docstring): channel 0 loads, 2 slots per other channel.
        self.mover = mode == "ace" and self.C >= 2
        self.comm = self.C - 1 if self.mover else self.C
        # Both modes plan the same chunks (so they send the same messages).
        self.slots = 2 * (self.C - 1) if self.C >= 2 else 1
        self._sink = None          # when set: per-node step lists the mover's steps go to
        self.dep_targets = {}      # id(nop) -> (channel, Step it waits for)

    # -- chunk planning -----------------------------------------------------------------------

    def _chunk_weights(self, n: int) -> list[int] | None:
        """Relative chunk sizes (module docstring, "taper"): the first and the last chunk of
        every communicating channel are half-size when there are enough chunks. Both modes
        taper alike (they plan the same chunks)."""
        k = max(1, self.C - 1)
        if n < 4 * k:
            return None
        return [1 if c < k or c >= n - k else 2 for c in range(n)]

    def _chunk_segments(self, n: int, c: int) -> list[_Seg]:
        """Mapping segments of chunk ``c`` of ``n`` (chunk-local layout, word-aligned)."""
        weights = self._chunk_weights(n)
        if self.coll == "allreduce":
            start, length = split_aligned(self.S, n, self.epw, weights)[c]
            return [_Seg(0, start, length, -1)]
        segs, local = [], 0
        for j, (bstart, blen) in enumerate(self.blocks):
            s, length = split_aligned(blen, n, self.epw, weights)[c]
            segs.append(_Seg(local, bstart + s, length, j))
            local += _pad(length, self.epw)
        return segs

    def _slot_need(self, n: int) -> tuple[int, int]:
        """Max (input slot, output slot) words over the chunks when split into ``n``."""
        need_in = need_out = 0
        for c in range(n):
            segs = self._chunk_segments(n, c)
            total = sum(_pad(s.length, self.epw) for s in segs) // self.epw
            if self.coll == "alltoall":
                out = 0
                for me in range(self.p):
                    sub = split_aligned(self.blocks[me][1], n, self.epw,
                                        self._chunk_weights(n))[c][1]
                    out = max(out, self.p * _pad(sub, self.epw) // self.epw)
                need_in, need_out = max(need_in, total), max(need_out, out)
            else:
                need_in, need_out = max(need_in, total), max(need_out, total)
        return need_in, need_out

    def plan_chunks(self) -> int:
        cfg = self.config
        cap_in = cfg.input_buffer_words // self.slots
        cap_out = cfg.output_buffer_words // self.slots
        words = -(-self.S // self.epw)
        n = max(1, -(-words // max(1, min(cap_in, cap_out))))
        while True:
            need_in, need_out = self._slot_need(n)
            if need_in <= cap_in and need_out <= cap_out:
                break
            n += 1
            if n > max(words, 1) * 2 + 8:
                raise CompileError(f"cannot split {self.S} elements into chunks that fit "
                                   f"{cap_in}/{cap_out} SRAM words per channel slot")
        needed = n
        if self.requested_chunks is not None:
            if self.requested_chunks < needed:
                raise CompileError(f"chunks: {self.requested_chunks} chunks do not fit the SRAM"
                                   f" ({cap_in} input / {cap_out} output words per channel "
                                   f"slot); at least {needed} are needed")
            n = self.requested_chunks
        else:
            n = max(needed, min(self.slots, max(1, words // self.p)))
        self.slot_in, self.slot_out = self._slot_need(n)
        return n

    # -- helpers ------------------------------------------------------------------------------

    def _step(self, type_, count, *, src=None, dst=None, to=None, frm=None, mem=None):
        step = Step(type=type_, count=count, src=src, dst=dst, dtype=self.dtype, op=self.op,
                    mem_addr=mem)
        me = self._node
        if to is not None:
            step.send_peer, step.send_link = to, self.topo.send_link(me, to)
        if frm is not None:
            step.recv_peer, step.recv_link = frm, self.topo.recv_link(me, frm)
        (self._sink[me] if self._sink is not None else self.out[me][self._chan]).append(step)
        return step

    def _wait(self, steps: list[Step], channel: int, target: Step | None) -> None:
        """Append a ``nop`` that waits until ``channel`` has run ``target`` (nothing if None)."""
        if target is not None:
            nop = Step(type="nop", dtype=self.dtype, op=self.op)
            self.dep_targets[id(nop)] = (channel, target)
            steps.append(nop)

    def _seg_of(self, local: int) -> _Seg:
        for seg in self.segs:
            if seg.length and seg.local <= local < seg.local + seg.length:
                return seg
        raise AssertionError(f"local offset {local} is in no segment")

    def _phys(self, n: int, kind: str, local: int) -> tuple[str, int]:
        if self.mode == "ace":
            if kind == "work":
                return "o", self.base_out + local
            return "i", self.base_in + local          # "in" and "fwd" (a2a forwarding)
        seg = self._seg_of(local)
        glob = seg.glob + (local - seg.local)
        mine = self.blocks[n][0]
        if kind == "in":
            return ("i", glob - mine) if self.coll == "allgather" else ("i", glob)
        if kind == "fwd":
            return "s", glob
        if self.coll == "reduce_scatter":
            return ("o", glob - mine) if seg.block == n else ("s", glob)
        return "o", glob

    def _written(self, n, start, length) -> bool:
        end = start + length
        for a, b in self.written[n]:
            if a <= start and end <= b:
                return True
            if a < end and start < b:
                raise AssertionError(f"node {n}: slice [{start}, {end}) is partly written")
        return False

    def _mark(self, n, start, length):
        merged = []
        lo, hi = start, start + length
        for a, b in self.written[n]:
            if b < lo or hi < a:
                merged.append((a, b))
            else:
                lo, hi = min(lo, a), max(hi, b)
        merged.append((lo, hi))
        self.written[n] = merged

    def _src(self, n, piece):
        kind = "work" if self._written(n, *piece) else "in"
        return self._phys(n, kind, piece[0])

    def _dst(self, n, piece):
        self._mark(n, *piece)
        return self._phys(n, "work", piece[0])

    # Ops on lists of pieces, for node ``self._node``.
    def op_s(self, pieces, to):
        for pc in pieces:
            self._step("s", pc[1], src=self._src(self._node, pc), to=to)

    def op_r(self, pieces, frm):
        for pc in pieces:
            self._step("r", pc[1], dst=self._dst(self._node, pc), frm=frm)

    def op_rrc(self, pieces, frm):
        for pc in pieces:
            src = self._src(self._node, pc)
            self._step("rrc", pc[1], src=src, dst=self._dst(self._node, pc), frm=frm)

    def op_rrs(self, pieces, frm, to):
        for pc in pieces:
            self._step("rrs", pc[1], src=self._src(self._node, pc), frm=frm, to=to)

    def op_rcs(self, pieces, frm, to):
        for pc in pieces:
            self._step("rcs", pc[1], dst=self._dst(self._node, pc), frm=frm, to=to)

    # -- phase structure ----------------------------------------------------------------------

    def _pieces(self, seg_lo: int, seg_hi: int) -> list[tuple[int, int]]:
        """Chunk-local pieces covering segments [seg_lo, seg_hi): one per non-empty segment, or
        one merged piece when the mapping is contiguous (all-reduce)."""
        parts = self.nest[seg_lo:seg_hi]
        if self.coll == "allreduce":
            start = parts[0][0]
            end = parts[-1][0] + parts[-1][1]
            return [(start, end - start)] if end > start else []
        return [pc for pc in parts if pc[1] > 0]

    def _group_parts(self, n: int, q: int):
        """(group nodes by member index, member index of n, per-member (lo, hi) segment ranges)
        for phase position q in ``self.order``."""
        dim = self.order[q]
        coords = self.topo.coords(n)
        radices = [self.topo.dims[k] for k in self.order]
        prefix = 0
        for k in self.order[:q]:
            prefix = prefix * self.topo.dims[k] + coords[k]
        below = 1
        for r in radices[q + 1:]:
            below *= r
        d = self.topo.dims[dim]
        ranges = [((prefix * d + m) * below, (prefix * d + m + 1) * below) for m in range(d)]
        return self.topo.group(n, dim), coords[dim], ranges

    def phase(self, kind: str, q: int):
        alg = self.algs[self.order[q]]
        if alg == "double_binary_tree" and kind != "ar":
            raise CompileError(
                f"double_binary_tree runs only all-reduce phases; dimension {self.order[q]} "
                f"runs {'a reduce-scatter' if kind == 'rs' else 'an all-gather'} phase "
                f"(collective {self.coll}); use ring, direct or halving_doubling there")
        if alg == "halving_doubling":
            g = self.topo.dims[self.order[q]]
            if g & (g - 1):
                raise CompileError(f"halving_doubling needs a power-of-two group size; "
                                   f"dimension {self.order[q]} has {g} nodes (use ring or "
                                   "direct)")
        if kind == "ar" and alg == "double_binary_tree":
            for n in range(self.p):
                self._node = n
                group, m, ranges = self._group_parts(n, q)
                self._dbt(group, m, self._pieces(ranges[0][0], ranges[-1][1]))
            return
        for n in range(self.p):
            self._node = n
            group, m, ranges = self._group_parts(n, q)
            parts = [self._pieces(lo, hi) for lo, hi in ranges]
            if kind in ("rs", "ar"):
                getattr(self, f"_rs_{alg}")(group, m, parts)
            if kind in ("ag", "ar"):
                getattr(self, f"_ag_{alg}")(group, m, parts)

    # -- algorithms (emit node ``self._node``'s steps; member m of ``group``) ------------------

    def _rs_ring(self, group, m, parts):
        g = len(group)
        nxt, prv = group[(m + 1) % g], group[(m - 1) % g]
        self.op_s(parts[(m - 1) % g], nxt)
        for t in range(1, g - 1):
            self.op_rrs(parts[(m - 1 - t) % g], prv, nxt)
        self.op_rrc(parts[m], prv)

    def _ag_ring(self, group, m, parts):
        g = len(group)
        nxt, prv = group[(m + 1) % g], group[(m - 1) % g]
        self.op_s(parts[m], nxt)
        for t in range(1, g - 1):
            self.op_rcs(parts[(m - t) % g], prv, nxt)
        self.op_r(parts[(m + 1) % g], prv)

    def _rs_direct(self, group, m, parts):
        g = len(group)
        for r in range(1, g):
            self.op_s(parts[(m + r) % g], group[(m + r) % g])
            self.op_rrc(parts[m], group[(m - r) % g])

    def _ag_direct(self, group, m, parts):
        g = len(group)
        for r in range(1, g):
            self.op_s(parts[m], group[(m + r) % g])
            self.op_r(parts[(m - r) % g], group[(m - r) % g])

    def _rs_halving_doubling(self, group, m, parts):
        lo, hi = 0, len(group)
        while hi - lo > 1:
            half = (hi - lo) // 2
            mid = lo + half
            if m < mid:
                keep, give, partner = (lo, mid), (mid, hi), m + half
            else:
                keep, give, partner = (mid, hi), (lo, mid), m - half
            self.op_s([pc for k in range(*give) for pc in parts[k]], group[partner])
            self.op_rrc([pc for k in range(*keep) for pc in parts[k]], group[partner])
            lo, hi = keep

    def _ag_halving_doubling(self, group, m, parts):
        d = 1
        while d < len(group):
            partner = m ^ d
            mine = m - m % d
            theirs = partner - partner % d
            self.op_s([pc for k in range(mine, mine + d) for pc in parts[k]], group[partner])
            self.op_r([pc for k in range(theirs, theirs + d) for pc in parts[k]],
                      group[partner])
            d *= 2

    def _dbt(self, group, m, pieces):
        """Double binary tree all-reduce of ``pieces`` (one contiguous region): two in-order
        balanced binary trees, the second over members shifted by one, each reducing up and
        broadcasting down half of the region. Order on every node: reduce in tree A, reduce in
        tree B, broadcast in tree A, broadcast in tree B."""
        g = len(group)
        halves = [[], []]
        for start, length in pieces:
            for h, (s, n) in enumerate(split_aligned(length, 2, self.epw)):
                if n:
                    halves[h].append((start + s, n))
        trees = []
        for shift in (0, 1):
            parent = [None] * g
            children = [[] for _ in range(g)]

            def build(lo, hi, up):
                if lo >= hi:
                    return
                mid = (lo + hi) // 2
                node = (mid + shift) % g
                parent[node] = up
                if up is not None:
                    children[up].append(node)
                build(lo, mid, node)
                build(mid + 1, hi, node)
            build(0, g, None)
            trees.append((parent, children))
        for h, (parent, children) in enumerate(trees):           # reduce up
            up, kids = parent[m], children[m]
            if not kids:
                self.op_s(halves[h], group[up])
                continue
            for k, child in enumerate(kids):
                last = k == len(kids) - 1
                if last and up is not None:
                    self.op_rrs(halves[h], group[child], group[up])
                else:
                    self.op_rrc(halves[h], group[child])
        for h, (parent, children) in enumerate(trees):           # broadcast down
            up, kids = parent[m], children[m]
            if up is None:
                for child in kids:
                    self.op_s(halves[h], group[child])
            elif not kids:
                self.op_r(halves[h], group[up])
            else:
                self.op_rcs(halves[h], group[up], group[kids[0]])
                for child in kids[1:]:
                    self.op_s(halves[h], group[child])

    # -- all-to-all -----------------------------------------------------------------------------

    def _a2a_out(self, n, origin, sub_len, local_in_block_global):
        if self.mode == "ace":
            return "o", self.base_out + origin * _pad(sub_len, self.epw)
        b = self.blocks[n][1]
        return "o", origin * _pad(b, self.epw) + local_in_block_global

    def _alltoall(self, chunk_c, n_chunks, alg):
        p = self.p
        for n in range(p):
            self._node = n
            segs = self.segs
            sub_off = segs[n].glob - self.blocks[n][0]     # my block's sub-chunk offset
            sub_len = segs[n].length

            def outp(origin):
                return self._a2a_out(n, origin, sub_len, sub_off)

            def inp(j):
                return self._phys(n, "in", segs[j].local)

            if alg == "direct":
                for r in range(1, p):
                    d, o = (n + r) % p, (n - r) % p
                    if segs[d].length:
                        self._step("s", segs[d].length, src=inp(d), to=d)
                    if sub_len:
                        self._step("r", sub_len, dst=outp(o), frm=o)
            else:
                # Waves of distance D = 1 .. p-1: every node sends its block for n+D, forwards
                # the D-1 blocks that pass through it (each send but the wave's first carries
                # what the step received, so no burst of sends fills a receive buffer), and
                # keeps the block from n-D. A forwarded block lands on the input slice of a
                # destination nearer than D, whose own block has already left.
                nxt, prv = (n + 1) % p, (n - 1) % p
                for D in range(1, p):
                    d = (n + D) % p
                    if segs[d].length:
                        self._step("s", segs[d].length, src=inp(d), to=nxt)
                    for h in range(1, D):
                        dest = (n - h + D) % p
                        if segs[dest].length:
                            self._step("rcs", segs[dest].length,
                                       dst=self._phys(n, "fwd", segs[dest].local), frm=prv,
                                       to=nxt)
                    if sub_len:
                        self._step("r", sub_len, dst=outp((n - D) % p), frm=prv)

    # -- driver -------------------------------------------------------------------------------

    def build(self) -> CollectiveProgram:
        coll, p = self.coll, self.p
        if p < 2:
            raise CompileError(f"a collective needs at least 2 nodes; topology {self.topo} "
                               f"has {p}")
        if coll == "alltoall":
            if len(self.dims) != 1:
                raise CompileError("alltoall is compiled for one-dimensional topologies only "
                                   f"(got {self.topo}); use a ring, fully_connected:p or "
                                   "switch:p topology")
            alg = self.algs[self.dims[0]]
            if alg not in ("direct", "ring"):
                raise CompileError(f"alltoall supports the direct and ring algorithms; "
                                   f"{alg} is not implemented for it")
        n_chunks = self.plan_chunks()
        epw, esize = self.epw, self.esize

        # Phase order: dims in the order the reduce-scatter phases visit them.
        if coll == "allreduce":
            self.order = list(self.dims)
        else:
            self.order = list(reversed(self.dims))

        self.out = [[[] for _ in range(self.C)] for _ in range(p)]
        nodes = []
        for n in range(p):
            in_elems, out_elems = buffer_sizes(coll, self.S, self.blocks, n, epw)
            scratch = self.S if (self.mode == "baseline" and (
                coll == "reduce_scatter" or (coll == "alltoall" and self.algs[self.dims[0]]
                                             == "ring"))) else 0
            ia = self.addrs[0]
            oa = self.addrs[1] if self.addrs[1] is not None else _align(ia + in_elems * esize)
            sa = self.addrs[2] if self.addrs[2] is not None else _align(oa + out_elems * esize)
            nodes.append(NodeProgram(node=n, placement="sram" if self.mode == "ace" else
                                     "memory", input_addr=ia, output_addr=oa, scratch_addr=sa,
                                     in_elems=in_elems, out_elems=out_elems,
                                     scratch_elems=scratch))
        self.nodes = nodes

        first_comm = [[] for _ in range(p)]     # chunk 0's communication steps, per node
        loads = [[[] for _ in range(p)] for _ in range(n_chunks)]     # the loader's, per chunk
        chunk_end = [[None] * p for _ in range(n_chunks)]            # last step of each chunk
        for c in range(n_chunks):
            self._chan = 1 + c % self.comm if self.mover else c % self.C
            slot = c % self.slots
            self.segs = self._chunk_segments(n_chunks, c)
            self.base_in = slot * self.slot_in * epw
            self.base_out = slot * self.slot_out * epw
            self.written = [[] for _ in range(p)]
            if coll == "allreduce":
                length = self.segs[0].length
                self.nest = _nested_split(0, length, [self.topo.dims[k] for k in self.order],
                                          epw)
            else:
                self.nest = [(s.local, s.length) for s in self.segs]
            if self.mover:
                self._sink = loads[c]
                self._memory_in(c)
                self._sink = None
                for n in range(p):
                    self._wait(self.out[n][self._chan], 0,
                               loads[c][n][-1] if loads[c][n] else None)
                    if 0 < c < self.comm and first_comm[n]:
                        # Stagger (module docstring): start this channel part-way through
                        # chunk 0, so that the channels' stores do not coincide.
                        k = -(-len(first_comm[n]) * c * STAGGER // (self.comm - 1)) - 1
                        self._wait(self.out[n][self._chan], 1, first_comm[n][int(k)])
            else:
                self._memory_in(c)
            marks = [len(self.out[n][self._chan]) for n in range(p)]
            if coll == "alltoall":
                self._alltoall(c, n_chunks, self.algs[self.dims[0]])
            else:
                last = len(self.order) - 1
                if coll == "allreduce":
                    for q in range(last):
                        self.phase("rs", q)
                    self.phase("ar", last)
                    for q in range(last - 1, -1, -1):
                        self.phase("ag", q)
                elif coll == "reduce_scatter":
                    for q in range(last + 1):
                        self.phase("rs", q)
                else:
                    for q in range(last, -1, -1):
                        self.phase("ag", q)
            if c == 0:
                first_comm = [self.out[n][self._chan][marks[n]:] for n in range(p)]
            self._memory_out(c)
            for n in range(p):
                steps = self.out[n][self._chan]
                chunk_end[c][n] = (self._chan, steps[-1] if steps else None)
        if self.mover:
            # The loader: chunks 0..L-1 at once, then chunk c+L once chunk c left its slot.
            L = self.slots
            for n in range(p):
                loader = self.out[n][0]
                for c in range(n_chunks):
                    if c >= L:
                        self._wait(loader, *chunk_end[c - L][n])
                    loader += loads[c][n]

        per_node = [[_fuse([s for s in self.out[n][c] if s.type == "nop" or s.count > 0])
                     for c in range(self.C)] for n in range(p)]
        self._resolve_deps(per_node)
        # The NIC delivers channel c's packets to channel c: keep channel indices, and give
        # every node the same number of channels (up to the highest one used anywhere).
        width = max([c + 1 for lists in per_node for c, st in enumerate(lists) if st] or [0])
        for n, node in enumerate(nodes):
            for c in range(width):
                steps = per_node[n][c]
                ch = Channel(steps=steps)
                for side in ("send", "recv"):
                    peers = {(getattr(s, f"{side}_peer"), getattr(s, f"{side}_link"))
                             for s in steps if side in s.uses}
                    if len(peers) == 1:
                        peer, link = peers.pop()
                        setattr(ch, f"{side}_peer", peer)
                        setattr(ch, f"{side}_link", link)
                node.channels.append(ch)
        alg_name = "+".join(self.algs[k] for k in self.dims) if len(self.dims) > 1 \
            else self.algs[self.dims[0]]
        blocks = None if coll == "allreduce" else list(self.blocks)
        return CollectiveProgram(collective=coll, algorithm=alg_name, dtype=self.dtype,
                                 op=self.op, count=self.S, nodes=nodes, topology=self.topo,
                                 mode=self.mode, chunks=n_chunks, blocks=blocks)

    def _resolve_deps(self, per_node) -> None:
        """Turn the hand-off nops' target steps into ``dep = (channel, index)`` now that empty
        steps are dropped and pairs fused: a target that is gone stands for the last step kept
        before it (or for nothing, and the nop needs no dependency)."""
        if not self.dep_targets:
            return
        for n in range(self.p):
            index = {}
            for c in range(self.C):
                kept = {id(st): k for k, st in enumerate(per_node[n][c])}
                last = None
                for st in self.out[n][c]:
                    if id(st) in kept:
                        last = kept[id(st)]
                    index[id(st)] = (c, last)
            for c in range(self.C):
                for st in per_node[n][c]:
                    if id(st) in self.dep_targets:
                        channel, target = self.dep_targets[id(st)]
                        _, k = index[id(target)]
                        st.dep = None if k is None else (channel, k)

    def _memory_in(self, c):
        """Load steps (ace) or the initial local copy (baseline) of chunk c."""
        esize = self.esize
        for n, node in enumerate(self.nodes):
            self._node = n
            mine = self.blocks[n]
            if self.coll in ("allreduce", "reduce_scatter"):
                if self.mode == "ace":
                    for seg in self.segs:
                        if seg.length:
                            self._step("load", seg.length, dst=("i", self.base_in + seg.local),
                                       mem=node.input_addr + seg.glob * esize)
            elif self.coll == "allgather":
                seg = self.segs[n]
                if seg.length:
                    if self.mode == "ace":
                        self._step("load", seg.length, dst=("o", self.base_out + seg.local),
                                   mem=node.input_addr + (seg.glob - mine[0]) * esize)
                    else:
                        self._step("cpy", seg.length, src=("i", seg.glob - mine[0]),
                                   dst=("o", seg.glob))
                self._mark(n, seg.local, seg.length)
            else:  # alltoall: own block straight to the output position
                seg = self.segs[n]
                sub_off = seg.glob - mine[0]
                dst = self._a2a_out(n, n, seg.length, sub_off)
                if self.mode == "ace":
                    for j, other in enumerate(self.segs):
                        if other.length and j != n:
                            self._step("load", other.length,
                                       dst=("i", self.base_in + other.local),
                                       mem=node.input_addr + other.glob * esize)
                    if seg.length:
                        self._step("load", seg.length, dst=dst,
                                   mem=node.input_addr + seg.glob * esize)
                elif seg.length:
                    self._step("cpy", seg.length, src=("i", seg.glob), dst=dst)

    def _memory_out(self, c):
        if self.mode != "ace":
            return
        esize = self.esize
        for n, node in enumerate(self.nodes):
            self._node = n
            mine = self.blocks[n]
            if self.coll == "allreduce":
                seg = self.segs[0]
                if seg.length:
                    self._step("store", seg.length, src=("o", self.base_out),
                               mem=node.output_addr + seg.glob * esize)
            elif self.coll == "reduce_scatter":
                seg = self.segs[n]
                if seg.length:
                    self._step("store", seg.length, src=("o", self.base_out + seg.local),
                               mem=node.output_addr + (seg.glob - mine[0]) * esize)
            elif self.coll == "allgather":
                for seg in self.segs:
                    if seg.length:
                        self._step("store", seg.length, src=("o", self.base_out + seg.local),
                                   mem=node.output_addr + seg.glob * esize)
            else:
                seg = self.segs[n]
                if seg.length:
                    sub_off = seg.glob - mine[0]
                    padded = _pad(mine[1], self.epw)
                    for origin in range(self.p):
                        src = self._a2a_out(n, origin, seg.length, sub_off)
                        self._step("store", seg.length, src=src,
                                   mem=node.output_addr + (origin * padded + sub_off) * esize)


def _align(addr: int, to: int = 4096) -> int:
    return -(-addr // to) * to


def _fuse(steps: list[Step]) -> list[Step]:
    """Peephole: ``rrc X; s X`` -> ``rrcs X`` and ``r X; s X`` -> ``rcs X`` (same slice)."""
    out: list[Step] = []
    for step in steps:
        prev = out[-1] if out else None
        if (prev is not None and step.type == "s" and prev.type in ("rrc", "r")
                and prev.dst == step.src and prev.count == step.count and step.dep is None
                and prev.dtype == step.dtype):
            prev.type = "rrcs" if prev.type == "rrc" else "rcs"
            prev.send_peer, prev.send_link = step.send_peer, step.send_link
            continue
        out.append(step)
    return out


def compile_collective(collective: str, count: int, *, topology: Topology | str | None = None,
                       nodes: int | None = None, algorithm="ring", dtype="int32", op="sum",
                       mode: str = "ace", config=None, chunks: int | None = None,
                       input_addr: int = 0, output_addr: int | None = None,
                       scratch_addr: int | None = None, check: bool = True
                       ) -> CollectiveProgram:
    """Compile a collective into per-node programs.

    Parameters
    ----------
    collective : allreduce, reduce_scatter, allgather or alltoall (aliases accepted).
    count : the vector length S in elements (see the module docstring per collective).
    topology : a :class:`Topology` or its text (``ring:8``, ``torus:4x2``, ``switch:8``...);
        default ``ring:nodes`` for the ring algorithm and ``switch:nodes`` otherwise.
    algorithm : one name for every dimension, or a sequence with one per topology dimension.
    mode : ``ace`` (SRAM placement, load once / store once) or ``baseline`` (memory placement).
    config : the :class:`~ace.config.AceConfig` (SRAM sizes, channels, word size); default
        ``NAMED_CONFIGS["default"]``.
    chunks : number of chunks; default: as few as fit the SRAM, but at least
        ``num_channels`` when the data allows one word per node per chunk.
    input_addr, output_addr, scratch_addr : memory byte addresses (same on every node);
        output and scratch default to the next 4 KiB boundary after the previous buffer.
    check : also run :func:`ace.sw.program.assemble` checks against ``config``.
    """
    collective = _norm_collective(collective)
    config = config or NAMED_CONFIGS["default"]
    dtype, op = dtype_from_name(dtype), op_from_name(op)
    if mode not in ("ace", "baseline"):
        raise CompileError(f"mode: {mode!r}; allowed: ace, baseline")
    if not isinstance(count, int) or count < 1:
        raise CompileError(f"count: {count!r}; allowed: an integer >= 1 (elements)")
    if isinstance(algorithm, str):
        algorithm = _norm_algorithm(algorithm)
    if isinstance(topology, str):
        topology = Topology.parse(topology)
    if topology is None:
        if nodes is None:
            raise CompileError("give nodes= or topology=")
        topology = Topology.ring(nodes) if algorithm == "ring" else Topology.switch(nodes)
    elif nodes is not None and nodes != topology.num_nodes:
        raise CompileError(f"nodes: {nodes} but topology {topology} has "
                           f"{topology.num_nodes} nodes")
    if isinstance(algorithm, str):
        algs = [algorithm] * len(topology.dims)
    else:
        algs = [_norm_algorithm(a) for a in algorithm]
        if len(algs) != len(topology.dims):
            raise CompileError(f"algorithm: {len(algs)} given for {len(topology.dims)} "
                               f"topology dimensions {topology.dims}")
    if topology.num_links > config.num_links:
        raise CompileError(f"topology {topology} needs {topology.num_links} links per node; "
                           f"the configuration has num_links = {config.num_links}")
    if op is ReduceOp.COPY and collective in ("allreduce", "reduce_scatter"):
        raise CompileError("op: copy is not a reduction")
    # Every message, and every burst of sends before a receive, must fit in packet_bytes (half
    # a receive buffer): with finite buffers more can deadlock a ring (docs/engine.md). More
    # chunks make messages shorter.
    limit = config.packet_bytes
    want = chunks
    while True:
        comp = _Compiler(collective, count, topology, algs, dtype, op, mode, config, want,
                         (input_addr, output_addr, scratch_addr))
        program = comp.build()
        biggest = max_message_bytes(program)
        if biggest <= limit:
            break
        if chunks is not None:
            raise CompileError(f"chunks: {chunks} chunks give {biggest}-byte messages; a message "
                               f"may be at most packet_bytes = {limit} bytes for this "
                               "configuration; give more chunks or none")
        want = max(program.chunks + 1, -(-program.chunks * biggest // limit))
    if check:
        assemble(program, config)
    return program


def max_message_bytes(program: CollectiveProgram) -> int:
    """The most bytes a channel puts in flight toward its receivers at once, or receives in
    one step (0 if none): a message, or a burst of sends with no receive between them (the ring
    all-to-all sends p-1 messages before its first receive), counted from the last receive."""
    biggest = 0
    for node in program.nodes:
        for channel in node.channels:
            burst = 0
            for step in channel.steps:
                if "recv" in step.uses:
                    burst = 0
                    biggest = max(biggest, step.nbytes)
                if "send" in step.uses:
                    burst += step.nbytes
                    biggest = max(biggest, burst)
    return biggest


def expected_ace_traffic(program: CollectiveProgram) -> tuple[int, int]:
    """(read, write) bytes per node that an ACE-mode program must move at least: the input
    once and the output once."""
    esize = DTYPE_BYTES[program.dtype]
    node = program.nodes[0]
    return node.in_elems * esize, node.out_elems * esize
