"""Simulator speed: simulated node-cycles per second of a harness system on Verilator (the C++
driver) and on the Amaranth simulator, for ``ace bench-sim`` and ``tests/test_bench.py``.

* :func:`verilator_speed` replays one all-reduce (the bundled default, 1 MiB fp32) in ACE mode
  on the built system and times the driver: the CSR phase (program load, start, status and
  counter reads, in simulated cycles) and the run phase (the collective) separately, plus the
  memory images (no simulated cycles). Then it resets the system and runs ``idle_cycles``
  cycles with every engine idle: the idle floor, what the always-evaluated logic costs with
  nothing to do, which bounds the rate of any busy run.
* :func:`amaranth_speed` simulates the same system description with ``amaranth.sim``: the
  engines as Amaranth components instead of the Verilog instances, the memories as Amaranth
  ``Memory`` (the DPI memories exist only in the driver). Every node loads the program of a
  small all-reduce through its AXI4-Lite port, starts, and the system runs until every engine
  interrupts (about 1,300 cycles on ``ring8``) or ``cycles`` cycles pass. The memories hold
  zeros, so the result is not checked.

A node-cycle is one cycle of one engine with its memory and link models; the figure is
``cycles x nodes / wall seconds``, and also per CPU second of the simulating process (the
driver, or the Python process for Amaranth), which a machine shared with other jobs disturbs
less.
"""

from __future__ import annotations

import dataclasses
import time

from amaranth.hdl import Elaboratable, Module
from amaranth.lib.wiring import In

from ace.hw.engine import AceEngine, counter_names
from ace.sw.host import AceHost

from .preflight import prepare
from .replay import build_system, run_collective
from .simulator import SystemSimulator
from .system import AceSystem
from .systems import load_system
from .trace import CollectiveSpec

__all__ = ["verilator_speed", "amaranth_speed", "format_bench"]

#: The Amaranth run's collective: one chunk, 20 instructions per node, done in ~2,000 cycles.
AMARANTH_BYTES = 128


class _TimedSimulator(SystemSimulator):
    """A :class:`SystemSimulator` that adds up wall time and simulated cycles per phase."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.phases = {name: {"seconds": 0.0, "cpu_seconds": 0.0, "cycles": 0}
                       for name in ("csr", "run", "memory", "idle")}

    def _timed(self, phase, call, *args, **kwargs):
        begin, cpu, start = self.cycle, self.cpu_seconds(), time.perf_counter()
        result = call(*args, **kwargs)
        record = self.phases[phase]
        record["seconds"] += time.perf_counter() - start
        record["cpu_seconds"] += self.cpu_seconds() - cpu
        record["cycles"] += self.cycle - begin
        return result

    def csr(self, ops):
        return self._timed("csr", super().csr, ops)

    def run(self, **kwargs):
        return self._timed("run", super().run, **kwargs)

    def load(self, *args):
        return self._timed("memory", super().load, *args)

    def dump(self, *args):
        return self._timed("memory", super().dump, *args)

    def idle(self, cycles: int):
        """Reset, then ``cycles`` cycles with every engine idle (no program started)."""
        self.reset()
        return self._timed("idle", super().run, timeout=cycles, interval=cycles)


def _rate(cycles: int, nodes: int, seconds: float) -> float:
    return cycles * nodes / seconds if seconds > 0 else 0.0


def verilator_speed(system_name: str, *, nbytes: int = 1 << 20, idle_cycles: int = 100_000,
                    pgo: bool = False, log=None) -> dict:
    """Replay an ``nbytes`` fp32 all-reduce in ACE mode on the named system's Verilator build
    (built first if needed, not timed), then ``idle_cycles`` idle cycles after a reset; return
    the phases' cycles, seconds and node-cycles/s. ``pgo``: on the profile-guided build."""
    system = load_system(system_name)
    nodes = system.topology.num_nodes
    spec = CollectiveSpec(name=f"allreduce_{nbytes}", collective="allreduce", bytes=nbytes,
                          source="bench")
    prepared = prepare(spec, system, "ace")
    build_start = time.perf_counter()
    exe = build_system(system, pgo=pgo, log=log)
    build_seconds = time.perf_counter() - build_start
    with _TimedSimulator(system, pgo=pgo, exe=exe) as sim:
        sim.reset()
        start = time.perf_counter()
        raw = run_collective(sim, prepared, seed=1, interval=1 << 14)
        total = time.perf_counter() - start
        if idle_cycles:
            sim.idle(idle_cycles)
        phases = sim.phases
    out = {"simulator": "verilator" + (" pgo" if pgo else ""), "system": system_name,
           "nodes": nodes, "workload": f"allreduce {nbytes} B fp32 (ace)", "correct": raw["correct"],
           "collective_cycles": raw["cycles"], "build_or_cache_seconds": build_seconds,
           "wall_seconds": total}
    for name, phase in phases.items():
        out[f"{name}_cycles"] = phase["cycles"]
        out[f"{name}_seconds"] = phase["seconds"]
        out[f"{name}_cpu_seconds"] = phase["cpu_seconds"]
    return _rates(out, nodes)


