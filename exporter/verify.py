"""Is the ONNX model right, at the example inputs *and at other sizes*?

``torch.onnx.export(verify=True)`` compares outputs at the example inputs only. An exported
model can keep symbolic input dims and still compute the wrong thing at another size (a branch
on the example size baked in, a dropped runtime assert, a dim silently specialized): no error,
wrong numbers. :func:`verify` runs the ONNX model in onnxruntime and the original module in
eager PyTorch on the example inputs and on generated inputs at other sizes, and says which
sizes are wrong and why.

Sizes. Input axes that share one torch symbol (or one user ``Dim`` name) form a *dim group* and
always change together. Each group is swept over its *requested* range (the user's ``Dim``
min/max; ``[1, inf)`` for AUTO / DYNAMIC): the bounds, 1 and 2, an odd size, a size larger
than the example. Each case says whether it lies inside the range torch *obtained* for the dim
(``ExportedProgram.range_constraints``); the ONNX model does not check that range, so a size
outside it is exactly where a dropped runtime assert shows up.

Inputs. Floating tensors are random normal; 0/1 and bool tensors (masks) keep their pattern
(all ones stays all ones, otherwise a random padding suffix per row, never a whole row);
other integer tensors (token ids, indices) are drawn in the example's ``[min, max]``, kept
below any dim they could index that the case shrinks. Tensors with no swept axis are the
example tensors. ``make_inputs=`` replaces any of it (see :class:`InputCase`).

Tolerances (:data:`DEFAULT_TOLERANCES`, element-wise ``|onnx - eager| <= atol + rtol * |eager|``):
float64 rtol 1e-6 / atol 1e-7; float32 rtol 1e-4 / atol 1e-5; float16 rtol 1e-2 / atol 1e-3;
bfloat16 rtol 2e-2 / atol 1e-2; integers and bool exact. NaN equals NaN.

Everything returned is a frozen dataclass with ``to_frame()`` and ``summary()``; nothing here
raises for a wrong model or a failing run: failures are data.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from .dims import AUTO, Dim
from .errors import first_line

__all__ = [
    "DEFAULT_TOLERANCES",
    "CaseResult",
    "ContractCheck",
    "ContractReport",
    "DimGroup",
    "Divergence",
    "Finding",
    "InputCase",
    "OutputCheck",
    "Progress",
    "Tolerance",
    "VerifyResult",
    "check_contract",
    "dim_groups",
    "first_divergence",
    "make_case_inputs",
    "verify",
]


# -- tolerances ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tolerance:
    """Element-wise ``|actual - expected| <= atol + rtol * |expected|``."""

    rtol: float
    atol: float

    def __str__(self) -> str:
        return f"rtol={self.rtol:g} atol={self.atol:g}"


DEFAULT_TOLERANCES: Mapping[str, Tolerance] = MappingProxyType(
    {
        "float64": Tolerance(1e-6, 1e-7),
        "float32": Tolerance(1e-4, 1e-5),
        "float16": Tolerance(1e-2, 1e-3),
        "bfloat16": Tolerance(2e-2, 1e-2),
    }
)
_EXACT = Tolerance(0.0, 0.0)


def tolerance_for(dtype: str, overrides: Mapping[str, Tolerance] | Tolerance | None = None) -> Tolerance:
    """The tolerance for a dtype name (``float32``), with user overrides applied."""
    if isinstance(overrides, Tolerance):
        return overrides
    if overrides and dtype in overrides:
        value = overrides[dtype]
        return value if isinstance(value, Tolerance) else Tolerance(*value)
    return DEFAULT_TOLERANCES.get(dtype, _EXACT)


# -- progress -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Progress:
    """One progress report: ``done`` of ``total`` steps of ``task`` (a progress bar's value)."""

    task: str
    done: float
    total: float
    message: str = ""

    @property
    def fraction(self) -> float:
        return 0.0 if self.total <= 0 else min(1.0, max(0.0, self.done / self.total))


def _report(callback: Callable[[Progress], Any] | None, task: str, done: float, total: float, message: str = "") -> None:
    if callback is None:
        return
    try:
        callback(Progress(task, done, total, message))
    except Exception:  # noqa: BLE001 - a broken progress bar must not stop the work
        pass


# -- dim groups ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class DimGroup:
    """Input axes that must keep equal sizes, and what was asked of and obtained for them.

    ``symbol`` is the torch symbol (``s77``) when the program kept the dim dynamic, None when
    capture specialized it. ``onnx_dims`` holds the ONNX input dim of each axis: a ``dim_param``
    string, an int ``dim_value``, or None when the input is missing from the ONNX model.
    """

    label: str
    axes: tuple[tuple[str, int], ...]
    requested: str
    example: int
    requested_range: tuple[int, int | None]
    symbol: str | None
    obtained_range: tuple[int, int | None]
    onnx_dims: tuple[str | int | None, ...]
    sizes: tuple[int, ...] = ()
    causes: tuple[str, ...] = ()

    @property
    def specialized(self) -> bool:
        """The program fixed this dim to the example size."""
        return self.symbol is None

    @property
    def onnx_accepts_any_size(self) -> bool:
        return all(isinstance(d, str) for d in self.onnx_dims)

    def in_obtained_range(self, size: int) -> bool:
        lo, hi = self.obtained_range
        return size >= lo and (hi is None or size <= hi)

    @property
    def axes_text(self) -> str:
        return ", ".join(f"{p}.shape[{a}]" for p, a in self.axes)

    def describe_range(self, which: str = "obtained") -> str:
        lo, hi = self.obtained_range if which == "obtained" else self.requested_range
        return f"[{lo}, {'inf' if hi is None else hi}]"


def _range_of(value_range: Any) -> tuple[int, int | None]:
    def as_int(bound: Any) -> int | None:
        try:
            return int(bound)
        except Exception:  # noqa: BLE001 - sympy oo / torch int_oo: unbounded
            return None

    lo = as_int(getattr(value_range, "lower", 0))
    return (0 if lo is None else lo, as_int(getattr(value_range, "upper", None)))


def _onnx_input_dims(model: Any) -> dict[str, tuple[str | int | None, ...]]:
    """ONNX input dims by input name: dim_param string, dim_value int, or None if unknown."""
    out: dict[str, tuple[str | int | None, ...]] = {}
    for value in model.graph.inputs:
        shape = value.shape
        if shape is None:
            continue
        dims: list[str | int | None] = []
        for dim in shape:
            if isinstance(dim, int):
                dims.append(dim)
            else:
                dims.append(getattr(dim, "value", None))
        out[value.name] = tuple(dims)
    return out


def _optional(session: Any, name: str) -> Any:
    """``session.<name>`` if another module provides it and it works; else None."""
    try:
        return getattr(session, name, None)
    except Exception:  # noqa: BLE001 - an optional richer source must not break verification
        return None


def _guards(session: Any, program: Any) -> list[tuple[str, str, str | None, tuple | None]]:
    """Guards as ``(expression, text to match, user source or None, axes or None)``:
    ``session.guards`` (with the user's line) when the guards module provides it, else the
    program's guard expressions (no source)."""
    from . import _torch_compat as compat

    out: list[tuple[str, str, str | None, tuple | None]] = []
    try:
        guards = list(_optional(session, "guards") or ())
    except TypeError:
        guards = []
    for guard in guards:
        expr = str(getattr(guard, "expression", None) or getattr(guard, "expr", None) or guard)
        text = " ".join(str(getattr(guard, name, "") or "") for name in ("expression", "expr", "symbolic"))
        source = getattr(guard, "source", None)
        axes = getattr(guard, "axes", None)
        out.append((expr, text, str(source) if source else None, tuple(axes) if axes else None))
    if not out:
        try:
            out = [(code, code, None, None) for code in compat.guards_code(program)]
        except Exception:  # noqa: BLE001
            out = []
    return out


def _source_patterns(path: str, axis: int) -> list[str]:
    """How torch guard text names ``path.shape[axis]``: ``L['x'].size()[0]``, ``x.size()[0]``."""
    parts = path.split(".")
    keyed = f"L['{parts[0]}']" + "".join(f"[{p}]" if p.isdigit() else f"['{p}']" for p in parts[1:])
    return [f"{keyed}.size()[{axis}]", f"{path}.size()[{axis}]", f"{path}.shape[{axis}]"]


def _group_causes(session: Any, program: Any, axes: Sequence[tuple[str, int]], symbol: str | None) -> tuple[str, ...]:
    causes: list[str] = []
    patterns = [p for path, axis in axes for p in _source_patterns(path, axis)]
    for expr, text, source, guard_axes in _guards(session, program):
        if guard_axes is not None:
            mentions = bool(set(guard_axes) & set(axes))
        else:
            mentions = any(p in text for p in patterns) or (
                symbol is not None and re.search(rf"\b{re.escape(symbol)}\b", text) is not None
            )
        if mentions:
            causes.append(f"guard {expr}" + (f" at {source}" if source else ""))
    return tuple(dict.fromkeys(causes))


def _policy_text(policy: Any) -> str:
    return repr(policy)


def dim_groups(session: Any, program: Any | None = None, onnx_model: Any | None = None) -> tuple[DimGroup, ...]:
    """The dim groups of a session: every axis the user asked not to be static, grouped by
    the torch symbol it got (or by user Dim name), with requested and obtained ranges."""
    from .translate import symbol_of

    program = program if program is not None else session.exported_program
    onnx_dims = _onnx_input_dims(onnx_model if onnx_model is not None else session.onnx_model)
    symbols = symbol_of(program, session.inputs)
    ranges = {str(sym): _range_of(vr) for sym, vr in program.range_constraints.items()}

    groups: dict[Any, list[Any]] = {}
    for entry in session.spec:
        symbol = symbols.get((entry.path, entry.axis))
        if symbol is not None and symbol.isidentifier():
            key: Any = ("symbol", symbol)
        elif symbol is not None and not symbol.lstrip("-").isdigit():
            continue  # a derived expression such as 2*s0: sized from its symbols
        elif isinstance(entry.policy, Dim):
            key = ("name", entry.policy.name)
        else:
            key = ("axis", entry.path, entry.axis)
        groups.setdefault(key, []).append(entry)

    out: list[DimGroup] = []
    for key, entries in groups.items():
        axes = tuple((e.path, e.axis) for e in entries)
        named = [e.policy for e in entries if isinstance(e.policy, Dim)]
        example = session.inputs.leaf(entries[0].path).shape[entries[0].axis]
        lo = max((d.min for d in named if d.min is not None), default=1)
        his = [d.max for d in named if d.max is not None]
        requested_range = (lo, min(his) if his else None)
        symbol = key[1] if key[0] == "symbol" else None
        obtained = ranges.get(symbol, (0, None)) if symbol else (example, example)
        label = named[0].name if named else f"{entries[0].path}.shape[{entries[0].axis}]"
        requested = ", ".join(dict.fromkeys(_policy_text(e.policy) for e in entries))
        dims = tuple(
            (onnx_dims[e.path][e.axis] if e.path in onnx_dims and e.axis < len(onnx_dims[e.path]) else None)
            for e in entries
        )
        out.append(
            DimGroup(
                label=label,
                axes=axes,
                requested=requested,
                example=example,
                requested_range=requested_range,
                symbol=symbol,
                obtained_range=obtained,
                onnx_dims=dims,
                causes=_group_causes(session, program, axes, symbol),
            )
        )
    return tuple(out)


_KINDS = ("min", "1", "2", "odd", "larger", "max")


def _candidates(group: DimGroup, max_size: int) -> dict[str, int]:
    """Candidate sizes by kind for one group, inside its requested range."""
    lo, hi = group.requested_range
    top = hi if hi is not None else max_size
    example = group.example
    odd = next((n for n in range(3, top + 1, 2) if n != example and n >= lo), None)
    larger = max(2 * example, example + 4)
    if hi is not None and larger > hi:
        larger = hi if hi > example else None
    found = {
        "min": lo,
        "1": 1,
        "2": 2,
        "odd": odd,
        "larger": larger,
        "max": hi if hi is not None and hi <= max_size else None,
    }
    return {
        kind: size
        for kind, size in found.items()
        if size is not None and size >= lo and (hi is None or size <= hi) and size <= max_size
    }


@dataclass(frozen=True)
class _Plan:
    name: str
    sizes: tuple[tuple[str, int], ...]  # (group label, size)


def _plan(groups: Sequence[DimGroup], max_size: int, sizes: Mapping[str, Sequence[int]] | None) -> list[_Plan]:
    plans: list[_Plan] = []
    seen: set[tuple[tuple[str, int], ...]] = {tuple((g.label, g.example) for g in groups)}

    def add(name: str, assignment: tuple[tuple[str, int], ...]) -> None:
        if assignment not in seen:
            seen.add(assignment)
            plans.append(_Plan(name, assignment))

    if sizes:
        unknown = [label for label in sizes if label not in {g.label for g in groups}]
        if unknown:
            raise ValueError(
                f"sizes= names unknown dim group(s) {unknown}; groups: {[g.label for g in groups]}"
            )
        for label, values in sizes.items():
            for value in values:
                add(f"{label}={value}", tuple((g.label, value if g.label == label else g.example) for g in groups))
        return plans

    # Dynamic groups change together, kind by kind; then each alone to a larger size. A group
    # capture specialized changes alone (the module often only works at its example size, and
    # moving it with the others would leave them unchecked).
    candidates = [_candidates(g, max_size) for g in groups]
    dynamic = [i for i, g in enumerate(groups) if not g.specialized]
    for kind in _KINDS:
        if dynamic:
            add(kind, tuple((g.label, c.get(kind, g.example) if i in dynamic else g.example)
                            for i, (g, c) in enumerate(zip(groups, candidates))))
    if len(dynamic) > 1:
        for i in dynamic:
            if "larger" in candidates[i]:
                label = groups[i].label
                add(f"{label} larger", tuple((h.label, candidates[i]["larger"] if j == i else h.example) for j, h in enumerate(groups)))
    for i, (g, c) in enumerate(zip(groups, candidates)):
        if g.specialized:
            prefix = "" if len(groups) == 1 else f"{g.label} "
            for kind in _KINDS:
                if kind in c:
                    add(prefix + kind, tuple((h.label, c[kind] if j == i else h.example) for j, h in enumerate(groups)))
    return plans


# -- input generation ---------------------------------------------------------------------------


@dataclass(frozen=True)
class InputCase:
    """What a ``make_inputs`` hook receives: the case name, the size of each dim group
    (by label, e.g. ``{"batch": 5}``), the shape of each tensor input (by path), and the
    generated ``args`` / ``kwargs``. The hook returns ``(args, kwargs)`` to use instead, or
    None to keep the generated ones."""

    name: str
    sizes: Mapping[str, int]
    shapes: Mapping[str, tuple[int, ...]]
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]


