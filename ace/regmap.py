"""The engine's register map: the CSR offsets, fields, error causes and counter addresses.

Shared data, not hardware: the CSR block (:mod:`ace.hw.csr`) decodes it, the host driver
(:mod:`ace.sw.host`) and the harness address registers by it, and the tables in ``docs/csr.md``
(:func:`csr_table_markdown`) are rendered from it. The map is defined once, in :data:`REGISTERS`
(a tuple of ``(offset, name, access, reset, description, bits)`` rows); the bit layouts of
STATUS, CONTROL, IRQ_ENABLE, IADDR and PARAMS are defined once in :data:`FIELDS` in the same way.
:class:`ErrorCause` lists the error causes the sequencer channels report in STATUS.
"""

from __future__ import annotations

from typing import NamedTuple

from amaranth.lib import enum

from ace.isa import INSTR_WORDS

__all__ = [
    "COUNTER_BITS",
    "check_counter_names",
    "field",
    "COUNTER_BASE",
    "CSR",
    "CSR_ADDR_BITS",
    "CSR_VERSION",
    "ERROR_CAUSE_TEXT",
    "FIELDS",
    "ID_MAGIC",
    "MAX_COUNTERS",
    "REGISTERS",
    "STEPS_DONE_BASE",
    "CsrField",
    "CsrRegister",
    "ErrorCause",
    "counter_offset",
    "counter_register_names",
    "csr_fields_markdown",
    "csr_map",
    "csr_table_markdown",
    "error_cause_markdown",
    "field_decode",
    "field_value",
    "params_value",
    "steps_done_offset",
]

#: Width of ``awaddr``/``araddr`` of the CSR port (a 64 KiB window).
CSR_ADDR_BITS = 16
#: Value of the read-only ID register: ASCII ``ACE1``.
ID_MAGIC = 0x41434531
#: Register-map version, in PARAMS bits 3:0.
CSR_VERSION = 1
#: Offset of STEPS_DONE0; channel ``c`` is at ``STEPS_DONE_BASE + 4 * c``.
STEPS_DONE_BASE = 0x100
#: Offset of the first counter; counter ``k`` is at ``COUNTER_BASE + 8 * k`` (bits 31:0) and
#: ``COUNTER_BASE + 8 * k + 4`` (bits 47:32).
COUNTER_BASE = 0x200
#: Most counters one block supports (PARAMS has a 10-bit count).
MAX_COUNTERS = 1023
#: Width of every counter input and snapshot register.
COUNTER_BITS = 48


class ErrorCause(enum.Enum, shape=4):
    """Why a channel stopped with an error (STATUS bits 7:4). The sequencer reports the first
    error; STATUS also names the channel and the program counter of the failing instruction.

    * ``NONE`` = 0: no error.
    * ``BAD_OPCODE`` = 1: an undefined opcode (11 to 14) or non-zero reserved bits.
    * ``BAD_BUFFER`` = 2: a src/dst buffer selector is the reserved value 3.
    * ``BAD_ADDRESS`` = 3: a slice ends past its buffer's BUF_LIMIT or the SRAM, or mem_addr +
      length does not fit mem_addr_bits.
    * ``BAD_LINK`` = 4: send_link or recv_link is not below num_links.
    * ``BAD_DEP`` = 5: the dependency names a channel that does not exist, or a later step of the
      channel itself.
    * ``DEP_NEVER`` = 6: the channel waited on halted (finished, not enabled, or failed) before
      completing the step.
    * ``BAD_COUNT`` = 7: a data step has count 0 or over 2**24 - 1 bytes, or a memory-placement
      receive exceeds packet_bytes.
    * ``RECV_MISMATCH`` = 8: a received packet does not match the step (source node, length, tag or
      framing).
    * ``MEM_ERROR`` = 9: the memory port answered SLVERR or DECERR.
    * ``TIMEOUT`` = 10: the engine made no progress for TIMEOUT cycles while the channel waited (the
      watchdog).
    * ``PC_OVERFLOW`` = 11: the program counter ran past program_words without an END.
    * ``LINK_ERROR`` = 12: a link's receiver flagged a bad packet (STATUS names the link in the
      channel field).
    * ``BAD_PLACEMENT`` = 13: PLACEMENT holds the reserved value 3 when the channel fetches an
      instruction.
    """
    NONE = 0
    BAD_OPCODE = 1
    BAD_BUFFER = 2
    BAD_ADDRESS = 3
    BAD_LINK = 4
    BAD_DEP = 5
    DEP_NEVER = 6
    BAD_COUNT = 7
    RECV_MISMATCH = 8
    MEM_ERROR = 9
    TIMEOUT = 10
    PC_OVERFLOW = 11
    LINK_ERROR = 12
    BAD_PLACEMENT = 13


