"""One observed ``forward`` call: its inputs and outputs, kept for later export and checks.

What is kept, and what it costs (the hooks run inside every call of ``generate()``):

* tensors: by reference (no copy), with their version counter;
* a transformers ``DynamicCache``: a shallow copy of the cache and its layer objects, which
  keeps the tensors the call saw (the cache grows by concatenation into new tensors, so those
  are never written again; the cache object itself changes after the call);
* an ``EncoderDecoderCache``: the same for its two ``DynamicCache`` s;
* any other transformers cache (``StaticCache`` and kin write into their tensors in place):
  deep-copied. Those are the only tensor copies made.
* everything else (ints, bools, containers): as passed.

Flattening to pytree leaves and naming them waits until the recording is read. A kept tensor
that something writes in place later is caught by its version counter (:attr:`RecordedCall.intact`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

__all__ = ["RecordedCall", "keep", "kept_outputs"]


@dataclass(frozen=True, eq=False)  # equal when the same call: tensors have no single truth value
class RecordedCall:
    """What ``forward`` received and returned in one call.

    Attributes:
        index: position among the recorded calls (0 = first).
        args, kwargs: the inputs as kept (see the module docstring); use :meth:`inputs`.
        outputs: what forward returned, as kept; :meth:`output_tensors` flattens it.
        cloned: how many input tensors were copied (those of in-place caches only).
    """

    index: int
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    versions: tuple[int | None, ...]
    outputs: Any
    output_versions: tuple[int | None, ...]
    cloned: int = 0

    def inputs(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """``(args, kwargs)`` as ``forward`` received them. Caches are fresh objects on each
        call (running the model updates the cache it is given) holding the recorded tensors."""
        return tuple(_fresh(v) for v in self.args), {k: _fresh(v) for k, v in self.kwargs.items()}

    def output_tensors(self) -> list[Any]:
        """The output tensors in pytree order (the order of an exported model's outputs)."""
        import torch
        from torch.utils import _pytree

        return [leaf for leaf in _pytree.tree_leaves(list(self.outputs)) if isinstance(leaf, torch.Tensor)]

    @property
    def intact(self) -> bool:
        """False when a kept tensor (an input or output tensor passed at the top level) was
        written in place after it was recorded: this call's values are then no longer the
        ones the model saw or returned."""
        now = tuple(_version(v) for v in self.args) + tuple(_version(v) for v in self.kwargs.values())
        return now == self.versions and tuple(_version(v) for v in self.outputs) == self.output_versions


def _version(value: Any) -> int | None:
    version = getattr(value, "_version", None)
    return version if isinstance(version, int) else None


_CACHE_KIND: dict[type, str] = {}  # type -> "dynamic" / "pair" / "in_place" / "" (not a cache)


def _cache_kind(cls: type) -> str:
    kind = _CACHE_KIND.get(cls)
    if kind is None:
        from ..compat import is_kv_cache_type

        if not is_kv_cache_type(cls):
            kind = ""
        elif cls.__name__ == "DynamicCache":
            kind = "dynamic"
        elif cls.__name__ == "EncoderDecoderCache":
            kind = "pair"
        else:
            kind = "in_place"
        _CACHE_KIND[cls] = kind
    return kind


_PLAIN: dict[type, bool] = {}  # type -> all its state is in __dict__


def _shallow(obj: Any) -> Any:
    """``copy.copy`` for a plain object, several times faster (this runs twice per call)."""
    cls = type(obj)
    plain = _PLAIN.get(cls)
    if plain is None:
        plain = _PLAIN[cls] = hasattr(obj, "__dict__") and not any(vars(c).get("__slots__") for c in cls.__mro__)
    if not plain:
        return copy.copy(obj)
    new = object.__new__(cls)
    new.__dict__.update(obj.__dict__)
    return new


def _snapshot(cache: Any) -> tuple[Any, int]:
    """A cache object that keeps the tensors ``cache`` holds now, and how many were copied:
    a ``DynamicCache`` as a new object with new layer objects over the same tensors; an
    ``EncoderDecoderCache`` as a new pair of those; any other cache deep-copied (it writes its
    tensors in place)."""
    import torch

    kind = _cache_kind(type(cache))
    if kind == "dynamic":
        snapshot = _shallow(cache)
        layers = getattr(cache, "layers", None)
        if isinstance(layers, list):
            snapshot.layers = [_shallow(layer) for layer in layers]
        return snapshot, 0
    if kind == "pair":
        snapshot = copy.copy(cache)
        copies = 0
        for name in ("self_attention_cache", "cross_attention_cache"):
            inner = getattr(cache, name, None)
            if inner is not None:
                inner_snapshot, inner_copies = _snapshot(inner)
                setattr(snapshot, name, inner_snapshot)
                copies += inner_copies
        return snapshot, copies
    layers = getattr(cache, "layers", None) or ()
    copies = sum(isinstance(v, torch.Tensor) for layer in layers for v in vars(layer).values())
    return copy.deepcopy(cache), copies


def keep(value: Any) -> tuple[Any, int]:
    """``value`` as kept for later (see the module docstring) and how many tensors were copied."""
    import torch

    if isinstance(value, torch.Tensor):
        return (value.detach() if value.requires_grad else value), 0
    if _cache_kind(type(value)):
        return _snapshot(value)
    return value, 0


def _fresh(value: Any) -> Any:
    return _snapshot(value)[0] if _cache_kind(type(value)) else value


def kept_outputs(output: Any) -> tuple[Any, ...]:
    """What forward returned, as a tuple in pytree order: a dict's (or a transformers
    ``ModelOutput``'s) values, a tuple's items, else the output itself, each kept."""
    if isinstance(output, dict):
        items = tuple(output.values())
    elif type(output) in (tuple, list):
        items = tuple(output)
    else:
        items = (output,)
    return tuple(keep(item)[0] for item in items)
