"""The collective compiler, checked by running its programs in the golden model against
independent numpy references (sums with wraparound, max/min, pure data movement)."""

import ml_dtypes
import numpy as np
import pytest

from ace.sw.compiler import CompileError, compile_collective
from ace.config import NAMED_CONFIGS
from ace.sw.golden import run
from ace.layouts import DTYPE_BYTES
from ace.sw.program import Topology, assemble, link_traffic, memory_traffic

# A tiny engine: 16-byte words, 512-byte SRAMs, 2 channels -> 16 int32 elements per chunk slot.
TINY = NAMED_CONFIGS["small"].replace(input_buffer_bytes=512, output_buffer_bytes=512,
                                      sram_banks=2, program_words=2048, num_links=8)
EPW = TINY.link_bytes // 4
SRAM_ELEMS = TINY.input_buffer_bytes // 4


def _pad(n, a):
    return -(-n // a) * a


def expected_blocks(count, dims, epw):
    """Node n's block: split by the last dimension first (independent re-implementation)."""
    def split(start, length, parts):
        words = -(-length // epw)
        base, extra = divmod(words, parts)
        out, w = [], 0
        for k in range(parts):
            n = base + (k < extra)
            s, e = min(start + w * epw, start + length), min(start + (w + n) * epw, start + length)
            out.append((s, e - s))
            w += n
        return out
    regions = [(0, count)]
    for d in reversed(dims):
        regions = [piece for s, n in regions for piece in split(s, n, d)]
    return regions


def reference(coll, inputs, blocks, op="sum", epw=EPW):
    p = len(inputs)
    if coll in ("allreduce", "reduce_scatter"):
        stack = np.stack(inputs)
        if op == "sum":
            total = stack.astype(np.int64).sum(axis=0).astype(np.int32)  # wraps like int32
        elif op == "max":
            total = np.maximum.reduce(stack, axis=0)
        else:
            total = np.minimum.reduce(stack, axis=0)
    outs = []
    for n in range(p):
        start, length = blocks[n]
        if coll == "allreduce":
            outs.append(total)
        elif coll == "reduce_scatter":
            outs.append(total[start:start + length])
        elif coll == "allgather":
            outs.append(np.concatenate(inputs))
        else:
            padded = _pad(length, epw)
            out = np.zeros((p - 1) * padded + length, dtype=inputs[0].dtype)
            for i in range(p):
                out[i * padded:i * padded + length] = inputs[i][start:start + length]
            outs.append(out)
    return outs


def check(coll, count, topology, algorithm, mode, *, dtype="int32", op="sum", config=TINY,
          seed=0, **kw):
    prog = compile_collective(coll, count, topology=topology, algorithm=algorithm, mode=mode,
                              dtype=dtype, op=op, config=config, **kw)
    topo = prog.topology
    epw = config.link_bytes // DTYPE_BYTES[prog.dtype]
    blocks = expected_blocks(count, topo.dims, epw)
    if prog.blocks is not None:
        assert prog.blocks == blocks
    sizes = {"allreduce": lambda b: (count, count), "reduce_scatter": lambda b: (count, b[1]),
             "allgather": lambda b: (b[1], count),
             "alltoall": lambda b: (count, (len(blocks) - 1) * _pad(b[1], epw) + b[1])}[prog.collective]
    rng = np.random.default_rng(seed)
    inputs = []
    for n, node in enumerate(prog.nodes):
        assert (node.in_elems, node.out_elems) == sizes(blocks[n])
        if dtype == "int32":
            inputs.append(rng.integers(-2**31, 2**31, node.in_elems, dtype=np.int64)
                          .astype(np.int32))
        else:
            values = rng.standard_normal(node.in_elems).astype(np.float32)
            inputs.append(values.astype(ml_dtypes.bfloat16 if dtype == "bf16" else
                                        np.float16 if dtype == "fp16" else np.float32))
    result = run(prog, inputs)
    epw = config.link_bytes // DTYPE_BYTES[prog.dtype]
    expected = reference(prog.collective, inputs, blocks, op, epw)
    for n, (got, want) in enumerate(zip(result.outputs, expected)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8),
                                      err_msg=f"node {n}")
    # Counters: the golden model moves exactly what the static analysis says.
    traffic = memory_traffic(prog)
    assert traffic["read"] == sum(result.mem_read_bytes)
    assert traffic["write"] == sum(result.mem_write_bytes)
    static_links = link_traffic(prog)
    assert {(n, l): v for (n, d, l), v in static_links.items() if d == "tx"} == result.link_tx_bytes
    assert {(n, l): v for (n, d, l), v in static_links.items() if d == "rx"} == result.link_rx_bytes
    # Every send and receive uses the topology's link for its peer.
    for node in prog.nodes:
        for ch in node.channels:
            for step in ch.steps:
                if "send" in step.uses:
                    assert step.send_link == topo.send_link(node.node, step.send_peer)
                if "recv" in step.uses:
                    assert step.recv_link == topo.recv_link(node.node, step.recv_peer)
    esize = DTYPE_BYTES[prog.dtype]
    if mode == "ace":
        for n, node in enumerate(prog.nodes):
            read, write = traffic["per_node"][n]
            assert read == node.in_elems * esize
            useful = blocks[n][1] * len(blocks) if prog.collective == "alltoall" else node.out_elems
            assert write == useful * esize
    assemble(prog, config)
    return prog, result


SIZES = [1, 37, 3 * SRAM_ELEMS + 5]   # one element, uneven, several times the SRAM


@pytest.mark.parametrize("mode", ["ace", "baseline"])
@pytest.mark.parametrize("count", SIZES)
@pytest.mark.parametrize("p", [2, 3, 4, 8])
@pytest.mark.parametrize("coll", ["allreduce", "reduce_scatter", "allgather", "alltoall"])
@pytest.mark.parametrize("alg", ["ring", "direct", "halving_doubling", "double_binary_tree"])
def test_collective_algorithm_matrix(alg, coll, p, count, mode):
    topology = Topology.ring(p) if alg == "ring" else Topology.switch(p)
    supported = not ((alg == "halving_doubling" and p & (p - 1))
                     or (alg == "double_binary_tree" and coll != "allreduce")
                     or (coll == "alltoall" and alg not in ("ring", "direct")))
    if not supported:
        with pytest.raises(CompileError):
            compile_collective(coll, count, topology=topology, algorithm=alg, mode=mode,
                               config=TINY)
        return
    prog, _ = check(coll, count, topology, alg, mode, seed=count * 10 + p)
    if count > SRAM_ELEMS:
        assert prog.chunks > 1


@pytest.mark.parametrize("topology,alg", [
    ("torus:4x2", "ring"), ("torus:4x2", ("ring", "double_binary_tree")),
    ("torus:4x2", ("ring", "halving_doubling")), ("torus:2x4", ("direct", "ring")),
    ("torus:3x3", ("ring", "direct")), ("fully_connected:4x2", ("halving_doubling", "direct")),
    ("switch:2x2x2", "ring"), ("switch:4x2", ("direct", "double_binary_tree"))])
@pytest.mark.parametrize("coll", ["allreduce", "reduce_scatter", "allgather"])
@pytest.mark.parametrize("mode", ["ace", "baseline"])
def test_hierarchical(topology, alg, coll, mode):
    if "double_binary_tree" in alg and coll != "allreduce":
        with pytest.raises(CompileError, match="double_binary_tree runs only all-reduce phases"):
            compile_collective(coll, 100, topology=topology, algorithm=alg, config=TINY)
        return
    for count in (3, 2 * SRAM_ELEMS + 7):
        check(coll, count, topology, alg, mode, seed=count)


def test_hierarchical_phase_structure():
    """(4,2) torus all-reduce: reduce-scatter on dim 0 (links 0/1), all-reduce on dim 1
    (links 2/3), all-gather on dim 0, then the store; channel 0 (the loader) loads first, a
    quarter at a time in the order the reduce-scatter reads them."""
    prog = compile_collective("allreduce", 64, topology="torus:4x2", algorithm="ring",
                              config=TINY, chunks=1)
    loader = prog.nodes[0].channels[0].steps
    steps = prog.nodes[0].channels[1].steps
    # Node 0 (member 0 of its dim-0 ring of 4) sends quarter 3 first, then reduces 2, 1, 0.
    assert [(s.type, s.dst[1], s.count) for s in loader] == [("load", 16 * q, 16)
                                                            for q in (3, 2, 1, 0)]
    # Hand-off: the channel waits for each quarter before the step that reads it, and
    # stores its own result at the end.
    waits = [(k, s.dep) for k, s in enumerate(steps) if s.type == "nop"]
    assert waits == [(0, (0, 0)), (2, (0, 1)), (4, (0, 2)), (6, (0, 3))]
    assert [steps[k + 1].src[1] for k, _ in waits] == [48, 32, 16, 0]
    assert steps[-1].type == "store"
    comm = [s for s in steps[:-1] if s.type != "nop"]
    dims = [0 if (s.send_link if "send" in s.uses else s.recv_link) < 2 else 1 for s in comm]
    # RS on dim 0: s rrs rrs rrc; AR on dim 1 (2 nodes): s rrcs r; AG on dim 0: s rcs rcs r
    assert dims == [0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0]
    assert [s.type for s in comm] == ["s", "rrs", "rrs", "rrc", "s", "rrcs", "r",
                                      "s", "rcs", "rcs", "r"]


def test_loader_runs_ahead_by_two_slots_per_channel():
    """Six chunks on a 3-channel config: the loader loads the first four (two slots per
    communicating channel) at once, chunks 0 and 1 (the first round) a ring part at a time;
    the load of chunk c+4 (into chunk c's slot) waits for the step that ends chunk c, its
    store, on the channel that ran it."""
    cfg = TINY.replace(num_channels=3, mem_id_bits=3)
    prog = compile_collective("allreduce", 6 * 32, nodes=4, config=cfg, chunks=6)
    node = prog.nodes[0]
    loader = node.channels[0].steps
    assert [s.type for s in loader] == ["load"] * (4 + 4 + 2) + ["nop", "load"] * 2
    loads = [s for s in loader if s.type == "load"]
    slots = [min(s.dst for s in loads[:4]), min(s.dst for s in loads[4:8])]
    assert loads[10].dst == slots[0] and loads[11].dst == slots[1]
    assert len(set(slots) | {loads[8].dst, loads[9].dst}) == 4
    for k, c in ((10, 0), (12, 1)):         # nop before the load of chunk c + 4
        channel, index = loader[k].dep
        assert channel == 1 + c % 2
        stores = [i for i, s in enumerate(node.channels[channel].steps) if s.type == "store"]
        assert index == stores[c // 2]


@pytest.mark.parametrize("dtype,op", [("fp32", "max"), ("bf16", "max"), ("fp16", "min"),
                                      ("bf16", "min"), ("int32", "max")])
@pytest.mark.parametrize("alg", ["ring", "halving_doubling", "double_binary_tree", "direct"])
def test_float_max_min(dtype, op, alg):
    topology = Topology.ring(4) if alg == "ring" else Topology.switch(4)
    check("allreduce", 2 * SRAM_ELEMS + 3, topology, alg, "ace", dtype=dtype, op=op)
    if alg != "double_binary_tree":
        check("reduce_scatter", 45, topology, alg, "baseline", dtype=dtype, op=op)


@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32"])
def test_data_movement_any_dtype(dtype):
    for coll in ("allgather", "alltoall"):
        check(coll, 3 * SRAM_ELEMS + 1, Topology.ring(3), "ring", "ace", dtype=dtype)
        check(coll, 21, Topology.switch(4), "direct", "baseline", dtype=dtype)


def test_ring_float_sum_order():
    """fp32 ring all-reduce sums block b in ring order starting at node b+1 (independent
    sequential numpy reference): bit-exact."""
    p, count = 4, 64
    prog = compile_collective("allreduce", count, nodes=p, algorithm="ring", dtype="fp32",
                              config=TINY, chunks=1)
    rng = np.random.default_rng(5)
    inputs = [(rng.standard_normal(count) * 10.0 ** rng.integers(-3, 4, count))
              .astype(np.float32) for _ in range(p)]
    out = run(prog, inputs).outputs
    expected = np.empty(count, np.float32)
    for b in range(p):
        sl = slice(b * count // p, (b + 1) * count // p)
        acc = inputs[(b + 1) % p][sl].copy()
        for k in range(2, p + 1):
            acc = (acc + inputs[(b + k) % p][sl]).astype(np.float32)
        expected[sl] = acc
    for n in range(p):
        np.testing.assert_array_equal(out[n].view(np.uint32), expected.view(np.uint32))


def test_memory_traffic_ace_vs_baseline():
    count, p = 4 * SRAM_ELEMS, 4
    S = count * 4
    ace = compile_collective("allreduce", count, nodes=p, config=TINY)
    base = compile_collective("allreduce", count, nodes=p, config=TINY, mode="baseline")
    t_ace, t_base = memory_traffic(ace), memory_traffic(base)
    assert all(r == S and w == S for r, w in t_ace["per_node"])     # 2S per node
    # ring, memory-staged: s reads S/p; (p-2) rrs read 3, write 2; rrcs read 3, write 2;
    # (p-2) rcs read 1, write 1; r writes 1 (units of S/p)
    unit = S // p
    read = unit * (1 + 3 * (p - 2) + 3 + (p - 2))
    write = unit * (2 * (p - 2) + 2 + (p - 2) + 1)
    assert all((r, w) == (read, write) for r, w in t_base["per_node"])
    assert t_base["total"] > 2.5 * t_ace["total"]
    # same algorithm: identical communication steps in both modes (ACE mode puts them on the
    # channels after the mover, so compare per node)
    strip = lambda prog: [sorted((s.type, s.count, s.send_peer, s.recv_peer)
                                 for ch in node.channels for s in ch.steps
                                 if s.type not in ("load", "store", "nop"))
                          for node in prog.nodes]
    assert strip(ace) == strip(base)
    # ring all-reduce link bytes: 2(p-1)/p * S per node on the send link
    assert link_traffic(ace)[(0, "tx", 0)] == 2 * (p - 1) * unit


def test_chunking_uses_channels():
    prog = compile_collective("allreduce", 10 * SRAM_ELEMS, nodes=3, config=TINY)
    assert prog.chunks >= 20 and all(len(node.channels) == TINY.num_channels
                                     for node in prog.nodes)
    with pytest.raises(CompileError, match="chunks: 2 chunks do not fit the SRAM"):
        compile_collective("allreduce", 10 * SRAM_ELEMS, nodes=3, config=TINY, chunks=2)
    prog = compile_collective("allreduce", 1000, nodes=3, config=TINY, chunks=100)
    assert prog.chunks == 100


def test_compile_errors():
    with pytest.raises(CompileError, match="halving_doubling needs a power-of-two group size; "
                                           "dimension 0 has 3 nodes"):
        compile_collective("allreduce", 10, topology="switch:3", algorithm="hd", config=TINY)
    with pytest.raises(CompileError, match="alltoall supports the direct and ring"):
        compile_collective("alltoall", 10, nodes=4, algorithm="halving_doubling", config=TINY)
    with pytest.raises(CompileError, match="alltoall is compiled for one-dimensional"):
        compile_collective("alltoall", 10, topology="switch:2x2", algorithm="direct", config=TINY)
    with pytest.raises(CompileError, match="needs 4 links per node; the configuration has "
                                           "num_links = 2"):
        compile_collective("allreduce", 10, topology="torus:4x2", config=NAMED_CONFIGS["small"])
    with pytest.raises(Exception, match="node 2 is not a neighbour of node 0"):
        compile_collective("allreduce", 10, topology="ring:4", algorithm="direct", config=TINY)
    with pytest.raises(CompileError, match="collective: 'broadcast'"):
        compile_collective("broadcast", 10, nodes=4)
    with pytest.raises(CompileError, match="algorithm: 'magic'"):
        compile_collective("allreduce", 10, nodes=4, algorithm="magic")
    with pytest.raises(CompileError, match="at least 2 nodes"):
        compile_collective("allreduce", 10, nodes=1, config=TINY)
    with pytest.raises(CompileError, match="count: 0"):
        compile_collective("allreduce", 0, nodes=2)
    with pytest.raises(CompileError, match=r"algorithm: 1 given for 2 topology dimensions"):
        compile_collective("allreduce", 10, topology="torus:2x2", algorithm=["ring"], config=TINY)


@pytest.mark.parametrize("collective, algorithm", [("alltoall", "ring"), ("allreduce", "ring"),
                                                   ("alltoall", "direct")])
def test_sends_in_flight_fit_half_a_receive_buffer(collective, algorithm):
    """Deadlock rule (docs/engine.md): the bytes a channel sends after its last receive, and
    every single message, fit in packet_bytes. Counted here independently of the compiler's
    own helper: the ring all-to-all's p-1 back-to-back sends must together fit."""
    cfg = NAMED_CONFIGS["small"].replace(program_words=2048)
    topology = "ring:4" if algorithm == "ring" else "fully_connected:4"
    cfg = cfg if algorithm == "ring" else cfg.replace(num_links=3)
    prog = compile_collective(collective, 12000, topology=topology, algorithm=algorithm,
                              config=cfg, dtype="fp32")
    limit = cfg.packet_bytes
    for node in prog.nodes:
        for ch in node.channels:
            pending = 0
            for st in ch.steps:
                if st.type in ("r", "rrc", "rrs", "rrcs", "rcs"):
                    assert st.nbytes <= limit
                    pending = 0
                if st.type in ("s", "rrs", "rrcs", "rcs"):
                    pending += st.nbytes
                    assert pending <= limit, (node.node, st)


# -- the package's shape: a registry of algorithms, small functions, state set in __init__ ------

def test_registry_runs_the_documented_phases():
    """docs/programming_model.md section 5: ring, direct, halving-doubling and the
    bidirectional ring run every phase; the double binary tree only all-reduce phases;
    halving-doubling needs powers of two; the bidirectional ring runs two lanes."""
    from ace.sw.compiler import PHASE_ALGORITHMS
    from ace.vocab import Algorithm, Collective
    assert set(PHASE_ALGORITHMS) == set(Algorithm)
    for name, alg in PHASE_ALGORITHMS.items():
        runs = {kind for kind in (Collective.REDUCE_SCATTER, Collective.ALLGATHER,
                                  Collective.ALLREDUCE) if alg.runs(kind)}
        if name == Algorithm.DOUBLE_BINARY_TREE:
            assert runs == {Collective.ALLREDUCE}
        else:
            assert len(runs) == 3, name
        assert alg.power_of_two == (name == Algorithm.HALVING_DOUBLING)
        assert alg.lanes == (2 if name == Algorithm.BIDIRECTIONAL_RING else 1)
    with pytest.raises(CompileError, match="double_binary_tree runs only all-reduce phases; "
                       "dimension 0 runs a reduce-scatter phase .* use ring, direct, "
                       "halving_doubling or bidirectional_ring there"):
        compile_collective("allreduce", 64, topology="torus:2x2", config=TINY,
                           algorithm=["double_binary_tree", "ring"])


def _functions(path):
    import ast
    tree = ast.parse(path.read_text())
    return [node for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _sources():
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent / "ace" / "sw"
    return sorted((root / "compiler").glob("*.py")) + [root / "golden.py"]


def test_compiler_and_golden_functions_are_short():
    long = [f"{path.name}:{fn.name} has {fn.end_lineno - fn.lineno + 1} lines"
            for path in _sources() for fn in _functions(path)
            if fn.end_lineno - fn.lineno + 1 > 80]
    assert long == []


def test_compiler_sets_state_only_in_init():
    """Attributes are bound in ``__init__`` only (methods may fill the lists made there)."""
    import ast
    outside = []
    for path in _sources():
        for fn in _functions(path):
            if fn.name == "__init__":
                continue
            for node in ast.walk(fn):
                targets = node.targets if isinstance(node, ast.Assign) else (
                    [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
                for target in targets:
                    leaves = target.elts if isinstance(target, ast.Tuple) else [target]
                    for leaf in leaves:
                        if (isinstance(leaf, ast.Attribute) and isinstance(leaf.value, ast.Name)
                                and leaf.value.id == "self"):
                            outside.append(f"{path.name}:{fn.name} sets self.{leaf.attr}")
    assert outside == []
