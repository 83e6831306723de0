"""The multi-node system model: N ACE engines, a main-memory model per node and a link model per
directed edge of a topology, built in Amaranth for Verilator.

::

     n{k}_axil --> +-----------------------+  m_axi   +-------------+ <-- n{k}_bd_* (backdoor
                   | engine k (Instance of |--------->| MemoryModel |     load / read back)
                   | one Verilog module)   |          +-------------+
                   | tx{l} ---> LinkModel ---> rx{l'} of the partner node
                   | rx{l} <--- LinkModel <--- tx{l'} of the partner node
                   +-----------------------+

Two builds of the same system: ``host="cocotb"`` for cocotb testbenches (memories loaded and
read through backdoor ports, rates and latencies fixed at build time) and ``host="driver"`` for
the C++ harness driver (:mod:`sim_harness.simulator`): the memories' words live in the driver
(DPI), memory and link rates and latencies are top-level inputs, so one build serves a whole
sweep, and every memory model's and link model's byte counters are top-level outputs that the
driver samples without disturbing the engines.

In a ``cocotb`` build the engine is generated once (:func:`engine_verilog`) and instantiated N
times through ``Instance``. A ``driver`` build is the *fabric* only: the memory, link and
switch models, with every engine port (the AXI4-Lite port aside, which the driver drives
itself) a top-level port ``n{k}_<engine port>`` of the opposite direction. The driver connects
N separately compiled engine models to it (:func:`engine_sim_verilog`, built once per engine
configuration and shared by every system of that configuration) and settles the
combinational paths between them every cycle. Link ``l`` of node ``x`` and link ``l'`` of node
``y`` form one bidirectional link (both directions modelled, each with its own latency line), as
:meth:`ace.sw.program.Topology.send_link` numbers them: in a torus ``(x, 2k) <-> (x+1, 2k+1)``, in
a fully connected system ``(x, (y-x-1) mod p) <-> (y, (x-y-1) mod p)``. The NIC's credit return
needs exactly this pairing. Links a topology does not use are tied off. A switch is the fully
connected system's virtual links, with each node's links sharing one port each way
(:mod:`sim_harness.switch`).
"""

from __future__ import annotations

import functools
import gc
import warnings
from dataclasses import dataclass

from amaranth.hdl import (ClockSignal, Instance, Module, ResetSignal, Shape, Signal,
                          UnusedElaboratable)
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ace.hw.axi.signatures import Axi4Signature, AxiLiteSignature
from ace.config import AceConfig
from ace.flow.convert import to_verilog
from ace.regmap import CSR_ADDR_BITS
from ace.hw.engine import AceEngine
from ace.sw.program import ProgramError, Topology
from ace.vocab import Algorithm

from .link import LinkModel
from .link import COUNTER_BITS, RATE_BITS
from .memory import MemoryModel
from .switch import SwitchPort
from .sim_ram import SIM_RAM_DPI_MODULE, SIM_RAM_DPI_VERILOG, SIM_RAM_MODULE, SIM_RAM_VERILOG

__all__ = ["SystemSpec", "AceSystem", "add_node_memory", "link_model", "link_partners", "engine_verilog", "engine_ports",
           "engine_sim_verilog", "engine_sources", "system_sources", "fabric_ports", "HOSTS",
           "MAX_MEM_LATENCY", "MAX_LINK_LATENCY"]

#: Who drives a system build (see the module docstring).
HOSTS = ("cocotb", "driver")
#: Largest memory and link latencies a ``driver`` build accepts at run time, cycles.
MAX_MEM_LATENCY = 126
MAX_LINK_LATENCY = 255


