"""The errors a user sees: each is reported by the ``ace`` command in one line, exit status 2.

Every layer raises these (the configuration, the flows, the commands); domain errors of the
software stack (:class:`ace.sw.program.ProgramError` and its kinds) and of the harness derive
from their own modules' bases and are turned into one-line reports by the command line too.
"""

from __future__ import annotations

__all__ = ["UserError", "ConfigError", "ToolchainError"]


class UserError(Exception):
    """A mistake in the command line or its inputs."""


class ConfigError(ValueError):
    """An invalid configuration: the message names the parameter and the allowed range."""


class ToolchainError(RuntimeError):
    """A required tool is missing; the message says which package provides it."""
