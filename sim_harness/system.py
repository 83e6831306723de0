"""The multi-node system model: N ACE engines, a main-memory model per node and a link model per
directed edge of a topology, built in Amaranth for Verilator.

::

     n{k}_axil --> +-----------------------+  m_axi   +-------------+ <-- n{k}_bd_* (backdoor
                   | engine k (Instance of |--------->| MemoryModel |     load / read back)
                   | one Verilog module)   |          +-------------+
                   | tx{l} ---> LinkModel ---> rx{l'} of the partner node
                   | rx{l} <--- LinkModel <--- tx{l'} of the partner node
                   +-----------------------+

The engine is generated once (:func:`engine_verilog`) and instantiated N times through
``Instance``, so Verilator compiles it once. Link ``l`` of node ``x`` and link ``l'`` of node
``y`` form one bidirectional link (both directions modelled, each with its own latency line), as
:meth:`ace.program.Topology.send_link` numbers them: in a torus ``(x, 2k) <-> (x+1, 2k+1)``, in
a fully connected system ``(x, (y-x-1) mod p) <-> (y, (x-y-1) mod p)``. The NIC's credit return
needs exactly this pairing. Links a topology does not use are tied off.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.back import verilog
from amaranth.hdl import ClockSignal, Instance, Module, ResetSignal, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ace.axi import Axi4Signature, AxiLiteSignature
from ace.config import AceConfig
from ace.csr import CSR_ADDR_BITS
from ace.engine import AceEngine
from ace.program import ProgramError, Topology

from .link import LinkModel
from .memory import MemoryModel
from .sim_ram import SIM_RAM_MODULE, SIM_RAM_VERILOG

__all__ = ["SystemSpec", "AceSystem", "link_partners", "engine_verilog", "system_sources"]


@dataclass(frozen=True)
class SystemSpec:
    """What a system build is made of; every field is part of the build-cache key."""
    config: AceConfig
    topology: Topology
    link_latency: int = 16
    mem_bytes: int = 1 << 20            # per node
    mem_latency: int = 8
    mem_bytes_per_cycle: float | None = None    # default: one read and one write beat per cycle

    def __post_init__(self):
        if self.topology.kind == "switch":
            raise ValueError("topology: switch systems are not modelled yet; allowed: torus "
                             "(ring) or fully_connected")
        if self.topology.num_links > self.config.num_links:
            raise ValueError(f"topology: {self.topology} needs {self.topology.num_links} links "
                             f"per node; config {self.config.name} has num_links = "
                             f"{self.config.num_links}")

    @property
    def name(self) -> str:
        dims = "x".join(str(d) for d in self.topology.dims)
        return f"ace_system_{self.config.name}_{self.topology.kind}{dims}"

    @property
    def engine_module(self) -> str:
        return f"ace_engine_{self.config.name}"


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
            out[(x, lx)] = (y, ly)
    return out


def engine_verilog(config: AceConfig) -> str:
    """The engine as one Verilog module named ``ace_engine_<config>``."""
    return verilog.convert(AceEngine(config), name=f"ace_engine_{config.name}", emit_src=False)


class AceSystem(wiring.Component):
    """N engines on a topology (see the module docstring).

    Members (per node ``k``)
    -------
    n{k}_axil : In(AxiLiteSignature(16, 4)), the engine's CSRs
    n{k}_bd_addr, n{k}_bd_wdata, n{k}_bd_we : In, n{k}_bd_rdata : Out, the memory backdoor
    n{k}_irq : Out(1)
    """

    def __init__(self, spec: SystemSpec):
        self.spec = spec
        cfg = spec.config
        words = spec.mem_bytes // cfg.mem_bytes
        members = {}
        for k in range(spec.topology.num_nodes):
            members[f"n{k}_axil"] = In(AxiLiteSignature(CSR_ADDR_BITS, 4))
            members[f"n{k}_bd_addr"] = In(range(words))
            members[f"n{k}_bd_wdata"] = In(8 * cfg.mem_bytes)
            members[f"n{k}_bd_we"] = In(1)
            members[f"n{k}_bd_rdata"] = Out(8 * cfg.mem_bytes)
            members[f"n{k}_irq"] = Out(1)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        spec, cfg = self.spec, self.spec.config
        p = spec.topology.num_nodes
        template = AceEngine(cfg)
        template._MustUse__silence = True      # only its signature is used
        partners = link_partners(spec.topology)

        engines = []      # per node: {port path: Signal}
        for k in range(p):
            ports, signals = {}, {}
            for path, member, _ in template.signature.flatten(template):
                name = "__".join(str(part) for part in path)
                sig = Signal(member.shape, name=f"n{k}_{name}")
                signals[name] = sig
                ports[("i_" if member.flow == In else "o_") + name] = sig
            m.submodules[f"engine{k}"] = Instance(
                spec.engine_module, i_clk=ClockSignal(), i_rst=ResetSignal(), **ports)
            engines.append(signals)

            memory = MemoryModel(size_bytes=spec.mem_bytes, data_bytes=cfg.mem_bytes,
                                 addr_bits=cfg.mem_addr_bits, id_bits=cfg.mem_id_bits,
                                 bytes_per_cycle=spec.mem_bytes_per_cycle,
                                 latency=spec.mem_latency, storage="verilog")
            m.submodules[f"memory{k}"] = memory
            master = Axi4Signature(cfg.mem_addr_bits, cfg.mem_bytes, cfg.mem_id_bits)
            for name, member in master.members.items():
                engine_side = signals[f"m_axi__{name}"]
                if member.flow == Out:      # master-driven: engine -> memory
                    m.d.comb += getattr(memory.s_axi, name).eq(engine_side)
                else:
                    m.d.comb += engine_side.eq(getattr(memory.s_axi, name))
            for name, member in AxiLiteSignature(CSR_ADDR_BITS, 4).members.items():
                outer = getattr(getattr(self, f"n{k}_axil"), name)
                if member.flow == Out:
                    m.d.comb += signals[f"s_axil__{name}"].eq(outer)
                else:
                    m.d.comb += outer.eq(signals[f"s_axil__{name}"])
            m.d.comb += [
                memory.bd_addr.eq(getattr(self, f"n{k}_bd_addr")),
                memory.bd_wdata.eq(getattr(self, f"n{k}_bd_wdata")),
                memory.bd_we.eq(getattr(self, f"n{k}_bd_we")),
                getattr(self, f"n{k}_bd_rdata").eq(memory.bd_rdata),
                getattr(self, f"n{k}_irq").eq(signals["irq"]),
            ]

        for k in range(p):
            for l in range(cfg.num_links):
                if (k, l) not in partners:
                    continue
                peer, peer_link = partners[(k, l)]
                link = LinkModel(data_bytes=cfg.link_bytes, latency=spec.link_latency)
                m.submodules[f"link_{k}_{l}"] = link
                src, dst = engines[k], engines[peer]
                for field in ("tdata", "tkeep", "tlast", "tvalid"):
                    m.d.comb += [getattr(link.i, field).eq(src[f"tx{l}__{field}"]),
                                 dst[f"rx{peer_link}__{field}"].eq(getattr(link.o, field))]
                m.d.comb += [src[f"tx{l}__tready"].eq(link.i.tready),
                             link.o.tready.eq(dst[f"rx{peer_link}__tready"])]
        return m


def system_sources(spec: SystemSpec) -> dict[str, str]:
    """File name -> Verilog text: the engine module and the system top."""
    top = verilog.convert(AceSystem(spec), name=spec.name, emit_src=False)
    return {f"{spec.engine_module}.v": engine_verilog(spec.config),
            f"{SIM_RAM_MODULE}.v": SIM_RAM_VERILOG, f"{spec.name}.v": top}
