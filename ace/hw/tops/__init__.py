"""Registry of the Verilog tops that ``ace generate`` writes and the cocotb testbenches drive.

Each entry names a module path and a class whose constructor takes an :class:`AceConfig`. The
import is lazy so that generating one top never needs every block's module.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

__all__ = ["TopSpec", "TOPS", "shipped_tops", "synth_tops"]


@dataclass(frozen=True)
class TopSpec:
    module: str
    cls: str
    description: str
    #: False for test-only tops: testbenches build them, ``ace generate`` does not ship them.
    shipped: bool = True
    #: Submodules that FPGA synthesis (``ace synth``) keeps as modules of their own instead of
    #: flattening them into the top: paths below the top, one ``fnmatch`` pattern per level
    #: (``array.lane*`` is every lane of ``array``, not their children). Yosys optimizes each
    #: kept module alone, so registers that hold the same value in several of them (the same
    #: op, dtype or operand bits) stay separate flip-flops, each driving only its own module's
    #: logic, where ``opt_merge`` would make one flip-flop drive them all
    #: (``docs/synthesis.md``, the ALU array).
    synth_keep: tuple[str, ...] = ()
    #: A block inside a shipped top that ``ace synth`` also measures alone (``--top``, ``all``)
    #: but ``ace generate`` does not ship.
    synth_only: bool = False

    def build(self, config):
        return getattr(importlib.import_module(self.module), self.cls)(config)


TOPS: dict[str, TopSpec] = {
    "ace_alu_array": TopSpec("ace.hw.tops.alu_array", "AluArrayTop",
                             "reduction ALU array with AXI-Stream operand and result ports",
                             synth_keep=("array.lane*", "array.lane*.adder",
                                         "array.lane*.minmax")),
    "ace_sram": TopSpec("ace.hw.tops.sram", "SramBufferTop",
                        "one banked SRAM buffer with the engine's port set"),
    "ace_dma": TopSpec("ace.hw.dma.engine", "DmaEngine",
                       "DMA engine: descriptor queue, AXI4 master, SRAM and stream ports"),
    "ace_nic": TopSpec("ace.hw.nic.interface", "NicInterface",
                       "NIC interface: per-link AXI-Stream TX/RX, packets, per-channel credits"),
    "ace_channel": TopSpec("ace.hw.tops.channel", "ChannelTop",
                           "one channel: sequencer, step datapath, its ALU array and DMA halves",
                           shipped=False, synth_only=True,
                           synth_keep=("datapath.alu.lane*", "datapath.alu.lane*.adder",
                                       "datapath.alu.lane*.minmax")),
    "ace_engine": TopSpec("ace.hw.engine", "AceEngine",
                          "the whole engine: CSRs, channels, SRAM, interconnect, NIC",
                          synth_keep=("ch*.datapath.alu.lane*", "ch*.datapath.alu.lane*.adder",
                                      "ch*.datapath.alu.lane*.minmax")),
    "ace_nic_pair": TopSpec("ace.hw.tops.nic_pair", "NicPairTop",
                            "two NIC interfaces back to back through a link with latency",
                            shipped=False),
}


def shipped_tops() -> list[str]:
    """Names of the tops written to ``rtl/``."""
    return [name for name, spec in TOPS.items() if spec.shipped]


def synth_tops() -> list[str]:
    """Names of the tops ``ace synth`` measures: the shipped ones and the blocks inside them."""
    return [name for name, spec in TOPS.items() if spec.shipped or spec.synth_only]
