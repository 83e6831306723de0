"""The compilation of one collective: channels, the loader, chunk after chunk, and the
finished :class:`~ace.sw.program.CollectiveProgram` (the package docstring has the plan)."""

from __future__ import annotations

from ace.layouts import DTYPE_BYTES
from ace.sw.program import Channel, CollectiveProgram, NodeProgram, Step
from ace.vocab import Collective, Mode, StepType

from .alltoall import ALLTOALL
from .chunks import ChunkPlan, buffer_sizes, collective_blocks
from .emit import ChunkLayout, NodeChunk
from .errors import CompileError
from .hierarchical import phase_order, phases, run_phase
from .registry import PHASE_ALGORITHMS
from .transfers import load_chunk, store_chunk

__all__ = ["Compilation", "STAGGER"]

# Fraction of chunk 0's communication steps that communicating channel 1 runs before the next
# channel starts (the package docstring, "stagger").
STAGGER = 0.75


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


def _fuse(steps: list[Step]) -> list[Step]:
    """Peephole: ``rrc X; s X`` -> ``rrcs X`` and ``r X; s X`` -> ``rcs X`` (same slice)."""
    fused = {StepType.RRC: StepType.RRCS, StepType.RECV: StepType.RCS}
    out: list[Step] = []
    for step in steps:
        prev = out[-1] if out else None
        if (prev is not None and step.type == StepType.SEND and prev.type in fused
                and prev.dst == step.src and prev.count == step.count and step.dep is None
                and prev.dtype == step.dtype):
            prev.type = fused[prev.type]
            prev.send_peer, prev.send_link = step.send_peer, step.send_link
            continue
        out.append(step)
    return out


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
        self.plan = ChunkPlan(collective, count, self.blocks, self.epw, config, chunks)
        C = self.num_channels = config.num_channels
        # The loader (package docstring): channel 0 loads, the others communicate.
        self.loader = mode == Mode.ACE and C >= 2
        self.comm = C - 1 if self.loader else C
        self.nodes = [self._node_program(n, addrs) for n in range(self.num_nodes)]
        self.channels = [[[] for _ in range(C)] for _ in range(self.num_nodes)]
        self.loads = [[[] for _ in range(self.num_nodes)] for _ in range(self.plan.count)]
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
        return 1 + lane % self.comm if self.loader else lane % self.num_channels

    def wait(self, steps: list[Step], channel: int, target: Step | None) -> None:
        """Append a ``nop`` that waits until ``channel`` has run ``target`` (nothing if None)."""
        if target is not None:
            nop = Step(type=StepType.NOP, dtype=self.dtype, op=self.op)
            self.dep_targets[id(nop)] = (channel, target)
            steps.append(nop)

    # -- steps ------------------------------------------------------------------------------

    def build(self) -> CollectiveProgram:
        """Emit every chunk, then the loader's list, and assemble the program."""
        first_comm: list[list[Step]] = [[] for _ in range(self.num_nodes)]
        chunk_end = []
        for c in range(self.plan.count):
            chunk_end.append(self._chunk(c, first_comm))
        if self.loader:
            self._loader(chunk_end)
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
        """Emit lane ``k`` of chunk ``c`` on its channel: loads (to the loader, then a
        hand-off wait, and the stagger for the first lane of channels 2.. after chunk 0), the
        phases, the stores. Returns each node's (channel, last step) of the lane; fills
        ``first_comm`` for the first lane of chunk 0."""
        lane = c * self.lanes + k
        chan, chunk = self.comm_channel(lane), ChunkLayout.of(self, c, k)
        emitters = [NodeChunk(self, chunk, n, self.channels[n][chan],
                              self.loads[c][n] if self.loader else self.channels[n][chan])
                    for n in range(self.num_nodes)]
        for nc in emitters:
            load_chunk(nc)
        if self.loader:
            for nc in emitters:
                self.wait(nc.steps, 0, nc.loads[-1] if nc.loads else None)
                if c > 0 and lane < self.comm and first_comm[nc.node]:
                    # Stagger: start this channel part-way through chunk 0's communication,
                    # chunk by chunk (a chunk's lanes start together).
                    steps, first_round = first_comm[nc.node], -(-self.comm // self.lanes)
                    index = -(-len(steps) * c * STAGGER // (first_round - 1)) - 1
                    self.wait(nc.steps, 1, steps[int(index)])
        marks = [len(nc.steps) for nc in emitters]
        if self.collective == Collective.ALLTOALL:
            for nc in emitters:
                ALLTOALL[self.algorithms[self.dims[0]]](nc)
        else:
            for kind, q in phases(self.collective, len(self.order)):
                run_phase(self, emitters, kind, q)
        if lane == 0:
            first_comm[:] = [nc.steps[mark:] for nc, mark in zip(emitters, marks)]
        for nc in emitters:
            store_chunk(nc)
        return [(chan, nc.steps[-1] if nc.steps else None) for nc in emitters]

    def _loader(self, chunk_end) -> None:
        """The loader's list: chunks 0..L-1 at once, then chunk c+L once every lane of chunk c
        (its slot's previous user) has run its last step."""
        slots = self.plan.slots
        for n in range(self.num_nodes):
            loader = self.channels[n][0]
            for c in range(self.plan.count):
                for channel, last in chunk_end[c - slots][n] if c >= slots else ():
                    self.wait(loader, channel, last)
                loader += self.loads[c][n]

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
