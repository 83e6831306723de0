"""Carry-save sum of three operands: ``a + plus - minus`` as one adder behind a row of full
adders, with a zero test that needs no carries, and a ``<= 0`` test from the sign alone."""

from __future__ import annotations

from amaranth.hdl import C, Cat

__all__ = ["CarrySaveSum"]


class CarrySaveSum:
    """``a + plus - minus`` at ``a``'s width (modulo), kept as two operands and a carry in
    (``- minus`` is ``+ ~minus + 1``; with both terms a row of full adders, two gate levels,
    makes two operands of the three, where writing it out gives two adders in series). Its
    zero test needs no carries: the sum is zero exactly when, at every bit, ``x ^ y`` equals
    the carry that bit needs, ``x | y`` of the bit below (the carry in at bit 0): an XOR, an
    XNOR and an AND tree (log depth), where testing the sum waits for the adder."""

    def __init__(self, a, plus=None, minus=None):
        width = len(a)

        def widened(value):
            return Cat(value.as_unsigned(), C(0, width))[:width]

        x, y, self.carry_in = a.as_unsigned(), C(0, width), C(0, 1)
        if minus is not None:
            y, self.carry_in = ~widened(minus), C(1, 1)
        if plus is not None and minus is not None:
            b = widened(plus)
            x, y = x ^ b ^ y, ((x & b) | (x & y) | (b & y)) << 1
        elif plus is not None:
            y = widened(plus)
        self.x, self.y = x, y[:width]

    def sum(self):
        return (self.x + self.y + self.carry_in)[:len(self.x)]

    def is_zero(self):
        needed = Cat(self.carry_in, (self.x | self.y)[:-1])
        return ~((self.x ^ self.y) ^ needed).any()

    def at_most_zero(self):
        """``a + plus - minus <= 0``, from one sign: that of the sum less one, ``x + y`` without
        the carry in that ``- minus`` brings (one carry chain, no zero test). Needs ``minus``,
        and a width that holds ``a + plus - minus - 1`` signed."""
        assert self.carry_in.value == 1, "at_most_zero needs minus"
        return (self.x + self.y)[len(self.x) - 1]
