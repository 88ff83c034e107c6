"""transformers' ``DynamicCache`` as a torch pytree, flattened by layer."""

from __future__ import annotations

import sys
import threading
from typing import Any

from .pytree import key_path_to_str

__all__ = [
    "UnsupportedCacheLayer", "holds_kv_cache", "is_kv_cache_type", "kv_cache_leaf_names", "prepare_kv_cache_pytree",
    "register_kv_cache_pytree",
]

# transformers' own registration (``register_dynamic_cache_export_support``) rebuilds a
# DynamicCache in its unflatten function through ``DynamicCache(ddp_cache_data)``, whose
# ``DynamicLayer.update`` -> ``lazy_initialization`` creates ``torch.tensor([])`` and
# concatenates the cached tensors onto it. torch runs unflatten *inside* the traced region:
# once at capture (4 lifted constants for 2 layers) and again when ``run_decompositions``
# retraces the program, where the new empty tensors become ``lifted_tensor_4...`` in the
# signature without being added to ``ExportedProgram.constants`` (SpecViolationError), and
# every round adds a ``cat`` with an empty tensor. The registration below rebuilds the cache
# by setting each layer's ``keys`` / ``values``: no tensor is created, the graph reads the
# inputs directly. It flattens by layer, so the cache's leaves read ``cache.0.key``,
# ``cache.0.value``, ``cache.1.key``... and its dynamic_shapes take the legacy tuple form,
# one ``[key_dims, value_dims]`` pair per layer.


class UnsupportedCacheLayer(TypeError):
    """Raised while flattening a ``DynamicCache`` that holds a layer other than a plain
    ``DynamicLayer`` (a sliding-window or quantized layer keeps state besides its tensors,
    which the flattening by layer would drop)."""

    def __init__(self, expected: str, found: str) -> None:
        super().__init__(f"the exporter flattens a DynamicCache made of {expected}s only, and this one holds a {found}")
        self.expected = expected  # class name of the layers that flatten: "DynamicLayer"
        self.found = found  # class name of the first layer that does not


_KV_CACHE_INSTALLED: list[bool] = []
_KV_CACHE_LOCK = threading.Lock()


def _dynamic_cache_classes() -> tuple[type, type] | None:
    """``(DynamicCache, DynamicLayer)`` when transformers is already imported (never imports it)."""
    module = sys.modules.get("transformers.cache_utils")
    if module is None:
        return None
    cache_cls, layer_cls = getattr(module, "DynamicCache", None), getattr(module, "DynamicLayer", None)
    if cache_cls is None or layer_cls is None or not hasattr(layer_cls, "lazy_initialization"):
        return None  # a transformers without per-layer caches (< 4.55): its own registration applies
    return cache_cls, layer_cls


def _unflatten_dynamic_layer(layer_cls: type, values: list[Any]) -> Any:
    keys, values_ = values
    layer = layer_cls()
    if keys is not None:
        layer.keys, layer.values = keys, values_
        layer.dtype, layer.device = getattr(keys, "dtype", None), getattr(keys, "device", None)
        layer.is_initialized = True
    return layer


def _dynamic_cache_layers(cache: Any, layer_cls: type) -> list[Any]:
    """The layers of a DynamicCache, each a plain ``DynamicLayer`` (a sliding-window or
    quantized layer keeps state besides its tensors, which this flattening would drop)."""
    other = next((type(layer) for layer in cache.layers if type(layer) is not layer_cls), None)
    if other is not None:
        raise UnsupportedCacheLayer(layer_cls.__name__, other.__name__)
    return list(cache.layers)


def _unflatten_dynamic_cache(cache_cls: type, layers: list[Any]) -> Any:
    cache = cache_cls()
    cache.layers = list(layers)
    return cache


