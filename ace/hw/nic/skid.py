"""Two-entry register slice (skid buffer) for the NIC's stream boundaries.

::

    i --+--> [ skid register ] --+--> [ output register ] --> o
        +-------------------------+
       (the skid register takes a payload only while the output register is stalled)

The shared ``ace/hw/common/skid_buffer.py`` was being written when the NIC was pipelined; this
one serves the NIC until it lands (same behaviour: registered ``i.ready``, registered ``o``).
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["NicSkidBuffer"]


class NicSkidBuffer(wiring.Component):
    """Skid buffer: every output and ``i.ready`` come from registers.

    Parameters
    ----------
    shape : ShapeLike
        The payload shape.

    Members
    -------
    i : In(stream.Signature(shape))
    o : Out(stream.Signature(shape))

    Latency 1 cycle, throughput one transfer per cycle with any ``o.ready`` pattern; holds up to
    two payloads.
    """

    def __init__(self, shape):
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape))})

    def elaborate(self, platform):
        m = Module()
        skid_valid = Signal()
        skid = Signal.like(self.i.payload, name="skid_payload")
        m.d.comb += self.i.ready.eq(~skid_valid)
        with m.If(~self.o.valid | self.o.ready):
            with m.If(skid_valid):
                m.d.sync += [self.o.payload.eq(skid), self.o.valid.eq(1), skid_valid.eq(0)]
            with m.Else():
                m.d.sync += [self.o.payload.eq(self.i.payload), self.o.valid.eq(self.i.valid)]
        with m.Elif(self.i.valid & ~skid_valid):
            m.d.sync += [skid.eq(self.i.payload), skid_valid.eq(1)]
        return m
