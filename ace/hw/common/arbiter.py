"""Round-robin arbiter: one grant among ``n`` requesters per cycle, fair by rotation.

Reusable by every block that shares one resource among several requesters: the SRAM crossbar
(one arbiter per bank and direction), the NIC (channels sharing a link, held for a whole packet
with ``advance`` low) and the sequencer.
"""

from __future__ import annotations

import functools
import operator

from amaranth.hdl import Cat, Module, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["RoundRobinArbiter", "one_hot_select"]


def one_hot_select(grant, values):
    """The one of ``values`` (Values or Views of equal width) whose bit of ``grant`` is set,
    zero when ``grant`` is zero; ``grant`` must have at most one bit set. Combinational, an AND
    and an OR tree: ``1 + ceil(log2(len(values)))`` gate levels, where a switch on the grant's
    index adds the index decode."""
    values = [Value.cast(value) for value in values]
    return functools.reduce(operator.or_, (value & grant[i].replicate(len(value))
                                           for i, value in enumerate(values)))


class RoundRobinArbiter(wiring.Component):
    """Round-robin arbiter with a combinational grant.

    The grant goes to the first requester at or after the *priority pointer*, in increasing index
    order and wrapping around. At every clock edge where ``valid`` is high, the pointer moves:

    * ``advance`` high (the default): to the requester just after the one granted, so the
      granted requester becomes the lowest priority. Every requester that keeps its request up
      is granted within ``n`` grants (no starvation).
    * ``advance`` low: onto the requester granted, so it keeps the grant in the next cycle for as
      long as it keeps requesting (lock, e.g. for the beats of a packet).

    With no request the pointer stays. After reset the pointer is 0.

    Latency: combinational (``requests`` to ``grant`` in the same cycle); one grant per cycle.

    Parameters
    ----------
    n : int
        Number of requesters, at least 1.

    Members
    -------
    requests : In(n)
        One request bit per requester.
    advance : In(1), init 1
        Rotate priority past this cycle's grant (high) or hold the grant (low).
    grant : Out(n)
        One-hot grant, or zero when nobody requests; combinational.
    grant_index : Out(range(n))
        Index of the granted requester (0 when ``valid`` is low); combinational.
    valid : Out(1)
        Some requester is granted; combinational.
    """

    def __init__(self, n: int):
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"n: {n!r} is not valid; allowed: an integer of at least 1")
        self.n = n
        super().__init__({
            "requests": In(n),
            "advance": In(1, init=1),
            "grant": Out(n),
            "grant_index": Out(range(n)),
            "valid": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.n
        if n == 1:
            m.d.comb += [
                self.grant.eq(self.requests),
                self.valid.eq(self.requests[0]),
            ]
            return m

        # The priority pointer is kept as a thermometer mask: bit i is set when requester i is
        # at or after the pointer. All ones after reset (pointer 0).
        at_or_after = Signal(n, name="at_or_after", init=(1 << n) - 1)
        high = Signal(n, name="high_requests")
        m.d.comb += high.eq(self.requests & at_or_after)

        def lowest_one(value):
            return (value & (~value + 1))[:n]

        with m.If(high.any()):
            m.d.comb += self.grant.eq(lowest_one(high))
        with m.Else():
            m.d.comb += self.grant.eq(lowest_one(self.requests))

        # The grant is one-hot, so bit k of its index is the OR of the grants whose index has
        # bit k set (log2(n) gate levels, not a chain of n muxes).
        for k in range(len(self.grant_index)):
            m.d.comb += self.grant_index[k].eq(
                Cat(self.grant[i] for i in range(n) if i >> k & 1).any())
        m.d.comb += self.valid.eq(self.requests.any())

        # Requesters at or before the grant: (grant << 1) - 1; strictly after: the complement.
        up_to_grant = Signal(n, name="up_to_grant")
        m.d.comb += up_to_grant.eq(((self.grant << 1) - 1)[:n])
        with m.If(self.valid):
            with m.If(self.advance):
                m.d.sync += at_or_after.eq(~up_to_grant)
            with m.Else():
                m.d.sync += at_or_after.eq(~up_to_grant | self.grant)
        return m
