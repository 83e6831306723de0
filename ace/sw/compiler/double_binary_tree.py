"""Double binary tree all-reduce (all-reduce phases only).

Two balanced in-order binary trees over the g members, the second shifted by one member, so
that a member is a leaf in at least one tree and an interior node is in at most two. The region
(S bytes) is cut in two halves, one per tree. Each tree reduces its half up to its root and
broadcasts the result back down. Order on every member: reduce in tree A, reduce in tree B,
broadcast in tree A, broadcast in tree B. A leaf sends its half to its parent; an interior member
receives and reduces (``rrc``) from each child but the last, and for the last child receives,
reduces and sends the sum up (``rrs``); the root keeps it (``rrc``). Down: the root sends to its
children, an interior member receives, keeps and forwards to its first child (``rcs``) and sends
to the others, a leaf receives. Every edge carries S/2 bytes up and S/2 down per tree; the depth
is log2(g), so the latency term grows with log2(g) instead of the ring's g.

Deadlock-free: the trees have no cycle. In the reduce a member waits only for its children,
which send before they receive anything in that tree (leaves) or after their own children (by
induction on the height); in the broadcast only for its parent, which received from its own
parent earlier. The fixed order of the four passes is the same on every member, so a wait in one
pass never depends on a later pass.
"""

from __future__ import annotations

from ace.sw.program import split_aligned

from .emit import NodeChunk, Phase


def _tree(g: int, shift: int) -> tuple[list, list]:
    """(parent, children) by member of the balanced in-order tree over members shifted by
    ``shift``: the middle member of a range is the root of its subtree."""
    parent: list[int | None] = [None] * g
    children: list[list[int]] = [[] for _ in range(g)]

    def build(lo: int, hi: int, up: int | None) -> None:
        if lo >= hi:
            return
        mid = (lo + hi) // 2
        node = (mid + shift) % g
        parent[node] = up
        if up is not None:
            children[up].append(node)
        build(lo, mid, node)
        build(mid + 1, hi, node)
    build(0, g, None)
    return parent, children


def _reduce_up(nc: NodeChunk, ph: Phase, half, up, kids) -> None:
    if not kids:
        nc.s(half, ph.group[up])
        return
    for k, child in enumerate(kids):
        if k == len(kids) - 1 and up is not None:
            nc.rrs(half, ph.group[child], ph.group[up])
        else:
            nc.rrc(half, ph.group[child])


def _broadcast_down(nc: NodeChunk, ph: Phase, half, up, kids) -> None:
    if up is None:
        for child in kids:
            nc.s(half, ph.group[child])
    elif not kids:
        nc.r(half, ph.group[up])
    else:
        nc.rcs(half, ph.group[up], ph.group[kids[0]])
        for child in kids[1:]:
            nc.s(half, ph.group[child])


def all_reduce(nc: NodeChunk, ph: Phase) -> None:
    halves: list[list[tuple[int, int]]] = [[], []]
    for start, length in ph.whole:
        for h, (s, n) in enumerate(split_aligned(length, 2, nc.comp.epw)):
            if n:
                halves[h].append((start + s, n))
    trees = [_tree(ph.size, shift) for shift in (0, 1)]
    for half, (parent, children) in zip(halves, trees):
        _reduce_up(nc, ph, half, parent[ph.me], children[ph.me])
    for half, (parent, children) in zip(halves, trees):
        _broadcast_down(nc, ph, half, parent[ph.me], children[ph.me])
