"""Eager PyTorch on one case, as every comparison runs it: a twin of the module
(:func:`~exporter.model_twin.twin_of`: the user's own module is never called, so a cell calling
it meanwhile sees nothing) called on copies of the inputs (a forward may write into them), what
the run changed reported (:func:`~exporter.model_state.preserved`), in inference mode; the
outputs in the order the ONNX model returns them."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from .. import compat
from ..model_state import StateKeeper, StateReport
from ..model_twin import is_twin, twin_of

__all__ = ["EagerRunner", "clone_tensors", "expected_outputs", "map_tensors", "run_eager"]


class EagerRunner:
    """The eager side of one job's many runs (verify's cases): one twin of the module
    (:func:`~exporter.model_twin.twin_of`), put back as it was after every run and what the run
    changed reported (:class:`~exporter.model_state.StateKeeper`), in inference mode."""

    def __init__(self, model: Any) -> None:
        self.twin = twin_of(model)
        self._keeper = StateKeeper(self.twin, reuse=is_twin(self.twin))  # an untwinnable module is the user's

    @contextlib.contextmanager
    def running(self, what: str = "") -> Iterator[tuple[Any, StateReport]]:
        """``(twin, report)`` for one run; the report is filled when the block ends."""
        import torch

        with self._keeper.run(what) as report, torch.inference_mode():
            yield self.twin, report


def run_eager(model: Any, args: Sequence[Any], kwargs: Mapping[str, Any], *, what: str = "",
              call: Callable[..., Any] | None = None) -> list[Any]:
    """The module's outputs on ``args`` / ``kwargs`` (see the module docstring); ``what``
    says when it ran, for the report of a module that changes itself; ``call`` runs it
    another way: ``call(twin, *args, **kwargs)`` (``torch.func.functional_call`` of the twin
    with other weights), ``twin(*args, **kwargs)`` by default."""
    eager_args, eager_kwargs = clone_tensors(tuple(args)), clone_tensors(dict(kwargs))
    with EagerRunner(model).running(what) as (twin, _):
        result = call(twin, *eager_args, **eager_kwargs) if call is not None else twin(*eager_args, **eager_kwargs)
    return expected_outputs(compat.tree_flatten_with_path(result))


def clone_tensors(value: Any) -> Any:
    """``value`` with every tensor among its pytree leaves cloned."""
    return map_tensors(value, lambda tensor: tensor.clone())


def map_tensors(value: Any, function: Callable[[Any], Any]) -> Any:
    """``value`` with ``function`` applied to every tensor among its pytree leaves."""
    import torch

    leaves = [function(leaf) if isinstance(leaf, torch.Tensor) else leaf for _, leaf in compat.tree_flatten_with_path(value)]
    return compat.tree_replace_leaves(value, leaves)


def expected_outputs(leaves: Sequence[tuple[Any, Any]]) -> list[Any]:
    """The eager outputs the ONNX model returns, in order: tensors, and Python numbers (a
    ``x.shape[1] + 1`` output is an ONNX scalar) as 0-d tensors, compared as numbers."""
    import torch

    out = []
    for _, leaf in leaves:
        if isinstance(leaf, torch.Tensor):
            out.append(leaf)
        elif isinstance(leaf, (bool, int, float, complex)):
            out.append(torch.tensor(leaf))
        elif isinstance(leaf, torch.SymInt):  # pragma: no cover - eager returns plain ints
            out.append(torch.tensor(int(leaf)))
    return out
