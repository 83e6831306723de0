"""Build a multi-node ACE system with Verilator, once per system, and drive it from Python at
coarse grain only.

Two builds make a system's simulator. :func:`build_engine` Verilates the engine (its
simulation wrapper, :func:`~sim_harness.system.engine_sim_verilog`) once per engine
configuration into a C++ library, ``build/harness/engine_<config>-<hash>[-waves]/``, that every
system of that configuration links: ``ring4``, ``ring8``, ``ring16`` share one, the 4-link
tori and the switch another. :func:`build_driver` then generates the system's fabric (the
memory, link and switch models, :class:`~sim_harness.system.AceSystem` with
``host="driver"``), a ``system_ports.h`` that copies each engine's ports to and from the
fabric's, and compiles both with the C++ driver (``sim_harness/driver.cpp``) and the engine
library into one executable, in ``build/harness/<system>-<hash>[-waves]/``. Each build is
reused while the hash of its sources and Verilator flags is unchanged. Link and memory rates
and latencies are inputs of the build, not part of it, so one build serves every rate and
latency.

:class:`SystemSimulator` runs that executable as a child process and speaks its line protocol
(see ``driver.cpp``): memory images go in and out through files (no simulated cycles), CSR
accesses go in batches (all nodes at once), and :meth:`SystemSimulator.run` lets the system run
until every engine raises its interrupt, sampling counters every ``interval`` cycles. Python is
never on the per-cycle path.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import subprocess
import tempfile
from pathlib import Path

from ace.regmap import CSR_ADDR_BITS
from ace.sw.host import AceHost
from ace.flow.toolchain import build_lock, prepare_environment

from .link import bytes_per_cycle_q8, share_q16
from .speed import record_speed
from .fabric import system_sources
from .system import SystemSpec, engine_sources, fabric_ports, link_partners

__all__ = ["SimulatorError", "build_engine", "build_driver", "SystemSimulator",
           "HARNESS_BUILD_ROOT", "run_hosts"]

REPO = Path(__file__).resolve().parent.parent
HARNESS_BUILD_ROOT = Path(os.environ.get("ACE_BUILD_DIR", REPO / "build")) / "harness"
DRIVER_SOURCE = Path(__file__).with_name("driver.cpp")
#: Verilator options of both builds (measured: docs/benchmarks.md, Simulator speed). Functions
#: of at most 1,000 statements (``--output-split-cfuncs``): gcc's -O2 is superlinear in a
#: function's size, and the engine library compiled in 59 instead of 93 CPU seconds, with the
#: same replay speed (docs/benchmarks.md, Test suite).
VERILATOR_FLAGS = ["--cc", "--build", "-O3", "--x-assign", "fast", "--x-initial", "fast",
                   "--noassert", "-Wno-fatal", "-Wno-lint", "-Wno-style", "-CFLAGS", "-std=c++17",
                   "--output-split-cfuncs", "1000", "-MAKEFLAGS", "OPT_FAST=-O2 OPT_SLOW=-O0"]
#: The make variables of both builds (``-MAKEFLAGS`` above), for :func:`_remake`.
MAKE_VARIABLES = dict(item.split("=", 1) for item in
                      VERILATOR_FLAGS[VERILATOR_FLAGS.index("-MAKEFLAGS") + 1].split())
ENGINE_FLAGS = VERILATOR_FLAGS + ["--prefix", "Vengine"]
#: gcc profile-guided optimisation of the engine library (``pgo=True``): compiled instrumented,
#: trained on short replays (:func:`sim_harness.replay.build_system`), compiled again with the
#: profile.
PGO_GENERATE = "-fprofile-generate -fprofile-update=single"
PGO_USE = "-fprofile-use -fprofile-partial-training -Wno-missing-profile"
SYSTEM_FLAGS = VERILATOR_FLAGS + ["--exe", "--prefix", "Vtop", "-o", "ace_driver"]
AXIL_INPUTS = ("awaddr", "awvalid", "wdata", "wvalid", "bready", "araddr", "arvalid", "rready")
AXIL_OUTPUTS = ("awready", "wready", "bvalid", "bresp", "arready", "rvalid", "rdata", "rresp")


class SimulatorError(RuntimeError):
    """The driver failed: a build error, an AXI4-Lite error response or a dead process."""


def _port(name: str) -> str:
    """The C++ member Verilator makes of a top-level port (it escapes ``__``)."""
    return name.replace("__", "___05F")


def speed_key(system_name: str, pgo: bool = False) -> str:
    """The name a system's speed is recorded under: its own, ``-pgo`` added for the
    profile-guided build."""
    return system_name + ("-pgo" if pgo else "")


def speed_file() -> Path:
    """Where the simulators record their speed (:mod:`sim_harness.speed`)."""
    return HARNESS_BUILD_ROOT / "speed.json"


def build_key_spec(spec: SystemSpec) -> SystemSpec:
    """The spec a build is made from: run-time values (rates, latencies) normalised away."""
    return dataclasses.replace(spec, link_latency=1, mem_latency=2, mem_bytes_per_cycle=None,
                               link_bytes_per_cycle=None, bidirectional=False, host="driver")


def ports_header(spec: SystemSpec) -> str:
    """``system_ports.h``: node and link counts, the copies of the engines' ports to and from
    the fabric's, and accessors of the fabric's counters."""
    p = spec.topology.num_nodes
    links = sorted(link_partners(spec.topology))
    ports = fabric_ports(spec.config)
    lines = [f"// Generated by sim_harness/simulator.py for {spec.name}.",
             f"#define NODES {p}", f"#define MEM_BYTES {spec.mem_bytes}ULL",
             f"#define LINKS {len(links)}",
             "static const int LINK_NODE[] = {" + ", ".join(str(n) for n, _ in links) + "};",
             "static const int LINK_INDEX[] = {" + ", ".join(str(l) for _, l in links) + "};"]

    def copies(fn, body):
        out = [f"static inline void {fn}(Vtop* t, Vengine* const* e) {{"]
        for k in range(p):
            out += [f"  {body(k, _port(name))}" for name, output, _ in ports
                    if output == (fn != "to_engines")]
        return out + ["}"]

    lines += copies("to_fabric", lambda k, n: f"t->n{k}_{n} = e[{k}]->{n};")
    lines += copies("to_engines", lambda k, n: f"e[{k}]->{n} = t->n{k}_{n};")

    def table(fn, names):
        out = [f"static inline uint64_t {fn}(Vtop* t, int i) {{", "  switch (i) {"]
        out += [f"  case {i}: return t->{name};" for i, name in enumerate(names)]
        return out + ["  }", "  return 0;", "}"]

    lines += table("mem_read_bytes", [f"n{k}_mem_read_bytes" for k in range(p)])
    lines += table("mem_write_bytes", [f"n{k}_mem_write_bytes" for k in range(p)])
    lines += table("link_bytes", [f"n{n}_link{l}_bytes" for n, l in links])
    lines += ["static inline void set_rates(Vtop* t, uint32_t mem_q8, uint32_t bg_q16, "
              "uint32_t mem_lat, uint32_t link_q8, uint32_t link_lat) {",
              "  t->mem_bytes_per_cycle_q8 = mem_q8; t->mem_background_q16 = bg_q16;",
              "  t->mem_latency = mem_lat; t->link_bytes_per_cycle_q8 = link_q8;",
              "  t->link_latency = link_lat;", "}"]
    return "\n".join(lines) + "\n"


#: The harness's own files that the system's Verilog and the driver are made of; the first
#: also makes the engine's simulation wrapper.
HARNESS_GENERATORS = ("system.py", "fabric.py", "memory.py", "link.py", "switch.py", "sim_ram.py",
                      "driver.cpp")


def generator_sources(harness=HARNESS_GENERATORS) -> list[Path]:
    """The files a driver build is made of: every module under ``ace/hw/``, the shared root
    modules of ``ace/`` (definitions both layers use; the ``ace`` command aside) and the
    harness's generator files ``harness``. The software stack (``ace/sw/``) and the flows
    (``ace/flow/``) make no hardware, so editing them keeps every build."""
    ace_dir, here = REPO / "ace", REPO / "sim_harness"
    root = [path for path in sorted(ace_dir.glob("*.py")) if path.name != "cli.py"]
    return root + sorted((ace_dir / "hw").rglob("*.py")) + [here / n for n in harness]


def _digest(record: dict, sources: list[Path]) -> str:
    h = hashlib.sha256(json.dumps(record).encode())
    for path in sources:
        h.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:12]


def engine_build_key(config, waves: bool = False) -> str:
    """Hash of what an engine library is made of: the configuration, the hardware sources,
    the wrapper's generator (``system.py``) and the Verilator flags."""
    return _digest({"config": config.to_dict(), "flags": ENGINE_FLAGS, "waves": waves},
                   generator_sources(HARNESS_GENERATORS[:1]))