def _axis_sizes(session: Any, program: Any, groups: Sequence[DimGroup], assignment: Mapping[str, int]) -> dict[tuple[str, int], int]:
    """The size of every input axis for a case: group sizes, derived dims evaluated."""
    from .translate import symbol_of

    sizes: dict[tuple[str, int], int] = {}
    by_symbol: dict[str, int] = {}
    for group in groups:
        size = assignment.get(group.label, group.example)
        for axis in group.axes:
            sizes[axis] = size
        if group.symbol:
            by_symbol[group.symbol] = size
    for (path, axis), expr in symbol_of(program, session.inputs).items():
        if (path, axis) in sizes or expr.lstrip("-").isdigit():
            continue
        try:
            import sympy

            value = sympy.sympify(expr).subs({sympy.Symbol(k): v for k, v in by_symbol.items()})
            sizes[(path, axis)] = int(value)
        except Exception:  # noqa: BLE001 - unknown expression: keep the example size
            pass
    return sizes


def _is_mask(example: Any) -> bool:
    import torch

    if example.dtype == torch.bool:
        return True
    if example.dtype.is_floating_point or example.is_complex() or example.numel() == 0:
        return False
    return bool(((example == 0) | (example == 1)).all())


def _make_mask(example: Any, shape: tuple[int, ...], generator: Any) -> Any:
    import torch

    ones = torch.ones(shape, dtype=example.dtype)
    if bool((example != 0).all()) or not shape or shape[-1] <= 1:
        return ones
    rows = ones.reshape(-1, shape[-1])
    pads = torch.randint(0, shape[-1], (rows.shape[0],), generator=generator)
    for i, pad in enumerate(pads.tolist()):
        if pad:
            rows[i, shape[-1] - pad :] = 0
    return rows.reshape(shape)


