"""Direct (all pairs): every member exchanges with every other member in g-1 rounds.

Reduce-scatter of a region of S bytes over g members: in round r = 1..g-1 member m sends part
m+r to member m+r (S/g bytes) and receives part m from member m-r, reducing it into its own
(``rrc``). All-gather: in round r member m sends its part to member m+r and receives part m-r
from member m-r. Each member sends and receives (g-1) S/g bytes, like the ring, but every step
talks to a different peer (it needs a fully connected or switched dimension) and nothing is
forwarded, so the latency term is one hop per round instead of the ring's g-1.

Deadlock-free: in every round a member sends before it receives, and the message it receives in
round r is the one member m-r sent in its own round r, before that member's receive of the round;
a round never waits on a later one, and sends never wait for the receiver (messages are at most
``packet_bytes``).
"""

from __future__ import annotations

from .emit import NodeChunk, Phase


def reduce_scatter(nc: NodeChunk, ph: Phase) -> None:
    m = ph.me
    for r in range(1, ph.size):
        nc.s(ph.part(m + r), ph.member(m + r))
        nc.rrc(ph.part(m), ph.member(m - r))


def all_gather(nc: NodeChunk, ph: Phase) -> None:
    m = ph.me
    for r in range(1, ph.size):
        nc.s(ph.part(m), ph.member(m + r))
        nc.r(ph.part(m - r), ph.member(m - r))