#: One line per :class:`ErrorCause` for docs and host messages (the class docstring repeats it;
#: a test keeps them equal).
ERROR_CAUSE_TEXT: dict[ErrorCause, str] = {
    ErrorCause.NONE: "no error.",
    ErrorCause.BAD_OPCODE: "an undefined opcode (11 to 14) or non-zero reserved bits.",
    ErrorCause.BAD_BUFFER: "a src/dst buffer selector is the reserved value 3.",
    ErrorCause.BAD_ADDRESS: "a slice ends past its buffer's BUF_LIMIT or the SRAM, or mem_addr + "
                            "length does not fit mem_addr_bits.",
    ErrorCause.BAD_LINK: "send_link or recv_link is not below num_links.",
    ErrorCause.BAD_DEP: "the dependency names a channel that does not exist, or a later step of "
                        "the channel itself.",
    ErrorCause.DEP_NEVER: "the channel waited on halted (finished, not enabled, or failed) before "
                          "completing the step.",
    ErrorCause.BAD_COUNT: "a data step has count 0 or over 2**24 - 1 bytes, or a memory-placement "
                          "receive exceeds packet_bytes.",
    ErrorCause.RECV_MISMATCH: "a received packet does not match the step (source node, length, tag"
                              " or framing).",
    ErrorCause.MEM_ERROR: "the memory port answered SLVERR or DECERR.",
    ErrorCause.TIMEOUT: "the engine made no progress for TIMEOUT cycles while the channel waited "
                        "(the watchdog).",
    ErrorCause.PC_OVERFLOW: "the program counter ran past program_words without an END.",
    ErrorCause.LINK_ERROR: "a link's receiver flagged a bad packet (STATUS names the link in the "
                           "channel field).",
    ErrorCause.BAD_PLACEMENT: "PLACEMENT holds the reserved value 3 when the channel fetches an "
                              "instruction.",
}


# -- the register map ---------------------------------------------------------------------------

class CsrRegister(NamedTuple):
    """One 32-bit register.

    ``access`` is ``RO`` (writes answer SLVERR), ``RW`` (byte enables honoured) or ``WO`` (reads
    return 0; CONTROL). ``reset`` is the value after reset, or ``None`` for a read-only value
    that follows the fabric. ``bits`` is how many low bits are implemented; the others read 0
    and ignore writes. In :data:`REGISTERS`, ``reset`` and ``bits`` may name an
    :class:`~ace.config.AceConfig` attribute (resolved by :func:`csr_map`), and the names
    ``STEPS_DONE{c}`` and ``{COUNTER}_LO/HI`` are repeated per channel and per counter.
    """
    offset: int
    name: str
    access: str
    reset: int | str | None
    description: str
    bits: int | str = 32


