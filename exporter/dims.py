"""The dim-policy model: what the user asks of every input axis.

Per input (a leaf path such as ``x`` or ``cache.0.key``) and per axis, one of:

* ``STATIC``  – keep the example size (the default for any axis not mentioned);
* ``AUTO``    – let torch decide: dynamic unless the model's code pins it;
* ``DYNAMIC`` – must stay dynamic; export fails (with the reason) if the code pins it;
* ``Dim(name, min=, max=)`` – a named dynamic dim; axes sharing a name share one symbol and
  one ONNX ``dim_param``.

:meth:`DimSpec.parse` accepts what users already write: torch ``dynamic_shapes`` (dict by
input name or tuple by position, nested for pytrees, ``torch.export.Dim`` objects and
``Dim.AUTO``/``STATIC``/``DYNAMIC`` hints, ``True`` = AUTO, ``None`` = static), legacy
``dynamic_axes`` (``{"x": {0: "batch"}}`` or ``{"x": [0]}``), plain strings as names and keys
that are leaf paths (``{"cache.0.key": {0: "batch"}}``). Everything is validated against the
example inputs before any export starts.
"""

from __future__ import annotations

import difflib
import enum
import keyword
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

from .errors import SpecError
from .inputs import BoundInputs, Leaf

__all__ = ["AUTO", "DYNAMIC", "STATIC", "Dim", "DimSpec", "Policy", "AxisPolicy"]


class Policy(enum.Enum):
    AUTO = "auto"
    STATIC = "static"
    DYNAMIC = "dynamic"

    def __repr__(self) -> str:
        return self.name


AUTO = Policy.AUTO
STATIC = Policy.STATIC
DYNAMIC = Policy.DYNAMIC


@dataclass(frozen=True)
class Dim:
    """A named dynamic dim with an optional inclusive range."""

    name: str
    min: int | None = None
    max: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier() or keyword.iskeyword(self.name):
            raise SpecError(
                f"dim name {self.name!r} is not a Python identifier",
                hint="use a name such as 'batch' or 'seq_len' (letters, digits, underscores)",
            )
        for bound in ("min", "max"):
            value = getattr(self, bound)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise SpecError(
                    f"Dim {self.name!r}: {bound}={value!r} must be a non-negative int or None",
                    hint=f"Dim({self.name!r}, min=1, max=4096)",
                )
        if self.min is not None and self.max is not None and self.min > self.max:
            raise SpecError(
                f"Dim {self.name!r}: min={self.min} is greater than max={self.max}",
                hint=f"swap them: Dim({self.name!r}, min={self.max}, max={self.min})",
            )

    def contains(self, size: int) -> bool:
        return (self.min is None or size >= self.min) and (self.max is None or size <= self.max)

    def __repr__(self) -> str:
        bounds = "".join(
            f", {k}={v}" for k, v in (("min", self.min), ("max", self.max)) if v is not None
        )
        return f"Dim({self.name!r}{bounds})"


AxisPolicy = Union[Policy, Dim]


@dataclass(frozen=True)
class AxisEntry:
    path: str
    axis: int
    policy: AxisPolicy


