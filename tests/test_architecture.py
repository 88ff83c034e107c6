"""The shape of the house: imports point one way.

The graph counts every project import, including those made inside functions (a lazy import is
for start-up time, never to hide an arrow that points up), and leaves out ``if TYPE_CHECKING:``
blocks, which never run. Third-party packages are not part of it.

Importing ``a.b.c`` first runs the ``__init__`` of ``a`` and of ``a.b``: an import counts as an
arrow to those packages too (unless the importer is inside them: their ``__init__`` is already
running), so a cycle through a package ``__init__`` is a cycle here. A lazy ``__init__``
(``exporter._lazy``) imports nothing when it runs; ``from package import name`` then leads to
the module its ``_EXPORTS`` names.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("exporter", "workbench")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))}


def _ancestors(name: str) -> set[str]:
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


def _resolve(module: str, relative: str) -> str:
    if not relative.startswith("."):
        return relative
    level = len(relative) - len(relative.lstrip("."))
    base = module.split(".")[: len(module.split(".")) - level + 1]
    rest = relative[level:]
    return ".".join(base + ([rest] if rest else []))


def lazy_exports_of(name: str, tree: ast.Module) -> dict[str, str]:
    """A lazy package ``__init__``'s ``_EXPORTS``: public name → the module it is imported from."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_EXPORTS" for t in node.targets):
            exports = ast.literal_eval(_expand_fromkeys(node.value))
            return {key: _resolve(name, where) for key, where in exports.items()}
    return {}


def _expand_fromkeys(node: ast.expr) -> ast.expr:
    """``{**dict.fromkeys(("a", "b"), ".m"), "c": ".n"}`` as a plain dict literal."""
    assert isinstance(node, ast.Dict), "_EXPORTS must be a dict literal"
    keys: list[ast.expr | None] = []
    values: list[ast.expr] = []
    for key, value in zip(node.keys, node.values):
        if key is None:
            assert isinstance(value, ast.Call) and ast.unparse(value.func) == "dict.fromkeys"
            names, where = value.args
            assert isinstance(names, ast.Tuple)
            keys.extend(names.elts)
            values.extend([where] * len(names.elts))
        else:
            keys.append(key)
            values.append(value)
    return ast.Dict(keys=keys, values=values)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                skipped.update(id(n) for n in ast.walk(child))
    return skipped


def import_graph(*, type_checking: bool = False) -> dict[str, set[str]]:
    """Project module → the project modules it imports (at any depth of its code); with
    ``type_checking``, the names imported for annotations only count too."""
    modules = _modules()

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    trees = {name: ast.parse(path.read_text(), filename=str(path)) for name, path in modules.items()}
    lazy = {name: lazy_exports_of(name, tree) for name, tree in trees.items() if modules[name].name == "__init__.py"}

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = trees[name]
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        skipped = set() if type_checking else _type_checking_nodes(tree)
        targets: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                targets.update(filter(None, (owner(alias.name) for alias in node.names)))
            elif isinstance(node, ast.ImportFrom):
                base_parts = package[: len(package) - node.level + 1] if node.level else []
                base = ".".join(base_parts + ([node.module] if node.module else []))
                for alias in node.names:
                    target = lazy.get(base, {}).get(alias.name) or owner(f"{base}.{alias.name}") or owner(base)
                    if target:
                        targets.add(target)
        inits_run = {a for t in targets for a in _ancestors(t) if a in modules and a not in _ancestors(name)}
        graph[name] = (targets | inits_run) - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _describe(graph: dict[str, set[str]], component: list[str]) -> str:
    members = set(component)
    return "\n".join(f"  {m} -> {sorted(graph[m] & members)}" for m in component)


def test_project_imports_have_no_cycle_even_counting_imports_inside_functions():
    graph = import_graph()
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n\n".join(_describe(graph, c) for c in found)


def test_even_names_imported_for_annotations_only_point_one_way():
    """A low module that names a high one's type, even under ``if TYPE_CHECKING:``, ties the
    two together for a reader and a type checker: it names what it reads as a Protocol of its
    own instead. A lazy package ``__init__`` naming its own submodules' types is not an arrow
    up (its submodules run it first, as any package's)."""
    graph = import_graph(type_checking=True)
    for name, targets in graph.items():
        graph[name] = {t for t in targets if not t.startswith(name + ".")}
    found = cycles(graph)
    assert not found, "cycles counting TYPE_CHECKING imports:\n" + "\n\n".join(_describe(graph, c) for c in found)


def test_exporter_never_imports_workbench():
    upward = sorted((a, b) for a, b_set in import_graph().items() for b in b_set
                    if a.startswith("exporter") and b.startswith("workbench"))
    assert not upward


def test_workbench_never_imports_the_cli():
    through_cli = sorted(a for a, targets in import_graph().items() if a.startswith("workbench") and "exporter.cli" in targets)
    assert not through_cli


def test_compat_imports_nothing_from_the_project_outside_compat():
    leaks = sorted((a, b) for a, targets in import_graph().items() if a.startswith("exporter.compat")
                   for b in targets if not b.startswith("exporter.compat"))
    assert not leaks


def test_an_import_of_a_submodule_counts_as_running_its_packages_init():
    graph = import_graph()
    # workbench.magics imports exporter.recording.*: exporter's and exporter.recording's
    # __init__ run first.
    assert {"exporter", "exporter.recording"} <= graph["workbench.magics"]
    # A module's own packages are already running; they add no arrow.
    assert "exporter" not in graph["exporter.session"]


def test_a_lazy_init_leads_from_a_public_name_to_its_module_and_runs_no_import():
    graph = import_graph()
    assert graph["exporter"] == {"exporter._lazy"}
    assert graph["exporter.graphs"] == {"exporter._lazy"}
    assert "exporter.graphs.session_graphs" in graph["exporter.session"]  # from .graphs import graphs_of


def test_the_cycle_finder_finds_a_cycle_hidden_in_a_function(tmp_path):
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
