"""The reduction ALU array: ``alu_lanes`` 32-bit lanes behind one operand and one result stream.

::

               +------------- credit counter (beats in the pipeline + in the FIFO) ---+
               |                                                                      |
    i.ready <--+ (credits left)                                                       |
    i.valid ---+--> valid, tag, last delay line (lane latency) --+                     |
    i.payload -+--> AluLane 0 .. V-1 (free-running) -------------+--> result FIFO --> o
                                                                   (SyncFIFOBuffered,
                                                                    depth latency + 1)

The lanes' stages after their operand registers (clock domain ``pipe``) advance only while a
beat is in them: ``busy`` is a register that is high exactly in the cycles when one of the
delay line's first twelve stages is valid, which are the cycles in which some beat needs a lane
stage to move. Otherwise the stages hold, which saves their switching power and changes no
result (what they hold is never written to the FIFO). ``config.clock_gating`` chooses the form
(:mod:`ace.hw.common.clock_gate`): a clock enable on every ``pipe`` register, or a gated clock,
which a cycle-based simulator such as Verilator does not evaluate while it is stopped.

Each beat carries its own op and dtype, so consecutive beats (from different channels) may use
different ones. The lanes never stall: a beat accepted on ``i`` leaves the lanes a fixed
number of cycles later (:attr:`AluArray.lane_latency`, 13) and is written into the result FIFO.
Backpressure works by credits: ``i.ready`` is high while fewer beats than the FIFO depth are in
the lanes or the FIFO, so a beat always finds room when it leaves the lanes and none is dropped
or duplicated. The FIFO holds the whole latency plus one beat, so an unstalled stream flows at
one beat per cycle. ``i.ready`` depends on registers only (no combinational path from
``o.ready`` to ``i.ready``), the lanes register the operands on entry, and ``o.valid`` and
``o.payload`` come from registers (the FIFO's output register).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from ace.hw.alu.lane import AluLane
from ace.hw.common.clock_gate import ClockGate, uses_gated_clock
from ace.config import AceConfig
from ace.layouts import Dtype, ReduceOp

__all__ = ["AluOperands", "AluResult", "AluArray"]


class AluOperands(data.StructLayout):
    """Payload of the operand stream: two beats, the op and dtype, an opaque tag and ``last``.

    ``a`` and ``b`` hold ``link_bytes // esize`` little-endian elements each; ``COPY`` returns
    ``a``. ``tag`` and ``last`` come back unchanged with the result.
    """

    def __init__(self, config: AceConfig):
        super().__init__({
            "a": unsigned(config.beat_bits),
            "b": unsigned(config.beat_bits),
            "op": ReduceOp,
            "dtype": Dtype,
            "tag": unsigned(config.alu_tag_bits),
            "last": unsigned(1),
        })


class AluResult(data.StructLayout):
    """Payload of the result stream: the result beat, and the operand beat's tag and last."""

    def __init__(self, config: AceConfig):
        super().__init__({
            "result": unsigned(config.beat_bits),
            "tag": unsigned(config.alu_tag_bits),
            "last": unsigned(1),
        })


