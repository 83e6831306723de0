"""Amaranth-simulator tests of :class:`ace.hw.channel.microsteps.MicroStepPlanner`, the
memory placements' expansion of a step into micro-steps.

Each step is planned as the sequencer decodes it, and the micro-steps the planner gives are
executed on symbolic locations (the received data, the ``src`` slice, the ``dst`` slice, the
staging packets). Expected: what the step type means (the golden model's ``_apply``), exactly
one receive for a receiving step, one send of the right value for a sending step, and memory
reads and writes that add up to the documented accounting
(:func:`ace.sw.program.step_memory_traffic`) for every placement.
"""

import pytest
from amaranth.sim import Simulator

from ace.config import NAMED_CONFIGS
from ace.hw.channel.datapath import ASource
from ace.hw.channel.microsteps import MAX_MICRO_STEPS, MicroStepPlanner
from ace.isa import NAME_TO_OPCODE
from ace.layouts import ReduceOp
from ace.sw.program import Step, step_memory_traffic
from ace.vocab import Mode, StepType

CFG = NAMED_CONFIGS["small"]
SRC, DST, MEM, STAGE, STAGE2 = 0x1000, 0x2000, 0x3000, 0x8000, 0x8400
NBYTES = 64

#: Operand A, operand B, where the result is written, whether it is sent: the step table of
#: docs/engine.md ("One datapath shape for every step"); ``mem`` is the load/store address.
STEP_SHAPE = {
    StepType.LOAD: ("mem", None, "dst", False), StepType.STORE: ("src", None, "mem", False),
    StepType.SEND: ("src", None, None, True), StepType.RECV: ("nic", None, "dst", False),
    StepType.RRC: ("nic", "src", "dst", False), StepType.RRS: ("nic", "src", None, True),
    StepType.RRCS: ("nic", "src", "dst", True), StepType.RCS: ("nic", None, "dst", True),
    StepType.CPY: ("src", None, "dst", False), StepType.RE: ("src", "dst", "dst", False),
}
ADDR = {"src": SRC, "dst": DST, "mem": MEM}


def decoded_step(step_type, mode):
    """The plan the sequencer's decode stage gives for ``step_type`` in ``mode``."""
    a, b, w, send = STEP_SHAPE[step_type]
    mem = mode.in_memory
    return {
        "a_src": {"nic": ASource.NIC, "mem": ASource.MEM}.get(
            a, ASource.MEM if mem else ASource.SRAM),
        "a_addr": ADDR.get(a, 0), "b_use": b is not None, "b_mem": mem,
        "b_addr": ADDR.get(b, 0), "w_use": w is not None, "w_mem": w == "mem" or mem,
        "w_addr": ADDR.get(w, 0), "send": send, "op": ReduceOp.SUM if b else ReduceOp.COPY,
        "bytes": NBYTES,
    }


def plan_micro_steps(step_type, mode):
    """``(count, [plan of each micro-step])`` from the planner in the simulator."""
    dut = MicroStepPlanner(CFG)
    out = {}

    async def bench(ctx):
        for name, value in decoded_step(step_type, mode).items():
            ctx.set(getattr(dut.step, name), value)
        ctx.set(dut.opcode, NAME_TO_OPCODE[step_type])
        ctx.set(dut.in_memory, mode.in_memory)
        ctx.set(dut.p2p, mode is Mode.P2P)
        ctx.set(dut.stage, STAGE)
        ctx.set(dut.stage2, STAGE2)
        out["count"] = count = ctx.get(dut.count)
        assert 1 <= count <= MAX_MICRO_STEPS
        plans = []
        for k in range(count):
            ctx.set(dut.micro, k)
            plans.append({f: ctx.get(getattr(dut.plan, f)) for f in (
                "a_src", "a_addr", "b_use", "b_mem", "b_addr", "w_use", "w_mem", "w_addr",
                "send", "op", "bytes")})
        out["plans"] = plans

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    return out["count"], out["plans"]


