"""The movers of ACE-mode programs (:mod:`ace.sw.compiler`, "movers"): which channels load and
store, how a chunk's transfers are shared among them, and that the hand-offs leave no race
(:func:`testbench.program_checks.races`, independent of the compiler's bookkeeping).
"""

from __future__ import annotations

import numpy as np
import pytest

from ace.config import NAMED_CONFIGS
from ace.sw.compiler import compile_collective
from ace.sw.compiler.build import movers_of
from ace.sw.golden import run
from ace.sw.program import memory_traffic
from testbench.program_checks import races

SMALL = NAMED_CONFIGS["small"].replace(input_buffer_bytes=4096, output_buffer_bytes=4096,
                                       sram_banks=2, program_words=2048, num_links=8,
                                       mem_id_bits=4)


def test_race_check_finds_an_unordered_store():
    """The check itself: dropping the dependency of a store's wait makes a race."""
    prog = compile_collective("allgather", 4 * 64, nodes=4, config=SMALL.replace(num_channels=4),
                              chunks=4)
    node = prog.nodes[0]
    assert races(node) == []
    mover = node.channels[0].steps
    k = next(i for i, st in enumerate(mover) if st.type == "store") - 1
    assert mover[k].type == "nop" and mover[k].dep is not None
    mover[k].dep = None
    assert races(node)


@pytest.mark.parametrize("channels", [2, 3, 4, 7])
@pytest.mark.parametrize("collective, topology, algorithm", [
    ("allreduce", "ring:4", "ring"), ("reduce_scatter", "ring:5", "ring"),
    ("allgather", "ring:4", "ring"), ("alltoall", "ring:4", "ring"),
    ("allreduce", "ring:4", "bidirectional_ring"), ("allgather", "ring:3", "bidirectional_ring"),
    ("allreduce", "torus:4x2", "ring"), ("reduce_scatter", "torus:2x3", "ring"),
    ("allgather", "torus:4x2", "ring"), ("allreduce", "switch:4", "halving_doubling"),
    ("allreduce", "switch:4", "double_binary_tree"), ("alltoall", "switch:4", "direct"),
    ("reduce_scatter", "fully_connected:4", "direct"),
])
@pytest.mark.parametrize("count", [3 * 1024 + 12, 5])
def test_no_races_and_bit_exact(collective, topology, algorithm, channels, count):
    """ACE-mode programs over several chunks (a ragged last word), and of a few elements
    (transfers too short to share): no race on any node, the golden model's results those
    of numpy, and the memory traffic exactly the input and the output once."""
    config = SMALL.replace(num_channels=channels)
    prog = compile_collective(collective, count, topology=topology, algorithm=algorithm,
                              dtype="int32", config=config)
    assert prog.chunks >= 4 or count < 1024
    for node in prog.nodes:
        assert races(node) == [], f"node {node.node}: {races(node)[:3]}"
    rng = np.random.default_rng(7)
    inputs = [rng.integers(-1000, 1000, node.in_elems, dtype=np.int32) for node in prog.nodes]
    outputs = run(prog, inputs).outputs
    total = np.sum(np.stack([x.astype(np.int64) for x in inputs]), axis=0).astype(np.int32) \
        if collective in ("allreduce", "reduce_scatter") else None
    for node, out in zip(prog.nodes, outputs):
        if collective == "allreduce":
            np.testing.assert_array_equal(out, total)
        elif collective == "reduce_scatter":
            start, length = prog.blocks[node.node]
            np.testing.assert_array_equal(out, total[start:start + length])
        elif collective == "allgather":
            np.testing.assert_array_equal(out, np.concatenate(
                [inputs[j][:length] for j, (_, length) in enumerate(prog.blocks)]))
    if collective != "alltoall":             # its output has padding never written
        assert memory_traffic(prog)["per_node"] == [(4 * node.in_elems, 4 * node.out_elems)
                                                    for node in prog.nodes]


