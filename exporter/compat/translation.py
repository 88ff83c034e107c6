"""torch.onnx's translation to ONNX IR and onnxscript's optimizer and version converter; what a
failed translation says (torch.onnx's ``ConversionError`` chain, read as a :class:`TranslationFailure`)."""

from __future__ import annotations

import contextlib
import functools
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = [
    "TranslationFailure", "convert_onnx_version", "newer_translation_opset", "onnxscript_optimizer_parts",
    "optimize_onnx_ir", "rename_onnx_axes", "translate_to_onnx_ir", "translation_failure",
]

# torch.onnx's _core: ``ConversionError(f"Error when translating node {node.format_node()}. See the
# stack trace ...")``, where ``format_node`` reads ``%name : [num_users=1] = call_function[target=...](args = ...``.
_TRANSLATING = re.compile(r"Error when translating node %(?P<node>\S+) : .*?\[target=(?P<target>.+?)\]\(", re.S)
# ``DispatchError(f"No ONNX function found for {node.target!r}. Failure message: {message}")``.
_NO_FUNCTION = "No ONNX function found for "
_OVERLOAD_REPR = re.compile(r"<OpOverload\(op='(?P<op>[^']+)', overload='(?P<overload>[^']+)'\)>")


@dataclass(frozen=True)
class TranslationFailure:
    """A node torch.onnx could not translate, read from the exception chain it raised.

    ``node``: the FX node's name; ``target``: its op as torch names it (``aten.bincount.default``,
    ``torch.ops.`` left out); ``cause``: the deepest exception's message (its first line, torch's
    reprs of ops made readable), ``cause_type`` that exception's type; ``missing``: no translation
    is registered for the op (torch's ``DispatchError``), as opposed to a translation that raised;
    ``raised_in``: the file of the frame that raised the deepest exception."""

    node: str
    target: str
    cause: str
    cause_type: str
    missing: bool
    raised_in: str | None = None


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes, outermost first (``raise ... from`` links, else the implicit context)."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    return chain


def _readable(text: str) -> str:
    return _OVERLOAD_REPR.sub(lambda m: f"{m['op']}.{m['overload']}", text)


def translation_failure(exc: BaseException) -> TranslationFailure | None:
    """What failed in a translation to ONNX (:func:`translate_to_onnx_ir`), or None when ``exc``
    is not torch.onnx's report of a node it could not translate. In a subgraph (a ``map`` body)
    the innermost node is named."""
    chain = _chain(exc)
    nodes = [match for match in (_TRANSLATING.search(str(link)) for link in chain) if match is not None]
    if not nodes:
        return None
    node = nodes[-1]
    deepest = chain[-1]
    missing = any(type(link).__name__ == "DispatchError" or str(link).startswith(_NO_FUNCTION) for link in chain)
    lines = [line.strip() for line in str(deepest).splitlines() if line.strip()]
    cause = _readable(lines[0]) if lines else ""
    if missing and cause.startswith(_NO_FUNCTION):  # "No ONNX function found for x. Failure message: y"
        found, _, message = cause.partition(". Failure message: ")
        cause = f"{found}: {message}" if message else found
    raised_in = None
    traceback = deepest.__traceback__
    while traceback is not None:
        raised_in, traceback = traceback.tb_frame.f_code.co_filename, traceback.tb_next
    return TranslationFailure(node["node"], node["target"].removeprefix("torch.ops."), cause,
                              type(deepest).__name__, missing, raised_in)


def newer_translation_opset(target: str, opset_version: int) -> int | None:
    """The lowest opset above ``opset_version`` from which torch.onnx's own torchlib registers a
    translation of ``target`` (``aten.rms_norm.default``), or None. onnxscript's torchlib
    functions are registered at every opset, so only torch's can start later."""
    from torch.onnx._internal.exporter._torchlib import _torchlib_registry

    opsets = [meta.opset_introduced for meta in _torchlib_registry.get_torchlib_ops()
              if str(meta.fx_target).removeprefix("torch.ops.") == target and meta.opset_introduced > opset_version]
    return min(opsets) if opsets else None


def translate_to_onnx_ir(program: Any, registry: Any) -> Any:
    """Translate a decomposed ExportedProgram to an ``onnx_ir.Model``."""
    from torch.onnx._internal.exporter import _core

    with _op_signatures_reused():
        return _core._exported_program_to_onnx_program(program, registry=registry).model


# torch.onnx's graph builder (``_building.OpRecorder.eval``) turns the ONNX schema of every
# op it emits into an ``onnx_ir`` OpSignature, anew each time: a third of translating
# ResNet-50. The signature depends on the schema alone and the builder only reads it, so
# during a translation each schema's is built once. One schema per (domain, name, version).
_SIGNATURES: dict[tuple[str, str, int], Any] = {}
_SIGNATURES_LOCK = threading.Lock()
_signature_users = 0
_library_from_op_schema: Any = None


