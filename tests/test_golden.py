"""The golden model: step semantics on hand-written programs, dependencies, message matching,
deadlock and error detection, traffic counters."""

import numpy as np
import pytest

from ace.sw.golden import DeadlockError, GoldenError, run
from ace.numerics import reduce_elements
from ace.layouts import Dtype, ReduceOp
from ace.sw.program import from_text, memory_traffic

HEAD = "program collective=custom algorithm=hand dtype=int32 op=sum count=8\n"


def _node(n, placement="sram", inp=8, out=8, channels=()):
    text = (f"node {n} placement={placement} input=0x0 output=0x100 scratch=0x200 in={inp} "
            f"out={out} scratch_elems=8\n")
    for c, lines in enumerate(channels):
        text += f"channel {c}\n" + "".join(f"  {k}: {line}\n" for k, line in enumerate(lines))
    return text


@pytest.mark.parametrize("placement", ["sram", "memory"])
def test_step_semantics(placement):
    """Node 0 sends its input halves to node 1, which exercises r, rrc, rrs, rrcs, rcs, cpy, re
    and sends results back; checked against numpy by hand."""
    ld = "load dst=i[0] count=8 mem=0x0" if placement == "sram" else "nop"
    st = "store src=o[0] count=8 mem=0x100" if placement == "sram" else "nop"
    n0 = [ld, "s src=i[0] count=4 to=1@0", "s src=i[4] count=4 to=1@0",
          "s src=i[0] count=4 to=1@0", "s src=i[4] count=4 to=1@0",
          "r dst=o[0] count=4 from=1@0", "rrc src=i[4] dst=o[4] count=4 from=1@0", st]
    n1 = [ld,
          "r dst=s[0] count=4 from=0@0",                    # s[0:4] = a0
          "rrc src=i[4] dst=o[4] count=4 from=0@0",         # o[4:8] = a1 + b1
          "rrs src=i[0] count=4 from=0@0 to=0@0",           # send a0 + b0
          "rcs dst=o[0] count=4 from=0@0 to=0@0",           # o[0:4] = a1, send a1
          "cpy src=s[0] dst=s[4] count=4",                  # s[4:8] = a0
          "re src=s[4] dst=o[0] count=4",                   # o[0:4] = a1 + a0
          "re src=i[0] dst=o[0] count=4 op=max",            # o[0:4] = max(a1 + a0, b0)
          st]
    prog = from_text(HEAD + _node(0, placement, channels=[n0]) + _node(1, placement,
                                                                        channels=[n1]))
    a = np.array([1, 2, 3, 4, 50, 60, 70, 80], np.int32)
    b = np.array([100, -200, 300, 400, 5, 6, 7, 8], np.int32)
    res = run(prog, [a, b])
    np.testing.assert_array_equal(res.outputs[0], np.concatenate([a[:4] + b[:4], a[4:] + a[4:]]))
    np.testing.assert_array_equal(res.outputs[1], np.concatenate(
        [np.maximum(a[4:] + a[:4], b[:4]), a[4:] + b[4:]]))
    traffic = memory_traffic(prog)
    assert [(r, w) for r, w in traffic["per_node"]] == list(zip(res.mem_read_bytes,
                                                                res.mem_write_bytes))
    assert res.link_tx_bytes == {(0, 0): 64, (1, 0): 32}
    assert res.link_rx_bytes == {(0, 0): 32, (1, 0): 64}
    if placement == "sram":
        assert traffic["per_node"] == [(32, 32), (32, 32)]
    else:
        # node 1: r (0,16) rrc (32,32) rrs (48,32) rcs (16,16) cpy (16,16) re (32,16) x2
        assert traffic["per_node"][1] == (0 + 32 + 48 + 16 + 16 + 32 + 32,
                                          16 + 32 + 32 + 16 + 16 + 16 + 16)


def test_reductions_use_numerics_bit_exact():
    """bf16 sum through rrc equals ace.numerics.reduce_elements on the same operands."""
    text = ("program collective=custom algorithm=hand dtype=bf16 op=sum count=8\n"
            "node 0 input=0x0 output=0x100 in=8 out=0\nchannel 0\n"
            "  0: load dst=i[0] count=8 mem=0x0\n  1: s src=i[0] count=8 to=1@0\n"
            "node 1 input=0x0 output=0x100 in=8 out=8\nchannel 0\n"
            "  0: load dst=i[0] count=8 mem=0x0\n  1: rrc src=i[0] dst=o[0] count=8 from=0@0\n"
            "  2: store src=o[0] count=8 mem=0x100\n")
    prog = from_text(text)
    bits_a = np.array([0x7F80, 0xFF80, 0x0001, 0x8000, 0x3F80, 0x7FC1, 0x0080, 0x4000],
                      np.uint16)
    bits_b = np.array([0xFF80, 0x3F80, 0x0001, 0x8000, 0x3F81, 0x3F80, 0x8001, 0x4000],
                      np.uint16)
    out = run(prog, [bits_a, bits_b]).outputs[1]
    want = reduce_elements(ReduceOp.SUM, Dtype.BF16, bits_a, bits_b)
    np.testing.assert_array_equal(out.view(np.uint16), want.view(np.uint16))


