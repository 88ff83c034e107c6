"""Golden tests of every torch / onnxruntime text format the exporter parses
(``exporter.compat.formats``): each error, source name, traceback and metadata value is
produced by the real torch 2.13 / onnxruntime here, with tiny inline models, and parsed."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch
from torch.export import Dim, export

from exporter import AUTO, ExportOptions, Session
from exporter import compat
from exporter.compat import formats
from exporter.frames import user_frame


def raised(call):
    try:
        call()
    except Exception as exc:  # noqa: BLE001
        return exc
    raise AssertionError("no error")


def line_of(function, text):
    lines, start = inspect.getsourcelines(function)
    return start + next(i for i, line in enumerate(lines) if text in line)


class PinnedToFour(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] == 4:
            return x * 2
        return x


class MoreThanTwo(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] > 2:
            return x * 2
        return x + 1


class Add(torch.nn.Module):
    def forward(self, x, y):
        return x + y


class SignBranch(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x
        return -x


@pytest.mark.parametrize("strict", [False, True])
def test_a_dynamic_dim_the_code_pins_is_a_constraint_violation_by_type_with_the_constant(strict):
    exc = raised(lambda: export(PinnedToFour(), (torch.randn(4, 3),), dynamic_shapes={"x": {0: Dim.DYNAMIC}}, strict=strict))
    assert compat.is_constraint_violation_error(exc) and formats.is_constraint_violation(exc)
    assert formats.marked_static(exc) == [("L['x'].size()[0]", 4)]
    (line,) = formats.violation_lines(exc)
    assert line.startswith("You marked L['x'].size()[0] as dynamic but your code specialized it to be a constant (4)")
    assert formats.suggested_fix_lines(exc) == () and not formats.is_data_dependent(exc)


def test_a_range_the_code_narrows_comes_with_the_guard_and_a_suggested_dim():
    exc = raised(lambda: export(MoreThanTwo(), (torch.randn(4, 3),), dynamic_shapes={"x": {0: Dim("b")}}, strict=False))
    assert compat.is_constraint_violation_error(exc)
    assert formats.suggested_fix_lines(exc) == ("b = Dim('b', min=3)",)
    ((name, guard),) = formats.range_violations(exc)
    assert (name, guard) == ("b", "3 <= L['x'].size()[0] and L['x'].size()[0] <= IntInfinity()")
    assert formats.guard_bounds(guard) == ([3], [])
    assert formats.dim_call("Dim('b', min=3)") == ("b", 3, None)
    assert formats.dim_call("Dim('dx', min=3, max=6)") == ("dx", 3, 6) and formats.dim_call("dx + 1") is None


def test_two_dims_the_code_needs_equal_come_with_an_equality_fix():
    exc = raised(lambda: export(Add(), (torch.randn(4, 3), torch.randn(4, 3)),
                                dynamic_shapes={"x": {0: Dim("dx")}, "y": {0: Dim("dy")}}, strict=False))
    assert formats.is_constraint_violation(exc) and formats.suggested_fix_lines(exc) == ("dy = dx",)
    assert formats.violation_lines(exc) == ["The values of dy = L['y'].size()[0] and dx = L['x'].size()[0] must always be equal."]


def test_a_branch_on_tensor_values_is_data_dependent_by_type_and_names_the_user_line():
    exc = raised(lambda: export(SignBranch(), (torch.randn(4, 3),), strict=False))
    assert compat.is_data_dependent_error(exc) and formats.is_data_dependent(exc)
    assert not formats.is_constraint_violation(exc)
    frame = user_frame(formats.traceback_frames(str(exc)))
    assert frame == (__file__, line_of(SignBranch.forward, "x.sum()"), "forward", "if x.sum() > 0:")


class CountAgainstLength(torch.nn.Module):
    def forward(self, x):
        count = (x[0] > 0).sum().item()
        if 4 * count < x.shape[1]:
            return x + 1
        return x - 1


class ReturnsObject(torch.nn.Module):
    def forward(self, x):
        return x, inspect.Parameter("p", inspect.Parameter.POSITIONAL_ONLY)


def test_a_data_dependent_guard_on_a_dynamic_dim_gives_its_size_symbols_not_the_unbacked_value():
    exc = raised(lambda: export(CountAgainstLength(), (torch.randn(2, 8),), dynamic_shapes={"x": {1: Dim.DYNAMIC}},
                                strict=False))
    (symbol,) = formats.data_dependent_symbols(exc)
    assert symbol.startswith("s") and symbol in str(exc)
    assert formats.data_dependent_symbols(raised(lambda: export(SignBranch(), (torch.randn(4, 3),), strict=False))) == ()


def test_an_output_torch_cannot_flatten_is_named_by_its_class_in_words():
    exc = raised(lambda: export(ReturnsObject(), (torch.randn(2, 3),), strict=False))
    assert formats.unknown_pytree_type(exc) == ("inspect.Parameter", "output")
    assert formats.unflattenable_text(exc) == "the model returns a Parameter (inspect), which torch cannot flatten into tensors"
    assert formats.unflattenable_text(raised(lambda: export(SignBranch(), (torch.randn(4, 3),), strict=False))) is None


def test_a_size_one_example_asked_dynamic_without_size_oblivious_capture_is_a_zero_one_specialization():
    exc = raised(lambda: export(Add(), (torch.randn(1, 3), torch.randn(1, 3)),
                                dynamic_shapes={"x": {0: Dim.DYNAMIC}, "y": None}, strict=False))
    assert formats.zero_one_specializations(exc) == [("inputs['x'].shape[0]", 1)]
    assert formats.split_size_source("inputs['x'].shape[0]") == ("inputs['x']", 0)
    assert not compat.is_constraint_violation_error(exc)  # a plain ValueError in torch 2.13


def test_sizes_that_cannot_broadcast_are_a_size_mismatch():
    exc = raised(lambda: torch.randn(3) + torch.randn(4))
    assert formats.is_size_mismatch(exc) and not formats.is_size_mismatch(ValueError("other"))


class Nested(torch.nn.Module):
    def forward(self, x, cache):
        if x.shape[0] > 2:
            return x + cache[0]["key"]
        return x


@pytest.mark.parametrize("strict", [False, True])
def test_guard_sources_name_inputs_as_the_source_helpers_write_them(strict):
    args = (torch.randn(4, 3), [{"key": torch.randn(4, 3)}])
    with compat.record_shape_guards() as events:
        export(Nested(), args, dynamic_shapes={"x": {0: Dim.AUTO}, "cache": [{"key": {0: Dim.AUTO}}]}, strict=strict)
    sources = {s for event in events for _, names in event.sources for s in names}
    if strict:
        x, key = formats.flat_arg_source(0), formats.flat_arg_source(1)
    else:
        x, key = formats.parameter_sources("x", "")[0], formats.parameter_sources("cache", "[0]['key']")[0]
    assert sources == {formats.size_source(x, 0), formats.size_source(key, 0)}
    assert formats.split_size_source(formats.size_source(key, 0)) == (key, 0)
    assert formats.parameter_sources("cache", "[0]['key']") == ("L['cache'][0]['key']", "inputs['cache'][0]['key']")
    text = f"Not all values of {formats.size_source(key, 0)} = ... and {formats.size_source(x, 0)}"
    assert list(formats.size_sources_in(text, [x, key])) == [(key, 0), (x, 0)]
    assert list(formats.size_sources_in("no source here", [x])) == [] and list(formats.size_sources_in(text, [])) == []


class ReshapeOnOne(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] == 1:
            return x.reshape(4)
        return x.flatten()


@pytest.fixture(scope="module")
def reshape_session():
    session = Session(ReshapeOnOne(), (torch.randn(1, 4),), {}, ExportOptions(dynamic_shapes={"x": {0: AUTO}}))
    session.run()
    return session


def test_onnx_nodes_carry_their_fx_node_module_scopes_and_stack_trace(reshape_session):
    (node,) = [n for n in reshape_session.stage_output("optimize").graph if n.op_type == "Reshape"]
    fx_names = {n.name for n in reshape_session.decomposed_program.graph.nodes}
    assert formats.fx_node_text(node).startswith("%reshape : ")  # the captured graph's node, not retraced
    assert formats.fx_node_name(formats.fx_node_text(node)) in fx_names
    assert formats.parse_name_scopes(formats.name_scopes_text(node)) == ["", "reshape"]
    assert formats.parse_name_scopes("not a list") is None and formats.fx_node_name(None) is None
    assert formats.traceback_frames(formats.stack_trace_text(node)) == [
        (__file__, line_of(ReshapeOnOne.forward, "reshape(4)"), "forward", "return x.reshape(4)")
    ]
    assert formats.CLASS_HIERARCHY_KEY in node.metadata_props


def test_onnxruntime_errors_lose_their_prefix_and_cpp_check_and_name_the_failing_node(reshape_session):
    ort_session = reshape_session.ort_session
    failed = raised(lambda: ort_session.run(None, {"x": np.ones((5, 4), np.float32)}))
    (node,) = [n for n in reshape_session.stage_output("optimize").graph if n.op_type == "Reshape"]
    assert formats.ort_error_node(failed) == node.name
    message = formats.ort_error_message(failed)
    assert message.startswith(f"Non-zero status code returned while running Reshape node. Name:'{node.name}' "
                              "Status Message: The input tensor cannot be reshaped to the requested shape.")
    refused = raised(lambda: ort_session.run(None, {"x": np.ones((5, 4, 2), np.float32)}))
    assert formats.ort_error_message(refused).startswith("Invalid rank for input: x Got: 3 Expected: 2")
    assert formats.ort_error_node(refused) is None