#: The register map. Rows whose name contains ``{c}`` repeat per channel (stride 4); rows whose
#: name contains ``{COUNTER}`` repeat per counter (stride 8), with the counter name upper-cased.
REGISTERS: tuple[CsrRegister, ...] = (
    CsrRegister(0x000, "ID", "RO", ID_MAGIC, "magic number, ASCII `ACE1`"),
    CsrRegister(0x004, "PARAMS", "RO", None, "register-map version and configuration, see PARAMS"),
    CsrRegister(0x008, "CONTROL", "WO", 0, "one-cycle pulses, see CONTROL; reads 0"),
    CsrRegister(0x00C, "STATUS", "RO", None, "engine state and first error, see STATUS"),
    CsrRegister(0x010, "NODE_ID", "RW", 0, "this endpoint's node id (packet `src`)", 8),
    CsrRegister(0x014, "PLACEMENT", "RW", 0,
                "0: buffers in SRAM (ACE mode); 1: in main memory, memory-staged (`staged` "
                "baseline); 2: in main memory, point-to-point (`p2p` baseline); 3: reserved "
                "(a channel stops with `BAD_PLACEMENT`)", 2),
    CsrRegister(0x018, "CHANNEL_ENABLE", "RW", 0,
                "bit c enables channel c at START", "num_channels"),
    CsrRegister(0x01C, "TIMEOUT", "RW", 0, "watchdog: cycles without progress; 0 = off"),
    CsrRegister(0x020, "IRQ_ENABLE", "RW", 0, "`irq` sources, see IRQ_ENABLE", 2),
    CsrRegister(0x040, "BUF_BASE_I_LO", "RW", 0, "buffer `i` base, bits 31:0 (SRAM word address "
                "in `sram` placement, byte address in `memory` and `p2p` placement)"),
    CsrRegister(0x044, "BUF_BASE_I_HI", "RW", 0, "buffer `i` base, bits 63:32"),
    CsrRegister(0x048, "BUF_BASE_O_LO", "RW", "input_buffer_words", "buffer `o` base, bits 31:0"),
    CsrRegister(0x04C, "BUF_BASE_O_HI", "RW", 0, "buffer `o` base, bits 63:32"),
    CsrRegister(0x050, "BUF_BASE_S_LO", "RW", 0, "buffer `s` base, bits 31:0"),
    CsrRegister(0x054, "BUF_BASE_S_HI", "RW", 0, "buffer `s` base, bits 63:32"),
    CsrRegister(0x058, "BUF_LIMIT_I", "RW", "input_buffer_words", "buffer `i` size in words"),
    CsrRegister(0x05C, "BUF_LIMIT_O", "RW", "output_buffer_words", "buffer `o` size in words"),
    CsrRegister(0x060, "BUF_LIMIT_S", "RW", 0, "buffer `s` size in words"),
    CsrRegister(0x064, "STAGE_BASE_LO", "RW", 0, "staging area byte address, bits 31:0; "
                "`memory` and `p2p` placement only (channel c stages 2 packets from 2c "
                "packets on)"),
    CsrRegister(0x068, "STAGE_BASE_HI", "RW", 0, "staging area, bits 63:32"),
    *(CsrRegister(0x080 + 4 * k, f"IWORD{k}", "RW", 0,
                  f"instruction staging, instruction bits {32 * k + 31}:{32 * k}")
      for k in range(INSTR_WORDS)),
    CsrRegister(0x0A0, "IADDR", "RW", 0, "a write stores IWORD0..7 into channel IADDR.CHANNEL "
                "at index IADDR.INDEX; out of range: SLVERR, nothing stored"),
    CsrRegister(STEPS_DONE_BASE, "STEPS_DONE{c}", "RO", None,
                "steps channel c completed since START", 16),
    CsrRegister(COUNTER_BASE, "{COUNTER}_LO", "RO", None, "counter snapshot, bits 31:0"),
    CsrRegister(COUNTER_BASE + 4, "{COUNTER}_HI", "RO", None, "counter snapshot, bits 47:32", 16),
)


class CsrField(NamedTuple):
    """A bit field of a register: bits ``lsb + width - 1`` down to ``lsb``."""
    lsb: int
    width: int
    name: str
    description: str


