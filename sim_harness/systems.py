"""Named systems for the harness, and system files.

A system is a :class:`~sim_harness.system.SystemSpec` with ``host="driver"``: an engine
configuration, a topology, link latency, and the memory model's size, latency and bandwidth.
``ace replay --system NAME|FILE`` picks one; a file (TOML or JSON) has the keys

=====================  ============================================================  =========
key                    meaning                                                        default
=====================  ============================================================  =========
``config``             a named engine configuration, or a table of AceConfig fields   harness
                       (a table may name a ``base`` configuration)
``topology``           ``ring:8``, ``torus:4x2``, ``fully_connected:4``...           ring:8
``link_latency``       cycles, 1 to 255                                               32
``mem_latency``        cycles, 2 to 126                                               32
``mem_bytes``          memory per node, bytes                                         8 MiB
``mem_bytes_per_cycle``  memory bandwidth (reads and writes share it)                 2 x mem_bytes
=====================  ============================================================  =========

The ``harness`` engine configuration is ``small`` at 1 GHz with four channels (a loader and three
communicating channels, see :mod:`ace.sw.compiler`), 256 KiB input and output SRAM buffers, 8 KiB
receive buffers per link and channel (4 KiB messages) and 2048 instructions per channel. With
three channels and 64 KiB buffers the default all-reduce took 1.19x its bound; with these,
1.08x (docs/harness.md). ``harness4`` is the same engine with four links (2D torus, 4-node
switch), ``harness7`` with seven: a fully connected or switch system of p nodes numbers one
(virtual) link per peer (:class:`ace.sw.program.Topology`), so ``full8`` and ``switch8`` need
p - 1 = 7; everything else is ``harness``'s, so their figures compare with ``ring8``'s.

:func:`pick_system` is the replay's choice when the user names no system: the trace's own
topology, or a ring of its nodes, unless the trace's algorithms need links that topology lacks;
then the named system of that many nodes with the fewest links that has them.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ace.config import NAMED_CONFIGS, AceConfig
from ace.errors import ConfigError
from ace.sw.program import ProgramError, Topology

from .system import SystemSpec

__all__ = ["HARNESS_CONFIG", "NAMED_SYSTEMS", "load_system", "DEFAULT_SYSTEM", "pick_system",
           "SystemChoice"]

HARNESS_CONFIG = NAMED_CONFIGS["small"].replace(
    name="harness", clock_mhz=1000.0, num_channels=4, input_buffer_bytes=256 << 10,
    output_buffer_bytes=256 << 10, rx_channel_beats=512, max_packet_bytes=4096,
    program_words=2048)

_DEFAULTS = {"config": "harness", "topology": "ring:8", "link_latency": 32, "mem_latency": 32,
             "mem_bytes": 8 << 20, "mem_bytes_per_cycle": None}


def _make(values: dict, source: str) -> SystemSpec:
    unknown = sorted(set(values) - set(_DEFAULTS))
    if unknown:
        raise ConfigError(f"{source}: unknown key {unknown[0]!r}; allowed: "
                          f"{', '.join(_DEFAULTS)}")
    v = {**_DEFAULTS, **values}
    cfg = v["config"]
    if isinstance(cfg, dict):
        config = AceConfig.from_dict({"base": "small", "name": "custom", **cfg},
                                     source=f"{source}: config")
    elif cfg == "harness":
        config = HARNESS_CONFIG
    elif cfg in NAMED_CONFIGS:
        config = NAMED_CONFIGS[cfg]
    else:
        raise ConfigError(f"{source}: config: {cfg!r}; allowed: harness, "
                          f"{', '.join(NAMED_CONFIGS)} or a table of parameters")
    try:
        topology = Topology.parse(str(v["topology"]))
    except ProgramError as error:
        raise ConfigError(f"{source}: {error}") from None
    for key, low, high in (("link_latency", 1, 255), ("mem_latency", 2, 126),
                           ("mem_bytes", 1 << 16, 1 << 32)):
        value = v[key]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ConfigError(f"{source}: {key}: {value!r} is out of range; allowed: an "
                              f"integer from {low} to {high}")
    rate = v["mem_bytes_per_cycle"]
    if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (int, float))
                             or not 0 < rate <= 2 * config.mem_bytes):
        raise ConfigError(f"{source}: mem_bytes_per_cycle: {rate!r} is out of range; allowed: "
                          f"a number above 0, at most {2 * config.mem_bytes}")
    try:
        return SystemSpec(config, topology, link_latency=v["link_latency"],
                          mem_bytes=v["mem_bytes"], mem_latency=v["mem_latency"],
                          mem_bytes_per_cycle=rate, host="driver")
    except ValueError as error:
        raise ConfigError(f"{source}: {error}") from None


# The 4-link engine of the 2D-torus and 4-node switch systems, the 7-link one of the 8-node
# fully connected and switch systems.
_HARNESS4 = {**HARNESS_CONFIG.to_dict(), "name": "harness4", "num_links": 4}
_HARNESS6 = {**HARNESS_CONFIG.to_dict(), "name": "harness6", "num_links": 6}
_HARNESS7 = {**HARNESS_CONFIG.to_dict(), "name": "harness7", "num_links": 7}

NAMED_SYSTEMS: dict[str, dict] = {
    "ring4": {"topology": "ring:4"},
    "ring8": {"topology": "ring:8"},
    "ring16": {"topology": "ring:16"},
    "torus4x2": {"topology": "torus:4x2", "config": _HARNESS4},
    "torus4x4": {"topology": "torus:4x4", "config": _HARNESS4},
    "torus4x4x4": {"topology": "torus:4x4x4", "config": _HARNESS6},
    "switch4": {"topology": "switch:4", "config": _HARNESS4},
    "full8": {"topology": "fully_connected:8", "config": _HARNESS7},
    "switch8": {"topology": "switch:8", "config": _HARNESS7},
}
DEFAULT_SYSTEM = "ring8"


def load_system(name_or_path: str | None = None, *, topology: str | None = None) -> SystemSpec:
    """A named system or a system file; ``topology`` overrides the system's topology (the
    replay passes the trace's when the user names no system)."""
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
    algorithm = spec.algorithm if isinstance(spec.algorithm, str) else list(spec.algorithm)
    try:
        compile_collective(spec.collective, max(1, spec.bytes // DTYPE_BYTES[dtype]),
                           topology=system.topology, algorithm=algorithm, dtype=dtype,
                           op=spec.op, mode="ace", config=system.config, check=False)
    except ProgramError as error:
        return f"{spec.name}: {error}"
    return None