def _rates(out: dict, nodes: int) -> dict:
    """Add the totals and the node-cycles/s of both phases, per wall and per CPU second."""
    out["cycles"] = out["csr_cycles"] + out["run_cycles"]
    for what in ("seconds", "cpu_seconds"):
        out[what] = out[f"csr_{what}"] + out[f"run_{what}"]
        per = "s" if what == "seconds" else "cpu_s"
        for phase in ("", "csr_", "run_", "idle_"):
            out[f"{phase}node_cycles_per_{per}"] = _rate(out.get(f"{phase}cycles", 0), nodes,
                                                        out.get(f"{phase}{what}", 0))
    return out


class _AmaranthEngine(Elaboratable):
    """An Amaranth :class:`AceEngine` wired to the signals :class:`AceSystem` made for one
    node's engine (engine port name -> Signal)."""

    def __init__(self, signals, config):
        self.signals, self.config = signals, config

    def elaborate(self, platform):
        m = Module()
        # Amaranth's simulator runs the clock-enable form of the ALU's gating (a derived
        # clock's edge would come a delta cycle after its source's registers had moved).
        m.submodules.engine = engine = AceEngine(self.config.replace(clock_gating="enable"))
        for path, member, port in engine.signature.flatten(engine):
            outer = self.signals["__".join(str(p) for p in path)]
            m.d.comb += port.eq(outer) if member.flow == In else outer.eq(port)
        return m


class _AmaranthSystem(AceSystem):
    """:class:`AceSystem` (``host="cocotb"``) with every Verilog part in its Amaranth form,
    so that ``amaranth.sim`` can run it."""

    memory_storage = "amaranth"

    def engine(self, signals):
        return _AmaranthEngine(signals, self.spec.config)


class _Enough(Exception):
    """The Amaranth run has reached its cycle budget."""


class _AxiLite:
    """AXI4-Lite master on one node's port for an Amaranth testbench: AW and W together,
    responses taken at once. Counts the clock ticks it waits and raises :class:`_Enough` at
    ``limit``."""

    def __init__(self, ctx, bus, limit):
        self.ctx, self.bus, self.ticks, self.limit = ctx, bus, 0, limit
        ctx.set(bus.wstrb, 0xF)
        ctx.set(bus.bready, 1)
        ctx.set(bus.rready, 1)

    async def _tick(self):
        if self.ticks >= self.limit:
            raise _Enough
        await self.ctx.tick()
        self.ticks += 1

    async def write32(self, addr: int, value: int) -> None:
        ctx, bus = self.ctx, self.bus
        ctx.set(bus.awaddr, addr)
        ctx.set(bus.wdata, value)
        ctx.set(bus.awvalid, 1)
        ctx.set(bus.wvalid, 1)
        while ctx.get(bus.awvalid) or ctx.get(bus.wvalid):
            aw, w = ctx.get(bus.awready), ctx.get(bus.wready)
            await self._tick()
            if aw:
                ctx.set(bus.awvalid, 0)
            if w:
                ctx.set(bus.wvalid, 0)
        while not ctx.get(bus.bvalid):
            await self._tick()
        await self._tick()

    async def read32(self, addr: int) -> int:
        ctx, bus = self.ctx, self.bus
        ctx.set(bus.araddr, addr)
        ctx.set(bus.arvalid, 1)
        while not ctx.get(bus.arready):
            await self._tick()
        await self._tick()
        ctx.set(bus.arvalid, 0)
        while not ctx.get(bus.rvalid):
            await self._tick()
        value = ctx.get(bus.rdata)
        await self._tick()
        return value


