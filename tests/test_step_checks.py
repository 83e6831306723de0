"""The sequencer's step checks (``AceChannel``'s ADDR and CHECK stages) against a golden model
written from the ISA's rules, on random instructions drawn around every bound.

Each case resets the channel, writes ``k`` NOPs and the instruction under test into its
instruction memory, starts it and reads the error status once the instruction has been checked.
The golden model states each rule as plain integer arithmetic (``docs/programming_model.md``,
the channel's docstring), independent of how the hardware computes it.
"""

from __future__ import annotations

import os
import random

import pytest
from amaranth.hdl import Module, ResetInserter, Signal
from amaranth.sim import Simulator

from ace.config import NAMED_CONFIGS
from ace.hw.channel.sequencer import AceChannel
from ace.isa import Instruction
from ace.layouts import DMA_LENGTH_BITS
from ace.regmap import ErrorCause

SEED = int(os.environ.get("ACE_SEED", "20261125"))

# Opcode -> (defined, moves data, uses src, dst, mem, sends, receives), from the ISA's table.
_USES = {
    0: (1, 0, 0, 0, 0, 0, 0),   # nop
    1: (1, 1, 0, 1, 1, 0, 0),   # load: mem -> dst
    2: (1, 1, 1, 0, 1, 0, 0),   # store: src -> mem
    3: (1, 1, 1, 0, 0, 1, 0),   # s: src -> link
    4: (1, 1, 0, 1, 0, 0, 1),   # r: link -> dst
    5: (1, 1, 1, 1, 0, 0, 1),   # rrc: link (+) src -> dst
    6: (1, 1, 1, 0, 0, 1, 1),   # rrs: link (+) src -> link
    7: (1, 1, 1, 1, 0, 1, 1),   # rrcs: link (+) src -> dst and link
    8: (1, 1, 0, 1, 0, 1, 1),   # rcs: link -> dst and link
    9: (1, 1, 1, 1, 0, 0, 0),   # cpy: src -> dst
    10: (1, 1, 1, 1, 0, 0, 0),  # re: dst (+) src -> dst
    15: (1, 0, 0, 0, 0, 0, 0),  # end
}


def pack(fields: dict) -> int:
    """Raw field values (undefined encodings allowed) into an instruction word."""
    bits = 0
    for name, value in fields.items():
        bits |= value << Instruction[name].offset
    return bits


