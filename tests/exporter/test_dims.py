"""The dim-policy model: every accepted spec form, its conversions, and what reaches ONNX.

Parsing tests stop at ``Session(...)`` construction (no capture); the ``to_code`` tests run
``torch.export`` only; a handful of tests run the whole export and read the ONNX dim_params.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import exporter
from exporter import AUTO, DYNAMIC, STATIC, Dim, DimSpec, ExportOptions, Session
from exporter.dims import AxisEntry, Name
from exporter.program_symbols import symbol_of

TorchDim = torch.export.Dim


# -- tiny models ------------------------------------------------------------------------------


class Add(torch.nn.Module):
    def forward(self, x, y):
        return x + y


class Scale(torch.nn.Module):
    """No relation between its two inputs: every axis may be anything."""

    def forward(self, x, y):
        return x * 2, y + 1


class PinsFirstAxis(torch.nn.Module):
    """Adding a (3, 4) constant pins x.shape[0] to 3."""

    def forward(self, x):
        return x + torch.ones(3, 4)


class Nested(torch.nn.Module):
    def forward(self, inputs, cache):
        return inputs["ids"] * 2 + cache[0].sum() + cache[1]["key"].sum()


@dataclasses.dataclass
class Pair:
    a: torch.Tensor
    b: torch.Tensor


torch.export.register_dataclass(Pair)


class UsesPair(torch.nn.Module):
    def forward(self, p: Pair):
        return p.a * 2 + p.b.sum()


class VarArgs(torch.nn.Module):
    def forward(self, *xs):
        return xs[0] + xs[1]


class VarKwargs(torch.nn.Module):
    def forward(self, x, **extra):
        return x + extra["y"]


class WithNonTensors(torch.nn.Module):
    def forward(self, x, n, mask=None):
        return x * n


def x34():
    return torch.randn(3, 4)


def spec_of(model, args, kwargs=None, **options) -> DimSpec:
    return Session(model, args, kwargs, ExportOptions(**options)).spec


def plain(dynamic_shapes):
    """torch ``dynamic_shapes`` with each torch Dim (compared by identity) as ``(name, min, max)``."""
    if isinstance(dynamic_shapes, dict):
        return {k: plain(v) for k, v in dynamic_shapes.items()}
    if isinstance(dynamic_shapes, (list, tuple)):
        return type(dynamic_shapes)(plain(v) for v in dynamic_shapes)
    if isinstance(dynamic_shapes, TorchDim):
        return (dynamic_shapes.__name__, dynamic_shapes.min, str(dynamic_shapes.max))
    return dynamic_shapes


def onnx_dims(session) -> dict[str, list]:
    """Each ONNX graph input's dims: the dim_param when symbolic, else the static size."""
    return {
        value.name: [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]
        for value in session.model_proto.graph.input
    }


def captured_dims(session) -> dict[tuple[str, int], str]:
    """Each input axis of the captured program: a torch symbol (``s77``) or a static size."""
    result = session.run(until="capture")
    assert result.status == "ok", result.error
    return symbol_of(result.output, session.inputs)


# -- parsing: every form of "x.shape[0] is the named dim 'batch'" -----------------------------

BATCH_ON_X = {
    "dict by name, string": dict(dynamic_shapes={"x": {0: "batch"}}),
    "dict by name, exporter.Dim": dict(dynamic_shapes={"x": {0: Dim("batch")}}),
    "dict by name, torch Dim": dict(dynamic_shapes={"x": {0: TorchDim("batch")}}),
    "dict with a None input": dict(dynamic_shapes={"x": {0: "batch"}, "y": None}),
    "tuple by position": dict(dynamic_shapes=({0: "batch"}, None)),
    "per-axis list": dict(dynamic_shapes={"x": ["batch", None]}),
    "per-axis list of torch hints": dict(dynamic_shapes={"x": [TorchDim("batch"), TorchDim.STATIC]}),
    "negative axis": dict(dynamic_shapes={"x": {-2: "batch"}}),
    "numpy int axis": dict(dynamic_shapes={"x": {np.int64(0): "batch"}}),
    "legacy dynamic_axes": dict(dynamic_axes={"x": {0: "batch"}}),
    "both, agreeing": dict(dynamic_shapes={"x": {0: "batch"}}, dynamic_axes={"x": {0: "batch"}}),
}


