"""The software stack's vocabulary: collectives, algorithms, step types, buffers and the mode.

Each is a :class:`~enum.StrEnum`, so a member *is* its text: ``Collective.ALLREDUCE ==
"allreduce"``, ``StepType.SEND == "s"``, and the strings in program listings, trace files and
``results.json`` keep comparing equal. Every name has one table here; the compiler, the
program model, the assembler (:mod:`ace.isa`), the golden model and the trace readers use it.

=================  ===========================================================================
enum               members (text)
=================  ===========================================================================
:class:`Collective`  allreduce, reduce_scatter, allgather, alltoall; aliases in
                   :data:`COLLECTIVE_ALIASES` (``all_reduce``, ``ar``, ``a2a`` ...)
:class:`Algorithm`   ring, direct, halving_doubling, double_binary_tree, bidirectional_ring;
                   aliases in :data:`ALGORITHM_ALIASES` (``hd``, ``dbt``, ``biring`` ...). A hierarchical
                   collective names one algorithm per topology dimension (``ring+direct``)
:class:`StepType`    the MSCCL-style step types (``s``, ``r``, ``rrc`` ...) and ``end``
:class:`Buffer`      ``i`` input, ``o`` output, ``s`` scratch (a slice ``s[16]``; the *step*
                   ``s`` is :attr:`StepType.SEND`: code names both, never the letter)
:class:`Mode`        ``ace`` (buffers in SRAM), ``staged`` or ``p2p`` (buffers in main memory,
                   two baselines; ``baseline`` is an alias of ``staged``, :data:`MODE_ALIASES`);
                   spelled ``placement`` = ``sram`` / ``memory`` / ``p2p`` in program
                   listings and the ``PLACEMENT`` CSR value: :data:`PLACEMENT` maps the three
=================  ===========================================================================

This module elaborates no hardware and imports nothing from the package.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "Collective", "Algorithm", "StepType", "Buffer", "Mode", "COLLECTIVE_ALIASES",
    "ALGORITHM_ALIASES", "MODE_ALIASES", "MODE_SETS", "BASELINE_MODES", "PLACEMENT",
    "parse_modes", "parse_collective", "parse_algorithm", "VocabError",
]


class VocabError(ValueError):
    """A name that is not in the vocabulary; the message lists the allowed names."""


class Collective(StrEnum):
    """What a collective computes (buffer sizes per collective: ``docs/programming_model.md``)."""
    ALLREDUCE = "allreduce"
    REDUCE_SCATTER = "reduce_scatter"
    ALLGATHER = "allgather"
    ALLTOALL = "alltoall"

    @property
    def reduces(self) -> bool:
        """True for the collectives that combine values (all-reduce, reduce-scatter)."""
        return self in (Collective.ALLREDUCE, Collective.REDUCE_SCATTER)


class Algorithm(StrEnum):
    """How one topology dimension runs a collective phase (``ace.sw.compiler``)."""
    RING = "ring"
    DIRECT = "direct"
    HALVING_DOUBLING = "halving_doubling"
    DOUBLE_BINARY_TREE = "double_binary_tree"
    BIDIRECTIONAL_RING = "bidirectional_ring"


#: The one public alias table of collective names: alias -> :class:`Collective`.
COLLECTIVE_ALIASES: dict[str, Collective] = {
    "all_reduce": Collective.ALLREDUCE, "all-reduce": Collective.ALLREDUCE,
    "ar": Collective.ALLREDUCE,
    "reducescatter": Collective.REDUCE_SCATTER, "reduce-scatter": Collective.REDUCE_SCATTER,
    "rs": Collective.REDUCE_SCATTER,
    "all_gather": Collective.ALLGATHER, "all-gather": Collective.ALLGATHER,
    "ag": Collective.ALLGATHER,
    "all_to_all": Collective.ALLTOALL, "all-to-all": Collective.ALLTOALL,
    "a2a": Collective.ALLTOALL,
}

#: The one public alias table of algorithm names: alias -> :class:`Algorithm`.
ALGORITHM_ALIASES: dict[str, Algorithm] = {
    "hd": Algorithm.HALVING_DOUBLING, "rhd": Algorithm.HALVING_DOUBLING,
    "halving-doubling": Algorithm.HALVING_DOUBLING,
    "recursive_halving_doubling": Algorithm.HALVING_DOUBLING,
    "dbt": Algorithm.DOUBLE_BINARY_TREE, "double-binary-tree": Algorithm.DOUBLE_BINARY_TREE,
    "tree": Algorithm.DOUBLE_BINARY_TREE,
    "pairwise": Algorithm.DIRECT, "all_pairs": Algorithm.DIRECT, "allpairs": Algorithm.DIRECT,
    "biring": Algorithm.BIDIRECTIONAL_RING,
}


def _lookup(enum_cls, aliases: dict, name) -> StrEnum | None:
    key = str(name).lower()
    key = aliases.get(key, key)
    try:
        return enum_cls(key)
    except ValueError:
        return None


def parse_collective(name, error=VocabError) -> Collective:
    """The :class:`Collective` for a name or alias (any case); ``error`` (a ValueError type)
    names the allowed names otherwise."""
    found = _lookup(Collective, COLLECTIVE_ALIASES, name)
    if found is None:
        raise error(f"collective: {name!r}; allowed: {', '.join(Collective)}")
    return found


def parse_algorithm(name, error=VocabError) -> Algorithm:
    """The :class:`Algorithm` for a name or alias (any case); ``error`` otherwise."""
    found = _lookup(Algorithm, ALGORITHM_ALIASES, name)
    if found is None:
        raise error(f"algorithm: {name!r}; allowed: {', '.join(Algorithm)}")
    return found


class StepType(StrEnum):
    """A step (one instruction) of a channel, MSCCL's step types plus load/store.
    ``END`` marks the end of a channel's instruction list; the assembler appends it and it is
    never a step of a program."""
    NOP = "nop"       # wait on the dependency only
    LOAD = "load"     # main memory -> dst slice (DMA)
    STORE = "store"   # src slice -> main memory (DMA)
    SEND = "s"        # send the src slice to the send peer
    RECV = "r"        # receive into the dst slice
    RRC = "rrc"       # receive, reduce with src, keep the result in dst
    RRS = "rrs"       # receive, reduce with src, send the result on (nothing written)
    RRCS = "rrcs"     # receive, reduce with src, keep in dst and send
    RCS = "rcs"       # receive, keep in dst and send (all-gather pass-through)
    CPY = "cpy"       # dst = src
    RE = "re"         # dst = dst (+) src (local reduction)
    END = "end"       # end of the channel's program (assembler only)

    @property
    def operands(self) -> frozenset[str]:
        """What the step uses: ``src``/``dst`` slices, ``mem`` address, ``send``/``recv``."""
        return _OPERANDS[self]


_OPERANDS = {
    StepType.NOP: frozenset(), StepType.END: frozenset(),
    StepType.LOAD: frozenset({"dst", "mem"}),
    StepType.STORE: frozenset({"src", "mem"}),
    StepType.SEND: frozenset({"src", "send"}),
    StepType.RECV: frozenset({"dst", "recv"}),
    StepType.RRC: frozenset({"src", "dst", "recv"}),
    StepType.RRS: frozenset({"src", "recv", "send"}),
    StepType.RRCS: frozenset({"src", "dst", "recv", "send"}),
    StepType.RCS: frozenset({"dst", "recv", "send"}),
    StepType.CPY: frozenset({"src", "dst"}),
    StepType.RE: frozenset({"src", "dst"}),
}


class Buffer(StrEnum):
    """A logical buffer (region) a slice names. In listings a slice is ``BUF[OFFSET]``, so the
    scratch letter ``s`` never stands where a step type does."""
    INPUT = "i"
    OUTPUT = "o"
    SCRATCH = "s"


class Mode(StrEnum):
    """How a program runs: ``ace`` with its buffers in the engine's SRAM (inputs loaded once,
    results stored once), or one of two baselines with its buffers in main memory, the same
    steps expanded into memory-staged micro-steps (``docs/engine.md``, "Placement"):
    ``staged`` as NCCL over a network transport (every receive lands in memory, every sent
    result is read back from memory), ``p2p`` as NCCL between GPUs over NVLink (a reduction's
    output goes straight to the link, no send buffer in memory). Also spelled as the node's
    ``placement`` (:attr:`placement`) and written to the ``PLACEMENT`` CSR
    (:attr:`placement_bit`). ``Mode("baseline")`` is :attr:`STAGED` (:data:`MODE_ALIASES`)."""
    ACE = "ace"
    STAGED = "staged"
    P2P = "p2p"

    @classmethod
    def _missing_(cls, value):
        return MODE_ALIASES.get(str(value).lower())

    @property
    def placement(self) -> str:
        """The program listing's spelling: ``sram``, ``memory`` or ``p2p``."""
        return PLACEMENT[self][0]

    @property
    def placement_bit(self) -> int:
        """The ``PLACEMENT`` CSR value: 0 buffers in SRAM, 1 memory-staged, 2 point-to-point
        (3 is reserved: the engine refuses it with ``BAD_PLACEMENT``)."""
        return PLACEMENT[self][1]

    @property
    def in_memory(self) -> bool:
        """Whether the program's buffers live in main memory (both baselines)."""
        return self is not Mode.ACE

    @classmethod
    def parse(cls, value, error=VocabError) -> "Mode":
        """The mode for ``ace``/``staged``/``p2p`` (or an alias such as ``baseline``) or a
        placement ``sram``/``memory``/``p2p``."""
        for mode, (placement, _) in PLACEMENT.items():
            if value == mode or value == placement:
                return mode
        alias = cls._missing_(value)
        if alias is not None:
            return alias
        raise error(f"mode: {value!r}; allowed: {', '.join(cls)} (alias: "
                    f"{', '.join(MODE_ALIASES)}; placement {', '.join(_PLACEMENT_NAMES)})")


