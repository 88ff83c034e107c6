"""Dim groups the model's guards tie to other groups are sized from them, not swept alone.

GPT-2 with a KV cache and an attention mask reads the mask over the cached and the new
tokens; torch records ``total <= past_seq + seq`` and ``past_seq + seq - total <= 0`` (with
``total`` written ``(batch*total)//batch``). Sweeping ``total`` on its own fed sizes no caller
sends and onnxruntime failed in GatherND: a false alarm. Now ``total`` is derived: every case
sizes it ``past_seq + seq``.

Observed on torch 2.13: ``torch.cat([a, b], 1) + c`` does not reach this code, torch replaces
``c``'s symbol by ``a + b``'s (a derived ONNX dim, no dim group); two Python branches on
``c.shape[1] > n`` / ``< n`` leave the pair of guards, as GPT-2's mask does.
"""

from __future__ import annotations

import html
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
import transformers  # noqa: F401 - the test extra installs it: missing, this fails instead of skipping

import kv_models
from exporter import Dim, ExportOptions, export
from exporter.axis import Axis
from exporter.cases import DimGroup, derive_groups, plan_cases


class PadOrCrop(torch.nn.Module):
    """Pads or crops ``c`` to ``a`` and ``b`` side by side: the exported program keeps the
    branch taken at the example (neither), so it is right only when ``k == n + m``."""

    def forward(self, a, b, c):
        n = a.shape[1] + b.shape[1]
        if c.shape[1] > n:
            c = c[:, :n]
        elif c.shape[1] < n:
            c = F.pad(c, (0, n - c.shape[1]), value=1.0)
        return torch.cat([a, b], 1).sum(1) + c.sum(1)


class Prefix(torch.nn.Module):
    """Reads the first ``y.shape[1]`` columns of ``x``: one guard ``y <= x``, no tie."""

    def forward(self, x, y):
        return x[:, : y.shape[1]] * y


@pytest.fixture(scope="module")
def gpt2():
    return export(kv_models.gpt2(), options=ExportOptions(dynamic_shapes=kv_models.DYNAMIC_SHAPES_WITH_MASK),
                  **kv_models.decoder_inputs(2, 3, 4, mask=True))


@pytest.fixture(scope="module")
def gpt2_result(gpt2):
    return gpt2.verify()


@pytest.fixture(scope="module")
def pad_or_crop():
    inputs = {"a": torch.randn(2, 3), "b": torch.randn(2, 4), "c": torch.randn(2, 7)}
    dims = {"a": {1: "n"}, "b": {1: "m"}, "c": {1: "k"}}
    return export(PadOrCrop(), options=ExportOptions(dynamic_shapes=dims), **inputs)


def _size_cases(result):
    return [dict(c.sizes) for c in result.cases if not c.is_edge_value]


# -- GPT-2 with a cache and a mask --------------------------------------------------------


def test_gpt2_with_cache_and_mask_passes_default_verify_without_a_make_inputs_hook(gpt2_result):
    assert gpt2_result.ok, gpt2_result.summary()
    assert len(_size_cases(gpt2_result)) > 4  # swept, not only the example


def test_gpt2_mask_length_is_past_seq_plus_seq_in_every_generated_case(gpt2):
    shapes = []

    def record(case):
        shapes.append(dict(case.shapes))  # the generated inputs, kept

    result = gpt2.verify(make_inputs=record, edge_values=False)
    assert result.ok, result.summary()
    assert len(shapes) == len(result.cases) - 1 > 4
    for shape in shapes:
        assert shape["attention_mask"][1] == shape["cache.0.key"][2] + shape["input_ids"][1], shape
    assert len({s["attention_mask"][1] for s in shapes}) > 2  # total moved, with the others


def test_gpt2_total_group_is_derived_from_past_seq_and_seq_and_not_swept_alone(gpt2_result):
    groups = {g.label: g for g in gpt2_result.groups}
    assert groups["total"].derived == "past_seq + seq"
    assert groups["total"].derived_from == ("past_seq", "seq")
    assert all(groups[label].derived is None for label in ("batch", "seq", "past_seq"))
    assert any("masking_utils.py" in text for text in groups["total"].derived_guards)
    names = [c.name for c in gpt2_result.cases]
    assert "total larger" not in names and "past_seq larger" in names
    for sizes in _size_cases(gpt2_result):
        assert sizes["total"] == sizes["past_seq"] + sizes["seq"], sizes


