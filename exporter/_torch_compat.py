"""Every use of a private torch / onnxscript API, in one place.

Each function here is covered by ``tests/exporter/test_torch_compat.py`` so that a torch
upgrade that moves or changes one of them fails loudly in one obvious test.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Iterator


def tree_flatten_with_path(value: Any) -> list[tuple[tuple[Any, ...], Any]]:
    """``torch.utils._pytree.tree_flatten_with_path`` (the flattening torch.export uses)."""
    from torch.utils import _pytree

    return _pytree.tree_flatten_with_path(value)[0]


def pytree_children(value: Any) -> list[tuple[str, Any]] | None:
    """The direct children of a pytree node as ``(key, child)``; None for a leaf."""
    from torch.utils import _pytree

    from .inputs import key_path_to_str

    if _pytree.tree_is_leaf(value):
        return None
    flat, _ = _pytree.tree_flatten_with_path(value, is_leaf=lambda node: node is not value)
    return [(key_path_to_str("", path)[1:], child) for path, child in flat]


@contextlib.contextmanager
def size_oblivious_capture() -> Iterator[None]:
    """Capture so that a size-0/1 example does not specialize its dim (what torch.onnx does)."""
    import torch.fx.experimental._config as fx_config

    with fx_config.patch(backed_size_oblivious=True):
        yield


def default_opset() -> int:
    """The opset ``torch.onnx.export`` uses when none is given."""
    from torch.onnx import _constants

    return _constants.ONNX_DEFAULT_OPSET


def torchlib_min_opset() -> int:
    from torch.onnx._internal.exporter import _constants

    return _constants.TORCHLIB_OPSET


@functools.lru_cache(maxsize=4)
def onnx_registry(opset_version: int) -> Any:
    """The torchlib registry for an opset. Built once per process: ``torch.onnx.export``
    rebuilds it on every call (~0.3 s), which is the main saving on a re-export."""
    from torch.onnx._internal.exporter import _registration

    return _registration.ONNXRegistry.from_torchlib(opset_version=opset_version)


def decompose_for_onnx(program: Any, registry: Any) -> Any:
    """Run the ONNX-friendly decompositions and type promotion torch.onnx applies."""
    from torch.onnx._internal.exporter import _core

    return _core._prepare_exported_program_for_export(program, registry=registry)


def translate_to_onnx_ir(program: Any, registry: Any) -> Any:
    """Translate a decomposed ExportedProgram to an ``onnx_ir.Model``."""
    from torch.onnx._internal.exporter import _core

    return _core._exported_program_to_onnx_program(program, registry=registry).model


def optimize_onnx_ir(model: Any) -> Any:
    """The optimization ``torch.onnx.export(optimize=True)`` applies (in place; returns it)."""
    from torch.onnx._internal._lazy_import import onnxscript_apis

    return onnxscript_apis.optimize(model)


def convert_onnx_version(model: Any, opset_version: int) -> Any:
    from torch.onnx._internal._lazy_import import onnxscript_apis

    return onnxscript_apis.convert_version(model, opset_version)


def draft_export_report(program: Any) -> Any:
    """The ``DraftExportReport`` attached by ``torch.export.draft_export`` (or None)."""
    return getattr(program, "_report", None)


def output_paths(program: Any) -> list[str]:
    """Readable names of a program's user outputs from its output pytree spec:
    ``output`` for a single tensor, ``output.0`` / ``logits`` for tuples / dicts."""
    from torch.utils import _pytree

    from .inputs import key_path_to_str

    spec = program.call_spec.out_spec
    if spec is None:
        return []
    positions = _pytree.tree_unflatten(list(range(spec.num_leaves)), spec)
    flat = _pytree.tree_flatten_with_path(positions)[0]
    if len(flat) == 1 and not flat[0][0]:
        return ["output"]
    names = []
    for path, _ in flat:
        name = key_path_to_str("output", path)
        if isinstance(positions, dict):
            name = name.removeprefix("output.")
        names.append(name)
    return names


def rename_onnx_axes(model: Any, mapping: dict[str, str]) -> None:
    """Rename symbolic dims (and the symbols inside dim expressions) everywhere in a model."""
    from torch.onnx._internal.exporter import _ir_passes

    _ir_passes.rename_axis(model, mapping)
