"""The compiler's error type."""

from __future__ import annotations

from ace.sw.program import ProgramError

__all__ = ["CompileError"]


class CompileError(ProgramError):
    """A collective/algorithm/topology combination that cannot be compiled, with the reason."""
