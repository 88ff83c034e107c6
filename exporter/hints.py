"""What to do next when a stage after capture fails: hints built from the error and the program."""

from __future__ import annotations

import re
from typing import Any

from .compat import formats

_OPERATOR = re.compile(r"\b(aten\.\w+(?:\.\w+)?|aten::\w+(?:\.\w+)?)")


def decompose_hint(exc: BaseException, program: Any = None) -> str:
    """The hint of a failed decompose stage: names what failed, a lifted constant (with the
    user line that uses it, when the captured ``program`` is given) or the operator."""
    name = formats.lifted_constant(exc)
    if name is not None:
        where = _constant_use(program, name)
        return (
            f"torch lost {name!r} while decomposing: a tensor the model creates inside forward, which "
            f"torch.export lifted as a constant{where}. The usual cause is an input or output type whose "
            "pytree unflatten function creates tensors (torch runs it inside the graph, again when "
            "decomposing): the exporter rebuilds transformers' DynamicCache without creating any, other "
            "cache classes may not. Pass a DynamicCache, export without the cache (use_cache=False), or "
            "report it upstream with the exported program (session.save('model.pt2'))"
        )
    match = _OPERATOR.search(str(exc))
    if match is not None:
        return (
            f"decomposing {match.group(1)} for ONNX failed; report it upstream with the exported program "
            "(session.save('model.pt2')), or rewrite that call in the model"
        )
    return (
        "a decomposition for ONNX failed (the error above says where); report it upstream with the exported "
        "program (session.save('model.pt2'))"
    )


def _constant_use(program: Any, name: str) -> str:
    """`` (used at file.py:12: code)`` for the first node using the lifted constant ``name``."""
    if program is None:
        return ""
    try:
        specs = program.graph_signature.input_specs
        placeholder = next(spec.arg.name for spec in specs if getattr(spec, "target", None) == name)
        node = next(n for n in program.graph.nodes if n.name == placeholder)
    except (StopIteration, AttributeError):
        return ""
    for user in node.users:
        frames = formats.traceback_frames(user.meta.get("stack_trace"))
        from .frames import is_user_file

        mine = [f for f in frames if is_user_file(f[0])]
        if mine:
            file, line, _, code = mine[-1]
            return f" (used at {file}:{line}: {code})"
    return ""


def kv_cache_kwarg_hint(bound: Any) -> str | None:
    """When a KV cache reached forward through ``**kwargs`` (torch 2.13 cannot put dims on it)
    while forward has a cache parameter left unset, e.g. ``past_key_values=`` on a
    transformers 5 model, whose parameter is now ``cache``: say to pass it by that name."""
    from . import compat

    var = getattr(bound, "var_keyword", None) if bound is not None else None
    if not var:
        return None
    entries = bound.by_signature().get(var, {})
    given = next((key for key, value in entries.items() if compat.holds_kv_cache(value, 3)), None)
    target = next((name for name in getattr(bound, "unbound", ()) if "cache" in name or name == "past_key_values"), None)
    if given is None or target is None:
        return None
    renamed = " (transformers 5 renamed past_key_values to cache)" if (given, target) == ("past_key_values", "cache") else ""
    return (
        f"the KV cache was passed as {given}=, which forward takes only through **{var}{renamed}, and torch 2.13 "
        f"cannot apply dims to a **{var} entry: pass it as {target}=... "
        f"and key its dims by {target!r} (dynamic_shapes={{{target!r}: [[key_dims, value_dims]] * layers}}); "
        "its ONNX inputs still read past_key_values.0.key ..."
    )
