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
:class:`Mode`        ``ace`` (buffers in SRAM) or ``baseline`` (buffers in main memory); the
                   same bit is spelled ``placement`` = ``sram`` / ``memory`` in program
                   listings and is the ``PLACEMENT`` CSR: :data:`PLACEMENT` maps the three
=================  ===========================================================================

This module elaborates no hardware and imports nothing from the package.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "Collective", "Algorithm", "StepType", "Buffer", "Mode", "COLLECTIVE_ALIASES",
    "ALGORITHM_ALIASES", "PLACEMENT", "parse_collective", "parse_algorithm", "VocabError",
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
    """Where a program's buffers live: ``ace`` in the engine's SRAM (inputs loaded once,
    results stored once), ``baseline`` in main memory (memory-staged execution, the same steps).
    One bit, also spelled as the node's ``placement`` (:attr:`placement`) and written to the
    ``PLACEMENT`` CSR (:attr:`placement_bit`)."""
    ACE = "ace"
    BASELINE = "baseline"

    @property
    def placement(self) -> str:
        """The program listing's spelling: ``sram`` or ``memory``."""
        return PLACEMENT[self][0]

    @property
    def placement_bit(self) -> int:
        """The ``PLACEMENT`` CSR value: 0 buffers in SRAM, 1 in memory."""
        return PLACEMENT[self][1]

    @classmethod
    def parse(cls, value, error=VocabError) -> "Mode":
        """The mode for ``ace``/``baseline`` or a placement ``sram``/``memory``."""
        for mode, (placement, _) in PLACEMENT.items():
            if value == mode or value == placement:
                return mode
        raise error(f"mode: {value!r}; allowed: ace or baseline (placement sram or memory)")


#: The one map of the mode bit: mode -> (placement spelling, PLACEMENT CSR value).
PLACEMENT: dict[Mode, tuple[str, int]] = {Mode.ACE: ("sram", 0), Mode.BASELINE: ("memory", 1)}
