"""What verify keeps of its cases for a closer look at one of them afterwards
(:func:`~exporter.graphs.compare_intermediates`): the inputs each case ran on and eager
PyTorch's outputs there, within a memory budget, with the module's state at the time."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from .. import compat

__all__ = ["CaseRun", "CaseRuns", "MAX_KEPT_BYTES", "keep_case_runs"]

MAX_KEPT_BYTES = 32 << 20


@dataclass(frozen=True, eq=False)
class CaseRun:
    """One case's inputs, given like the model's forward, and eager PyTorch's outputs on them
    (None when eager PyTorch raised)."""

    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]
    expected: tuple[Any, ...] | None
    inputs_state: tuple[Any, ...] = ()  # compat.tensors_state of the inputs when they ran


@dataclass(frozen=True, eq=False, repr=False)
class CaseRuns:
    """The runs kept, by case name, and the module's state (:func:`exporter.compat.module_state`)
    once every case had run."""

    runs: Mapping[str, CaseRun]
    state: tuple[Any, ...]

    def __repr__(self) -> str:
        return f"CaseRuns({', '.join(self.runs)})"

    def get(self, name: str) -> CaseRun | None:
        return self.runs.get(name)

    def eager_outputs(self, name: str, model: Any) -> tuple[Any, ...] | None:
        """The eager outputs of case ``name``, or None when they were not kept, or the module
        changed since (a weight written, a submodule swapped, train/eval switched), or one of
        its input tensors was written in place (the example inputs are the caller's own)."""
        run = self.runs.get(name)
        if (run is None or run.expected is None or compat.module_state(model) != self.state
                or compat.tensors_state((run.args, dict(run.kwargs))) != run.inputs_state):
            return None
        return run.expected


def keep_case_runs(model: Any, runs: Mapping[str, tuple[tuple[Any, ...], Mapping[str, Any], Sequence[Any] | None]],
                   first: Iterable[str] = (), max_bytes: int | None = None) -> CaseRuns:
    """The runs to keep, ``first`` (the failing cases) then the others in order, while the
    tensors they hold total at most ``max_bytes`` (:data:`MAX_KEPT_BYTES` by default): verify
    already holds them all while it runs, so keeping them costs memory, not time."""
    budget = MAX_KEPT_BYTES if max_bytes is None else max_bytes
    leading = [name for name in dict.fromkeys(first) if name in runs]
    order = [*leading, *(name for name in runs if name not in set(leading))]
    kept: dict[str, CaseRun] = {}
    total = 0
    for name in order:
        args, kwargs, expected = runs[name]
        size = _tensor_bytes(args) + _tensor_bytes(kwargs.values()) + _tensor_bytes(expected or ())
        if total + size > budget:
            continue
        total += size
        kept[name] = CaseRun(tuple(args), MappingProxyType(dict(kwargs)), None if expected is None else tuple(expected),
                             compat.tensors_state((tuple(args), dict(kwargs))))
    return CaseRuns(MappingProxyType(kept), compat.module_state(model))


def _tensor_bytes(values: Iterable[Any]) -> int:
    import torch

    total = 0
    for value in values:
        for _, leaf in compat.tree_flatten_with_path(value):
            if isinstance(leaf, torch.Tensor):
                total += leaf.element_size() * leaf.numel()
    return total
