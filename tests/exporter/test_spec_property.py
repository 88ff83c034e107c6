"""Property: whatever dim spec a user writes, the exporter answers with a Session or an
ExportError, never with another exception (KeyError, AttributeError, a raw torch error...).

Random specs mix valid and invalid keys, axes, names, Dims with random bounds, torch Dims and
hints, True/None, nested dicts/lists/dataclasses and legacy ``dynamic_axes``; random example
shapes include sizes 0 and 1. Most examples stop at ``Session(...)`` or at capture; at most
``FULL_EXPORTS`` go through the whole export.
"""

from __future__ import annotations

import dataclasses
import os

import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import exporter
from exporter import AUTO, DYNAMIC, STATIC, DimSpec, ExportError, ExportOptions, Session, SpecError
from exporter.dims import Dim

TorchDim = torch.export.Dim
# Raise these to hunt harder, e.g. SPEC_PROPERTY_EXAMPLES=2000 SPEC_PROPERTY_FULL_EXPORTS=50
# SPEC_PROPERTY_RANDOM=1 (CI runs a fixed sequence of examples so that a red run is reproducible).
EXAMPLES = int(os.environ.get("SPEC_PROPERTY_EXAMPLES", "150"))
FULL_EXPORTS = int(os.environ.get("SPEC_PROPERTY_FULL_EXPORTS", "8"))
_budget = {"full": 0}


@dataclasses.dataclass
class Box:
    a: torch.Tensor
    b: torch.Tensor


torch.export.register_dataclass(Box)


def _extra_sum(extra):
    total = 0.0
    for leaf in torch.utils._pytree.tree_leaves(extra):
        if isinstance(leaf, torch.Tensor):
            total = total + leaf.sum()
    return total


class AddModel(torch.nn.Module):
    def forward(self, x, y, extra=None):
        return x + y + _extra_sum(extra)


