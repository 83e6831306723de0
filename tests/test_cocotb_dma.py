"""cocotb tests of the DMA engine on Verilator (``testbench/tb_dma.py``), config ``small``.

One simulator run executes every scenario (random mix, directed corner cases, injected AXI
errors), each three ways (no pauses, idle sources, sink backpressure). ``DMA_SEED`` in the
environment changes the base seed; the seeds are printed in the log. The throughput benchmark is
``-m benchmark``.
"""

import json
import os

import pytest

from ace.config import NAMED_CONFIGS
from testbench.runner import BUILD_ROOT, run_cocotb

CONFIG = NAMED_CONFIGS["small"]


def _env(**extra):
    return {"DMA_SEED": os.environ.get("DMA_SEED", "1"), **extra}


def test_dma_cocotb():
    run_cocotb("ace_dma", CONFIG, "tb_dma",
               extra_env=_env(COCOTB_TEST_FILTER="test_(random_mix|directed|errors)"))


@pytest.mark.benchmark
def test_dma_throughput():
    out = BUILD_ROOT / f"dma-throughput-{CONFIG.name}.json"
    run_cocotb("ace_dma", CONFIG, "tb_dma",
               extra_env=_env(COCOTB_TEST_FILTER="test_throughput", DMA_BENCH_OUT=str(out)))
    results = json.loads(out.read_text())
    print(f"\nDMA throughput, config {CONFIG.name} ({CONFIG.mem_bytes}-byte beats), zero wait "
          "states; fraction of one direction's port bandwidth:")
    for r in results:
        print(f"  {r['transfer']:<15} {r['bytes']:>6} B  {r['cycles']:>6} cycles  "
              f"{100 * r['fraction_of_port']:5.1f}%")
    for r in results:
        if r["bytes"] >= 4096:
            assert r["fraction_of_port"] >= 0.95, r