def build_key(spec: SystemSpec, waves: bool = False) -> str:
    """Hash of what a build depends on: the system's configuration (rates and latencies
    aside), its engine library's key, the generator sources and the Verilator flags.
    Computing it needs no Verilog, so a cached build starts at once."""
    spec = build_key_spec(spec)
    return _digest({"config": spec.config.to_dict(), "topology": str(spec.topology),
                    "mem_bytes": spec.mem_bytes, "flags": SYSTEM_FLAGS, "waves": waves,
                    "engine": engine_build_key(spec.config, waves),
                    "ports": ports_header(spec)}, generator_sources())


def _verilate(build_dir: Path, texts: dict[str, str], args: list[str], what: str,
              jobs: int | None, log) -> None:
    """Write ``texts`` into ``build_dir`` and run Verilator on them with ``args``."""
    build_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in texts.items():
        (build_dir / name).write_text(text)
        paths.append(build_dir / name)
    order = (".v", ".sv", ".cpp")
    sources = sorted((str(p) for p in paths if p.suffix in order),
                     key=lambda p: order.index(Path(p).suffix))
    jobs = jobs or os.cpu_count() or 1
    cmd = ["verilator", *args, "-j", str(jobs), "--Mdir", str(build_dir / "obj"), *sources]
    if log:
        log(f"building {what} with Verilator (log in {build_dir / 'build.log'})")
    with open(build_dir / "build.log", "w") as out:
        result = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT,
                                env=prepare_environment(), cwd=build_dir)
    if result.returncode != 0:
        tail = (build_dir / "build.log").read_text().splitlines()[-15:]
        raise SimulatorError(f"Verilator build of {what} failed; {build_dir / 'build.log'}:\n"
                             + "\n".join(tail))