@dataclass(frozen=True)
class DimSpec:
    """Validated per-axis policies. Axes not listed are STATIC. Hashable, immutable."""

    entries: tuple[AxisEntry, ...] = ()
    _index: dict = field(default=None, init=False, repr=False, compare=False, hash=False)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {(e.path, e.axis): e.policy for e in self.entries})

    # -- queries ---------------------------------------------------------------------------
    def policy(self, path: str, axis: int) -> AxisPolicy:
        return self._index.get((path, axis), STATIC)

    def __iter__(self) -> Iterator[AxisEntry]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def named_dims(self) -> dict[str, Dim]:
        return {e.policy.name: e.policy for e in self.entries if isinstance(e.policy, Dim)}

    def is_static(self) -> bool:
        return not self.entries

    # -- edits (each returns a new, validated spec) ----------------------------------------
    def with_axis(self, bound: BoundInputs, path: str, axis: int, policy: Any) -> DimSpec:
        """This spec with one axis set to ``policy`` (AUTO, STATIC, DYNAMIC, Dim, str, ...)."""
        leaf = _find_leaf(bound, path)
        value = {(e.path, e.axis): e.policy for e in self.entries}
        axis = _check_axis(leaf, axis)
        value[(leaf.path, axis)] = _parse_axis_value(policy, leaf, axis)
        return _build(bound, value)

    # -- construction ----------------------------------------------------------------------
    @classmethod
    def parse(cls, raw: Any, bound: BoundInputs, *, dynamic_axes: Any = None) -> DimSpec:
        """Parse and validate any accepted spec form against the bound example inputs."""
        if isinstance(raw, DimSpec):
            value = {(e.path, e.axis): e.policy for e in raw.entries}
            for (path, axis), policy in value.items():
                leaf = _find_leaf(bound, path)
                _check_axis(leaf, axis)
        else:
            value = _parse_dynamic_shapes(raw, bound)
        if dynamic_axes is not None:
            for key, policy in _parse_dynamic_axes(dynamic_axes, bound).items():
                if key in value and value[key] != policy:
                    path, axis = key
                    raise SpecError(
                        f"dynamic_shapes and dynamic_axes disagree: {value[key]!r} vs {policy!r}",
                        input=path,
                        axis=axis,
                        hint="give each axis in only one of dynamic_shapes= and dynamic_axes=",
                    )
                value[key] = policy
        return _build(bound, value)

    # -- conversions -----------------------------------------------------------------------
    def to_torch(self, bound: BoundInputs) -> dict[str, Any] | None:
        """The equivalent ``dynamic_shapes=`` for ``torch.export.export``."""
        import torch

        torch_dims: dict[str, Any] = {}

        def convert(policy: AxisPolicy) -> Any:
            if policy is AUTO:
                return torch.export.Dim.AUTO
            if policy is DYNAMIC:
                return torch.export.Dim.DYNAMIC
            if policy.name not in torch_dims:
                kwargs = {k: v for k, v in (("min", policy.min), ("max", policy.max)) if v is not None}
                torch_dims[policy.name] = torch.export.Dim(policy.name, **kwargs)
            return torch_dims[policy.name]

        if self.is_static():
            return None
        return _nest(bound, lambda leaf: self._leaf_axes(leaf, convert))

    def to_code(self, bound: BoundInputs) -> str:
        """Python source that builds the same ``dynamic_shapes`` with ``torch.export.Dim``."""
        lines = ["from torch.export import Dim", ""]
        for dim in self.named_dims().values():
            args = "".join(
                f", {k}={v}" for k, v in (("min", dim.min), ("max", dim.max)) if v is not None
            )
            lines.append(f"{dim.name} = Dim({dim.name!r}{args})")
        if self.named_dims():
            lines.append("")

        def convert(policy: AxisPolicy) -> _Code:
            if isinstance(policy, Dim):
                return _Code(policy.name)
            return _Code(f"Dim.{policy.name}")

        if self.is_static():
            lines.append("dynamic_shapes = None  # every dim static")
        else:
            nested = _nest(bound, lambda leaf: self._leaf_axes(leaf, convert))
            lines.append(f"dynamic_shapes = {_format_code(nested)}")
        return "\n".join(lines)

    def to_dynamic_axes(self) -> dict[str, dict[int, str]]:
        """Legacy ``dynamic_axes`` form (named dims only keep their names)."""
        out: dict[str, dict[int, str]] = {}
        for e in self.entries:
            name = e.policy.name if isinstance(e.policy, Dim) else f"{e.path.replace('.', '_')}_dim{e.axis}"
            out.setdefault(e.path, {})[e.axis] = name
        return out

    def _leaf_axes(self, leaf: Leaf, convert) -> dict[int, Any] | None:
        axes = {e.axis: convert(e.policy) for e in self.entries if e.path == leaf.path}
        return axes or None

    def describe(self) -> str:
        if not self.entries:
            return "all dims static"
        return ", ".join(f"{e.path}.{e.axis}={e.policy!r}" for e in self.entries)

    def __repr__(self) -> str:
        return f"DimSpec({self.describe()})"


class _Code(str):
    """A string rendered without quotes by :func:`_format_code`."""


def _format_code(value: Any, indent: int = 0) -> str:
    pad = " " * (indent + 4)
    if isinstance(value, _Code):
        return str(value)
    if isinstance(value, dict):
        if not value:
            return "{}"
        if all(isinstance(k, int) for k in value):
            return "{" + ", ".join(f"{k}: {_format_code(v)}" for k, v in value.items()) + "}"
        items = [f"{pad}{k!r}: {_format_code(v, indent + 4)}," for k, v in value.items()]
        return "{\n" + "\n".join(items) + "\n" + " " * indent + "}"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_format_code(v, indent + 4) for v in value)
        if isinstance(value, tuple):
            return f"({inner},)" if len(value) == 1 else f"({inner})"
        return f"[{inner}]"
    return repr(value)


