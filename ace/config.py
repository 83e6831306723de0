"""ACE configuration: one frozen dataclass shared by every block, the compiler and the harness.

Every parameter is checked in ``__post_init__``; a bad value raises :class:`ConfigError` naming
the parameter, the value and the allowed range. Configurations load from TOML or JSON files
(:meth:`AceConfig.from_file`) or by name from :data:`NAMED_CONFIGS`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path

from ace.errors import ConfigError

__all__ = ["AceConfig", "NAMED_CONFIGS", "MEM_PORT_RATIOS", "CLOCK_GATING", "load_config",
           "reference_table"]

#: How idle blocks (the ALU lanes' pipeline, each DMA half) hold their registers
#: (:mod:`ace.hw.common.clock_gate`): ``enable``, a clock enable; ``clock``, a gated clock (a
#: falling-edge enable register and an AND gate, the form an ASIC clock-gating cell takes),
#: which a simulator does not evaluate while the clock is stopped. Identical results, cycle for
#: cycle. FPGA synthesis always gets the clock enable.
CLOCK_GATING = ("enable", "clock")
_CLOCK_GATING_MEANING = ("how idle blocks hold: a clock enable (ALU lanes, DMA halves), or a "
                         "gated clock (those, and the datapaths, interconnect halves, NIC links "
                         "and sequencer decode; simulation and ASIC; FPGA platforms get the "
                         "enable)")

#: ``mem_bytes / link_bytes`` values the DMA's width converters support.
MEM_PORT_RATIOS = (1, 2, 4)


def _is_pow2(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


# (minimum, maximum, must be a power of two, meaning) for every integer parameter.
_INT_RULES: dict[str, tuple[int, int, bool, str]] = {
    "num_links": (1, 16, False, "network links, each with one TX and one RX AXI-Stream"),
    "link_bytes": (4, 128, True, "bytes per link beat; also the SRAM word and the ALU beat"),
    "mem_bytes": (4, 128, True, "bytes per AXI4 memory beat: 1, 2 or 4 x link_bytes"),
    "mem_addr_bits": (16, 64, False, "AXI4 address width"),
    "mem_id_bits": (1, 8, False, "AXI4 ID width"),
    "max_burst_beats": (1, 256, True, "longest AXI4 INCR burst, in beats"),
    "max_reads_in_flight": (1, 64, False, "AXI4 read bursts outstanding at once"),
    "input_buffer_bytes": (256, 1 << 24, True, "input SRAM buffer size"),
    "output_buffer_bytes": (256, 1 << 24, True, "output SRAM buffer size"),
    "sram_banks": (1, 32, True, "banks per SRAM buffer (beat-interleaved)"),
    "num_channels": (1, 16, False, "sequencer channels running concurrently"),
    "max_packet_bytes": (16, 1 << 16, True, "largest packet payload on a link"),
    "rx_channel_beats": (2, 4096, True, "per-channel RX buffer depth (credits), in beats"),
    "program_words": (16, 1 << 16, True, "instruction memory depth per channel"),
    "alu_tag_bits": (1, 16, False, "width of the tag carried alongside each ALU beat"),
}


@dataclass(frozen=True)
class AceConfig:
    """Parameters of one ACE endpoint.

    The datapath width is ``link_bytes``: one link beat, one SRAM word and one ALU beat are the
    same width, so cut-through steps (``rrs``, ``rcs``) need no width conversion. The reduction
    ALU array therefore has ``alu_lanes = link_bytes // 4`` 32-bit lanes; each lane holds one
    32-bit element or two 16-bit elements. The memory port may be wider, ``mem_bytes`` = 1, 2 or
    4 x ``link_bytes`` (:attr:`mem_beat_words` link words per memory beat): the DMA splits and
    packs memory beats into link words.
    """

    name: str = "custom"
    clock_mhz: float = 1000.0
    num_links: int = 4
    link_bytes: int = 64
    mem_bytes: int = 64
    mem_addr_bits: int = 48
    mem_id_bits: int = 4
    max_burst_beats: int = 64
    max_reads_in_flight: int = 8
    input_buffer_bytes: int = 1 << 20
    output_buffer_bytes: int = 1 << 20
    sram_banks: int = 16
    num_channels: int = 4
    max_packet_bytes: int = 4096
    rx_channel_beats: int = 64
    program_words: int = 256
    alu_tag_bits: int = 8
    clock_gating: str = "enable"

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ConfigError(f"name: {self.name!r} is not valid; "
                              "allowed: a Python identifier (letters, digits, underscores)")
        if (isinstance(self.clock_mhz, bool) or not isinstance(self.clock_mhz, (int, float))
                or not 1.0 <= self.clock_mhz <= 10000.0):
            raise ConfigError(f"clock_mhz: {self.clock_mhz!r} is out of range; "
                              "allowed: a number from 1 to 10000")
        if self.clock_gating not in CLOCK_GATING:
            raise ConfigError(f"clock_gating: {self.clock_gating!r} is not allowed; allowed: "
                              f"{', '.join(CLOCK_GATING)} ({_CLOCK_GATING_MEANING})")
        for key, (low, high, pow2, meaning) in _INT_RULES.items():
            value = getattr(self, key)
            allowed = f"{'a power of two' if pow2 else 'an integer'} from {low} to {high}"
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{key}: {value!r} is not an integer; allowed: {allowed} "
                                  f"({meaning})")
            if not low <= value <= high or (pow2 and not _is_pow2(value)):
                raise ConfigError(f"{key}: {value} is out of range; allowed: {allowed} "
                                  f"({meaning})")
        ratios = [r * self.link_bytes for r in MEM_PORT_RATIOS]
        if self.mem_bytes not in ratios:
            raise ConfigError(f"mem_bytes: {self.mem_bytes} is not allowed with link_bytes "
                              f"{self.link_bytes}; allowed: 1, 2 or 4 x link_bytes = "
                              f"{', '.join(str(r) for r in ratios if r <= 128)} (the DMA's "
                              "width converters split and pack memory beats into link words)")
        for key in ("input_buffer_bytes", "output_buffer_bytes"):
            minimum = self.link_bytes * self.sram_banks * 4
            if getattr(self, key) < minimum:
                raise ConfigError(f"{key}: {getattr(self, key)} is too small; allowed: at least "
                                  f"link_bytes x sram_banks x 4 = {minimum}")
        masters = 2 * self.num_channels
        if (masters - 1).bit_length() > self.mem_id_bits:
            raise ConfigError(f"mem_id_bits: {self.mem_id_bits} cannot number the engine's "
                              f"{masters} memory masters (2 per channel); allowed: at least "
                              f"{(masters - 1).bit_length()} for num_channels = "
                              f"{self.num_channels}")
        if self.max_packet_bytes < self.link_bytes:
            raise ConfigError(f"max_packet_bytes: {self.max_packet_bytes} is smaller than one "
                              f"beat; allowed: at least link_bytes = {self.link_bytes}")
        if self.max_burst_beats * self.mem_bytes > 4096:
            raise ConfigError(f"max_burst_beats: {self.max_burst_beats} x mem_bytes "
                              f"{self.mem_bytes} exceeds 4096; allowed: bursts up to 4 KiB "
                              "(AXI4 forbids crossing a 4 KiB boundary)")

    # -- derived values ------------------------------------------------------------------------

    @property
    def alu_lanes(self) -> int:
        """Number of 32-bit lanes in the reduction ALU array."""
        return self.link_bytes // 4

    @property
    def mem_beat_words(self) -> int:
        """Link words (SRAM words) per memory beat: ``mem_bytes // link_bytes``, 1, 2 or 4."""
        return self.mem_bytes // self.link_bytes

    @property
    def beat_bits(self) -> int:
        return self.link_bytes * 8

    @property
    def input_buffer_words(self) -> int:
        return self.input_buffer_bytes // self.link_bytes

    @property
    def output_buffer_words(self) -> int:
        return self.output_buffer_bytes // self.link_bytes

    @property
    def max_packet_beats(self) -> int:
        return self.max_packet_bytes // self.link_bytes

    @property
    def packet_bytes(self) -> int:
        """Payload bytes per packet a channel sends: at most half a receive buffer, so a
        message's packet always finds room behind the previous message (the deadlock rule,
        ``docs/engine.md``). Every message and every burst of sends before a receive fits it."""
        return min(self.max_packet_bytes, self.rx_channel_beats * self.link_bytes // 2)

    @property
    def sram_words(self) -> int:
        """Words of the unified SRAM address space (input buffer, then output buffer)."""
        return self.input_buffer_words + self.output_buffer_words

    @property
    def sram_addr_bits(self) -> int:
        return max(1, (self.sram_words - 1).bit_length())

    # -- (de)serialisation ---------------------------------------------------------------------

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @property
    def digest(self) -> str:
        """Short stable hash of every parameter: build-cache key."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:12]

    def replace(self, **changes) -> "AceConfig":
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_dict(cls, values: dict, *, source: str = "configuration") -> "AceConfig":
        """Build from a mapping of field names. An optional ``base`` key names a configuration
        from :data:`NAMED_CONFIGS` whose values the others override."""
        values = dict(values)
        base_name = values.pop("base", None)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ConfigError(f"{source}: unknown parameter {unknown[0]!r}; "
                              f"allowed: base, {', '.join(sorted(known))}")
        if base_name is None:
            return cls(**values)
        if base_name not in NAMED_CONFIGS:
            raise ConfigError(f"{source}: base: {base_name!r} is not a named configuration; "
                              f"allowed: {', '.join(NAMED_CONFIGS)}")
        return dataclasses.replace(NAMED_CONFIGS[base_name], **values)

    @classmethod
    def from_file(cls, path: str | Path) -> "AceConfig":
        """Load a ``.toml`` or ``.json`` file; its keys are the field names of this class."""
        path = Path(path)
        try:
            text = path.read_text()
        except OSError as error:
            raise ConfigError(f"{path}: cannot read: {error.strerror}") from None
        try:
            if path.suffix == ".toml":
                values = tomllib.loads(text)
            elif path.suffix == ".json":
                values = json.loads(text)
            else:
                raise ConfigError(f"{path}: unknown config format {path.suffix!r}; "
                                  "allowed: .toml or .json")
        except (tomllib.TOMLDecodeError, json.JSONDecodeError) as error:
            raise ConfigError(f"{path}: not valid {path.suffix[1:].upper()}: {error}") from None
        if not isinstance(values, dict):
            raise ConfigError(f"{path}: expected a table of parameters at the top level")
        try:
            return cls.from_dict(values, source=str(path))
        except ConfigError as error:
            raise ConfigError(f"{path}: {error}") from None


NAMED_CONFIGS: dict[str, AceConfig] = {
    # Accelerator class: four 512-bit links and a 512-bit HBM port at 1 GHz, 1 MiB + 1 MiB SRAM.
    "default": AceConfig(name="default"),
    # Fits a mid-size FPGA (ECP5-85F, Artix-7 100T): two 128-bit links, 64 KiB + 64 KiB SRAM.
    "small": AceConfig(
        name="small", clock_mhz=100.0, num_links=2, link_bytes=16, mem_bytes=16,
        mem_addr_bits=32, mem_id_bits=4, max_burst_beats=64, max_reads_in_flight=4,
        input_buffer_bytes=64 << 10, output_buffer_bytes=64 << 10, sram_banks=8,
        num_channels=2, max_packet_bytes=1024, rx_channel_beats=32, program_words=128,
        alu_tag_bits=4,
    ),
}


def load_config(name_or_path: str | Path | None) -> AceConfig:
    """A named configuration, or one loaded from a ``.toml``/``.json`` file."""
    if name_or_path is None:
        return NAMED_CONFIGS["default"]
    key = str(name_or_path)
    if key in NAMED_CONFIGS:
        return NAMED_CONFIGS[key]
    path = Path(key)
    if path.suffix in (".toml", ".json") or path.exists():
        return AceConfig.from_file(path)
    raise ConfigError(f"config: {key!r} is neither a named configuration "
                      f"({', '.join(NAMED_CONFIGS)}) nor a .toml/.json file")


def reference_table() -> str:
    """Markdown table of every parameter: range, meaning and the named configurations' values.

    ``docs/config.md`` embeds it; a test keeps the two identical.
    """
    names = list(NAMED_CONFIGS)
    rows = ["| parameter | allowed | meaning | " + " | ".join(f"`{n}`" for n in names) + " |",
            "|---|---|---|" + "---|" * len(names)]
    rows.append("| `name` | identifier | configuration name; part of module names | "
                + " | ".join(f"`{n}`" for n in names) + " |")
    rows.append("| `clock_mhz` | 1 to 10000 | clock for GB/s figures and synthesis target | "
                + " | ".join(str(NAMED_CONFIGS[n].clock_mhz) for n in names) + " |")
    for key, (low, high, pow2, meaning) in _INT_RULES.items():
        allowed = f"{low} to {high}" + (", power of 2" if pow2 else "")
        rows.append(f"| `{key}` | {allowed} | {meaning} | "
                    + " | ".join(str(getattr(NAMED_CONFIGS[n], key)) for n in names) + " |")
    rows.append(f"| `clock_gating` | {', '.join(f'`{g}`' for g in CLOCK_GATING)} | "
                f"{_CLOCK_GATING_MEANING} | "
                + " | ".join(f"`{NAMED_CONFIGS[n].clock_gating}`" for n in names) + " |")
    return "\n".join(rows) + "\n"
