"""The channel datapath's receive checks (``StepDatapath.recv_error``, reported as
``RECV_MISMATCH``) in the Amaranth simulator: a receive step (operand A from the NIC, copied to
the SRAM) is fed a message as the NIC delivers it, once exactly as expected and once with one
field of one beat wrong. The expected beats come from a plain Python model of the packet
format (``docs/programming_model.md``: a message of ``n`` bytes in packets of ``P`` bytes,
the last one shorter; every beat repeats its packet's source, tag (the packet's index) and
length; ``first`` and ``last`` mark the packet's ends), not from the hardware's counters.
"""

from __future__ import annotations

import random

import pytest
from amaranth.sim import Simulator

from ace.config import NAMED_CONFIGS
from ace.hw.channel.datapath import ASource, StepDatapath
from ace.layouts import NIC_TAG_BITS, Dtype, ReduceOp

CONFIG = NAMED_CONFIGS["small"].replace(max_packet_bytes=64)
B = CONFIG.link_bytes
P = CONFIG.packet_bytes
PEER = 5


def message_beats(nbytes: int) -> list[dict]:
    """The beats of a message of ``nbytes`` bytes from ``PEER``, as a correct NIC delivers
    them."""
    beats = []
    for index, start in enumerate(range(0, nbytes, P)):
        length = min(P, nbytes - start)
        count = -(-length // B)
        for k in range(count):
            beats.append({"first": int(k == 0), "last": int(k == count - 1), "src": PEER,
                          "tag": index % (1 << NIC_TAG_BITS), "length": length})
    return beats


def corrupt(beats: list[dict], field: str, rng: random.Random) -> list[dict]:
    """A copy of ``beats`` with ``field`` wrong on one beat where the step checks it (a
    packet's first beat for ``length`` and ``tag``)."""
    beats = [dict(beat) for beat in beats]
    where = [i for i, beat in enumerate(beats) if field not in ("length", "tag") or beat["first"]]
    beat = beats[rng.choice(where)]
    if field in ("first", "last"):
        beat[field] ^= 1
    elif field == "src":
        beat["src"] = PEER ^ (1 << rng.randrange(8))
    elif field == "tag":
        beat["tag"] = (beat["tag"] + rng.randrange(1, 1 << NIC_TAG_BITS)) % (1 << NIC_TAG_BITS)
    else:
        beat["length"] = beat["length"] + rng.choice([-1, 1, B, -B]) if beat["length"] > B \
            else beat["length"] + 1
    return beats


def run_step(nbytes: int, beats: list[dict], seed: int) -> int:
    """Run one receive step of ``nbytes`` on ``beats`` (random idle cycles between them);
    return ``recv_error`` at ``done``."""
    dut = StepDatapath(CONFIG)
    rng = random.Random(seed)
    result = {}

    async def testbench(ctx):
        ctx.set(dut.sram_wr.ready, 1)
        plan = dut.plan.payload
        ctx.set(plan.a_src, ASource.NIC)
        ctx.set(plan.w_use, 1)
        ctx.set(plan.recv_peer, PEER)
        ctx.set(plan.op, ReduceOp.COPY)
        ctx.set(plan.dtype, Dtype.INT32)
        ctx.set(plan.bytes, nbytes)
        ctx.set(dut.plan.valid, 1)
        await ctx.tick().until(dut.plan.ready)
        ctx.set(dut.plan.valid, 0)
        sent = 0
        for _ in range(40 * len(beats) + 200):
            if sent < len(beats) and rng.random() < 0.7:
                for name, value in beats[sent].items():
                    ctx.set(getattr(dut.nic_recv.payload, name), value)
                ctx.set(dut.nic_recv.payload.keep, (1 << B) - 1)
                ctx.set(dut.nic_recv.valid, 1)
            else:
                ctx.set(dut.nic_recv.valid, 0)
            _, _, done, error, took = await ctx.tick().sample(
                dut.done, dut.recv_error, dut.nic_recv.valid & dut.nic_recv.ready)
            sent += took
            if done:
                result["error"] = error
                result["taken"] = sent
                return
        raise AssertionError(f"seed {seed}: the step did not finish ({sent} of {len(beats)} "
                             "beats taken)")

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    assert result["taken"] == len(beats), f"seed {seed}: {result['taken']} beats taken"
    return result["error"]


@pytest.mark.parametrize("nbytes", [B, P, P + 5, 2 * P + 3 * B + 7])
def test_a_correct_message_passes(nbytes):
    assert run_step(nbytes, message_beats(nbytes), seed=nbytes) == 0, f"{nbytes} bytes"


@pytest.mark.parametrize("field", ["src", "first", "last", "length", "tag"])
def test_one_wrong_field_is_reported(field):
    nbytes = 2 * P + 3 * B + 7
    seed = sum(map(ord, field))
    beats = corrupt(message_beats(nbytes), field, random.Random(seed))
    assert run_step(nbytes, beats, seed=seed) == 1, f"seed {seed}: {field} not reported"