def test_gpt2_summary_and_html_say_total_follows_from_the_guards(gpt2_result):
    text = "total = past_seq + seq (from the model's guards)"
    assert text in gpt2_result.summary()
    assert text in html.unescape(gpt2_result._repr_html_())
    (finding,) = [f for f in gpt2_result.findings if f.kind == "derived_dim"]
    assert "sizes total from past_seq and seq" in finding.message
    frame = gpt2_result.groups_frame().set_index("dim")
    assert frame.loc["total", "derived"].startswith("total = past_seq + seq") and frame.loc["seq", "derived"] == ""


def test_sizes_for_a_derived_group_is_refused_up_front_naming_what_it_follows(gpt2):
    with pytest.raises(ValueError, match="'total', which follows from past_seq and seq"):
        gpt2.verify(sizes={"total": [5]})
    with pytest.raises(ValueError, match="independent=True"):
        gpt2.verify(sizes={"attention_mask.1": [5]})  # named by its axis


def test_sizes_for_the_groups_it_follows_move_total_with_them_including_an_empty_cache(gpt2):
    result = gpt2.verify(sizes={"past_seq": [0, 6], "seq": [1]}, edge_values=False)
    assert result.ok, result.summary()
    assert {(s["past_seq"], s["seq"], s["total"]) for s in _size_cases(result)} >= {(0, 3, 3), (6, 3, 9), (4, 1, 5)}


def test_independent_sweeps_total_on_its_own_as_before(gpt2):
    result = gpt2.verify(independent=True, edge_values=False)
    assert all(g.derived is None for g in result.groups)
    assert not any(f.kind == "derived_dim" for f in result.findings)
    alone = result.case("total larger")
    assert dict(alone.sizes)["total"] != dict(alone.sizes)["past_seq"] + dict(alone.sizes)["seq"]


# -- small modules ------------------------------------------------------------------------


def test_dim_tied_to_the_sum_of_two_others_by_branches_is_derived_and_passes(pad_or_crop):
    result = pad_or_crop.verify()
    assert result.ok, result.summary()
    groups = {g.label: g for g in result.groups}
    assert groups["k"].derived == "m + n" and groups["n"].derived is None and groups["m"].derived is None
    assert all(s["k"] == s["n"] + s["m"] for s in _size_cases(result))
    assert "k = m + n (from the model's guards)" in result.summary()


def test_the_same_module_swept_independently_is_wrong_where_k_is_not_n_plus_m(pad_or_crop):
    """What derivation avoids: the program keeps the example's branch (neither pad nor crop)."""
    result = pad_or_crop.verify(independent=True)
    assert not result.ok
    bad = [dict(c.sizes) for c in result.failed_cases]
    assert bad and all(s["k"] != s["n"] + s["m"] for s in bad)


def test_a_single_guard_relating_two_dims_keeps_them_independent():
    session = export(Prefix(), options=ExportOptions(dynamic_shapes={"x": {1: "n"}, "y": {1: "m"}}),
                     x=torch.randn(2, 6), y=torch.randn(2, 4))
    assert any(g.axes == (Axis("x", 1), Axis("y", 1)) for g in session.guards)  # y <= x, stated once
    result = session.verify()
    assert [g.derived for g in result.groups] == [None, None]
    assert not any(f.kind == "derived_dim" for f in result.findings)
    assert "m larger" in [c.name for c in result.cases]  # y swept on its own (eager refuses 8 > 6)


# -- reading guards (no export) -----------------------------------------------------------


def _group(label, path, example, requested_range=(1, None)):
    return DimGroup(label, (Axis(path, 1),), repr(label), example, requested_range, f"s_{label}", (0, None), (label,))


def _bound(**shapes):
    return SimpleNamespace(leaves=[SimpleNamespace(path=p, shape=s) for p, s in shapes.items()])


def _guards(*expressions):
    return [SimpleNamespace(expression=e, source=None) for e in expressions]


BOUND = _bound(a=(2, 3), b=(2, 4), c=(2, 7))
GROUPS = (_group("n", "a", 3), _group("m", "b", 4), _group("k", "c", 7))


