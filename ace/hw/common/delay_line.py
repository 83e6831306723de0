"""Delay line in LUT RAM: a value comes out a fixed number of cycles after it goes in.

::

    i, i_en --> [ RAM, a power of two >= max(2, delay) words, at w_ptr ] --> o (read at r_ptr)
                         w_ptr, r_ptr: counters, r_ptr = w_ptr - delay

A shift register of ``delay`` registers costs ``delay x width`` flip-flops; a ring of LUT RAM
(on ECP5, ``TRELLIS_DPR16X4``: 16 words of 4 bits in one slice's LUTs) costs ``width / 4`` RAM
cells and two small counters, and gives the same cycles. The RAM is written in every cycle
with ``i_en`` and both pointers advance in every cycle, so each value is read exactly ``delay``
cycles after it was written; the output of a cycle whose input had ``i_en`` low is the RAM's
old word (unspecified), as a shift register whose stages hold while empty would give a stale
one. Clocked by a gated clock (``DomainRenamer``), the line advances only with the clock, as a
shift register on the same clock would.
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ace.hw.common.lut_ram import lut_ram

__all__ = ["DelayLine"]


class DelayLine(wiring.Component):
    """``o`` in cycle ``t + delay`` is ``i`` of cycle ``t`` (if ``i_en`` was high then).

    Latency is ``delay`` cycles, throughput one value per cycle. ``o`` is the RAM's
    asynchronous read at a registered address (one LUT-RAM read after a flip-flop).

    Members
    -------
    i : In(width)
        The value to delay.
    i_en : In(1, init=1)
        Write ``i`` in this cycle. Low saves the write; the output ``delay`` cycles later is
        then unspecified.
    o : Out(width)
        The value written ``delay`` cycles earlier.

    Parameters
    ----------
    width : int
        Bits per value, at least 1.
    delay : int
        Cycles from ``i`` to ``o``, at least 1.
    """

    def __init__(self, width: int, delay: int):
        if width < 1:
            raise ValueError(f"width: {width}; allowed: at least 1")
        if delay < 1:
            raise ValueError(f"delay: {delay}; allowed: at least 1")
        self.width, self.delay = width, delay
        self.depth = max(2, 1 << (delay - 1).bit_length())     # RAM words: a power of two
        super().__init__({"i": In(width), "i_en": In(1, init=1), "o": Out(width)})

    def elaborate(self, platform):
        m = Module()
        w_port, r_port = lut_ram(m, self.width, self.depth)
        w_ptr = Signal(range(self.depth), name="w_ptr")
        # r_ptr = w_ptr - delay, a register of its own so that the read address is a flip-flop
        # (no subtractor before the RAM); with delay == depth, the word the next edge overwrites.
        r_ptr = Signal(range(self.depth), name="r_ptr", init=-self.delay % self.depth)
        m.d.comb += [
            w_port.addr.eq(w_ptr), w_port.data.eq(self.i), w_port.en.eq(self.i_en),
            r_port.addr.eq(r_ptr), self.o.eq(r_port.data),
        ]
        m.d.sync += [w_ptr.eq(w_ptr + 1), r_ptr.eq(r_ptr + 1)]
        return m
