"""Checks of a compiled program's structure that do not trust the compiler: the order its
steps' dependencies force on each node (happens-before), and that no load or store can run at
once with a step that touches the same SRAM."""

from __future__ import annotations

__all__ = ["happens_before", "assert_loads_and_stores_ordered"]


def happens_before(node) -> tuple[dict, dict]:
    """``(channel, step) -> bitset`` of the steps that must be done before it starts (the
    earlier steps of its channel and each dependency, transitively), and each step's bit."""
    bit, preds = {}, {}
    for c, ch in enumerate(node.channels):
        for k, step in enumerate(ch.steps):
            bit[(c, k)] = 1 << len(bit)
            preds[(c, k)] = ([(c, k - 1)] if k else []) + ([tuple(step.dep)] if step.dep else [])
    before: dict = {}
    for root in bit:                            # depth first, without recursion
        if root in before:
            continue
        path, on_path = [(root, iter(preds[root]))], {root}
        while path:
            key, rest = path[-1]
            nxt = next((p for p in rest if p not in before), None)
            if nxt is not None:
                assert nxt not in on_path, f"node {node.node}: dependency cycle at {nxt}"
                path.append((nxt, iter(preds[nxt])))
                on_path.add(nxt)
                continue
            path.pop()
            on_path.discard(key)
            before[key] = 0
            for p in preds[key]:
                before[key] |= before[p] | bit[p]
    return before, bit


def assert_loads_and_stores_ordered(prog):
    """Independent of how the importer places them: every load is ordered (before or after)
    with every other step that touches the SRAM it writes, and every store with every step
    that writes what it reads (no two of them may run at once)."""
    def span(ref, count):
        return (str(getattr(ref[0], "value", ref[0])), ref[1], ref[1] + count)

    def overlap(a, b):
        return a[0] == b[0] and a[1] < b[2] and b[1] < a[2]

    for node in prog.nodes:
        before, bit = happens_before(node)
        steps = [(c, k, st) for c, ch in enumerate(node.channels) for k, st in enumerate(ch.steps)]
        for c, k, st in steps:
            if st.type not in ("load", "store"):
                continue
            mine = span(st.dst if st.type == "load" else st.src, st.count)
            for c2, k2, other in steps:
                if (c2, k2) == (c, k) or other.type in ("load", "store", "nop", "end"):
                    continue
                sides = ([other.src, other.dst] if st.type == "load" else [other.dst])
                if any(ref is not None and overlap(mine, span(ref, other.count))
                       for ref in sides):
                    ordered = (before[(c2, k2)] & bit[(c, k)]) or (before[(c, k)] & bit[(c2, k2)])
                    assert ordered, (f"node {node.node}: {st.type} at ({c}, {k}) and "
                                     f"{other.type} at ({c2}, {k2}) may run at once")
