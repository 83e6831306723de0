"""MSCCL XML import: the real ring file, hand-written files with scratch, cpy, re, nop and
multiple dependencies, and error messages with file, line and attribute."""

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from ace.config import NAMED_CONFIGS
from ace.sw.golden import run
from ace.sw.msccl import MscclError, load_msccl
from ace.sw.program import Channel, Step, assemble, from_text, memory_traffic, to_text
from testbench.program_checks import assert_loads_and_stores_ordered

RING = Path(__file__).resolve().parents[2] / "shared" / "data" / "msccl" / "ring_allreduce_8npus.xml"
DATA = Path(__file__).resolve().parent / "data" / "msccl"
if not RING.exists():
    RING = Path("/work/shared/data/msccl/ring_allreduce_8npus.xml")


def _ints(prog, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(-2**31, 2**31, n.in_elems, dtype=np.int64).astype(np.int32)
            for n in prog.nodes]


def _sum(inputs):
    return np.stack(inputs).astype(np.int64).sum(axis=0).astype(np.int32)


@pytest.mark.parametrize("mode", ["ace", "baseline"])
@pytest.mark.parametrize("topology", [None, "ring:8"])
def test_ring_allreduce_file(mode, topology):
    before = RING.read_bytes()
    prog = load_msccl(RING, chunk_elems=8, mode=mode, topology=topology)
    assert RING.read_bytes() == before
    assert prog.collective == "allreduce" and prog.num_nodes == 8 and prog.count == 64
    assert prog.algorithm == "msccl:allreduce_ring_1channelsperring"
    inputs = _ints(prog)
    result = run(prog, inputs)
    for out in result.outputs:
        np.testing.assert_array_equal(out, _sum(inputs))
    traffic = memory_traffic(prog)
    if mode == "ace":
        assert traffic["per_node"][0] == (64 * 4, 64 * 4)
        types = [s.type for s in prog.nodes[0].channels[0].steps]
        assert types.count("load") == 8 and types.count("store") == 8    # a chunk each
        assert_loads_and_stores_ordered(prog)
    else:
        assert traffic["per_node"][0][0] > 64 * 4 * 2
    # The default switch:8 topology has a virtual link per peer: 7 links.
    assemble(prog, NAMED_CONFIGS["small"].replace(num_links=2 if topology else 7))
    assert from_text(to_text(prog)).nodes == prog.nodes
    if topology == "ring:8":
        step = next(s for s in prog.nodes[3].channels[0].steps if s.type == "rrc")
        assert (step.type, step.recv_peer, step.recv_link) == ("rrc", 2, 1)


def test_count_argument():
    prog = load_msccl(RING, count=8 * 4)
    assert prog.nodes[0].in_elems == 32
    with pytest.raises(MscclError, match="count 30 is not a multiple of nchunksperloop x loops = 8 x 1"):
        load_msccl(RING, count=30)


def _ring3_xml():
    """3-gpu ring all-reduce with cut-through steps (rrs, rrcs, rcs), in place."""
    out = ['<algo name="ring3" proto="Simple" nchannels="1" nchunksperloop="3" ngpus="3" '
           'coll="allreduce" inplace="1">']
    for m in range(3):
        out.append(f'  <gpu id="{m}" i_chunks="3" o_chunks="0" s_chunks="0">')
        out.append(f'    <tb id="0" send="{(m + 1) % 3}" recv="{(m - 1) % 3}" chan="0">')
        steps = [("s", (m - 1) % 3), ("rrs", (m - 2) % 3), ("rrcs", m), ("rcs", (m - 1) % 3),
                 ("r", (m + 1) % 3)]
        for k, (typ, c) in enumerate(steps):
            out.append(f'      <step s="{k}" type="{typ}" srcbuf="i" srcoff="{c}" dstbuf="i" '
                       f'dstoff="{c}" cnt="1" depid="-1" deps="-1" hasdep="0"/>')
        out.append("    </tb>")
        out.append("  </gpu>")
    out.append("</algo>")
    return "\n".join(out)


@pytest.mark.parametrize("mode", ["ace", "baseline"])
def test_cut_through_steps(mode):
    prog = load_msccl(_ring3_xml(), chunk_elems=5, mode=mode, topology="ring:3")
    inputs = _ints(prog, 3)
    for out in run(prog, inputs).outputs:
        np.testing.assert_array_equal(out, _sum(inputs))


SCRATCH_XML = """<algo name="pair_scratch" proto="Simple" nchannels="1" nchunksperloop="2"
      ngpus="2" coll="allreduce" inplace="0">
{gpus}
</algo>"""