@pytest.mark.parametrize("channels, movers", [(1, 0), (2, 1), (3, 1), (4, 2), (7, 2)])
def test_movers_move_and_the_others_communicate(channels, movers):
    """Channels 0..D-1 run every load (and, with two or more movers, every store), each about
    an equal share of the bytes; the other channels only communicate (and store with one
    mover)."""
    assert movers_of(channels) == movers
    assert movers_of(channels, 2) == min(movers, 1)      # hierarchical: one mover at most
    config = SMALL.replace(num_channels=channels)
    prog = compile_collective("reduce_scatter", 4 * 1024, nodes=4, dtype="int32",
                              config=config)
    for node in prog.nodes:
        loads = [sum(s.nbytes for s in ch.steps if s.type == "load") for ch in node.channels]
        stores = [sum(s.nbytes for s in ch.steps if s.type == "store") for ch in node.channels]
        if movers == 0:
            continue
        assert sum(loads[movers:]) == 0
        assert max(loads[:movers]) - min(loads[:movers]) <= 16 * prog.chunks
        if movers >= 2:
            assert sum(stores[movers:]) == 0
            assert max(stores[:movers]) - min(stores[:movers]) <= 16 * prog.chunks
        else:
            assert sum(stores[:movers]) == 0
        for ch in node.channels[movers:]:
            assert any({"send", "recv"} & s.uses for s in ch.steps)


def test_hierarchical_collectives_keep_one_loader():
    """On a 2-D torus a 4-channel engine keeps one loader and three communicating channels
    that store their own results (its latency-bound phases need the third channel)."""
    prog = compile_collective("allreduce", 4 * 1024, topology="torus:4x2", dtype="int32",
                              config=SMALL.replace(num_channels=4))
    for node in prog.nodes:
        kinds = [{s.type for s in ch.steps} for ch in node.channels]
        assert kinds[0] <= {"load", "nop"}
        assert all("store" in k and "load" not in k for k in kinds[1:])


# -- fill and drain: the first send waits for one step's data, the last step leaves one piece --

def _loaded_before(node, wait_steps):
    """The SRAM elements ``(buffer, offset)`` that the movers' loads write up to the steps
    that ``wait_steps`` (nops) wait for: what a step after those nops may count on."""
    upto = {}
    for st in wait_steps:
        if st.type == "nop" and st.dep is not None:
            mover, index = st.dep
            upto[mover] = max(upto.get(mover, -1), index)
    elements = set()
    for mover, index in upto.items():
        for st in node.channels[mover].steps[:index + 1]:
            if st.type == "load":
                elements |= {(st.dst[0], st.dst[1] + k) for k in range(st.count)}
    return elements


@pytest.mark.parametrize("nbytes", [128 << 10, 1 << 20])
def test_first_send_waits_for_its_own_data_only(nbytes):
    """ring8 (the harness engine: two movers, two communicating channels), fp32 all-reduce:
    on every node, the loads that channel 2's first send waits for are exactly the slice it
    sends, one message (at most ``packet_bytes``), not the whole of chunk 0 (before, it waited
    for the chunk: 8x as many bytes at 128 KiB); the program has no race."""
    from sim_harness.systems import HARNESS_CONFIG
    p = 8
    prog = compile_collective("allreduce", nbytes // 4, topology=f"ring:{p}", dtype="fp32",
                              config=HARNESS_CONFIG)
    assert movers_of(HARNESS_CONFIG.num_channels) == 2
    for node in prog.nodes:
        steps = node.channels[2].steps
        first = next(k for k, st in enumerate(steps) if "send" in st.uses)
        send = steps[first]
        assert send.type == "s" and all(st.type == "nop" for st in steps[:first])
        part = {(send.src[0], send.src[1] + k) for k in range(send.count)}
        assert _loaded_before(node, steps[:first]) == part
        assert send.nbytes <= HARNESS_CONFIG.packet_bytes
        assert races(node) == []


def test_last_step_leaves_one_piece_to_store():
    """ring8, 128 KiB fp32 all-reduce: when a communicating channel's last step (its last
    chunk's final all-gather receive) ends, what is left to store is that step's piece alone:
    the movers' stores that wait for it write exactly its slice (before, half the chunk: the
    store of 4 of the 8 ring parts waited for the last of them); every other store of the
    last chunks waits for an earlier step."""
    from sim_harness.systems import HARNESS_CONFIG
    prog = compile_collective("allreduce", (128 << 10) // 4, topology="ring:8", dtype="fp32",
                              config=HARNESS_CONFIG)
    for node in prog.nodes:
        for chan in (2, 3):
            steps = node.channels[chan].steps
            last = max(k for k, st in enumerate(steps) if st.uses & {"send", "recv"})
            assert steps[last].type == "r"
            after = set()                   # stored by the stores after a wait for it
            for mover in (0, 1):
                waits_for_last = False
                for st in node.channels[mover].steps:
                    if st.type == "nop":
                        waits_for_last = st.dep == (chan, last)
                    elif st.type == "store" and waits_for_last:
                        after |= {(st.src[0], st.src[1] + j) for j in range(st.count)}
            dst = steps[last].dst
            assert after == {(dst[0], dst[1] + j) for j in range(steps[last].count)}
