"""One observed ``forward`` call: its inputs and outputs, kept for later export and checks.

Tensors are kept by reference (``detach()``, no copy) with their version counter. transformers'
``DynamicCache`` grows by concatenation into new tensors, so the tensors a step received are
never written again and keeping them costs no copy. A cache that writes into its tensors in
place (any transformers cache other than ``DynamicCache``, e.g. ``StaticCache``) has its tensors
cloned when the call is recorded: those are the only copies made. A kept tensor that something
still writes in place later is caught by its version counter (:attr:`RecordedCall.intact`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["RecordedCall", "snapshot_inputs", "snapshot_outputs"]


@dataclass(frozen=True)
class RecordedCall:
    """What ``forward`` received (``args``, ``kwargs``, as a pytree) and returned (its tensors).

    Attributes:
        index: position among the recorded calls (0 = first).
        spec: the pytree structure of ``(args, kwargs)``.
        leaves: the input leaves (tensors, and constants such as ``use_cache=True``).
        outputs: the output tensors, flattened in pytree order (what an ONNX model returns).
        cloned: how many input tensors were copied (only those of in-place caches).
    """

    index: int
    spec: Any
    leaves: tuple[Any, ...]
    versions: tuple[int | None, ...]
    outputs: tuple[Any, ...]
    output_versions: tuple[int, ...]
    cloned: int = 0

    def inputs(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """``(args, kwargs)`` as ``forward`` received them, rebuilt around the kept tensors
        (a ``DynamicCache`` is a fresh object holding the recorded tensors)."""
        from torch.utils import _pytree

        args, kwargs = _pytree.tree_unflatten(list(self.leaves), self.spec)
        return tuple(args), dict(kwargs)

    @property
    def intact(self) -> bool:
        """False when a kept tensor was written in place after it was recorded: this call's
        values are then no longer the ones the model saw or returned."""
        now = tuple(_version(leaf) for leaf in self.leaves)
        outs = tuple(int(t._version) for t in self.outputs)
        return now == self.versions and outs == self.output_versions


def _version(value: Any) -> int | None:
    version = getattr(value, "_version", None)
    return int(version) if isinstance(version, int) else None


def _writes_in_place(value: Any) -> bool:
    """A transformers cache other than ``DynamicCache`` (``StaticCache`` and kin update their
    tensors in place)."""
    from ..compat import is_kv_cache_type

    cls = type(value)
    return is_kv_cache_type(cls) and cls.__name__ != "DynamicCache"


def snapshot_inputs(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, list[Any], list[int | None], int]:
    """``(spec, leaves, versions, cloned)`` of one call's inputs (see the module docstring)."""
    import torch
    from torch.utils import _pytree

    leaves, spec = _pytree.tree_flatten((args, kwargs))
    cloned = 0
    in_place = [_writes_in_place(v) for v in (*args, *kwargs.values())]
    if any(in_place):
        counts = [child.num_leaves for child in (*spec.children_specs[0].children_specs,
                                                 *spec.children_specs[1].children_specs)]
        start = 0
        for count, clone in zip(counts, in_place):
            if clone:
                for i in range(start, start + count):
                    if isinstance(leaves[i], torch.Tensor):
                        leaves[i] = leaves[i].detach().clone()
                        cloned += 1
            start += count
    kept = [leaf.detach() if isinstance(leaf, torch.Tensor) else leaf for leaf in leaves]
    return spec, kept, [_version(leaf) for leaf in kept], cloned


def snapshot_outputs(output: Any) -> tuple[tuple[Any, ...], tuple[int, ...]]:
    """The output tensors (references, in pytree order) and their version counters."""
    import torch
    from torch.utils import _pytree

    tensors = tuple(leaf.detach() for leaf in _pytree.tree_leaves(output) if isinstance(leaf, torch.Tensor))
    return tensors, tuple(int(t._version) for t in tensors)
