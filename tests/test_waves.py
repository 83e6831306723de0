"""``ace replay --waves``: a tiny all-reduce on a 2-node ring writes ``OUT/waves_ace.fst``, a
complete FST file (the driver closes it before it exits) holding the engines' signals.

The waves build is a separate Verilator build with ``--trace-fst`` (minutes), so this is a
``large`` test. The header is checked byte by byte and the signals are read back with
pywellen.
"""

from __future__ import annotations

import struct

import pytest
import pywellen

from ace.cli import main

#: FST block types (gtkwave fstapi.h): the header block opens the file; geometry, hierarchy
#: and value-change blocks follow once the writer is closed.
FST_BL_HDR, FST_BL_VCDATA_DYN_ALIAS2 = 0, 8
FST_HDR_SIZE = 329


@pytest.mark.large
def test_replay_waves_writes_a_complete_fst(tmp_path):
    system = tmp_path / "ring2.toml"
    system.write_text('topology = "ring:2"\n')
    trace = tmp_path / "tiny.yaml"
    trace.write_text("version: 1\ncollectives:\n"
                     "  - {name: ar, collective: allreduce, bytes: 256, dtype: fp32}\n")
    out = tmp_path / "out"
    status = main(["replay", str(trace), "--system", str(system), "--mode", "ace", "--waves",
                   "--out", str(out), "--quiet"])
    assert status == 0
    fst = out / "waves_ace.fst"
    data = fst.read_bytes()
    assert data[0] == FST_BL_HDR
    assert struct.unpack(">Q", data[1:9])[0] == FST_HDR_SIZE
    start, end = struct.unpack(">QQ", data[9:25])
    assert end > start          # the header is rewritten with the end time on close
    assert len(data) > FST_HDR_SIZE + 1000

    wave = pywellen.Waveform(str(fst))
    names = {var.full_name: var for var in wave.all_vars()}
    inside = [name for name in names if ".engine0." in name]
    assert len(inside) > 100, "the engines' own signals are missing"
    irq = names["TOP.n0_irq"].signal
    assert irq.value_at(0) == 0 and irq.value_at(end) == 1


def _compiler(tmp_path, *, found: bool) -> str:
    """A stand-in C++ compiler that finds the FST writer's headers or reports lz4.h missing."""
    path = tmp_path / ("cxx_found" if found else "cxx_missing")
    path.write_text("#!/bin/sh\nexit 0\n" if found else
                    "#!/bin/sh\necho 'fatal error: lz4.h: No such file or directory' >&2\n"
                    "exit 1\n")
    path.chmod(0o755)
    return str(path)


def test_missing_fst_headers_are_one_line_exit_2(tmp_path, monkeypatch, capsys):
    """Verilator's FST writer includes lz4.h: without it the replay stops before the build
    with one line naming the packages to install."""
    monkeypatch.setenv("CXX", _compiler(tmp_path, found=False))
    assert main(["replay", "--waves", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "lz4.h" in err[0] and "liblz4-dev" in err[0], err


def test_cocotb_waves_fall_back_to_vcd_without_fst_headers(tmp_path, monkeypatch):
    """The cocotb builds choose FST only where Verilator's FST writer compiles; a compiler that
    does not find lz4.h gives VCD (``--trace``) instead of a failed build."""
    from testbench.runner import _fst_writer_builds

    monkeypatch.setenv("CXX", _compiler(tmp_path, found=False))
    assert _fst_writer_builds() is False
    monkeypatch.setenv("CXX", _compiler(tmp_path, found=True))
    assert _fst_writer_builds() is True
