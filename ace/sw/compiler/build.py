"""The compilation of one collective: channels, the movers, chunk after chunk, and the
finished :class:`~ace.sw.program.CollectiveProgram` (the package docstring has the plan)."""

from __future__ import annotations

import dataclasses

from ace.layouts import DTYPE_BYTES
from ace.sw.program import Channel, CollectiveProgram, NodeProgram, Step, split_aligned
from ace.vocab import Collective, Mode, StepType

from .alltoall import ALLTOALL
from .chunks import ChunkPlan, buffer_sizes, collective_blocks
from .emit import ChunkLayout, NodeChunk
from .errors import CompileError
from .hierarchical import phase_order, phases, run_phase
from .registry import PHASE_ALGORITHMS
from .transfers import load_chunk, store_chunk

__all__ = ["Compilation", "STAGGER", "movers_of"]

# Fraction of chunk 0's communication steps that communicating channel 1 runs before the next
# channel starts (the package docstring, "stagger").
STAGGER = 0.75


def movers_of(channels: int, phase_dims: int = 1) -> int:
    """D, the mover channels of an ACE-mode program on ``channels`` channels whose phases run
    over ``phase_dims`` topology dimensions: none with one channel; two (loads and stores)
    with four or more channels and one dimension; else one (loads only). A hierarchical
    collective's later phases send many short messages, latency-bound, and need three
    communicating channels more than a second mover (the package docstring, "movers")."""
    if channels < 2:
        return 0
    return 2 if channels >= 4 and phase_dims == 1 else 1


def _check_collective(collective, topology, algorithms, dims) -> None:
    if topology.num_nodes < 2:
        raise CompileError(f"a collective needs at least 2 nodes; topology {topology} "
                           f"has {topology.num_nodes}")
    if collective == Collective.ALLTOALL:
        if len(dims) != 1:
            raise CompileError("alltoall is compiled for one-dimensional topologies only "
                               f"(got {topology}); use a ring, fully_connected:p or "
                               "switch:p topology")
        if algorithms[dims[0]] not in ALLTOALL:
            raise CompileError(f"alltoall supports the direct and ring algorithms; "
                               f"{algorithms[dims[0]]} is not implemented for it")


