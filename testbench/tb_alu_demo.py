"""The ``ace demo`` run: random fp32 and bf16 beats through the ALU array, checked, timed.

Beats come from :mod:`testbench.alu_stimulus` (sum, max and min mixed beat by beat, expected
values from :mod:`ace.numerics`); the scoreboard of :class:`testbench.tb_alu_array.TB` checks
every beat. The figures go to ``demo.json`` in the test directory for ``ace demo`` to print.
Environment: ``ACE_DEMO_BEATS`` (beats per dtype), ``ACE_DEMO_SEED``.
"""

import json
import os
from pathlib import Path

import cocotb
import numpy as np

from ace.layouts import Dtype, ReduceOp
from testbench.alu_stimulus import make_beats
from testbench.tb_alu_array import TB


@cocotb.test()
async def demo(dut):
    tb = TB(dut)
    beats_per_dtype = int(os.environ.get("ACE_DEMO_BEATS", "20000"))
    seed = int(os.environ.get("ACE_DEMO_SEED", "1"))
    rng = np.random.default_rng(seed)
    ops = [ReduceOp.SUM, ReduceOp.MAX, ReduceOp.MIN]
    plan = [(op, dtype, "mixed", beats_per_dtype // len(ops))
            for dtype in (Dtype.FP32, Dtype.BF16) for op in ops]
    beats = make_beats(tb.config, rng, plan, last_probability=0.0)
    tb.set_flow("no_pauses", rng)
    await tb.reset()
    figures = await tb.run_measured(beats)   # raises on any mismatch
    figures["seed"] = seed
    figures["elements_checked"] = {f"{op}/{dtype}": n for (op, dtype), n in beats.elements.items()}
    Path("demo.json").write_text(json.dumps(figures, indent=2, sort_keys=True))
