"""What to do next when a stage after capture fails: hints built from the error and the program.

Text only, from what the stage holds (the exception, the captured program); the diagnosis of a
capture failure, which needs the spec and the inputs, is :mod:`exporter.diagnose`."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

from .compat import formats, holds_kv_cache
from .compat.translation import TranslationFailure, newer_translation_opset, translation_failure
from .frames import is_user_file

if TYPE_CHECKING:
    from .inputs import BoundInputs

#: This package's directory: a translation failure raised here is one of our translations refusing a form.
_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep

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


def translate_hint(exc: BaseException, constants: list[str], opset_version: int | None = None) -> str:
    """The hint of a failed translate stage, the root cause's text first. ``constants``: the
    program's non-tensor outputs (``pipeline.translate.constant_outputs``), which ONNX cannot
    output. ``opset_version``: the (torchlib registry) opset translated at, to say whether an op
    with no translation has one at a newer opset."""
    if constants:
        return (f"forward returns non-tensor values ({', '.join(constants)}), which ONNX cannot "
                "output: return tensors (torch.tensor(value)), or drop them from the outputs")
    failure = translation_failure(exc)
    if failure is not None:
        headline, fix = translation_headline(failure), translation_fix(failure, opset_version)
        return headline if fix is None else f"{headline}. {fix}"
    root = _deepest(exc)
    lines = [line.strip() for line in str(root).splitlines() if line.strip()]
    cause = f"{type(root).__name__}: {lines[0]}" if lines else type(root).__name__
    if isinstance(root, NotImplementedError) and lines:
        return lines[0]  # a translation that refused a form says what to do instead
    return f"{cause}. Report it upstream with the exported program (session.save('model.pt2'))"


def translation_headline(failure: TranslationFailure) -> str:
    """A failed node's translation as one line, torch's (or onnxscript's, or our translation's)
    cause first, then the op and the FX node; torch's wrapping ("Error when translating node
    %x : [num_users=1] = call_function[...](args = ...). See the stack trace ...") left out."""
    if failure.missing:
        return f"{failure.cause} (node %{failure.node})"
    cause = failure.cause or "(no message)"
    return f"{cause} ({failure.cause_type} in the translation of {failure.target}, node %{failure.node})"


def translation_fix(failure: TranslationFailure, opset_version: int | None = None) -> str | None:
    """What can work for a node that failed to translate, or None when the cause says it (our
    own translations refuse a form with the fix in the message). A newer opset only when
    torch.onnx has the op there; ``custom_translation_table`` only for an op with no
    translation at all, never for one whose translation refused this call."""
    target = failure.target
    if failure.missing:
        complex_input = "complex-valued" in failure.cause
        newer = (newer_translation_opset(target, opset_version)
                 if opset_version is not None and not complex_input else None)
        if newer is not None:
            return f"torch.onnx translates {target} from opset {newer}: export with opset_version={newer}"
        spelled = f"torch.ops.{target}" if re.fullmatch(r"[\w.]+", target) else target
        which = "for complex-valued inputs" if complex_input else "at any opset"
        return (f"torch.onnx has no ONNX translation of {target} {which}: replace that call in the model with "
                "operators torch.onnx translates, or write the translation in onnxscript and export with "
                f"torch.onnx.export(..., custom_translation_table={{{spelled}: translation}})")
    if failure.raised_in is not None and failure.raised_in.startswith(_PACKAGE):
        return None
    return (f"torch.onnx's translation of {target} does not take this call (the reason above): change the call "
            "in the model into a form it takes, or keep that part in PyTorch; report it upstream with the "
            "exported program (session.save('model.pt2'))")


def _deepest(exc: BaseException) -> BaseException:
    root = exc
    while root.__cause__ is not None:
        root = root.__cause__
    return root


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
        mine = [f for f in frames if is_user_file(f[0])]
        if mine:
            file, line, _, code = mine[-1]
            return f" (used at {file}:{line}: {code})"
    return ""


def kv_cache_kwarg_hint(bound: BoundInputs | None) -> str | None:
    """When a KV cache reached forward through ``**kwargs`` (torch 2.13 cannot put dims on it)
    while forward has a cache parameter left unset, e.g. ``past_key_values=`` on a
    transformers 5 model, whose parameter is now ``cache``: say to pass it by that name."""
    var = bound.var_keyword if bound is not None else None
    if bound is None or not var:
        return None
    entries = bound.by_signature().get(var, {})
    given = next((key for key, value in entries.items() if holds_kv_cache(value, 3)), None)
    target = next((name for name in bound.unbound if "cache" in name or name == "past_key_values"), None)
    if given is None or target is None:
        return None
    renamed = " (transformers 5 renamed past_key_values to cache)" if (given, target) == ("past_key_values", "cache") else ""
    return (
        f"the KV cache was passed as {given}=, which forward takes only through **{var}{renamed}, and torch 2.13 "
        f"cannot apply dims to a **{var} entry: pass it as {target}=... "
        f"and key its dims by {target!r} (dynamic_shapes={{{target!r}: [[key_dims, value_dims]] * layers}}); "
        "its ONNX inputs still read past_key_values.0.key ..."
    )