def amaranth_speed(system_name: str, *, cycles: int = 3000, nbytes: int = AMARANTH_BYTES,
                   log=None) -> dict:
    """Simulate the named system with ``amaranth.sim`` for at most ``cycles`` cycles: every
    node loads and starts an ``nbytes`` fp32 all-reduce (ACE mode); the run stops when every
    engine interrupts. Returns the setup time (elaboration and simulator compile) and the
    load and run phases' cycles, seconds and node-cycles/s."""
    from amaranth.sim import Simulator

    driver_spec = load_system(system_name)
    spec = dataclasses.replace(driver_spec, host="cocotb")
    cfg, nodes = spec.config, spec.topology.num_nodes
    prepared = prepare(CollectiveSpec(name="bench", collective="allreduce", bytes=nbytes,
                                      source="bench"), driver_spec, "ace")
    assembled, stage = prepared.assembled, prepared.stage_base
    period = 1e-9
    setup_start = time.perf_counter()
    dut = _AmaranthSystem(spec)
    sim = Simulator(dut)
    sim.add_clock(period)
    marks = {"loaded": [], "done": []}

    def node_bench(k):
        async def bench(ctx):
            bus = _AxiLite(ctx, getattr(dut, f"n{k}_axil"), cycles)
            host = AceHost(bus.write32, bus.read32, cfg, counter_names(cfg))
            try:
                await host.load_program(assembled.nodes[k], stage_base=stage)
                await host.set_irq_enable(done=True, error=True)
                await host.start()
                marks["loaded"].append((bus.ticks, time.perf_counter(), time.process_time()))
                while not ctx.get(getattr(dut, f"n{k}_irq")):
                    await bus._tick()
                marks["done"].append((bus.ticks, time.perf_counter(), time.process_time()))
            except _Enough:
                pass
        return bench

    for k in range(nodes):
        sim.add_testbench(node_bench(k))
    # The first delta cycle compiles nothing more: Simulator() has elaborated and compiled.
    setup = time.perf_counter() - setup_start
    if log:
        log(f"{system_name}: amaranth.sim ready in {setup:.1f} s; simulating up to "
            f"{cycles} cycles")
    start = (0, time.perf_counter(), time.process_time())
    sim.run()       # until every node is done, or at the cycle budget
    end = (cycles, time.perf_counter(), time.process_time())
    loaded = max(marks["loaded"]) if len(marks["loaded"]) == nodes else end
    done = max(marks["done"]) if len(marks["done"]) == nodes else end
    out = {"simulator": "amaranth", "system": system_name, "nodes": nodes,
           "workload": f"allreduce {nbytes} B fp32 (ace), memories zero",
           "finished": len(marks["done"]) == nodes, "setup_seconds": setup,
           "wall_seconds": end[1] - start[1]}
    for phase, (a, b) in (("csr", (start, loaded)), ("run", (loaded, done))):
        out[f"{phase}_cycles"] = b[0] - a[0]
        out[f"{phase}_seconds"] = b[1] - a[1]
        out[f"{phase}_cpu_seconds"] = b[2] - a[2]
    return _rates(out, nodes)


def format_bench(records: list[dict]) -> str:
    """A plain-text table of :func:`verilator_speed` / :func:`amaranth_speed` records, with
    the Verilator / Amaranth ratio per system."""
    head = (f"{'system':8} {'simulator':9} {'load cyc':>9} {'run cyc':>9} {'wall s':>7} "
            f"{'cpu s':>7} {'node-cyc/s':>11} {'load':>9} {'run':>9} {'per cpu-s':>11} "
            f"{'idle/cpu-s':>11}")
    lines = [head, "-" * len(head)]
    for r in records:
        idle = r.get("idle_node_cycles_per_cpu_s") or 0
        lines.append(f"{r['system']:8} {r['simulator']:9} {r['csr_cycles']:9,} "
                     f"{r['run_cycles']:9,} {r['seconds']:7.1f} {r['cpu_seconds']:7.1f} "
                     f"{r['node_cycles_per_s']:11,.0f} {r['csr_node_cycles_per_s']:9,.0f} "
                     f"{r['run_node_cycles_per_s']:9,.0f} {r['node_cycles_per_cpu_s']:11,.0f} "
                     + (f"{idle:11,.0f}" if idle else f"{'-':>11}"))
    slow = next((r for r in records if r["simulator"] == "amaranth"), None)
    for r in records:
        if slow and r["simulator"] == "verilator" and slow["node_cycles_per_cpu_s"]:
            wall = r["node_cycles_per_s"] / slow["node_cycles_per_s"]
            cpu = r["node_cycles_per_cpu_s"] / slow["node_cycles_per_cpu_s"]
            lines.append(f"{r['system']} on Verilator / {slow['system']} on Amaranth: "
                         f"{wall:,.0f}x node-cycles/s ({cpu:,.0f}x per CPU second)")
    return "\n".join(lines)
