"""The collective compiler: collectives x algorithms x topologies -> :class:`CollectiveProgram`.

The package, one unit per concern::

    __init__            compile_collective, max_message_bytes, expected_ace_traffic
    chunks              blocks of the vector, buffer sizes, ChunkPlan (how many chunks, slots)
    emit                NodeChunk: one node's steps of one chunk (s, r, rrc, rrs, rcs on pieces)
    transfers           a chunk's loads and stores
    ring, direct,       the phase algorithms, one module each, registered by name
    halving_doubling,   (registry.PHASE_ALGORITHMS)
    double_binary_tree,
    bidirectional_ring
    hierarchical        multi-dimensional collectives: the phases and their groups
    alltoall            the all-to-all algorithms (direct, ring)
    build               Compilation: channels, the movers, chunk after chunk, the program

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
(recursive halving / doubling; power-of-two group sizes only, else :class:`CompileError`),
``double_binary_tree`` (all-reduce phases only: a single-dimension all-reduce or the last
dimension of a hierarchical all-reduce; elsewhere :class:`CompileError`) and
``bidirectional_ring`` (two rings in opposite directions, each carrying half of every chunk on
its own channel: the chunk's two *lanes*, see below). Multi-dimensional
collectives compose ASTRA-sim style: all-reduce = reduce-scatter on dims 0..k-2, all-reduce on
dim k-1, all-gather on dims k-2..0; reduce-scatter runs its phases from the last dimension to
the first and all-gather from the first to the last, so that node n ends with block n.

Chunking: the collective is split into chunks that fit one SRAM slot; every communication step of
chunk c runs on one channel, through all phases, so several chunks are in flight. Modes: ``ace``
(buffers in SRAM, inputs loaded once, results stored once) and ``baseline`` (the same steps with
buffers in main memory).

In ``ace`` mode the first D channels are *movers* (D = :func:`~.build.movers_of`: none with
one channel; two with four or more channels on a one-dimensional collective; else one): they
run the loads, and with two movers the stores too, while channels D..C-1 communicate (chunk c on channel ``D + c % K``,
K = C - D). A channel's DMA stream writes (or reads) SRAM one link word per cycle at most, and
each load or store step pays its memory latency besides (about 11 to 13 bytes per cycle for
the few-KiB steps of a chunk, measured), so one channel cannot move the S bytes of a
reduce-scatter's input, nor store an all-gather's S, in the link's time ((p-1)/p S per link),
and an all-reduce's 2S only with the stores left to the communicating channels. Two movers
share every chunk's transfers: its loads and its stores are dealt round-robin over them (a
chunk with fewer transfers than movers has each cut into one word-aligned piece per mover).
Each communicating channel has two SRAM slots, so the movers fill a channel's next chunk while
the channel still works on the current one. The hand-offs are ``nop`` steps with a
dependency: a channel's first step of chunk c waits for every mover's last load of c, except
in the first round (lanes 0..K-1, each channel's first; their slots are fresh), which is loaded
in the order its steps need it, cut at their slices, each step waiting only for what it
touches, so that the communication starts once its first step's data is in (the pieces of
the first D steps cut once more, a part per mover, so that the movers get ahead; see
``build._loads_by_need``); a store waits for the step that last writes its slice (a
communication step, or a load on the other mover), so the movers store a chunk's final pieces
while the rest of it is still on the ring (an all-gather's 16 pieces on 16 nodes) and the
pipeline drains sooner; in the last round (the last K lanes) the stores are cut at the
communication steps' slices, so that only the last step's piece is stored after the
communication ends; the loads of chunk
c+L (L = 2K slots; c+L reuses c's slot) wait for the last communication step of every lane
of chunk c and for every mover's last store of c. With one mover the communicating channels
store their own results, and a load of c+L waits for their last step. *Stagger*: the first
chunks of the communicating channels after channel D's start once channel D has run
``STAGGER x c/(R-1)`` of chunk 0's communication steps (chunk c; R = the chunks of the first
round, ``ceil(K/lanes)``), so that the channels do not run in lockstep. With one channel (or
in the baselines) chunk c runs wholly on channel ``c % C``. Both modes plan the same chunks
(from the same D), so they send the same messages. ``tests/test_compiler_movers.py`` checks
that the hand-offs order every two steps of a node that touch a common SRAM element.

*Lanes*: with a bidirectional ring in some dimension every chunk has two lanes, the
word-aligned halves of each of its segments, in the chunk's slot; lane k of chunk c is emitted
like a chunk of its own (loads, phases, stores) on channel ``D + (2c + k) % K`` (without
movers ``(2c + k) % C``), and lane 1 runs every bidirectional-ring phase the other way round.
With one lane per chunk (every other algorithm) the programs are those the compiler made
before lanes existed.
"""