def _make_tensor(example: Any, shape: tuple[int, ...], generator: Any, index_caps: Sequence[tuple[int, int]]) -> Any:
    import torch

    if example.dtype.is_floating_point:
        return torch.randn(shape, generator=generator, dtype=torch.float32).to(example.dtype)
    if example.is_complex():
        return torch.randn(shape, generator=generator, dtype=example.dtype)
    if _is_mask(example):
        return _make_mask(example, shape, generator)
    if example.numel() == 0:
        return torch.zeros(shape, dtype=example.dtype)
    lo, hi = int(example.min()), int(example.max())
    for example_size, size in index_caps:  # values that could index a shrunk dim stay valid
        if hi < example_size and size < example_size:
            hi = max(lo, min(hi, size - 1))
    return torch.randint(lo, hi + 1, shape, generator=generator, dtype=torch.int64).to(example.dtype)


def make_case_inputs(
    session: Any,
    program: Any,
    groups: Sequence[DimGroup],
    assignment: Mapping[str, int],
    *,
    seed: int = 0,
) -> tuple[tuple[Any, ...], dict[str, Any], dict[str, tuple[int, ...]]]:
    """Generated ``(args, kwargs, shapes)`` for one size assignment (group label → size)."""
    import torch

    from . import _torch_compat as compat

    bound = session.inputs
    axis_sizes = _axis_sizes(session, program, groups, assignment)
    caps = [(g.example, assignment.get(g.label, g.example)) for g in groups]
    generator = torch.Generator().manual_seed(seed)
    leaves_by_index = {leaf.index: leaf for leaf in bound.leaves}
    values = list(bound.args) + list(bound.kwargs.values())
    rebuilt: list[Any] = []
    shapes: dict[str, tuple[int, ...]] = {}
    index = 0
    for value in values:
        flat = compat.tree_flatten_with_path(value)
        new_leaves = []
        for _, leaf_value in flat:
            leaf = leaves_by_index.get(index)
            index += 1
            if leaf is None or not isinstance(leaf_value, torch.Tensor):
                new_leaves.append(leaf_value)
                continue
            shape = tuple(axis_sizes.get((leaf.path, a), s) for a, s in enumerate(leaf.shape))
            shapes[leaf.path] = shape
            if shape == tuple(leaf_value.shape):
                new_leaves.append(leaf_value)
            else:
                new_leaves.append(_make_tensor(leaf_value, shape, generator, caps))
        rebuilt.append(compat.tree_replace_leaves(value, new_leaves))
    args = tuple(rebuilt[: len(bound.args)])
    kwargs = dict(zip(bound.kwargs, rebuilt[len(bound.args) :]))
    return args, kwargs, shapes


# -- comparing ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class OutputCheck:
    """One output of one case: ``pass`` / ``fail`` (values differ) / ``shape_mismatch`` /
    ``dtype_mismatch`` / ``missing``."""

    case: str
    output: str
    status: str
    max_abs: float | None = None
    max_rel: float | None = None
    mismatched: int = 0
    expected_shape: tuple[int, ...] | None = None
    actual_shape: tuple[int, ...] | None = None
    dtype: str = ""
    tolerance: Tolerance | None = None

    @property
    def ok(self) -> bool:
        return self.status == "pass"

    def describe(self) -> str:
        if self.status == "shape_mismatch":
            return f"output {self.output!r}: shape {list(self.actual_shape or ())} instead of {list(self.expected_shape or ())}"
        if self.status == "missing":
            return f"output {self.output!r} is missing"
        if self.status == "dtype_mismatch":
            return f"output {self.output!r}: {self.dtype}"
        return f"output {self.output!r}: max abs diff {self.max_abs:.3g}, max rel diff {self.max_rel:.3g} ({self.mismatched} elements beyond {self.tolerance})"


def _to_numpy(value: Any) -> Any:
    import numpy as np
    import torch

    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        if value.dtype == torch.bfloat16:
            value = value.float()
        return value.numpy()
    array = np.asarray(value)
    if array.dtype.kind == "V" and array.dtype.itemsize == 2:  # bfloat16 from onnxruntime
        return torch.from_numpy(array.view(np.int16).copy()).view(torch.bfloat16).float().numpy()
    return array


def _dtype_name(value: Any) -> str:
    import torch

    if isinstance(value, torch.Tensor):
        return str(value.dtype).removeprefix("torch.")
    return str(getattr(value, "dtype", "unknown"))


