"""Test order for the parallel suite: the files dominated by a Verilator build go first.

``make test`` runs pytest-xdist with ``--dist loadfile --no-loadscope-reorder``: each file runs
on one worker, and files are handed out in collection order. A build takes minutes of one
worker while most files take seconds, so starting the builds first lets the many short files
fill the other worker beside them instead of leaving one long build at the end of the run.
"""

from __future__ import annotations

from pathlib import Path

#: Longest first: (system build + runs), the engine/block cocotb builds, the lint of the
#: default configuration. Files that reuse the ``ring8`` build of test_harness.py
#: (experiments, sweep, replay scale) keep their place further on, when it is built.
BUILD_FIRST = ("test_harness.py", "test_cocotb_system.py", "test_harness_switch.py",
               "test_cocotb_engine.py", "test_cocotb_dma.py", "test_cocotb_nic.py",
               "test_cocotb_alu_array.py", "test_cocotb_sram.py", "test_generate.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: k for k, name in enumerate(BUILD_FIRST)}
    items.sort(key=lambda item: rank.get(Path(str(item.path)).name, len(rank)))
