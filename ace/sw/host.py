"""Host-side driver of the engine's register file (:class:`ace.hw.csr.AceCsr`), in pure Python.

:class:`AceHost` takes two async callables, ``write32(addr, value)`` and ``read32(addr) -> int``,
so it runs unchanged on a cocotb testbench (wrapping cocotbext-axi ``AxiLiteMaster``), on the
Amaranth simulator or on a harness model. Every offset comes from :mod:`ace.hw.csr`. A
``write32`` should raise when the block answers SLVERR; the driver never writes a read-only or
unmapped register, so a SLVERR means a wrong configuration or a bad instruction address.

Typical use::

    host = AceHost(write32, read32, config, counter_names, sleep=lambda n: ClockCycles(clk, n))
    await host.check_params()
    await host.load_program(assembled.nodes[rank])
    await host.start()
    status = await host.wait_done()
    counts = await host.counters()
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from ace.regmap import (
    CSR,
    ERROR_CAUSE_TEXT,
    ID_MAGIC,
    ErrorCause,
    counter_offset,
    counter_register_names,
    field_decode,
    field_value,
    params_value,
    steps_done_offset,
)
from ace.sw.program import memory_footprint
from ace.isa import INSTR_WORDS
from ace.vocab import Mode

__all__ = ["MEMORY_LIMIT", "AceError", "AceHost", "default_limits", "staging_area"]

#: Buffer limit written in ``memory`` and ``p2p`` placement: the whole 32-bit range.
MEMORY_LIMIT = (1 << 32) - 1


class AceError(RuntimeError):
    """The engine reported an error, or it does not match the driver's configuration.
    ``status`` is the decoded STATUS (see :meth:`AceHost.status`) when there is one."""

    def __init__(self, message: str, status: dict | None = None):
        super().__init__(message)
        self.status = status


def default_limits(node, config) -> dict[str, int]:
    """Buffer sizes in words for ``node`` (an :class:`~ace.sw.program.AssembledNode`).

    ``sram`` placement: ``i`` is the input SRAM, ``o`` the output SRAM, and ``s`` runs from its
    base to the end of whichever SRAM holds it. ``memory``, ``p2p``: :data:`MEMORY_LIMIT`.
    """
    if node.placement != "sram":
        return {b: MEMORY_LIMIT for b in "ios"}
    in_words, out_words = config.input_buffer_words, config.output_buffer_words
    base_s = node.buffer_base["s"]
    end = in_words if base_s < in_words else in_words + out_words
    return {"i": in_words, "o": out_words, "s": max(0, end - base_s)}


def staging_area(program, config, *, gap: int = 0x1000) -> tuple[int, int]:
    """``(base, end)`` of the staging area the memory placements need (STAGE_BASE):
    from the first 4 KiB boundary at least ``gap`` bytes above every byte the program touches,
    ``2 * packet_bytes`` per channel (see :class:`~ace.hw.channel.sequencer.AceChannel`)."""
    base = -(-(memory_footprint(program) + gap) // 4096) * 4096
    return base, base + 2 * config.packet_bytes * config.num_channels


class AceHost:
    """Driver of one engine's CSR block.

    Parameters
    ----------
    write32 : async callable (addr, value)
        One 32-bit AXI4-Lite write at a byte offset of the CSR window.
    read32 : async callable (addr) -> int
        One 32-bit read.
    config : AceConfig
    counter_names : sequence of str
        The engine's counters, in the order the CSR block was built with.
    sleep : async callable (n), optional
        Waits ``n`` time units between polls in :meth:`wait_done` (for cocotb, clock cycles).
        Without it, polls follow each other back to back.
    """

    def __init__(self, write32: Callable[[int, int], Awaitable],
                 read32: Callable[[int], Awaitable[int]], config, counter_names=(), *,
                 sleep: Callable[[int], Awaitable] | None = None):
        self.write32 = write32
        self.read32 = read32
        self.config = config
        self.counter_names = tuple(counter_names)
        self.sleep = sleep

    def counter_offset(self, name: str) -> int:
        return counter_offset(name, self.counter_names)

    # -- identification --------------------------------------------------------------------------

    async def params(self) -> dict[str, int]:
        """The decoded PARAMS register."""
        return field_decode("PARAMS", await self.read32(CSR["PARAMS"]))

    async def check_params(self) -> None:
        """Raise :class:`AceError` unless ID is the magic number and PARAMS matches the
        driver's configuration and counter list."""
        ident = await self.read32(CSR["ID"])
        if ident != ID_MAGIC:
            raise AceError(f"ID reads {ident:#010x}; expected {ID_MAGIC:#010x} (not an ACE)")
        got = await self.read32(CSR["PARAMS"])
        want = params_value(self.config, len(self.counter_names))
        if got != want:
            raise AceError(f"PARAMS reads {field_decode('PARAMS', got)}; the driver expects "
                           f"{field_decode('PARAMS', want)}")

    # -- program loading -------------------------------------------------------------------------

    async def write64(self, lo_name: str, value: int) -> None:
        await self.write32(CSR[lo_name], value & 0xFFFF_FFFF)
        await self.write32(CSR[lo_name.replace("_LO", "_HI")], (value >> 32) & 0xFFFF_FFFF)

    async def write_instruction(self, channel: int, index: int, words) -> None:
        """Stage the eight words of one instruction (word 0 first) and commit them: 9 writes."""
        words = list(words)
        if len(words) != INSTR_WORDS:
            raise ValueError(f"words: {len(words)} given; an instruction is {INSTR_WORDS} words")
        if not 0 <= channel < self.config.num_channels:
            raise ValueError(f"channel: {channel}; allowed: 0 to {self.config.num_channels - 1}")
        if not 0 <= index < self.config.program_words:
            raise ValueError(f"index: {index}; allowed: 0 to {self.config.program_words - 1}")
        for k, word in enumerate(words):
            await self.write32(CSR[f"IWORD{k}"], word)
        await self.write32(CSR["IADDR"], field_value("IADDR", CHANNEL=channel, INDEX=index))

    async def load_program(self, node, limits: Mapping[str, int] | None = None, *,
                           stage_base: int | None = None) -> None:
        """Write ``node`` (an :class:`~ace.sw.program.AssembledNode`): NODE_ID, PLACEMENT, the
        buffer table, every channel's instructions, then CHANNEL_ENABLE (the channels that have
        a program). ``limits`` overrides buffer sizes in words, by buffer name; the rest come
        from :func:`default_limits`. ``stage_base`` (main-memory byte address of the staging
        area that the memory placements need) is written when given. PLACEMENT is the node's
        :attr:`~ace.vocab.Mode.placement_bit`."""
        if len(node.words) > self.config.num_channels:
            raise ValueError(f"node {node.node}: {len(node.words)} channels; the configuration "
                             f"has num_channels = {self.config.num_channels}")
        for c, words in enumerate(node.words):
            if len(words) % INSTR_WORDS or len(words) // INSTR_WORDS > self.config.program_words:
                raise ValueError(f"node {node.node} channel {c}: {len(words)} words is not a "
                                 f"whole number of instructions within program_words = "
                                 f"{self.config.program_words}")
        sizes = default_limits(node, self.config)
        sizes.update(limits or {})
        await self.write32(CSR["NODE_ID"], node.node)
        await self.write32(CSR["PLACEMENT"], Mode.parse(node.placement).placement_bit)
        for b in "ios":
            await self.write64(f"BUF_BASE_{b.upper()}_LO", node.buffer_base[b])
            await self.write32(CSR[f"BUF_LIMIT_{b.upper()}"], sizes[b])
        if stage_base is not None:
            await self.write64("STAGE_BASE_LO", stage_base)
        enable = 0
        for c, words in enumerate(node.words):
            for k in range(len(words) // INSTR_WORDS):
                await self.write_instruction(c, k, words[INSTR_WORDS * k:INSTR_WORDS * (k + 1)])
            if words:
                enable |= 1 << c
        await self.write32(CSR["CHANNEL_ENABLE"], enable)

    # -- control and status ----------------------------------------------------------------------

    async def control(self, **bits: int) -> None:
        """One CONTROL write, e.g. ``control(START=1)``."""
        await self.write32(CSR["CONTROL"], field_value("CONTROL", **bits))

    async def start(self) -> None:
        await self.control(START=1)

    async def clear_error(self) -> None:
        await self.control(ERROR_CLEAR=1)

    async def clear_counters(self) -> None:
        await self.control(COUNTER_CLEAR=1)

    async def set_timeout(self, cycles: int) -> None:
        """Watchdog cycles without progress before a channel fails with TIMEOUT; 0 = off."""
        await self.write32(CSR["TIMEOUT"], cycles)

    async def set_irq_enable(self, *, done: bool = False, error: bool = False) -> None:
        await self.write32(CSR["IRQ_ENABLE"], field_value("IRQ_ENABLE", DONE=int(done),
                                                          ERROR=int(error)))

    async def status(self) -> dict:
        """STATUS decoded: ``idle``, ``busy``, ``done``, ``error``, ``irq`` (bool),
        ``error_cause`` (:class:`~ace.hw.csr.ErrorCause`, or the raw int if undefined),
        ``error_channel``, ``error_pc`` (int)."""
        fields = field_decode("STATUS", await self.read32(CSR["STATUS"]))
        out = {name.lower(): value for name, value in fields.items()}
        for flag in ("idle", "busy", "done", "error", "irq"):
            out[flag] = bool(out[flag])
        try:
            out["error_cause"] = ErrorCause(out["error_cause"])
        except ValueError:
            pass
        return out

    @staticmethod
    def describe_error(status: dict) -> str:
        cause = status["error_cause"]
        if isinstance(cause, ErrorCause):
            text = f"{cause.name} ({ERROR_CAUSE_TEXT[cause].rstrip('.')})"
        else:
            text = f"undefined cause {cause}"
        return f"channel {status['error_channel']} pc {status['error_pc']}: {text}"

    async def wait_done(self, *, interval: int = 100, max_polls: int = 100_000,
                        raise_on_error: bool = True) -> dict:
        """Poll STATUS until DONE or ERROR; return the decoded status.

        Sleeps ``interval`` units (see ``sleep``) between polls. Raises :class:`AceError` on
        ERROR when ``raise_on_error``, and :class:`TimeoutError` after ``max_polls`` polls.
        """
        for _ in range(max_polls):
            status = await self.status()
            if status["error"]:
                if raise_on_error:
                    raise AceError(self.describe_error(status), status)
                return status
            if status["done"]:
                return status
            if self.sleep is not None:
                await self.sleep(interval)
        raise TimeoutError(f"engine not done after {max_polls} polls of STATUS")

    async def steps_done(self) -> list[int]:
        """STEPS_DONE of every channel."""
        return [await self.read32(steps_done_offset(c)) for c in range(self.config.num_channels)]

    async def counters(self, *, clear: bool = False) -> dict[str, int]:
        """Snapshot every counter (and clear them in the same write when ``clear``: no count is
        lost between the snapshot and the clear), then read the snapshots."""
        await self.control(SNAPSHOT=1, COUNTER_CLEAR=int(clear))
        out = {}
        for name in self.counter_names:
            lo_off = self.counter_offset(name)
            lo = await self.read32(lo_off)
            hi = await self.read32(lo_off + 4)
            out[name] = hi << 32 | lo
        return out

    async def read_register(self, name: str) -> int:
        """Any register by its map name (counters by ``counter_register_names``)."""
        if name in CSR:
            return await self.read32(CSR[name])
        for counter in self.counter_names:
            lo, hi = counter_register_names(counter)
            if name in (lo, hi):
                return await self.read32(self.counter_offset(counter) + (4 if name == hi else 0))
        if name.startswith("STEPS_DONE") and name[10:].isdigit():
            return await self.read32(steps_done_offset(int(name[10:])))
        raise KeyError(f"register {name!r} is not in the map")