@pytest.mark.parametrize("expressions", [
    ("c.shape[1] == a.shape[1] + b.shape[1]",),
    ("a.shape[1] + b.shape[1] - c.shape[1] <= 0", "c.shape[1] <= a.shape[1] + b.shape[1]"),
    ("c.shape[1] >= b.shape[1] + a.shape[1]", "a.shape[1] + b.shape[1] >= c.shape[1]"),
    ("((c.shape[0]*c.shape[1])//a.shape[0]) <= a.shape[1] + b.shape[1]", "b.shape[1] + a.shape[1] <= c.shape[1]"),
])
def test_an_equality_or_a_pair_of_opposite_bounds_in_any_written_form_derives_k(expressions):
    derived = {g.label: g.derived for g in derive_groups(GROUPS, _guards(*expressions), BOUND)}
    assert derived == {"n": None, "m": None, "k": "m + n"}


@pytest.mark.parametrize("expressions", [
    ("c.shape[1] <= a.shape[1] + b.shape[1]",),  # one bound
    ("c.shape[1] <= a.shape[1] + b.shape[1]", "c.shape[1] >= a.shape[1] + b.shape[1] - 1"),  # not opposite
    ("c.shape[1] < a.shape[1] + b.shape[1] + 1", "c.shape[1] > a.shape[1] + b.shape[1] - 1"),  # strict: not read
    ("c.shape[1] != a.shape[1] + b.shape[1] + 1",),
])
def test_guards_that_do_not_state_an_equation_derive_nothing(expressions):
    assert [g.derived for g in derive_groups(GROUPS, _guards(*expressions), BOUND)] == [None, None, None]


def test_a_group_with_a_user_dim_range_is_not_derived_nor_a_difference_of_others():
    ranged = (GROUPS[0], GROUPS[1], _group("k", "c", 7, requested_range=(2, 64)))
    guards = _guards("c.shape[1] == a.shape[1] + b.shape[1]")
    # k has a Dim range; n = k - m and m = k - n can be negative: nothing is derived
    assert [g.derived for g in derive_groups(ranged, guards, BOUND)] == [None, None, None]


def test_an_equation_that_does_not_hold_at_the_example_sizes_derives_nothing():
    guards = _guards("c.shape[1] == a.shape[1] + 2*b.shape[1]")  # 7 != 3 + 8: misread, not trusted
    assert [g.derived for g in derive_groups(GROUPS, guards, BOUND)] == [None, None, None]


def test_a_static_axis_is_its_example_size_and_a_scaled_group_is_derived():
    groups = (_group("n", "a", 3), _group("k", "c", 7))
    guards = _guards("c.shape[1] == 2*a.shape[1] + b.shape[1] - 3")  # b.1 static at 4: k = 2n + 1
    (n, k) = derive_groups(groups, guards, BOUND)
    assert (n.derived, k.derived) == (None, "2*n + 1")
    assert k.derived_size({"n": 10}) == 21


def test_plan_cases_never_sweeps_a_derived_group_and_sizes_it_in_every_case():
    groups = derive_groups(GROUPS, _guards("c.shape[1] == a.shape[1] + b.shape[1]"), BOUND)
    plans = plan_cases(groups, 512, None)
    assert plans and all(dict(p.sizes)["k"] == dict(p.sizes)["n"] + dict(p.sizes)["m"] for p in plans)
    assert "k larger" not in [p.name for p in plans] and {"n larger", "m larger"} <= {p.name for p in plans}
    small = plan_cases(groups, 8, None)  # "larger" would make k = 7 + 8 > 8: dropped, not clipped
    # near and twice are scaled to the example, never bounded by max_size (k follows: 7 + 8)
    assert all(dict(p.sizes)["k"] <= 8 for p in small if p.name not in ("near", "twice"))
    assert dict(next(p for p in small if p.name == "twice").sizes) == {"n": 7, "m": 8, "k": 15}
    with pytest.raises(ValueError, match="follows from m and n"):
        plan_cases(groups, 512, {"k": [3]})
    assert [p.sizes for p in plan_cases(groups, 512, {"n": [5]})] == [(("n", 5), ("m", 4), ("k", 9))]


def test_a_user_dim_range_on_the_tied_group_keeps_verify_sweeping_it():
    """Not derived: the program for a ranged k is swept as the user asked (independently)."""
    inputs = {"a": torch.randn(2, 3), "b": torch.randn(2, 4), "c": torch.randn(2, 7)}
    dims = {"a": {1: "n"}, "b": {1: "m"}, "c": {1: Dim("k", min=2, max=64)}}
    session = export(PadOrCrop(), options=ExportOptions(dynamic_shapes=dims), **inputs)
    groups = {g.label: g for g in session.verify(edge_values=False).groups}
    assert groups["k"].derived is None and groups["k"].requested_range == (2, 64)
