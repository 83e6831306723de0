"""cocotb tests of one ACE engine on Verilator (``testbench/tb_engine.py``), config ``small``:
links in loopback, random programs over every step type in the three placements (ACE, staged,
p2p), with and without backpressure; every step type in every mode against the documented
memory accounting; and bad programs (each error cause, then recovery). ``ENGINE_SEED`` changes
the base seed."""

import os

from ace.config import NAMED_CONFIGS
from testbench.runner import run_cocotb

CONFIG = NAMED_CONFIGS["small"]


def _env(**extra):
    return {"ENGINE_SEED": os.environ.get("ENGINE_SEED", "1"), **extra}


def test_engine_loopback_programs():
    run_cocotb("ace_engine", CONFIG, "tb_engine",
               extra_env=_env(COCOTB_TEST_FILTER="test_loopback_(programs|backpressure)"))


def test_engine_bad_programs():
    run_cocotb("ace_engine", CONFIG, "tb_engine",
               extra_env=_env(COCOTB_TEST_FILTER="test_bad_programs"))


def test_engine_step_accounting():
    run_cocotb("ace_engine", CONFIG, "tb_engine",
               extra_env=_env(COCOTB_TEST_FILTER="test_step_accounting"))


def test_engine_bad_programs_gated_clock():
    """Each error cause and the recovery from it with the engine's idle blocks on gated clocks
    (the form the harness simulates): the sequencer's decode, the datapath, the NIC's links."""
    run_cocotb("ace_engine", CONFIG.replace(name="small_gated", clock_gating="clock"),
               "tb_engine", extra_env=_env(COCOTB_TEST_FILTER="test_bad_programs"))
