"""Amaranth to Verilog and RTLIL, with no power-up contents for memories that have none.

Every memory in ACE is written before it is read: the host loads the programs, the DMA and the
NIC fill the buffers, a FIFO reads only what it holds. That is what an ASIC's SRAM macros need,
which have no power-up contents. Amaranth 0.5 gives every memory initial contents, all zeros
when its ``init`` is empty, and its Verilog spells them out a word to a line: 5.5 MB of
``initial`` lines in the ``default`` engine, which every Verilator build compiles into C++ and
every FPGA flow reads. :func:`to_verilog` and :func:`to_rtlil` leave them out; a memory with any
non-zero word keeps all of its contents. The cocotb builds start every memory from random
contents (:mod:`testbench.runner`), so a read before a write would show in their results.
"""

from __future__ import annotations

import contextvars

from amaranth.back import rtlil, verilog

__all__ = ["to_verilog", "to_rtlil"]

_OMIT_ZERO_CONTENTS = contextvars.ContextVar("omit_zero_memory_contents", default=False)
_EMIT_MEMORY = rtlil.ModuleEmitter.emit_memory


def _emit_memory(self, cell_idx, cell):
    """Amaranth's own, except for an all-zero memory inside :func:`_converted`."""
    if _OMIT_ZERO_CONTENTS.get() and not any(cell.init):
        return
    _EMIT_MEMORY(self, cell_idx, cell)


# The hook is inert outside this module's converters (the context variable is false there), so
# installing it once is safe for every other caller of Amaranth in the process.
rtlil.ModuleEmitter.emit_memory = _emit_memory


def _converted(convert, elaboratable, **kwargs) -> str:
    token = _OMIT_ZERO_CONTENTS.set(True)
    try:
        return convert(elaboratable, emit_src=False, **kwargs)
    finally:
        _OMIT_ZERO_CONTENTS.reset(token)


def to_verilog(elaboratable, **kwargs) -> str:
    """``amaranth.back.verilog.convert`` without source locations or all-zero memory
    contents; ``kwargs`` (``name``, ``platform``...) as Amaranth's."""
    return _converted(verilog.convert, elaboratable, **kwargs)


def to_rtlil(elaboratable, **kwargs) -> str:
    """``amaranth.back.rtlil.convert``, likewise."""
    return _converted(rtlil.convert, elaboratable, **kwargs)
