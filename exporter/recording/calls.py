"""One observed ``forward`` call: its inputs and outputs, kept for later export and checks.

What is kept, and what it costs (the hooks run inside every call of ``generate()``):

* tensors: by reference (no copy), with their version counter;
* a transformers ``DynamicCache``: a shallow copy of the cache and its layer objects, which
  keeps the tensors the call saw (the cache grows by concatenation into new tensors, so those
  are never written again; the cache object itself changes after the call);
* any other transformers cache (``StaticCache`` and kin write into their tensors in place):
  its tensors cloned. Those are the only tensor copies made.
* everything else (ints, bools, containers): as passed.

Flattening to pytree leaves and naming them waits until the recording is read. A kept tensor
that something writes in place later is caught by its version counter (:attr:`RecordedCall.intact`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

__all__ = ["RecordedCall", "keep", "kept_outputs"]


@dataclass(frozen=True)
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


_CACHE_KIND: dict[type, str] = {}  # type -> "dynamic" / "in_place" / "" (not a cache)


def _cache_kind(cls: type) -> str:
    kind = _CACHE_KIND.get(cls)
    if kind is None:
        from ..compat import is_kv_cache_type

        kind = "" if not is_kv_cache_type(cls) else "dynamic" if cls.__name__ == "DynamicCache" else "in_place"
        _CACHE_KIND[cls] = kind
    return kind


def _shallow_cache(cache: Any) -> Any:
    """A new cache object whose layers are new objects holding the same tensors."""
    layers = getattr(cache, "layers", None)
    snapshot = copy.copy(cache)
    if isinstance(layers, list):
        snapshot.layers = [copy.copy(layer) for layer in layers]
    return snapshot


def _cloned_cache(cache: Any) -> Any:
    import torch
    from torch.utils import _pytree

    return _pytree.tree_map_only(torch.Tensor, lambda t: t.detach().clone(), cache)


def keep(value: Any) -> tuple[Any, int]:
    """``value`` as kept for later (see the module docstring) and how many tensors were copied."""
    import torch

    if isinstance(value, torch.Tensor):
        return (value.detach() if value.requires_grad else value), 0
    kind = _cache_kind(type(value))
    if kind == "dynamic":
        return _shallow_cache(value), 0
    if kind == "in_place":
        from torch.utils import _pytree

        return _cloned_cache(value), sum(isinstance(leaf, torch.Tensor) for leaf in _pytree.tree_leaves(value))
    return value, 0


def _fresh(value: Any) -> Any:
    kind = _cache_kind(type(value))
    if kind == "dynamic":
        return _shallow_cache(value)
    if kind == "in_place":
        return _cloned_cache(value)
    return value


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
