"""Per-dim outcomes (why each dim is dynamic or static), suggested fixes applied, spec
inference from more inputs, and the code that reproduces the obtained dims."""

from __future__ import annotations

import inspect
import warnings

import pytest
import torch

from exporter import AUTO, DYNAMIC, STATIC, Dim, DimPolicyWarning, DimSpec, ExportOptions, Session
from exporter.shapes import parse_fix_line
from shape_models import STRATEGIES, BranchOnBatch, PinnedWidth, line_of

class Add(torch.nn.Module):
    def forward(self, x, y):
        return x + y


class GuardedAdd(torch.nn.Module):
    def forward(self, x, y):
        if x.shape[0] > 4:
            x = x * 2
        return x + y


class ScaledLinear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(3, 2)

    def forward(self, x):
        return torch.relu(self.linear(x)) * x.shape[0]


class Masked(torch.nn.Module):
    def forward(self, input_ids, attention_mask):
        return (input_ids * attention_mask).sum(-1)


def session(model, *args, strategy="nonstrict", **dynamic_shapes):
    return Session(model, args, options=ExportOptions(strategy=strategy, dynamic_shapes=dynamic_shapes or None))


def onnx_dims(session):
    return {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in session.model_proto.graph.input}


def test_branch_narrows_an_auto_dim_and_the_reason_cites_the_guard_line():
    dims = session(BranchOnBatch(), torch.randn(5, 3), x={0: AUTO}).dims
    row = dims["x", 0]
    assert (row.obtained, row.min, row.max, row.example, row.requested) == ("dynamic", 3, None, 5, "AUTO")
    assert row.differs and row.reason.startswith("narrowed to [3, inf]: at least 3: ") and "x.shape[0] > 2" in row.reason
    assert row.source == f"{inspect.getsourcefile(BranchOnBatch)}:{line_of(BranchOnBatch, 'if x.shape[0] > 2:')}: if x.shape[0] > 2:"
    assert not dims["x", 1].differs and dims["x", 1].obtained == "static"


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_broadcast_groups_equal_dims_under_one_name(strategy):
    dims = session(Add(), torch.randn(4, 3), torch.randn(4, 3), strategy=strategy, x={0: AUTO}, y={0: AUTO}).dims
    x0, y0 = dims["x.0"], dims["y.0"]
    assert x0.obtained == y0.obtained == "dynamic"
    assert x0.dim == y0.dim == "x_dim0" and x0.symbol == y0.symbol
    assert (x0.equal_to, y0.equal_to) == (("y.0",), ("x.0",))
    assert "equal to y.shape[0] by x.shape[0] == y.shape[0]" in x0.note
    assert x0.source.endswith("return x + y") and not x0.differs
    assert dims.groups() == {"x_dim0": ("x.0", "y.0")}


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_dim_specialized_by_eq_4_is_static_and_says_which_line(strategy):
    row = session(PinnedWidth(), torch.randn(3, 4), strategy=strategy, x={0: AUTO, 1: AUTO}).dims["x", 1]
    assert (row.obtained, row.min, row.max, row.differs) == ("static", 4, 4, True)
    assert row.reason.startswith("specialized to 4 by x.shape[1] == 4")
    assert row.source.endswith(f":{line_of(PinnedWidth, 'if x.shape[1] == 4:')}: if x.shape[1] == 4:")


def test_auto_dim_turns_static_because_a_related_dim_is_static():
    dims = session(Add(), torch.randn(4, 3), torch.randn(4, 3), x={0: AUTO}).dims  # y all static
    row = dims["x", 0]
    assert (row.requested, row.obtained, row.min) == ("AUTO", "static", 4)
    assert "equal to y.shape[0], which is static" in row.reason
    assert row.source.endswith("return x + y")
    assert [o.name for o in dims.differing] == ["x.0"]