from __future__ import annotations

from ace.config import NAMED_CONFIGS
from ace.layouts import DTYPE_BYTES, ReduceOp
from ace.sw.program import (CollectiveProgram, Topology, assemble, dtype_from_name, link_traffic,
                            memory_traffic, op_from_name)
from ace.vocab import (ALGORITHM_ALIASES, COLLECTIVE_ALIASES, Algorithm, Collective, Mode,
                       parse_algorithm, parse_collective)

from .build import STAGGER, Compilation
from .chunks import buffer_sizes, collective_blocks
from .errors import CompileError
from .registry import PHASE_ALGORITHMS

__all__ = ["CompileError", "COLLECTIVES", "ALGORITHMS", "compile_collective",
           "collective_blocks", "buffer_sizes", "memory_traffic", "link_traffic",
           "expected_ace_traffic", "max_message_bytes", "program_words", "PHASE_ALGORITHMS",
           "STAGGER"]

COLLECTIVES = tuple(Collective)
ALGORITHMS = tuple(Algorithm)
# The alias tables live in ace.vocab; these names are kept for older imports.
_COLL_ALIASES = COLLECTIVE_ALIASES
_ALG_ALIASES = ALGORITHM_ALIASES


def _norm_collective(name: str) -> Collective:
    return parse_collective(name, CompileError)


def _norm_algorithm(name: str) -> Algorithm:
    return parse_algorithm(name, CompileError)


def _topology_and_algorithms(topology, nodes, algorithm, config):
    """The :class:`Topology` and one algorithm per dimension, checked."""
    if isinstance(algorithm, str):
        algorithm = _norm_algorithm(algorithm)
    if isinstance(topology, str):
        topology = Topology.parse(topology)
    if topology is None:
        if nodes is None:
            raise CompileError("give nodes= or topology=")
        topology = (Topology.ring(nodes) if algorithm in (Algorithm.RING,
                                                          Algorithm.BIDIRECTIONAL_RING)
                    else Topology.switch(nodes))
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
    return topology, algs


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
    count : the vector length S in elements (see the package docstring per collective).
    topology : a :class:`Topology` or its text (``ring:8``, ``torus:4x2``, ``switch:8``...);
        default ``ring:nodes`` for the ring algorithms and ``switch:nodes`` otherwise.
    algorithm : one name for every dimension, or a sequence with one per topology dimension.
    mode : ``ace`` (SRAM placement, load once / store once), ``staged`` or ``p2p`` (the two
        baselines, buffers in memory; ``baseline`` is an alias of ``staged``).
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
    mode = Mode.parse(mode, CompileError)
    if not isinstance(count, int) or count < 1:
        raise CompileError(f"count: {count!r}; allowed: an integer >= 1 (elements)")
    topology, algs = _topology_and_algorithms(topology, nodes, algorithm, config)
    if op is ReduceOp.COPY and collective.reduces:
        raise CompileError("op: copy is not a reduction")
    # Every message, and every burst of sends before a receive, must fit in packet_bytes (half
    # a receive buffer): with finite buffers more can deadlock a ring (docs/engine.md). More
    # chunks make messages shorter.
    limit = config.packet_bytes
    want = chunks
    while True:
        program = Compilation(collective, count, topology, algs, dtype, op, mode, config, want,
                              (input_addr, output_addr, scratch_addr)).build()
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


def program_words(program: CollectiveProgram) -> int:
    """Instruction words of the longest channel program: its steps and the ``end``."""
    return max(len(ch.steps) + 1 for node in program.nodes for ch in node.channels)


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
