"""cocotb testbench of a multi-node ACE system (:class:`sim_harness.system.AceSystem`): N engines
on a ring or torus, connected by link models with latency, each with a memory model.

The TB drives every node's CSRs through an ``AxiLiteMaster`` and :class:`ace.sw.host.AceHost`, and
loads and reads back every node's memory through the memory model's backdoor port (one word
per cycle, all nodes at once). Each case compiles a collective (:mod:`ace.sw.compiler`), runs the
golden model on the same programs, runs the RTL and checks:

* every node's output bytes equal the golden model's (bit-exact);
* each node's memory-port counters equal the bytes the golden model moves, and link payload
  counters equal the program's link traffic;
* in ACE mode an all-reduce of S bytes per node moves 2S bytes per node on the memory port
  (within 2%).

``SYSTEM_CASES`` (JSON list of case dicts) chooses the cases; ``SYSTEM_SPEC`` (JSON) describes
the system (config, topology); ``SYSTEM_OUT`` names a JSON file for the measured figures.
"""

from __future__ import annotations

import json
import os

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge, gather, with_timeout

from ace.sw import golden
from ace.sw.compiler import compile_collective
from ace.config import AceConfig
from ace.hw.engine import counter_names
from ace.sw.host import AceHost, staging_area
from ace.layouts import DTYPE_BYTES, Dtype
from ace.sw.program import Topology, assemble, link_traffic
from testbench.axil_driver import AxiLiteDriver
from testbench.tb_engine import random_inputs


