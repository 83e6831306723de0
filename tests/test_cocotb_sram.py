"""cocotb on the generated Verilog of ``ace_sram`` (small configuration), through Verilator.

One Verilator build is shared by every case (``testbench.runner`` caches it by configuration).
``ACE_SEED=<n>`` reruns the random traffic with a given seed; the seed is logged by each case.
"""

import os

import pytest

from ace.config import NAMED_CONFIGS
from testbench.runner import run_cocotb

CASES = ["test_random_no_pauses", "test_random_idle_sources", "test_random_backpressure",
         "test_throughput"]


@pytest.mark.parametrize("testcase", CASES)
def test_sram_cocotb(testcase):
    env = {"ACE_SEED": os.environ["ACE_SEED"]} if os.environ.get("ACE_SEED") else {}
    run_cocotb("ace_sram", NAMED_CONFIGS["small"], "tb_sram", testcase=testcase, extra_env=env)
