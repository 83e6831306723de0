"""Hierarchical collectives over three topology dimensions (the 3D torus of the ``torus4x4x4``
system): programs run in the golden model against independent numpy references
(``test_compiler.check``), both modes, with the phase order of ``ace.sw.compiler.hierarchical``
(reduce-scatter on dims 0 and 1, all-reduce on dim 2, all-gather on dims 1 and 0)."""

import pytest

from ace.sw.compiler import compile_collective
from ace.sw.program import Topology
from sim_harness.metrics import ideal_link_bytes, phases
from test_compiler import TINY, check

# A reduce-scatter or all-gather chunk holds at least one SRAM word of each of the 64 nodes'
# blocks: 8 KiB SRAMs, 256 words per slot (TINY's 16 refuse 64 blocks with a CompileError).
CFG = TINY.replace(input_buffer_bytes=8 << 10, output_buffer_bytes=8 << 10)
SRAM_ELEMS = CFG.input_buffer_bytes // 4


@pytest.mark.parametrize("mode", ["ace", "baseline"])
@pytest.mark.parametrize("coll", ["allreduce", "reduce_scatter", "allgather"])
@pytest.mark.parametrize("algorithm", ["ring", "bidirectional_ring"])
def test_torus_4x4x4(algorithm, coll, mode):
    # One element; 67 (not a multiple of the 64 nodes or of a word); several chunks (an
    # all-reduce larger than an SRAM slot; a reduce-scatter or all-gather of 300 elements
    # needs two, each chunk holding a piece of every one of the 64 blocks).
    for count in (1, 67, SRAM_ELEMS // 2 + 9 if coll == "allreduce" else 300):
        check(coll, count, "torus:4x4x4", algorithm, mode, seed=count, config=CFG)


@pytest.mark.parametrize("topology, algorithm", [
    ("torus:3x2x4", ("ring", "direct", "bidirectional_ring")),
    ("torus:2x3x3", ("bidirectional_ring", "ring", "double_binary_tree")),
    ("torus:2x4x2", ("halving_doubling", "bidirectional_ring", "ring"))])
@pytest.mark.parametrize("mode", ["ace", "baseline"])
def test_mixed_algorithms_per_dimension(topology, algorithm, mode):
    colls = ["allreduce"] + ([] if "double_binary_tree" in algorithm
                             else ["reduce_scatter", "allgather"])
    for coll in colls:
        for count in (5, 300):
            check(coll, count, topology, algorithm, mode, seed=count, config=CFG)


def test_phase_order_over_three_dimensions():
    """All-reduce on 4x4x4, one chunk: node 0's communication visits the dimensions' links in
    the order RS dim 0 (links 0/1), RS dim 1 (2/3), AR dim 2 (4/5), AG dim 1, AG dim 0; the
    bound's busiest link is dimension 0's: 3/4 S + 3/4 S (dimension 1's carry 2 x 3/16 S,
    dimension 2's 2 x 3/64 S)."""
    prog = compile_collective("allreduce", 64 * 4, topology="torus:4x4x4", config=CFG, chunks=1)
    steps = [s for s in prog.nodes[0].channels[1].steps if {"send", "recv"} & s.uses]
    dims = [(s.send_link if "send" in s.uses else s.recv_link) // 2 for s in steps]
    collapsed = [d for k, d in enumerate(dims) if k == 0 or dims[k - 1] != d]
    assert collapsed == [0, 1, 2, 1, 0]
    assert [ph["kind"] for ph in phases("allreduce", "ring", "torus:4x4x4")] == \
        ["rs", "rs", "ar", "ag", "ag"]
    S = 1 << 20
    assert ideal_link_bytes("allreduce", "ring", "torus:4x4x4", S) == \
        S * (3 / 4 + 3 / 4)
    assert Topology.parse("torus:4x4x4").num_links == 6
