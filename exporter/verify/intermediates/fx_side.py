"""The FX side of a comparison: the decomposed program run in a ``torch.fx.Interpreter``,
keeping the wanted values while they fit a budget, and its outputs against eager PyTorch's."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from typing import Any

from ...events import CancelToken
from ..tolerance import first_difference

__all__ = ["FxRunner", "nbytes", "program_tensors", "program_vs_eager"]


def nbytes(value: Any) -> int:
    size = getattr(value, "nbytes", None)
    if size is None and hasattr(value, "element_size"):
        return int(value.element_size() * value.numel())
    return int(size or 0)


class FxRunner:
    """Runs one program's graph in a ``torch.fx.Interpreter``, freeing values after their last
    use and keeping the wanted ones while they fit a budget (``cancel`` checked before each
    node). The interpreter (its last-use table) is built once and reused by the next run; a run
    while another is under way uses one of its own."""

    def __init__(self, program: Any) -> None:
        self._program = program
        self._interpreter: Any = None
        self._lock = threading.Lock()
        self.last_bytes = 0  # the wanted values' bytes in the last budgeted run (0: none yet)

    def run(self, inputs: Sequence[Any], wanted: frozenset[str] | set[str], budget: int | None,
            cancel: CancelToken | None = None) -> tuple[list[Any], dict[str, int], dict[str, Any] | None]:
        """The program's user outputs, the size of every wanted value, and the wanted values
        when they fit ``budget`` (None when they do not; every wanted value when ``budget`` is
        None)."""
        import torch

        probe = _Probe(wanted, budget, cancel)
        program = self._program
        mine = self._lock.acquire(blocking=False)
        try:
            if mine:
                if self._interpreter is None:
                    self._interpreter = _recorder_class()(program.graph_module)
                interpreter = self._interpreter
            else:
                interpreter = _recorder_class()(program.graph_module)
            interpreter.probe = probe
            try:
                with torch.no_grad():
                    flat = interpreter.run(*inputs)
            finally:
                interpreter.probe = None
                interpreter.env, interpreter.args_iter = {}, iter(())  # no value outlives the run
        finally:
            if mine:
                self._lock.release()
        if budget is not None:
            self.last_bytes = sum(probe.sizes.values())
        flat = list(flat) if isinstance(flat, (list, tuple)) else [flat]
        outputs = [v for v, spec in zip(flat, program.graph_signature.output_specs) if spec.kind.name == "USER_OUTPUT"]
        return outputs, probe.sizes, (probe.kept if probe.fits else None)


class _Probe:
    """One run's wanted values: their sizes, and the values themselves while they fit."""

    def __init__(self, wanted: frozenset[str] | set[str], budget: int | None, cancel: CancelToken | None) -> None:
        self.wanted = wanted
        self.budget = budget
        self.cancel = cancel
        self.sizes: dict[str, int] = {}
        self.kept: dict[str, Any] = {}
        self.total = 0
        self.fits = True

    def record(self, name: str, value: Any) -> None:
        size = nbytes(value)
        self.sizes[name] = size
        if self.fits:
            self.total += size
            if self.budget is not None and self.total > self.budget:
                self.fits = False
                self.kept.clear()
            else:
                self.kept[name] = value


@functools.lru_cache(maxsize=1)
def _recorder_class() -> type:
    import torch

    class Recorder(torch.fx.Interpreter):
        probe: _Probe | None = None

        def run_node(self, node: Any) -> Any:
            probe = self.probe
            if probe is not None and probe.cancel is not None:
                probe.cancel.check()
            # Interpreter.run_node without its per-node context (fx_traceback's current-node
            # metadata, for tracing through an interpreter): a third of the interpreter's time.
            args, kwargs = self.fetch_args_kwargs_from_env(node)
            result = getattr(self, node.op)(node.target, args, kwargs)
            if probe is not None and node.name in probe.wanted:
                probe.record(node.name, result)
            return result

    return Recorder


def program_tensors(outputs: Sequence[Any]) -> list[Any]:
    """The program's outputs as eager PyTorch's are compared: tensors, and Python numbers
    (symbolic sizes the program returns) as tensors."""
    import torch

    return [o if isinstance(o, torch.Tensor) else torch.tensor(o) for o in outputs
            if isinstance(o, (torch.Tensor, bool, int, float))]


def program_vs_eager(case: str, output_names: Sequence[str], outputs: Sequence[Any], expected: Sequence[Any],
                     tolerances: Any, cause: Callable[[], str | None] | None = None) -> str | None:
    """Why the program's outputs differ from eager PyTorch's (verify's rule), or None;
    ``cause`` (asked only when they differ) may say why better than the example's path."""
    check = first_difference(case, output_names, program_tensors(outputs), expected, tolerances)
    if check is None:
        return None
    why = (cause() if cause is not None else None) or ("torch.export baked in behaviour of the example; "
                                                       "the ONNX model follows the program")
    return "the decomposed program already differs from eager PyTorch (" + check.describe() + "): " + why
