"""``ace generate``: deterministic output, rtl/ in git is fresh, lint is clean, errors exit 2."""

import subprocess
import sys

import pytest

from ace.cli import main
from ace.config import NAMED_CONFIGS
from ace.flow.generate import RTL_DIR, check
from ace.flow.lint import lint_config


@pytest.mark.parametrize("name", sorted(NAMED_CONFIGS))
def test_rtl_in_git_is_fresh(name):
    """The committed rtl/ matches what the current code generates (else: run ace generate)."""
    assert check(NAMED_CONFIGS[name], RTL_DIR / name) == []


def test_check_names_stale_file(tmp_path, capsys):
    assert main(["generate", "--config", "small", "--out", str(tmp_path)]) == 0
    assert main(["generate", "--config", "small", "--out", str(tmp_path), "--check"]) == 0
    victim = next((tmp_path / "small").glob("*.v"))
    victim.write_text(victim.read_text() + "// edited\n")
    assert main(["generate", "--config", "small", "--out", str(tmp_path), "--check"]) == 1
    assert victim.name in capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(NAMED_CONFIGS))
def test_lint_clean(name):
    assert lint_config(NAMED_CONFIGS[name]) == []


def test_cli_user_error_is_one_line_exit_2():
    result = subprocess.run([sys.executable, "-m", "ace.cli", "generate", "--config", "nope"],
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "neither a named configuration" in result.stderr
    assert "Traceback" not in result.stderr