def test_cross_channel_dependency_orders_steps():
    """Channel 1 copies i->o only after channel 0 has written i (dep 0.0)."""
    text = (HEAD + "node 0 in=8 out=8 output=0x100\nchannel 0\n  0: load dst=i[0] count=8 mem=0x0\n"
            "  1: store src=o[0] count=8 mem=0x100 dep=1.0\n"
            "channel 1\n  0: cpy src=i[0] dst=o[0] count=8 dep=0.0\n")
    prog = from_text(text)
    data = np.arange(8, dtype=np.int32) * 7
    np.testing.assert_array_equal(run(prog, [data]).outputs[0], data)


def test_fifo_matching_per_channel():
    """Two channels between the same pair keep separate FIFOs."""
    n0 = [["load dst=i[0] count=8 mem=0x0", "s src=i[0] count=4 to=1@0"],
          ["s src=i[4] count=4 to=1@0 dep=0.0"]]
    n1 = [["r dst=o[4] count=4 from=0@0", "store src=o[0] count=8 mem=0x100 dep=1.0"],
          ["r dst=o[0] count=4 from=0@0"]]
    prog = from_text(HEAD + _node(0, channels=n0) + _node(1, channels=n1))
    a = np.arange(8, dtype=np.int32) + 1
    out = run(prog, [a, np.zeros(8, np.int32)]).outputs[1]
    np.testing.assert_array_equal(out, np.concatenate([a[4:], a[:4]]))


def test_deadlock_dependency_never_comes():
    prog = from_text(HEAD + _node(0, channels=[["nop dep=1.5"], ["nop"]]))
    with pytest.raises(DeadlockError, match=r"deadlock after 1 of 2 steps; blocked: node 0 "
                                            r"channel 0 step 0 \(nop\): waits for channel 1 to "
                                            r"complete step 5 \(it has completed 1 steps\)"):
        run(prog, [np.zeros(8, np.int32)])


def test_deadlock_cycle_and_missing_sender():
    prog = from_text(HEAD + _node(0, channels=[["nop dep=1.0"], ["nop dep=0.0"]]))
    with pytest.raises(DeadlockError, match=r"node 0 channel 0 step 0 \(nop\): waits for "
                                            r"channel 1.*node 0 channel 1 step 0 \(nop\)"):
        run(prog, [np.zeros(8, np.int32)])
    prog = from_text(HEAD + _node(0, channels=[["r dst=o[0] count=4 from=1@0"]])
                     + _node(1, channels=[["nop"]]))
    with pytest.raises(DeadlockError, match=r"node 0 channel 0 step 0 \(r\): waits for a "
                                            r"message from node 1 on channel 0"):
        run(prog, [np.zeros(8, np.int32)] * 2)


def test_message_errors():
    size = from_text(HEAD + _node(0, channels=[["s src=i[0] count=4 to=1@0"]])
                     + _node(1, channels=[["r dst=o[0] count=2 from=0@0"]]))
    with pytest.raises(GoldenError, match=r"node 1 channel 0 step 0 \(r\): receives 8 bytes but "
                                          r"the message from node 0 channel 0 step 0 \(s\) has 16"):
        run(size, [np.zeros(8, np.int32)] * 2)
    left = from_text(HEAD + _node(0, channels=[["s src=i[0] count=4 to=1@0"]])
                     + _node(1, channels=[["nop"]]))
    with pytest.raises(GoldenError, match=r"messages never received: 1 from node 0 to node 1"):
        run(left, [np.zeros(8, np.int32)] * 2)
    oob = from_text(HEAD + _node(0, placement="memory", channels=[["cpy src=i[0] dst=o[4096] "
                                                                   "count=4"]]))
    run(oob, [np.zeros(8, np.int32)])  # memory grows to cover what the program addresses
    with pytest.raises(GoldenError, match=r"node 0: input has 3 elements; the program expects 8"):
        run(oob, [np.zeros(3, np.int32)])
    with pytest.raises(GoldenError, match=r"inputs: 2 arrays for 1 nodes"):
        run(oob, [np.zeros(8, np.int32)] * 2)
