"""torch.onnx.export's inputs, taken as it takes them: equal string names, derived dims (in specs
and in fixes), Dim.STATIC on a non-tensor input, dynamic_axes keyed by input_names."""

from __future__ import annotations

import warnings

import pytest
import torch
from shape_models import GatheredMask

from exporter import Dim, ExportOptions, Session, SpecError
from exporter.dims import DYNAMIC, Derived, DimSpec, Name


def onnx_input_dims(model) -> dict[str, list]:
    """``{input: [dim_param or size, ...]}`` of an onnx_ir model or a ModelProto."""
    graph_inputs = getattr(model.graph, "inputs", None)
    if graph_inputs is not None:
        return {v.name: [getattr(d, "value", d) for d in v.shape] for v in graph_inputs}
    return {
        v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in model.graph.input
    }


def test_equal_string_names_tie_axes_into_one_onnx_dim_param_as_torch_onnx_export_does():
    model = GatheredMask().eval()
    args = (torch.randint(0, 20, (2, 6)), torch.ones(2, 6, dtype=torch.long))
    names = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch.onnx.export(model, args, dynamic_shapes=names, dynamo=True, verbose=False)
    session = Session(model, args, None, ExportOptions(dynamic_shapes=names))
    assert session.run().status == "ok"
    expected = {"input_ids": ["batch", "seq"], "attention_mask": ["batch", "seq"]}
    assert onnx_input_dims(theirs.model) == expected
    assert onnx_input_dims(session.onnx_model) == expected
    # torch gave the batch axes two symbols in both, as no guard equates them
    assert session.dims["input_ids", 0].symbol != session.dims["attention_mask", 0].symbol


class Shift(torch.nn.Module):
    def forward(self, x, y):
        return x + y[1:]


class Twice(torch.nn.Module):
    def forward(self, x, y):
        return x.repeat(2, 1) + y


dx = Dim("dx")
DERIVED = [
    ("dx + 1", Shift(), (torch.randn(4, 3), torch.randn(5, 3)), {"x": {0: dx}, "y": {0: dx + 1}}, Derived(dx, 1, 1), "dx + 1"),
    ("2 * dx", Twice(), (torch.randn(4, 3), torch.randn(8, 3)), {"x": {0: dx}, "y": {0: 2 * dx}}, Derived(dx, 2, 0), "2*dx"),
    ("torch's dx + 1", Shift(), (torch.randn(4, 3), torch.randn(5, 3)),
     {"x": {0: torch.export.Dim("dx")}, "y": {0: torch.export.Dim("dx") + 1}}, Derived(dx, 1, 1), "dx + 1"),
]


@pytest.mark.parametrize("model, args, spec, policy, onnx_dim", [c[1:] for c in DERIVED], ids=[c[0] for c in DERIVED])
def test_derived_dims_export_with_the_expression_as_the_onnx_dim_and_verify(model, args, spec, policy, onnx_dim):
    session = Session(model, args, None, ExportOptions(dynamic_shapes=spec))
    assert session.spec.policy("y", 0) == policy
    assert "'y': {0: " + ("dx + 1" if policy.offset else "2 * dx") + "}" in session.spec.to_code(session.inputs)
    assert session.run().status == "ok"
    assert onnx_input_dims(session.onnx_model)["y"][0] == onnx_dim
    result = session.verify()
    assert result.ok, result.summary()


def test_a_derived_example_size_that_disagrees_with_its_root_is_refused():
    spec = {"x": {0: dx}, "y": {0: 2 * dx}}
    with pytest.raises(SpecError, match=r"the example size 5 is not 2\*dx for any size of 'dx'"):
        Session(Twice(), (torch.randn(4, 3), torch.randn(5, 3)), None, ExportOptions(dynamic_shapes=spec))
    with pytest.raises(SpecError, match=r"y.shape\[0\] = 4 \(2\*dx, so dx = 2\) and x.shape\[0\] = 4 share"):
        Session(Twice(), (torch.randn(4, 3), torch.randn(4, 3)), None, ExportOptions(dynamic_shapes=spec))


