"""One port of the switch model: the node's single physical port, shared by its virtual links.

A ``switch:p`` system gives every node ``p - 1`` virtual links, one per peer, numbered as in a
fully connected system (:class:`ace.sw.program.Topology`), each with its own :class:`LinkModel`
latency line and its own receive buffer in the peer's NIC (like the virtual channels of a
switch with per-source queues). What makes it a switch is that a node's virtual links share one
physical port each way: the port towards the switch (egress) and the switch's port towards the
node (ingress) each pass at most one beat per cycle, and at most ``cfg_bytes_per_cycle_q8 / 256``
bytes per cycle in the long run, granted round-robin among the virtual links that have a beat
ready. So a node sending to three peers at once gets a third of the port for each.

::

    tx0 --+                                         +--> rx0
    tx1 --+--> egress SwitchPort --> LinkModels --> ingress SwitchPort of the peer --+--> rx1
    tx2 --+   (node x)              (x -> y)        (node y)                         +--> rx2
"""

from __future__ import annotations

from numbers import Real

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ace.hw.common.arbiter import RoundRobinArbiter

from .link import RATE_BITS, bytes_per_cycle_q8, token_bucket

__all__ = ["SwitchPort"]


class SwitchPort(wiring.Component):
    """Round-robin grant of one beat per cycle among ``n`` streams, throttled in bytes.

    Latency: combinational (``requests`` to ``grant``). Throughput: one beat per cycle at full
    rate; ``cfg_bytes_per_cycle_q8 / 256`` bytes per cycle in the long run otherwise.

    Parameters
    ----------
    n : int
        Streams sharing the port, at least 1.
    data_bytes : int
        Bytes a beat costs (the link width).
    bytes_per_cycle : number or None
        Reset value of ``cfg_bytes_per_cycle_q8`` (full rate if None).

    Members
    -------
    requests : In(n)
        Stream ``i`` has a beat ready and its next stage can take it (``tvalid`` and the
        downstream ``tready``); may depend on nothing this port drives.
    grant : Out(n)
        One-hot: the stream whose beat passes this cycle (zero while the port waits for
        tokens); gate the stream's ``tvalid`` and ``tready`` with it.
    cfg_bytes_per_cycle_q8 : In(RATE_BITS)
        Port bandwidth, bytes per cycle with 8 fractional bits.
    """

    def __init__(self, n: int, data_bytes: int, bytes_per_cycle: Real | None = None):
        self.n = n
        self.data_bytes = data_bytes
        rate = data_bytes if bytes_per_cycle is None else bytes_per_cycle
        super().__init__({
            "requests": In(n),
            "grant": Out(n),
            "cfg_bytes_per_cycle_q8": In(RATE_BITS, init=bytes_per_cycle_q8(rate)),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.arbiter = arbiter = RoundRobinArbiter(self.n)
        take = Signal()
        has_tokens = token_bucket(m, self.data_bytes, self.cfg_bytes_per_cycle_q8, take)
        m.d.comb += [
            arbiter.requests.eq(self.requests & has_tokens.replicate(self.n)),
            self.grant.eq(arbiter.grant),
            take.eq(arbiter.valid),
        ]
        return m