@contextlib.contextmanager
def _op_signatures_reused() -> Iterator[None]:
    """``OpSignature.from_op_schema`` memoized while any translation runs (a count, so that
    translations in two threads restore the library's method once, after the last)."""
    global _signature_users, _library_from_op_schema
    from onnx_ir import schemas

    with _SIGNATURES_LOCK:
        if _signature_users == 0:
            _library_from_op_schema = schemas.OpSignature.__dict__["from_op_schema"]
            build = schemas.OpSignature.from_op_schema

            def reused(cls: Any, op_schema: Any) -> Any:
                key = (op_schema.domain, op_schema.name, op_schema.since_version)
                signature = _SIGNATURES.get(key)
                if signature is None:
                    signature = _SIGNATURES[key] = build(op_schema)
                return signature

            schemas.OpSignature.from_op_schema = classmethod(reused)  # type: ignore[method-assign, assignment]
        _signature_users += 1
    try:
        yield
    finally:
        with _SIGNATURES_LOCK:
            _signature_users -= 1
            if _signature_users == 0:
                schemas.OpSignature.from_op_schema = _library_from_op_schema  # type: ignore[method-assign]


def optimize_onnx_ir(model: Any) -> Any:
    """The optimization ``torch.onnx.export(optimize=True)`` applies (in place; returns it)."""
    from torch.onnx._internal._lazy_import import onnxscript_apis

    return onnxscript_apis.optimize(model)


def onnxscript_optimizer_parts() -> dict[str, Any]:
    """What :func:`optimize_onnx_ir` is built of (onnxscript 0.7: ``optimize_ir`` with its
    defaults, then ``onnx_fusions.fuse``), for running its passes one by one
    (:mod:`exporter.passes`): onnxscript's private constant-folding pass and its size limits,
    and the default rewrite rules (``rewriter._DEFAULT_REWRITE_RULES``)."""
    from onnxscript import rewriter
    from onnxscript.optimizer import _constant_folding
    from onnxscript.rewriter import onnx_fusions

    return {
        "FoldConstantsPass": _folding_without_known_inference(_constant_folding.FoldConstantsPass),
        "input_size_limit": _constant_folding.DEFAULT_CONSTANT_FOLD_INPUT_SIZE_LIMIT,
        "output_size_limit": _constant_folding.DEFAULT_CONSTANT_FOLD_OUTPUT_SIZE_LIMIT,
        "RewritePass": rewriter.RewritePass,
        "default_rewrite_rules": linear_rewrite_rules(rewriter._DEFAULT_REWRITE_RULES),
        "fuse": onnx_fusions.fuse,
        "fixpoint_steps": 2,  # optimize_ir(num_iterations=2, stop_if_no_change=True)
    }


@functools.cache  # one class per library class, not a new one on every optimize
def _folding_without_known_inference(base: type) -> type:
    """onnxscript's constant-folding pass, minus the ONNX shape inference it runs node by node
    where that can only say what the node's outputs already say: a type and a fully static
    shape each. Its ``_do_inference`` merges the inferred shape under the known one, which
    keeps every int dim, and sets the inferred type, which equals the known one. So the model
    comes out the same, byte for byte, and a static graph skips most of the inference (each
    call serializes the node and its input types: about half the pass on a static ViT)."""

    class FoldConstantsPass(base):
        def _do_inference(self, node: Any) -> None:
            if node.outputs and all(_type_and_static_shape_known(value) for value in node.outputs):
                return
            super()._do_inference(node)

    FoldConstantsPass.__qualname__ = base.__qualname__  # errors name a pass by its repr's class name
    return FoldConstantsPass


def _type_and_static_shape_known(value: Any) -> bool:
    shape = value.shape
    return value.type is not None and shape is not None and all(isinstance(dim, int) for dim in shape)


def linear_rewrite_rules(rules: Any) -> list[Any]:
    """``rules`` (onnxscript ``RewriteRule`` s), each whose pattern's (first) output node has
    one op type copied with a ``try_rewrite`` that skips a node of another op type.

    The rule set tries every rule on every node. onnxscript 0.7's matcher, for a pattern with
    several output nodes (the default rules' ``SlicesSplit``), lists every node of the graph
    by op type *before* it checks the node it was given: O(nodes²), 35 of the 40 s the
    optimizer took on a stack of 1,000 small blocks. For the others each try sets up a match
    state before it fails on the op type (tiny BERT: 17,700 tries, about half of the rewrite
    pass). A node of another op type can never match the pattern's output node, so skipping
    it changes no rewrite. The library's rule objects are left as they are."""
    import copy

    kept = []
    for rule in rules:
        pattern = getattr(rule, "_target_pattern", None)
        first = pattern.output_nodes[0].op_identifier() if pattern is not None and pattern.output_nodes else None
        if first is None:
            kept.append(rule)
            continue
        filtered = copy.copy(rule)
        filtered.try_rewrite = _first_op_only(rule.try_rewrite, first[1])
        kept.append(filtered)
    return kept


def _first_op_only(try_rewrite: Any, op_type: str) -> Any:
    def first_op_only(model: Any, graph_or_function: Any, node: Any, **options: Any) -> Any:
        if node.op_type != op_type:
            return None
        return try_rewrite(model, graph_or_function, node, **options)

    return first_op_only


def convert_onnx_version(model: Any, opset_version: int) -> Any:
    from torch.onnx._internal._lazy_import import onnxscript_apis

    return onnxscript_apis.convert_version(model, opset_version)


def rename_onnx_axes(model: Any, mapping: dict[str, str]) -> None:
    """Rename symbolic dims (and the symbols inside dim expressions) everywhere in a model."""
    from torch.onnx._internal.exporter import _ir_passes

    renames: dict[Any, str] = dict(mapping)  # str keys are what rename_axis looks up
    _ir_passes.rename_axis(model, renames)