GPU = """  <gpu id="{g}" i_chunks="2" o_chunks="2" s_chunks="2">
    <tb id="0" send="{q}" recv="-1" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="{q}" dstbuf="i" dstoff="{q}" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="nop" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="0" depid="1" deps="0" hasdep="0"/>
      <step s="2" type="s" srcbuf="o" srcoff="{g}" dstbuf="o" dstoff="{g}" cnt="1" depid="1,1" deps="1,2" hasdep="0"/>
    </tb>
    <tb id="1" send="-1" recv="{q}" chan="0">
      <step s="0" type="r" srcbuf="s" srcoff="1" dstbuf="s" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="1"/>
      <step s="1" type="cpy" srcbuf="i" srcoff="{g}" dstbuf="o" dstoff="{g}" cnt="1" depid="-1" deps="-1" hasdep="1"/>
      <step s="2" type="re" srcbuf="s" srcoff="1" dstbuf="o" dstoff="{g}" cnt="1" depid="-1" deps="-1" hasdep="1"/>
      <step s="3" type="r" srcbuf="o" srcoff="{q}" dstbuf="o" dstoff="{q}" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>"""


def _scratch_xml(**replace):
    text = SCRATCH_XML.format(gpus="\n".join(GPU.format(g=g, q=1 - g) for g in range(2)))
    for old, new in replace.items():
        text = text.replace(old, new, 1)
    return text


@pytest.mark.parametrize("mode", ["ace", "baseline"])
def test_scratch_cpy_re_nop_and_multiple_deps(mode):
    prog = load_msccl(_scratch_xml(), chunk_elems=4, mode=mode)
    # Separate send and receive threadblocks: connected ones share a channel index.
    g0, g1 = prog.nodes
    assert g0.channels[0].send_peer == 1 and g1.channels[0].recv_peer == 0
    assert g0.channels[1].recv_peer == 1 and g1.channels[1].send_peer == 0
    # tb0 step 2 has two dependencies: a nop carries the first one.
    steps, rx = g0.channels[0].steps, g0.channels[1].steps
    core = [step for step in steps if step.type not in ("load", "store")]  # ACE adds these
    second = [k for k, step in enumerate(core) if step.type == "s"][1]
    assert [s.type for s in core[second - 2:second + 1]] == ["nop", "nop", "s"]
    assert [rx[step.dep[1]].type for step in core[second - 2:second + 1]] == ["r", "cpy", "re"]
    if mode == "ace":
        assert_loads_and_stores_ordered(prog)
        # One store per output chunk, right after the last step that writes it, on its
        # channel: chunk 0 (node 0's own) after the reduction (re), chunk 1 after the receive.
        stores = sorted((step.src, k) for k, step in enumerate(rx) if step.type == "store")
        assert [rx[k - 1].type for _, k in stores] == ["re", "r"]
    inputs = _ints(prog, 9)
    result = run(prog, inputs)
    for out in result.outputs:
        np.testing.assert_array_equal(out, _sum(inputs))
    assert g0.scratch_elems == 8
    asm = assemble(prog, NAMED_CONFIGS["small"])
    assert set(asm.nodes[0].buffer_base) == {"i", "o", "s"}


@pytest.mark.parametrize("replace,match", [
    ({'type="re"': 'type="reduce"'}, r"<xml>:12: <step> attribute 'type': 'reduce' is not a "
                                      r"step type"),
    ({'srcoff="1" dstbuf="o"': 'srcoff="2" dstbuf="o"'},
     r"<xml>:12: <step> attribute 'srcoff': chunks 2..2 of buffer s are out of range"),
    ({'depid="1" deps="0"': 'depid="5" deps="0"'},
     r"<xml>:6: <step> attribute 'depid': threadblock 5 does not exist on gpu 0"),
    ({'depid="1,1" deps="1,2"': 'depid="1,1" deps="1"'},
     r"<xml>:7: <step> attribute 'deps': 1 entries for 2 in depid"),
    ({'cnt="1" depid="-1"': 'cnt="x" depid="-1"'}, r"<xml>:5: <step> attribute 'cnt': 'x' is "
                                                   r"not an integer"),
    ({'<step s="1" type="nop"': '<step s="4" type="nop"'},
     r"<xml>:6: <step> attribute 's': 4; steps must be numbered"),
    ({'recv="1" chan="0"': 'recv="1" chan="3"'},
     r"<xml>:17: <tb> attribute 'send': gpu 1 threadblock 0 sends to gpu 0 on chan 0, but no "
     r"threadblock there receives"),
    ({'ngpus="2"': 'ngpus="3"'}, r"<xml>:1: <algo> attribute 'ngpus': 3 gpus declared but gpu 2"),
    ({'<gpu id="0"': '<gpux id="0"'}, r"not well-formed XML"),
])
def test_errors_name_line_and_attribute(replace, match):
    with pytest.raises(MscclError, match=match):
        load_msccl(_scratch_xml(**replace), chunk_elems=4)


