"""torch.export's dims and symbolic sizes: ``Dim`` kinds, derived dims, size-oblivious
capture, the dim marks a failed export leaves, a program's ranges, value-range analysis."""

from __future__ import annotations

import contextlib
import contextvars
from typing import Any, Iterator

from .pytree import tree_flatten_with_path
from .shared_patch import shared_patch

__all__ = [
    "additional_inputs_examples", "clear_dim_marks", "condition_holds_on", "derived_dim_parts", "dim_hint_policy",
    "program_ranges", "size_expression", "size_oblivious_available", "size_oblivious_capture",
    "tolerant_constraint_solver", "torch_dim_kind",
]


def torch_dim_kind(value: Any) -> str | None:
    """What a ``torch.export`` dim object is: ``"hint"`` (``Dim.AUTO``/``STATIC``/``DYNAMIC``,
    class ``_DimHint``), ``"derived"`` (``2 * dx``, ``_DerivedDim``), ``"dim"`` (a named
    ``Dim``), or None for anything else."""
    from torch.export import dynamic_shapes

    if isinstance(value, dynamic_shapes._DimHint):
        return "hint"
    if isinstance(value, dynamic_shapes._DerivedDim):
        return "derived"
    if isinstance(value, dynamic_shapes.Dim):
        return "dim"
    return None


def dim_hint_policy(value: Any) -> tuple[str, Any, Any]:
    """A ``Dim.AUTO``-style hint as ``(policy name, min, max)``."""
    return value.type.name, getattr(value, "min", None), getattr(value, "max", None)


def derived_dim_parts(value: Any) -> tuple[Any, int, int]:
    """A torch derived dim (``2 * dx + 1``, class ``_DerivedDim``) as ``(root Dim, scale,
    offset)``, read from its private ``root`` and ``fn`` (a linear function of the root)."""
    root, fn = value.root, value.fn
    offset = int(fn(0))
    return root, int(fn(1)) - offset, offset


def size_expression(size: Any) -> str:
    """A dim of a traced tensor as text: its sympy expression (``s77``, ``2*s77``) when it is
    a ``SymInt``, else the int."""
    node = getattr(size, "node", None)
    return str(node.expr) if node is not None else str(int(size))


@contextlib.contextmanager
def size_oblivious_capture() -> Iterator[None]:
    """Capture so that a size-0/1 example does not specialize its dim (what torch.onnx does)."""
    import torch.fx.experimental._config as fx_config

    config: Any = fx_config  # Any: torch adds ``patch`` to its config modules at import
    with config.patch(backed_size_oblivious=True):
        yield


_unsolved: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("unsolved_constraints", default=None)


def _tolerant(solve: Any) -> Any:
    def tolerant_solve(self: Any) -> None:
        try:
            solve(self)
        except NotImplementedError as exc:  # sympy: "The inequality, Eq(x/16 - 4*((x/8)//8), 0), cannot be solved"
            found = _unsolved.get()
            if found is not None:
                found.append(" ".join(str(exc).split()))

    return tolerant_solve


@contextlib.contextmanager
def tolerant_constraint_solver() -> Iterator[list[str]]:
    """Within: when sympy cannot solve a constraint torch's dim-constraint solver hands it
    (MobileViTV2's ``Eq(x/16 - 4*((x/8)//8), 0)``), the solver stops there instead of failing
    the export with ``NotImplementedError``: torch then raises the constraint violation it had
    found (with the suggestions solved so far), or returns the program. Yields the messages of
    the constraints left unsolved in this thread. Nests and overlaps across threads."""
    from torch.fx.experimental.symbolic_shapes import DimConstraints

    found: list[str] = []
    with shared_patch(DimConstraints, "solve", _tolerant):
        token = _unsolved.set(found)
        try:
            yield found
        finally:
            _unsolved.reset(token)


def size_oblivious_available() -> bool:
    """Whether this torch can capture size-obliviously (keep a size-0/1 example dynamic)."""
    try:
        import torch.fx.experimental._config as fx_config
    except ImportError:  # pragma: no cover
        return False
    return hasattr(fx_config, "backed_size_oblivious")


def additional_inputs_examples(value: Any) -> list[tuple[tuple[Any, ...], dict[str, Any]]] | None:
    """The ``(args, kwargs)`` examples held by a ``torch.export.AdditionalInputs`` (else None)."""
    try:
        from torch.export import AdditionalInputs
    except ImportError:  # pragma: no cover
        return None
    if not isinstance(value, AdditionalInputs):
        return None
    return [(tuple(args), dict(kwargs or {})) for args, kwargs in value._examples]


def clear_dim_marks(*values: Any) -> None:
    """Remove the dim markings (``_dynamo_weak_dynamic_indices`` ...) ``torch.export`` puts on
    the input tensors. A failed export leaves them behind, and a later export of the same
    tensors with ``dynamic_shapes=None`` then still treats those dims as dynamic."""
    import torch
    from torch._export.non_strict_utils import _clean_dynamic_markers

    for value in values:
        for _, leaf in tree_flatten_with_path(value):
            if isinstance(leaf, torch.Tensor):
                _clean_dynamic_markers(leaf)


def program_ranges(program: Any) -> dict[str, tuple[int, int | None]]:
    """``ExportedProgram.range_constraints`` as ``{"s77": (min, max or None)}``."""
    import sympy

    out: dict[str, tuple[int, int | None]] = {}
    for symbol, ranges in getattr(program, "range_constraints", {}).items():
        lower, upper = ranges.lower, ranges.upper

        def finite(value: Any) -> int | None:
            if isinstance(value, (int, sympy.Integer)) and not isinstance(value, bool):
                return int(value)
            return None  # int_oo / oo / -int_oo

        lo = finite(lower)
        out[str(symbol)] = (max(lo, 0) if lo is not None else 0, finite(upper))
    return out


def condition_holds_on(expr: Any, symbol: Any, lo: int, hi: int | None) -> bool | None:
    """Whether the sympy boolean ``expr`` holds for every ``symbol`` in ``[lo, hi]`` (``hi``
    None: unbounded), by torch's value-range analysis (``torch.utils._sympy.value_ranges.
    bound_sympy``): True when proved, False when it fails for every size there, None when
    the analysis cannot tell."""
    import sympy
    from torch.utils._sympy.numbers import int_oo
    from torch.utils._sympy.value_ranges import ValueRanges, bound_sympy

    try:
        result = bound_sympy(expr, {symbol: ValueRanges(sympy.Integer(lo), int_oo if hi is None else sympy.Integer(hi))})
    except Exception:  # noqa: BLE001 - an expression the analysis does not cover
        return None
    if result.lower is sympy.true and result.upper is sympy.true:
        return True
    if result.lower is sympy.false and result.upper is sympy.false:
        return False
    return None
