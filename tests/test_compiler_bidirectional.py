"""The bidirectional ring (``ace.sw.compiler.bidirectional_ring``): its programs run in the
golden model against independent numpy references (``test_compiler.check``: wraparound sums,
max/min, pure data movement; memory and link counters equal to the static analysis), on many
sizes, in both modes; each half of every chunk goes its own way on its own channel; and the
link bytes equal the metrics' analytic bound."""

import numpy as np
import pytest

from ace.sw.compiler import CompileError, compile_collective
from ace.sw.golden import run
from ace.sw.program import Topology, link_traffic
from sim_harness.metrics import ideal_link_bytes, latency_steps
from test_compiler import SRAM_ELEMS, TINY, check

ALG = "bidirectional_ring"
# One element, fewer than 2p, not divisible by 2p, words not divisible by 2, several SRAMs.
SIZES = [1, 2, 5, 17, 37, 4 * 8 * 4 + 4, 3 * SRAM_ELEMS + 5]


@pytest.mark.parametrize("mode", ["ace", "baseline"])
@pytest.mark.parametrize("coll", ["allreduce", "reduce_scatter", "allgather"])
@pytest.mark.parametrize("p", [2, 3, 5, 8])
def test_matrix_bit_exact(p, coll, mode):
    for count in SIZES:
        prog, _ = check(coll, count, Topology.ring(p), ALG, mode, seed=count * 10 + p)
        if count > SRAM_ELEMS:
            assert prog.chunks > 1


@pytest.mark.parametrize("dtype,op", [("fp32", "max"), ("bf16", "min"), ("fp16", "max"),
                                      ("int32", "min")])
@pytest.mark.parametrize("mode", ["ace", "baseline"])
def test_float_max_min(dtype, op, mode):
    check("allreduce", 2 * SRAM_ELEMS + 3, Topology.ring(4), ALG, mode, dtype=dtype, op=op)
    check("reduce_scatter", 45, Topology.ring(5), ALG, mode, dtype=dtype, op=op)


@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32"])
def test_all_gather_moves_any_dtype(dtype):
    check("allgather", 3 * SRAM_ELEMS + 1, Topology.ring(3), ALG, "ace", dtype=dtype)
    check("allgather", 21, Topology.ring(4), ALG, "baseline", dtype=dtype)


@pytest.mark.parametrize("mode", ["ace", "baseline"])
def test_float_sum_order_is_each_directions_ring_order(mode):
    """fp32 all-reduce, one chunk, 4 nodes: the first half of the chunk sums block b from node
    b+1 upwards (b+1, b+2, b+3, b), the second half from node b-1 downwards (b-1, b-2, b-3, b):
    an independent sequential numpy reference, bit-exact."""
    p, count = 4, 64
    prog = compile_collective("allreduce", count, nodes=p, algorithm=ALG, dtype="fp32",
                              config=TINY, chunks=1, mode=mode)
    rng = np.random.default_rng(5)
    inputs = [(rng.standard_normal(count) * 10.0 ** rng.integers(-3, 4, count))
              .astype(np.float32) for _ in range(p)]
    out = run(prog, inputs).outputs
    expected = np.empty(count, np.float32)
    half, part = count // 2, count // 2 // p
    for lane, step in ((0, 1), (1, -1)):
        for b in range(p):
            sl = slice(lane * half + b * part, lane * half + (b + 1) * part)
            acc = inputs[(b + step) % p][sl].copy()
            for k in range(2, p + 1):
                acc = (acc + inputs[(b + step * k) % p][sl]).astype(np.float32)
            expected[sl] = acc
    for n in range(p):
        np.testing.assert_array_equal(out[n].view(np.uint32), expected.view(np.uint32))