def test_size_one_example_stays_dynamic_and_the_onnx_model_is_right_at_size_5(assert_matches_eager):
    exported = session(ScaledLinear().eval(), torch.randn(1, 3), x={0: AUTO})
    row = exported.dims["x", 0]
    assert (row.obtained, row.min, row.max, row.differs) == ("dynamic", 0, None, False)
    assert "kept dynamic by size-oblivious capture" in row.note and "specialize it to 1" in row.note
    assert exported.run().status == "ok"
    assert onnx_dims(exported)["x"] == ["x_dim0", 3]
    assert_matches_eager(exported, torch.randn(5, 3))


def test_size_one_example_that_broadcasts_fails_with_a_static_fix_that_works():
    failed = session(Add(), torch.randn(1, 3), torch.randn(4, 3), x={0: AUTO})
    row = failed.dims["x", 0]
    assert row.obtained == "failed" and "make this axis STATIC" in row.reason
    fixed = failed.apply_suggested_fixes()
    assert fixed.run("capture").status == "ok" and fixed.spec == DimSpec()
    assert fixed.applied_fixes[0].fixes[0].kind == "static-broadcast"


def test_auto_plus_named_dim_ends_in_one_shared_dynamic_dim():
    start = session(Add(), torch.randn(4, 3), torch.randn(4, 3), x={0: AUTO}, y={0: Dim("dx", min=3, max=6)})
    exported = start.apply_suggested_fixes()
    assert exported.run().status == "ok"
    assert onnx_dims(exported) == {"x": ["dx", 3], "y": ["dx", 3]}
    assert exported.dims.groups() == {"dx": ("x.0", "y.0")}
    assert (exported.dims["x.0"].min, exported.dims["x.0"].max) == (3, 6)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_auto_plus_named_dim_rejected_by_a_guard_succeeds_through_applied_fixes(strategy):
    start = session(GuardedAdd(), torch.randn(5, 3), torch.randn(5, 3), strategy=strategy,
                    x={0: AUTO}, y={0: Dim("dx", min=3, max=6)})
    assert start.run("capture").status == "failed"
    fixes = start.suggested_fixes
    assert "-dx = Dim('dx', min=3, max=6)" in fixes.diff and "+dx = Dim('dx', min=5, max=6)" in fixes.diff
    assert fixes.to_frame()[["input", "axis", "before", "after"]].values.tolist() == [
        ["y", 0, "Dim('dx', min=3, max=6)", "Dim('dx', min=5, max=6)"]
    ]
    exported = start.apply_suggested_fixes()
    assert exported.run().status == "ok" and len(exported.applied_fixes) == 1
    assert onnx_dims(exported) == {"x": ["dx", 3], "y": ["dx", 3]}
    assert exported.dims.groups() == {"dx": ("x.0", "y.0")}


def test_torch_fixes_for_two_named_dims_found_equal_are_applied():
    start = session(Add(), torch.randn(4, 3), torch.randn(4, 3), x={0: Dim("a")}, y={0: Dim("dx", min=3, max=6)})
    fixes = start.suggested_fixes
    assert [f.text for f in fixes] == ["a = Dim('a', min=3, max=6)", "dx = a"]
    assert fixes.after.policy("y", 0) == fixes.after.policy("x", 0) == Dim("a", min=3, max=6)
    assert start.dims["y", 0].obtained == "failed" and "must always be equal" in start.dims["y", 0].reason
    assert start.apply_suggested_fixes().run("capture").status == "ok"


def test_dynamic_dim_pinned_by_the_code_gets_a_static_fix():
    start = session(PinnedWidth(), torch.randn(3, 4), x={0: AUTO, 1: DYNAMIC})
    (fix,) = start.suggested_fixes
    assert (fix.text, fix.kind, fix.axes, fix.policy) == ("x.shape[1] = 4", "static", (("x", 1),), STATIC)
    assert start.apply_suggested_fixes().spec == DimSpec.parse({"x": {0: AUTO}}, start.inputs)


