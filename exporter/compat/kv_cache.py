"""transformers' ``DynamicCache`` as a torch pytree, flattened by layer (plain and sliding-window layers)."""

from __future__ import annotations

import sys
import threading
from typing import Any

from .pytree import key_path_to_str, tree_flatten_with_path

__all__ = [
    "UnsupportedCacheLayer", "holds_kv_cache", "is_kv_cache_type", "kv_cache_leaf_names", "kv_cache_refusal",
    "kv_cache_windows", "prepare_kv_cache_pytree", "register_kv_cache_pytree", "sliding_layer_refusal",
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
#
# A ``DynamicSlidingWindowLayer`` (what ``generate()`` builds for Mistral's default config,
# Gemma2 and Gemma3: sliding or hybrid caches) flattens the same way, keeping its type and its
# window in the pytree context. Its only other state is ``cumulative_length`` (tokens seen),
# which equals the cached length until the window is full; it is rebuilt from the keys' length
# (a symbolic size while tracing, so the mask follows the ``past`` dim). A full window
# (``cumulative_length`` past the cached length) cannot be rebuilt from the tensors and is
# refused, as are layers that record their past (assisted decoding) and any other layer type.


class UnsupportedCacheLayer(TypeError):
    """Raised while flattening a ``DynamicCache`` holding a layer whose state is not all in its
    tensors: a quantized or other layer type, or a ``DynamicSlidingWindowLayer`` whose window
    is full (it has seen more tokens than it keeps) or that records its past."""

    def __init__(self, expected: str, found: str, reason: str = "") -> None:
        super().__init__(
            reason or f"the exporter flattens a DynamicCache made of {expected}s only, and this one holds a {found}"
        )
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


def _sliding_layer_class() -> type | None:
    """transformers' ``DynamicSlidingWindowLayer`` when it is imported and has the state this
    module rebuilds (``sliding_window``, ``cumulative_length``), else None."""
    module = sys.modules.get("transformers.cache_utils")
    cls = getattr(module, "DynamicSlidingWindowLayer", None) if module is not None else None
    return cls if isinstance(cls, type) and hasattr(cls, "get_mask_sizes") else None


def _unflatten_dynamic_layer(layer_cls: type, values: list[Any]) -> Any:
    keys, values_ = values
    layer = layer_cls()
    if keys is not None:
        layer.keys, layer.values = keys, values_
        layer.dtype, layer.device = getattr(keys, "dtype", None), getattr(keys, "device", None)
        layer.is_initialized = True
    return layer


def _unflatten_sliding_layer(sliding_cls: type, values: list[Any], window: int) -> Any:
    """A ``DynamicSlidingWindowLayer`` over ``values`` without running its ``__init__`` (which
    creates a tensor: inside a trace, a lifted constant): the attributes it sets, and
    ``cumulative_length`` from the keys' length (a SymInt while tracing). An empty layer is
    built by its ``__init__``: its first ``update`` needs the window tensor it creates."""
    keys, values_ = values
    if keys is None:  # an empty layer (a prefill's cache): as generate() builds it, to initialize itself
        return sliding_cls(sliding_window=window)
    layer: Any = object.__new__(sliding_cls)
    layer.keys, layer.values, layer.is_initialized = keys, values_, True
    layer.dtype, layer.device = getattr(keys, "dtype", None), getattr(keys, "device", None)
    layer.sliding_window, layer.record_past = window, False
    shape = getattr(keys, "shape", None)  # torch unflattens placeholders too (output paths)
    layer.cumulative_length = shape[-2] if shape is not None else 0
    return layer


def sliding_layer_refusal(layer: Any) -> str | None:
    """Why a ``DynamicSlidingWindowLayer`` cannot be flattened by its tensors alone, or None."""
    if getattr(layer, "record_past", False):
        return "a DynamicSlidingWindowLayer that records its past (assisted decoding): state besides its tensors"
    shape = getattr(getattr(layer, "keys", None), "shape", None)  # None also for torch's placeholders
    cached = shape[-2] if shape is not None and getattr(layer, "is_initialized", False) else 0
    seen = getattr(layer, "cumulative_length", 0)
    # while tracing both are symbolic sizes: comparing them would specialize the cache's length
    if type(seen) is int and type(cached) is int and seen != cached:
        return (f"a DynamicSlidingWindowLayer whose window of {layer.sliding_window} is full "
                f"({seen} tokens seen, {cached} kept): its position is not in its tensors")
    return None


def _sliding_layer_children(layer: Any) -> list[Any]:
    reason = sliding_layer_refusal(layer)
    if reason is not None:
        raise UnsupportedCacheLayer("DynamicLayer", type(layer).__name__, reason)
    return [layer.keys, layer.values]


def _dynamic_cache_layers(cache: Any, layer_cls: type) -> list[Any]:
    """The layers of a DynamicCache, each a plain ``DynamicLayer`` or a
    ``DynamicSlidingWindowLayer`` (any other layer keeps state besides its tensors, which this
    flattening would drop)."""
    allowed = (layer_cls, _sliding_layer_class())
    other = next((type(layer) for layer in cache.layers if type(layer) not in allowed), None)
    if other is not None:
        raise UnsupportedCacheLayer(layer_cls.__name__, other.__name__)
    return list(cache.layers)


def kv_cache_refusal(value: Any) -> str | None:
    """Why the transformers ``DynamicCache`` ``value`` (or the first cache inside a dict,
    list or tuple of them) cannot be flattened for export, as the layer it holds ("a
    QuantizedLayer (state besides its tensors)"), or None (also for a value holding no
    cache). Never raises."""
    classes = _dynamic_cache_classes()
    if classes is None:
        return None
    if isinstance(value, dict):
        return next((r for r in map(kv_cache_refusal, value.values()) if r), None)
    if isinstance(value, (list, tuple)):
        return next((r for r in map(kv_cache_refusal, value) if r), None)
    if not isinstance(value, classes[0]):
        return None
    sliding_cls = _sliding_layer_class()
    for layer in getattr(value, "layers", ()):
        if type(layer) is sliding_cls:
            reason = sliding_layer_refusal(layer)
            if reason:
                return reason
        elif type(layer) is not classes[1]:
            return f"a {type(layer).__name__} (state besides its tensors)"
    return None


def _unflatten_dynamic_cache(cache_cls: type, layers: list[Any]) -> Any:
    cache = cache_cls()
    cache.layers = list(layers)
    return cache


def register_kv_cache_pytree() -> bool:
    """Make torch flatten transformers' ``DynamicCache`` by layer (``cache.0.key`` ...),
    rebuilding it without creating tensors (see above); its ``DynamicSlidingWindowLayer`` s
    keep their type and window. Replaces transformers' registration for the rest of the
    process (torch has one registry); idempotent. False when transformers is not imported or
    has no ``DynamicLayer``."""
    classes = _dynamic_cache_classes()
    if classes is None:
        return False
    if _KV_CACHE_INSTALLED:
        return True
    from torch.fx import _pytree as fx_pytree
    from torch.utils import _pytree

    cache_cls, layer_cls = classes
    sliding_cls = _sliding_layer_class()
    with _KV_CACHE_LOCK:
        if _KV_CACHE_INSTALLED:
            return True
        for cls in (cache_cls, layer_cls, sliding_cls):
            if cls is None:
                continue
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
        if sliding_cls is not None:
            _pytree.register_pytree_node(
                sliding_cls,
                lambda layer: (_sliding_layer_children(layer), int(layer.sliding_window)),
                lambda values, window: _unflatten_sliding_layer(sliding_cls, list(values), window),
                serialized_type_name=f"{sliding_cls.__module__}.{sliding_cls.__name__}",
                flatten_with_keys_fn=lambda layer: (
                    list(zip((_pytree.MappingKey("key"), _pytree.MappingKey("value")), _sliding_layer_children(layer))),
                    int(layer.sliding_window),
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


def prepare_kv_cache_pytree(model: Any, args: tuple[Any, ...], kwargs: Any) -> bool:
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

    classes = _dynamic_cache_classes()
    if classes is None:
        return {}
    found = [
        (path, node)
        for path, node in tree_flatten_with_path(value, is_leaf=lambda node: isinstance(node, classes[0]))
        if isinstance(node, classes[0])
    ]
    out: dict[str, str] = {}
    for number, (path, cache) in enumerate(found):
        name = "past_key_values" if len(found) == 1 else f"past_key_values{number}"
        for sub, _ in tree_flatten_with_path(cache):
            out[key_path_to_str(prefix, tuple(path) + tuple(sub))] = key_path_to_str(name, sub)
    return out


def kv_cache_windows(prefix: str, value: Any) -> dict[str, int]:
    """The sliding window of every tensor of a ``DynamicSlidingWindowLayer`` inside the
    transformers KV caches in ``value`` (the input ``prefix``), by leaf path:
    ``cache.0.key`` -> 4096. Such a layer keeps at most ``window - 1`` tokens while its
    position is still in its tensors (see above)."""
    from torch.utils import _pytree

    classes, sliding_cls = _dynamic_cache_classes(), _sliding_layer_class()
    if classes is None or sliding_cls is None:
        return {}
    out: dict[str, int] = {}
    found = tree_flatten_with_path(value, is_leaf=lambda node: isinstance(node, classes[0]))
    for path, cache in found:
        if not isinstance(cache, classes[0]):
            continue
        layers: list[Any] = list(getattr(cache, "layers", ()))
        for number, layer in enumerate(layers):
            window = getattr(layer, "sliding_window", None)
            if type(layer) is sliding_cls and window is not None:
                for kind in ("key", "value"):
                    sub: tuple[Any, ...] = (_pytree.SequenceKey(number), _pytree.MappingKey(kind))
                    out[key_path_to_str(prefix, tuple(path) + sub)] = int(window)
    return out
