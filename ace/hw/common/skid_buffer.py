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

A wide payload can be cut into ``slices``: each slice of the payload bits gets its own copy of
the control registers (``in_ready``, ``out_valid``, ``skid_valid``), so the load enable of each
slice's registers comes from its own copy and no control net reaches the whole payload (on an
FPGA such a net, hundreds of loads, is mostly routing delay). The copies compute the same
values; each depends on its own state, so synthesis does not merge them. With
``ready_per_slice`` each slice also takes its own copy of ``o.ready`` (``out_ready_copies``,
driven by the consumer with ``o.ready``'s value), and ``valid_copies`` gives each slice's
``out_valid``, so a consumer that copies its own control per slice makes each slice's ready from
that slice's registers, and no ready net reaches every slice either.
"""

from __future__ import annotations

from amaranth.hdl import Module, Shape, Signal
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
    slices : int
        Copies of the control registers, each loading an equal share of the payload bits
        (default 1: one set for the whole payload). Behaviour is the same for any value.
    ready_per_slice : bool
        With more than one slice: slice ``k`` takes ``out_ready_copies[k]`` in place of
        ``o.ready`` (the consumer drives every copy with ``o.ready``'s value; ``o.ready`` itself
        is then unused). Behaviour is the same.

    Members
    -------
    i : In(stream.Signature(shape))
    o : Out(stream.Signature(shape)), from registers
    """

    def __init__(self, shape, slices: int = 1, *, ready_per_slice: bool = False):
        self.shape = shape
        self.slices = max(1, min(slices, Shape.cast(shape).width))
        #: The copies of ``i.ready``, one per slice (``ready_copies[0]`` drives ``i.ready``):
        #: a wide consumer upstream can take its load enables from them, a copy per part.
        names = (["in_ready"] if self.slices == 1
                 else [f"in_ready_{k}" for k in range(self.slices)])
        self.ready_copies = [Signal(init=1, name=name) for name in names]
        #: With ``ready_per_slice`` and more than one slice: slice ``k``'s ``o.ready`` (inputs,
        #: each driven with ``o.ready``'s value); otherwise empty.
        self.out_ready_copies = ([Signal(name=f"out_ready_{k}") for k in range(self.slices)]
                                 if ready_per_slice and self.slices > 1 else [])
        super().__init__({
            "i": In(stream.Signature(shape)),
            "o": Out(stream.Signature(shape)),
        })
        #: Each slice's ``out_valid`` (the same value as ``o.valid``), for a consumer that makes
        #: a ready per slice.
        self.valid_copies = ([Signal(name=f"out_valid_{k}") for k in range(self.slices)]
                             if self.slices > 1 else [self.o.valid])

    def elaborate(self, platform):
        width = Shape.cast(self.shape).width
        slices = self.slices
        if slices == 1:
            return self._elaborate_single()
        m = Module()
        out_payload = Signal(self.shape, name="out_payload")
        skid_payload = Signal(self.shape, name="skid_payload")
        i_bits = Signal(width)
        out_bits = Signal(width)
        skid_bits = Signal(width)
        m.d.comb += [i_bits.eq(self.i.payload), out_payload.eq(out_bits),
                     skid_payload.eq(skid_bits), self.o.payload.eq(out_payload)]
        bounds = [width * k // slices for k in range(slices + 1)]
        for k in range(slices):
            sfx = f"_{k}"
            in_ready = self.ready_copies[k]
            out_valid = self.valid_copies[k]
            o_ready = self.out_ready_copies[k] if self.out_ready_copies else self.o.ready
            skid_valid = Signal(name=f"skid_valid{sfx}")
            if k == 0:
                m.d.comb += [self.i.ready.eq(in_ready), self.o.valid.eq(out_valid)]
            lo, hi = bounds[k], bounds[k + 1]
            # Ready next cycle: the output drains now, or the skid is empty and at most one of
            # (output register, incoming beat) is occupied.
            m.d.sync += in_ready.eq(o_ready | (~skid_valid & (~out_valid | ~self.i.valid)))
            with m.If(in_ready):
                with m.If(o_ready | ~out_valid):
                    m.d.sync += [out_valid.eq(self.i.valid), out_bits[lo:hi].eq(i_bits[lo:hi])]
                with m.Else():
                    m.d.sync += [skid_valid.eq(self.i.valid), skid_bits[lo:hi].eq(i_bits[lo:hi])]
            with m.Elif(o_ready):
                m.d.sync += [out_valid.eq(skid_valid), out_bits[lo:hi].eq(skid_bits[lo:hi]),
                             skid_valid.eq(0)]
        return m

    def _elaborate_single(self):
        m = Module()
        in_ready = self.ready_copies[0]
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