#: Bit layouts. PARAMS fields name the configuration value they hold.
FIELDS: dict[str, tuple[CsrField, ...]] = {
    "CONTROL": (
        CsrField(0, 1, "START", "start every enabled channel at instruction 0"),
        CsrField(1, 1, "ERROR_CLEAR", "clear the error state (STATUS.ERROR and its cause)"),
        CsrField(2, 1, "COUNTER_CLEAR", "clear every counter"),
        CsrField(3, 1, "SNAPSHOT", "copy every counter into its snapshot register"),
    ),
    "STATUS": (
        CsrField(0, 1, "IDLE", "no channel is running (not BUSY)"),
        CsrField(1, 1, "BUSY", "some channel is running"),
        CsrField(2, 1, "DONE", "every enabled channel reached END since the last START"),
        CsrField(3, 1, "ERROR", "a channel stopped with an error"),
        CsrField(4, 4, "ERROR_CAUSE", "`ErrorCause` of the first error"),
        CsrField(8, 4, "ERROR_CHANNEL", "channel of the first error"),
        CsrField(12, 1, "IRQ", "the `irq` output"),
        CsrField(16, 16, "ERROR_PC", "instruction index of the first error"),
    ),
    "IRQ_ENABLE": (
        CsrField(0, 1, "DONE", "`irq` is high while STATUS.DONE is"),
        CsrField(1, 1, "ERROR", "`irq` is high while STATUS.ERROR is"),
    ),
    "IADDR": (
        CsrField(0, 16, "INDEX", "instruction index, below program_words"),
        CsrField(16, 16, "CHANNEL", "channel, below num_channels"),
    ),
    "PARAMS": (
        CsrField(0, 4, "VERSION", f"register-map version ({CSR_VERSION})"),
        CsrField(4, 5, "NUM_LINKS", "num_links"),
        CsrField(9, 5, "NUM_CHANNELS", "num_channels"),
        CsrField(14, 3, "LOG2_LINK_BYTES", "log2(link_bytes)"),
        CsrField(17, 5, "LOG2_PROGRAM_WORDS", "log2(program_words)"),
        CsrField(22, 10, "NUM_COUNTERS", "number of counters"),
    ),
}

#: Offsets of the registers that are not repeated, by name.
CSR: dict[str, int] = {r.name: r.offset for r in REGISTERS if "{" not in r.name}


def field(register: str, name: str) -> CsrField:
    for f in FIELDS[register]:
        if f.name == name:
            return f
    raise KeyError(f"{register}.{name}: no such field; allowed: "
                   f"{', '.join(f.name for f in FIELDS[register])}")


def field_value(register: str, **values: int) -> int:
    """Pack field values into a register value, e.g. ``field_value("CONTROL", START=1)``."""
    out = 0
    for name, value in values.items():
        f = field(register, name)
        if not 0 <= int(value) < 1 << f.width:
            raise ValueError(f"{register}.{name}: {value} does not fit {f.width} bits")
        out |= int(value) << f.lsb
    return out


def field_decode(register: str, value: int) -> dict[str, int]:
    """Every field of ``register`` from its value, by field name."""
    return {f.name: (value >> f.lsb) & ((1 << f.width) - 1) for f in FIELDS[register]}


def check_counter_names(counter_names) -> tuple[str, ...]:
    names = tuple(counter_names)
    if len(names) > MAX_COUNTERS:
        raise ValueError(f"counter_names: {len(names)} counters; allowed: at most {MAX_COUNTERS}")
    for name in names:
        if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
            raise ValueError(f"counter_names: {name!r} is not valid; allowed: Python identifiers "
                             "not starting with '_'")
    if len(set(names)) != len(names):
        raise ValueError(f"counter_names: {names!r} has duplicates")
    return names


def counter_register_names(name: str) -> tuple[str, str]:
    """The (low, high) register names of counter ``name``."""
    return f"{name.upper()}_LO", f"{name.upper()}_HI"


def counter_offset(name: str, counter_names) -> int:
    """Offset of the low word of counter ``name``; the high word is at ``+ 4``."""
    names = tuple(counter_names)
    if name not in names:
        raise KeyError(f"counter {name!r} is not one of {', '.join(names) or 'no counters'}")
    return COUNTER_BASE + 8 * names.index(name)


def steps_done_offset(channel: int) -> int:
    """Offset of STEPS_DONE of ``channel``."""
    return STEPS_DONE_BASE + 4 * channel


def _resolve(value, config):
    return getattr(config, value) if isinstance(value, str) else value