def test_torch_suggesting_a_derived_dim_is_applied_as_one_in_one_round():
    session = Session(Shift(), (torch.randn(4, 3), torch.randn(5, 3)), None,
                      ExportOptions(dynamic_shapes={"x": {0: Dim("a")}, "y": {0: Dim("b")}}))
    assert session.run("capture").status == "failed"
    assert session.suggested_fixes.after.policy("y", 0) == Derived(Dim("a"), 1, 1)
    fixed = session.apply_suggested_fixes()
    assert fixed.run().status == "ok" and len(fixed.applied_fixes) == 1


class Scaled(torch.nn.Module):
    def forward(self, x, n: int):
        return x * n


def test_dim_static_on_a_non_tensor_input_is_accepted_as_torch_export_accepts_it():
    spec = {"x": {0: "batch"}, "n": torch.export.Dim.STATIC}
    session = Session(Scaled(), (torch.randn(3, 4), 2), None, ExportOptions(dynamic_shapes=spec))
    assert list(session.spec) and session.spec.policy("x", 0) == Name("batch")
    assert session.run().status == "ok"


def test_dynamic_axes_keyed_by_input_names_and_output_names_as_legacy_code_writes_them():
    bound = Session(Shift(), (torch.randn(4, 3), torch.randn(5, 3))).inputs
    spec = DimSpec.parse(
        None, bound,
        dynamic_axes={"input_0": {0: "rows"}, "input_1": [0], "output": {0: "rows"}},
        input_names=["input_0", "input_1"], output_names=["output"],
    )
    assert spec.policy("x", 0) == Name("rows") and spec.policy("y", 0) is DYNAMIC
    with pytest.raises(SpecError, match="input_names has 3 names but forward was given 2 tensors"):
        DimSpec.parse(None, bound, dynamic_axes={}, input_names=["a", "b", "c"])


class MaskedScale(torch.nn.Module):
    def forward(self, x, mask):
        return x * mask + 1


def test_an_exported_program_is_taken_as_the_model_with_its_inputs_and_dynamic_dims():
    from exporter import export

    b = torch.export.Dim("b")
    program = torch.export.export(
        MaskedScale(), (torch.randn(3, 4),), {"mask": torch.ones(3, 4)}, dynamic_shapes={"x": {0: b}, "mask": {0: b}}
    )
    session = export(program)  # no inputs, no spec: the program's own
    assert session.exported_program is program  # used as captured, not captured again
    assert onnx_input_dims(session.onnx_model) == {"x": ["x_dim0", 4], "mask": ["x_dim0", 4]}
    x, mask = torch.randn(6, 4), torch.rand(6, 4)
    np_out = session.run_onnx(x, mask=mask)[0]
    torch.testing.assert_close(torch.from_numpy(np_out), x * mask + 1)
    assert session.verify().ok


class TwoOutputs(torch.nn.Module):
    def forward(self, x):
        return x * 2, x.sum(-1)


def test_output_names_name_the_onnx_outputs_and_key_legacy_dynamic_axes():
    from exporter import ExportOptions, Session

    options = ExportOptions(
        input_names=["input_ids"], output_names=["logits", "total"],
        dynamic_axes={"input_ids": {0: "batch"}, "logits": {0: "batch"}},
    )
    session = Session(TwoOutputs(), (torch.randn(3, 4),), {}, options)
    assert session.run().status == "ok"
    proto = session.model_proto
    assert [o.name for o in proto.graph.output] == ["logits", "total"]
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert session.verify().status == "passed"
    renamed = session.with_options(output_names=("out",), dynamic_axes={"input_ids": {0: "batch"}})
    assert [o.name for o in renamed.model_proto.graph.output][0] == "out"  # the rest keep their names
    assert renamed.result("capture").cached  # output names change translation onward only


def test_too_many_output_names_fail_translate_naming_the_outputs():
    from exporter import ExportOptions, Session

    session = Session(TwoOutputs(), (torch.randn(3, 4),), {}, ExportOptions(output_names=["a", "b", "c"]))
    result = session.run()
    assert (result.name, result.status) == ("translate", "failed")
    assert "output_names has 3 names but the model has 2 output(s)" in str(result.error)


def test_output_names_must_be_a_list_of_strings():
    from exporter import ExportOptions, SpecError

    with pytest.raises(SpecError, match="output_names must be a list"):
        ExportOptions(output_names="logits")


class AddColumnSums(torch.nn.Module):
    def forward(self, x, y):
        return x + y.sum(0)


