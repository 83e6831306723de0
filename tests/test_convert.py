"""``ace.flow.convert``: memories without power-up contents in our Verilog and RTLIL, and
Amaranth's own converters untouched."""

from __future__ import annotations

import re

import pytest
from amaranth.back import rtlil, verilog
from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ace.flow.convert import to_rtlil, to_verilog


class _Ram(wiring.Component):
    """A 16 x 8 RAM with one write and one synchronous read port and the given contents."""

    def __init__(self, init):
        self.init = init
        super().__init__({"addr": In(4), "w_data": In(8), "w_en": In(1), "r_data": Out(8)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.memory = memory = Memory(shape=8, depth=16, init=self.init)
        write, read = memory.write_port(), memory.read_port()
        m.d.comb += [write.addr.eq(self.addr), write.data.eq(self.w_data),
                     write.en.eq(self.w_en), read.addr.eq(self.addr),
                     self.r_data.eq(read.data)]
        return m


def _word_lines(text: str) -> list[str]:
    return re.findall(r"memory\[\d+\] = 8'h[0-9a-f]+;", text)


@pytest.mark.parametrize("init", [[], [0] * 16])
def test_all_zero_contents_are_left_out(init):
    assert _word_lines(verilog.convert(_Ram(init), name="ram")), "Amaranth's own keeps them"
    ours = to_verilog(_Ram(init), name="ram")
    assert "memory" in ours and not _word_lines(ours) and "initial" not in ours
    assert "$meminit" not in to_rtlil(_Ram(init), name="ram")
    assert "$meminit" in rtlil.convert(_Ram(init), name="ram")


def test_contents_with_a_non_zero_word_are_kept_whole():
    init = [0] * 15 + [0x5A]
    lines = _word_lines(to_verilog(_Ram(init), name="ram"))
    assert len(lines) == 16 and lines[-1] == "memory[15] = 8'h5a;"
    assert "$meminit" in to_rtlil(_Ram(init), name="ram")


def test_source_locations_are_left_out():
    assert "src =" in verilog.convert(_Ram([]), name="ram")
    assert "src =" not in to_verilog(_Ram([]), name="ram")
    assert "src" not in to_rtlil(_Ram([]), name="ram")