# -- parsing -------------------------------------------------------------------------------


def _did_you_mean(name: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=1)
    valid = ", ".join(repr(c) for c in choices) or "(none)"
    prefix = f"did you mean {close[0]!r}? " if close else ""
    return f"{prefix}valid inputs: {valid}"


def _find_leaf(bound: BoundInputs, path: str) -> Leaf:
    for leaf in bound.leaves:
        if leaf.path == path:
            return leaf
    if path in bound.leaf_paths_of_non_tensors:
        raise SpecError(
            "is not a tensor, so it has no axes to make dynamic",
            input=path,
            hint=f"remove {path!r} from the spec, or pass a tensor for it",
        )
    raise SpecError(
        f"unknown input {path!r}",
        input=path,
        hint=_did_you_mean(path, bound.paths),
    )


def _check_axis(leaf: Leaf, axis: Any) -> int:
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise SpecError(
            f"axis {axis!r} is not an int",
            input=leaf.path,
            hint=f"use an axis index in range({leaf.rank}), e.g. {{0: 'batch'}}",
        )
    if not -leaf.rank <= axis < leaf.rank:
        raise SpecError(
            f"axis {axis} is out of range for a tensor of shape {list(leaf.shape)} (rank {leaf.rank})",
            input=leaf.path,
            axis=axis,
            hint=f"valid axes are 0..{leaf.rank - 1} (or -{leaf.rank}..-1)" if leaf.rank else "a 0-d tensor has no axes: leave it static",
        )
    return axis % leaf.rank


def _parse_axis_value(value: Any, leaf: Leaf, axis: int) -> AxisPolicy:
    """One axis: AUTO/STATIC/DYNAMIC, Dim, str, True/None, int, or a torch Dim/hint."""
    if isinstance(value, (Policy, Dim)):
        return value
    if value is None:
        return STATIC
    if value is True:
        return AUTO
    if value is False:
        return STATIC
    if isinstance(value, str):
        try:
            return Dim(value)
        except SpecError as exc:
            raise SpecError(exc.reason, input=leaf.path, axis=axis, hint=exc.hint) from None
    if isinstance(value, int):
        if value != leaf.shape[axis]:
            raise SpecError(
                f"static size {value} does not match the example size {leaf.shape[axis]}",
                input=leaf.path,
                axis=axis,
                hint=f"use {leaf.shape[axis]} (or STATIC), or change the example input",
            )
        return STATIC
    converted = _from_torch_dim(value)
    if converted is not None:
        return converted
    raise SpecError(
        f"{value!r} is not a dim policy",
        input=leaf.path,
        axis=axis,
        hint="use AUTO, STATIC, DYNAMIC, Dim('name', min=, max=), a name string, True or None",
    )


def _from_torch_dim(value: Any) -> AxisPolicy | None:
    try:
        from torch.export.dynamic_shapes import Dim as TorchDim, _DerivedDim, _DimHint
    except ImportError:  # pragma: no cover - torch is a dependency
        return None
    if isinstance(value, _DimHint):
        if getattr(value, "min", None) is not None or getattr(value, "max", None) is not None:
            raise SpecError(
                f"{value!r} carries bounds, which the dim-policy model keeps only on named dims",
                hint="use exporter.Dim('name', min=..., max=...)",
            )
        return Policy[value.type.name]
    if isinstance(value, _DerivedDim):
        raise SpecError(
            f"derived dim {value.__name__!r} is not supported yet",
            hint="give that axis its own Dim, or AUTO, and let torch find the relation",
        )
    if isinstance(value, TorchDim):
        lo = value.min if isinstance(value.min, int) and value.min > 0 else None
        hi = value.max if isinstance(value.max, int) and not isinstance(value.max, bool) else None
        try:
            return Dim(value.__name__, min=lo, max=hi)
        except SpecError:
            raise
    return None


