"""Programs: text assembler round trip, assembly to words and its checks, topology links."""

import pytest

from ace.sw.compiler import compile_collective
from ace.config import NAMED_CONFIGS
from ace.isa import INSTR_WORDS, from_words
from ace.layouts import Dtype, ReduceOp
from ace.vocab import Buffer, Mode, StepType
from ace.sw.program import (STEP_TYPES, ProgramError, Step, Topology, assemble, decode_step,
                            encode_step, from_text, split_aligned, step_memory_traffic, to_text)
from testbench.accounting import DOCUMENTED_TRAFFIC

SMALL = NAMED_CONFIGS["small"]


def test_split_aligned():
    for count in (0, 1, 5, 16, 17, 100, 1001):
        for parts in (1, 2, 3, 4, 8):
            for align in (1, 4, 8):
                out = split_aligned(count, parts, align)
                assert len(out) == parts
                assert sum(n for _, n in out) == count
                pos = 0
                for start, n in out:
                    assert start == pos and (n == 0 or start % align == 0)
                    pos += n
                words = [-(-n // align) for _, n in out]
                assert max(words) - min(words) <= 1


@pytest.mark.parametrize("coll,alg,topo", [
    ("allreduce", "ring", "ring:4"), ("reduce_scatter", "direct", "switch:3"),
    ("allgather", "halving_doubling", "fully_connected:4"),
    ("allreduce", ("ring", "double_binary_tree"), "torus:2x2"), ("alltoall", "ring", "ring:3")])
@pytest.mark.parametrize("mode", ["ace", "baseline"])
def test_text_roundtrip(coll, alg, topo, mode):
    cfg = SMALL.replace(num_links=4)
    prog = compile_collective(coll, 77, topology=topo, algorithm=alg, mode=mode, config=cfg)
    text = to_text(prog)
    again = from_text(text)
    assert to_text(again) == text
    assert again.nodes == prog.nodes
    assert again.topology == prog.topology and again.blocks == prog.blocks


def test_text_errors_name_line():
    good = "program collective=allreduce algorithm=x dtype=int32 op=sum count=4\nnode 0\nchannel 0\n"
    with pytest.raises(ProgramError, match=r"<text>:4: step type 'jump'"):
        from_text(good + "  0: jump\n")
    with pytest.raises(ProgramError, match=r"<text>:4: 'q\[0\]' is not BUF\[OFFSET\]"):
        from_text(good + "  0: s src=q[0] count=4 to=1@0\n")
    with pytest.raises(ProgramError, match=r"<text>:4: step 1 out of order"):
        from_text(good + "  1: nop\n")
    with pytest.raises(ProgramError, match=r"<text>:4: s needs send_peer"):
        from_text(good + "  0: s src=i[0] count=4\n")
    with pytest.raises(ProgramError, match=r"mine.txt:1: expected the 'program' line"):
        from_text("node 0\n", source="mine.txt")
    with pytest.raises(ProgramError, match=r"<text>:4: unknown key 'size'; allowed: count, dep, "
                       r"dst, dtype, from, mem, op, src, to"):
        from_text(good + "  0: cpy src=i[0] dst=o[0] size=4\n")
    with pytest.raises(ProgramError, match=r"<text>:4: dep '1-2' is not CHANNEL.STEP"):
        from_text(good + "  0: nop dep=1-2\n")
    with pytest.raises(ProgramError, match=r"<text>:2: 'channel' before any 'node'"):
        from_text(good.replace("node 0\n", ""))
    with pytest.raises(ProgramError, match=r"<text>:3: channel 1 out of order; expected 0"):
        from_text(good.replace("channel 0", "channel 1"))


def test_text_step_fields_and_channel_defaults():
    """Every step key lands in its field; to=/from= default to the channel's peers."""
    text = ("program collective=allreduce algorithm=x dtype=int32 op=sum count=4\nnode 0\n"
            "channel 0 send=1@0 recv=2@1\n  0: rrs src=s[8] count=4 dtype=bf16 op=max\n"
            "  1: load dst=o[4] count=2 mem=0x40 dep=0.0\n  2: rcs dst=s[0] count=4 to=3@2\n")
    rrs, load, rcs = from_text(text).nodes[0].channels[0].steps
    assert rrs.type == StepType.RRS and rrs.src == (Buffer.SCRATCH, 8)
    assert (rrs.send_peer, rrs.send_link, rrs.recv_peer, rrs.recv_link) == (1, 0, 2, 1)
    assert (rrs.dtype, rrs.op) == (Dtype.BF16, ReduceOp.MAX)
    assert (load.dst, load.count, load.mem_addr, load.dep) == (("o", 4), 2, 0x40, (0, 0))
    assert (rcs.send_peer, rcs.send_link, rcs.recv_peer) == (3, 2, 2)


def test_assemble_words_and_decode():
    prog = compile_collective("allreduce", 64, nodes=4, algorithm="ring", config=SMALL)
    asm = assemble(prog, SMALL)
    for node, anode in zip(prog.nodes, asm.nodes):
        assert anode.placement == "sram"
        assert anode.buffer_base["i"] == 0 and anode.buffer_base["o"] == SMALL.input_buffer_words
        for ch, words, ints in zip(node.channels, anode.words, anode.instructions):
            assert len(words) == (len(ch.steps) + 1) * INSTR_WORDS
            for k, step in enumerate(ch.steps):
                bits = from_words(words[k * INSTR_WORDS:(k + 1) * INSTR_WORDS])
                assert bits == ints[k] == encode_step(step, SMALL.link_bytes)
                assert decode_step(bits, SMALL.link_bytes) == step
            assert decode_step(ints[-1], SMALL.link_bytes).type == "end"
    base = assemble(compile_collective("allreduce", 64, nodes=4, mode="baseline",
                                       config=SMALL, output_addr=0x8000), SMALL)
    assert base.nodes[0].placement == "memory"
    assert base.nodes[0].buffer_base["o"] == 0x8000


def _one_step_program(step_line, channels=1, placement="sram"):
    text = ("program collective=allreduce algorithm=x dtype=int32 op=sum count=4\n"
            f"node 0 placement={placement}\n")
    for c in range(channels):
        text += f"channel {c}\n" + (f"  0: {step_line}\n" if c == 0 else "")
    text += "node 1\n"
    return from_text(text)


def test_assemble_errors_name_node_channel_step():
    cfg = SMALL  # 16-byte words: 4 int32 per word; 4096 words per SRAM
    with pytest.raises(ProgramError, match=r"node 0: buffer o needs 4097 words; the output SRAM "
                                           r"has 4096"):
        assemble(_one_step_program("cpy src=i[0] dst=o[16384] count=4"), cfg)
    with pytest.raises(ProgramError, match=r"node 0 channel 0 step 0 \(cpy\): src offset 2 "
                                           r"elements is not a multiple of an SRAM word"):
        assemble(_one_step_program("cpy src=i[2] dst=o[0] count=4"), cfg)
    with pytest.raises(ProgramError, match=r"node 0 channel 0 step 0 \(s\): send_link 2 is out "
                                           r"of range; allowed: 0 to 1"):
        assemble(_one_step_program("s src=i[0] count=4 to=1@2"), cfg)
    with pytest.raises(ProgramError, match=r"node 0: 3 channels; the configuration has "
                                           r"num_channels = 2"):
        assemble(_one_step_program("nop", channels=3), cfg)
    with pytest.raises(ProgramError, match=r"node 0 channel 0 step 0 \(cpy\): count 0"):
        assemble(_one_step_program("cpy src=i[0] dst=o[0] count=0"), cfg)
    with pytest.raises(ProgramError, match=r"node 0 channel 0 step 0: dep 1.0 names no step"):
        assemble(_one_step_program("nop dep=1.0", channels=2), cfg)
    with pytest.raises(ProgramError, match=r"node 0 channel 0 step 0: send_peer 7 is not a node"):
        assemble(_one_step_program("s src=i[0] count=4 to=7@0"), cfg)
    big = compile_collective("allreduce", 4096, nodes=8, config=SMALL.replace(program_words=1024))
    with pytest.raises(ProgramError, match=r"node 0 channel \d: \d+ steps \+ end do not fit "
                                           r"program_words = 16"):
        assemble(big, SMALL.replace(program_words=16))
    # memory placement: no SRAM bound
    assemble(_one_step_program("cpy src=i[0] dst=o[16384] count=4", placement="memory"), cfg)


def test_scratch_placement():
    prog = _one_step_program("cpy src=s[0] dst=o[8] count=8")
    asm = assemble(prog, SMALL)
    assert asm.nodes[0].buffer_base["s"] == 0  # input SRAM is empty: scratch goes there
    prog = _one_step_program("cpy src=s[0] dst=i[16376] count=8")
    assert assemble(prog, SMALL).nodes[0].buffer_base["s"] == SMALL.input_buffer_words
    text = ("program collective=allreduce algorithm=x dtype=int32 op=sum count=4\nnode 0\n"
            "channel 0\n  0: cpy src=i[0] dst=o[0] count=16000\n"
            "  1: cpy src=s[0] dst=i[0] count=1000\nnode 1\n")
    with pytest.raises(ProgramError, match=r"node 0: scratch buffer s needs 250 words; neither "
                                           r"SRAM has room"):
        assemble(from_text(text), SMALL)


def test_topology_links():
    ring = Topology.parse("ring:4")
    assert ring == Topology.torus(4) and ring.num_links == 2
    assert ring.send_link(0, 1) == 0 and ring.recv_link(1, 0) == 1
    assert ring.send_link(1, 0) == 1 and ring.recv_link(0, 1) == 0
    with pytest.raises(ProgramError, match="not a neighbour"):
        ring.send_link(0, 2)
    torus = Topology.torus(4, 2)
    assert torus.num_nodes == 8 and torus.num_links == 4
    assert torus.coords(5) == (1, 1) and torus.node((1, 1)) == 5
    assert torus.group(5, 0) == [4, 5, 6, 7] and torus.group(5, 1) == [1, 5]
    assert torus.send_link(5, 1) == 2 and torus.recv_link(1, 5) == 3  # size-2 dimension
    assert torus.send_link(4, 7) == 1 and torus.recv_link(7, 4) == 0
    fc = Topology.fully_connected(4)
    for x in range(4):
        for y in range(4):
            if x != y:
                assert fc.send_link(x, y) == (y - x - 1) % 4 == fc.recv_link(x, y)
    sw = Topology.switch(4, 2)
    # A switch's virtual links are numbered as fully connected ones (one per peer).
    assert sw.num_links == 7 and str(sw) == "switch:4x2"
    assert sw.send_link(0, 7) == 6 == sw.recv_link(0, 7) and sw.send_link(7, 0) == 0
    with pytest.raises(ProgramError, match="kind 'mesh'"):
        Topology.parse("mesh:4")


@pytest.mark.parametrize("mode", list(Mode))
def test_step_memory_traffic_is_the_documented_accounting(mode):
    """The model's per-step bytes are the table of docs/engine.md ("Placement"), transcribed
    independently in testbench/accounting.py, for every step type and every mode."""
    for step_type in STEP_TYPES:
        step = Step(type=step_type, count=5, dtype=Dtype.BF16)
        read, written = DOCUMENTED_TRAFFIC[mode].get(step_type, (0, 0))
        assert step_memory_traffic(step, mode) == (10 * read, 10 * written), step_type
        assert step_memory_traffic(step, mode.placement) == (10 * read, 10 * written)


def test_listing_modes_and_the_baseline_alias():
    """A listing says ``mode=staged``/``p2p`` with ``placement=memory``/``p2p``; an old listing's
    ``mode=baseline`` reads as staged; every mode round-trips."""
    for mode in Mode:
        program = compile_collective("allreduce", 64, nodes=4, mode=mode, config=SMALL)
        assert program.mode is mode and program.nodes[0].placement == mode.placement
        text = to_text(program)
        assert f"mode={mode}" in text and f"placement={mode.placement}" in text
        again = from_text(text)
        assert again.mode is mode and again.nodes[0].mode is mode
    old = to_text(compile_collective("allreduce", 64, nodes=4, mode="baseline", config=SMALL))
    assert from_text(old.replace("mode=staged", "mode=baseline")).mode is Mode.STAGED
