"""Every bad dim spec is refused with a SpecError before anything is exported, and the error
names the input, the axis and the fix. No test here runs a capture."""

from __future__ import annotations

import re

import pytest
import torch

import exporter
from exporter import AUTO, Dim, ExportOptions, Session, SpecError

TorchDim = torch.export.Dim


class Add(torch.nn.Module):
    def forward(self, x, y):
        return x + y


class Scale(torch.nn.Module):
    def forward(self, x, n, mask=None):
        return x * n


class Nested(torch.nn.Module):
    def forward(self, inputs, cache):
        return inputs["ids"] + cache[0].sum() + cache[1].sum()


class Recording(torch.nn.Module):
    """Remembers every call of forward, so a test can prove the model never ran."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x, y):
        self.calls += 1
        return x + y


def x34():
    return torch.randn(3, 4)


def nested_args():
    return ({"ids": torch.randn(2, 5), "mask": None}, [torch.randn(2, 3), torch.randn(2, 7)])


def refused(match: str, model, args, kwargs=None, **options) -> SpecError:
    """The SpecError raised by ``Session(...)`` construction (nothing is captured before it)."""
    with pytest.raises(SpecError, match=match) as info:
        Session(model, args, kwargs, ExportOptions(**options))
    err = info.value
    assert err.stage == "spec" and str(err).startswith("[spec] ")
    assert isinstance(err, exporter.ExportError) and isinstance(err, ValueError)
    if err.input is not None:
        assert f"  input: {err.where}" in str(err)
    if err.hint is not None:
        assert "  fix: " in str(err)
    return err


# -- the model never runs ----------------------------------------------------------------------

BAD_SPECS = {
    "unknown input": dict(dynamic_shapes={"z": {0: "batch"}}),
    "axis out of range": dict(dynamic_shapes={"x": {5: "batch"}}),
    "size outside range": dict(dynamic_shapes={"x": {0: Dim("batch", min=8)}}),
    "same name, different sizes": dict(dynamic_shapes={"x": {0: "n", 1: "n"}}),
    "wrong-length list": dict(dynamic_shapes={"x": ["batch"]}),
    "legacy unknown input": dict(dynamic_axes={"z": [0]}),
}


@pytest.mark.parametrize("options", list(BAD_SPECS.values()), ids=list(BAD_SPECS))
def test_a_bad_spec_is_refused_by_export_before_the_model_runs(options):
    model = Recording()
    with pytest.raises(SpecError) as info:
        exporter.export(model, x34(), x34(), options=ExportOptions(**options))
    assert model.calls == 0
    assert info.value.session is None  # no session, so no stage ever ran


# -- unknown input name ------------------------------------------------------------------------


def test_unknown_input_name_suggests_the_closest_input():
    err = refused(r"unknown input 'xx'", Add(), (x34(), x34()), dynamic_shapes={"xx": {1: "batch"}})
    assert (err.input, err.axis) == ("xx", 1)
    assert err.hint.startswith("did you mean 'x'?")
    assert "valid inputs: 'x', 'y'" in err.hint


def test_unknown_key_inside_a_nested_input_names_its_full_path():
    err = refused(r"unknown input 'inputs.idz'", Nested(), nested_args(), dynamic_shapes={"inputs": {"idz": {0: "batch"}}})
    assert err.input == "inputs.idz"
    assert "did you mean 'inputs.ids'?" in err.hint


def test_unknown_input_in_legacy_dynamic_axes_suggests_the_closest_input():
    err = refused(r"unknown input 'yy'", Add(), (x34(), x34()), dynamic_axes={"x": [0], "yy": {0: "batch"}})
    assert (err.input, err.axis) == ("yy", 0)
    assert "did you mean 'y'?" in err.hint


def test_an_output_name_in_dynamic_axes_is_refused_with_the_reason():
    err = refused(r"unknown input 'logits'", Add(), (x34(), x34()), dynamic_axes={"x": [0], "logits": {0: "batch"}})
    assert err.input == "logits"
    assert "only inputs take a spec: output dims follow from the input dims" in err.hint


def test_a_key_that_is_not_a_string_is_refused():
    err = refused(r"dynamic_shapes key 0 is not an input name", Add(), (x34(), x34()), dynamic_shapes={0: {0: "b"}})
    assert "valid inputs: 'x', 'y'" in err.hint


def test_session_with_axis_on_an_unknown_input_suggests_the_closest():
    session = Session(Add(), (x34(), x34()))
    with pytest.raises(SpecError, match=r"unknown input 'y1'") as info:
        session.with_axis("y1", 0, AUTO)
    assert (info.value.input, info.value.axis) == ("y1", 0)
    assert info.value.hint.startswith("did you mean 'y'?")


# -- axis out of range -------------------------------------------------------------------------


@pytest.mark.parametrize("axis", [2, 7, -3])
def test_axis_out_of_range_names_the_shape_and_the_valid_axes(axis):
    err = refused(
        rf"axis {axis} is out of range for 'x', a tensor of shape \[3, 4\] \(rank 2\)",
        Add(), (x34(), x34()), dynamic_shapes={"x": {axis: "batch"}},
    )
    assert (err.input, err.axis) == ("x", axis)
    assert err.hint == "valid axes are 0..1 (or -2..-1)"


def test_axis_out_of_range_in_legacy_list_form():
    err = refused(r"axis 2 is out of range", Add(), (x34(), x34()), dynamic_axes={"y": [0, 2]})
    assert (err.input, err.axis, err.hint) == ("y", 2, "valid axes are 0..1 (or -2..-1)")


def test_an_axis_of_a_0d_tensor_says_it_has_none():
    err = refused(r"axis 0 is out of range for 'x', a tensor of shape \[\] \(rank 0\)", Add(), (torch.tensor(1.0), x34()), dynamic_shapes={"x": {0: "b"}})
    assert (err.input, err.axis) == ("x", 0)
    assert err.hint == "a 0-d tensor has no axes: leave it static (None)"


def test_an_axis_that_is_not_an_int_is_refused():
    err = refused(r"axis '0' is not an int", Add(), (x34(), x34()), dynamic_shapes={"x": {"0": "batch"}})
    assert err.input == "x"
    assert err.hint == "use an axis index in range(2), e.g. {0: 'batch'}"


# -- min > max and other impossible ranges ------------------------------------------------------


def test_min_greater_than_max_is_refused_where_the_dim_is_written():
    # Refused by the Dim constructor itself: the traceback points at the user's line, and the
    # Session is never reached. (torch.export.Dim refuses it too, with an AssertionError.)
    with pytest.raises(SpecError, match=r"Dim 'batch': min=8 is greater than max=2") as info:
        Session(Add(), (x34(), x34()), None, ExportOptions(dynamic_shapes={"x": {0: Dim("batch", min=8, max=2)}}))
    assert info.value.hint == "swap them: Dim('batch', min=2, max=8)"
    assert Dim("batch", min=2, max=8).contains(3)  # the fix is valid


def test_a_range_with_a_single_size_is_refused_as_static():
    with pytest.raises(SpecError, match=r"min=3 and max=3 allow a single size, which is a static dim") as info:
        Dim("batch", min=3, max=3)
    assert "use STATIC (or the int 3) for that axis" in info.value.hint
    assert "Dim('batch', min=3, max=4)" in info.value.hint


@pytest.mark.parametrize("bounds", [dict(min=-1), dict(max=2.5), dict(min=True)])
def test_a_bound_that_is_not_a_non_negative_int_is_refused(bounds):
    with pytest.raises(SpecError, match=r"must be a non-negative int or None") as info:
        Dim("batch", **bounds)
    assert info.value.hint == "Dim('batch', min=1, max=4096)"


# -- example size outside [min, max] -------------------------------------------------------------


@pytest.mark.parametrize(
    "dim, message, fix",
    [
        (Dim("batch", min=4), r"the example size 3 is outside Dim 'batch''s range \[4, inf\]", "Dim('batch', min=3)"),
        (Dim("batch", min=1, max=2), r"the example size 3 is outside Dim 'batch''s range \[1, 2\]", "Dim('batch', min=1, max=3)"),
        (TorchDim("batch", min=5, max=9), r"the example size 3 is outside Dim 'batch''s range \[5, 9\]", "Dim('batch', min=3, max=9)"),
    ],
    ids=["below min", "above max", "torch Dim"],
)
def test_example_size_outside_the_range_suggests_a_range_that_contains_it(dim, message, fix):
    err = refused(message, Add(), (x34(), x34()), dynamic_shapes={"x": {0: dim}})
    assert (err.input, err.axis) == ("x", 0)
    assert err.hint == f"widen the range (e.g. {fix}) or pass an example inside it"
    suggested = eval(re.search(r"Dim\(.*?\)", err.hint).group(0), {"Dim": Dim})  # noqa: S307
    assert Session(Add(), (x34(), x34()), None, ExportOptions(dynamic_shapes={"x": {0: suggested}})).spec


# -- a non-tensor where a tensor axis is named ---------------------------------------------------


@pytest.mark.parametrize(
    "n, described", [(None, "None"), (3, r"an int \(3\)"), (2.5, r"a float \(2\.5\)")], ids=["None", "int", "float"]
)
def test_naming_an_axis_of_a_non_tensor_input_is_refused(n, described):
    err = refused(
        rf"input 'n' is {described}, not a tensor, so it has no axis 1 to make dynamic",
        Scale(), (x34(), n), dynamic_shapes={"x": {0: "batch"}, "n": {1: "batch"}},
    )
    assert (err.input, err.axis) == ("n", 1)
    assert err.hint == "remove 'n' from the spec (or give None for it), or pass a tensor for 'n'"


def test_naming_an_axis_of_a_none_inside_a_nested_input_is_refused():
    err = refused(
        r"input 'inputs.mask' is None, not a tensor", Nested(), nested_args(), dynamic_shapes={"inputs": {"mask": {0: "batch"}}}
    )
    assert (err.input, err.axis) == ("inputs.mask", 0)
    assert "pass a tensor for 'inputs.mask'" in err.hint


def test_naming_an_axis_of_a_non_tensor_in_legacy_dynamic_axes_is_refused():
    err = refused(r"input 'n' is an int \(3\), not a tensor", Scale(), (x34(), 3), dynamic_axes={"n": {0: "batch"}})
    assert (err.input, err.axis) == ("n", 0)
    assert "remove 'n' from the spec" in err.hint


def test_session_with_axis_on_a_non_tensor_is_refused():
    session = Session(Scale(), (x34(), 2.5))
    with pytest.raises(SpecError, match=r"input 'n' is a float \(2\.5\), not a tensor") as info:
        session.with_axis("n", 0, "batch")
    assert (info.value.input, info.value.axis) == ("n", 0)


def test_naming_an_axis_of_an_input_left_to_its_default_is_refused():
    err = refused(r"input 'mask' was given no example value", Scale(), (x34(), 3), dynamic_shapes={"mask": {0: "batch"}})
    assert (err.input, err.axis) == ("mask", 0)
    assert err.hint == "pass an example tensor for 'mask', or remove it from the spec"


def test_naming_a_container_input_in_legacy_dynamic_axes_lists_its_tensors():
    err = refused(r"input 'cache' is a list of 2 items, not a tensor", Nested(), nested_args(), dynamic_axes={"cache": {0: "batch"}})
    assert (err.input, err.axis) == ("cache", 0)
    assert "name one of its tensors instead: 'cache.0', 'cache.1'" in err.hint


# -- one name, two meanings ---------------------------------------------------------------------


def test_one_name_with_two_ranges_is_refused():
    err = refused(
        r"dim name 'batch' is used with two different ranges: Dim\('batch', max=64\) on x.shape\[0\] "
        r"and Dim\('batch', max=32\) on y.shape\[0\]",
        Add(), (x34(), x34()), dynamic_shapes={"x": {0: Dim("batch", max=64)}, "y": {0: Dim("batch", max=32)}},
    )
    assert (err.input, err.axis) == ("y", 0)
    assert "create the Dim once (batch = Dim('batch', max=64)) and reuse it" in err.hint


def test_one_name_with_two_example_sizes_is_refused():
    err = refused(
        r"y.shape\[0\] = 5 and x.shape\[0\] = 3 share the dim name 'batch', but their example sizes differ",
        Add(), (x34(), torch.randn(5, 4)), dynamic_shapes={"x": {0: "batch"}, "y": {0: "batch"}},
    )
    assert (err.input, err.axis) == ("y", 0)
    assert err.hint == "give them different names, or make the example sizes equal"


def test_one_name_with_two_example_sizes_in_legacy_dynamic_axes_is_refused():
    err = refused(r"x.shape\[1\] = 4 and x.shape\[0\] = 3 share the dim name 'n'", Add(), (x34(), x34()), dynamic_axes={"x": {0: "n", 1: "n"}})
    assert (err.input, err.axis) == ("x", 1)


def test_dynamic_shapes_and_dynamic_axes_that_disagree_are_refused():
    err = refused(
        r"dynamic_shapes and dynamic_axes disagree: 'batch' vs 'rows'",
        Add(), (x34(), x34()), dynamic_shapes={"x": {0: "batch"}}, dynamic_axes={"x": {0: "rows"}},
    )
    assert (err.input, err.axis) == ("x", 0)
    assert err.hint == "give each axis in only one of dynamic_shapes= and dynamic_axes="


# -- wrong-length lists -------------------------------------------------------------------------


def test_a_per_axis_list_of_the_wrong_length_is_refused():
    err = refused(
        r"a per-axis list of length 3 was given for 'x', a tensor of rank 2 \(shape \[3, 4\]\)",
        Add(), (x34(), x34()), dynamic_shapes={"x": ["batch", None, None]},
    )
    assert err.input == "x"
    assert err.hint.startswith("give 2 entries (one per axis, None for static ones)")


def test_a_list_spec_for_a_list_input_of_another_length_is_refused():
    err = refused(
        r"the spec for 'cache' has 3 entries, but 'cache' is a list of 2 items",
        Nested(), nested_args(), dynamic_shapes={"cache": [{0: "b"}, None, None]},
    )
    assert err.input == "cache"
    assert err.hint.startswith("give 2 entries in that order")


def test_a_positional_spec_tuple_of_the_wrong_length_is_refused():
    err = refused(r"dynamic_shapes has 3 entries by position but forward was given 2 inputs \(x, y\)", Add(), (x34(), x34()), dynamic_shapes=({0: "b"}, None, None))
    assert "give one entry per input in signature order" in err.hint


# -- unknown strategy ---------------------------------------------------------------------------


def test_an_unknown_strategy_is_refused_with_the_closest_choice():
    with pytest.raises(SpecError, match=r"unknown strategy 'nonstirct'") as info:
        Session(Add(), (x34(), x34()), None, ExportOptions(strategy="nonstirct"))
    assert info.value.hint.startswith("did you mean 'nonstrict'? choices: auto, nonstrict")


# -- values that are not a policy ------------------------------------------------------------------


def test_a_value_that_is_not_a_policy_lists_the_accepted_ones():
    err = refused(r"1.5 is not a dim policy", Add(), (x34(), x34()), dynamic_shapes={"x": {1: 1.5}})
    assert (err.input, err.axis) == ("x", 1)
    assert err.hint == "use AUTO, STATIC, DYNAMIC, Dim('name', min=, max=), a name string, True or None"


def test_a_static_size_other_than_the_example_size_is_refused():
    err = refused(r"static size 8 does not match the example size 4", Add(), (x34(), x34()), dynamic_shapes={"x": {1: 8}})
    assert (err.input, err.axis) == ("x", 1)
    assert err.hint == "use 4 (or STATIC), or change the example input"


def test_a_name_that_is_not_an_identifier_is_refused():
    err = refused(r"dim name 'batch size' is not a Python identifier", Add(), (x34(), x34()), dynamic_shapes={"x": {0: "batch size"}})
    assert (err.input, err.axis) == ("x", 0)
    assert "use a name such as 'batch' or 'seq_len'" in err.hint


def test_a_name_for_a_whole_tensor_asks_which_axis():
    err = refused(r"'batch' names one dim but 'x' is a tensor of shape \[3, 4\]", Add(), (x34(), x34()), dynamic_shapes={"x": "batch"})
    assert err.input == "x"
    assert err.hint == "say which axis: {'x': {0: 'batch'}}"


def test_a_name_for_a_whole_container_is_refused():
    err = refused(r"'batch' cannot describe 'inputs', which is a dict of 2 items \(keys 'ids', 'mask'\)", Nested(), nested_args(), dynamic_shapes={"inputs": "batch"})
    assert err.input == "inputs"
    assert "give a dict or list that follows its structure" in err.hint


def test_a_torch_hint_with_bounds_asks_for_a_named_dim():
    err = refused(r"carries bounds", Add(), (x34(), x34()), dynamic_shapes={"x": {0: TorchDim.DYNAMIC(min=2, max=64)}})
    assert (err.input, err.axis) == ("x", 0)
    assert err.hint == "name the dim: exporter.Dim('x_dim0', min=2, max=64)"


def test_a_derived_torch_dim_whose_example_no_root_size_gives_is_refused():
    batch = TorchDim("batch")
    err = refused(r"the example size 7 is not 2\*batch for any size of 'batch'", Add(), (x34(), torch.randn(7, 4)), dynamic_shapes={"x": {0: batch}, "y": {0: 2 * batch}})
    assert (err.input, err.axis) == ("y", 0)
    assert "pass an example whose size is 2*batch" in err.hint


@pytest.mark.parametrize("raw", ["x: batch", 3, {"x"}], ids=["str", "int", "set"])
def test_dynamic_shapes_of_the_wrong_type_is_refused(raw):
    err = refused(r"dynamic_shapes must be a dict, a tuple, a DimSpec or None, not", Add(), (x34(), x34()), dynamic_shapes=raw)
    assert err.hint == 'e.g. dynamic_shapes={"x": {0: "batch"}}'


def test_legacy_dynamic_axes_entry_of_the_wrong_type_is_refused():
    err = refused(r"dynamic_axes entry 'batch' is neither a dict nor a list of axes", Add(), (x34(), x34()), dynamic_axes={"x": "batch"})
    assert err.input == "x"
    assert err.hint == '{"x": {0: "batch"}} or {"x": [0]}'


class AddInputs(torch.nn.Module):
    def forward(self, x, y):
        return x + y


@pytest.mark.parametrize("strategy", ["nonstrict", "strict"])
def test_a_dynamic_axis_the_code_ties_to_a_static_one_is_explained_in_the_users_terms(strategy):
    from exporter import DYNAMIC, STATIC

    spec = {"x": {0: DYNAMIC}, "y": {0: STATIC}}
    session = Session(AddInputs(), (torch.randn(4, 3), torch.randn(4, 3)), {},
                      ExportOptions(dynamic_shapes=spec, strategy=strategy))
    assert session.run().status == "failed"
    message = str(session.failed_stage.error)
    assert ("x.shape[0] was asked to be dynamic, but the model's code makes it the constant 4 "
            "(it likely has to equal y.shape[0], kept static with the same size") in message
    assert "mark_dynamic" not in message and "L['x']" not in message.split("tried:")[0]
    assert session.dims["x", 0].reason.startswith("x.shape[0] was asked to be dynamic")
    assert session.apply_suggested_fixes().run().status == "ok"
