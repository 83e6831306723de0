"""Verilog top ``ace_alu_array``: the ALU array behind AXI-Stream ports for cocotbext-axi.

``s_axis`` (operands, one beat per transfer):

* ``tdata``: ``a`` in bytes ``[0, link_bytes)``, ``b`` in bytes ``[link_bytes, 2*link_bytes)``;
* ``tuser``: bits ``[1:0]`` op (:class:`ace.layouts.ReduceOp`), ``[3:2]`` dtype
  (:class:`ace.layouts.Dtype`), ``[4 + alu_tag_bits - 1:4]`` tag;
* ``tlast``: carried to the result beat.

``m_axis`` (results): ``tdata`` the result beat, ``tuser`` the tag, ``tlast`` the operand
beat's ``tlast``. Latency and throughput are those of :class:`ace.hw.alu.array.AluArray`.
"""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ace.hw.alu.array import AluArray
from ace.config import AceConfig
from ace.layouts import AxiStreamSignature

__all__ = ["AluArrayTop", "TUSER_OP", "TUSER_DTYPE", "TUSER_TAG"]

#: Bit offsets of the fields of ``s_axis.tuser``.
TUSER_OP = 0
TUSER_DTYPE = 2
TUSER_TAG = 4


class AluArrayTop(wiring.Component):
    """:class:`ace.hw.alu.array.AluArray` with AXI-Stream ports (see the module docstring).

    Parameters
    ----------
    config : AceConfig

    Members
    -------
    s_axis : In(AxiStreamSignature(2 * link_bytes, user_bits=4 + alu_tag_bits))
        Operand beats: ``tdata = {b, a}``, ``tuser = {tag, dtype, op}``.
    m_axis : Out(AxiStreamSignature(link_bytes, user_bits=alu_tag_bits))
        Result beats: ``tdata = result``, ``tuser = tag``.
    """

    def __init__(self, config: AceConfig):
        self.config = config
        super().__init__({
            "s_axis": In(AxiStreamSignature(2 * config.link_bytes,
                                            user_bits=TUSER_TAG + config.alu_tag_bits)),
            "m_axis": Out(AxiStreamSignature(config.link_bytes, user_bits=config.alu_tag_bits)),
        })

    @property
    def latency(self) -> int:
        """Cycles from an ``s_axis`` transfer to the result being valid on ``m_axis``."""
        return AluArray.LATENCY

    def elaborate(self, platform):
        m = Module()
        m.submodules.array = array = AluArray(self.config)
        beat_bits = self.config.beat_bits
        s, o = self.s_axis, self.m_axis
        m.d.comb += [
            array.i.valid.eq(s.tvalid),
            s.tready.eq(array.i.ready),
            array.i.payload.a.eq(s.tdata[:beat_bits]),
            array.i.payload.b.eq(s.tdata[beat_bits:]),
            array.i.payload.op.eq(s.tuser[TUSER_OP:TUSER_DTYPE]),
            array.i.payload.dtype.eq(s.tuser[TUSER_DTYPE:TUSER_TAG]),
            array.i.payload.tag.eq(s.tuser[TUSER_TAG:]),
            array.i.payload.last.eq(s.tlast),
            o.tvalid.eq(array.o.valid),
            array.o.ready.eq(o.tready),
            o.tdata.eq(array.o.payload.result),
            o.tuser.eq(array.o.payload.tag),
            o.tlast.eq(array.o.payload.last),
        ]
        return m