def register_kv_cache_pytree() -> bool:
    """Make torch flatten transformers' ``DynamicCache`` by layer (``cache.0.key`` ...),
    rebuilding it without creating tensors (see above). Replaces transformers' registration
    for the rest of the process (torch has one registry); idempotent. False when
    transformers is not imported or has no ``DynamicLayer``."""
    classes = _dynamic_cache_classes()
    if classes is None:
        return False
    if _KV_CACHE_INSTALLED:
        return True
    from torch.fx import _pytree as fx_pytree
    from torch.utils import _pytree

    cache_cls, layer_cls = classes
    with _KV_CACHE_LOCK:
        if _KV_CACHE_INSTALLED:
            return True
        for cls in (cache_cls, layer_cls):
            if cls in _pytree.SUPPORTED_NODES:
                _pytree._deregister_pytree_node(cls)
            if cls in fx_pytree.SUPPORTED_NODES:  # transformers' spec flattener (by kind, not layer)
                fx_pytree._deregister_pytree_flatten_spec(cls)
        _pytree.register_pytree_node(
            layer_cls,
            lambda layer: ([layer.keys, layer.values], None),
            lambda values, _: _unflatten_dynamic_layer(layer_cls, list(values)),
            serialized_type_name=f"{layer_cls.__module__}.{layer_cls.__name__}",
            flatten_with_keys_fn=lambda layer: (
                [(_pytree.MappingKey("key"), layer.keys), (_pytree.MappingKey("value"), layer.values)], None
            ),
        )
        _pytree.register_pytree_node(
            cache_cls,
            lambda cache: (_dynamic_cache_layers(cache, layer_cls), None),
            lambda layers, _: _unflatten_dynamic_cache(cache_cls, list(layers)),
            serialized_type_name=f"{cache_cls.__module__}.{cache_cls.__name__}",
            flatten_with_keys_fn=lambda cache: (
                [(_pytree.SequenceKey(i), layer) for i, layer in enumerate(_dynamic_cache_layers(cache, layer_cls))],
                None,
            ),
        )
        _KV_CACHE_INSTALLED.append(True)
    return True


def is_kv_cache_type(cls: Any) -> bool:
    """Whether a pytree node type is a transformers KV cache (or one of its layers)."""
    module = getattr(cls, "__module__", "") or ""
    return isinstance(cls, type) and module.startswith("transformers.") and module.endswith("cache_utils")


def holds_kv_cache(value: Any, depth: int = 2) -> bool:
    """Whether ``value`` is, or holds within ``depth`` levels of dicts/lists/tuples, a
    transformers ``DynamicCache``."""
    classes = _dynamic_cache_classes()
    if classes is None:
        return False
    if isinstance(value, classes[0]):
        return True
    if depth and isinstance(value, dict):
        return any(holds_kv_cache(v, depth - 1) for v in value.values())
    if depth and isinstance(value, (list, tuple)):
        return any(holds_kv_cache(v, depth - 1) for v in value)
    return False


def prepare_kv_cache_pytree(model: Any, args: tuple, kwargs: Any) -> bool:
    """Install :func:`register_kv_cache_pytree` before inputs are flattened when they hold a
    ``DynamicCache`` or the model is a transformers model (which may return one)."""
    if "transformers.cache_utils" not in sys.modules:
        return False
    from_transformers = any(
        (getattr(cls, "__module__", "") or "").startswith("transformers.") for cls in type(model).__mro__
    )
    if from_transformers or holds_kv_cache(args, 3) or holds_kv_cache(dict(kwargs), 3):
        return register_kv_cache_pytree()
    return False


def kv_cache_leaf_names(prefix: str, value: Any) -> dict[str, str]:
    """ONNX names of the tensors inside the transformers KV caches in ``value`` (the input
    ``prefix``), by leaf path: ``cache.0.key`` -> ``past_key_values.0.key`` (with two caches,
    ``past_key_values0.`` / ``past_key_values1.``)."""
    from torch.utils import _pytree

    classes = _dynamic_cache_classes()
    if classes is None:
        return {}
    found = [
        (path, node)
        for path, node in _pytree.tree_flatten_with_path(value, is_leaf=lambda node: isinstance(node, classes[0]))[0]
        if isinstance(node, classes[0])
    ]
    out: dict[str, str] = {}
    for number, (path, cache) in enumerate(found):
        name = "past_key_values" if len(found) == 1 else f"past_key_values{number}"
        for sub, _ in _pytree.tree_flatten_with_path(cache)[0]:
            out[key_path_to_str(prefix, tuple(path) + tuple(sub))] = key_path_to_str(name, sub)
    return out