def compare(case: str, name: str, actual: Any, expected: Any, tolerances: Any = None) -> OutputCheck:
    """Compare one onnxruntime output with the eager one under the dtype's tolerance."""
    import numpy as np

    dtype = _dtype_name(expected)
    tol = tolerance_for(dtype, tolerances)
    want = _to_numpy(expected)
    got = _to_numpy(actual)
    if got.shape != want.shape:
        return OutputCheck(case, name, "shape_mismatch", expected_shape=tuple(want.shape), actual_shape=tuple(got.shape), dtype=dtype, tolerance=tol)
    if want.dtype.kind in "fc" or got.dtype.kind in "fc":
        w = want.astype(np.float64)
        g = got.astype(np.float64)
    else:
        w = want.astype(np.int64) if want.dtype != bool else want
        g = got.astype(np.int64) if got.dtype != bool else got
        w, g = w.astype(np.float64), g.astype(np.float64)
    both_nan = np.isnan(w) & np.isnan(g)
    same_inf = np.isinf(w) & (w == g)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(both_nan | same_inf, 0.0, np.abs(g - w))
        diff = np.where(np.isnan(diff), np.inf, diff)
        bad = diff > tol.atol + tol.rtol * np.abs(np.where(np.isfinite(w), w, 0.0))
        denom = np.abs(w)
        rel = np.where(denom > 0, diff / np.where(denom > 0, denom, 1.0), np.where(diff > 0, np.inf, 0.0))
    max_abs = float(diff.max()) if diff.size else 0.0
    max_rel = float(rel.max()) if rel.size else 0.0
    mismatched = int(bad.sum())
    return OutputCheck(
        case, name, "pass" if mismatched == 0 else "fail", max_abs, max_rel, mismatched,
        tuple(want.shape), tuple(got.shape), dtype, tol,
    )


@dataclass(frozen=True)
class CaseResult:
    """One set of inputs: the sizes of the dim groups, and how each output compared.

    ``status``: ``pass``; ``fail`` (an output differs or has another shape); ``ort_error``
    (onnxruntime refused or crashed); ``eager_error`` (the module itself raised: the size is
    not supported by the model, not checked); ``error`` (inputs could not be built)."""

    name: str
    sizes: tuple[tuple[str, int], ...]
    status: str
    outputs: tuple[OutputCheck, ...] = ()
    error: str | None = None
    outside_obtained: tuple[str, ...] = ()  # labels of groups whose size torch did not verify
    changed: tuple[str, ...] = ()  # labels of groups not at the example size
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "pass"

    @property
    def is_example(self) -> bool:
        return self.name == "example"

    @property
    def sizes_text(self) -> str:
        return ", ".join(f"{label}={size}" for label, size in self.sizes) or "(all static)"

    @property
    def max_abs(self) -> float | None:
        values = [o.max_abs for o in self.outputs if o.max_abs is not None]
        return max(values) if values else None

    @property
    def max_rel(self) -> float | None:
        values = [o.max_rel for o in self.outputs if o.max_rel is not None]
        return max(values) if values else None

    def describe(self) -> str:
        if self.status == "ort_error":
            return f"onnxruntime error: {self.error}"
        if self.status in ("eager_error", "error"):
            return str(self.error)
        bad = [o for o in self.outputs if not o.ok]
        return "; ".join(o.describe() for o in bad) if bad else "all outputs match"


# -- contract -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ContractCheck:
    """One contract check: ``status`` is ``ok``, ``warning`` or ``error``."""

    check: str
    subject: str
    status: str
    message: str
    hint: str = ""

    @property
    def ok(self) -> bool:
        return self.status != "error"