def _align(addr: int, to: int = 4096) -> int:
    return -(-addr // to) * to


_FUSED = {StepType.RRC: StepType.RRCS, StepType.RECV: StepType.RCS}


def _fuses(prev: Step | None, step: Step) -> bool:
    """``step`` is a send that :func:`_fuse` merges into ``prev``."""
    return (prev is not None and step.type == StepType.SEND and prev.type in _FUSED
            and prev.dst == step.src and prev.count == step.count and step.dep is None
            and prev.dtype == step.dtype)


def _fuse(steps: list[Step]) -> list[Step]:
    """Peephole: ``rrc X; s X`` -> ``rrcs X`` and ``r X; s X`` -> ``rcs X`` (same slice)."""
    out: list[Step] = []
    for step in steps:
        prev = out[-1] if out else None
        if _fuses(prev, step):
            prev.type = _FUSED[prev.type]
            prev.send_peer, prev.send_link = step.send_peer, step.send_link
            continue
        out.append(step)
    return out


def _groups(steps: list[Step]) -> list[list[Step]]:
    """``steps`` (no nops among them) in groups that nothing may come between: a step, with
    the send that :func:`_fuse` merges into it."""
    groups: list[list[Step]] = []
    for step in steps:
        if groups and len(groups[-1]) == 1 and _fuses(groups[-1][0], step):
            groups[-1].append(step)
        else:
            groups.append([step])
    return groups


def _slices(step: Step) -> list[tuple]:
    """``(buffer, start, count)`` of the SRAM slices a communication step reads or writes."""
    return [(side[0], side[1], step.count) for side in (step.src, step.dst) if side is not None]


def _touches(group: list[Step], load: Step) -> bool:
    """A step of ``group`` reads or writes an element of the slice that ``load`` writes."""
    return any(_overlap((buf, start), count, load.dst, load.count)
               for st in group for buf, start, count in _slices(st))


class Compilation:
    """One collective's programs under construction. Everything the steps depend on is fixed
    here; :meth:`build` emits the steps into the lists made here and returns the program."""

    def __init__(self, collective, count, topology, algorithms, dtype, op, mode, config,
                 chunks, addrs):
        self.collective, self.count, self.topology = collective, count, topology
        self.algorithms, self.dtype, self.op, self.mode = algorithms, dtype, op, mode
        self.num_nodes = topology.num_nodes
        self.esize = DTYPE_BYTES[dtype]
        self.epw = config.link_bytes // self.esize
        self.dims = [k for k, d in enumerate(topology.dims) if d > 1]
        self.order = phase_order(collective, self.dims)
        self.blocks = collective_blocks(collective, count, topology, self.epw)
        _check_collective(collective, topology, algorithms, self.dims)
        # Parts of every chunk that run at once, each on its own channel (bidirectional ring).
        self.lanes = max([1] + [PHASE_ALGORITHMS[algorithms[k]].lanes for k in self.dims
                                if collective != Collective.ALLTOALL])
        C = self.num_channels = config.num_channels
        # The movers (package docstring): channels 0..D-1 load (and store, if two or more),
        # the others communicate. Both modes plan the same chunks; only ACE mode has movers.
        movers = movers_of(C, len(self.dims))
        self.plan = ChunkPlan(collective, count, self.blocks, self.epw, config, chunks, movers)
        self.movers = movers if mode == Mode.ACE else 0
        self.mover_stores = self.movers >= 2
        self.comm = C - self.movers
        self.nodes = [self._node_program(n, addrs) for n in range(self.num_nodes)]
        self.channels = [[[] for _ in range(C)] for _ in range(self.num_nodes)]
        # Per chunk and node: each mover's loads (dealt, see _deal); the stores, in order.
        self.loads = [[[[] for _ in range(max(1, self.movers))] for _ in range(self.num_nodes)]
                      for _ in range(self.plan.count)]
        self.stores = [[[] for _ in range(self.num_nodes)] for _ in range(self.plan.count)]
        # Per chunk and node: (channel, step) of every communication step, in order.
        self.comm_steps = [[[] for _ in range(self.num_nodes)] for _ in range(self.plan.count)]
        self.dep_targets: dict[int, tuple[int, Step]] = {}   # id(nop) -> (channel, target)

    def _node_program(self, n: int, addrs) -> NodeProgram:
        """Node ``n``'s buffers: sizes and memory addresses (output and scratch default to the
        next 4 KiB boundary after the previous buffer). Baseline needs a scratch copy of the
        vector for a reduce-scatter (the others' blocks) and a ring all-to-all (forwarding)."""
        in_elems, out_elems = buffer_sizes(self.collective, self.count, self.blocks, n, self.epw)
        scratch = self.count if self.mode.in_memory and (
            self.collective == Collective.REDUCE_SCATTER or (
                self.collective == Collective.ALLTOALL and self.algorithms[self.dims[0]] == "ring"
            )) else 0
        ia = addrs[0]
        oa = addrs[1] if addrs[1] is not None else _align(ia + in_elems * self.esize)
        sa = addrs[2] if addrs[2] is not None else _align(oa + out_elems * self.esize)
        return NodeProgram(node=n, placement=Mode(self.mode).placement, input_addr=ia,
                           output_addr=oa, scratch_addr=sa, in_elems=in_elems,
                           out_elems=out_elems, scratch_elems=scratch)

    def comm_channel(self, lane: int) -> int:
        """The channel that runs the communication of lane ``lane`` (counted over all chunks:
        lane ``c * lanes + k`` is lane k of chunk c; with one lane per chunk, chunk c)."""
        return self.movers + lane % self.comm

    def wait(self, steps: list[Step], channel: int, target: Step | None) -> None:
        """Append a ``nop`` that waits until ``channel`` has run ``target`` (nothing if None)."""
        if target is not None:
            nop = Step(type=StepType.NOP, dtype=self.dtype, op=self.op)
            self.dep_targets[id(nop)] = (channel, target)
            steps.append(nop)

    # -- steps ------------------------------------------------------------------------------

    def build(self) -> CollectiveProgram:
        """Emit every chunk, then the movers' lists, and assemble the program."""
        first_comm: list[list[Step]] = [[] for _ in range(self.num_nodes)]
        chunk_end = []
        for c in range(self.plan.count):
            chunk_end.append(self._chunk(c, first_comm))
        if self.movers:
            self._movers(chunk_end)
        per_node = [[_fuse([s for s in steps if s.type == StepType.NOP or s.count > 0])
                     for steps in channels] for channels in self.channels]
        self._resolve_deps(per_node)
        return self._program(per_node)

    def _chunk(self, c: int, first_comm: list[list[Step]]) -> list[list[tuple[int, Step]]]:
        """Emit chunk ``c``, lane after lane (:meth:`_lane`). Returns each node's (channel,
        last step) of every lane of the chunk that has steps."""
        ends: list[list[tuple[int, Step]]] = [[] for _ in range(self.num_nodes)]
        for k in range(self.lanes):
            for n, (chan, last) in enumerate(self._lane(c, k, first_comm)):
                if last is not None:
                    ends[n].append((chan, last))
        return ends

    def _lane(self, c: int, k: int, first_comm: list[list[Step]]
              ) -> list[tuple[int, Step | None]]:
        """Emit lane ``k`` of chunk ``c`` on its channel: loads (to the movers, then the
        hand-off waits, and the stagger for the first lane of channels D+1.. after chunk 0),
        the phases, the stores (to the movers, with two or more of them). Returns each
        node's (channel, last step) of the lane on its channel; fills ``first_comm`` for the
        first lane of chunk 0."""
        lane = c * self.lanes + k
        chan, chunk = self.comm_channel(lane), ChunkLayout.of(self, c, k)
        emitters = [NodeChunk(self, chunk, n, self.channels[n][chan],
                              [] if self.movers else self.channels[n][chan],
                              self.stores[c][n] if self.mover_stores else None)
                    for n in range(self.num_nodes)]
        for nc in emitters:
            load_chunk(nc)
        # The first round (each communicating channel's first lane) waits for its loads step
        # by step (_loads_by_need), the later lanes for all of them at once (_hand_off).
        by_need = self.movers and lane < self.comm
        if self.movers:
            for nc in emitters:
                if not by_need:
                    self._hand_off(c, nc)
                if c > 0 and lane < self.comm and first_comm[nc.node]:
                    # Stagger: start this channel part-way through chunk 0's communication,
                    # chunk by chunk (a chunk's lanes start together).
                    steps, first_round = first_comm[nc.node], -(-self.comm // self.lanes)
                    index = -(-len(steps) * c * STAGGER // (first_round - 1)) - 1
                    self.wait(nc.steps, self.movers, steps[int(index)])
        marks = [len(nc.steps) for nc in emitters]
        if self.collective == Collective.ALLTOALL:
            for nc in emitters:
                ALLTOALL[self.algorithms[self.dims[0]]](nc)
        else:
            for kind, q in phases(self.collective, len(self.order)):
                run_phase(self, emitters, kind, q)
        if lane == 0:
            first_comm[:] = [nc.steps[mark:] for nc, mark in zip(emitters, marks)]
        for nc, mark in zip(emitters, marks):
            self.comm_steps[c][nc.node] += [(chan, st) for st in nc.steps[mark:]]
            if by_need:
                self._loads_by_need(c, nc, mark)
        ends = [(chan, nc.steps[-1] if nc.steps else None) for nc in emitters]
        for nc in emitters:
            store_chunk(nc)
        if not self.mover_stores:
            ends = [(chan, nc.steps[-1] if nc.steps else None) for nc in emitters]
        return ends

    def _hand_off(self, c: int, nc: NodeChunk) -> None:
        """Deal the lane's loads to the movers, and make its channel wait for every mover's
        share before the communication."""
        for mover, part in enumerate(self._deal(self._spread(nc.loads))):
            if not part and self.mover_stores:
                # No load: still wait until the mover has freed the slot (its waits for the
                # stores of the slot's previous chunk; the empty step stands for the last
                # step before it).
                part = [Step(type=StepType.LOAD, dtype=self.dtype, op=self.op)]
            self.loads[c][nc.node][mover] += part
            self.wait(nc.steps, mover, part[-1] if part else None)

    def _loads_by_need(self, c: int, nc: NodeChunk, mark: int) -> None:
        """The hand-off of a first-round lane (its slot is fresh) step by step, so that its
        communication starts once the first step's data is in rather than the whole lane's:
        the lane's loads are cut where its communication steps' slices (``nc.steps[mark:]``)
        start and end and run in the order the steps first touch them; the pieces of the
        first D steps (D movers) are cut once more, a part per mover, the others dealt
        round-robin. Each step waits for the parts it touches that no earlier wait covers
        (a step and the send fused into it, :func:`_fuse`, count as one), the lane's end
        for the rest (parts no step touches). Splitting the first D pieces lets the movers
        get ahead of the steps from the second step on: a step that waits for a load waits
        for a different time on each node, and a ring whose nodes drift apart by a packet
        loses a few percent of its link time for the rest of the collective (ring8, 1 MiB
        fp32 all-reduce: 122,420 cycles with only the first step's piece split, 119,731
        with the first two)."""
        groups = _groups(nc.steps[mark:])
        bounds = [(buf, x) for group in groups for st in group
                  for buf, start, count in _slices(st) for x in (start, start + count)]
        pieces = [pc for load in nc.loads for pc in self._cut(load, bounds)]
        first = {id(pc): next((g for g, group in enumerate(groups) if _touches(group, pc)),
                              len(groups)) for pc in pieces}
        pieces.sort(key=lambda pc: first[id(pc)])
        head = [pc for pc in pieces if first[id(pc)] < self.movers]
        dealt: list[list[Step]] = [[] for _ in range(self.movers)]
        for pc in head:
            for mover, part in enumerate(self._pieces(pc, self.movers)):
                dealt[mover].append(part)
        for k, pc in enumerate(pieces[len(head):]):
            dealt[k % self.movers].append(pc)
        out, waited = [], [-1] * self.movers
        for group in groups + [None]:
            last = [-1] * self.movers        # per mover, the last part the group needs
            for mover, part in enumerate(dealt):
                for i, pc in enumerate(part):
                    if group is None or _touches(group, pc):
                        last[mover] = i
            for mover, i in enumerate(last):
                if i > waited[mover]:
                    self.wait(out, mover, dealt[mover][i])
                    waited[mover] = i
            out += group or []
        nc.steps[mark:] = out
        for mover, part in enumerate(dealt):
            self.loads[c][nc.node][mover] += part

    def _cut(self, step: Step, bounds) -> list[Step]:
        """A load or store cut at each ``(buffer, element offset)`` of ``bounds`` that falls
        inside its SRAM slice on a word boundary."""
        side = "dst" if step.type == StepType.LOAD else "src"
        buf, offset = getattr(step, side)
        end = offset + step.count
        edges = sorted({offset, end} | {x for b, x in bounds if b == buf and offset < x < end
                                        and x % self.epw == 0})
        out = []
        for a, b in zip(edges, edges[1:]):
            piece = dataclasses.replace(step, count=b - a,
                                        mem_addr=step.mem_addr + (a - offset) * self.esize)
            setattr(piece, side, (buf, a))
            out.append(piece)
        return out

    def _movers(self, chunk_end) -> None:
        """The movers' lists: the loads of chunks 0..L-1 at once, then, chunk after chunk,
        the stores of chunk c (if the movers store; each once its slice is final) and the
        loads of chunk c+L into c's slot (once c's communication and stores have run). Every
        chunk's loads and stores are dealt out over all the movers."""
        slots, count = self.plan.slots, self.plan.count
        for n in range(self.num_nodes):
            lists = self.channels[n]
            for c in range(min(slots, count)):
                for mover, part in enumerate(self.loads[c][n]):
                    lists[mover] += part
            for c in range(count):
                ends = list(chunk_end[c][n])
                if self.mover_stores:
                    ends += self._mover_stores(lists, c, n)
                if c + slots < count:
                    for mover, part in enumerate(self.loads[c + slots][n]):
                        for channel, last in ends:
                            if channel != mover:
                                self.wait(lists[mover], channel, last)
                        lists[mover] += part

    def _spread(self, steps: list[Step]) -> list[Step]:
        """``steps`` (loads or stores), each cut into one word-aligned piece per mover when
        there are fewer steps than movers, so that every mover gets a share."""
        if len(steps) >= self.movers:
            return steps
        return [piece for step in steps for piece in self._pieces(step, self.movers)]

    def _deal(self, steps: list[Step]) -> list[list[Step]]:
        """``steps`` dealt round-robin to the movers: mover m gets steps m, m + D, ..."""
        return [steps[m::self.movers] for m in range(self.movers)]

    def _pieces(self, step: Step, parts: int) -> list[Step]:
        """A load or store cut into ``parts`` word-aligned pieces (empty ones left out)."""
        side = "dst" if step.type == StepType.LOAD else "src"
        buf, offset = getattr(step, side)
        out = []
        for start, length in split_aligned(step.count, parts, self.epw):
            if length:
                piece = dataclasses.replace(step, count=length,
                                            mem_addr=step.mem_addr + start * self.esize)
                setattr(piece, side, (buf, offset + start))
                out.append(piece)
        return out

    def _mover_stores(self, lists: list[list[Step]], c: int, n: int) -> list[tuple[int, Step]]:
        """Deal node ``n``'s stores of chunk ``c`` to the movers, in the order their slices
        become final (by the last writer's position on its channel: a chunk's lanes run at
        once), each after a wait for the step that last writes its slice (a communication
        step, or a load on another mover). In the last round (the drain) the stores are cut
        at the communication steps' slices, so that each waits only for the step that
        finishes its own piece and little is left to store when the communication ends.
        Returns each mover's (channel, last store)."""
        writes = [(-1, mover, load) for mover, part in enumerate(self.loads[c][n])
                  for load in part if load.count]
        position: dict[int, int] = {}
        for chan, st in self.comm_steps[c][n]:
            position[chan] = position.get(chan, -1) + 1
            if st.dst is not None:
                writes.append((position[chan], chan, st))
        drain = (c + 1) * self.lanes > self.plan.count * self.lanes - self.comm
        if drain:
            bounds = [(w.dst[0], x) for k, _, w in writes if k >= 0
                      for x in (w.dst[1], w.dst[1] + w.count)]
            stores = [pc for store in self.stores[c][n] for pc in self._cut(store, bounds)]
        else:
            stores = self._spread(self.stores[c][n])
        plan = []                       # (order, the last writer on each channel, store)
        for store in stores:
            hits = [w for w in writes if _overlap(w[2].dst, w[2].count, store.src, store.count)]
            last = {chan: step for _, chan, step in hits}
            plan.append((max([k for k, _, _ in hits], default=-2), last, store))
        plan.sort(key=lambda item: item[0])
        writers = {id(store): last for _, last, store in plan}
        ends = []
        for mover, part in enumerate(self._deal([store for _, _, store in plan])):
            waited: set[int] = set()
            for store in part:
                for chan, writer in writers[id(store)].items():
                    if chan != mover and id(writer) not in waited:
                        self.wait(lists[mover], chan, writer)
                        waited.add(id(writer))
                lists[mover].append(store)
            if part:
                ends.append((mover, part[-1]))
        return ends

    def _resolve_deps(self, per_node) -> None:
        """Turn the hand-off nops' target steps into ``dep = (channel, index)`` now that empty
        steps are dropped and pairs fused: a target that is gone stands for the last step kept
        before it (or for nothing, and the nop needs no dependency)."""
        if not self.dep_targets:
            return
        for n in range(self.num_nodes):
            index = {}
            for c, steps in enumerate(self.channels[n]):
                kept = {id(st): k for k, st in enumerate(per_node[n][c])}
                last = None
                for st in steps:
                    last = kept.get(id(st), last)
                    index[id(st)] = last
            for steps in per_node[n]:
                for st in steps:
                    if id(st) in self.dep_targets:
                        channel, target = self.dep_targets[id(st)]
                        k = index[id(target)]
                        st.dep = None if k is None else (channel, k)

    def _program(self, per_node) -> CollectiveProgram:
        """The program: every node gets the same number of channels (the NIC delivers channel
        c's packets to channel c), each with its peer and link when it has only one."""
        width = max([c + 1 for lists in per_node for c, st in enumerate(lists) if st] or [0])
        for node, lists in zip(self.nodes, per_node):
            for steps in lists[:width]:
                node.channels.append(_channel(steps))
        algs = [self.algorithms[k] for k in self.dims]
        return CollectiveProgram(collective=self.collective, algorithm="+".join(algs),
                                 dtype=self.dtype, op=self.op, count=self.count,
                                 nodes=self.nodes, topology=self.topology, mode=self.mode,
                                 chunks=self.plan.count,
                                 blocks=None if self.collective == Collective.ALLREDUCE
                                 else list(self.blocks))


def _overlap(a: tuple, a_count: int, b: tuple, b_count: int) -> bool:
    """Slices ``a`` and ``b`` (``(buffer, offset)`` and a count) share an element."""
    return a[0] == b[0] and a[1] < b[1] + b_count and b[1] < a[1] + a_count


def _channel(steps: list[Step]) -> Channel:
    """A channel of ``steps``; its send (receive) peer and link when all its steps agree."""
    channel = Channel(steps=steps)
    for side in ("send", "recv"):
        peers = {(getattr(s, f"{side}_peer"), getattr(s, f"{side}_link"))
                 for s in steps if side in s.uses}
        if len(peers) == 1:
            peer, link = peers.pop()
            setattr(channel, f"{side}_peer", peer)
            setattr(channel, f"{side}_link", link)
    return channel