@dataclass(frozen=True)
class SystemSpec:
    """What a system build is made of; every field is part of the build-cache key."""
    config: AceConfig
    topology: Topology
    link_latency: int = 16
    mem_bytes: int = 1 << 20            # per node
    mem_latency: int = 8
    mem_bytes_per_cycle: float | None = None    # default: 2 x link_rate (see mem_rate)
    host: str = "cocotb"
    link_bytes_per_cycle: float | None = None   # one link, one direction; default link_bytes
    bidirectional: bool = False                 # every ring phase runs as the bidirectional ring

    def __post_init__(self):
        if self.host not in HOSTS:
            raise ValueError(f"host: {self.host!r}; allowed: {', '.join(HOSTS)}")
        if self.host == "driver" and not (1 <= self.link_latency <= MAX_LINK_LATENCY
                                          and 2 <= self.mem_latency <= MAX_MEM_LATENCY):
            raise ValueError(f"link_latency {self.link_latency} / mem_latency "
                             f"{self.mem_latency}: allowed 1 to {MAX_LINK_LATENCY} / 2 to "
                             f"{MAX_MEM_LATENCY} cycles")
        if self.topology.num_links > self.config.num_links:
            raise ValueError(f"topology: {self.topology} needs {self.topology.num_links} links "
                             f"per node; config {self.config.name} has num_links = "
                             f"{self.config.num_links}")

    @property
    def link_rate(self) -> float:
        """Bandwidth of one link in one direction, bytes per cycle (a run-time setting of the
        link models: no build depends on it)."""
        return self.link_bytes_per_cycle or self.config.link_bytes

    def run_algorithm(self, algorithm):
        """What a collective that asks for ``algorithm`` (one name, or one per dimension) runs
        here: with ``bidirectional``, every ``ring`` is the bidirectional ring."""
        if not self.bidirectional:
            return algorithm
        if isinstance(algorithm, str):
            return Algorithm.BIDIRECTIONAL_RING.value if algorithm.lower() == "ring" \
                else algorithm
        return type(algorithm)(self.run_algorithm(a) for a in algorithm)

    @property
    def mem_ratio(self) -> float:
        """Memory bytes per cycle per link byte per cycle per direction (docs/harness.md)."""
        return self.mem_rate / self.link_rate

    @property
    def mem_rate(self) -> float:
        """Memory bandwidth in bytes per cycle (reads and writes share it); by default two
        bytes per link byte per direction (``mem_ratio`` 2), whatever the port's width."""
        return self.mem_bytes_per_cycle or 2 * self.link_rate

    @property
    def name(self) -> str:
        dims = "x".join(str(d) for d in self.topology.dims)
        return f"ace_system_{self.config.name}_{self.topology.kind}{dims}"

    @property
    def engine_module(self) -> str:
        return f"ace_engine_{self.config.name}"

    @property
    def engine_sim_module(self) -> str:
        return f"ace_engine_{self.config.name}_sim"


def link_partners(topology: Topology) -> dict[tuple[int, int], tuple[int, int]]:
    """``(node, link) -> (peer node, peer link)`` for every link the topology uses."""
    out = {}
    p = topology.num_nodes
    for x in range(p):
        for y in range(p):
            if x == y:
                continue
            try:
                lx = topology.send_link(x, y)
            except ProgramError:       # not neighbours
                continue
            ly = topology.recv_link(y, x)
            # A link is bidirectional: the receiver returns credits on the reverse direction.
            # (In a dimension of size 2, (x, 2k+1) -> (y, 2k) is no send link of x's, but it
            # carries the credits of y's sends to x.)
            out[(x, lx)] = (y, ly)
            out[(y, ly)] = (x, lx)
    return out


def engine_verilog(config: AceConfig) -> str:
    """The engine as one Verilog module named ``ace_engine_<config>``."""
    return to_verilog(AceEngine(config), name=f"ace_engine_{config.name}")


@functools.lru_cache(maxsize=None)
def engine_ports(config: AceConfig) -> tuple[tuple[str, bool, int], ...]:
    """``(name, is_output, width)`` of every port of the engine module but ``clk`` and
    ``rst``, in signature order (``name`` as in the Verilog: path parts joined by ``__``)."""
    with warnings.catch_warnings():
        # Only the signature is wanted: the engine is never elaborated here.
        warnings.simplefilter("ignore", UnusedElaboratable)
        template = AceEngine(config)
        ports = tuple(("__".join(str(part) for part in path), member.flow == Out,
                       Shape.cast(member.shape).width)
                      for path, member, _ in template.signature.flatten(template))
        del template
        gc.collect()        # the engine's reference cycles, freed while the warning is off
    return ports


def fabric_ports(config: AceConfig) -> list[tuple[str, bool, int]]:
    """The engine ports a ``driver`` build's fabric connects (every port but the AXI4-Lite
    port, which the driver drives), as :func:`engine_ports` gives them."""
    return [port for port in engine_ports(config) if not port[0].startswith("s_axil__")]


