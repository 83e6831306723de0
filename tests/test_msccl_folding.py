"""MSCCL algorithms of the published shapes (tests/data/msccl, written by generate.py there):
parsed once, folded onto the engine's channels in a deadlock-free order, every dependency and
send/receive pairing kept; results checked against numpy sums (the golden model runs the
program's own reduction order); the order of folding matters (a naive one deadlocks)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from ace.config import NAMED_CONFIGS
from ace.sw import msccl
from ace.sw.golden import DeadlockError, run
from ace.sw.msccl import Folding, MscclError, read_msccl
from ace.sw.program import assemble
from sim_harness.systems import HARNESS_CONFIG, load_system
from testbench.program_checks import assert_loads_and_stores_ordered

DATA = Path(__file__).resolve().parent / "data" / "msccl"
PUBLISHED = {"allpairs_allreduce_8gpus_2ch.xml": 16, "allpairs_allreduce_8gpus_4ch.xml": 32,
             "ring_allreduce_8gpus_4chperring_LL.xml": 32,
             "hierarchical_allreduce_2x4gpus.xml": 5}


def _generator():
    spec = importlib.util.spec_from_file_location("msccl_generate", DATA / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _check_sum(program, seed):
    rng = np.random.default_rng(seed)
    inputs = [rng.integers(-2**31, 2**31, n.in_elems, dtype=np.int64).astype(np.int32)
              for n in program.nodes]
    want = np.stack(inputs).astype(np.int64).sum(axis=0).astype(np.int32)
    result = run(program, inputs)
    for node, out in enumerate(result.outputs):
        np.testing.assert_array_equal(out.view(np.int32), want, err_msg=f"seed {seed} node {node}")


def test_the_files_are_what_the_generator_writes():
    gen = _generator()
    for name, make in gen.FILES.items():
        assert (DATA / name).read_text() == make().xml(), name


@pytest.mark.parametrize("mode", ["ace", "baseline"])
@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_shapes_fold_onto_four_channels(name, mode):
    algorithm = read_msccl(DATA / name)
    folding = algorithm.folding(4)
    assert algorithm.thread_blocks == PUBLISHED[name]
    assert folding.channels == 4 and folding.folded
    assert folding.shared == -(-PUBLISHED[name] // 4)
    assert f"{PUBLISHED[name]} thread blocks per GPU on 4 channels" in folding.describe()
    program = algorithm.program(chunk_elems=16, mode=mode, num_channels=4)
    assert all(len(node.channels) == 4 for node in program.nodes)
    _check_sum(program, seed=len(name))
    if mode == "ace":
        assert_loads_and_stores_ordered(program)
    # Every threadblock's steps keep their order on its channel.
    for (g, h), sequence in folding.sequence.items():
        for t in {t for t, _ in sequence}:
            assert [s for u, s in sequence if u == t] == list(
                range(len(algorithm.gpus[g].tbs[t].steps)))


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_fit_keeps_messages_within_the_limit(name):
    """fit() picks the passes from the folded schedule; the program it returns has no message
    over packet_bytes, what one FIFO holds in flight fits a receive buffer, and it assembles
    for full8's engine (SRAM, words, channels, links)."""
    algorithm = read_msccl(DATA / name)
    config = load_system("full8").config
    count = 1 << 18                                      # 1 MiB of fp32
    program = algorithm.fit(count, config, dtype="fp32", mode="ace", topology="fully_connected:8")
    sizes = [st.nbytes for node in program.nodes for ch in node.channels for st in ch.steps
             if "send" in st.uses]
    assert max(sizes) <= config.packet_bytes
    chunk = (program.nodes[0].in_elems * 4 // algorithm.gpus[0].chunks["i"]
             // _loops(program, algorithm))
    assert algorithm.folding(4).in_flight_chunks * chunk <= \
        config.rx_channel_beats * config.link_bytes
    assemble(program, config)
    assert_loads_and_stores_ordered(program)


def _loops(program, algorithm) -> int:
    """Passes: the loads of node 0 over the loads of one pass (one per run of the input's
    chunks, at most 32 runs)."""
    loads = sum(st.type == "load" for ch in program.nodes[0].channels for st in ch.steps)
    per_pass = min(32, algorithm.gpus[0].chunks["i"])
    assert loads % per_pass == 0
    return loads // per_pass


def test_schedule_keeps_fifos_shallow():
    """The deadlock-freedom argument needs in_flight messages per FIFO to fit one receive
    buffer; the all-pairs and hierarchical shapes need no more than the two of the rule."""
    for name in ("allpairs_allreduce_8gpus_4ch.xml", "hierarchical_allreduce_2x4gpus.xml"):
        assert read_msccl(DATA / name).folding(4).in_flight <= 2


def _naive(algorithm, num_channels) -> Folding:
    """Threadblocks on the same channels, but each channel runs its threadblocks one after
    another (all steps of the first, then the next): what folding without a schedule does."""
    good = algorithm.folding(num_channels)
    sequence = {}
    for (g, t), h in sorted(good.channel_of.items()):
        sequence.setdefault((g, h), []).extend(
            (t, s) for s in range(len(algorithm.gpus[g].tbs[t].steps)))
    rank = {(g, t, s): n for (g, _), steps in sequence.items()
            for n, (t, s) in enumerate(steps)}           # increasing along every channel
    return Folding(good.thread_blocks, good.channels, good.shared, good.in_flight,
                   good.in_flight_chunks, good.channel_of, sequence, rank)


@pytest.mark.parametrize("mode", ["ace", "baseline"])
def test_naive_folding_deadlocks_and_the_schedule_does_not(mode):
    """All-pairs: a peer threadblock's all-gather send waits for the local reduction, which
    waits for the other peers' receives; run one threadblock after another on a channel and
    the reduction waits for a step queued behind the send that waits for it."""
    algorithm = read_msccl(DATA / "allpairs_allreduce_4gpus_2ch.xml")
    naive = algorithm.program(chunk_elems=16, mode=mode, folding=_naive(algorithm, 4))
    rng = np.random.default_rng(5)
    inputs = [rng.integers(0, 99, n.in_elems).astype(np.int32) for n in naive.nodes]
    with pytest.raises(DeadlockError):
        run(naive, inputs)
    _check_sum(algorithm.program(chunk_elems=16, mode=mode, num_channels=4), seed=5)


def test_parsed_once(monkeypatch):
    """One parse per file version, however many sizes, passes and channel counts follow."""
    path = DATA / "hierarchical_allreduce_2x4gpus.xml"
    calls = []
    real = msccl.parse_msccl
    monkeypatch.setattr(msccl, "parse_msccl", lambda *a: calls.append(a) or real(*a))
    msccl._read_file.cache_clear()
    algorithm = read_msccl(path)
    for loops in (1, 2, 4):
        for channels in (None, 2, 4):
            algorithm.program(count=4 * 8 * loops, loops=loops, num_channels=channels)
    assert read_msccl(path) is algorithm
    assert len(calls) == 1


def test_changed_file_is_read_again(tmp_path):
    path = tmp_path / "a.xml"
    gen = _generator()
    path.write_text(gen.allpairs(4, 1).xml())
    first = read_msccl(path)
    path.write_text(gen.allpairs(4, 2).xml())
    assert read_msccl(path).thread_blocks == 8 and first.thread_blocks == 4


@pytest.mark.parametrize("proto", ["Simple", "LL", "LL128"])
def test_protocols_are_accepted_and_kept(proto, tmp_path):
    from sim_harness.traces import load_trace

    text = _generator().allpairs(4, 1).xml().replace('proto="Simple"', f'proto="{proto}"')
    path = tmp_path / "a.xml"
    path.write_text(text)
    assert read_msccl(path).proto == proto
    trace = load_trace(path)
    assert trace.collectives[0].extra["proto"] == proto
    assert trace.meta["algo"]["proto"] == proto


def test_unknown_protocol_names_file_line_and_attribute(tmp_path):
    path = tmp_path / "a.xml"
    path.write_text(_generator().allpairs(4, 1).xml().replace('proto="Simple"', 'proto="LL64"'))
    with pytest.raises(MscclError, match=r"a\.xml:1: <algo> attribute 'proto': 'LL64'; "
                                         r"allowed: Simple, LL, LL128"):
        read_msccl(path)


def test_an_algorithm_that_deadlocks_by_itself_is_refused():
    """Two gpus that each receive before they send: no order can run it."""
    xml = ('<algo name="x" nchunksperloop="1" ngpus="2" coll="allreduce" inplace="1">'
           + "".join(f'<gpu id="{g}" i_chunks="1" o_chunks="0" s_chunks="1">'
                     f'<tb id="0" send="{1 - g}" recv="{1 - g}" chan="0">'
                     '<step s="0" type="r" dstbuf="s" dstoff="0" cnt="1"/>'
                     '<step s="1" type="s" srcbuf="i" srcoff="0" cnt="1"/></tb></gpu>'
                     for g in range(2)) + "</algo>")
    with pytest.raises(MscclError, match="the algorithm deadlocks: gpu 0 threadblock 0 step 0"):
        read_msccl(xml).folding(4)


def test_harness_engine_has_four_channels():
    """The folding figures above are for the engine the named systems use."""
    assert HARNESS_CONFIG.num_channels == 4 == load_system("full8").config.num_channels
    assert NAMED_CONFIGS["small"].num_links < load_system("switch8").config.num_links == 7
