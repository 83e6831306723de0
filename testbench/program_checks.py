"""A check of compiled programs that does not trust the compiler: SRAM races between channels.

Every node's steps are ordered by program order and dependencies alone (vector clocks), and
every two steps of different channels that touch a common SRAM element, one of them writing
it, must be ordered. The golden model runs a program step by step and cannot see such a race;
the RTL can (an unordered store reads a slice before its last write lands).
"""

from __future__ import annotations

__all__ = ["races", "assert_loads_and_stores_ordered"]


def _accesses(step):
    """(kind, buffer, start, count) of the SRAM slices ``step`` reads ("r") or writes ("w")."""
    out = []
    if step.src is not None and step.type != "load":
        out.append(("r", str(getattr(step.src[0], "value", step.src[0])), step.src[1],
                    step.count))
    if step.dst is not None and step.type != "store":
        out.append(("w", str(getattr(step.dst[0], "value", step.dst[0])), step.dst[1],
                    step.count))
    return out


def _clocks(channels):
    """Per channel and step: how many steps of each channel have finished before it starts,
    by program order and dependencies only (iterated to a fixed point)."""
    C = len(channels)
    clocks = [[None] * len(steps) for steps in channels]
    changed = True
    while changed:
        changed = False
        for c, steps in enumerate(channels):
            done = [0] * C
            for i, step in enumerate(steps):
                clock = list(done)
                if step.dep is not None:
                    dc, di = step.dep
                    if clocks[dc][di] is not None:
                        clock = [max(a, b) for a, b in zip(clock, clocks[dc][di])]
                    clock[dc] = max(clock[dc], di + 1)
                if clocks[c][i] != clock:
                    clocks[c][i], changed = clock, True
                done = list(clock)
                done[c] = i + 1
    return clocks


def races(node, involving: frozenset | None = None) -> list[tuple]:
    """Pairs of steps of ``node`` ``((channel, index), (channel, index))`` on different
    channels that touch a common SRAM element, at least one writing it, with no order between
    them; with ``involving``, only pairs of which a step has one of those types."""
    channels = [ch.steps for ch in node.channels]
    clocks = _clocks(channels)
    touching = [(c, i, acc) for c, steps in enumerate(channels) for i, st in enumerate(steps)
                for acc in _accesses(st)]
    found = []
    for a, (c1, i1, (k1, b1, s1, n1)) in enumerate(touching):
        for c2, i2, (k2, b2, s2, n2) in touching[a + 1:]:
            if c1 == c2 or "w" not in (k1, k2) or b1 != b2 or not (s1 < s2 + n2 and s2 < s1 + n1):
                continue
            if involving and not {channels[c1][i1].type, channels[c2][i2].type} & involving:
                continue
            if clocks[c2][i2][c1] <= i1 and clocks[c1][i1][c2] <= i2:
                found.append(((c1, i1), (c2, i2)))
    return found


def assert_loads_and_stores_ordered(prog) -> None:
    """No load or store of ``prog`` can run at once with a step of another channel that touches
    the same SRAM (the rest is the program's own order, which this does not judge: an imported
    algorithm may order two steps through another node)."""
    for node in prog.nodes:
        for (c1, i1), (c2, i2) in races(node, frozenset({"load", "store"})):
            first, second = node.channels[c1].steps[i1], node.channels[c2].steps[i2]
            raise AssertionError(f"node {node.node}: {first.type} at ({c1}, {i1}) and "
                                 f"{second.type} at ({c2}, {i2}) may run at once")