def test_file_errors(tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text(_scratch_xml(**{'type="cpy"': 'type="copy"'}))
    with pytest.raises(MscclError, match=rf"{bad}:11: <step> attribute 'type': 'copy'"):
        load_msccl(bad, chunk_elems=1)
    with pytest.raises(MscclError, match="cannot read"):
        load_msccl(tmp_path / "missing.xml", chunk_elems=1)


@pytest.mark.parametrize("mode", ["ace", "baseline"])
def test_loops_cover_a_buffer_larger_than_one_pass(mode):
    """Three passes of the ring algorithm over a 3x larger buffer: the all-reduce of the whole
    buffer (numpy), pass k's load/store (ace) or buffer offsets (baseline) shifted by k passes,
    and cross-channel dependencies pointing into the same pass."""
    prog = load_msccl(RING, count=3 * 64, loops=3, mode=mode, topology="ring:8")
    assert prog.count == 192 and all(n.in_elems == 192 for n in prog.nodes)
    inputs = _ints(prog, seed=3)
    result = run(prog, inputs)
    want = _sum(inputs)
    for out in result.outputs:
        assert np.array_equal(out.view(np.int32), want)
    node = prog.nodes[0]
    one = load_msccl(RING, count=64, mode=mode, topology="ring:8").nodes[0]
    for ch, base in zip(node.channels, one.channels):
        n = len(base.steps)
        assert len(ch.steps) == 3 * n
        for k in range(3):
            for a, b in zip(ch.steps[k * n:(k + 1) * n], base.steps):
                assert a.type == b.type and a.count == b.count
                if b.dep is not None:
                    assert a.dep[1] == b.dep[1] + k * len(one.channels[b.dep[0]].steps)
                if mode == "ace" and b.type in ("load", "store"):
                    assert a.mem_addr - b.mem_addr == k * 64 * 4 + (
                        node.output_addr - one.output_addr if b.type == "store" else 0)
                if mode == "baseline" and b.src is not None:
                    assert a.src[1] == b.src[1] + k * 64


def test_the_order_check_finds_a_missing_dependency():
    """The check of loads and stores is not vacuous: a load on channel 0 and a copy out of the
    same input on channel 1 race unless a dependency orders them; so do a store and a receive
    into the same output, and it finds no race between disjoint slices."""
    def program(dep, src_off=0, recv_dep=(1, 1)):
        load = Step(type="load", count=8, dst=("i", 0), mem_addr=0)
        store = Step(type="store", count=8, src=("o", 0), mem_addr=64, dep=recv_dep)
        copy = Step(type="cpy", count=8, src=("i", src_off), dst=("s", 0), dep=dep)
        recv = Step(type="r", count=8, dst=("o", 0), recv_peer=1, recv_link=0)
        node = SimpleNamespace(node=0, channels=[Channel(steps=[load, store]),
                                                 Channel(steps=[copy, recv])])
        return SimpleNamespace(nodes=[node])

    assert_loads_and_stores_ordered(program(dep=(0, 0)))
    assert_loads_and_stores_ordered(program(dep=None, src_off=8))
    with pytest.raises(AssertionError, match="load at .0, 0. and cpy at .1, 0. may run at once"):
        assert_loads_and_stores_ordered(program(dep=None))
    with pytest.raises(AssertionError, match="store at .0, 1. and r at .1, 1. may run at once"):
        assert_loads_and_stores_ordered(program(dep=(0, 0), recv_dep=None))


def test_in_place_chunk_read_but_never_written_is_stored_after_its_load():
    """In place, each gpu sends chunk 0 (never written) and receives chunk 1: chunk 0's store
    follows its load on the sender's channel, ordered with it, and the result is the swap."""
    xml = ['<algo name="swap_half" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" '
           'coll="custom" inplace="1">']
    for g in range(2):
        xml += [f'  <gpu id="{g}" i_chunks="2" o_chunks="0" s_chunks="0">',
                f'    <tb id="0" send="{1 - g}" recv="-1" chan="0">',
                '      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" '
                'depid="-1" deps="-1" hasdep="0"/>', "    </tb>",
                f'    <tb id="1" send="-1" recv="{1 - g}" chan="0">',
                '      <step s="0" type="r" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1" '
                'depid="-1" deps="-1" hasdep="0"/>', "    </tb>", "  </gpu>"]
    prog = load_msccl("\n".join(xml + ["</algo>"]), chunk_elems=4, mode="ace")
    assert_loads_and_stores_ordered(prog)
    for node in prog.nodes:
        for ch in node.channels:
            types = [s.type for s in ch.steps]
            if "s" in types:                    # chunk 0: load, its store, then the send
                assert types[types.index("load") + 1] == "store"
    inputs = [np.arange(8, dtype=np.int32) + 100 * g for g in range(2)]
    outputs = run(prog, inputs).outputs
    for g, out in enumerate(outputs):
        np.testing.assert_array_equal(out, np.concatenate([inputs[g][:4], inputs[1 - g][:4]]))
