"""Halving-doubling (recursive halving, then recursive doubling); group sizes powers of two.

Reduce-scatter of a region of S bytes over g = 2^k members: k steps. In each the members still
holding a range of parts split it in two halves; a member pairs with the member at the same place
in the other half, sends it the half it gives away and receives and reduces (``rrc``) the half it
keeps: S/2, S/4, ..., S/g bytes. All-gather runs the steps backwards with doubling distance 1, 2,
4, ...: a member sends the d parts it has and receives its partner's d parts (S/g, 2S/g, ...).
Each member moves (g-1) S/g bytes in log2(g) steps (the fewest steps, the bandwidth bound).

Deadlock-free: every step is a pairwise exchange in which both partners send before they
receive, and both partners are at the same step; sends never wait for the receiver (messages are
at most ``packet_bytes``).
"""

from __future__ import annotations

from .emit import NodeChunk, Phase


def _parts(ph: Phase, lo: int, hi: int) -> list[tuple[int, int]]:
    return [pc for k in range(lo, hi) for pc in ph.parts[k]]


def reduce_scatter(nc: NodeChunk, ph: Phase) -> None:
    m, lo, hi = ph.me, 0, ph.size
    while hi - lo > 1:
        half = (hi - lo) // 2
        mid = lo + half
        if m < mid:
            keep, give, partner = (lo, mid), (mid, hi), m + half
        else:
            keep, give, partner = (mid, hi), (lo, mid), m - half
        nc.s(_parts(ph, *give), ph.group[partner])
        nc.rrc(_parts(ph, *keep), ph.group[partner])
        lo, hi = keep


def all_gather(nc: NodeChunk, ph: Phase) -> None:
    d = 1
    while d < ph.size:
        partner = ph.me ^ d
        mine, theirs = ph.me - ph.me % d, partner - partner % d
        nc.s(_parts(ph, mine, mine + d), ph.group[partner])
        nc.r(_parts(ph, theirs, theirs + d), ph.group[partner])
        d *= 2
