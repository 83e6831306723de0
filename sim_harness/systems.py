"""Named systems for the harness, and system files.

A system is a :class:`~sim_harness.system.SystemSpec` with ``host="driver"`` and the balance
keys below: an engine configuration, a topology, the links'
and the memory's bandwidth and latency, and the memory's size. ``ace replay --system
NAME|FILE`` picks one; a file (TOML or JSON) has the keys (docs/harness.md, "Systems", has
the same table)

========================  =======================================================  ==============
key                       meaning, unit, allowed values                             default
========================  =======================================================  ==============
``config``                a named engine configuration, or a table of AceConfig     harness
                          fields (a table may name a ``base`` configuration)
``topology``              ``ring:8``, ``torus:4x4``, ``torus:4x4x4``,               ring:8
                          ``fully_connected:4``, ``switch:4``...
``link_bytes_per_cycle``  bandwidth of one link in one direction, bytes per cycle,  link_bytes
                          1/256 to the link's beat width ``link_bytes``
``link_latency``          cycles, 1 to 255                                          32
``mem_bytes_per_cycle``   memory bandwidth, bytes per cycle (reads and writes       2 x link rate
                          share it), 1/256 to 2 x ``mem_port_bytes``
``mem_ratio``             instead of ``mem_bytes_per_cycle``: memory bytes per      (32/16 = 2)
                          cycle per link byte per cycle per direction, so
                          ``mem_bytes_per_cycle = mem_ratio x link_bytes_per_cycle``
``mem_port_bytes``        the engine's memory port width, bytes per beat (the       the config's
                          configuration's ``mem_bytes``): 1, 2 or 4 x link_bytes
``links_per_node``        the engine's links (``num_links``), at least what the     the config's
                          topology needs (2 per torus dimension), at most 16
``mem_latency``           cycles, 2 to 126                                          32
``mem_bytes``             memory size per node, bytes, 64 KiB to 4 GiB              8 MiB
``bidirectional``         true: every ``ring`` phase of a collective runs as the     false
                          bidirectional ring (half of each chunk each way,
                          :mod:`ace.sw.compiler.bidirectional_ring`); rings and
                          tori only
========================  =======================================================  ==============

``mem_ratio`` is the balance of one node: its memory bandwidth over the bandwidth of ONE of its
links in ONE direction. A node that drives k links per direction at once (a bidirectional ring
drives 2, a unidirectional ring 1) has ``mem_ratio / k`` memory bytes per byte it sends.

The rates and ``bidirectional`` are run-time choices, not part of any build: the simulator's
reset sets the memory and link models' rates (:attr:`~sim_harness.system.SystemSpec.mem_rate`,
:attr:`~sim_harness.system.SystemSpec.link_rate`), and the replay's pre-flight compiles every
ring as the bidirectional ring on a bidirectional system
(:meth:`~sim_harness.system.SystemSpec.run_algorithm`).

The ``harness`` engine configuration is ``small`` at 1 GHz with four channels (a loader and three
communicating channels, see :mod:`ace.sw.compiler`), 256 KiB input and output SRAM buffers, 8 KiB
receive buffers per link and channel (4 KiB messages) and 2048 instructions per channel. With
three channels and 64 KiB buffers the default all-reduce took 1.19x its bound; with these,
1.08x (docs/harness.md). ``harness4`` is the same engine with four links (2D torus, 4-node
switch), ``harness6`` with six (3D torus), ``harness7`` with seven: a fully connected or switch
system of p nodes numbers one (virtual) link per peer (:class:`ace.sw.program.Topology`), so
``full8`` and ``switch8`` need p - 1 = 7; ``harness_bi`` (``ring8bi``) has seven channels, a
loader and three per direction of the bidirectional ring, and 16 SRAM banks for their 14 read
ports. Everything else is ``harness``'s, so their figures compare with ``ring8``'s.

:func:`pick_system` is the replay's choice when the user names no system: the trace's own
topology, or a ring of its nodes, unless the trace's algorithms need links that topology lacks;
then the named system of that many nodes with the fewest links that has them.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from numbers import Real
from pathlib import Path

from ace.config import NAMED_CONFIGS, AceConfig
from ace.errors import ConfigError
from ace.sw.program import ProgramError, Topology

from .system import SystemSpec

__all__ = ["HARNESS_CONFIG", "NAMED_SYSTEMS", "load_system", "DEFAULT_SYSTEM", "pick_system",
           "SystemChoice", "SYSTEM_KEYS", "MEM_PORT_RATIOS"]

HARNESS_CONFIG = NAMED_CONFIGS["small"].replace(
    name="harness", clock_mhz=1000.0, num_channels=4, input_buffer_bytes=256 << 10,
    output_buffer_bytes=256 << 10, rx_channel_beats=512, max_packet_bytes=4096,
    program_words=2048, mem_bytes=64, clock_gating="clock")

#: Every system-file key and its default (None: derived, see the module docstring).
SYSTEM_KEYS = {"config": "harness", "topology": "ring:8", "link_bytes_per_cycle": None,
               "link_latency": 32, "mem_bytes_per_cycle": None, "mem_ratio": None,
               "mem_port_bytes": None, "links_per_node": None, "mem_latency": 32,
               "mem_bytes": 8 << 20, "bidirectional": False}
#: Memory port widths a system may give the engine, in link beats.
MEM_PORT_RATIOS = (1, 2, 4)
_MIN_RATE = 1 / 256          # the rate ports' resolution (8 fractional bits)


def _fmt(value) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"


def _check_number(source, key, value, low, high, unit="", integer=False):
    """``value`` is a number (an integer if ``integer``) from ``low`` to ``high``."""
    kind = int if integer else Real
    if isinstance(value, bool) or not isinstance(value, kind) or not low <= value <= high:
        raise ConfigError(f"{source}: {key}: {value!r} is out of range; allowed: "
                          f"{'an integer' if integer else 'a number'} from {_fmt(low)} to "
                          f"{_fmt(high)}{unit}")


def _base_config(cfg, source: str) -> AceConfig:
    if isinstance(cfg, dict):
        return AceConfig.from_dict({"base": "small", "name": "custom", **cfg},
                                   source=f"{source}: config")
    if cfg == "harness":
        return HARNESS_CONFIG
    if cfg in NAMED_CONFIGS:
        return NAMED_CONFIGS[cfg]
    raise ConfigError(f"{source}: config: {cfg!r}; allowed: harness, "
                      f"{', '.join(NAMED_CONFIGS)} or a table of parameters")


def _engine_config(v: dict, topology: Topology, source: str) -> AceConfig:
    """The configuration with ``mem_port_bytes`` and ``links_per_node`` applied (each change
    named in the configuration's name, so that its builds stay apart)."""
    config = _base_config(v["config"], source)
    changes, name, keys = {}, config.name, []
    port, links = v["mem_port_bytes"], v["links_per_node"]
    if port is not None:
        allowed = [r * config.link_bytes for r in MEM_PORT_RATIOS]
        if isinstance(port, bool) or port not in allowed:
            raise ConfigError(f"{source}: mem_port_bytes: {port!r} is not allowed; allowed: "
                              f"{', '.join(map(str, allowed[:-1]))} or {allowed[-1]} bytes "
                              f"(1, 2 or 4 x link_bytes = {config.link_bytes})")
        if port != config.mem_bytes:
            changes["mem_bytes"], name = port, f"{name}_port{port}"
            keys.append("mem_port_bytes")
    if links is not None:
        _check_number(source, "links_per_node", links, topology.num_links, 16,
                      f" ({topology} needs {topology.num_links} links per node)", integer=True)
        if links != config.num_links:
            changes["num_links"], name = links, f"{name}_links{links}"
            keys.append("links_per_node")
    if not changes:
        return config
    try:
        return config.replace(name=name, **changes)
    except ConfigError as error:
        raise ConfigError(f"{source}: {' and '.join(keys)}: {error}") from None


def _mem_rate(v: dict, config: AceConfig, link_rate: float, source: str) -> float | None:
    """Memory bytes per cycle from ``mem_bytes_per_cycle`` or ``mem_ratio`` (None: the
    system's default, :attr:`~sim_harness.system.SystemSpec.mem_rate`)."""
    rate, ratio, high = v["mem_bytes_per_cycle"], v["mem_ratio"], 2 * config.mem_bytes
    if rate is not None and ratio is not None:
        raise ConfigError(f"{source}: mem_bytes_per_cycle and mem_ratio both given; allowed: "
                          "one of them (mem_bytes_per_cycle = mem_ratio x link_bytes_per_cycle)")
    if ratio is not None:
        _check_number(source, "mem_ratio", ratio, _MIN_RATE / link_rate, high / link_rate,
                      unit=f" (memory bytes per cycle per link byte per cycle per direction: "
                           f"mem_ratio x link_bytes_per_cycle ({link_rate:g}) is the memory "
                           f"bandwidth, at most 2 x mem_port_bytes = {high})")
        return ratio * link_rate
    if rate is not None:
        _check_number(source, "mem_bytes_per_cycle", rate, _MIN_RATE, high,
                      unit=f" bytes per cycle (2 x mem_port_bytes = {high})")
    return rate


def _make(values: dict, source: str) -> SystemSpec:
    unknown = sorted(set(values) - set(SYSTEM_KEYS))
    if unknown:
        raise ConfigError(f"{source}: unknown key {unknown[0]!r}; allowed: "
                          f"{', '.join(SYSTEM_KEYS)}")
    v = {**SYSTEM_KEYS, **values}
    try:
        topology = Topology.parse(str(v["topology"]))
    except ProgramError as error:
        raise ConfigError(f"{source}: {error}") from None
    config = _engine_config(v, topology, source)
    for key, low, high, unit in (("link_latency", 1, 255, " cycles"),
                                 ("mem_latency", 2, 126, " cycles"),
                                 ("mem_bytes", 1 << 16, 1 << 32, " bytes")):
        _check_number(source, key, v[key], low, high, unit, integer=True)
    link_rate = v["link_bytes_per_cycle"]
    if link_rate is not None:
        _check_number(source, "link_bytes_per_cycle", link_rate, _MIN_RATE, config.link_bytes,
                      unit=f" bytes per cycle (the link's beat width link_bytes = "
                           f"{config.link_bytes})")
    mem_rate = _mem_rate(v, config, link_rate or config.link_bytes, source)
    if not isinstance(v["bidirectional"], bool):
        raise ConfigError(f"{source}: bidirectional: {v['bidirectional']!r}; allowed: true or "
                          "false")
    if v["bidirectional"] and topology.kind != "torus":
        raise ConfigError(f"{source}: bidirectional: true needs a ring or torus topology; "
                          f"{topology} has no ring to run both ways")
    try:
        return SystemSpec(config, topology, link_latency=v["link_latency"],
                          mem_bytes=v["mem_bytes"], mem_latency=v["mem_latency"],
                          mem_bytes_per_cycle=mem_rate, host="driver",
                          link_bytes_per_cycle=link_rate, bidirectional=v["bidirectional"])
    except ValueError as error:
        raise ConfigError(f"{source}: {error}") from None


# The 4-link engine of the 2D-torus and 4-node switch systems, the 6-link one of the 3D torus,
# the 7-link one of the 8-node fully connected and switch systems.
_HARNESS4 = {**HARNESS_CONFIG.to_dict(), "name": "harness4", "num_links": 4}
_HARNESS6 = {**HARNESS_CONFIG.to_dict(), "name": "harness6", "num_links": 6}
_HARNESS7 = {**HARNESS_CONFIG.to_dict(), "name": "harness7", "num_links": 7}
# The bidirectional ring's engine: a loader and three communicating channels per direction,
# and 16 SRAM banks so that its 14 read ports still stream one word per cycle each.
_HARNESS_BI = {**HARNESS_CONFIG.to_dict(), "name": "harness_bi", "num_channels": 7,
               "sram_banks": 16}

NAMED_SYSTEMS: dict[str, dict] = {
    "ring4": {"topology": "ring:4"},
    "ring8": {"topology": "ring:8"},
    "ring8bi": {"topology": "ring:8", "bidirectional": True, "config": _HARNESS_BI},
    "ring16": {"topology": "ring:16"},
    "torus4x2": {"topology": "torus:4x2", "config": _HARNESS4},
    "torus4x4": {"topology": "torus:4x4", "config": _HARNESS4},
    "torus3x3x3": {"topology": "torus:3x3x3", "config": _HARNESS6},
    "torus4x4x4": {"topology": "torus:4x4x4", "config": _HARNESS6},
    "switch4": {"topology": "switch:4", "config": _HARNESS4},
    "full8": {"topology": "fully_connected:8", "config": _HARNESS7},
    "switch8": {"topology": "switch:8", "config": _HARNESS7},
}
DEFAULT_SYSTEM = "ring8"


def load_system(name_or_path: str | None = None, *, topology: str | None = None,
                overrides: dict | None = None) -> SystemSpec:
    """A named system or a system file; ``topology`` overrides the system's topology (the
    replay passes the trace's when the user names no system), and ``overrides`` (system-file
    keys, :data:`SYSTEM_KEYS`) any other key, checked as in a file. A ``mem_ratio`` override
    replaces the system's ``mem_bytes_per_cycle`` (and the other way round)."""
    name_or_path = name_or_path or DEFAULT_SYSTEM
    if name_or_path in NAMED_SYSTEMS:
        values, source = dict(NAMED_SYSTEMS[name_or_path]), f"system {name_or_path}"
    else:
        path = Path(name_or_path)
        if not path.exists():
            raise ConfigError(f"system: {name_or_path!r} is neither a named system "
                              f"({', '.join(NAMED_SYSTEMS)}) nor a file")
        try:
            text = path.read_text()
            values = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
        except (OSError, tomllib.TOMLDecodeError, json.JSONDecodeError) as error:
            raise ConfigError(f"{path}: not a valid system file: {error}") from None
        if not isinstance(values, dict):
            raise ConfigError(f"{path}: expected a table of system keys")
        source = str(path)
    if topology:
        values["topology"] = topology
    if overrides:
        for rate, other in (("mem_ratio", "mem_bytes_per_cycle"),
                            ("mem_bytes_per_cycle", "mem_ratio")):
            if rate in overrides:
                values.pop(other, None)
        values.update(overrides)
        source += " with " + ", ".join(f"{k} = {v!r}" for k, v in overrides.items())
    return _make(values, source)


@dataclass(frozen=True)
class SystemChoice:
    """What :func:`pick_system` chose: ``system``, the named system's ``name`` (None: the
    default for the trace), and ``reason``, why the default topology did not do (None if it
    did)."""
    system: SystemSpec
    name: str | None = None
    default: str | None = None
    reason: str | None = None

    def describe(self) -> str | None:
        """One line for the replay's output, or None when the default was kept."""
        if self.reason is None:
            return None
        return (f"the default topology {self.default} lacks links the trace needs "
                f"({self.reason}); using the smallest named system that has them: {self.name} "
                f"({self.system.topology}, engine {self.system.config.name})")


def pick_system(trace) -> SystemChoice:
    """The system to replay ``trace`` on when the user names none: the trace's topology (from
    its network file; the named system of that topology if there is one, for its engine) or,
    if it has none, ``ring:N``, with the ``harness`` engine. When the
    trace's algorithms need links a ring lacks (an MSCCL all-pairs algorithm, a ``direct``
    collective...), the named system of N nodes with the fewest links that has them; if none
    has, :class:`ConfigError` naming the system-file keys to write."""
    nodes = trace.nodes
    if trace.system.topology:
        for name in NAMED_SYSTEMS:
            if str(Topology.parse(NAMED_SYSTEMS[name]["topology"])) == \
                    str(Topology.parse(trace.system.topology)):
                return SystemChoice(load_system(name), name)
        return SystemChoice(load_system(None, topology=trace.system.topology))
    if not nodes:
        return SystemChoice(load_system(None))
    default = load_system(None, topology=f"ring:{nodes}")
    missing = _missing_links(trace, default)
    if missing is None:
        return SystemChoice(default)
    candidates = sorted((spec.config.num_links, k, name, spec)
                        for k, (name, spec) in enumerate(
                            (name, load_system(name)) for name in NAMED_SYSTEMS)
                        if spec.topology.num_nodes == nodes)
    for _, _, name, spec in candidates:
        if _missing_links(trace, spec) is None:
            return SystemChoice(spec, name, f"ring:{nodes}", missing)
    tried = ", ".join(name for _, _, name, _ in candidates)
    tried = f"{tried} tried; " if tried else ""
    raise ConfigError(f"{trace.path}: the trace needs links that no named system of {nodes} "
                      f"nodes has ({tried}on ring:{nodes}: {missing}); write a system "
                      f"file (--system FILE.toml) with the keys topology = "
                      f"\"fully_connected:{nodes}\" (or "
                      f"\"switch:{nodes}\") and config = {{ base = \"small\", num_links = "
                      f"{max(1, nodes - 1)} }}")


def _missing_links(trace, system: SystemSpec) -> str | None:
    """Why ``system`` cannot carry one of the trace's collectives (the first found), or
    None. An MSCCL algorithm needs a link for every send/receive peer; a compiled collective
    needs what its algorithm's compile needs (checked once per kind, at its smallest size)."""
    smallest: dict = {}
    for spec in trace.collectives:
        key = (spec.collective, spec.algorithm, spec.dtype, spec.op, spec.msccl_xml)
        if key not in smallest or spec.bytes < smallest[key].bytes:
            smallest[key] = spec
    for spec in smallest.values():
        problem = (_msccl_missing(spec, system.topology) if spec.collective == "msccl"
                   else _compile_missing(spec, system))
        if problem:
            return problem
    return None


def _msccl_missing(spec, topology: Topology) -> str | None:
    from ace.sw.msccl import read_msccl

    algorithm = read_msccl(spec.msccl_xml)
    if algorithm.ngpus != topology.num_nodes:
        return f"the algorithm has {algorithm.ngpus} gpus"
    for gpu in algorithm.gpus:
        for tb in gpu.tbs.values():
            for peer in {tb.send, tb.recv} - {-1}:
                try:
                    topology.send_link(gpu.id, peer)
                except ProgramError as error:
                    return f"{spec.msccl_xml}: {error}"
    return None


def _compile_missing(spec, system: SystemSpec) -> str | None:
    from ace.layouts import DTYPE_BYTES
    from ace.sw.compiler import compile_collective
    from ace.sw.program import dtype_from_name

    dtype = dtype_from_name(spec.dtype)
    algorithm = system.run_algorithm(spec.algorithm if isinstance(spec.algorithm, str)
                                     else list(spec.algorithm))
    try:
        compile_collective(spec.collective, max(1, spec.bytes // DTYPE_BYTES[dtype]),
                           topology=system.topology, algorithm=algorithm, dtype=dtype,
                           op=spec.op, mode="ace", config=system.config, check=False)
    except ProgramError as error:
        return f"{spec.name}: {error}"
    return None