def _parse_leaf_spec(raw: Any, leaf: Leaf, out: dict[tuple[str, int], AxisPolicy]) -> None:
    """The spec of one tensor: None, True, a policy, a dict {axis: value} or a per-axis list."""
    if raw is None or raw is False:
        return
    if raw is True or isinstance(raw, Policy) or _is_dim_hint(raw):
        policy = _parse_axis_value(raw, leaf, 0) if leaf.rank else STATIC
        if policy is not STATIC:
            for axis in range(leaf.rank):
                out[(leaf.path, axis)] = policy
        return
    if isinstance(raw, Mapping):
        for axis, value in raw.items():
            ax = _check_axis(leaf, axis)
            out[(leaf.path, ax)] = _parse_axis_value(value, leaf, ax)
        return
    if isinstance(raw, (list, tuple)):
        if len(raw) != leaf.rank:
            raise SpecError(
                f"a per-axis list of length {len(raw)} was given for a tensor of rank {leaf.rank} "
                f"(shape {list(leaf.shape)})",
                input=leaf.path,
                hint=f"give {leaf.rank} entries, or a dict {{axis: policy}} for just the dynamic axes",
            )
        for axis, value in enumerate(raw):
            out[(leaf.path, axis)] = _parse_axis_value(value, leaf, axis)
        return
    raise SpecError(
        f"{raw!r} is not a tensor spec",
        input=leaf.path,
        hint="use a dict {axis: policy}, a list with one policy per axis, True (all AUTO) or None",
    )


def _is_dim_hint(value: Any) -> bool:
    return type(value).__name__ == "_DimHint"


def _subtree_spec(raw: Any, key: str) -> tuple[bool, Any]:
    """Step into a nested spec by one pytree key. Returns (found, sub-spec)."""
    if raw is None or raw is True or raw is False or isinstance(raw, Policy) or _is_dim_hint(raw):
        return True, raw  # applies to the whole subtree
    if isinstance(raw, Mapping):
        if key in raw:
            return True, raw[key]
        if key.isdigit() and int(key) in raw:
            return True, raw[int(key)]
        return False, None
    if isinstance(raw, (list, tuple)) and key.isdigit():
        index = int(key)
        return (True, raw[index]) if index < len(raw) else (False, None)
    if hasattr(raw, "__dataclass_fields__") and hasattr(raw, key):
        return True, getattr(raw, key)
    return False, None


def _parse_dynamic_shapes(raw: Any, bound: BoundInputs) -> dict[tuple[str, int], AxisPolicy]:
    out: dict[tuple[str, int], AxisPolicy] = {}
    if raw is None:
        return out
    params = list(bound.parameter_names)
    if isinstance(raw, (list, tuple)):
        if len(raw) != len(params):
            raise SpecError(
                f"dynamic_shapes has {len(raw)} entries by position but forward was given "
                f"{len(params)} inputs ({', '.join(params)})",
                hint="give one entry per input in signature order, or a dict keyed by input name",
            )
        raw = dict(zip(params, raw))
    if not isinstance(raw, Mapping):
        raise SpecError(
            f"dynamic_shapes must be a dict, a tuple, a DimSpec or None, not {type(raw).__name__}",
            hint='e.g. dynamic_shapes={"x": {0: "batch"}}',
        )
    for key in raw:
        if not isinstance(key, str):
            raise SpecError(f"dynamic_shapes key {key!r} is not an input name", hint=_did_you_mean(str(key), params))
        if key in params or key in bound.paths:
            continue
        if key in bound.leaf_paths_of_non_tensors or any(p.startswith(key + ".") for p in bound.leaf_paths_of_non_tensors):
            if raw[key] is not None:
                _find_leaf(bound, key)  # raises "not a tensor"
            continue
        raise SpecError(
            f"unknown input {key!r}", input=key, hint=_did_you_mean(key, params + [p for p in bound.paths if p not in params])
        )

    for leaf in bound.leaves:
        if leaf.path in raw:  # addressed by its full path
            _parse_leaf_spec(raw[leaf.path], leaf, out)
            continue
        param = next((p for p in params if leaf.path == p or leaf.path.startswith(p + ".")), None)
        if param is None or param not in raw:
            continue
        sub = raw[param]
        rest = leaf.path[len(param) + 1 :].split(".") if leaf.path != param else []
        found = True
        for key in rest:
            found, sub = _subtree_spec(sub, key)
            if not found:
                break
        if found:
            _parse_leaf_spec(sub, leaf, out)
    for path in bound.leaf_paths_of_non_tensors:
        if path in raw or path in params:
            continue
        param = next((p for p in params if path.startswith(p + ".")), None)
        if param is None or param not in raw:
            continue
        sub, found = raw[param], True
        for key in path[len(param) + 1 :].split("."):
            found, sub = _subtree_spec(sub, key)
            if not found:
                break
        if found and sub not in (None, True, False) and not isinstance(sub, Policy) and not _is_dim_hint(sub):
            _find_leaf(bound, path)  # raises "not a tensor"
    return out


