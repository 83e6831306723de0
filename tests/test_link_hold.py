"""No link is held by a packet that waits for another link (issue 18, the 64-node ACE hang).

A step that forwards received data (``rcs``, ``rrcs``, ``rrs``) used to offer its send to the
NIC as soon as it started. The link granted it and then waited, in the middle of the packet,
for data still to arrive from another link; no other channel could send on that link
meanwhile. Two nodes make the smallest wait cycle: on each node channel f forwards what the
other node's channel g sends, and channel g sends only after channel f has started:

    node 0: ch1 forward (link 0 held, waits for node 1's ch1)   ch2 s -> node 1 (link 0 busy)
    node 1: ch2 forward (link 0 held, waits for node 0's ch2)   ch1 s -> node 0 (link 0 busy)

Unbounded or packet-level models (the golden model) finish this program; the engine stopped
with the watchdog's TIMEOUT. Now a forwarding packet is offered only once the packet it
forwards is in the receive buffer, so each node's ``s`` goes out and both forwards follow.

Runs on ``ring:2`` with the harness engine (the library ``tests/test_harness.py`` builds;
the two-node driver builds in about a minute), every forwarding step type, random sizes (one
packet, and two or three packets per message) and data (seeds in the messages), bit-exact
against the golden model.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from ace.hw.engine import counter_names
from ace.layouts import Dtype, ReduceOp
from ace.sw import golden
from ace.sw.host import staging_area
from ace.sw.program import Channel, CollectiveProgram, NodeProgram, Step, assemble
from sim_harness.replay import make_inputs
from sim_harness.simulator import SystemSimulator, run_hosts
from sim_harness.systems import load_system
from testbench.waits import wait_cycle, waits

SYSTEM = load_system(None, topology="ring:2")
OUTPUT_ADDR = 0x10000
WATCHDOG = 20_000
RX_BYTES = SYSTEM.config.rx_channel_beats * SYSTEM.config.link_bytes


def _forwarder(kind: str, n: int, peer: int) -> list[Step]:
    """Load the local operand, forward the peer's message back to it, store what is kept."""
    link = dict(recv_peer=peer, recv_link=SYSTEM.topology.recv_link(1 - peer, peer),
                send_peer=peer, send_link=SYSTEM.topology.send_link(1 - peer, peer))
    local, kept = ("i", 0), ("o", 0)
    operands = {"rcs": dict(dst=kept), "rrcs": dict(src=local, dst=kept),
                "rrs": dict(src=local)}[kind]
    steps = [Step("load", n, dst=local, mem_addr=0), Step(kind, n, **operands, **link)]
    if "dst" in operands:
        steps.append(Step("store", n, src=kept, mem_addr=OUTPUT_ADDR))
    return steps


