"""Every input of a testbench's top driven from the first cycle.

The cocotb builds start every variable that no initial value sets from random contents
(:func:`testbench.runner.run_built`), inputs included, so an input that a testbench drives only
later (a link's ``tvalid`` before its AXI-Stream source exists) would carry random beats into
the design. :func:`zero_inputs` drives each input of the top's signature to zero, as the
testbench's first act; its drivers then take over the inputs they own.
"""

from __future__ import annotations

import json
import os

from amaranth.lib import wiring

from ace.config import AceConfig
from ace.hw.tops import TOPS

__all__ = ["zero_inputs"]


def zero_inputs(dut, top: str | None = None, config: AceConfig | None = None) -> None:
    """Drive every input port of ``top`` (default: ``ACE_TOP``) built for ``config`` (default:
    ``ACE_CONFIG``) to 0 on ``dut``, clock and reset aside."""
    top = top or os.environ["ACE_TOP"]
    config = config or AceConfig.from_dict(json.loads(os.environ["ACE_CONFIG"]))
    component = TOPS[top].build(config)
    for path, member, _ in component.signature.flatten(component):
        if member.flow == wiring.In:
            getattr(dut, "__".join(map(str, path))).value = 0