class LinearModel(torch.nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.linear = torch.nn.Linear(features, 2)

    def forward(self, x, y, extra=None):
        return self.linear(x) + y.sum() + _extra_sum(extra)


# -- example inputs ---------------------------------------------------------------------------

shapes = st.lists(st.integers(0, 4), min_size=0, max_size=3).map(tuple)
tensors = shapes.map(torch.zeros)
extras = st.one_of(
    st.just("absent"),
    st.none(),
    st.integers(-2, 5),
    st.floats(-2, 2, allow_nan=False),
    st.fixed_dictionaries({"a": tensors, "b": st.one_of(st.none(), tensors)}),
    st.lists(tensors, min_size=0, max_size=2),
    st.builds(Box, tensors, tensors),
)


@st.composite
def examples(draw):
    linear = draw(st.booleans())
    x_shape = draw(shapes) + (draw(st.integers(1, 4)),) if linear else draw(shapes)
    x = torch.randn(x_shape)
    y = torch.randn(draw(shapes)) if linear else torch.randn(x_shape)
    model = LinearModel(x_shape[-1]) if linear else AddModel()
    extra = draw(extras)
    kwargs = {} if isinstance(extra, str) else {"extra": extra}
    return model, (x, y), kwargs


# -- specs (built as plain data, turned into Dim objects inside the test) ----------------------

NAMES = ["a", "b", "batch", "seq", "Dim", "dynamic_shapes", "1x", "", "for", "s0"]
KEYS = ["x", "y", "extra", "extra.a", "extra.b", "extra.0", "extra.1", "z", "X", "x.0", "output", "", 0, None]
bounds = st.one_of(st.none(), st.integers(-1, 6))


@dataclasses.dataclass(frozen=True)
class DimMarker:
    """An ``exporter.Dim`` (may be invalid: its constructor raising is part of the property)."""

    name: str
    min: int | None
    max: int | None

    def build(self):
        return Dim(self.name, min=self.min, max=self.max)


@dataclasses.dataclass(frozen=True)
class TorchDimMarker:
    """A ``torch.export.Dim`` with a range torch itself accepts."""

    name: str
    min: int
    span: int | None

    def build(self):
        return TorchDim(self.name, min=self.min, max=None if self.span is None else self.min + self.span)


axis_values = st.one_of(
    st.sampled_from([None, True, False, AUTO, STATIC, DYNAMIC, TorchDim.AUTO, TorchDim.STATIC, TorchDim.DYNAMIC]),
    st.integers(0, 5),
    st.sampled_from(NAMES),
    st.builds(DimMarker, st.sampled_from(NAMES[:4]), bounds, bounds),
    st.builds(TorchDimMarker, st.sampled_from(NAMES[:4]), st.integers(0, 3), st.one_of(st.none(), st.integers(1, 5))),
    st.sampled_from([1.5, "0", (1,), TorchDim.DYNAMIC(min=2)]),
)
axes = st.one_of(st.integers(-4, 4), st.sampled_from(["0", 1.5, True]))
tensor_specs = st.one_of(
    axis_values,
    st.dictionaries(axes, axis_values, max_size=3),
    st.lists(axis_values, max_size=4),
)
specs = st.recursive(
    tensor_specs,
    lambda inner: st.one_of(
        st.dictionaries(st.sampled_from(["a", "b", "c", 0, 1]), inner, max_size=3),
        st.lists(inner, max_size=3),
        st.builds(Box, inner, inner),
    ),
    max_leaves=6,
)
dynamic_shapes = st.one_of(
    st.none(),
    st.dictionaries(st.sampled_from(KEYS), specs, max_size=4),
    st.lists(specs, max_size=4).map(tuple),
    st.sampled_from(["x", 3]),
)
legacy_axes = st.one_of(
    st.none(),
    st.dictionaries(axes, st.sampled_from(NAMES), max_size=2),
    st.lists(axes, max_size=3),
    st.sampled_from(["batch", 1]),
)
dynamic_axes = st.one_of(st.none(), st.none(), st.dictionaries(st.sampled_from(KEYS), legacy_axes, max_size=3))


@st.composite
def near_valid_specs(draw, example):
    """A spec built from the example's own leaves (so most are valid); about a third get one
    thing corrupted: an axis, a value, a key, or a legacy entry."""
    from exporter.inputs import bind_inputs

    model, args, kwargs = example
    bound = bind_inputs(model, args, kwargs)
    raw: dict = {}
    legacy: dict = {}
    for leaf in bound.leaves:
        form = draw(st.sampled_from(["skip", "axes", "axes", "axes", "whole", "list", "legacy"]))
        if form == "skip":
            continue
        if form == "whole":
            raw[leaf.path] = draw(st.sampled_from([True, AUTO, DYNAMIC, TorchDim.AUTO, None]))
            continue
        if not leaf.rank:
            continue
        if form == "list":
            raw[leaf.path] = [draw(valid_axis_value(size)) for size in leaf.shape]
            continue
        chosen = draw(st.lists(st.integers(0, leaf.rank - 1), min_size=1, max_size=leaf.rank, unique=True))
        axes_spec = {draw(st.sampled_from([a, a - leaf.rank])): draw(valid_axis_value(leaf.shape[a])) for a in chosen}
        if form == "legacy":
            names = st.sampled_from(["a", "b", "batch"])
            legacy[leaf.path] = draw(st.one_of(st.just(sorted(chosen)), st.fixed_dictionaries({a: names for a in chosen})))
        else:
            raw[leaf.path] = axes_spec

    if draw(st.integers(0, 2)) == 0:
        kind = draw(st.sampled_from(["axis", "value", "key", "legacy"]))
        target = draw(st.sampled_from(list(raw) or ["x"]))
        if kind == "axis":
            raw[target] = {draw(axes): draw(axis_values)}
        elif kind == "value":
            raw[target] = {0: draw(axis_values)} if draw(st.booleans()) else draw(specs)
        elif kind == "key":
            raw[draw(st.sampled_from(KEYS))] = draw(specs)
        else:
            legacy[draw(st.sampled_from(KEYS + ["extra_a"]))] = draw(legacy_axes)

    extra = kwargs.get("extra")
    inner = {k[len("extra."):]: v for k, v in raw.items() if isinstance(k, str) and k.startswith("extra.")}
    if inner and draw(st.booleans()):  # the same spec, nested the way the input is
        for k in inner:
            del raw["extra." + k]
        if isinstance(extra, dict):
            raw["extra"] = inner
        elif isinstance(extra, list):
            raw["extra"] = [inner.get(str(i)) for i in range(len(extra))]
        elif isinstance(extra, Box):
            raw["extra"] = draw(st.sampled_from([Box(inner.get("a"), inner.get("b")), [inner.get("a"), inner.get("b")], inner]))
    return raw, legacy


def valid_axis_value(size: int):
    return st.one_of(
        st.sampled_from([True, AUTO, DYNAMIC, TorchDim.AUTO, TorchDim.DYNAMIC]),
        st.sampled_from([None, STATIC, TorchDim.STATIC, size]),
        st.sampled_from(["a", "b", "batch"]),
        st.builds(
            DimMarker,
            st.sampled_from(["a", "b", "batch"]),
            st.one_of(st.none(), st.integers(0, size)),
            st.one_of(st.none(), st.integers(size + 1, size + 3)),
        ),
    )


@st.composite
def cases(draw):
    example = draw(examples())
    if draw(st.integers(0, 9)) < 3:
        return example, draw(dynamic_shapes), draw(dynamic_axes)
    raw, legacy = draw(near_valid_specs(example))
    if raw and draw(st.integers(0, 3)) == 0:  # by position, when every key is a parameter
        params = ["x", "y", "extra"][: 2 + ("extra" in example[2])]
        if set(raw) <= set(params):
            raw = tuple(raw.get(p) for p in params)
    return example, raw, legacy or None


def materialize(value):
    """Turn markers into Dim objects, through any nesting."""
    if isinstance(value, (DimMarker, TorchDimMarker)):
        return value.build()
    if isinstance(value, dict):
        return {k: materialize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [materialize(v) for v in value]
    if isinstance(value, tuple):
        return tuple(materialize(v) for v in value)
    if isinstance(value, Box):
        return Box(materialize(value.a), materialize(value.b))
    return value


def check_error(err: ExportError) -> None:
    """An ExportError is data a person reads: a stage, a message, typed fields."""
    assert err.stage in ("spec", "capture", "decompose", "translate", "optimize", "export")
    text = str(err)
    assert text.startswith(f"[{err.stage}] ")
    assert err.input is None or isinstance(err.input, str)
    assert err.axis is None or (isinstance(err.axis, int) and not isinstance(err.axis, bool))
    assert err.hint is None or (isinstance(err.hint, str) and err.hint)


def onnx_dim_params(session) -> dict[tuple[str, int], str | int]:
    return {
        (value.name, axis): d.dim_param or d.dim_value
        for value in session.model_proto.graph.input
        for axis, d in enumerate(value.type.tensor_type.shape.dim)
    }


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=not os.environ.get("SPEC_PROPERTY_RANDOM"),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=cases())
def test_any_spec_gives_a_session_or_an_export_error_never_another_exception(case):
    (model, args, kwargs), raw_shapes, raw_axes = case
    try:
        options = ExportOptions(dynamic_shapes=materialize(raw_shapes), dynamic_axes=materialize(raw_axes))
        session = Session(model, args, kwargs, options)
    except SpecError as err:
        check_error(err)
        event(f"refused: {err.reason.split(' ')[0]}")
        return

    # A valid spec converts: to torch's dynamic_shapes, and to code that means the same spec.
    spec = session.spec
    spec.to_torch(session.inputs)
    namespace: dict = {}
    exec(spec.to_code(session.inputs), namespace)  # noqa: S102
    assert DimSpec.parse(namespace["dynamic_shapes"], session.inputs) == spec

    capture = session.run(until="capture")  # a stage never raises
    assert capture.status in ("ok", "failed")
    event(f"capture {capture.status}" + (" (static spec)" if spec.is_static() else ""))
    if capture.status == "failed":
        check_error(capture.error)
        return
    if _budget["full"] >= FULL_EXPORTS or spec.is_static():
        return
    _budget["full"] += 1
    try:
        exported = exporter.export(model, *args, options=options, **kwargs)
    except ExportError as err:
        check_error(err)
        assert err.session is not None
        return
    # Every named dim reaches the ONNX model under the user's name.
    dims = onnx_dim_params(exported)
    for entry in spec:
        if isinstance(entry.policy, Dim) and (entry.path, entry.axis) in dims:
            assert dims[(entry.path, entry.axis)] == entry.policy.name, (entry, dims)


def test_the_property_ran_some_full_exports():
    """Guards the property test above against generating only refused specs."""
    if _budget["full"] == 0:  # run on its own (-k): run the property here instead of skipping
        test_any_spec_gives_a_session_or_an_export_error_never_another_exception()
    assert 1 <= _budget["full"] <= FULL_EXPORTS