@dataclass(frozen=True)
class ContractReport:
    """What the ONNX model promises about its inputs and outputs, checked against the spec."""

    checks: tuple[ContractCheck, ...]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def errors(self) -> tuple[ContractCheck, ...]:
        return tuple(c for c in self.checks if c.status == "error")

    @property
    def warnings(self) -> tuple[ContractCheck, ...]:
        return tuple(c for c in self.checks if c.status == "warning")

    def to_frame(self) -> Any:
        import pandas as pd

        return pd.DataFrame(
            [(c.check, c.subject, c.status, c.message, c.hint) for c in self.checks],
            columns=["check", "subject", "status", "message", "hint"],
        )

    def summary(self) -> str:
        head = "contract: ok" if self.ok else f"contract: {len(self.errors)} error(s)"
        if self.warnings:
            head += f", {len(self.warnings)} warning(s)"
        lines = [head]
        for c in self.checks:
            if c.status != "ok":
                lines.append(f"  {c.status.upper():<7} {c.subject}: {c.message}")
                if c.hint:
                    lines.append(f"          fix: {c.hint}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.summary())


def _is_name(dim: Any) -> bool:
    return isinstance(dim, str) and dim.isidentifier()


def check_contract(session: Any, onnx_model: Any | None = None, program: Any | None = None) -> ContractReport:
    """Check the ONNX model's inputs and outputs against what the user asked for:
    every requested dynamic axis is symbolic and carries the user's name, related axes share
    one name, no requested input was dropped, outputs have stable (non-FX) names."""
    from . import _torch_compat as compat
    from .translate import symbol_of

    model = onnx_model if onnx_model is not None else session.onnx_model
    program = program if program is not None else session.exported_program
    dims = _onnx_input_dims(model)
    onnx_inputs = [v.name for v in model.graph.inputs]
    checks: list[ContractCheck] = []
    symbols = symbol_of(program, session.inputs)
    requested = {(e.path, e.axis): e.policy for e in session.spec}

    for leaf in session.inputs.leaves:
        asked = [axis for (path, axis) in requested if path == leaf.path]
        if leaf.path not in onnx_inputs:
            status = "error" if asked else "warning"
            checks.append(
                ContractCheck(
                    "input kept", leaf.path, status,
                    f"input {leaf.path!r} is not an input of the ONNX model"
                    + (f" although axes {asked} were requested dynamic" if asked else " (unused by the model?)"),
                    "the model never reads it; remove it from the spec, or use it in forward" if asked else "",
                )
            )
            continue
        onnx_shape = dims.get(leaf.path)
        if onnx_shape is None or len(onnx_shape) != leaf.rank:
            checks.append(ContractCheck("input rank", leaf.path, "error", f"ONNX shape {onnx_shape} does not have rank {leaf.rank}"))
            continue
        for axis in range(leaf.rank):
            subject = f"{leaf.path}.shape[{axis}]"
            dim = onnx_shape[axis]
            policy = requested.get((leaf.path, axis))
            program_dim = symbols.get((leaf.path, axis), "")
            if policy is None:
                if not isinstance(dim, int):
                    checks.append(ContractCheck("static kept static", subject, "warning", f"not requested dynamic, but the ONNX dim is {dim!r}"))
                continue
            asked_text = _policy_text(policy)
            if isinstance(dim, int):
                severity = "warning" if policy is AUTO else "error"
                checks.append(
                    ContractCheck(
                        "dynamic is symbolic", subject, severity,
                        f"requested {asked_text}, but the ONNX model fixes it to {dim}",
                        "AUTO lets torch specialize: mark it STATIC to accept that, or change the code that pins it"
                        if policy is AUTO else "the model's code pins this dim; see the capture guards",
                    )
                )
                continue
            if dim is None or not _is_name(dim):
                if isinstance(dim, str) and dim.lstrip("-").isdigit():
                    message = (
                        f"requested {asked_text}; capture specialized it to {dim}, yet the ONNX input "
                        f"declares the non-name dim_param {dim!r}, so onnxruntime accepts any size and "
                        f"computes as if it were {dim}"
                    )
                    hint = "mark it STATIC, or make the model's code work for every size (see the guards)"
                elif dim is None:
                    message, hint = f"requested {asked_text}, but the ONNX dim has no name", ""
                else:
                    message, hint = f"requested {asked_text}; the ONNX dim is the expression {dim!r}", ""
                checks.append(ContractCheck("dynamic is symbolic", subject, "error", message, hint))
                continue
            if not program_dim.isidentifier():
                checks.append(
                    ContractCheck(
                        "dynamic is symbolic", subject, "error",
                        f"requested {asked_text}; the program has {program_dim!r} but the ONNX dim is {dim!r}",
                    )
                )
                continue
            if isinstance(policy, Dim) and dim != policy.name:
                checks.append(
                    ContractCheck(
                        "user's dim name", subject, "error",
                        f"the ONNX dim is named {dim!r}, not the requested {policy.name!r}",
                        "report it: translate renames symbols to the user's Dim names",
                    )
                )
                continue
            checks.append(ContractCheck("dynamic is symbolic", subject, "ok", f"symbolic {dim!r} ({asked_text})"))

    # Axes that share one torch symbol must share one ONNX name.
    by_symbol: dict[str, set[Any]] = {}
    for key in requested:
        symbol = symbols.get(key, "")
        path, axis = key
        if symbol.isidentifier() and path in dims and axis < len(dims[path]):
            by_symbol.setdefault(symbol, set()).add(dims[path][axis])
    for symbol, names in by_symbol.items():
        if len(names) > 1:
            axes = ", ".join(f"{p}.shape[{a}]" for (p, a) in requested if symbols.get((p, a)) == symbol)
            checks.append(
                ContractCheck(
                    "equal dims share a name", axes, "warning",
                    f"torch found these equal ({symbol}) but the ONNX model names them {sorted(map(str, names))}",
                    "give them one Dim object so they share one name",
                )
            )

    # Outputs: present, unique, named after the output pytree rather than FX nodes.
    expected_names: list[str] = []
    try:
        expected_names = compat.output_paths(program)
    except Exception:  # noqa: BLE001
        pass
    fx_names = {node.name for node in program.graph.nodes}
    outputs = [v.name for v in model.graph.outputs]
    for name in outputs:
        if outputs.count(name) > 1:
            checks.append(ContractCheck("output names", name, "error", "output name is not unique"))
        elif not name:
            checks.append(ContractCheck("output names", "(unnamed)", "error", "an output has no name"))
        elif name in fx_names and name not in expected_names:
            checks.append(
                ContractCheck(
                    "output names", name, "warning",
                    f"output {name!r} is named after an FX node, which changes with the model's code",
                    "name outputs by returning a dict or a named tuple from forward",
                )
            )
        else:
            checks.append(ContractCheck("output names", name, "ok", "stable name"))
    return ContractReport(tuple(checks))


# -- first divergent node -----------------------------------------------------------------------


@dataclass(frozen=True)
class Divergence:
    """Where a failing case first goes wrong.

    ``stage`` is ``capture`` when the captured program already disagrees with eager PyTorch
    at these inputs (torch.export baked in something true only at the example), ``onnx`` when
    the program agrees with eager but an ONNX node disagrees with the FX node it came from.
    """

    case: str
    stage: str
    message: str
    onnx_node: str | None = None
    op_type: str | None = None
    onnx_value: str | None = None
    fx_node: str | None = None
    fx_target: str | None = None
    module_path: str | None = None
    source: str | None = None
    max_abs: float | None = None
    compared: int = 0

    def summary(self) -> str:
        lines = [f"first divergence ({self.case}, {self.stage}): {self.message}"]
        if self.onnx_node:
            lines.append(f"  ONNX node {self.onnx_node!r} ({self.op_type}) → value {self.onnx_value!r}")
        if self.fx_node:
            lines.append(f"  FX node {self.fx_node!r} ({self.fx_target})")
        if self.module_path is not None:
            lines.append(f"  module: {self.module_path or '(top level)'}")
        if self.source:
            lines.append(f"  at: {self.source}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()


_FX_NODE = re.compile(r"^%([\w.]+)\s*:")


def _fx_name_of(node: Any) -> str | None:
    text = node.metadata_props.get("pkg.torch.onnx.fx_node", "")
    match = _FX_NODE.match(text)
    return match.group(1) if match else None


def _module_path_of(name_scopes: Any) -> str | None:
    """``['', 'attn', 'attn.qkv', 'linear']`` → ``attn.qkv`` (the last entry is the FX node)."""
    import ast

    if isinstance(name_scopes, str):
        try:
            name_scopes = ast.literal_eval(name_scopes)
        except (ValueError, SyntaxError):
            return None
    if not isinstance(name_scopes, (list, tuple)) or not name_scopes:
        return None
    scopes = [s for s in name_scopes[:-1] if s and not s.startswith("_empty_nn_module_stack")]
    return scopes[-1] if scopes else ""


def source_of_stack(stack_trace: str | None) -> str | None:
    """The innermost user frame of an FX ``stack_trace`` as ``file:line in func: code``."""
    from .errors import _is_library_file

    if not stack_trace:
        return None
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)', stack_trace)
    if not frames:
        return None
    user = [f for f in frames if not _is_library_file(f[0])]
    filename, line, func, code = (user or frames)[-1]
    return f"{filename}:{line} in {func}: {code.strip()}"


def run_program(program: Any, session: Any, args: tuple, kwargs: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """Run a program's FX graph directly (no input-shape checks) on inputs given like the
    model's forward. Returns its user outputs and the value of every FX node by name."""
    import torch

    from . import _torch_compat as compat
    from .inputs import bind_inputs

    bound = bind_inputs(session.model, args, dict(kwargs))
    leaves = [leaf for value in bound.by_parameter().values() for _, leaf in compat.tree_flatten_with_path(value)]
    signature = program.graph_signature
    state = program.state_dict
    constants = getattr(program, "constants", {}) or {}
    inputs: list[Any] = []
    user = iter(leaves)
    for spec in signature.input_specs:
        kind = spec.kind.name
        if kind == "USER_INPUT":
            inputs.append(next(user))
        elif kind in ("PARAMETER", "BUFFER") and spec.target in state:
            inputs.append(state[spec.target])
        else:
            inputs.append(constants[spec.target])

    values: dict[str, Any] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, node: Any) -> Any:
            result = super().run_node(node)
            values[node.name] = result
            return result

    with torch.no_grad():
        flat = Recorder(program.graph_module, garbage_collect_values=False).run(*inputs)
    flat = list(flat) if isinstance(flat, (list, tuple)) else [flat]
    user_outputs = [
        value
        for value, spec in zip(flat, signature.output_specs)
        if spec.kind.name == "USER_OUTPUT" and isinstance(value, torch.Tensor)
    ]
    return user_outputs, values


def _ort_intermediates(model: Any, feeds: Mapping[str, Any]) -> dict[str, Any]:
    """Run an ONNX model with every node output exposed; values by name."""
    import onnx_ir as ir
    import onnxruntime as ort

    clone = model.clone()
    existing = {v.name for v in clone.graph.outputs}
    for node in clone.graph:
        for value in node.outputs:
            if value.name and value.name not in existing and value.dtype is not None:
                clone.graph.outputs.append(value)
                existing.add(value.name)
    options = ort.SessionOptions()
    options.log_severity_level = 4
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(ir.to_proto(clone).SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, dict(feeds))))


