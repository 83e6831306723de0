"""``ace generate`` output does not depend on the process that renders it: two interpreters
with different hash seeds (set and dict-of-set iteration order, ``id``-based names) render
byte-identical files. Comparing a render with itself in one process could not see that."""

import json
import os
import subprocess
import sys

_RENDER = """
import hashlib, json
from ace.config import NAMED_CONFIGS
from ace.flow.generate import render
print(json.dumps({f.relpath: hashlib.sha256(f.text.encode()).hexdigest()
                  for f in render(NAMED_CONFIGS["small"])}))
"""


def _start_render(hash_seed: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONHASHSEED=hash_seed)
    return subprocess.Popen([sys.executable, "-c", _RENDER], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _digests(process: subprocess.Popen) -> dict:
    out, err = process.communicate(timeout=900)
    assert process.returncode == 0, err
    return json.loads(out)


def test_output_is_deterministic_across_processes():
    runs = [_start_render("1"), _start_render("2")]         # both at once
    first, second = (_digests(p) for p in runs)
    assert first and any(name.endswith(".v") for name in first)
    differ = sorted(name for name in first if first[name] != second.get(name))
    assert first.keys() == second.keys() and not differ, f"files that differ: {differ}"
