"""All-to-all (one-dimensional topologies): node n sends block j of its input to node j.

Each chunk carries a sub-block of every block; ``b`` below is one such sub-block.

* ``direct``: p-1 rounds; in round r node n sends the sub-block for n+r to node n+r and
  receives its own sub-block from n-r (b bytes each way). Deadlock-free as the direct
  reduce-scatter: each round sends before it receives, and a round's receive is matched by the
  peer's send of the same round.
* ``ring``: waves of distance D = 1 .. p-1 around the ring. In wave D node n sends the
  sub-block for n+D to n+1, forwards (``rcs``) the D-1 sub-blocks passing through it (each
  lands on the input slice of its destination, whose own sub-block has already left), and
  receives the sub-block from n-D. A node sends and receives p(p-1)/2 sub-blocks, the bound of
  a unidirectional ring. Deadlock-free: each wave starts with a send and each later send of the
  wave carries what the step received, so no burst of sends exceeds one message before a
  receive (``max_message_bytes`` counts such bursts) and the waves follow one another around
  the ring in order.
"""

from __future__ import annotations

from ace.vocab import Algorithm, StepType

from .emit import NodeChunk

__all__ = ["ALLTOALL"]


def direct(nc: NodeChunk) -> None:
    segs, n, p = nc.chunk.segments, nc.node, nc.comp.num_nodes
    mine = segs[n]
    sub_off = mine.glob - nc.block[0]
    for r in range(1, p):
        d, o = (n + r) % p, (n - r) % p
        if segs[d].length:
            nc.emit(StepType.SEND, segs[d].length, src=nc.slice_of("in", segs[d].local), to=d)
        if mine.length:
            nc.emit(StepType.RECV, mine.length, dst=nc.alltoall_out(o, mine.length, sub_off),
                    frm=o)


def ring(nc: NodeChunk) -> None:
    segs, n, p = nc.chunk.segments, nc.node, nc.comp.num_nodes
    mine = segs[n]
    sub_off = mine.glob - nc.block[0]
    nxt, prv = (n + 1) % p, (n - 1) % p
    for wave in range(1, p):
        d = (n + wave) % p
        if segs[d].length:
            nc.emit(StepType.SEND, segs[d].length, src=nc.slice_of("in", segs[d].local), to=nxt)
        for h in range(1, wave):
            dest = segs[(n - h + wave) % p]
            if dest.length:
                nc.emit(StepType.RCS, dest.length, dst=nc.slice_of("fwd", dest.local), frm=prv,
                        to=nxt)
        if mine.length:
            nc.emit(StepType.RECV, mine.length,
                    dst=nc.alltoall_out((n - wave) % p, mine.length, sub_off), frm=prv)


#: The all-to-all algorithms by name.
ALLTOALL = {Algorithm.DIRECT: direct, Algorithm.RING: ring}