def csr_map(config, counter_names=()) -> list[CsrRegister]:
    """The concrete register map for ``config`` and ``counter_names``, sorted by offset, with
    repeated rows expanded and ``reset``/``bits`` resolved to integers (``reset`` of PARAMS is
    its constant value; other live read-only values keep ``None``)."""
    names = check_counter_names(counter_names)
    out = []
    for reg in REGISTERS:
        bits = _resolve(reg.bits, config)
        reset = _resolve(reg.reset, config)
        if reg.name == "PARAMS":
            reset = params_value(config, len(names))
        if "{c}" in reg.name:
            for c in range(config.num_channels):
                out.append(reg._replace(offset=reg.offset + 4 * c, name=reg.name.format(c=c),
                                        reset=reset, bits=bits,
                                        description=reg.description.replace("channel c",
                                                                            f"channel {c}")))
        elif "{COUNTER}" in reg.name:
            for k, counter in enumerate(names):
                half = 1 if reg.name.endswith("_HI") else 0
                out.append(reg._replace(offset=reg.offset + 8 * k,
                                        name=counter_register_names(counter)[half],
                                        reset=reset, bits=bits,
                                        description=f"`{counter}` {reg.description}"))
        else:
            out.append(reg._replace(reset=reset, bits=bits))
    out.sort(key=lambda r: r.offset)
    seen = {}
    for reg in out:
        if reg.offset in seen or reg.name in seen.values():
            raise ValueError(f"register map: {reg.name} at {reg.offset:#05x} collides with "
                             f"{seen.get(reg.offset, reg.name)}")
        if reg.offset >> CSR_ADDR_BITS or reg.offset % 4:
            raise ValueError(f"register map: {reg.name} offset {reg.offset:#x} is not a word "
                             f"inside the {CSR_ADDR_BITS}-bit window")
        seen[reg.offset] = reg.name
    return out


def params_value(config, num_counters: int) -> int:
    """The constant read from PARAMS."""
    return field_value("PARAMS", VERSION=CSR_VERSION, NUM_LINKS=config.num_links,
                       NUM_CHANNELS=config.num_channels,
                       LOG2_LINK_BYTES=config.link_bytes.bit_length() - 1,
                       LOG2_PROGRAM_WORDS=config.program_words.bit_length() - 1,
                       NUM_COUNTERS=num_counters)


def csr_table_markdown(config=None, counter_names=None) -> str:
    """Markdown table of the register map.

    With ``config`` and ``counter_names`` the rows of :func:`csr_map`. Without them (the form
    ``docs/csr.md`` embeds; a test keeps the two identical) repeated registers appear once with
    symbolic offsets and configuration-dependent values by their :class:`AceConfig` name.
    """
    rows = ["| offset | name | access | bits | reset | description |",
            "|---|---|---|---|---|---|"]

    def cell(value):
        if value is None:
            return "-"
        if isinstance(value, str):
            return f"`{value}`"
        return f"{value:#x}" if value > 9 else str(value)

    if config is not None:
        for reg in csr_map(config, () if counter_names is None else counter_names):
            rows.append(f"| {reg.offset:#05x} | {reg.name} | {reg.access} | {reg.bits} | "
                        f"{cell(reg.reset)} | {reg.description} |")
        return "\n".join(rows) + "\n"
    for reg in REGISTERS:
        offset = f"{reg.offset:#05x}"
        if "{c}" in reg.name:
            offset += " + 4c"
        elif "{COUNTER}" in reg.name:
            offset += " + 8k"
        reset = "config" if reg.name == "PARAMS" else cell(reg.reset)
        description = reg.description
        if "{COUNTER}" in reg.name:
            description = f"counter k of `counter_names`: {description}"
        rows.append(f"| {offset} | {reg.name} | {reg.access} | {reg.bits} | {reset} | "
                    f"{description} |")
    return "\n".join(rows) + "\n"


def csr_fields_markdown() -> str:
    """Markdown tables of every register's bit fields (:data:`FIELDS`), one per register."""
    parts = []
    for register, fields in FIELDS.items():
        rows = [f"**{register}** ({CSR[register]:#05x})", "",
                "| bits | field | meaning |", "|---|---|---|"]
        for f in fields:
            bits = str(f.lsb) if f.width == 1 else f"{f.lsb + f.width - 1}:{f.lsb}"
            rows.append(f"| {bits} | {f.name} | {f.description} |")
        parts.append("\n".join(rows) + "\n")
    return "\n".join(parts)


def error_cause_markdown() -> str:
    """Markdown table of :class:`ErrorCause`."""
    rows = ["| value | cause | meaning |", "|---|---|---|"]
    for cause, text in ERROR_CAUSE_TEXT.items():
        rows.append(f"| {cause.value} | `{cause.name}` | {text} |")
    return "\n".join(rows) + "\n"