class AluArray(wiring.Component):
    """Reduction ALU array: ``config.alu_lanes`` lanes, one beat per cycle.

    Latency is :attr:`latency` cycles: a beat transferred on ``i`` in cycle ``t`` is valid on
    ``o`` from cycle ``t + latency`` (when ``o`` is not stalled). Throughput is one beat per
    cycle, sustained indefinitely while ``o.ready`` is high, whatever the mix of ops and dtypes.
    Results leave in the order the operands came; none is dropped or duplicated under any
    backpressure.

    Parameters
    ----------
    config : AceConfig
        Uses ``link_bytes`` (beat width, ``alu_lanes`` lanes) and ``alu_tag_bits``.

    Members
    -------
    i : In(stream.Signature(AluOperands(config)))
        Operand beats.
    o : Out(stream.Signature(AluResult(config)))
        Result beats, in order.
    """

    #: Cycles from an operand transfer to its result being valid: the lanes (13) plus the
    #: registered-output FIFO (2).
    LATENCY = AluLane.LATENCY + 2

    def __init__(self, config: AceConfig):
        self.config = config
        super().__init__({
            "i": In(stream.Signature(AluOperands(config))),
            "o": Out(stream.Signature(AluResult(config))),
        })

    @property
    def lane_latency(self) -> int:
        """Cycles from an operand transfer to the lanes' result (13)."""
        return AluLane.LATENCY

    @property
    def latency(self) -> int:
        """Cycles from an operand transfer to its result being valid: lanes plus the FIFO (15)."""
        return self.LATENCY

    @property
    def fifo_depth(self) -> int:
        """Result FIFO depth, equal to the number of credits (beats in flight at most).

        ``latency + 1``: in the cycle a result leaves, the credit counter still holds it and
        the ``latency`` beats behind it, and one more credit lets a new beat in that cycle."""
        return self.LATENCY + 1

    def elaborate(self, platform):
        m = Module()
        config = self.config
        result_layout = AluResult(config)

        accept = Signal(name="accept")
        m.d.comb += accept.eq(self.i.valid & self.i.ready)

        # busy: the delay line's stages 0..11 hold a valid beat, one register computed a cycle
        # early (a beat accepted in cycle t needs the lane stages to move at the ends of cycles
        # t+1 .. t+12; d_k is valid in cycle t+1+k).
        busy = Signal(name="busy")
        gate = ClockGate(m, "pipe", busy, gated_clock=uses_gated_clock(config, platform))

        results = []
        for n in range(config.alu_lanes):
            lane = AluLane()
            m.submodules[f"lane{n}"] = gate(lane, domain="pipe")
            m.d.comb += [
                lane.a.eq(self.i.payload.a[32 * n:32 * (n + 1)]),
                lane.b.eq(self.i.payload.b[32 * n:32 * (n + 1)]),
                lane.op.eq(self.i.payload.op),
                lane.dtype.eq(self.i.payload.dtype),
            ]
            results.append(lane.result)

        # valid, tag and last travel beside the lanes.
        prev_valid, prev_tag, prev_last = accept, self.i.payload.tag, self.i.payload.last
        stage_valid = []
        for stage in range(self.lane_latency):
            valid = Signal(name=f"d{stage}_valid")
            tag = Signal(config.alu_tag_bits, name=f"d{stage}_tag")
            last = Signal(name=f"d{stage}_last")
            m.d.sync += [valid.eq(prev_valid), tag.eq(prev_tag), last.eq(prev_last)]
            stage_valid.append(prev_valid)
            prev_valid, prev_tag, prev_last = valid, tag, last
        # stage_valid[k] is what d_k takes next (accept, d0 .. d11); the OR of the first twelve
        # is d0 | .. | d11 one cycle later.
        m.d.sync += busy.eq(Cat(*stage_valid[:-1]).any())

        m.submodules.fifo = fifo = SyncFIFOBuffered(width=result_layout.size,
                                                    depth=self.fifo_depth)
        out_payload = Signal(result_layout, name="out_payload")
        m.d.comb += [
            fifo.w_en.eq(prev_valid),
            fifo.w_data.eq(Cat(*results, prev_tag, prev_last)),
            out_payload.eq(fifo.r_data),
            self.o.payload.eq(out_payload),
            self.o.valid.eq(fifo.r_rdy),
            fifo.r_en.eq(self.o.ready),
        ]

        # Credits: beats accepted and not yet delivered, in the lanes or the FIFO.
        in_flight = Signal(range(self.fifo_depth + 1), name="in_flight")
        deliver = Signal(name="deliver")
        m.d.comb += [
            deliver.eq(self.o.valid & self.o.ready),
            self.i.ready.eq(in_flight != self.fifo_depth),
        ]
        m.d.sync += in_flight.eq(in_flight + accept - deliver)
        return m
