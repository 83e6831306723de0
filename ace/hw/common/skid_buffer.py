"""Skid buffer: a two-entry register slice on a stream, to cut every combinational path.

::

              +--------------- i.ready (register) <---- o.ready, skid and output state
              |
    i.valid --+--> [ output register ] ---------------------------> o.valid, o.payload
    i.payload -+        ^      |
               |        |      (o stalled while i was ready: the beat goes to the skid)
               +--> [ skid register ] --+

The model is Forencich's verilog-axis ``axis_register.v`` with ``REG_TYPE`` 2 (LiteX calls it
``stream.Buffer`` with ``pipe_valid`` and ``pipe_ready``). ``i.ready`` is a register, computed
from ``o.ready`` and the buffer's state one cycle ahead, so ``ready`` never passes through the
slice combinationally; ``o.valid`` and ``o.payload`` come from the output register. The skid
register catches the one beat that arrives in the cycle ``o.ready`` falls, before the
registered ``i.ready`` can follow.
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["SkidBuffer"]


class SkidBuffer(wiring.Component):
    """Two-entry register slice between ``i`` and ``o``.

    Latency: a beat transferred on ``i`` in cycle ``t`` is valid on ``o`` in cycle ``t + 1`` at
    the earliest. Throughput: one beat per cycle (back to back, with ``o.ready`` high), and no
    beat is lost or duplicated for any pattern of ``i.valid`` and ``o.ready``. ``i.ready`` is
    high out of reset.

    Parameters
    ----------
    shape : shape-like
        Payload shape (an integer width, ``unsigned(n)``, a ``data.Layout``, ...).

    Members
    -------
    i : In(stream.Signature(shape))
    o : Out(stream.Signature(shape)), from registers
    """

    def __init__(self, shape):
        self.shape = shape
        super().__init__({
            "i": In(stream.Signature(shape)),
            "o": Out(stream.Signature(shape)),
        })

    def elaborate(self, platform):
        m = Module()
        in_ready = Signal(init=1, name="in_ready")
        out_valid = Signal(name="out_valid")
        out_payload = Signal(self.shape, name="out_payload")
        skid_valid = Signal(name="skid_valid")
        skid_payload = Signal(self.shape, name="skid_payload")
        m.d.comb += [
            self.i.ready.eq(in_ready),
            self.o.valid.eq(out_valid),
            self.o.payload.eq(out_payload),
        ]
        # Ready next cycle: the output drains now, or the skid is empty and at most one of
        # (output register, incoming beat) is occupied.
        m.d.sync += in_ready.eq(self.o.ready | (~skid_valid & (~out_valid | ~self.i.valid)))
        with m.If(in_ready):
            with m.If(self.o.ready | ~out_valid):
                m.d.sync += [out_valid.eq(self.i.valid), out_payload.eq(self.i.payload)]
            with m.Else():
                m.d.sync += [skid_valid.eq(self.i.valid), skid_payload.eq(self.i.payload)]
        with m.Elif(self.o.ready):
            m.d.sync += [out_valid.eq(skid_valid), out_payload.eq(skid_payload),
                         skid_valid.eq(0)]
        return m