def _has_string(value) -> bool:
    if isinstance(value, str):
        return True
    if isinstance(value, dict):
        return any(_has_string(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_has_string(v) for v in value)
    return False


@pytest.mark.parametrize("options", list(BATCH_ON_X.values()), ids=list(BATCH_ON_X))
def test_every_accepted_form_of_a_named_axis_gives_the_same_spec(options):
    spec = spec_of(Scale(), (x34(), x34()), **options)
    # A string (or a dynamic_axes name) is torch.onnx.export's name: dynamic, bounded by
    # guards; a Dim object is a strict named dim. Both name the axis 'batch'.
    uses_string = _has_string(options)
    expected = Name("batch") if uses_string else Dim("batch")
    assert spec.entries == (AxisEntry("x", 0, expected),)


def test_a_dimspec_is_accepted_as_is_and_revalidated():
    spec = spec_of(Scale(), (x34(), x34()), dynamic_shapes={"x": {0: "batch"}})
    assert spec_of(Scale(), (x34(), x34()), dynamic_shapes=spec) == spec
    with pytest.raises(exporter.SpecError, match="out of range"):
        spec_of(Scale(), (torch.randn(3), x34()), dynamic_shapes=DimSpec((AxisEntry("x", 1, AUTO),)))


WHOLE_INPUT = [
    (True, AUTO),
    (AUTO, AUTO),
    (DYNAMIC, DYNAMIC),
    (TorchDim.AUTO, AUTO),
    (TorchDim.DYNAMIC, DYNAMIC),
    (TorchDim.STATIC, None),
    (STATIC, None),
    (None, None),
    (False, None),
]


@pytest.mark.parametrize("value, policy", WHOLE_INPUT, ids=[repr(v) for v, _ in WHOLE_INPUT])
def test_a_policy_for_a_whole_input_applies_to_each_of_its_axes(value, policy):
    spec = spec_of(Scale(), (x34(), x34()), dynamic_shapes={"x": value})
    expected = () if policy is None else (AxisEntry("x", 0, policy), AxisEntry("x", 1, policy))
    assert spec.entries == expected


PER_AXIS = [
    (True, AUTO),
    (None, None),
    (AUTO, AUTO),
    (DYNAMIC, DYNAMIC),
    (STATIC, None),
    (TorchDim.AUTO, AUTO),
    (TorchDim.DYNAMIC, DYNAMIC),
    (TorchDim.STATIC, None),
    (4, None),  # the example size itself: static
    ("n", Name("n")),
    (Dim("n", min=2, max=64), Dim("n", min=2, max=64)),
    (TorchDim("n", min=2, max=64), Dim("n", min=2, max=64)),
]


@pytest.mark.parametrize("value, policy", PER_AXIS, ids=[repr(v) for v, _ in PER_AXIS])
def test_each_per_axis_value_maps_to_one_policy(value, policy):
    spec = spec_of(Scale(), (x34(), x34()), dynamic_shapes={"x": {1: value}})
    assert spec.policy("x", 1) == (STATIC if policy is None else policy)
    assert spec.policy("x", 0) is STATIC
    assert len(spec) == (0 if policy is None else 1)


def test_legacy_dynamic_axes_list_form_makes_those_axes_dynamic():
    spec = spec_of(Scale(), (x34(), x34()), dynamic_axes={"x": [0, 1], "y": [1], "output": None})
    assert list(spec) == [AxisEntry("x", 0, DYNAMIC), AxisEntry("x", 1, DYNAMIC), AxisEntry("y", 1, DYNAMIC)]


def test_legacy_dynamic_axes_none_entry_means_no_dynamic_axes():
    assert spec_of(Scale(), (x34(), x34()), dynamic_axes={"x": None}).is_static()


def test_a_string_naming_a_dim_object_used_elsewhere_means_that_dim():
    spec = spec_of(Add(), (x34(), x34()), dynamic_shapes={"x": {0: "batch"}, "y": {0: TorchDim("batch")}})
    assert spec.named_dims() == {"batch": Dim("batch")}
    assert [e.policy for e in spec] == [Dim("batch"), Dim("batch")]


def test_nested_dict_and_list_specs_follow_the_input_structure():
    args = ({"ids": torch.randn(2, 5)}, [torch.randn(2, 3), {"key": torch.randn(2, 7)}])
    spec = spec_of(
        Nested(), args,
        dynamic_shapes={"inputs": {"ids": {0: "batch"}}, "cache": [{0: "batch"}, {"key": {1: "past"}}]},
    )
    assert list(spec) == [
        AxisEntry("inputs.ids", 0, Name("batch")),
        AxisEntry("cache.0", 0, Name("batch")),
        AxisEntry("cache.1.key", 1, Name("past")),
    ]


def test_a_leaf_path_key_refines_the_spec_of_its_container():
    args = ({"ids": torch.randn(2, 5)}, [torch.randn(2, 3), {"key": torch.randn(2, 7)}])
    spec = spec_of(Nested(), args, dynamic_shapes={"cache": True, "cache.1.key": {1: "past"}, "cache.0": None})
    assert list(spec) == [
        AxisEntry("cache.1.key", 0, AUTO),
        AxisEntry("cache.1.key", 1, Name("past")),
    ]


@pytest.mark.parametrize(
    "pair_spec",
    [[{0: "rows"}, None], {"a": {0: "rows"}}, Pair({0: "rows"}, None)],
    ids=["list by field position", "dict by field name", "dataclass instance"],
)
def test_a_registered_dataclass_input_takes_a_spec_by_position_by_name_or_as_an_instance(pair_spec):
    spec = spec_of(UsesPair(), (Pair(torch.randn(3, 4), torch.randn(5)),), dynamic_shapes={"p": pair_spec})
    assert list(spec) == [AxisEntry("p.a", 0, Name("rows"))]
    # torch.export wants a dataclass's spec as a list in field order (a name is Dim.DYNAMIC).
    bound = Session(UsesPair(), (Pair(torch.randn(3, 4), torch.randn(5)),)).inputs
    assert spec.to_torch(bound) == {"p": [{0: TorchDim.DYNAMIC}, None]}


def test_var_positional_inputs_accept_the_torch_form_and_their_leaf_names():
    args = (x34(), x34())
    torch_form = spec_of(VarArgs(), args, dynamic_shapes={"xs": ({0: "b"}, {0: "b"})})
    leaf_form = spec_of(VarArgs(), args, dynamic_shapes={"xs.0": {0: "b"}, "xs.1": {0: "b"}})
    by_position = spec_of(VarArgs(), args, dynamic_shapes=(({0: "b"}, {0: "b"}),))
    assert torch_form == leaf_form == by_position
    assert [(e.path, e.axis) for e in torch_form] == [("xs.0", 0), ("xs.1", 0)]


def test_var_positional_inputs_are_captured_with_the_torch_dynamic_shapes_form():
    session = Session(VarArgs(), (x34(), x34()), None, ExportOptions(dynamic_shapes={"xs": ({0: "b"}, {0: "b"})}))
    assert set(session.spec.to_torch(session.inputs)) == {"xs"}
    dims = captured_dims(session)
    assert dims[("xs.0", 0)] == dims[("xs.1", 0)] and not dims[("xs.0", 0)].isdigit()


def test_var_keyword_inputs_accept_the_torch_form_and_their_own_names():
    args, kwargs = (x34(),), {"y": x34()}
    torch_form = spec_of(VarKwargs(), args, kwargs, dynamic_shapes={"x": {0: "b"}, "extra": {"y": {0: "b"}}})
    own_names = spec_of(VarKwargs(), args, kwargs, dynamic_shapes={"x": {0: "b"}, "y": {0: "b"}})
    assert torch_form == own_names
    assert [(e.path, e.axis) for e in torch_form] == [("x", 0), ("y", 0)]
    with pytest.raises(exporter.SpecError, match="unknown input 'z'"):
        spec_of(VarKwargs(), args, kwargs, dynamic_shapes={"extra": {"z": {0: "b"}}})


@pytest.mark.xfail(
    strict=True,
    raises=exporter.CaptureError,
    reason="torch 2.13 cannot take dynamic_shapes for a **kwargs forward: every dict/tuple form "
    "fails in torch.export with 'AssertionError: Must provide a tree_name when there might be a "
    "mismatch' (the top-level check wants {'x':..., 'extra': {'y':...}}, then make_constraints "
    "flattens differently)",
)
def test_var_keyword_inputs_are_captured_with_named_dims():
    b = Dim("b")
    session = Session(VarKwargs(), (x34(),), {"y": x34()}, ExportOptions(dynamic_shapes={"x": {0: b}, "y": {0: b}}))
    assert plain(session.spec.to_torch(session.inputs)) == {"x": {0: ("b", 0, "int_oo")}, "extra": {"y": {0: ("b", 0, "int_oo")}}}
    assert session.exported_program is not None


@pytest.mark.parametrize("n, mask", [(3, None), (2.5, None), (3, "a string")])
def test_non_tensor_inputs_accept_none_and_are_skipped_by_a_whole_structure_spec(n, mask):
    spec = spec_of(WithNonTensors(), (x34(), n), {"mask": mask}, dynamic_shapes={"x": {0: "b"}, "n": None, "mask": None})
    assert list(spec) == [AxisEntry("x", 0, Name("b"))]


def test_an_unused_default_parameter_may_be_given_none():
    spec = spec_of(WithNonTensors(), (x34(), 3), dynamic_shapes={"x": True, "mask": None})
    assert [e.policy for e in spec] == [AUTO, AUTO]


def test_spec_with_axis_returns_a_new_spec_and_none_removes_the_axis():
    bound = Session(Scale(), (x34(), x34())).inputs
    spec = DimSpec.parse({"x": {0: "batch"}}, bound)
    wider = spec.with_axis(bound, "y", -1, TorchDim.DYNAMIC)
    assert list(wider) == [AxisEntry("x", 0, Name("batch")), AxisEntry("y", 1, DYNAMIC)]
    assert list(spec) == [AxisEntry("x", 0, Name("batch"))]  # unchanged
    assert wider.with_axis(bound, "x", 0, None).entries == (AxisEntry("y", 1, DYNAMIC),)


def test_to_dynamic_axes_keeps_user_names_and_parses_back_to_the_same_named_dims():
    session = Session(Scale(), (x34(), x34()), None, ExportOptions(dynamic_shapes={"x": {0: "batch"}, "y": {1: AUTO}}))
    legacy = session.spec.to_dynamic_axes()
    assert legacy == {"x": {0: "batch"}, "y": {1: "y_dim1"}}
    again = spec_of(Scale(), (x34(), x34()), dynamic_axes=legacy)
    assert again.policy("x", 0) == Name("batch")


# -- to_code: the torch code a user copies ---------------------------------------------------

CODE_SPECS = {
    "named and shared": {"x": {0: "batch"}, "y": {0: "batch"}},
    "bounds": {"x": {0: Dim("batch", min=2, max=64), 1: Dim("feat", max=1024)}},
    "hints": {"x": {0: AUTO, 1: DYNAMIC}, "y": True},
    "static": None,
}


@pytest.mark.parametrize("raw", list(CODE_SPECS.values()), ids=list(CODE_SPECS))
def test_to_code_execs_to_dynamic_shapes_that_torch_export_accepts_with_the_same_dims(raw):
    model, args = Scale(), (x34(), x34())
    session = Session(model, args, None, ExportOptions(dynamic_shapes=raw))
    code = session.spec.to_code(session.inputs)
    namespace: dict = {}
    exec(code, namespace)  # noqa: S102 - the point of the test
    dynamic_shapes = namespace["dynamic_shapes"]

    assert DimSpec.parse(dynamic_shapes, session.inputs) == session.spec
    # Names stay strings (torch.onnx.export's form); torch.export gets them as Dim.DYNAMIC.
    dynamic_shapes = DimSpec.parse(dynamic_shapes, session.inputs).to_torch(session.inputs)
    from_code = torch.export.export(model, args, dynamic_shapes=dynamic_shapes, strict=False)
    from_spec = torch.export.export(model, args, dynamic_shapes=session.spec.to_torch(session.inputs), strict=False)
    assert _dims_and_ranges(from_code, session.inputs) == _dims_and_ranges(from_spec, session.inputs)
    if raw is not None:
        assert any(not d.isdigit() for d, _ in _dims_and_ranges(from_code, session.inputs).values())


def _dims_and_ranges(program, bound) -> dict[tuple[str, int], tuple[str, tuple]]:
    """Each input axis: its static size, or its symbol renamed by first use plus its range."""
    symbols = symbol_of(program, bound)
    ranges = {str(k): (int(v.lower), str(v.upper)) for k, v in program.range_constraints.items()}
    renamed: dict[str, str] = {}
    out = {}
    for key, symbol in symbols.items():
        if symbol.isdigit():
            out[key] = (symbol, ())
        else:
            out[key] = (renamed.setdefault(symbol, f"d{len(renamed)}"), ranges.get(symbol, ()))
    return out


def test_to_code_for_nested_and_dataclass_inputs_round_trips():
    args = ({"ids": torch.randn(2, 5)}, [torch.randn(2, 3), {"key": torch.randn(2, 7)}])
    raw = {"inputs": {"ids": {0: "batch", 1: "seq"}}, "cache": [{0: "batch"}, {"key": {1: "past"}}]}
    session = Session(Nested(), args, None, ExportOptions(dynamic_shapes=raw))
    namespace: dict = {}
    exec(session.spec.to_code(session.inputs), namespace)  # noqa: S102
    assert DimSpec.parse(namespace["dynamic_shapes"], session.inputs) == session.spec
    assert namespace["dynamic_shapes"]["cache"] == [{0: "batch"}, {"key": {1: "past"}}]  # names stay strings
    torch.export.export(Nested(), args, dynamic_shapes=session.spec.to_torch(session.inputs), strict=False)

    pair = (Pair(torch.randn(3, 4), torch.randn(5)),)
    session = Session(UsesPair(), pair, None, ExportOptions(dynamic_shapes={"p": {"a": {0: Dim("rows")}}}))
    namespace = {}
    exec(session.spec.to_code(session.inputs), namespace)  # noqa: S102
    assert plain(namespace["dynamic_shapes"]) == {"p": [{0: ("rows", 0, "int_oo")}, None]}
    torch.export.export(UsesPair(), pair, dynamic_shapes=namespace["dynamic_shapes"], strict=False)


def test_to_code_of_a_static_spec_says_so():
    session = Session(Scale(), (x34(), x34()))
    assert session.spec.to_code(session.inputs).endswith("dynamic_shapes = None  # every dim static")


def test_to_code_does_not_let_a_dim_named_dim_shadow_the_class():
    session = Session(Scale(), (x34(), x34()), None, ExportOptions(dynamic_shapes={"x": {0: "Dim", 1: "feat"}}))
    namespace: dict = {}
    exec(session.spec.to_code(session.inputs), namespace)  # noqa: S102
    assert DimSpec.parse(namespace["dynamic_shapes"], session.inputs) == session.spec


# -- what each policy does in the captured program -------------------------------------------

POLICY_OUTCOME = [
    (AUTO, "dynamic"),
    (DYNAMIC, "dynamic"),
    (True, "dynamic"),
    (TorchDim.AUTO, "dynamic"),
    ("rows", "dynamic"),
    (Dim("rows", min=2, max=8), "dynamic"),
    (STATIC, "static"),
    (None, "static"),
]


@pytest.mark.parametrize("policy, outcome", POLICY_OUTCOME, ids=[repr(p) for p, _ in POLICY_OUTCOME])
def test_session_with_axis_makes_that_axis_dynamic_or_static_in_the_captured_program(policy, outcome):
    base = Session(Scale(), (x34(), x34()))
    session = base.with_axis("x", 0, policy)
    dims = captured_dims(session)
    assert dims[("x", 0)].isdigit() == (outcome == "static")
    assert dims[("x", 1)] == "4" and dims[("y", 0)] == "3"  # the other axes stay static
    assert base.spec.is_static()  # the base session is unchanged


@pytest.mark.parametrize(
    "policy, pinned_ok",
    [(AUTO, True), (STATIC, True), (DYNAMIC, False), ("rows", False)],
    ids=["AUTO specializes", "STATIC", "DYNAMIC fails", "named fails"],
)
def test_auto_specializes_a_pinned_axis_where_dynamic_and_named_dims_fail(policy, pinned_ok):
    session = Session(PinsFirstAxis(), (x34(),)).with_axis("x", 0, policy)
    result = session.run(until="capture")
    if pinned_ok:
        assert result.status == "ok"
        assert symbol_of(result.output, session.inputs)[("x", 0)] == "3"
    else:
        assert result.status == "failed"
        assert isinstance(result.error, exporter.CaptureError)
        assert "Constraints violated" in result.error.library_text  # torch rejected the spec itself


# -- end to end: the user's names reach the ONNX model ---------------------------------------


def test_inputs_sharing_a_name_share_one_onnx_dim_param(assert_matches_eager):
    session = exporter.export(Add(), x34(), x34(), options=ExportOptions(dynamic_shapes={"x": {0: "batch"}, "y": {0: "batch"}}))
    assert onnx_dims(session) == {"x": ["batch", 4], "y": ["batch", 4]}
    assert_matches_eager(session, torch.randn(7, 4), torch.randn(7, 4))


def test_tuple_by_position_with_torch_dims_names_the_onnx_dims(assert_matches_eager):
    rows, cols = TorchDim("rows", min=2, max=64), TorchDim("cols")
    session = exporter.export(Scale(), x34(), torch.randn(5, 6), options=ExportOptions(dynamic_shapes=({0: rows}, {1: cols})))
    assert onnx_dims(session) == {"x": ["rows", 4], "y": [5, "cols"]}
    assert_matches_eager(session, torch.randn(9, 4), torch.randn(5, 2))


def test_legacy_dynamic_axes_names_become_onnx_dim_params():
    session = exporter.export(Scale(), x34(), torch.randn(5, 6), options=ExportOptions(dynamic_axes={"x": {0: "batch", 1: "feat"}, "y": {1: "width"}}))
    assert onnx_dims(session) == {"x": ["batch", "feat"], "y": [5, "width"]}


def test_legacy_dynamic_axes_list_form_gives_symbolic_onnx_dims():
    session = exporter.export(Scale(), x34(), torch.randn(5, 6), options=ExportOptions(dynamic_axes={"x": [0], "y": [0, 1]}))
    dims = onnx_dims(session)
    assert dims["x"][1] == 4 and all(isinstance(d, str) and d for d in [dims["x"][0], *dims["y"]])
    assert len({dims["x"][0], *dims["y"]}) == 3  # three unrelated dims, three names


def test_nested_dict_and_list_inputs_export_with_the_users_dim_names(assert_matches_eager):
    ids, cache = {"ids": torch.randn(2, 5)}, [torch.randn(2, 3), {"key": torch.randn(2, 7)}]
    raw = {"inputs": {"ids": {0: "batch", 1: "seq"}}, "cache": [{0: "batch"}, {"key": {1: "past"}}]}
    session = exporter.export(Nested(), ids, cache, options=ExportOptions(dynamic_shapes=raw))
    assert onnx_dims(session) == {"inputs.ids": ["batch", "seq"], "cache.0": ["batch", 3], "cache.1.key": [2, "past"]}
    assert_matches_eager(session, {"ids": torch.randn(4, 6)}, [torch.randn(4, 3), {"key": torch.randn(2, 9)}])


def test_registered_dataclass_input_exports_with_the_users_dim_names():
    pair = Pair(torch.randn(3, 4), torch.randn(5))
    session = exporter.export(UsesPair(), pair, options=ExportOptions(dynamic_shapes={"p": {"a": {0: "rows"}, "b": {0: "n"}}}))
    assert onnx_dims(session) == {"p.a": ["rows", 4], "p.b": ["n"]}


def test_session_with_axis_renames_the_onnx_dim_and_reuses_the_session_cache():
    base = Session(Scale(), (x34(), torch.randn(5, 6)), None, ExportOptions(dynamic_shapes={"y": {0: "n"}}))
    session = base.with_axis("x", 0, "rows")
    session.run()
    session.raise_for_status()
    assert onnx_dims(session) == {"x": ["rows", 4], "y": ["n", 6]}
