"""The package's layers, checked on the import statements themselves (parsed, not imported).

- ``ace/`` root modules are shared definitions: they import no layer (``ace.hw``, ``ace.sw``,
  ``ace.flow``); ``ace/cli.py``, the command, is the exception.
- ``ace/sw`` (software stack) and ``ace/hw`` (hardware) never import each other.
- Nothing in ``ace/`` imports ``testbench`` or ``sim_harness``, except ``ace/cli.py``, and only
  inside the functions of the commands that need them.
- No import cycle in ``ace/``, ``sim_harness/`` or ``testbench/`` (lazy imports count).

And the harness build cache is keyed by what a build is made of.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("ace", "sim_harness", "testbench")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in sorted((REPO / pkg).rglob("*.py"))}


def imports_of(path: Path, modules: dict[str, Path]) -> list[tuple[str, bool]]:
    """(imported module, at module level) for every project import in ``path``."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    top_level = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            # ``from pkg import mod`` imports the module pkg.mod when there is one.
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                       for a in node.names]
        else:
            continue
        for target in targets:
            if target.split(".")[0] in PACKAGES:
                found.append((target, id(node) in top_level))
    return found


def is_in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def layer_violations() -> list[str]:
    modules = all_modules()
    bad = []
    for name, path in modules.items():
        if not is_in(name, "ace"):
            continue
        for target, top_level in imports_of(path, modules):
            where = f"{path.relative_to(REPO)} imports {target}"
            if name == "ace.cli":
                if is_in(target, "sim_harness") or is_in(target, "testbench"):
                    if top_level:
                        bad.append(f"{where} at module level (only inside a command)")
                continue
            if is_in(target, "sim_harness") or is_in(target, "testbench"):
                bad.append(where)
            elif is_in(name, "ace.sw") and is_in(target, "ace.hw"):
                bad.append(where + " (software imports hardware)")
            elif is_in(name, "ace.hw") and is_in(target, "ace.sw"):
                bad.append(where + " (hardware imports software)")
            elif name.count(".") == 1 and any(is_in(target, f"ace.{layer}")
                                              for layer in ("hw", "sw", "flow")):
                bad.append(where + " (a shared root module imports a layer)")
    return bad


def import_cycles() -> list[list[str]]:
    modules = all_modules()
    graph = {name: sorted({t for t, _ in imports_of(path, modules) if t in modules} - {name})
             for name, path in modules.items()}
    cycles, state = [], {}

    def visit(node: str, stack: list[str]):
        state[node] = "open"
        stack.append(node)
        for nxt in graph[node]:
            if state.get(nxt) == "open":
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = "done"

    for name in graph:
        if name not in state:
            visit(name, [])
    return cycles


def test_layers_import_only_what_they_may():
    assert layer_violations() == []


def test_no_import_cycles():
    assert import_cycles() == []


def test_checker_sees_violations(tmp_path, monkeypatch):
    """The checks can fail: a hardware module importing the compiler, and a cycle, are found."""
    fake = tmp_path / "repo"
    for pkg in PACKAGES:
        (fake / pkg).mkdir(parents=True)
        (fake / pkg / "__init__.py").write_text("")
    for sub in ("hw", "sw"):
        (fake / "ace" / sub).mkdir()
        (fake / "ace" / sub / "__init__.py").write_text("")
    (fake / "ace" / "hw" / "block.py").write_text("from ace.sw import compiler\n")
    (fake / "ace" / "sw" / "compiler.py").write_text("from . import golden\n")
    (fake / "ace" / "sw" / "golden.py").write_text("def f():\n    import ace.sw.compiler\n")
    (fake / "ace" / "config.py").write_text("import sim_harness\n")
    monkeypatch.setitem(globals(), "REPO", fake)
    bad = layer_violations()
    cycles = import_cycles()
    assert any("ace/hw/block.py imports ace.sw.compiler" in b for b in bad)
    assert any("ace/config.py imports sim_harness" in b for b in bad)
    assert ["ace.sw.compiler", "ace.sw.golden", "ace.sw.compiler"] in cycles


@pytest.fixture
def repo_copy(tmp_path, monkeypatch):
    """The files a build key reads, copied, with the simulator module looking there."""
    from sim_harness import simulator

    copy = tmp_path / "repo"
    shutil.copytree(REPO / "ace", copy / "ace", ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "sim_harness").mkdir()
    for name in simulator.HARNESS_GENERATORS:
        shutil.copy(REPO / "sim_harness" / name, copy / "sim_harness" / name)
    monkeypatch.setattr(simulator, "REPO", copy)
    return copy


def test_build_key_follows_the_hardware_only(repo_copy):
    from sim_harness.simulator import build_key, generator_sources
    from sim_harness.systems import load_system

    spec = load_system("ring8")
    sources = {str(p.relative_to(repo_copy)) for p in generator_sources()}
    assert "ace/hw/engine.py" in sources and "ace/config.py" in sources
    assert not any(s.startswith(("ace/sw/", "ace/flow/")) for s in sources)
    key = build_key(spec)
    with open(repo_copy / "ace" / "sw" / "compiler.py", "a") as f:
        f.write("\n# an edit to the compiler\n")
    assert build_key(spec) == key
    with open(repo_copy / "ace" / "hw" / "alu" / "lane.py", "a") as f:
        f.write("\n# an edit to an ALU lane\n")
    assert build_key(spec) != key