def _second(n: int) -> int:
    """The offset of a buffer's second slice: ``n`` rounded up to whole SRAM words."""
    epw = SYSTEM.config.link_bytes // 4
    return -(-n // epw) * epw


def _originator(n: int, peer: int, forwarder: int) -> list[Step]:
    """After the forwarder's load: load, send to the peer, receive it back, store it."""
    me = 1 - peer
    mine, back = ("i", _second(n)), ("o", _second(n))
    return [Step("nop", dep=(forwarder, 0)), Step("load", n, dst=mine, mem_addr=4 * n),
            Step("s", n, src=mine, send_peer=peer,
                 send_link=SYSTEM.topology.send_link(me, peer)),
            Step("r", n, dst=back, recv_peer=peer, recv_link=SYSTEM.topology.recv_link(me, peer)),
            Step("store", n, src=back, mem_addr=OUTPUT_ADDR + 4 * n)]


def crossed_forwarding_program(kind: str, n: int) -> CollectiveProgram:
    """Node k forwards on channel 1 + k what the other node sends on that channel, and sends
    its own data on channel 2 - k once its forwarding channel has loaded (module docstring)."""
    nodes = []
    for me in (0, 1):
        peer, forward, originate = 1 - me, 1 + me, 2 - me
        channels = [Channel([]) for _ in range(3)]
        channels[forward] = Channel(_forwarder(kind, n, peer))
        channels[originate] = Channel(_originator(n, peer, forward))
        for ch in channels:
            for step in ch.steps:
                step.dtype, step.op = Dtype.FP32, ReduceOp.SUM
        nodes.append(NodeProgram(me, channels, input_addr=0, output_addr=OUTPUT_ADDR,
                                 in_elems=2 * n, out_elems=2 * n))
    return CollectiveProgram("custom", "crossed_forwarding", Dtype.FP32, ReduceOp.SUM, 2 * n,
                             nodes, topology=SYSTEM.topology)


def _run(sim: SystemSimulator, program: CollectiveProgram, inputs) -> tuple[list, list[bytes]]:
    """Load and run ``program`` on both nodes; return the statuses and the output bytes."""
    config = SYSTEM.config
    assembled = assemble(program, config)
    expect = golden.run(program, inputs)
    for k, image in enumerate(golden.place_inputs(program, inputs)):
        sim.load(k, 0, image.tobytes() + bytes(-len(image) % 4))
    hosts = sim.hosts(config, counter_names(config))
    stage_base = staging_area(program, config)[0]

    async def load(host, node):
        await host.load_program(node, stage_base=stage_base)
        await host.set_irq_enable(done=True, error=True)
        await host.set_timeout(WATCHDOG)

    run_hosts(sim, [load(h, node) for h, node in zip(hosts, assembled.nodes)])
    run_hosts(sim, [h.start() for h in hosts])
    sim.flush()
    sim.run(timeout=4 * WATCHDOG, interval=1 << 12)
    statuses = run_hosts(sim, [h.status() for h in hosts])
    size = program.nodes[0].out_elems * 4
    got = [sim.dump(k, OUTPUT_ADDR, size) for k in range(2)]
    want = [expect.memory[k][OUTPUT_ADDR:OUTPUT_ADDR + size].tobytes() for k in range(2)]
    return statuses, got, want


@pytest.mark.parametrize("kind", ["rcs", "rrcs", "rrs"])
def test_crossed_forwarding_does_not_hold_the_links(kind):
    """Each node's forwarding step waits for a message that the other node can send only
    on the link this node's own forward would hold: both nodes finish, bit-exact."""
    with SystemSimulator(SYSTEM, log=None) as sim:
        sim.reset()
        packet = SYSTEM.config.packet_bytes // 4
        # One packet per message, then messages of two and three packets (the forward offers
        # packet k once received packet k is in).
        for trial, (low, high) in enumerate([(1, packet), (packet + 1, 5 * packet // 2)]):
            seed = 1800 + 10 * trial + ["rcs", "rrcs", "rrs"].index(kind)
            n = random.Random(seed).randint(low, high)
            where = f"seed {seed}, {kind}, {n} fp32 per message"
            program = crossed_forwarding_program(kind, n)
            rng = np.random.default_rng(seed)
            inputs = [make_inputs(rng, Dtype.FP32, 2 * n) for _ in range(2)]
            statuses, got, want = _run(sim, program, inputs)
            for k, status in enumerate(statuses):
                assert status["done"] and not status["error"], \
                    f"{where}: node {k}: {status['error_cause']} at channel " \
                    f"{status['error_channel']} pc {status['error_pc']}"
            assert got == want, f"{where}: outputs differ from the golden model"


def test_wait_analysis_names_the_held_links():
    """``testbench.waits`` on the crossed program stopped where the engine used to stop
    (each forward started, each ``s`` blocked): the cycle goes through both held links, and
    no cycle is left once the ``s`` steps have gone out."""
    program = crossed_forwarding_program("rcs", 64)
    hung = [[0, 1, 2], [0, 2, 1]]           # STEPS_DONE: node, channel (see the docstring)
    cycle = wait_cycle(waits(program, hung, rx_bytes=RX_BYTES))
    assert cycle is not None
    assert sorted((w.node, w.channel, w.reason) for w in cycle) == [
        (0, 1, "recv"), (0, 2, "link"), (1, 1, "link"), (1, 2, "recv")]
    sent = [[0, 1, 3], [0, 3, 1]]
    assert wait_cycle(waits(program, sent, rx_bytes=RX_BYTES)) is None
