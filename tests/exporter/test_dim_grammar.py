"""The ``INPUT.AXIS=POLICY`` grammar (``exporter.dims.grammar``) the command line, the magic and
the widget share: each form's meaning (a bare name is what a string means in ``dynamic_shapes``),
each malformed text refused with the text quoted, what is wrong and the corrected text, and the
checks against the example inputs (unknown input, axis out of range, an axis given twice)."""

from __future__ import annotations

import argparse

import pytest
import torch

from exporter import AUTO, DYNAMIC, STATIC, Dim, SpecError
from exporter.dims import Name
from exporter.dims.grammar import (
    AxisRequest,
    AxisRequestsAction,
    axis_request_argument,
    check_unique,
    one_line,
    parse_axis_request,
    parse_policy,
    spec_from_requests,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x.0=batch", AxisRequest("x", 0, Name("batch"))),
        ("cache.0.key.2=seq:1:4096", AxisRequest("cache.0.key", 2, Dim("seq", min=1, max=4096))),
        ("x.-1=n::64", AxisRequest("x", -1, Dim("n", max=64))),
        ("x.1=seq:2:", AxisRequest("x", 1, Dim("seq", min=2))),
        ("x.1=seq::", AxisRequest("x", 1, Dim("seq"))),
        ("mask.1=AUTO", AxisRequest("mask", 1, AUTO)),
        ("mask.1=static", AxisRequest("mask", 1, STATIC)),
        ("mask.1=Dynamic", AxisRequest("mask", 1, DYNAMIC)),
        (" x.0=batch ", AxisRequest("x", 0, Name("batch"))),
    ],
    ids=["name", "range", "negative-axis-max-only", "min-only", "strict-no-bounds", "auto", "static", "dynamic",
         "spaces"],
)
def test_each_form_means_what_the_api_means(text, expected):
    request = parse_axis_request(text)
    assert request == expected
    assert type(request.policy) is type(expected.policy)  # a Name is not a strict Dim
    assert request.text == text.strip()


