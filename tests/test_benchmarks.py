"""The benchmark scripts are not run by the suite (they time things), but what they import from
the project must exist: a module moved or a name renamed breaks a script nobody runs until the
next measurement."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

BENCHMARKS = sorted((Path(__file__).resolve().parents[1] / "benchmarks").glob("*.py"))


def _project_imports(path: Path) -> list[tuple[str, str | None]]:
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in ("exporter", "workbench"):
            found.extend((node.module, alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            found.extend((alias.name, None) for alias in node.names if alias.name.split(".")[0] in ("exporter", "workbench"))
    return found


@pytest.mark.parametrize("script", BENCHMARKS, ids=lambda p: p.name)
def test_every_project_name_a_benchmark_imports_exists(script):
    missing = []
    for module_name, name in _project_imports(script):
        module = importlib.import_module(module_name)
        if name is not None and not hasattr(module, name):
            try:
                importlib.import_module(f"{module_name}.{name}")
            except ModuleNotFoundError:
                missing.append(f"from {module_name} import {name}")
    assert not missing, f"{script.name}: {missing}"


def test_the_check_sees_a_name_that_does_not_exist(tmp_path):
    script = tmp_path / "stale.py"
    script.write_text("def f():\n    from exporter.passes import no_such_runner\n")
    assert _project_imports(script) == [("exporter.passes", "no_such_runner")]
    assert not hasattr(importlib.import_module("exporter.passes"), "no_such_runner")