def _engine_dir(config, variant: str) -> Path:
    digest = engine_build_key(config, variant == "waves")
    return HARNESS_BUILD_ROOT / f"engine_{config.name}-{digest}{'-' + variant if variant else ''}"


def _verilate_engine(config, build_dir: Path, variant: str, jobs, log) -> None:
    extra = {"waves": ["--trace-fst"], "pgo": ["-CFLAGS", PGO_GENERATE]}.get(variant, [])
    _verilate(build_dir, engine_sources(config),
              ENGINE_FLAGS + extra + ["--top-module", f"ace_engine_{config.name}_sim"],
              f"engine {config.name}{' (instrumented)' if variant == 'pgo' else ''} (once per "
              "engine configuration)", jobs, log)


def build_engine(config, *, waves: bool = False, jobs: int | None = None, log=None) -> Path:
    """Compile the engine of ``config`` into a library (``obj/Vengine__ALL.a`` and its
    headers) unless one with the same :func:`engine_build_key` exists; return ``obj``."""
    variant = "waves" if waves else ""
    build_dir = _engine_dir(config, variant)
    with build_lock(build_dir.with_suffix(".lock")):
        if not (build_dir / "ace_build.stamp").exists():
            _verilate_engine(config, build_dir, variant, jobs, log)
            (build_dir / "ace_build.stamp").write_text(build_dir.name)
    return build_dir / "obj"


