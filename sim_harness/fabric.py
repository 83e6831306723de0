"""A ``driver`` build's fabric in parts: one Amaranth module per node, joined by a generated
Verilog top with the same ports as :class:`~sim_harness.system.AceSystem`'s.

::

    n{k}_m_axi__*, n{k}_tx{l}__* --> +----------------------------+ --> n{k}_mem_*_bytes
       (engine k's ports)            | <system>_node{k}:          |     n{k}_link{l}_bytes
                                     |   MemoryModel (node k)     |
                                     |   LinkModel per link l of k| --> out{l}__* --> wires of the
                                     +----------------------------+     top --> n{peer}_rx{l'}__*

Why: a fabric top holds every engine port of every node as a top-level port, 2,991 bits per
node for a 6-link engine with the 64-byte memory port, and Amaranth's netlist numbers the bits
of one cell up to 2**16 (``Net.from_cell`` in ``amaranth/hdl/_nir.py``), so ``AceSystem``
converts for at most 21 such nodes and the 64-node 3D torus (191,424 bits) fails. Here no Amaranth design holds more than
one node's ports; the top is Verilog text (as :func:`~sim_harness.system.engine_sim_verilog`
writes the engine's wrapper), so it has no such limit, and the driver and
:func:`~sim_harness.simulator.ports_header` see the same ports. Torus and fully connected
topologies; a switch system (a port shared by a node's links) keeps ``AceSystem``.

The same system, cycle for cycle: the default all-reduce on ``torus4x4`` takes 115,677 (ACE)
and 281,273 (baseline) cycles with the same counters from either fabric (docs/harness.md).
"""

from __future__ import annotations

import gc
import warnings

from amaranth.hdl import Module, Shape, UnusedElaboratable
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ace.flow.convert import to_verilog

from .link import COUNTER_BITS, RATE_BITS
from .sim_ram import SIM_RAM_DPI_MODULE, SIM_RAM_DPI_VERILOG
from .system import (MAX_LINK_LATENCY, MAX_MEM_LATENCY, AceSystem, SystemSpec, add_node_memory,
                     fabric_ports, link_model, link_partners)
from .system import system_sources as whole_system_sources

__all__ = ["NodeFabric", "fabric_sources", "system_sources", "AMARANTH_PORT_BITS",
           "fabric_port_bits"]

#: The most bits one Amaranth design's top-level ports may have (its netlist's cell 0).
AMARANTH_PORT_BITS = 1 << 16
#: The rate and latency inputs every node shares (``AceSystem``'s driver ports).
RATES = {"mem_bytes_per_cycle_q8": RATE_BITS, "mem_background_q16": 16,
         "mem_latency": MAX_MEM_LATENCY.bit_length(), "link_bytes_per_cycle_q8": RATE_BITS,
         "link_latency": MAX_LINK_LATENCY.bit_length()}
_STREAM = ("tdata", "tkeep", "tlast", "tvalid")


def fabric_port_bits(spec: SystemSpec) -> int:
    """Top-level port bits of ``spec``'s ``AceSystem`` driver fabric (engine ports of every
    node; counters and rates aside)."""
    return spec.topology.num_nodes * sum(width for _, _, width in fabric_ports(spec.config))


class NodeFabric(wiring.Component):
    """Node ``k``'s part of the fabric: its memory model and a link model per link it has
    (``link_partners``), as ``AceSystem`` makes them. Latency and throughput: those of
    :class:`MemoryModel` and :class:`LinkModel`; nothing is added between them and the ports.

    Members
    -------
    mem_bytes_per_cycle_q8, mem_background_q16, mem_latency, link_bytes_per_cycle_q8,
    link_latency : In, the shared rates and latencies
    m_axi__* : the engine's memory port (In for the engine's outputs, Out for its inputs)
    tx{l}__* : the engine's transmit stream of link l (``tready`` Out)
    out{l}__tdata, out{l}__tkeep, out{l}__tlast, out{l}__tvalid : Out, out{l}__tready : In,
        link l's far end, for the peer's receive port
    mem_read_bytes, mem_write_bytes, link{l}_bytes : Out(48), the counters
    """

    def __init__(self, spec: SystemSpec, k: int):
        self.spec, self.k = spec, k
        cfg = spec.config
        self.links = sorted(l for (n, l) in link_partners(spec.topology) if n == k)
        members = {name: In(width) for name, width in RATES.items()}
        prefixes = ("m_axi__", *(f"tx{l}__" for l in self.links))
        for name, output, width in fabric_ports(cfg):
            if name.startswith(prefixes):
                members[name] = In(width) if output else Out(width)
        for l in self.links:
            members.update({f"out{l}__tdata": Out(8 * cfg.link_bytes),
                            f"out{l}__tkeep": Out(cfg.link_bytes), f"out{l}__tlast": Out(1),
                            f"out{l}__tvalid": Out(1), f"out{l}__tready": In(1),
                            f"link{l}_bytes": Out(COUNTER_BITS)})
        members["mem_read_bytes"] = Out(COUNTER_BITS)
        members["mem_write_bytes"] = Out(COUNTER_BITS)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        spec = self.spec
        memory = add_node_memory(m, "memory", spec, self.k,
                                 lambda name: getattr(self, f"m_axi__{name}"), storage="dpi",
                                 rates=self)
        m.d.comb += [self.mem_read_bytes.eq(memory.read_bytes),
                     self.mem_write_bytes.eq(memory.write_bytes)]
        for l in self.links:
            m.submodules[f"link{l}"] = link = link_model(spec)
            m.d.comb += [link.cfg_bytes_per_cycle_q8.eq(self.link_bytes_per_cycle_q8),
                         link.cfg_latency.eq(self.link_latency),
                         getattr(self, f"link{l}_bytes").eq(link.bytes),
                         getattr(self, f"tx{l}__tready").eq(link.i.tready),
                         link.o.tready.eq(getattr(self, f"out{l}__tready"))]
            for field in _STREAM:
                m.d.comb += [getattr(link.i, field).eq(getattr(self, f"tx{l}__{field}")),
                             getattr(self, f"out{l}__{field}").eq(getattr(link.o, field))]
        return m