def execute(plans, mode):
    """Run micro-steps on symbolic locations; ``(final locations, sent, receives, reads,
    writes)``, the memory bytes counted as the datapath's DMA readers and writer move them."""
    where = {SRC: "src", DST: "dst", MEM: "mem"}
    sent, receives, reads, writes = [], 0, 0, 0
    for p in plans:
        assert p["bytes"] == NBYTES
        if p["a_src"] == ASource.NIC:
            a, receives = "rx", receives + 1
        else:
            assert (p["a_src"] == ASource.MEM) == mode.in_memory or p["a_addr"] == MEM
            a = where[p["a_addr"]]
            reads += NBYTES * (p["a_src"] == ASource.MEM)
        result = a
        if p["b_use"]:
            assert p["b_mem"] == mode.in_memory
            reads += NBYTES * p["b_mem"]
            result = ("sum", a, where[p["b_addr"]])
        else:
            assert p["op"] == ReduceOp.COPY
        if p["w_use"]:
            where[p["w_addr"]] = result
            writes += NBYTES * p["w_mem"]
        if p["send"]:
            sent.append(result)
    return where, sent, receives, reads, writes


#: What each step means (the golden model's ``_apply``): final dst / memory, what is sent.
MEANING = {
    StepType.LOAD: ({DST: "mem"}, []), StepType.STORE: ({MEM: "src"}, []),
    StepType.SEND: ({}, ["src"]), StepType.RECV: ({DST: "rx"}, []),
    StepType.RRC: ({DST: ("sum", "rx", "src")}, []),
    StepType.RRS: ({}, [("sum", "rx", "src")]),
    StepType.RRCS: ({DST: ("sum", "rx", "src")}, [("sum", "rx", "src")]),
    StepType.RCS: ({DST: "rx"}, ["rx"]), StepType.CPY: ({DST: "src"}, []),
    StepType.RE: ({DST: ("sum", "src", "dst")}, []),
}

#: Micro-steps per receiving step: docs/engine.md, "Placement".
MICRO_STEPS = {
    Mode.STAGED: {StepType.RECV: 1, StepType.RCS: 2, StepType.RRC: 2, StepType.RRCS: 3,
                  StepType.RRS: 3},
    Mode.P2P: {StepType.RECV: 1, StepType.RCS: 2, StepType.RRC: 2, StepType.RRCS: 2,
               StepType.RRS: 2},
}


@pytest.mark.parametrize("mode", list(Mode))
@pytest.mark.parametrize("step_type", list(STEP_SHAPE))
def test_micro_steps(step_type, mode):
    count, plans = plan_micro_steps(step_type, mode)
    expected_count = MICRO_STEPS.get(mode, {}).get(step_type, 1)
    assert count == expected_count, f"{step_type} in {mode}: {count} micro-steps"
    where, sent, receives, reads, writes = execute(plans, mode)
    final, sends = MEANING[step_type]
    for addr, value in final.items():
        assert where[addr] == value, f"{step_type} in {mode}: {addr:#x} holds {where[addr]}"
    untouched = {SRC: "src", DST: "dst", MEM: "mem"}
    for addr, value in untouched.items():
        if addr not in final:
            assert where[addr] == value, f"{step_type} in {mode}: {addr:#x} was overwritten"
    assert sent == sends
    assert receives == ("recv" in step_type.operands)
    step = Step(type=step_type, count=NBYTES // 4)
    assert (reads, writes) == step_memory_traffic(step, mode)


def test_ace_mode_passes_the_plan_through():
    """In ``sram`` placement every step is one micro-step whose plan is the decoded one."""
    for step_type in STEP_SHAPE:
        count, (plan,) = plan_micro_steps(step_type, Mode.ACE)
        want = decoded_step(step_type, Mode.ACE)
        assert count == 1
        assert {k: _number(plan[k]) for k in want} == {
            k: _number(v) for k, v in want.items()}, step_type


def _number(value) -> int:
    return value.value if hasattr(value, "value") else int(value)