def first_divergence(
    session: Any,
    case: str,
    args: tuple,
    kwargs: Mapping[str, Any],
    expected: Sequence[Any],
    *,
    tolerances: Any = None,
    onnx_model: Any | None = None,
) -> Divergence:
    """Find where a case first goes wrong: in capture, or at the first ONNX node (in
    topological order) whose value differs from its FX node's value beyond tolerance."""
    program = session.decomposed_program
    model = onnx_model if onnx_model is not None else session.onnx_model
    try:
        fx_outputs, fx_values = run_program(program, session, args, kwargs)
    except Exception as exc:  # noqa: BLE001
        return Divergence(
            case, "capture",
            f"the captured program cannot run at these inputs ({first_line(exc)}): "
            "torch.export assumed something that only holds near the example (a runtime assert "
            "the ONNX model does not carry)",
        )
    names = [v.name for v in model.graph.outputs]
    for i, (got, want) in enumerate(zip(fx_outputs, expected)):
        check = compare(case, names[i] if i < len(names) else str(i), got, want, tolerances)
        if not check.ok:
            return Divergence(
                case, "capture",
                f"the captured program already differs from eager PyTorch here ("
                + (f"output {check.output!r}, max abs diff {check.max_abs:.3g}" if check.max_abs is not None else check.describe())
                + "): torch.export baked in "
                "behaviour of the example size (a Python branch or a specialized dim); the ONNX "
                "model is faithful to the program",
                max_abs=check.max_abs,
            )
    try:
        feeds = session.feeds(*args, **dict(kwargs))
        onnx_values = _ort_intermediates(model, feeds)
    except Exception as exc:  # noqa: BLE001
        return Divergence(case, "onnx", f"could not run the ONNX model with its intermediate values: {first_line(exc)}")

    fx_nodes = {node.name: node for node in program.graph.nodes}
    graph_outputs = {v.name for v in model.graph.outputs}
    compared = 0
    for node in model.graph:
        fx_name = _fx_name_of(node)
        candidates = [v for v in node.outputs if v.name in fx_values and v.name in onnx_values]
        if not candidates and fx_name in fx_values and len(node.outputs) == 1 and node.outputs[0].name in graph_outputs:
            candidates = [node.outputs[0]]
        for value in candidates:
            fx_key = value.name if value.name in fx_values else fx_name
            fx_value = fx_values.get(fx_key)
            onnx_value = onnx_values.get(value.name)
            if onnx_value is None or not hasattr(fx_value, "shape"):
                continue
            check = compare(case, value.name, onnx_value, fx_value, tolerances)
            compared += 1
            if check.ok:
                continue
            fx_node = fx_nodes.get(fx_key)
            stack = fx_node.meta.get("stack_trace") if fx_node is not None else None
            stack = stack or node.metadata_props.get("pkg.torch.onnx.stack_trace")
            return Divergence(
                case, "onnx",
                f"ONNX {node.op_type} differs from FX {fx_key} ({check.describe()})",
                onnx_node=node.name,
                op_type=node.op_type,
                onnx_value=value.name,
                fx_node=fx_key,
                fx_target=str(fx_node.target) if fx_node is not None else None,
                module_path=_module_path_of(node.metadata_props.get("pkg.torch.onnx.name_scopes")),
                source=source_of_stack(stack),
                max_abs=check.max_abs,
                compared=compared,
            )
    return Divergence(
        case, "onnx",
        f"no ONNX node value differs from its FX node ({compared} compared); the difference "
        "appears in values without an FX counterpart (fused or renamed by the optimizer)",
        compared=compared,
    )