#: Mode aliases a user may type (CLI, trace files, sweep specs, system and experiment files):
#: ``baseline`` was the staged baseline's name before the point-to-point one existed.
MODE_ALIASES: dict[str, Mode] = {"baseline": Mode.STAGED}

#: The two baselines, in the order reports show them.
BASELINE_MODES: tuple[Mode, ...] = (Mode.STAGED, Mode.P2P)

#: The one map of the mode: mode -> (placement spelling, PLACEMENT CSR value).
PLACEMENT: dict[Mode, tuple[str, int]] = {Mode.ACE: ("sram", 0), Mode.STAGED: ("memory", 1),
                                          Mode.P2P: ("p2p", 2)}
_PLACEMENT_NAMES = tuple(placement for placement, _ in PLACEMENT.values())

#: Words for several modes at once (``ace replay --mode``, sweep specs): ``all`` runs ACE and
#: both baselines; ``both`` keeps its meaning from before the p2p baseline, ACE and staged.
MODE_SETS: dict[str, tuple[Mode, ...]] = {"all": tuple(Mode), "both": (Mode.ACE, Mode.STAGED)}


def parse_modes(value, error=VocabError) -> tuple[Mode, ...]:
    """The modes that ``value`` names: one mode or alias, a word of :data:`MODE_SETS`, or a
    list of distinct modes; ``error`` (a ValueError type) names what is allowed otherwise."""
    if isinstance(value, str) and value.lower() in MODE_SETS:
        return MODE_SETS[value.lower()]
    names = [value] if isinstance(value, str) else value
    try:
        modes = tuple(Mode(name) for name in names)
    except (TypeError, ValueError):
        modes = ()
    if not modes or len(set(modes)) != len(modes):
        raise error(f"{value!r}; allowed: {', '.join(Mode)} (alias: "
                    f"{', '.join(MODE_ALIASES)}), {', '.join(MODE_SETS)}, or a list of "
                    f"distinct modes")
    return modes
