"""Ring: members pass pieces to the next member around the group.

Reduce-scatter of a region of S bytes over g members: g-1 steps of S/g bytes. Member m sends
part m-1, then in step t receives part m-1-t from member m-1, reduces it with its own copy and
sends the sum on to member m+1 (``rrs``, cut-through: nothing is written), and in the last step
keeps the sum of its own part m (``rrc``). All-gather is the mirror: send part m, pass g-2 parts
through (``rcs``), receive part m+1. Each member sends and receives (g-1) S/g bytes per phase, the
bandwidth bound.

Deadlock-free: every member sends before its first receive, and the message a member receives in
step t is the one its predecessor sent in step t-1, so the dependences run around the ring one
step behind and never close a cycle. A send never waits for its receiver, because a message is at
most ``packet_bytes`` (half a receive buffer; ``compile_collective`` cuts smaller chunks until it
is).
"""

from __future__ import annotations

from .emit import NodeChunk, Phase


def reduce_scatter(nc: NodeChunk, ph: Phase) -> None:
    m, nxt, prv = ph.me, ph.member(ph.me + 1), ph.member(ph.me - 1)
    nc.s(ph.part(m - 1), nxt)
    for t in range(1, ph.size - 1):
        nc.rrs(ph.part(m - 1 - t), prv, nxt)
    nc.rrc(ph.part(m), prv)


def all_gather(nc: NodeChunk, ph: Phase) -> None:
    m, nxt, prv = ph.me, ph.member(ph.me + 1), ph.member(ph.me - 1)
    nc.s(ph.part(m), nxt)
    for t in range(1, ph.size - 1):
        nc.rcs(ph.part(m - t), prv, nxt)
    nc.r(ph.part(m + 1), prv)