# -- the whole verification ---------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    """One plain-language conclusion: ``kind`` is ``wrong_at_example``, ``example_only``,
    ``wrong_at_size``, ``static_in_onnx``, ``contract``, ``eager_error``, ``not_swept``."""

    kind: str
    message: str
    case: str | None = None
    sizes: tuple[tuple[str, int], ...] = ()
    cause: str | None = None

    def __str__(self) -> str:
        return self.message + (f"\n    likely cause: {self.cause}" if self.cause else "")


@dataclass(frozen=True)
class VerifyResult:
    """The outcome of :func:`verify`: ``status`` is ``passed``, ``failed`` or ``error``
    (nothing could be checked, e.g. the export failed: see ``error``)."""

    status: str
    cases: tuple[CaseResult, ...] = ()
    groups: tuple[DimGroup, ...] = ()
    contract: ContractReport | None = None
    findings: tuple[Finding, ...] = ()
    divergence: Divergence | None = None
    tolerances: Mapping[str, Tolerance] = field(default_factory=lambda: DEFAULT_TOLERANCES)
    seconds: float = 0.0
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "passed"

    def case(self, name: str) -> CaseResult:
        for c in self.cases:
            if c.name == name:
                return c
        raise KeyError(name)

    @property
    def failed_cases(self) -> tuple[CaseResult, ...]:
        return tuple(c for c in self.cases if c.status in ("fail", "ort_error", "error"))

    def to_frame(self) -> Any:
        """One row per case and output."""
        import pandas as pd

        rows = []
        for c in self.cases:
            base = {"case": c.name, "sizes": c.sizes_text, "outside_obtained_range": ", ".join(c.outside_obtained)}
            if not c.outputs:
                rows.append({**base, "output": None, "status": c.status, "max_abs": None, "max_rel": None,
                             "mismatched": None, "shape": None, "tolerance": None, "detail": c.error})
                continue
            for o in c.outputs:
                rows.append({
                    **base, "output": o.output, "status": o.status if c.status != "ort_error" else c.status,
                    "max_abs": o.max_abs, "max_rel": o.max_rel, "mismatched": o.mismatched,
                    "shape": list(o.actual_shape or o.expected_shape or ()),
                    "tolerance": str(o.tolerance) if o.tolerance else None,
                    "detail": None if o.ok else o.describe(),
                })
        columns = ["case", "sizes", "output", "status", "max_abs", "max_rel", "mismatched", "shape",
                   "tolerance", "outside_obtained_range", "detail"]
        return pd.DataFrame(rows, columns=columns)

    def groups_frame(self) -> Any:
        import pandas as pd

        return pd.DataFrame(
            [
                {
                    "dim": g.label, "axes": g.axes_text, "requested": g.requested, "example": g.example,
                    "requested_range": g.describe_range("requested"),
                    "obtained": "specialized" if g.specialized else f"{g.symbol} {g.describe_range()}",
                    "onnx": ", ".join(map(str, g.onnx_dims)), "sizes": list(g.sizes),
                    "causes": "; ".join(g.causes),
                }
                for g in self.groups
            ],
            columns=["dim", "axes", "requested", "example", "requested_range", "obtained", "onnx", "sizes", "causes"],
        )

    def summary(self) -> str:
        if self.status == "error":
            return f"Verification could not run: {self.error}"
        n_other = sum(1 for c in self.cases if not c.is_example)
        head = "PASSED" if self.ok else "FAILED"
        lines = [
            f"Verification {head}: {len(self.cases)} case(s) ({n_other} at other sizes), "
            f"{len(self.groups)} dim group(s), {self.seconds:.2f} s"
        ]
        if self.ok and self.groups:
            swept = "; ".join(f"{g.label} in {{{', '.join(map(str, sorted(g.sizes)))}}}" for g in self.groups)
            lines.append(f"  - correct at every swept size: {swept}")
        for finding in self.findings:
            lines.append("  - " + str(finding).replace("\n", "\n  "))
        if self.divergence is not None:
            lines.append("  " + self.divergence.summary().replace("\n", "\n  "))
        if self.contract is not None and not self.contract.ok:
            lines.append("  " + self.contract.summary().replace("\n", "\n  "))
        lines.append("  cases:")
        for c in self.cases:
            diff = f"max abs {c.max_abs:.3g}" if c.max_abs is not None else ""
            outside = f"  (outside obtained range: {', '.join(c.outside_obtained)})" if c.outside_obtained else ""
            lines.append(f"    {c.name:<14} {c.sizes_text:<28} {c.status:<12} {diff}{outside}".rstrip())
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.summary())


def _run_case(
    session: Any,
    ort_session: Any,
    name: str,
    sizes: tuple[tuple[str, int], ...],
    args: tuple,
    kwargs: Mapping[str, Any],
    output_names: Sequence[str],
    tolerances: Any,
) -> tuple[CaseResult, list[Any] | None]:
    import torch

    from ._torch_compat import tree_flatten_with_path

    start = time.perf_counter()
    feeds: dict[str, Any] | None = None
    feeds_error: BaseException | None = None
    try:  # copied before eager runs: a module that writes into its inputs must not change them
        feeds = {k: v.copy() for k, v in session.feeds(*args, **dict(kwargs)).items()}
    except Exception as exc:  # noqa: BLE001
        feeds_error = exc
    try:
        eager_args, eager_kwargs = _clone_tensors(args), _clone_tensors(dict(kwargs))
        with torch.inference_mode():
            eager = session.model(*eager_args, **eager_kwargs)
        expected = [leaf for _, leaf in tree_flatten_with_path(eager) if isinstance(leaf, torch.Tensor)]
    except Exception as exc:  # noqa: BLE001
        return CaseResult(name, sizes, "eager_error", error=f"eager PyTorch raised {first_line(exc)}",
                          seconds=time.perf_counter() - start), None
    try:
        if feeds_error is not None:
            raise feeds_error
        actual = ort_session.run(None, feeds)
    except Exception as exc:  # noqa: BLE001
        return CaseResult(name, sizes, "ort_error", error=_ort_error_text(exc, session),
                          seconds=time.perf_counter() - start), expected
    checks: list[OutputCheck] = []
    for i in range(max(len(expected), len(actual))):
        label = output_names[i] if i < len(output_names) else f"#{i}"
        if i >= len(actual) or i >= len(expected):
            checks.append(OutputCheck(name, label, "missing"))
            continue
        checks.append(compare(name, label, actual[i], expected[i], tolerances))
    status = "pass" if all(c.ok for c in checks) else "fail"
    return CaseResult(name, sizes, status, tuple(checks), seconds=time.perf_counter() - start), expected


def _training_modules(model: Any) -> list[str]:
    """Dropout / batch-norm submodules left in training mode (names, at most three)."""
    import torch

    kinds = (torch.nn.modules.dropout._DropoutNd, torch.nn.modules.batchnorm._BatchNorm)
    modules = getattr(model, "named_modules", None)
    if modules is None:
        return []
    found = [f"{name} ({type(m).__name__})" if name else type(m).__name__ for name, m in modules() if isinstance(m, kinds) and m.training]
    return found[:3] + (["..."] if len(found) > 3 else [])


def _clone_tensors(value: Any) -> Any:
    import torch

    from . import _torch_compat as compat

    leaves = [leaf.clone() if isinstance(leaf, torch.Tensor) else leaf for _, leaf in compat.tree_flatten_with_path(value)]
    return compat.tree_replace_leaves(value, leaves)


def _ort_error_text(exc: BaseException, session: Any) -> str:
    """onnxruntime's message, plus the FX node and source line of the ONNX node it names."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    text = re.sub(r"^\[ONNXRuntimeError\] : \d+ : \w+ : ", "", text)
    text = re.sub(r"Status Message: \S+:\d+ .*? was false\. ", "Status Message: ", text)
    match = re.search(r"Name:'([^']+)'", str(exc))
    if match:
        try:
            node = next((n for n in session.onnx_model.graph if n.name == match.group(1)), None)
        except Exception:  # noqa: BLE001
            node = None
        if node is not None:
            source = source_of_stack(node.metadata_props.get("pkg.torch.onnx.stack_trace"))
            fx_name = _fx_name_of(node)
            text += f" [ONNX node {node.name!r} ({node.op_type}) from FX {fx_name}" + (f" at {source}" if source else "") + "]"
    return text