def _system_args(spec: SystemSpec, build_dir: Path, engine: Path,
                 extra_cflags: str = "") -> list[str]:
    """Verilator options of ``spec``'s build in ``build_dir``, linked with the engine library
    in ``engine``."""
    return ["--top-module", spec.name, "-CFLAGS",
            f"-I{build_dir} -I{engine}{extra_cflags}", "-LDFLAGS", str(engine / "Vengine__ALL.a")]


def _remake(obj: Path, makefile: str, remove: list[str], **variables: str) -> None:
    """Delete the files ``remove`` (globs) in ``obj`` and run its ``makefile`` again with
    :data:`MAKE_VARIABLES` and ``variables`` overriding the ones Verilator wrote; raise
    :class:`SimulatorError` if make fails."""
    for pattern in remove:
        for path in obj.glob(pattern):
            path.unlink()
    cmd = ["make", "-C", str(obj), "-f", makefile, f"-j{os.cpu_count() or 1}",
           *(f"{name}={value}" for name, value in {**MAKE_VARIABLES, **variables}.items())]
    with open(obj.parent / "build.log", "a") as out:
        result = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT,
                                env=prepare_environment())
    if result.returncode:
        raise SimulatorError(f"{makefile} in {obj} failed; see {obj.parent / 'build.log'}")


def build_driver(spec: SystemSpec, *, waves: bool = False, pgo: bool = False, train=None,
                 jobs: int | None = None, log=None) -> Path:
    """Compile the system's fabric and the driver, linked with the engine library
    (:func:`build_engine`), unless a build with the same :func:`build_key` exists; return
    the executable. ``log(text)`` receives progress lines (the Verilator output goes to
    ``build.log``).

    ``pgo``: a separate build (``-pgo`` folders) whose engine library gcc compiles with a
    profile of this system's replays, ``train(spec, exe, log)`` run on an instrumented driver
    (:func:`sim_harness.replay.build_system` gives it): the first ``pgo`` build of an engine
    configuration compiles the library twice, the fabric once, and trains for a few seconds;
    measured in docs/benchmarks.md. Waveforms and ``pgo`` are separate builds; not both."""
    if waves and pgo:
        raise ValueError("build_driver: waves and pgo are separate builds; choose one")
    variant = "waves" if waves else "pgo" if pgo else ""
    spec = build_key_spec(spec)
    engine_dir = _engine_dir(spec.config, variant)
    engine = engine_dir / "obj"
    digest = build_key(spec, waves)
    build_dir = HARNESS_BUILD_ROOT / f"{spec.name}-{digest}{'-' + variant if variant else ''}"
    exe = build_dir / "obj" / "ace_driver"
    flags = SYSTEM_FLAGS + (["--trace-fst"] if waves else [])
    what = f"{spec.name} (once per system)"
    if not pgo:
        build_engine(spec.config, waves=waves, jobs=jobs, log=log)
    with build_lock(engine_dir.with_suffix(".lock")) if pgo else contextlib.nullcontext():
        with build_lock(build_dir.with_suffix(".lock")):
            if exe.exists() and (build_dir / "ace_build.stamp").exists():
                return exe
            texts = {**system_sources(spec), "system_ports.h": ports_header(spec),
                     "driver.cpp": DRIVER_SOURCE.read_text()}
            if pgo and not (engine_dir / "ace_build.stamp").exists():
                if train is None:
                    raise ValueError("build_driver: an untrained pgo build needs train")
                # Instrumented engine and driver, a training run, then the engine again.
                _verilate_engine(spec.config, engine_dir, "pgo", jobs, log)
                _verilate(build_dir, texts, flags + _system_args(spec, build_dir, engine,
                          " -DACE_PGO_GENERATE") + ["-LDFLAGS", "-fprofile-generate"],
                          f"{what}, instrumented", jobs, log)
                train(spec, exe, log)
                _remake(engine, "Vengine.mk", ["*.o", "*.a", "*.gch"],
                        VM_USER_CFLAGS=f"-std=c++17 {PGO_USE}")
                (engine_dir / "ace_build.stamp").write_text(engine_dir.name)
                _remake(build_dir / "obj", "Vtop.mk", ["driver.o", "ace_driver"],
                        VM_USER_CFLAGS=f"-std=c++17 -I{build_dir} -I{engine}",
                        VM_USER_LDLIBS=str(engine / "Vengine__ALL.a"))
            else:
                _verilate(build_dir, texts, flags + _system_args(spec, build_dir, engine), what,
                          jobs, log)
            (build_dir / "ace_build.stamp").write_text(digest)
    return exe


