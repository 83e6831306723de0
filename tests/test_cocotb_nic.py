"""Build the NIC tops with Verilator and run the cocotb tests in ``testbench/tb_nic.py``.

``ace_nic`` runs the loopback and malformed-packet tests on the ``small`` configuration (2 links,
16-byte beats, 2 channels); ``ace_nic_pair`` (two NICs back to back) runs the stalled-channel
test on ``small`` with 4 channels. Each test module runs every scenario three ways (no pauses,
idle source cycles, sink backpressure). The benchmark (``-m benchmark``) measures payload
throughput with 1 KiB and 2 KiB packets.
"""

import os

import pytest

from ace.config import NAMED_CONFIGS
from testbench.runner import run_cocotb

SMALL = NAMED_CONFIGS["small"]
PAIR = SMALL.replace(name="small4ch", num_channels=4)
BENCH = SMALL.replace(name="nicbench", max_packet_bytes=2048, rx_channel_beats=512)


def _seed_env():
    return {"ACE_SEED": os.environ["ACE_SEED"]} if "ACE_SEED" in os.environ else {}


def test_nic_loopback_and_malformed():
    run_cocotb("ace_nic", SMALL, "tb_nic", extra_env=_seed_env())


def test_nic_pair_stalled_channel():
    run_cocotb("ace_nic_pair", PAIR, "tb_nic", extra_env=_seed_env())


@pytest.mark.parametrize("top, config", [("ace_nic", SMALL), ("ace_nic_pair", PAIR)])
def test_nic_gated_clock(top, config):
    """The same scenarios with each link's transmitter and receiver on a gated clock that runs
    only while they have work (the form the harness simulates)."""
    run_cocotb(top, config.replace(name=config.name + "_gated", clock_gating="clock"), "tb_nic",
               extra_env=_seed_env())


@pytest.mark.benchmark
@pytest.mark.parametrize("packet_bytes", [1024, 2048])
def test_nic_benchmark(packet_bytes, tmp_path):
    out = tmp_path / "bench.jsonl"
    run_cocotb("ace_nic_pair", BENCH, "tb_nic", testcase=None,
               extra_env={"ACE_NIC_BENCH": "1", "ACE_NIC_BENCH_BYTES": str(packet_bytes),
                          "ACE_NIC_BENCH_OUT": str(out)})
    for line in out.read_text().splitlines():
        print(line)
