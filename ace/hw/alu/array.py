"""The reduction ALU array: ``alu_lanes`` 32-bit lanes behind one operand and one result stream.

::

               +------------- credit counter (beats in the pipeline + in the FIFO) ---+
               |                                                                      |
    i.ready <--+ (credits left)                                                       |
    i.valid ---+--> valid, tag, last delay line (lane latency) --+                     |
    i.payload -+--> AluLane 0 .. V-1 (free-running) -------------+--> result FIFO --> o
                                                                   (ResultFifo: LUT RAM
                                                                    and an output register,
                                                                    depth latency + 1)

The lanes' stages after their operand registers (clock domain ``pipe``) move only when they
have a beat to take; otherwise they hold, which saves their switching power and changes no result
(what they hold is never written to the FIFO). ``config.clock_gating`` chooses the form
(:mod:`ace.hw.common.clock_gate`):

* ``enable`` (always, for an FPGA): stage by stage. Each lane gets ``accept`` as its ``valid``
  and carries a valid bit beside its stages; each stage loads only when the stage before it
  holds a valid beat, so each stage's clock enable is a register of its own lane and stage.
* ``clock``: the lanes' adders (domain ``fp``) are a gated clock running while a
  floating-point sum is in their stages, their max/min units (``max_min``) one running while a
  max or min is, their delay lines (``other``: int32 sums, copies, max/min results) one
  running while a beat that is not a floating-point sum is, and their operand registers are
  clocked only in cycles that accept a beat (``AluLane(gated_stages=True)``). A cycle-based
  simulator such as Verilator does not evaluate what is stopped: a sum's beats never clock
  the max/min units, a copy's neither those nor the adders. (One gated clock per stage
  was slower: every gated clock costs the simulator its trigger in every evaluation,
  docs/benchmarks.md.)

Each beat carries its own op and dtype, so consecutive beats (from different channels) may use
different ones. The lanes never stall: a beat accepted on ``i`` leaves the lanes a fixed
number of cycles later (:attr:`AluArray.lane_latency`, 13) and is written into the result FIFO.
Backpressure works by credits: ``i.ready`` is high while fewer beats than the FIFO depth are in
the lanes or the FIFO, so a beat always finds room when it leaves the lanes and none is dropped
or duplicated. The FIFO holds the whole latency plus one beat, so an unstalled stream flows at
one beat per cycle. ``i.ready`` is a register (no combinational path from
``o.ready`` to ``i.ready``), the lanes register the operands on entry, and ``o.valid`` and
``o.payload`` come from registers (the FIFO's output register).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, DomainRenamer, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ace.hw.alu.lane import AluLane
from ace.hw.common.clock_gate import ClockGate, uses_gated_clock
from ace.hw.common.lut_ram import lut_ram
from ace.hw.common.replica import replicas, replicates
from ace.config import AceConfig
from ace.layouts import Dtype, ReduceOp

__all__ = ["AluOperands", "AluResult", "AluArray", "ResultFifo"]


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


class Thermometer:
    """An up/down counter in thermometer code: ``value[i]`` is ``count > i`` (a register),
    ``next`` the value it takes. Each bit takes its neighbour or holds (one LUT level from the
    up and down conditions), where a binary count needs a carry chain and a compare."""

    def __init__(self, value, next):
        self.value, self.next = value, next


def thermometer(m, name, size, *, up, down) -> Thermometer:
    """A :class:`Thermometer` of ``size`` bits (counts 0..size) in ``m``; it counts up in the
    cycles with ``up`` and not ``down``, down in those with ``down`` and not ``up``."""
    value = Signal(size, name=name)
    after = Signal(size, name=f"next_{name}")
    m.d.comb += after.eq(Mux(up & ~down, Cat(Const(1, 1), value[:-1]),
                             Mux(down & ~up, value[1:], value)))
    m.d.sync += value.eq(after)
    return Thermometer(value, after)


class ResultFifo(wiring.Component):
    """The array's result FIFO: ``depth`` words (rounded up to a power of two) in LUT RAM and an
    output register, so that ``r_data``/``r_rdy`` come from registers, as in
    ``SyncFIFOBuffered``, with the same two cycles from a write to ``r_rdy``. Built for timing:
    the output register loads when the RAM is not empty (a register: the level is a
    thermometer code) and the output is free, one LUT from registers and ``r_en``, where
    ``SyncFIFOBuffered`` compares its level, a binary count, first. No ``w_rdy``: the array's
    credits never let more than ``depth`` words in.

    Members
    -------
    w_en, w_data : In
        Write ``w_data`` in this cycle.
    r_rdy, r_data : Out
        The oldest word (registers).
    r_en : In(1)
        Read: with ``r_rdy``, the word leaves in this cycle.
    """

    def __init__(self, width: int, depth: int):
        self.width = width
        self.depth = 1 << (depth - 1).bit_length()     # RAM words: a power of two
        super().__init__({
            "w_en": In(1), "w_data": In(width),
            "r_en": In(1), "r_rdy": Out(1), "r_data": Out(width),
        })

    def elaborate(self, platform):
        m = Module()
        w_port, r_port = lut_ram(m, self.width, self.depth)
        wr_ptr = Signal(range(self.depth), name="wr_ptr")
        rd_ptr = Signal(range(self.depth), name="rd_ptr")
        load = Signal(name="load")
        level = thermometer(m, "level", self.depth, up=self.w_en, down=load)   # words in RAM
        nonempty = level.value[0]
        m.d.comb += [
            w_port.addr.eq(wr_ptr), w_port.data.eq(self.w_data), w_port.en.eq(self.w_en),
            r_port.addr.eq(rd_ptr),
            load.eq(nonempty & (~self.r_rdy | self.r_en)),
        ]
        with m.If(self.w_en):
            m.d.sync += wr_ptr.eq(wr_ptr + 1)
        with m.If(load):
            m.d.sync += [rd_ptr.eq(rd_ptr + 1), self.r_data.eq(r_port.data), self.r_rdy.eq(1)]
        with m.Elif(self.r_en):
            m.d.sync += self.r_rdy.eq(0)
        return m


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
    ready_copies : int
        Copies of the ``i.ready`` register (default 1), in :attr:`ready_copies`: a producer
        that copies its control per part of the payload takes each part's ready from a copy
        of its own (``replica.py``; one register where the blocks do not replicate).

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

    def __init__(self, config: AceConfig, ready_copies: int = 1):
        self.config = config
        self._ready_copies = ready_copies
        #: The copies of ``i.ready`` (``ready_copies[0]`` is ``i.ready``'s), set by
        #: ``elaborate``: the same value in every cycle.
        self.ready_copies = [Signal(init=1, name=f"ready_copy_{k}")
                             for k in range(ready_copies)]
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

        gated_clock = uses_gated_clock(config, platform)
        if gated_clock:
            # The lanes' operand registers (their ``sync`` domain) load only with a beat, so
            # that nothing in a lane moves while the array is idle: ungated, they took i's
            # payload in every cycle, and a cycle-based simulator evaluated the lanes' first
            # stage in every cycle (docs/benchmarks.md, Simulator speed).
            operand_gate = ClockGate(m, "operands", accept, gated_clock=True)

        results = []
        lanes = []
        for n in range(config.alu_lanes):
            lane = AluLane(gated_stages=gated_clock)
            m.submodules[f"lane{n}"] = (operand_gate(lane) if gated_clock
                                        else DomainRenamer({"pipe": "sync"})(lane))
            m.d.comb += [
                lane.a.eq(self.i.payload.a[32 * n:32 * (n + 1)]),
                lane.b.eq(self.i.payload.b[32 * n:32 * (n + 1)]),
                lane.op.eq(self.i.payload.op),
                lane.dtype.eq(self.i.payload.dtype),
            ]
            if not gated_clock:
                m.d.comb += lane.valid.eq(accept)
            results.append(lane.result)
            lanes.append(lane)

        # valid, tag and last travel beside the lanes (and, gated, whether the beat is a
        # floating-point sum). d_k is valid in cycle t+1+k for a beat accepted in cycle t.
        prev_valid, prev_tag, prev_last = accept, self.i.payload.tag, self.i.payload.last
        prev_fp_in = AluLane.is_fp_sum(self.i.payload.op, self.i.payload.dtype)
        prev_fp = accept & prev_fp_in
        valids, fps = [], []
        for stage in range(self.lane_latency):
            valid = Signal(name=f"d{stage}_valid")
            tag = Signal(config.alu_tag_bits, name=f"d{stage}_tag")
            last = Signal(name=f"d{stage}_last")
            m.d.sync += [valid.eq(prev_valid), tag.eq(prev_tag), last.eq(prev_last)]
            prev_valid, prev_tag, prev_last = valid, tag, last
            valids.append(valid)
            if gated_clock:
                fp = Signal(name=f"d{stage}_fp")
                m.d.sync += fp.eq(prev_fp)
                prev_fp = fp
                fps.append(fp)
        if gated_clock:
            # A beat accepted in cycle t is in lane stage k at the end of cycle t+k (k = 1..12),
            # while d_{k-1} holds it: ``fp`` ticks while a floating-point sum is in d_0..d_11,
            # ``other`` while another beat is (each a register computed a cycle early, as
            # ``busy`` was for the single ``pipe`` clock of sessions 11-19).
            fp_busy = Signal(name="fp_busy")
            other_busy = Signal(name="other_busy")
            prev_fps = [accept & prev_fp_in, *fps[:-2]]
            prev_others = [accept & ~prev_fp_in,
                           *(v & ~f for v, f in zip(valids[:-2], fps[:-2]))]
            m.d.sync += [fp_busy.eq(Cat(*prev_fps).any()),
                         other_busy.eq(Cat(*prev_others).any())]
            ClockGate(m, "fp", fp_busy, gated_clock=True)
            ClockGate(m, "other", other_busy, gated_clock=True)
            # ``max_min`` ticks while a max or min is in the units' two stages (at the ends of
            # cycles t+1 and t+2).
            max_min = accept & AluLane.is_max_min(self.i.payload.op)
            d0_max_min = Signal(name="d0_max_min")
            max_min_busy = Signal(name="max_min_busy")
            m.d.sync += [d0_max_min.eq(max_min), max_min_busy.eq(max_min | d0_max_min)]
            ClockGate(m, "max_min", max_min_busy, gated_clock=True)
            m.d.comb += [lane.fp_result.eq(fps[-1]) for lane in lanes]

        m.submodules.fifo = fifo = ResultFifo(result_layout.size, self.fifo_depth)
        out_payload = Signal(result_layout, name="out_payload")
        m.d.comb += [
            fifo.w_en.eq(prev_valid),
            fifo.w_data.eq(Cat(*results, prev_tag, prev_last)),
            out_payload.eq(fifo.r_data),
            self.o.payload.eq(out_payload),
            self.o.valid.eq(fifo.r_rdy),
            fifo.r_en.eq(self.o.ready),
        ]

        # Credits: beats accepted and not yet delivered, in the lanes or the FIFO, counted in
        # a thermometer code (no carry chain); ``ready`` (fewer than fifo_depth) is a register
        # of its own.
        deliver = Signal(name="deliver")
        m.d.comb += deliver.eq(self.o.valid & self.o.ready)
        in_flight = thermometer(m, "in_flight", self.fifo_depth, up=accept, down=deliver)
        ready = Signal(name="ready", init=1)
        m.d.sync += ready.eq(~in_flight.next[-1])
        m.d.comb += self.i.ready.eq(ready)
        if self._ready_copies > 1:
            copies = replicas(m, platform, ~in_flight.next[-1], self._ready_copies - 1,
                              init=1, name="ready", distinct=replicates(config, platform))
            m.d.comb += [copy.eq(value) for copy, value in
                         zip(self.ready_copies, [ready, *copies])]
        else:
            m.d.comb += self.ready_copies[0].eq(ready)
        return m