def _ort_session(session: Any) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 4
    return ort.InferenceSession(session.model_proto.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _case_cause(case: CaseResult, groups: Sequence[DimGroup]) -> str | None:
    parts: list[str] = []
    for group in groups:
        if group.label not in case.changed:
            continue
        size = dict(case.sizes)[group.label]
        guards = f" ({'; '.join(group.causes)})" if group.causes else ""
        if group.specialized:
            onnx = ", ".join(map(repr, group.onnx_dims))
            parts.append(
                f"{group.axes_text} was specialized to {group.example} during capture{guards}; "
                + (f"the ONNX input still declares {onnx}, so onnxruntime accepts {size} and computes as for {group.example}"
                   if group.onnx_accepts_any_size else f"the ONNX model declares {onnx}")
            )
        elif not group.in_obtained_range(size):
            parts.append(
                f"torch verified the program only for {group.label} in {group.describe_range()}{guards}; "
                f"{size} is outside it and the ONNX model does not check that range (a dropped runtime assert)"
            )
        elif group.causes:
            parts.append(f"{group.label}: {'; '.join(group.causes)}")
    return "; ".join(parts) or None


def _findings(cases: Sequence[CaseResult], groups: Sequence[DimGroup], contract: ContractReport | None) -> list[Finding]:
    findings: list[Finding] = []
    example = next((c for c in cases if c.is_example), None)
    others = [c for c in cases if not c.is_example]
    checked = [c for c in others if c.status != "eager_error"]
    bad = [c for c in checked if not c.ok]
    if example is not None and not example.ok and example.status != "eager_error":
        findings.append(Finding("wrong_at_example", f"wrong at the example size ({example.sizes_text}): {example.describe()}", example.name, example.sizes))
    if not groups:
        findings.append(Finding("not_swept", "no dim was requested dynamic: checked at the example size only"))
    elif example is not None and example.ok and checked and len(bad) == len(checked):
        findings.append(Finding("example_only", f"correct at the example size only ({example.sizes_text}): wrong or failing at every other size tried"))
    static = [
        (g, d) for g in groups for (axis, d) in zip(g.axes, g.onnx_dims)
        if isinstance(d, int) or (isinstance(d, str) and d.lstrip("-").isdigit())
    ]
    if static:
        listed = ", ".join(sorted({f"{g.axes_text} (requested {g.requested}, ONNX dim {d!r})" for g, d in static}))
        findings.append(Finding("static_in_onnx", f"dims declared dynamic but static in the ONNX model: {listed}"))
    for c in bad:
        what = {"ort_error": "onnxruntime fails", "error": "could not build inputs"}.get(c.status, "wrong")
        findings.append(Finding("wrong_at_size", f"{what} at size {c.sizes_text}: {c.describe()}", c.name, c.sizes, _case_cause(c, groups)))
    skipped: dict[tuple[str, ...], list[CaseResult]] = {}
    for c in others:
        if c.status == "eager_error":
            skipped.setdefault(c.changed, []).append(c)
    for changed, group_cases in skipped.items():
        if len(changed) == 1:
            where = f"{changed[0]} = " + ", ".join(str(dict(c.sizes)[changed[0]]) for c in group_cases)
        else:
            where = "; ".join(c.sizes_text for c in group_cases)
        findings.append(Finding(
            "eager_error",
            f"not checked at {where}: {group_cases[0].error} (the module itself does not support "
            f"{'these sizes' if len(group_cases) > 1 else 'this size'})",
            group_cases[0].name, group_cases[0].sizes,
        ))
    if contract is not None:
        for check in contract.errors:
            if check.check != "dynamic is symbolic":
                findings.append(Finding("contract", f"{check.subject}: {check.message}"))
    return findings


def verify(
    session: Any,
    *,
    tolerances: Mapping[str, Tolerance] | Tolerance | None = None,
    sizes: Mapping[str, Sequence[int]] | None = None,
    make_inputs: Callable[[InputCase], tuple[tuple, dict] | None] | None = None,
    max_size: int = 512,
    locate: bool = True,
    seed: int = 0,
    progress: Callable[[Progress], Any] | None = None,
) -> VerifyResult:
    """Compare the ONNX model in onnxruntime with the eager module, at the example inputs
    and at other sizes of every dynamic dim; check the ONNX input/output contract; locate
    the first divergent node of the first wrong case. Never raises for a bad model.

    Args:
        tolerances: per-dtype overrides (``{"float32": Tolerance(1e-3, 1e-4)}``) or one
            :class:`Tolerance` for everything; defaults in :data:`DEFAULT_TOLERANCES`.
        sizes: sweep exactly these sizes per dim group label (``{"batch": [1, 5, 64]}``)
            instead of the generated ones.
        make_inputs: hook called for every generated case with an :class:`InputCase`;
            return ``(args, kwargs)`` to replace its inputs, or None to keep them.
        max_size: largest size a generated case may use.
        locate: find the first divergent node of the first wrong case.
        progress: called with a :class:`Progress` after every case.
    """
    start = time.perf_counter()
    try:
        program = session.exported_program
        model = session.onnx_model
    except Exception as exc:  # noqa: BLE001 - the export failed: nothing to verify
        return VerifyResult("error", error=first_line(exc), seconds=time.perf_counter() - start)
    try:
        groups = dim_groups(session, program, model)
        plans = _plan(groups, max_size, sizes)
        contract = check_contract(session, model, program)
    except Exception as exc:  # noqa: BLE001
        return VerifyResult("error", error=first_line(exc), seconds=time.perf_counter() - start)
    try:
        ort_session = _ort_session(session)
    except Exception as exc:  # noqa: BLE001 - e.g. no onnxruntime kernel for a dtype
        return VerifyResult("error", groups=groups, contract=contract, seconds=time.perf_counter() - start,
                            error=f"onnxruntime cannot load the model: {first_line(exc)}")
    output_names = [v.name for v in model.graph.outputs]
    example_sizes = tuple((g.label, g.example) for g in groups)
    total = len(plans) + 1
    cases: list[CaseResult] = []
    inputs: dict[str, tuple[tuple, dict, list[Any] | None]] = {}

    _report(progress, "verify", 0, total, "example inputs")
    result, expected = _run_case(session, ort_session, "example", example_sizes, session.inputs.args,
                                 session.inputs.kwargs, output_names, tolerances)
    cases.append(result)
    inputs["example"] = (session.inputs.args, dict(session.inputs.kwargs), expected)
    swept: dict[str, list[int]] = {g.label: [g.example] for g in groups}
    for i, plan in enumerate(plans, start=1):
        _report(progress, "verify", i, total, f"{plan.name}: {', '.join(f'{k}={v}' for k, v in plan.sizes)}")
        assignment = dict(plan.sizes)
        changed = tuple(g.label for g in groups if assignment[g.label] != g.example)
        outside = tuple(g.label for g in groups if not g.in_obtained_range(assignment[g.label]))
        try:
            args, kwargs, shapes = make_case_inputs(session, program, groups, assignment, seed=seed + i)
            if make_inputs is not None:
                replacement = make_inputs(InputCase(plan.name, MappingProxyType(assignment), MappingProxyType(shapes), args, MappingProxyType(kwargs)))
                if replacement is not None:
                    args, kwargs = tuple(replacement[0]), dict(replacement[1])
        except Exception as exc:  # noqa: BLE001
            cases.append(CaseResult(plan.name, plan.sizes, "error", error=f"inputs: {first_line(exc)}", changed=changed, outside_obtained=outside))
            continue
        result, expected = _run_case(session, ort_session, plan.name, plan.sizes, args, kwargs, output_names, tolerances)
        cases.append(replace(result, changed=changed, outside_obtained=outside))
        inputs[plan.name] = (args, kwargs, expected)
        for label, size in plan.sizes:
            if size not in swept[label]:
                swept[label].append(size)
    groups = tuple(replace(g, sizes=tuple(swept[g.label])) for g in groups)

    divergence = None
    if locate:
        wrong = next((c for c in cases if c.status == "fail"), None)
        if wrong is not None:
            _report(progress, "verify", total, total, f"locating the first divergent node of {wrong.name}")
            args, kwargs, expected = inputs[wrong.name]
            try:
                divergence = first_divergence(session, wrong.name, args, kwargs, expected or [], tolerances=tolerances)
            except Exception as exc:  # noqa: BLE001
                divergence = Divergence(wrong.name, "unknown", f"could not locate: {first_line(exc)}")
    findings = _findings(cases, groups, contract)
    training = _training_modules(session.model)
    if training:
        findings.insert(0, Finding(
            "training_mode",
            f"the module is in training mode and has {', '.join(training)}: their eager results change "
            "from call to call; call model.eval() before exporting",
        ))
    failed = any(not c.ok and c.status != "eager_error" for c in cases) or not contract.ok
    _report(progress, "verify", total, total, "done")
    merged = dict(DEFAULT_TOLERANCES)
    if isinstance(tolerances, Tolerance):
        merged = {k: tolerances for k in merged}
    elif tolerances:
        merged.update({k: v if isinstance(v, Tolerance) else Tolerance(*v) for k, v in tolerances.items()})
    return VerifyResult(
        "failed" if failed else "passed",
        tuple(cases),
        groups,
        contract,
        tuple(findings),
        divergence,
        MappingProxyType(merged),
        time.perf_counter() - start,
    )