class SystemSimulator:
    """A running system. Use as a context manager; see the module docstring.

    Parameters
    ----------
    spec : SystemSpec; its link/memory rates and latencies are applied by :meth:`reset`.
    waves : record an FST waveform to ``waves_path`` (a separate build).
    pgo : run the profile-guided build (:func:`build_driver`).
    exe : a driver already built for ``spec`` (by :func:`build_driver` with the same
        ``waves``/``pgo``), instead of building or finding it here.
    """

    def __init__(self, spec: SystemSpec, *, waves: bool = False, pgo: bool = False,
                 waves_path: str | Path | None = None, log=None, exe: Path | None = None):
        self.spec = spec
        self.nodes = spec.topology.num_nodes
        self.links = sorted(link_partners(spec.topology))
        self.exe = exe or build_driver(spec, waves=waves, pgo=pgo, log=log)
        #: The name this run's speed is recorded under (:mod:`sim_harness.speed`); None: not.
        self.speed_key = speed_key(spec.name, pgo)
        self.proc = subprocess.Popen([str(self.exe)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1)
        self.tmp = tempfile.TemporaryDirectory(prefix="ace-sim-")
        self.posted: list[tuple] = []       # CSR writes of host coroutines, not yet sent
        if waves:
            path = Path(waves_path or self.exe.parent.parent / "waves.fst")
            self._command(f"waves {path}")
            self.waves_path = path

    # -- protocol --------------------------------------------------------------------------------

    def _send(self, text: str) -> None:
        if self.proc.poll() is not None:
            raise SimulatorError(f"the simulator exited with status {self.proc.returncode}")
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def _reply(self) -> str:
        line = self.proc.stdout.readline()
        if not line:
            raise SimulatorError(f"the simulator exited (status {self.proc.wait()})")
        line = line.rstrip("\n")
        if line.startswith("err"):
            raise SimulatorError(line[4:])
        return line

    def _command(self, text: str) -> list[str]:
        self._send(text)
        return self._reply().split()[1:]

    def cpu_seconds(self) -> float:
        """CPU seconds the driver process has used so far (Linux ``/proc``)."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        """Record the run's speed (:mod:`sim_harness.speed`) and stop the driver."""
        if self.proc.poll() is None:
            try:
                if self.speed_key:
                    record_speed(speed_file(), self.speed_key, self.cycle, self.nodes,
                                 self.cpu_seconds())
                self._send("quit")
                self.proc.wait(timeout=30)
            except (SimulatorError, BrokenPipeError, subprocess.TimeoutExpired):
                self.proc.kill()
        self.tmp.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- operations ------------------------------------------------------------------------------

    def reset(self, *, background_share: float = 0.0) -> None:
        """Apply the spec's rates and latencies (and a background share), then reset."""
        spec = self.spec
        self._command(f"rates {bytes_per_cycle_q8(spec.mem_rate)} {share_q16(background_share)} "
                      f"{spec.mem_latency} {bytes_per_cycle_q8(spec.link_rate)} "
                      f"{spec.link_latency}")
        self._command("reset 5")

    @property
    def cycle(self) -> int:
        return int(self._command("cycle")[0])

    def load(self, node: int, addr: int, data: bytes) -> None:
        """Write ``data`` into node memory at byte ``addr`` (a multiple of 4)."""
        path = Path(self.tmp.name) / "load.bin"
        path.write_bytes(bytes(data))
        self._command(f"load {node} {addr} {path}")

    def dump(self, node: int, addr: int, length: int) -> bytes:
        path = Path(self.tmp.name) / "dump.bin"
        base = addr - addr % 4
        self._command(f"dump {node} {base} {length + addr - base} {path}")
        return path.read_bytes()[addr - base:]

    def csr(self, ops: list[tuple]) -> list[int]:
        """Run AXI4-Lite accesses ``(node, "w", addr, data)`` / ``(node, "r", addr)``, in order
        per node and all nodes at once; return the values read, in order."""
        lines = [f"csr {len(ops)}"]
        for op in ops:
            lines.append(f"{op[0]} w {op[2]} {op[3]}" if op[1] == "w" else f"{op[0]} r {op[2]}")
        self._send("\n".join(lines))
        return [int(v) for v in self._reply().split()[2:]]

    def flush(self) -> None:
        """Send the host writes still posted."""
        ops, self.posted = self.posted, []
        if ops:
            self.csr(ops)

    def run(self, *, timeout: int, interval: int, registers=()) -> dict:
        """Run until every node's irq is high or ``timeout`` cycles pass, sampling every
        ``interval`` cycles. Returns ``{"done", "cycle", "samples"}``; each sample is
        ``{"cycle", "mem_read_bytes": [node], "mem_write_bytes": [node],
        "link_bytes": [per used link, in :attr:`links` order], "registers": [[node][reg]]}``
        (counters cumulative since reset; register values read a few cycles after the
        sample's cycle)."""
        regs = list(registers)
        self._send(f"run {timeout} {interval} {len(regs)} " + " ".join(str(r) for r in regs))
        header = self.proc.stdout.readline().split()
        if not header or header[0] != "samples":
            raise SimulatorError(" ".join(header)[4:] or "the simulator exited")
        p, nl = self.nodes, len(self.links)
        samples = []
        for _ in range(int(header[1])):
            v = [int(x) for x in self.proc.stdout.readline().split()]
            regs_flat = v[1 + 2 * p + nl:]
            samples.append({
                "cycle": v[0], "mem_read_bytes": v[1:1 + p],
                "mem_write_bytes": v[1 + p:1 + 2 * p], "link_bytes": v[1 + 2 * p:1 + 2 * p + nl],
                "registers": [regs_flat[k * len(regs):(k + 1) * len(regs)] for k in range(p)]})
        tail = self._reply().split()
        return {"cycle": int(tail[1]), "done": tail[2] == "done", "samples": samples}

    def hosts(self, config, counter_names) -> list[AceHost]:
        """One :class:`AceHost` per node whose writes are posted into a batch; run their
        coroutines with :func:`run_hosts`."""
        buses = [_PostedBus(self, k) for k in range(self.nodes)]
        return [AceHost(bus.write32, bus.read32, config, counter_names) for bus in buses]


class _Read:
    """What a host coroutine yields to :func:`run_hosts` for one read."""

    def __init__(self, node: int, addr: int):
        self.node, self.addr = node, addr

    def __await__(self):
        return (yield self)


class _PostedBus:
    """write32 queues the access in the simulator's batch; read32 suspends the coroutine."""

    def __init__(self, sim: SystemSimulator, node: int):
        self.sim, self.node = sim, node

    async def write32(self, addr: int, value: int) -> None:
        if not 0 <= addr < 1 << CSR_ADDR_BITS:
            raise ValueError(f"CSR address {addr:#x} outside the window")
        self.sim.posted.append((self.node, "w", addr, value))

    async def read32(self, addr: int) -> int:
        return await _Read(self.node, addr)


def run_hosts(sim: SystemSimulator, coroutines) -> list:
    """Run one host coroutine per node together: their writes are posted, and whenever every
    coroutine waits on a read (or has finished), one CSR batch carries all pending writes and
    those reads. Returns the coroutines' results."""
    coroutines = list(coroutines)
    results = [None] * len(coroutines)
    values = [None] * len(coroutines)
    active = set(range(len(coroutines)))
    while True:
        reads = []
        for i in sorted(active):
            try:
                request = coroutines[i].send(values[i])
            except StopIteration as stop:
                results[i] = stop.value
                active.discard(i)
                continue
            reads.append((i, request))
        ops, sim.posted = sim.posted, []
        ops += [(req.node, "r", req.addr) for _, req in reads]
        if ops:
            got = sim.csr(ops)
            for (i, _), value in zip(reads, got):
                values[i] = value
        if not active:
            return results

