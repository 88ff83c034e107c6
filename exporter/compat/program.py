"""What a captured ``ExportedProgram`` holds in private fields or undocumented forms: its
output names, its guards as source text, the draft-export report, FX node provenance."""

from __future__ import annotations

from typing import Any

from .kv_cache import is_kv_cache_type
from .pytree import key_path_to_str, tree_flatten_with_path

__all__ = ["draft_export_assumptions", "draft_export_report", "fx_node_origins", "guards_code", "output_paths", "unguarded_module"]


def draft_export_report(program: Any) -> Any:
    """The ``DraftExportReport`` attached by ``torch.export.draft_export`` (or None)."""
    return getattr(program, "_report", None)


def draft_export_assumptions(program: Any) -> list[tuple[str, str | None, int | None, str]]:
    """The data-dependent values ``torch.export.draft_export`` fixed at the example's (each a
    ``(expression, file, line, code)`` of its innermost frame outside torch), from its report's
    ``DATA_DEPENDENT_ERROR`` failures: the program holds only for inputs that give them again.
    Empty for any other program."""
    from .frames import is_user_file

    report = draft_export_report(program)
    if report is None:
        return []
    # Frames name their files by torch's process-wide intern ids; a report maps only the ids
    # first interned during its own export, so a file seen by an earlier export is looked up there.
    from torch._logging.structured import INTERN_TABLE

    filenames = {**{number: name for name, number in INTERN_TABLE.items()}, **report.str_to_filename}
    found = []
    for failure in getattr(report, "failures", ()):
        if getattr(failure, "xfail", False) or getattr(failure.failure_type, "name", "") != "DATA_DEPENDENT_ERROR":
            continue
        frames = [(filenames.get(f["filename"]), f) for f in failure.data.get("user_stack", ())]
        user = [(name, f) for name, f in frames if name and is_user_file(name)]
        name, frame = user[-1] if user else (None, {})
        found.append((str(failure.data.get("expr", "")), name, frame.get("line"), str(frame.get("loc", "")).strip()))
    return found


def output_paths(program: Any) -> list[str]:
    """Readable names of a program's user outputs from its output pytree spec:
    ``output`` for a single tensor, ``output.0`` / ``logits`` for tuples / dicts."""
    from torch.utils import _pytree

    spec = program.call_spec.out_spec
    if spec is None:
        return []
    positions = _pytree.tree_unflatten(list(range(spec.num_leaves)), spec)
    flat = tree_flatten_with_path(positions)
    if len(flat) == 1 and not flat[0][0]:
        return ["output"]
    names = []
    for path, _ in flat:
        name = key_path_to_str("output", path)
        if isinstance(positions, dict):
            name = name.removeprefix("output.")
        names.append(name)
    return _present_names(positions, names)


def _present_names(positions: Any, names: list[str]) -> list[str]:
    """Outputs inside a returned KV cache read ``present.0.key``, ``present.0.value`` ...
    (the convention of onnxruntime-genai and Optimum) instead of ``cache.0.key``."""
    from torch.utils import _pytree

    caches = tree_flatten_with_path(positions, is_leaf=lambda node: is_kv_cache_type(type(node)))
    firsts = {}  # position of a cache's first leaf -> its number of leaves
    for _, node in caches:
        if is_kv_cache_type(type(node)):
            leaves = _pytree.tree_leaves(node)
            if leaves:
                firsts[leaves[0]] = len(leaves)
    if not firsts:
        return names
    out = list(names)
    only_one = len(firsts) == 1
    for number, (first, count) in enumerate(sorted(firsts.items())):
        prefix = "present" if only_one else f"present{number}"
        for position in range(first, first + count):
            rest = names[position].removeprefix(names[first].rsplit(".", 2)[0] + ".")
            out[position] = f"{prefix}.{rest}"
    return out


def guards_code(program: Any) -> list[str]:
    """The shape guards a program was specialized under, as torch source text
    (``L['x'].size()[0] == 3``). ``ExportedProgram._guards_code`` is private."""
    return [str(code) for code in (getattr(program, "_guards_code", None) or ())]


def fx_node_origins(node: Any) -> tuple[str, ...]:
    """The names of the nodes an FX node was made from in the program it descends from,
    read from its ``meta["from_node"]`` provenance (``torch.fx.traceback.NodeSource``
    chains): the roots of the chain, e.g. a decomposed program's ``mul_8`` → the captured
    program's ``mul``. Empty when torch recorded none."""
    roots: list[str] = []

    def walk(sources: Any) -> None:
        for source in sources or ():
            parents = getattr(source, "from_node", None)
            if parents:
                walk(parents)
            elif getattr(source, "name", None):
                roots.append(source.name)

    walk(node.meta.get("from_node"))
    return tuple(dict.fromkeys(roots))


def unguarded_module(program: Any) -> Any:
    """``program.module()`` without the input guard check torch adds (``check_guards=False``,
    torch ≥ 2.9): it runs at sizes outside what torch proved, to see what it computes there."""
    try:
        return program.module(check_guards=False)
    except TypeError:  # pragma: no cover - an older torch checks only the input ranges
        return program.module()