def _decl(kind: str, name: str, width: int) -> str:
    return f"  {kind} {f'[{width - 1}:0] ' if width > 1 else ''}{name}"


def _flat(component) -> list[tuple[str, bool, int]]:
    """``(name, is_input, width)`` of a component's ports, in signature order."""
    return [("__".join(map(str, path)), member.flow == In, Shape.cast(member.shape).width)
            for path, member, _ in component.signature.flatten(component)]


def _top_ports(spec: SystemSpec) -> list[tuple[str, bool, int]]:
    with warnings.catch_warnings():     # only the signature is wanted: never elaborated
        warnings.simplefilter("ignore", UnusedElaboratable)
        top = AceSystem(spec)
        ports = _flat(top)
        del top
        gc.collect()
    return ports


def _instance(spec: SystemSpec, k: int, node: NodeFabric, wires: list, assigns: list,
              driven: set) -> str:
    """The top's instance of node ``k``'s module; its link ends go to the peers' receive
    ports through ``wires`` and ``assigns``; ``driven`` collects the top outputs it drives."""
    partners = link_partners(spec.topology)
    conns = ["    .clk(clk)", "    .rst(rst)"]
    for name, is_input, width in _flat(node):
        wire = name if name in RATES else f"n{k}_{name}"
        if name.startswith("out"):
            link, field = name[3:].split("__")
            peer, peer_link = partners[(k, int(link))]
            wire, far = f"w{k}_{name}", f"n{peer}_rx{peer_link}__{field}"
            wires.append(_decl("wire", wire, width) + ";")
            assigns.append(f"  assign {wire} = {far};" if is_input
                           else f"  assign {far} = {wire};")
            if not is_input:
                driven.add(far)
        elif not is_input:
            driven.add(wire)
        conns.append(f"    .{name}({wire})")
    return f"  {spec.name}_node{k} node{k} (\n" + ",\n".join(conns) + "\n  );"


def fabric_sources(spec: SystemSpec) -> dict[str, str]:
    """File name -> Verilog text of ``spec``'s ``driver`` fabric in parts: the DPI RAM module,
    and the top ``spec.name`` (ports as ``AceSystem``'s) with a module per node."""
    if spec.host != "driver" or spec.topology.kind == "switch":
        raise ValueError(f"fabric_sources: {spec.topology} ({spec.host}): only driver builds "
                         "of torus and fully connected systems are made in parts")
    modules, wires, assigns, instances, driven = [], [], [], [], set()
    for k in range(spec.topology.num_nodes):
        node = NodeFabric(spec, k)
        modules.append(to_verilog(node, name=f"{spec.name}_node{k}"))
        instances.append(_instance(spec, k, node, wires, assigns, driven))
    ports = _top_ports(spec)
    decls = ["  input clk", "  input rst"] + [
        _decl("input" if is_input else "output", name, width) for name, is_input, width in ports]
    ties = [f"  assign {name} = {width}'d0;" for name, is_input, width in ports
            if not is_input and name not in driven]     # engine inputs of unused links
    top = "\n".join([f"// Generated by sim_harness/fabric.py for {spec.name}.",
                     f"module {spec.name} (", ",\n".join(decls), ");", *wires, *assigns,
                     *ties, *instances, "endmodule", ""])
    return {f"{SIM_RAM_DPI_MODULE}.sv": SIM_RAM_DPI_VERILOG,
            f"{spec.name}.v": "\n".join([top, *modules])}


def system_sources(spec: SystemSpec) -> dict[str, str]:
    """:func:`sim_harness.system.system_sources`, but a ``driver`` fabric whose top would
    have more port bits than Amaranth allows is made in parts (:func:`fabric_sources`)."""
    if (spec.host == "driver" and spec.topology.kind != "switch"
            and fabric_port_bits(spec) > AMARANTH_PORT_BITS):
        return fabric_sources(spec)
    return whole_system_sources(spec)
