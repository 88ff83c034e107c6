"""torch.onnx's translation registry (torchlib) and its opsets."""

from __future__ import annotations

import functools
import threading
from typing import Any, Callable

__all__ = [
    "Translations", "default_opset", "onnx_registry", "onnx_registry_with", "record_onnx_node", "registered_translation",
    "torchlib_min_opset",
]

#: Custom translations ``((FX node target, translation function), ...)``, as
#: ``torch.onnx.export(custom_translation_table=...)`` takes them (as pairs: hashable).
Translations = tuple[tuple[Any, Callable[..., Any]], ...]


def default_opset() -> int:
    """The opset ``torch.onnx.export`` uses when none is given."""
    from torch.onnx import _constants

    return _constants.ONNX_DEFAULT_OPSET


def torchlib_min_opset() -> int:
    """The lowest opset torchlib translates to (an older one is reached by version conversion)."""
    from torch.onnx._internal.exporter import _constants

    return _constants.TORCHLIB_OPSET


_REGISTRY_BUILD = threading.Lock()


@functools.lru_cache(maxsize=4)
def onnx_registry(opset_version: int) -> Any:
    """torchlib's registry for an opset. Built once per process: ``torch.onnx.export``
    rebuilds it on every call (~0.3 s), which is the main saving on a re-export."""
    import logging

    from torch.onnx._internal.exporter import _registration

    # Without torchvision installed, torch logs one warning per torchvision op it skips. The
    # level is the logger's, for every thread: one build at a time (the warm-up thread and an
    # export may both ask), or one build would restore the other's raised level too early.
    with _REGISTRY_BUILD:
        registration_logger = logging.getLogger(_registration.__name__)
        level = registration_logger.level
        registration_logger.setLevel(logging.ERROR)
        try:
            return _registration.ONNXRegistry.from_torchlib(opset_version=opset_version)
        finally:
            registration_logger.setLevel(level)


def record_onnx_node(op_type: str, *inputs: Any, num_outputs: int = 1, **attributes: Any) -> Any:
    """Inside a translation: add an ONNX node with ``num_outputs`` outputs (which onnxscript's
    ``op.Scan(...)`` cannot say) to the graph being built; returns its outputs. torchlib's own
    higher-order-op helper (``_torchlib/ops/hop.py: call_op``)."""
    from torch.onnx._internal.exporter._torchlib.ops import hop

    return hop.call_op(op_type, *inputs, _num_outputs=num_outputs, **attributes)


@functools.lru_cache(maxsize=8)
def onnx_registry_with(opset_version: int, translations: Translations) -> Any:
    """:func:`onnx_registry` plus custom translations, registered in order as
    ``torch.onnx.export(custom_translation_table=...)`` registers its entries: each wins over
    torchlib's own and over the ones before it. A translation whose arguments are not tensors
    (map_impl's body) has no inferable ONNX signature: torch logs a warning and dispatches every
    such node to it, which is what a custom translation wants. A copy, built once per opset and
    table: the shared registry is not changed. A function with ``handles_complex = True`` is
    registered for complex-valued inputs (ONNX sees a complex tensor as a real one with a
    trailing dim of 2), where torchlib has none."""
    import copy
    import logging

    from torch.onnx._internal.exporter import _registration

    base = onnx_registry(opset_version)
    registry = copy.copy(base)
    registry.functions = {name: list(entries) for name, entries in base.functions.items()}
    registration_logger = logging.getLogger(_registration.__name__)
    level = registration_logger.level
    registration_logger.setLevel(logging.ERROR)
    try:
        for target, function in translations:
            registry.register_op(target, function, is_complex=bool(getattr(function, "handles_complex", False)))
    finally:
        registration_logger.setLevel(level)
    return registry


def registered_translation(opset_version: int, target: Any) -> Any:
    """torchlib's translation of ``target`` (an OpOverload) at an opset, or None."""
    entries = onnx_registry(opset_version).get_decomps(target)
    return entries[0].onnx_function if entries else None