@pytest.mark.parametrize(
    "line, expected",
    [
        ("dx = Dim('dx', min=3, max=6)", ("dx", "range", Dim("dx", min=3, max=6))),
        ("b = Dim('b', min=3)", ("b", "range", Dim("b", min=3))),
        ("_x0 = dx", ("_x0", "equal", "dx")),
        ("d = 32", ("d", "static", 32)),
        ("dy = dx + 1", ("dy", "derived", "dx + 1")),
    ],
)
def test_parse_fix_line_reads_each_form_torch_prints(line, expected):
    assert parse_fix_line(line) == expected


def test_infer_dims_from_three_input_sets_makes_varying_axes_dynamic_over_the_observed_range():
    start = session(Masked(), torch.ones(2, 8), torch.ones(2, 8))
    more = torch.export.AdditionalInputs()
    more.add((torch.ones(3, 8), torch.ones(3, 8)))
    more.add((), {"input_ids": torch.ones(5, 8), "attention_mask": torch.ones(5, 8)})
    spec = start.infer_dims(more)
    batch = Dim("batch", min=2, max=5)  # the two axis-0s vary together: one shared Dim
    assert spec == DimSpec.parse({"input_ids": {0: batch}, "attention_mask": {0: batch}}, start.inputs)
    assert start.infer_dims([(torch.ones(3, 8), torch.ones(3, 8)), {"input_ids": torch.ones(5, 8), "attention_mask": torch.ones(5, 8)}]) == spec
    exported = start.with_dims(spec)  # exports as it is, no suggested fixes needed
    assert exported.run("capture").status == "ok"
    assert exported.dims.groups() == {"batch": ("input_ids.0", "attention_mask.0")}


def test_infer_dims_gives_axes_that_merely_vary_alike_their_own_dims(assert_matches_eager):
    class Square(torch.nn.Module):
        def forward(self, x):
            return x * 2

    start = session(Square(), torch.ones(4, 4))
    spec = start.infer_dims([(torch.ones(8, 8),)])
    assert spec == DimSpec.parse({"x": {0: Dim("x_dim0", min=4, max=8), 1: Dim("x_dim1", min=4, max=8)}}, start.inputs)
    exported = start.with_dims(spec)
    assert exported.run().status == "ok"
    assert_matches_eager(exported, torch.randn(5, 6))


def test_infer_dims_keeps_the_users_dim_names():
    start = session(Masked(), torch.ones(2, 8), torch.ones(2, 8), input_ids={0: Dim("batch")}, attention_mask={0: Dim("batch")})
    spec = start.infer_dims([(torch.ones(5, 8), torch.ones(5, 8))])
    batch = Dim("batch", min=2, max=5)
    assert spec == DimSpec.parse({"input_ids": {0: batch}, "attention_mask": {0: batch}}, start.inputs)
    assert start.with_dims(spec).run("capture").status == "ok"


def test_to_code_reproduces_the_obtained_dims():
    from exporter.compat import program_ranges, size_oblivious_capture
    from exporter.program_symbols import symbol_of

    exported = session(GuardedAdd(), torch.randn(5, 3), torch.randn(5, 3), x={0: AUTO, 1: AUTO}, y={0: AUTO, 1: AUTO})
    code = exported.dims.to_code()
    assert "x_dim0 = Dim('x_dim0', min=5)" in code
    namespace = {}
    exec(code, namespace)  # noqa: S102 - runs the code the spec generates, as a user would
    with size_oblivious_capture():
        program = torch.export.export(GuardedAdd(), exported.args, dynamic_shapes=namespace["dynamic_shapes"])
    symbols, ranges = symbol_of(program, exported.inputs), program_ranges(program)
    assert symbols[("x", 0)] == symbols[("y", 0)] and symbols[("x", 1)] == symbols[("y", 1)]
    assert ranges[symbols[("x", 0)]] == (5, None) and ranges[symbols[("x", 1)]] == (0, None)


