"""``ace demo``: the main job until the harness exists.

Generates the configuration's Verilog, builds the ALU array top with Verilator (cached), streams
random fp32 and bf16 beats (sum, max, min) through it, checks every beat against the numpy golden
model, and prints the throughput measured in simulation.
"""

from __future__ import annotations

import json
import time

from ace.config import NAMED_CONFIGS, AceConfig
from ace.errors import UserError
from ace.flow.generate import RTL_DIR, write

__all__ = ["run_demo"]


def run_demo(config: AceConfig, *, beats: int, seed: int) -> int:
    from testbench.runner import run_cocotb

    if beats < 3:
        raise UserError(f"--beats: {beats} is too small; allowed: 3 or more")
    started = time.monotonic()
    if NAMED_CONFIGS.get(config.name) == config:
        paths = write(config, RTL_DIR / config.name)
        print(f"Verilog: {len(paths)} files in {RTL_DIR / config.name}")
    print(f"Building and running the ALU array ({config.alu_lanes} lanes, config "
          f"'{config.name}') on Verilator; the first build takes a few minutes ...", flush=True)
    results = run_cocotb("ace_alu_array", config, "tb_alu_demo",
                         extra_env={"ACE_DEMO_BEATS": str(beats), "ACE_DEMO_SEED": str(seed)},
                         quiet=True)
    figures = json.loads((results.parent / "demo.json").read_text())
    total = sum(figures["elements_checked"].values())
    print()
    print(f"{'op/dtype':<14} {'elements checked':>17}")
    for key, count in sorted(figures["elements_checked"].items()):
        print(f"{key:<14} {count:>17,}")
    print(f"{'total':<14} {total:>17,}   all bit-exact against the numpy golden model")
    print()
    print(f"beats            {figures['beats']:,}  (seed {seed})")
    print(f"throughput       {figures['beats_per_cycle']:.4f} beats/cycle over "
          f"{figures['window_cycles']:,} cycles = {figures['bytes_per_cycle']:.0f} B/cycle "
          f"= {figures['gbytes_per_s_at_clock']:.1f} GB/s at {config.clock_mhz:g} MHz")
    print(f"latency          {figures['latency_cycles']} cycles")
    print(f"wall time        {time.monotonic() - started:.0f} s")
    return 0
