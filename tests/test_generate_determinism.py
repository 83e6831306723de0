"""``ace generate`` output does not depend on the process that renders it: a second interpreter
with its own hash seed (set and dict-of-set iteration order, ``id``-based names) renders
byte-identical files. Comparing a render with itself in one process could not see that."""

import hashlib
import json
import os
import subprocess
import sys

from ace.config import NAMED_CONFIGS
from ace.flow.generate import render

_RENDER = """
import hashlib, json
from ace.config import NAMED_CONFIGS
from ace.flow.generate import render
print(json.dumps({f.relpath: hashlib.sha256(f.text.encode()).hexdigest()
                  for f in render(NAMED_CONFIGS["small"])}))
"""


def test_output_is_deterministic_across_processes():
    seed = "1" if os.environ.get("PYTHONHASHSEED") != "1" else "2"
    other = subprocess.Popen([sys.executable, "-c", _RENDER], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             env=dict(os.environ, PYTHONHASHSEED=seed))
    here = {f.relpath: hashlib.sha256(f.text.encode()).hexdigest()
            for f in render(NAMED_CONFIGS["small"])}         # meanwhile, in this process
    out, err = other.communicate(timeout=900)
    assert other.returncode == 0, err
    there = json.loads(out)
    assert here and any(name.endswith(".v") for name in here)
    differ = sorted(name for name in here if here[name] != there.get(name))
    assert here.keys() == there.keys() and not differ, f"files that differ: {differ}"