def expected_cause(cfg, fields, pc, in_memory, bases, limits, index=0) -> ErrorCause:
    """The first failing check of one instruction, from the rules alone."""
    defined, data, src, dst, mem, send, recv = _USES.get(fields["opcode"], (0,) * 7)
    B = cfg.link_bytes
    if not defined or any(fields[f"rsvd{i}"] for i in range(4)):
        return ErrorCause.BAD_OPCODE
    n_full = fields["count"] * (4 if fields["dtype"] in (0, 1) else 2)
    if data and (fields["count"] == 0 or n_full >= 1 << DMA_LENGTH_BITS
                 or (in_memory and recv and n_full > cfg.packet_bytes)):
        return ErrorCause.BAD_COUNT
    if (send and fields["send_link"] >= cfg.num_links) or (
            recv and fields["recv_link"] >= cfg.num_links):
        return ErrorCause.BAD_LINK
    if (src and fields["src_buf"] == 3) or (dst and fields["dst_buf"] == 3):
        return ErrorCause.BAD_BUFFER
    n = n_full % (1 << DMA_LENGTH_BITS)
    words = -(-n // B)

    def slice_ok(buf, off):
        base, limit = bases[buf], limits[buf]
        if off + words > limit:
            return False
        if in_memory:
            return base + off * B + n <= 1 << cfg.mem_addr_bits
        return base + off + words <= cfg.sram_words

    if ((src and not slice_ok(fields["src_buf"], fields["src_off"]))
            or (dst and not slice_ok(fields["dst_buf"], fields["dst_off"]))
            or (mem and fields["mem_addr"] + n > 1 << cfg.mem_addr_bits)):
        return ErrorCause.BAD_ADDRESS
    if fields["dep_valid"] and (fields["dep_channel"] >= cfg.num_channels or (
            fields["dep_channel"] == index and fields["dep_step"] >= pc)):
        return ErrorCause.BAD_DEP
    return ErrorCause.NONE


def _near(rng, value, spread=2):
    return max(0, value + rng.randint(-spread, spread))


def random_case(rng, cfg):
    """An instruction, its position and the buffer table, each value drawn either anywhere in
    its field or within a few units of a bound the checks test."""
    B, M, W = cfg.link_bytes, cfg.mem_addr_bits, cfg.sram_words
    in_memory = rng.random() < 0.5
    bases, limits = [], []
    for _ in range(3):
        if in_memory:
            bases.append(rng.choice([rng.randrange(1 << M), rng.randrange(1 << 20),
                                     _near(rng, (1 << M) - 4096, 64), _near(rng, 1 << M),
                                     rng.randrange(1 << 64)]))
        else:
            bases.append(rng.choice([rng.randrange(W), rng.randrange(W // 2),
                                     _near(rng, W - 64, 64), _near(rng, W),
                                     _near(rng, 1 << cfg.sram_addr_bits),
                                     rng.randrange(1 << 64)]))
        limits.append(rng.choice([rng.randrange(1 << 32), rng.randrange(1, 256),
                                  (1 << 32) - 1]))
    opcode = rng.choice([*_USES] * 4 + [11, 12, 13, 14])
    dtype = rng.randrange(4)
    esize = 4 if dtype in (0, 1) else 2
    count = rng.choice([rng.randrange(1, 200), rng.randrange(1, 200), 0, _near(rng, (1 << DMA_LENGTH_BITS) // esize),
                        _near(rng, cfg.packet_bytes // esize), rng.randrange(1 << 32)])
    words = -(-(count * esize % (1 << DMA_LENGTH_BITS)) // B)
    fields = {f"rsvd{i}": 0 for i in range(4)}
    if rng.random() < 0.03:
        fields[f"rsvd{rng.randrange(4)}"] = 1
    fields |= {"opcode": opcode, "dtype": dtype, "op": rng.randrange(4), "count": count,
               "send_link": rng.choice([0, cfg.num_links - 1] * 3 + [cfg.num_links, 15]),
               "recv_link": rng.choice([0, cfg.num_links - 1] * 3 + [cfg.num_links, 15]),
               "send_peer": rng.randrange(256), "recv_peer": rng.randrange(256)}
    for which in ("src", "dst"):
        buf = rng.choice([0, 1, 2, 0, 1, 2, 3])
        base, limit = bases[buf % 3], limits[buf % 3]
        room = ((1 << M) - base) // B if in_memory else W - base
        fields[f"{which}_buf"] = buf
        fields[f"{which}_off"] = min((1 << 32) - 1, rng.choice([
            rng.randrange(64), rng.randrange(64), _near(rng, max(0, limit - words)),
            _near(rng, max(0, room - words)), rng.randrange(1 << 32)]))
    n = count * esize % (1 << DMA_LENGTH_BITS)
    fields["mem_addr"] = rng.choice([rng.randrange(1 << M), rng.randrange(1 << M),
                                     _near(rng, max(0, (1 << M) - n)),
                                     rng.randrange(1 << 64)])
    pc = rng.randrange(3)
    fields |= {"dep_valid": int(rng.random() < 0.4), "dep_channel": rng.randrange(4),
               "dep_step": rng.choice([0, 1, pc, pc + 1, rng.randrange(1 << 16)]),
               "rsvd2": fields["rsvd2"]}
    return fields, pc, in_memory, bases, limits


@pytest.mark.parametrize("config_name", ["small", "default"])
def test_step_checks_match_the_golden_model(config_name):
    cfg = NAMED_CONFIGS[config_name]
    rng = random.Random(f"{SEED}-{config_name}")
    cases = [random_case(rng, cfg) for _ in range(400)]
    dut = AceChannel(cfg, 0)
    rst = Signal()
    top = Module()
    top.submodules.dut = ResetInserter(rst)(dut)
    sim = Simulator(top)
    sim.add_clock(1e-8)
    seen = {cause: 0 for cause in ErrorCause}
    failures = []

    async def bench(ctx):
        for number, (fields, pc, in_memory, bases, limits) in enumerate(cases):
            ctx.set(dut.placement, 1 if in_memory else 0)
            for b in range(3):
                ctx.set(dut.buf_base[b], bases[b])
                ctx.set(dut.buf_limit[b], limits[b])
            ctx.set(rst, 1)
            await ctx.tick()
            ctx.set(rst, 0)
            program = [0] * pc + [pack(fields)]  # pc NOPs first: the instruction's pc
            for addr, word in enumerate(program):
                ctx.set(dut.imem_we, 1)
                ctx.set(dut.imem_addr, addr)
                ctx.set(dut.imem_data, word)
                await ctx.tick()
            ctx.set(dut.imem_we, 0)
            ctx.set(dut.start, 1)
            ctx.set(dut.enable, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            await ctx.tick().repeat(6 * pc + 7)  # FETCH .. DEP per NOP, then FETCH .. CHECK
            want = expected_cause(cfg, fields, pc, in_memory, bases, limits)
            got = ctx.get(dut.error_cause) if ctx.get(dut.error) else ErrorCause.NONE
            seen[want] += 1
            # error_pc is the channel's pc: below the instruction's, it was never checked.
            if got != want or ctx.get(dut.error_pc) < pc:
                failures.append(f"case {number}: got {got.name}, want {want.name}: "
                                f"pc={pc} in_memory={in_memory} bases={bases} "
                                f"limits={limits} {fields}")

    sim.add_testbench(bench)
    sim.run()
    assert not failures, f"seed {SEED} (ACE_SEED): {len(failures)} of {len(cases)}\n" + \
        "\n".join(failures[:5])
    # The draw reaches every cause the checks give, and passing steps as often as any.
    assert all(seen[c] for c in ErrorCause if c.name.startswith("BAD_")
               and c != ErrorCause.BAD_PLACEMENT), seen
    assert seen[ErrorCause.NONE] >= 40, seen