def test_input_names_rename_the_onnx_inputs_and_running_verifying_and_timing_still_work():
    from exporter import ExportOptions, Session

    options = ExportOptions(input_names=["input_x", "input_y"], dynamic_axes={"input_x": {0: "batch"}, "y": {0: "rows"}})
    session = Session(AddColumnSums(), (torch.randn(4, 3), torch.randn(5, 3)), {}, options)
    assert session.run().status == "ok"
    assert [i.name for i in session.model_proto.graph.input] == ["input_x", "input_y"]
    assert onnx_input_dims(session.onnx_model) == {"input_x": ["batch", 3], "input_y": ["rows", 3]}
    assert session.onnx_input_names == {"x": "input_x", "y": "input_y"}
    x, y = torch.randn(6, 3), torch.randn(2, 3)
    assert set(session.feeds(x, y)) == {"input_x", "input_y"}
    torch.testing.assert_close(torch.from_numpy(session.run_onnx(x, y)[0]), AddColumnSums()(x, y))
    result = session.verify()
    assert result.status == "passed", result.summary()
    assert session.benchmark(budget=0.2, warmup=1).ok


def test_input_names_may_name_only_the_first_inputs_and_change_translation_onward_only():
    from exporter import ExportOptions, Session

    session = Session(AddColumnSums(), (torch.randn(4, 3), torch.randn(5, 3)), {}, ExportOptions(dynamic_shapes={"x": {0: "n"}}))
    assert session.run().status == "ok"
    renamed = session.with_options(input_names=("first",))
    assert [i.name for i in renamed.model_proto.graph.input] == ["first", "y"]
    assert renamed.result("capture").cached and not renamed.result("translate").cached


@pytest.mark.parametrize(
    ("names", "message"),
    [(["a", "b", "c"], "input_names has 3 names but forward was given 2 tensors"),
     (["y"], "would give inputs 'x' and 'y' the same ONNX name 'y'"),
     (["a", "a"], "the same ONNX name 'a'")],
)
def test_too_many_or_clashing_input_names_fail_when_the_session_is_made(names, message):
    from exporter import ExportOptions, Session, SpecError

    with pytest.raises(SpecError, match=message):
        Session(AddColumnSums(), (torch.randn(4, 3), torch.randn(5, 3)), {}, ExportOptions(input_names=names))


class CatThenAdd(torch.nn.Module):
    def forward(self, a, b, c):
        return torch.cat([a, b], 1) + c


def test_a_string_name_on_an_axis_the_code_makes_a_sum_names_the_onnx_dim_and_verify_passes():
    from exporter import ExportOptions, Session

    spec = {"a": {1: "n"}, "b": {1: "m"}, "c": {1: "k"}}
    session = Session(CatThenAdd(), (torch.randn(2, 3), torch.randn(2, 4), torch.randn(2, 7)), {},
                      ExportOptions(dynamic_shapes=spec))
    assert onnx_input_dims(session.onnx_model) == {"a": [2, "n"], "b": [2, "m"], "c": [2, "k"]}  # as torch.onnx names it
    result = session.verify()
    assert result.status == "passed", result.summary()  # was a contract error: "the ONNX dim is the expression 'm + n'"


def test_opset_17_gives_a_model_onnxruntime_loads_and_the_optimizer_left_forms_it_lacks_fall_back_named():
    from exporter import ExportOptions, Session
    from exporter.examples import demo_block

    model, args, kwargs, shapes = demo_block()
    plain = Session(model, args, kwargs, ExportOptions(dynamic_shapes=shapes, opset_version=17, optimize=False))
    assert plain.run().status == "skipped" and plain.succeeded and plain.model_proto.opset_import[0].version == 17
    assert plain.verify().ok  # loads: ReduceMax's noop_with_empty_axes=0 (its opset-18 default) was dropped
    optimized = plain.with_options(optimize=True)
    fallback = optimized.run()  # torch.onnx.export hands out a model onnxruntime refuses here
    assert (fallback.name, fallback.status) == ("optimize", "warning") and optimized.succeeded
    assert "Split(num_outputs)" in fallback.detail and "unoptimized model is used" in fallback.warnings[0]
    assert optimized.model_proto.opset_import[0].version == 17 and optimized.verify().ok
