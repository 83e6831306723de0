"""The memory placements' micro-steps: how a channel expands a receiving step when its buffers
live in main memory (``docs/engine.md``, "Placement").

In ``sram`` placement (ACE mode) a step is one pass of the step datapath. With the buffers in
main memory the received data is written to memory before anything reads it, as NCCL's
kernels do it, and the two baselines differ in where a reduction's result goes:

=====  ===========================================  =========================================
step   ``memory`` placement (``staged``)            ``p2p`` placement
=====  ===========================================  =========================================
r      NIC -> dst                                   NIC -> dst
rcs    NIC -> dst; dst -> send                      NIC -> dst; dst -> send
rrc    NIC -> stage; stage (+) src -> dst           NIC -> stage; stage (+) src -> dst
rrcs   NIC -> stage; stage (+) src -> dst;          NIC -> stage; stage (+) src -> dst and
       dst -> send                                  send (one pass, the fork feeds both)
rrs    NIC -> stage; stage (+) src -> stage2;       NIC -> stage; stage (+) src -> send
       stage2 -> send
=====  ===========================================  =========================================

Every other step, and every step in ``sram`` placement, is its decoded plan unchanged (one
micro-step). ``stage`` and ``stage2`` are the channel's two packets of staging area.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ace.hw.channel.datapath import ASource, StepPlan
from ace.isa import Opcode
from ace.layouts import ReduceOp

__all__ = ["MicroStepPlanner", "MAX_MICRO_STEPS"]

#: The most micro-steps a step expands into (``rrs`` and ``rrcs`` in ``memory`` placement).
MAX_MICRO_STEPS = 3


class MicroStepPlanner(wiring.Component):
    """The plan of micro-step ``micro`` of a step, and how many micro-steps the step has
    (see the module docstring). Combinational: no state, no latency.

    Parameters
    ----------
    config : AceConfig

    Members
    -------
    step : In(StepPlan), the step as decoded (operands in memory when ``in_memory``)
    opcode : In(Opcode)
    in_memory : In(1), the buffers are in main memory (``memory`` or ``p2p`` placement)
    p2p : In(1), ``p2p`` placement: a reduction's result goes to the link, not to memory
    stage, stage2 : In(mem_addr_bits), byte addresses of the channel's two staging packets
    micro : In(2), the micro-step's index, 0 to ``count - 1``
    count : Out(2), the step's number of micro-steps
    plan : Out(StepPlan), what the step datapath executes for micro-step ``micro``
    """

    def __init__(self, config):
        self.config = config
        super().__init__({
            "step": In(StepPlan(config)), "opcode": In(Opcode),
            "in_memory": In(1), "p2p": In(1),
            "stage": In(config.mem_addr_bits), "stage2": In(config.mem_addr_bits),
            "micro": In(range(MAX_MICRO_STEPS)),
            "count": Out(range(MAX_MICRO_STEPS + 1)), "plan": Out(StepPlan(config)),
        })

    def elaborate(self, platform):
        m = Module()
        expand = self.in_memory & (self.step.a_src == ASource.NIC)
        with m.If(~expand):
            m.d.comb += [self.count.eq(1), self.plan.eq(self.step)]
        with m.Else():
            self._expand(m)
        return m

    def _expand(self, m):
        """The micro-steps of a receiving step in a memory placement (combinational)."""
        step, op, mp = self.step, self.opcode, self.plan
        m.d.comb += self.count.eq(Mux(op == Opcode.R, 1, Mux(
            (op == Opcode.RCS) | (op == Opcode.RRC) | self.p2p, 2, 3)))
        m.d.comb += [mp.dtype.eq(step.dtype), mp.bytes.eq(step.bytes),
                     mp.recv_link.eq(step.recv_link), mp.recv_peer.eq(step.recv_peer),
                     mp.send_link.eq(step.send_link), mp.op.eq(ReduceOp.COPY)]
        into_dst = (op == Opcode.R) | (op == Opcode.RCS)
        with m.Switch(self.micro):
            with m.Case(0):             # receive into memory
                m.d.comb += [mp.a_src.eq(ASource.NIC), mp.w_use.eq(1), mp.w_mem.eq(1),
                             mp.w_addr.eq(Mux(into_dst, step.w_addr, self.stage))]
            with m.Case(1):
                with m.If(op == Opcode.RCS):    # forward what was received
                    m.d.comb += [mp.a_src.eq(ASource.MEM), mp.a_addr.eq(step.w_addr),
                                 mp.send.eq(1)]
                with m.Else():          # reduce from memory; result to memory and/or the link
                    p2p_rrs = self.p2p & (op == Opcode.RRS)
                    m.d.comb += [mp.a_src.eq(ASource.MEM), mp.a_addr.eq(self.stage),
                                 mp.b_use.eq(1), mp.b_mem.eq(1), mp.b_addr.eq(step.b_addr),
                                 mp.op.eq(step.op), mp.w_use.eq(~p2p_rrs), mp.w_mem.eq(1),
                                 mp.w_addr.eq(Mux(op == Opcode.RRS, self.stage2, step.w_addr)),
                                 mp.send.eq(self.p2p & ((op == Opcode.RRS) |
                                                        (op == Opcode.RRCS)))]
            with m.Default():           # staged: read the result back and send it
                m.d.comb += [mp.a_src.eq(ASource.MEM), mp.send.eq(1),
                             mp.a_addr.eq(Mux(op == Opcode.RRS, self.stage2, step.w_addr))]
