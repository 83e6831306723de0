"""Registered barrel rotator whose rotation amount follows a time-slot schedule.

::

    i0 i1 .. i{P-1}      one word per position, every cycle
     |  |      |
    [rotate by 1 if amount bit 0]                   level 0: 2:1 mux per bit
    [rotate by 2 if amount bit 1]                   level 1
     ...                                            ceil(log2 P) levels, spread over
     |  |      |                                    ``stages`` registers (default: one
    o0 o1 .. o{P-1}      o{k} = i{(k + amount) mod P}    register per level, at least one)

The SRAM's crossbar uses it in both directions: the time slots fix which bank every port
uses in every cycle, so moving words between banks and ports is a rotation by the cycle count
modulo the slot period. Each level's 2:1 muxes take their inputs from two positions only,
so the wiring joins neighbours (distance ``2**k`` at level ``k``) instead of fanning every
bank out to every port. With fewer stages than levels a stage holds several levels (a 4:1 mux
per bit for two); with more, the first stages are plain registers, which the SRAM's write
side uses to register a port's request once before it spreads over the word's slices.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["SlotRotator", "rotation_levels", "rotation_stages"]


def rotation_levels(period: int) -> int:
    """2:1 mux levels of a rotation over ``period`` positions: one per bit of the amount."""
    return (period - 1).bit_length()


def rotation_stages(period: int) -> int:
    """Default register stages of a :class:`SlotRotator` over ``period`` positions: one per
    mux level, at least one."""
    return max(1, rotation_levels(period))


class SlotRotator(wiring.Component):
    """Rotate ``period`` words left by a cycle-dependent amount, one register per stage.

    The word set presented on ``i{k}`` in cycle ``t`` (cycles counted from reset) leaves on
    ``o{k}`` in cycle ``t + stages``, rotated left by ``a(t) = (phase + step * t) mod period``:
    ``o{k} = i{(k + a(t)) mod period}``.

    Level ``l`` rotates by ``2**l mod period`` when bit ``l`` of the amount is set, so any
    ``period`` works (not only powers of two). The ``L`` = :func:`rotation_levels` levels are
    spread over the ``S`` stages in order, stage ``s`` holding levels ``s * L // S`` to
    ``(s + 1) * L // S - 1`` (none: a plain register). Each stage with levels keeps its own
    copies of the amount (a free-running counter per ``select_bits`` bits of the word, so that
    no select net fans out to more than ``period * select_bits`` muxes per level and every copy
    stays beside its slice; with ``position_copies``, a counter per slice and output position,
    so each drives the muxes of one register word). When ``period`` is a power of two the
    counters wrap by themselves, and synthesis keeps only the bits up to the stage's own.

    Latency: :attr:`stages` cycles (default ``ceil(log2 period)``, at least 1). Throughput:
    one word set per cycle, no handshake (the caller carries its own valid bits beside the
    words).

    Parameters
    ----------
    width : int
        Bits per word.
    period : int
        Number of positions, at least 1.
    phase : int
        Rotation amount applied to the set presented in cycle 0.
    step : int
        +1 or -1: how the amount moves from one cycle to the next.
    select_bits : int
        Word bits per copy of a stage's select.
    position_copies : bool
        A copy of each stage's select per output position as well (default: shared by the
        positions).
    stages : int or None
        Register stages, at least 1 (default :func:`rotation_stages`: one per level).

    Members
    -------
    i{k} : In(width)
        Input word at position ``k``, ``k`` in ``range(period)``.
    o{k} : Out(width)
        Output word at position ``k``, registered.
    """

    def __init__(self, width: int, period: int, *, phase: int = 0, step: int = 1,
                 select_bits: int = 16, position_copies: bool = False,
                 stages: int | None = None):
        stages = rotation_stages(period) if stages is None else stages
        for name, value in (("width", width), ("period", period),
                            ("select_bits", select_bits), ("stages", stages)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"SlotRotator {name}: {value!r} is not valid; allowed: an "
                                 "integer of at least 1")
        if step not in (1, -1):
            raise ValueError(f"SlotRotator step: {step!r} is not valid; allowed: 1 or -1")
        self.width = width
        self.period = period
        self.phase = phase % period
        self.step = step
        self.select_bits = select_bits
        self.position_copies = position_copies
        #: Register stages: the latency in cycles.
        self.stages = stages
        members = {}
        for k in range(period):
            members[f"i{k}"] = In(width)
        for k in range(period):
            members[f"o{k}"] = Out(width)
        super().__init__(members)

    def stage_levels(self, stage: int) -> range:
        """The mux levels (bits of the amount) that ``stage`` holds; empty for a plain
        register."""
        levels = rotation_levels(self.period)
        return range(stage * levels // self.stages, (stage + 1) * levels // self.stages)

    def amount(self, cycle: int) -> int:
        """Rotation applied to the word set presented in ``cycle`` (the golden schedule)."""
        return (self.phase + self.step * cycle) % self.period

    def _amount_copy(self, m, name: str, stage: int) -> Signal:
        """A counter equal to the amount of the set that enters ``stage`` in this cycle."""
        count = Signal(range(self.period), init=self.amount(-stage), name=name)
        if self.period & (self.period - 1) == 0:
            m.d.sync += count.eq(count + self.step)     # wraps by itself
        elif self.step > 0:
            m.d.sync += count.eq(Mux(count == self.period - 1, 0, count + 1))
        else:
            m.d.sync += count.eq(Mux(count == 0, self.period - 1, count - 1))
        return count

    def _rotated(self, words, k: int, levels, select, lo: int, hi: int):
        """Bits ``lo:hi`` of position ``k`` after ``levels`` (a mux tree, the last level at
        its root), each level's select being bit ``level`` of ``select``."""
        if not levels:
            return words[k][lo:hi]
        level = levels[-1]
        shift = (1 << level) % self.period
        return Mux(select[level],
                   self._rotated(words, (k + shift) % self.period, levels[:-1], select, lo, hi),
                   self._rotated(words, k, levels[:-1], select, lo, hi))

    def elaborate(self, platform):
        m = Module()
        words = [getattr(self, f"i{k}") for k in range(self.period)]
        slices = [(lo, min(lo + self.select_bits, self.width))
                  for lo in range(0, self.width, self.select_bits)]
        for stage in range(self.stages):
            levels = list(self.stage_levels(stage))
            # The stage's copies of the amount, one per slice (or per output position and
            # slice); each of its levels takes its bit. A plain register needs none.
            shared = [self._amount_copy(m, f"stage{stage}_amount{n}", stage)
                      if levels and not self.position_copies else None
                      for n in range(len(slices))]
            rotated = []
            for k in range(self.period):
                selects = shared if not (levels and self.position_copies) else [
                    self._amount_copy(m, f"stage{stage}_word{k}_amount{n}", stage)
                    for n in range(len(slices))]
                word = Signal(self.width, name=f"stage{stage}_word{k}", reset_less=True)
                m.d.sync += word.eq(Cat(self._rotated(words, k, levels, select, lo, hi)
                                        for select, (lo, hi) in zip(selects, slices)))
                rotated.append(word)
            words = rotated
        for k, word in enumerate(words):
            m.d.comb += getattr(self, f"o{k}").eq(word)
        return m