def _parse_dynamic_axes(raw: Any, bound: BoundInputs) -> dict[tuple[str, int], AxisPolicy]:
    """Legacy ``dynamic_axes``: ``{"x": {0: "batch"}}`` or ``{"x": [0, 1]}``."""
    if not isinstance(raw, Mapping):
        raise SpecError(
            f"dynamic_axes must be a dict, not {type(raw).__name__}",
            hint='e.g. dynamic_axes={"x": {0: "batch"}}',
        )
    out: dict[tuple[str, int], AxisPolicy] = {}
    for name, axes in raw.items():
        leaf = _find_leaf(bound, name.replace("_", ".") if name not in bound.paths and name.replace("_", ".") in bound.paths else name)
        if isinstance(axes, Mapping):
            for axis, value in axes.items():
                ax = _check_axis(leaf, axis)
                out[(leaf.path, ax)] = _parse_axis_value(value, leaf, ax)
        elif isinstance(axes, (list, tuple)):
            for axis in axes:
                out[(leaf.path, _check_axis(leaf, axis))] = DYNAMIC
        else:
            raise SpecError(
                f"dynamic_axes entry {axes!r} is neither a dict nor a list of axes",
                input=leaf.path,
                hint=f'{{"{leaf.path}": {{0: "batch"}}}} or {{"{leaf.path}": [0]}}',
            )
    return out


def _build(bound: BoundInputs, value: dict[tuple[str, int], AxisPolicy]) -> DimSpec:
    """Validate cross-axis rules and order the entries by input then axis."""
    named: dict[str, tuple[Dim, str, int, int]] = {}
    for (path, axis), policy in value.items():
        if not isinstance(policy, Dim):
            continue
        size = bound.leaf(path).shape[axis]
        if not policy.contains(size):
            lo = policy.min if policy.min is not None else 0
            hi = policy.max if policy.max is not None else "inf"
            raise SpecError(
                f"the example size {size} is outside Dim {policy.name!r}'s range [{lo}, {hi}]",
                input=path,
                axis=axis,
                hint=f"widen the range (e.g. Dim({policy.name!r}, min={min(size, lo)}"
                + (f", max={max(size, policy.max)}" if policy.max is not None else "")
                + ")) or pass an example inside it",
            )
        if policy.name in named:
            other, other_path, other_axis, other_size = named[policy.name]
            if other != policy:
                raise SpecError(
                    f"dim name {policy.name!r} is used with two different ranges: {other!r} on "
                    f"{other_path}.shape[{other_axis}] and {policy!r}",
                    input=path,
                    axis=axis,
                    hint="create the Dim once and reuse the same object on every axis that shares it",
                )
            if other_size != size:
                raise SpecError(
                    f"{path}.shape[{axis}] = {size} and {other_path}.shape[{other_axis}] = {other_size} "
                    f"share the dim name {policy.name!r}, but their example sizes differ",
                    input=path,
                    axis=axis,
                    hint="give them different names, or make the example sizes equal",
                )
        else:
            named[policy.name] = (policy, path, axis, size)
    order = {leaf.path: leaf.index for leaf in bound.leaves}
    entries = tuple(
        AxisEntry(path, axis, policy)
        for (path, axis), policy in sorted(value.items(), key=lambda kv: (order[kv[0][0]], kv[0][1]))
        if policy is not STATIC
    )
    return DimSpec(entries)


def _nest(bound: BoundInputs, leaf_fn) -> dict[str, Any]:
    """Rebuild the input pytree with ``leaf_fn(leaf)`` at tensor leaves and None elsewhere,
    in the structure torch.export's ``dynamic_shapes`` expects (dataclasses as lists)."""
    from ._torch_compat import pytree_children

    leaves = {leaf.path: leaf for leaf in bound.leaves}

    def build(value: Any, path: str) -> Any:
        if path in leaves:
            return leaf_fn(leaves[path])
        children = pytree_children(value)
        if children is None:
            return None
        if isinstance(value, Mapping):
            return {k: build(v, f"{path}.{k}") for k, v in children}
        built = [build(v, f"{path}.{k}") for k, v in children]
        return tuple(built) if type(value) is tuple else built

    return {name: build(value, name) for name, value in bound.by_parameter().items()}