class SystemTB:
    def __init__(self, dut, config: AceConfig, topology: Topology, mem_bytes: int):
        self.dut = dut
        self.config = config
        self.p = topology.num_nodes
        self.topology = topology
        self.mem_words = mem_bytes // config.mem_bytes
        cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
        self.names = counter_names(config)
        self.hosts = []
        for k in range(self.p):
            axil = AxiLiteDriver(dut, f"n{k}_axil", dut.clk)
            self.hosts.append(AceHost(axil.write32, axil.read32, config, self.names,
                                      sleep=self._sleep))

    async def _sleep(self, cycles):
        await ClockCycles(self.dut.clk, cycles)

    def _bd(self, k, name):
        return getattr(self.dut, f"n{k}_bd_{name}")

    async def reset(self):
        self.dut.rst.value = 1
        for k in range(self.p):
            self._bd(k, "we").value = 0
        await ClockCycles(self.dut.clk, 5)
        self.dut.rst.value = 0
        await ClockCycles(self.dut.clk, 5)
        for host in self.hosts:
            await host.check_params()

    async def write_memories(self, regions):
        """Write ``regions[k] = [(word-aligned start, uint8 array), ...]`` into node k's
        memory, all nodes in parallel, one word per cycle."""
        B = self.config.mem_bytes
        words = []
        for node_regions in regions:
            node_words = []
            for start, data in node_regions:
                assert start % B == 0, "regions start on a memory word"
                padded = np.zeros(-(-len(data) // B) * B, dtype=np.uint8)
                padded[:len(data)] = data
                node_words += [(start // B + i // B,
                                int.from_bytes(padded[i:i + B].tobytes(), "little"))
                               for i in range(0, len(padded), B)]
            words.append(node_words)
        for i in range(max(len(w) for w in words)):
            for k, node_words in enumerate(words):
                we = i < len(node_words)
                self._bd(k, "we").value = int(we)
                if we:
                    self._bd(k, "addr").value = node_words[i][0]
                    self._bd(k, "wdata").value = node_words[i][1]
            await RisingEdge(self.dut.clk)
        for k in range(self.p):
            self._bd(k, "we").value = 0

    async def read_memories(self, ranges):
        """Bytes ``[start, start + length)`` of each node's memory, ``ranges[k]``."""
        B = self.config.mem_bytes
        spans = [(start // B, -(-(start + length) // B)) for start, length in ranges]
        data = [bytearray() for _ in ranges]
        n = max(hi - lo for lo, hi in spans)
        for i in range(n + 1):
            for k, (lo, hi) in enumerate(spans):
                self._bd(k, "addr").value = min(lo + i, hi - 1) if hi > lo else 0
            await RisingEdge(self.dut.clk)
            if i > 0:
                for k, (lo, hi) in enumerate(spans):
                    if lo + i - 1 < hi:
                        value = int(self._bd(k, "rdata").value)
                        data[k] += value.to_bytes(B, "little")
        return [bytes(d[start % B:start % B + length])
                for d, (start, length) in zip(data, ranges)]

    async def run(self, program, inputs):
        expect = golden.run(program, inputs)
        assembled = assemble(program, self.config)
        images = golden.place_inputs(program, inputs)
        stage, stage_end = staging_area(program, self.config)
        assert stage_end <= self.mem_words * self.config.mem_bytes, \
            "memory model too small for this case"
        # The inputs, and zeros over the output (an earlier case left data there; padding
        # between all-to-all blocks is never written).
        esize = DTYPE_BYTES[program.dtype]
        await self.write_memories([
            [(node.input_addr, im[node.input_addr:node.input_addr + node.in_elems * esize]),
             (node.output_addr, np.zeros(node.out_elems * esize, np.uint8))]
            for node, im in zip(program.nodes, images)])

        async def load(k):
            await self.hosts[k].load_program(assembled.nodes[k], stage_base=stage)
            await self.hosts[k].set_irq_enable(done=True, error=True)
            await self.hosts[k].clear_counters()

        await _all([load(k) for k in range(self.p)])
        await _all([self.hosts[k].start() for k in range(self.p)])
        await ClockCycles(self.dut.clk, 4)     # DONE (and irq) of the last run drops
        for k in range(self.p):     # no Python per cycle while the engines run
            irq = getattr(self.dut, f"n{k}_irq")
            if not irq.value:
                await with_timeout(RisingEdge(irq), 50, "ms")
        statuses = await _all([self.hosts[k].status() for k in range(self.p)])
        counters = await _all([self.hosts[k].counters() for k in range(self.p)])
        ranges = [(node.output_addr, node.out_elems * esize) for node in program.nodes]
        outputs = await self.read_memories(ranges)
        wants = [expect.memory[k][a:a + n].tobytes() for k, (a, n) in enumerate(ranges)]
        return statuses, expect, counters, outputs, wants


async def _all(coros):
    return list(await gather(*coros))


@cocotb.test()
async def test_collectives(dut):
    spec = json.loads(os.environ["SYSTEM_SPEC"])
    config = AceConfig.from_dict(spec["config"])
    topology = Topology.parse(spec["topology"])
    tb = SystemTB(dut, config, topology, spec["mem_bytes"])
    await tb.reset()
    results = []
    for case in json.loads(os.environ["SYSTEM_CASES"]):
        where = ", ".join(f"{k}={v}" for k, v in case.items())
        dut._log.info("case: %s", where)
        dtype = Dtype[case["dtype"].upper()]
        program = compile_collective(case["collective"], case["count"], topology=topology,
                                     algorithm=case.get("algorithm", "ring"), dtype=dtype,
                                     op=case["op"], mode=case["mode"], config=config)
        seed = case.get("seed", 1)
        rng = np.random.default_rng(seed)
        inputs = [random_inputs(rng, dtype, node.in_elems) for node in program.nodes]
        statuses, expect, counters, outputs, wants = await tb.run(program, inputs)
        cycles = max(c["cycles"] for c in counters)
        for k, status in enumerate(statuses):
            assert not status["error"], f"{where}: node {k}: {AceHost.describe_error(status)}"
        for k, (got, want) in enumerate(zip(outputs, wants)):
            if got != want:
                bad = next(i for i in range(len(want)) if got[i] != want[i])
                raise AssertionError(f"{where} seed {seed}: node {k} output differs from the "
                                     f"golden model from byte {bad} of {len(want)}")
        links = link_traffic(program)
        for k in range(tb.p):
            c = counters[k]
            assert c["mem_read_bytes"] == expect.mem_read_bytes[k], (
                f"{where}: node {k} mem_read_bytes {c['mem_read_bytes']} != golden "
                f"{expect.mem_read_bytes[k]}")
            assert c["mem_write_bytes"] == expect.mem_write_bytes[k], (
                f"{where}: node {k} mem_write_bytes {c['mem_write_bytes']} != golden "
                f"{expect.mem_write_bytes[k]}")
            for l in range(config.num_links):
                assert c[f"link{l}_tx_payload_bytes"] == links.get((k, "tx", l), 0), (
                    f"{where}: node {k} link {l} tx payload bytes")
                assert c[f"link{l}_rx_payload_bytes"] == links.get((k, "rx", l), 0), (
                    f"{where}: node {k} link {l} rx payload bytes")
        S = program.bytes_per_node
        mem_per_node = [c["mem_read_bytes"] + c["mem_write_bytes"] for c in counters]
        if case["mode"] == "ace" and case["collective"] == "allreduce":
            for k, total in enumerate(mem_per_node):
                assert abs(total - 2 * S) <= 0.02 * 2 * S, (
                    f"{where}: node {k} moved {total} bytes on the memory port; 2S = {2 * S}")
        results.append({**case, "nodes": tb.p, "bytes_per_node": S, "cycles": cycles,
                        "mem_bytes_per_node": mem_per_node[0],
                        "mem_over_2S": mem_per_node[0] / (2 * S),
                        "link0_tx_payload": counters[0]["link0_tx_payload_bytes"],
                        "chunks": program.chunks})
        dut._log.info("result: %s", results[-1])
    out = os.environ.get("SYSTEM_OUT")
    if out:
        with open(out, "w") as f:
            json.dump(results, f, indent=1)