def engine_sim_verilog(config: AceConfig) -> str:
    """``ace_engine_<config>_sim``: the engine of a ``driver`` build, with the same ports.

    Its reset input passes through a register (initially 1) before it reaches the engine, so
    that reset is not a primary input of the engine's logic: Verilator then evaluates the
    engine's next-state logic once per clock edge, instead of again in every evaluation as
    logic that depends on an input. The driver raises this reset input one cycle before the
    fabric's, so the engine sees the same reset cycles as in a single design.

    Every other input passes through a register of the falling edge, for the same reason:
    the logic that reads the memory's, the links' and the AXI4-Lite port's inputs is then
    evaluated once, at the falling edge, rather than in each of the driver's two evaluations
    of a cycle. The driver sets an engine's inputs before the falling edge's evaluation and
    holds them through the rising edge's (``settle`` in driver.cpp), so at every rising edge
    the registered inputs equal the inputs: the same cycles. This needs what
    tests/test_engine_sim_wrapper.py checks: no engine output depends combinationally on an
    input or on a register of the falling edge (the driver settles in one pass), and no
    register of the falling edge inside the engine (the clock gates' ``enable_n``) samples an
    input, which would see the previous cycle's value."""
    name = f"ace_engine_{config.name}"

    def width(w):
        return f"[{w - 1}:0] " if w > 1 else ""

    ports = engine_ports(config)
    inputs = [(port, w) for port, output, w in ports if not output]
    lines = [f"// Simulation wrapper of {name} (sim_harness/system.py, engine_sim_verilog).",
             f"module {name}_sim (", "    input clk,", "    input rst,"]
    lines += [f"    {'output' if output else 'input'} {width(w)}{port}"
              f"{',' if i < len(ports) - 1 else ''}" for i, (port, output, w) in enumerate(ports)]
    lines += [");", "  reg rst_q = 1'b1;", "  always @(posedge clk) rst_q <= rst;"]
    lines += [f"  reg {width(w)}{port}_q;" for port, w in inputs]
    lines += ["  always @(negedge clk) begin"]
    lines += [f"    {port}_q <= {port};" for port, _ in inputs]
    lines += ["  end", f"  {name} engine (", "    .clk(clk),", "    .rst(rst_q),"]
    lines += [f"    .{port}({port}{'' if output else '_q'}){',' if i < len(ports) - 1 else ''}"
              for i, (port, output, _) in enumerate(ports)]
    return "\n".join(lines + ["  );", "endmodule", ""])


def add_node_memory(m: Module, name: str, spec: SystemSpec, k: int, port, *, storage: str,
                    rates=None) -> MemoryModel:
    """Node ``k``'s memory model, added to ``m`` as ``name``, its AXI4 slave wired to the
    engine's master port (``port(member)`` is the engine-side signal of ``m_axi__<member>``);
    with ``rates`` (a component with the driver's ``mem_*`` rate inputs) its bandwidth,
    background share and latency follow them. A ``driver`` build's latency is a run-time input
    up to :data:`MAX_MEM_LATENCY`."""
    cfg, driver = spec.config, spec.host == "driver"
    m.submodules[name] = memory = MemoryModel(
        size_bytes=spec.mem_bytes, data_bytes=cfg.mem_bytes, addr_bits=cfg.mem_addr_bits,
        id_bits=cfg.mem_id_bits, bytes_per_cycle=spec.mem_rate, latency=spec.mem_latency,
        max_latency=MAX_MEM_LATENCY if driver else None, storage=storage, node=k)
    master = Axi4Signature(cfg.mem_addr_bits, cfg.mem_bytes, cfg.mem_id_bits)
    for member_name, member in master.members.items():
        engine_side, memory_side = port(member_name), getattr(memory.s_axi, member_name)
        m.d.comb += (memory_side.eq(engine_side) if member.flow == Out      # engine -> memory
                     else engine_side.eq(memory_side))
    if rates is not None:
        m.d.comb += [memory.cfg_bytes_per_cycle_q8.eq(rates.mem_bytes_per_cycle_q8),
                     memory.cfg_background_q16.eq(rates.mem_background_q16),
                     memory.cfg_latency.eq(rates.mem_latency)]
    return memory


def link_model(spec: SystemSpec) -> LinkModel:
    """One link's model; a ``driver`` build's latency is a run-time input up to
    :data:`MAX_LINK_LATENCY`."""
    return LinkModel(data_bytes=spec.config.link_bytes, latency=spec.link_latency,
                     max_latency=MAX_LINK_LATENCY if spec.host == "driver" else None)


