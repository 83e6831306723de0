"""Synthesis top ``ace_channel``: one engine channel alone, for ``ace synth``.

The channel (:class:`~ace.hw.channel.sequencer.AceChannel`: instruction memory, sequencer, step
datapath with its ALU array and DMA halves) is the engine's largest block and holds its deepest
control logic, so it is measured on its own like the SRAM, DMA and NIC. ``ace generate`` does not
ship it: it is part of ``ace_engine``.
"""

from __future__ import annotations

from ace.config import AceConfig
from ace.hw.channel.sequencer import AceChannel

__all__ = ["ChannelTop"]


class ChannelTop(AceChannel):
    """Channel 0 of an engine of ``config``, with every port of :class:`AceChannel` (latency and
    throughput are its own)."""

    def __init__(self, config: AceConfig):
        super().__init__(config, 0)
