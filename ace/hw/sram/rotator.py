"""Registered barrel rotator whose rotation amount follows a time-slot schedule.

::

    i0 i1 .. i{P-1}      one word per position, every cycle
     |  |      |
    [rotate by 1 if amount bit 0] --> register      stage 0: 2:1 mux per bit
    [rotate by 2 if amount bit 1] --> register      stage 1
     ...                                            ceil(log2 P) stages (at least 1)
     |  |      |
    o0 o1 .. o{P-1}      o{k} = i{(k + amount) mod P} of the set presented ``stages`` cycles ago

The SRAM's crossbar uses it in both directions: the time slots fix which bank every port
uses in every cycle, so moving words between banks and ports is a rotation by the cycle count
modulo the slot period. Each stage's 2:1 muxes take their inputs from two positions only,
so the wiring joins neighbours (distance ``2**k`` at stage ``k``) instead of fanning every
bank out to every port, and each stage starts and ends at a register.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["SlotRotator", "rotation_stages"]


def rotation_stages(period: int) -> int:
    """Register stages of a :class:`SlotRotator` over ``period`` positions: one per bit of
    the rotation amount, at least one."""
    return max(1, (period - 1).bit_length())


class SlotRotator(wiring.Component):
    """Rotate ``period`` words left by a cycle-dependent amount, one register per stage.

    The word set presented on ``i{k}`` in cycle ``t`` (cycles counted from reset) leaves on
    ``o{k}`` in cycle ``t + stages``, rotated left by ``a(t) = (phase + step * t) mod period``:
    ``o{k} = i{(k + a(t)) mod period}``.

    Stage ``s`` rotates by ``2**s mod period`` when bit ``s`` of the amount is set, so any
    ``period`` works (not only powers of two). Each stage keeps its own copies of the amount
    (a free-running counter per ``select_bits`` bits of the word, so that no select net fans
    out to more than ``period * select_bits`` muxes and every copy stays beside its slice;
    with ``position_copies``, a counter per slice and output position, so each drives the
    ``select_bits`` muxes of one register word). When ``period`` is a power of two the
    counters wrap by themselves, and synthesis keeps only the bits up to the stage's own.

    Latency: :attr:`stages` cycles (``ceil(log2 period)``, at least 1). Throughput: one word
    set per cycle, no handshake (the caller carries its own valid bits beside the words).

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

    Members
    -------
    i{k} : In(width)
        Input word at position ``k``, ``k`` in ``range(period)``.
    o{k} : Out(width)
        Output word at position ``k``, registered.
    """

    def __init__(self, width: int, period: int, *, phase: int = 0, step: int = 1,
                 select_bits: int = 16, position_copies: bool = False):
        for name, value in (("width", width), ("period", period),
                            ("select_bits", select_bits)):
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
        members = {}
        for k in range(period):
            members[f"i{k}"] = In(width)
        for k in range(period):
            members[f"o{k}"] = Out(width)
        super().__init__(members)

    @property
    def stages(self) -> int:
        """Register stages, one per bit of the amount (at least one)."""
        return rotation_stages(self.period)

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

    def elaborate(self, platform):
        m = Module()
        words = [getattr(self, f"i{k}") for k in range(self.period)]
        slices = [(lo, min(lo + self.select_bits, self.width))
                  for lo in range(0, self.width, self.select_bits)]
        for stage in range(self.stages):
            shift = (1 << stage) % self.period
            shared = [self._amount_copy(m, f"stage{stage}_amount{n}", stage)[stage]
                      if shift and not self.position_copies else 0
                      for n in range(len(slices))]
            rotated = []
            for k in range(self.period):
                selects = shared if not (shift and self.position_copies) else [
                    self._amount_copy(m, f"stage{stage}_word{k}_amount{n}", stage)[stage]
                    for n in range(len(slices))]
                word = Signal(self.width, name=f"stage{stage}_word{k}", reset_less=True)
                here, there = words[k], words[(k + shift) % self.period]
                m.d.sync += word.eq(Cat(Mux(select, there[lo:hi], here[lo:hi])
                                        for select, (lo, hi) in zip(selects, slices)))
                rotated.append(word)
            words = rotated
        for k, word in enumerate(words):
            m.d.comb += getattr(self, f"o{k}").eq(word)
        return m