class AceSystem(wiring.Component):
    """N engines on a topology (see the module docstring).

    Members (per node ``k``)
    -------
    n{k}_axil : In(AxiLiteSignature(16, 4)), the engine's CSRs
    n{k}_bd_addr, n{k}_bd_wdata, n{k}_bd_we : In, n{k}_bd_rdata : Out, the memory backdoor
    n{k}_irq : Out(1)

    ``host="driver"`` builds (the fabric: no engines, no AXI4-Lite or backdoor ports) have,
    shared by all nodes, ``mem_bytes_per_cycle_q8``, ``mem_background_q16``, ``mem_latency``,
    ``link_bytes_per_cycle_q8``, ``link_latency`` (In; see :class:`MemoryModel` and
    :class:`LinkModel`), and per node ``n{k}_<port>`` for every engine port of
    :func:`fabric_ports` (In for the engine's outputs, Out for its inputs; ``n{k}_irq`` among
    them), ``n{k}_mem_read_bytes``, ``n{k}_mem_write_bytes`` and ``n{k}_link{l}_bytes`` for
    every link the topology uses (Out(48), cumulative).
    """

    def __init__(self, spec: SystemSpec):
        self.spec = spec
        cfg = spec.config
        words = spec.mem_bytes // cfg.mem_bytes
        partners = link_partners(spec.topology)
        members = {}
        if spec.host == "driver":
            members.update({
                "mem_bytes_per_cycle_q8": In(RATE_BITS), "mem_background_q16": In(16),
                "mem_latency": In(MAX_MEM_LATENCY.bit_length()),
                "link_bytes_per_cycle_q8": In(RATE_BITS),
                "link_latency": In(MAX_LINK_LATENCY.bit_length())})
        for k in range(spec.topology.num_nodes):
            if spec.host == "cocotb":
                members[f"n{k}_axil"] = In(AxiLiteSignature(CSR_ADDR_BITS, 4))
                members[f"n{k}_bd_addr"] = In(range(words))
                members[f"n{k}_bd_wdata"] = In(8 * cfg.mem_bytes)
                members[f"n{k}_bd_we"] = In(1)
                members[f"n{k}_bd_rdata"] = Out(8 * cfg.mem_bytes)
                members[f"n{k}_irq"] = Out(1)
            else:
                for name, output, width in fabric_ports(cfg):
                    members[f"n{k}_{name}"] = In(width) if output else Out(width)
                members[f"n{k}_mem_read_bytes"] = Out(COUNTER_BITS)
                members[f"n{k}_mem_write_bytes"] = Out(COUNTER_BITS)
                for l in range(cfg.num_links):
                    if (k, l) in partners:
                        members[f"n{k}_link{l}_bytes"] = Out(COUNTER_BITS)
        super().__init__(members)

    #: Storage of a ``cocotb`` build's memory arrays (:class:`MemoryModel`'s ``storage``).
    memory_storage = "verilog"

    def engine(self, signals: dict[str, Signal]):
        """The engine of one node in a ``cocotb`` build, its ports on ``signals`` (engine port
        name -> Signal): an ``Instance`` of the engine's Verilog module. A subclass may return
        another form (``sim_harness.bench`` returns the Amaranth engine)."""
        return Instance(self.spec.engine_module, i_clk=ClockSignal(), i_rst=ResetSignal(),
                        **{("o_" if output else "i_") + name: signals[name]
                           for name, output, _ in engine_ports(self.spec.config)})

    def elaborate(self, platform):
        m = Module()
        spec, cfg = self.spec, self.spec.config
        p = spec.topology.num_nodes
        partners = link_partners(spec.topology)
        driver = spec.host == "driver"

        engines = []      # per node: {engine port name: Signal}
        for k in range(p):
            if driver:      # the engines are outside: their ports are the fabric's
                signals = {name: getattr(self, f"n{k}_{name}")
                           for name, _, _ in fabric_ports(cfg)}
            else:
                signals = {name: Signal(width, name=f"n{k}_{name}")
                           for name, _, width in engine_ports(cfg)}
                m.submodules[f"engine{k}"] = self.engine(signals)
            engines.append(signals)

            memory = add_node_memory(m, f"memory{k}", spec, k,
                                     lambda name, s=signals: s[f"m_axi__{name}"],
                                     storage="dpi" if driver else self.memory_storage,
                                     rates=self if driver else None)
            if not driver:
                for name, member in AxiLiteSignature(CSR_ADDR_BITS, 4).members.items():
                    outer = getattr(getattr(self, f"n{k}_axil"), name)
                    if member.flow == Out:
                        m.d.comb += signals[f"s_axil__{name}"].eq(outer)
                    else:
                        m.d.comb += outer.eq(signals[f"s_axil__{name}"])
                m.d.comb += getattr(self, f"n{k}_irq").eq(signals["irq"])
            if driver:
                m.d.comb += [
                    getattr(self, f"n{k}_mem_read_bytes").eq(memory.read_bytes),
                    getattr(self, f"n{k}_mem_write_bytes").eq(memory.write_bytes),
                ]
            else:
                m.d.comb += [
                    memory.bd_addr.eq(getattr(self, f"n{k}_bd_addr")),
                    memory.bd_wdata.eq(getattr(self, f"n{k}_bd_wdata")),
                    memory.bd_we.eq(getattr(self, f"n{k}_bd_we")),
                    getattr(self, f"n{k}_bd_rdata").eq(memory.bd_rdata),
                ]

        # A switch: each node's virtual links share one port each way (sim_harness.switch);
        # the links themselves then run at full rate and the ports carry the link bandwidth.
        switch = spec.topology.kind == "switch"
        port_rate = self.link_bytes_per_cycle_q8 if driver else None
        egress, ingress = {}, {}        # node -> [(valid, ready-of-next-stage, pass-through)]
        for k in range(p):
            for l in range(cfg.num_links):
                if (k, l) not in partners:
                    continue
                peer, peer_link = partners[(k, l)]
                m.submodules[f"link_{k}_{l}"] = link = link_model(spec)
                if driver:
                    m.d.comb += [
                        link.cfg_bytes_per_cycle_q8.eq(
                            (cfg.link_bytes << 8) if switch else self.link_bytes_per_cycle_q8),
                        link.cfg_latency.eq(self.link_latency),
                        getattr(self, f"n{k}_link{l}_bytes").eq(link.bytes),
                    ]
                src, dst = engines[k], engines[peer]
                for field in ("tdata", "tkeep", "tlast"):
                    m.d.comb += [getattr(link.i, field).eq(src[f"tx{l}__{field}"]),
                                 dst[f"rx{peer_link}__{field}"].eq(getattr(link.o, field))]
                hops = ((src[f"tx{l}__tvalid"], src[f"tx{l}__tready"], link.i.tvalid,
                         link.i.tready, egress.setdefault(k, [])),
                        (link.o.tvalid, link.o.tready, dst[f"rx{peer_link}__tvalid"],
                         dst[f"rx{peer_link}__tready"], ingress.setdefault(peer, [])))
                for valid, ready, next_valid, next_ready, port in hops:
                    if switch:      # granted by the port below
                        grant = Signal(name=f"grant_{k}_{l}_{len(port)}")
                        port.append((valid & next_ready, grant))
                        m.d.comb += [next_valid.eq(valid & grant), ready.eq(next_ready & grant)]
                    else:
                        m.d.comb += [next_valid.eq(valid), ready.eq(next_ready)]
        for side, ports in (("egress", egress), ("ingress", ingress)):
            for k, streams in ports.items() if switch else ():
                port = SwitchPort(len(streams), cfg.link_bytes)
                m.submodules[f"{side}_port_{k}"] = port
                if port_rate is not None:
                    m.d.comb += port.cfg_bytes_per_cycle_q8.eq(port_rate)
                for i, (request, grant) in enumerate(streams):
                    m.d.comb += [port.requests[i].eq(request), grant.eq(port.grant[i])]
        return m


def engine_sources(config: AceConfig) -> dict[str, str]:
    """File name -> Verilog text of a ``driver`` build's engine: the engine module and its
    simulation wrapper (:func:`engine_sim_verilog`)."""
    name = f"ace_engine_{config.name}"
    return {f"{name}.v": engine_verilog(config), f"{name}_sim.v": engine_sim_verilog(config)}


def system_sources(spec: SystemSpec) -> dict[str, str]:
    """File name -> Verilog text: the system top and its RAM module, and for a ``cocotb``
    build the engine module (a ``driver`` build's engine is :func:`engine_sources`)."""
    top = to_verilog(AceSystem(spec), name=spec.name)
    if spec.host == "driver":
        return {f"{SIM_RAM_DPI_MODULE}.sv": SIM_RAM_DPI_VERILOG, f"{spec.name}.v": top}
    return {f"{spec.engine_module}.v": engine_verilog(spec.config),
            f"{SIM_RAM_MODULE}.v": SIM_RAM_VERILOG, f"{spec.name}.v": top}