def test_a_bare_name_is_the_apis_string_name_and_a_range_is_a_strict_dim():
    assert parse_policy("seq") == Name("seq") and parse_policy("seq") != Dim("seq")
    assert parse_policy("seq::") == Dim("seq") and not isinstance(parse_policy("seq::"), Name)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x0=batch", "'x0=batch': is not INPUT.AXIS=NAME: the axis is missing before '='; "
                     "fix: name the input and the axis, e.g. x0.0=batch"),
        ("x.0", "'x.0': is not INPUT.AXIS=NAME: no '=' before the policy; fix: e.g. x.0=batch"),
        ("x.zero=batch", "'x.zero=batch': the axis 'zero' is not an integer; "
                         "fix: the last dot-component is the axis index, e.g. x.0=batch"),
        ("x.1=", "'x.1=': no policy after '='; fix: x.1=batch (a dim name), x.1=auto or x.1=static"),
        ("x.1=seq:512:1", "'x.1=seq:512:1': min 512 is greater than max 1; fix: x.1=seq:1:512"),
        ("x.1=seq:4:4", "'x.1=seq:4:4': min 4 and max 4 allow a single size: that is a static axis; "
                        "fix: x.1=static (the example size), or a wider range: x.1=seq:4:5"),
        ("x.1=seq:1", "'x.1=seq:1': 'seq:1' is neither NAME nor NAME:MIN:MAX (a range needs two colons); "
                      "fix: x.1=seq:1: (min only), x.1=seq::1 (max only) or x.1=seq"),
        ("x.1=seq:one:4", "'x.1=seq:one:4': the min 'one' is not an integer; "
                          "fix: x.1=seq:1:4096 (leave a bound empty for none: seq::4096)"),
        ("x.1=seq:-2:4", "'x.1=seq:-2:4': the min -2 is negative (sizes are >= 0); "
                         "fix: leave the bound empty for none, e.g. x.1=seq::4096"),
        ("x.1=2seq", "'x.1=2seq': '2seq' is not a dim name (a Python identifier such as batch or seq_len); "
                     "fix: x.1=batch, or auto / static / dynamic"),
        ("x.1=class", "'x.1=class': dim name 'class' is not a Python identifier; "
                      "fix: use a name such as 'batch' or 'seq_len' (letters, digits, underscores)"),
    ],
    ids=["no-axis", "no-equals", "axis-not-int", "no-policy", "min-above-max", "one-size", "one-colon",
         "bound-not-int", "negative-bound", "not-an-identifier", "keyword"],
)
def test_a_malformed_request_quotes_the_text_says_what_is_wrong_and_the_fix(text, message):
    with pytest.raises(SpecError) as raised:
        parse_axis_request(text)
    assert one_line(raised.value) == message
    with pytest.raises(argparse.ArgumentTypeError, match="^" + message.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[").replace(".", r"\.") + "$"):
        axis_request_argument(text)


def test_an_axis_given_twice_as_written_is_refused():
    requests = [parse_axis_request(t) for t in ("x.0=batch", "y.0=batch", "x.0=static")]
    with pytest.raises(SpecError) as raised:
        check_unique(requests)
    assert one_line(raised.value) == (
        "x.0 is given twice: 'x.0=batch' and 'x.0=static'; fix: give each axis once: keep 'x.0=batch' or 'x.0=static'"
    )


def test_the_argparse_action_collects_one_or_many_per_flag_and_refuses_a_duplicate():
    parser = argparse.ArgumentParser(prog="p", exit_on_error=False)
    parser.add_argument("--dynamic", nargs="+", type=axis_request_argument, action=AxisRequestsAction, default=[])
    options = parser.parse_args(["--dynamic", "x.0=batch", "x.1=seq:1:64", "--dynamic", "y.0=batch"])
    assert [r.target for r in options.dynamic] == ["x.0", "x.1", "y.0"]
    assert parser.parse_args([]).dynamic == [] and parser.get_default("dynamic") == []  # the default is not filled
    with pytest.raises(argparse.ArgumentError, match="x.1 is given twice: 'x.1=seq:1:64' and 'x.1=auto'"):
        parser.parse_args(["--dynamic", "x.1=seq:1:64", "--dynamic", "x.1=auto"])


class Pair(torch.nn.Module):
    def forward(self, x, y):
        return x + y.sum()


def requests(*texts):
    return [parse_axis_request(t) for t in texts]


def test_requests_become_a_spec_keyed_by_leaf_path_with_negative_axes_resolved():
    args = (torch.randn(2, 3, 4), torch.randn(5))
    spec = spec_from_requests(Pair(), args, {}, {"y": {0: "n"}}, requests("x.-1=d:2:8", "x.0=batch"))
    assert spec == {"y": {0: Name("n")}, "x": {2: Dim("d", min=2, max=8), 0: Name("batch")}}
    assert spec_from_requests(Pair(), args, {}, None, []) is None


@pytest.mark.parametrize(
    ("texts", "message"),
    [
        (("xx.0=batch",), "'xx.0=batch': unknown input 'xx'; fix: did you mean 'x'? valid inputs: 'x', 'y'"),
        (("x.3=batch",), "'x.3=batch': axis 3 is out of range for 'x', a tensor of shape [2, 3, 4] (rank 3); "
                         "fix: valid axes are 0..2 (or -3..-1)"),
        (("x.-1=a", "x.2=b"), "x.2 is given twice: 'x.-1=a' and 'x.2=b'; fix: give each axis once: keep 'x.-1=a' or 'x.2=b'"),
    ],
    ids=["unknown-input", "axis-out-of-range", "same-axis-negative-and-positive"],
)
def test_requests_are_checked_against_the_example_inputs(texts, message):
    with pytest.raises(SpecError) as raised:
        spec_from_requests(Pair(), (torch.randn(2, 3, 4), torch.randn(5)), {}, None, requests(*texts))
    assert one_line(raised.value) == message


def test_a_policy_alone_as_the_widgets_fields_give_it_is_read_by_the_same_grammar():
    assert parse_policy("seq") == Name("seq") and parse_policy("seq:2:64") == Dim("seq", min=2, max=64)
    with pytest.raises(SpecError) as raised:
        parse_policy("seq:9:2")
    assert one_line(raised.value) == "'seq:9:2': min 9 is greater than max 2; fix: seq:2:9"