def test_dims_table_has_the_documented_columns():
    frame = session(BranchOnBatch(), torch.randn(5, 3), x={0: AUTO}).dims.to_frame()
    for column in ["input", "axis", "example", "requested", "obtained", "min", "max", "symbol", "reason", "source"]:
        assert column in frame.columns
    assert frame[["input", "axis", "obtained"]].values.tolist() == [["x", 0, "dynamic"], ["x", 1, "static"]]


def test_a_named_dim_torch_cannot_keep_dynamic_warns_before_export():
    start = session(BranchOnBatch(), torch.randn(1, 3), strategy="nonstrict", x={0: Dim("b", max=1)})
    (warning,) = start.dim_warnings
    assert (warning.input, warning.axis) == ("x", 0) and "max >= 2" in warning.message
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start.run("capture")
    assert any(issubclass(w.category, DimPolicyWarning) and "x.shape[0]" in str(w.message) for w in caught)


def test_dims_lookup_with_a_malformed_key_raises_key_error():
    dims = session(BranchOnBatch(), torch.randn(5, 3), x={0: AUTO}).dims
    for key in ["x", "x.first", "nope.0", ("x",), ("x", 7), 3.5]:
        with pytest.raises(KeyError):
            dims[key]
    assert dims["x.0"] is dims["x", 0] is dims[0]


def test_dim_outcomes_are_hashable_and_compare_without_the_inputs():
    first = session(BranchOnBatch(), torch.randn(5, 3), x={0: AUTO}).dims
    second = session(BranchOnBatch(), torch.randn(5, 3), x={0: AUTO}).dims
    assert hash(first) == hash(second) and first == second
    assert len({first, second}) == 1


def test_unnamed_dims_get_one_default_name_everywhere():
    from exporter.dims.model import default_dim_name

    class OddKey(torch.nn.Module):
        def forward(self, inputs):
            return inputs["a-b"] * 2

    start = Session(OddKey(), ({"a-b": torch.ones(2, 3)},), options=ExportOptions(dynamic_shapes={"inputs.a-b": {0: AUTO}}))
    name = default_dim_name("inputs.a-b", 0)
    assert name == "inputs_a_b_dim0" and name.isidentifier()
    assert start.spec.to_dynamic_axes() == {"inputs.a-b": {0: name}}  # legacy form
    assert start.dims["inputs.a-b", 0].dim == name  # the ONNX dim_param
    assert onnx_dims(start) == {"inputs.a-b": [name, 3]}
    inferred = start.infer_dims([({"a-b": torch.ones(4, 3)},)])
    assert inferred.policy("inputs.a-b", 0) == Dim(name, min=2, max=4)
    with pytest.raises(Exception, match=name):  # the hint for a bounded torch hint names it too
        start.with_dims({"inputs": {"a-b": {0: torch.export.Dim.DYNAMIC(min=2)}}})


def test_guards_dims_and_fixes_are_computed_once_per_session(monkeypatch):
    import exporter.session
    import exporter.shapes.outcomes

    calls = {"guards_of": 0, "symbol_of": 0}
    # where Session.guards and Session.dims call them (each module imports the function)
    for module, name in [(exporter.session, "guards_of"), (exporter.shapes.outcomes, "symbol_of")]:
        original = getattr(module, name)

        def counting(*args, _original=original, _name=name, **kwargs):
            calls[_name] += 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(module, name, counting)
    exported = session(BranchOnBatch(), torch.randn(5, 3), x={0: AUTO})
    assert exported.dims is exported.dims and exported.guards is exported.guards
    assert exported.suggested_fixes is exported.suggested_fixes
    assert calls == {"guards_of": 1, "symbol_of": 1}
    rejected = session(BranchOnBatch(), torch.randn(5, 3), x={0: Dim("n", max=10)})
    assert rejected.dims is rejected.dims and rejected.suggested_fixes is rejected.suggested_fixes


class NarrowsSeq(torch.nn.Module):
    def forward(self, x):
        return x * 2 if x.shape[1] > 4 else x