def test_halves_go_opposite_ways_on_separate_channels():
    """One chunk on a 4-channel engine (two movers, two communicating channels): channel 2
    carries the first half toward the +1 neighbour (link 0) and channel 3 the second half
    toward the -1 neighbour (link 1); each moves the same bytes. The chunk is the first and
    the last of its channels: the movers load a half's ring parts in the order its channel
    reads them, the first two parts (one per mover, the first two steps') cut in two, a
    piece per mover, the other two whole, one each; a channel's first send waits only for
    its part; each ring part is stored once final, after a wait for the step that wrote it."""
    cfg = TINY.replace(num_channels=4, mem_id_bits=3, input_buffer_bytes=1 << 12,
                       output_buffer_bytes=1 << 12)
    p, count = 4, 64
    part = count // 2 // p                  # a ring part of a half
    prog = compile_collective("allreduce", count, nodes=p, algorithm=ALG, config=cfg, chunks=1)
    for node in prog.nodes:
        n = node.node
        stored = []
        for mover in (0, 1):
            steps = node.channels[mover].steps
            lane = [("load", part // 2)] * 2 + [("load", part)] * ((p - 2) // 2)
            assert [(s.type, s.count) for s in steps if s.type != "nop"] == \
                lane * 2 + [("store", part)] * p
            for k, store in enumerate(steps):
                if store.type == "store":
                    wait = steps[k - 1]
                    assert wait.type == "nop" and wait.dep[0] in (2, 3)
                    writer = node.channels[wait.dep[0]].steps[wait.dep[1]]
                    assert writer.dst == store.src and writer.count == store.count
                    stored.append(store.src[1])
        assert sorted(stored) == list(range(0, count, part))
        for chan, to, frm, link in ((2, (n + 1) % p, (n - 1) % p, 0),
                                    (3, (n - 1) % p, (n + 1) % p, 1)):
            steps = node.channels[chan].steps
            half = chan - 2
            per_lane = 2 + (p - 2) // 2         # loads per mover and lane
            assert [s.dep for s in steps[:2]] == [(0, per_lane * half), (1, per_lane * half)]
            first = [node.channels[m].steps[per_lane * half] for m in (0, 1)]
            assert steps[2].type == "s" and steps[2].count == part
            assert sorted(ld.dst[1] for ld in first) == [steps[2].src[1],
                                                         steps[2].src[1] + part // 2]
            assert all(s.type not in ("load", "store") for s in steps)
            sends = [s for s in steps if "send" in s.uses]
            assert {(s.send_peer, s.send_link) for s in sends} == {(to, link)}
            assert {s.recv_peer for s in steps if "recv" in s.uses} == {frm}
            assert sum(s.count for s in sends) == 2 * (p - 1) * count // 2 // p


@pytest.mark.parametrize("coll, p", [("allreduce", 8), ("allreduce", 2), ("allreduce", 3),
                                     ("reduce_scatter", 4), ("allgather", 8)])
def test_link_bytes_are_the_analytic_bound(coll, p):
    """Where every split is exact, each direction of each link carries exactly the metrics'
    ideal bytes: half the ring's (the whole ring's on 2 nodes, one link); the latency steps
    are the ring's."""
    count = 2 * 2 * p * 4 * 16      # 2 chunks x 2 lanes x p parts x 16 words of 4 elements
    cfg = TINY.replace(input_buffer_bytes=1 << 14, output_buffer_bytes=1 << 14)
    prog = compile_collective(coll, count, nodes=p, algorithm=ALG, config=cfg, chunks=2)
    nbytes = count * 4
    ideal = ideal_link_bytes(coll, ALG, f"ring:{p}", nbytes)
    ring = ideal_link_bytes(coll, "ring", f"ring:{p}", nbytes)
    assert ideal == (ring if p == 2 else ring / 2)
    tx = {(n, link): b for (n, d, link), b in link_traffic(prog).items() if d == "tx" and b}
    assert set(tx) == {(n, link) for n in range(p) for link in ((0,) if p == 2 else (0, 1))}
    assert set(tx.values()) == {ideal}
    assert latency_steps(coll, ALG, f"ring:{p}") == latency_steps(coll, "ring", f"ring:{p}")


def test_hierarchical_mixes_and_errors():
    """Per dimension: a bidirectional ring next to a ring or direct dimension, bit-exact;
    all-to-all has no bidirectional ring."""
    for coll in ("allreduce", "reduce_scatter", "allgather"):
        check(coll, 2 * SRAM_ELEMS + 7, "torus:4x3", (ALG, "ring"), "ace", seed=3)
        check(coll, 43, "torus:3x4", ("ring", ALG), "baseline", seed=4)
        check(coll, 29, "fully_connected:3x2", (ALG, "direct"), "ace", seed=5)
    with pytest.raises(CompileError, match="alltoall supports the direct and ring"):
        compile_collective("alltoall", 10, nodes=4, algorithm=ALG, config=TINY)