@pytest.mark.parametrize("policy", ["seq", AUTO], ids=["name", "auto"])
def test_a_dim_narrowed_by_a_guard_says_the_onnx_model_does_not_check_its_range(policy):
    session = Session(NarrowsSeq(), (torch.randn(2, 8),), {}, ExportOptions(dynamic_shapes={"x": {1: policy}}))
    assert session.run().status == "ok"
    outcome = session.dims["x", 1]
    assert (outcome.min, outcome.max) == (5, None)
    assert "does not check [5, inf]" in outcome.note and "session.verify()" in outcome.note
    assert "note: the ONNX dim stays symbolic" in session.dims.summary()
    assert session.verify().status == "failed"  # and verify shows it is wrong below 5


# -- the range in words (shapes.reasons) ---------------------------------------------------------

SITE = "/opt/env/lib/python3.11/site-packages/transformers/models/bert/modeling_bert.py"


def _guard(expr, code, file=SITE, line=95):
    from exporter.guards import Guard

    return Guard("guard", str(expr), str(expr), axes=(("input_ids", 1),), file=file, line=line, code=code, expr=expr)


def test_guard_expressions_become_bounds_in_words_with_the_line_relative_to_site_packages():
    import sympy

    from exporter.shapes.reasons import dim_bounds

    s = sympy.Symbol("s70", integer=True, positive=True)
    guards = [
        _guard(sympy.Eq(s, sympy.Min(512, s)), "token_type_ids = buffered_token_type_ids.expand(batch_size, seq_length)"),
        _guard(sympy.Ne(s, 1), "is_causal = q_length > 1 and attention_mask is None", line=149,
               file=SITE.replace("models/bert/modeling_bert.py", "integrations/sdpa_attention.py")),
    ]
    assert [str(b) for b in dim_bounds(guards, example=16)] == [
        "at least 2: q_length > 1, transformers/integrations/sdpa_attention.py:149",
        "at most 512: position embeddings, transformers/models/bert/modeling_bert.py:95",
    ]
    # a bound the request already has is no bound: Dim(max=128) is not "at most 512"
    assert [b.text for b in dim_bounds(guards, example=16, low=2, high=128)] == []


def test_axes_of_a_container_say_themselves_in_one_line():
    from exporter.shapes.reasons import axes_text

    cache = [(f"cache.{layer}.{kind}", 2) for layer in (0, 1) for kind in ("key", "value")]
    assert axes_text(cache) == "cache.*.key/value.2"
    assert axes_text([("input_ids", 0), ("attention_mask", 0), *((p, 0) for p, _ in cache)]) == (
        "input_ids.0 = attention_mask.0 = cache.*.key/value.0")


def test_dims_table_prints_the_ranges_as_the_tab_does():
    frame = session(BranchOnBatch(), torch.randn(5, 3), x={0: AUTO}).dims.to_frame()
    assert str(frame["min"].dtype) == "Int64" and str(frame["axis"].dtype) == "Int64"
    assert frame[["min", "max"]].values.tolist() == [[3, float("inf")], [3, 3]]
    assert "x.shape[0] > 2" in frame.loc[0, "why"] and "at least 3" in frame.loc[0, "why"]


def test_bounds_with_the_same_number_asked_at_two_lines_are_said_once_with_both_lines():
    from exporter.shapes.reasons import DimBound, bounds_text

    bounds = (DimBound("at least 2", "q_length == 1", "sdpa_attention.py:122"),
              DimBound("at least 2", "q_length > 1", "sdpa_attention.py:149"),
              DimBound("at most 512", "position embeddings", "modeling_bert.py:95"))
    assert bounds_text(bounds) == ("at least 2: q_length == 1 (sdpa_attention.py:122), q_length > 1 "
                                   "(sdpa_attention.py:149); at most 512: position embeddings, modeling_bert.py:95")
    assert bounds_text(bounds[2:]) == str(bounds[2])
