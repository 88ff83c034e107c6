"""The one axis type: its display forms, parsing them back, and every place that keys on it
(guards, dim outcomes, fixes, dim groups, verify sizes=, benchmark_sweep dim=, errors)."""

from __future__ import annotations

import pytest
import torch

from exporter import AUTO, Axis, Dim, ExportOptions, Session, SpecError
from exporter.guards import Guard


def test_display_forms_come_from_the_axis_and_parse_back_to_it():
    axis = Axis("cache.0.key", 2)
    assert (axis.label, axis.dotted, str(axis)) == ("cache.0.key.shape[2]", "cache.0.key.2", "cache.0.key.shape[2]")
    for form in (axis.label, axis.dotted, ("cache.0.key", 2), ["cache.0.key", 2], axis, f"  {axis.dotted} "):
        assert Axis.parse(form) == axis
    assert Axis.of("x", 1) == Axis.of("x.1") == Axis("x", 1)


def test_an_axis_equals_its_path_index_pair_so_old_keys_keep_working():
    assert Axis("x", 0) == ("x", 0) and hash(Axis("x", 0)) == hash(("x", 0))
    assert {("x", 0): "batch"}[Axis("x", 0)] == "batch"
    assert sorted([Axis("y", 0), Axis("x", 1), Axis("x", 0)]) == [("x", 0), ("x", 1), ("y", 0)]
    path, index = Axis("x", 3)
    assert (path, index) == ("x", 3)


@pytest.mark.parametrize("bad", ["x", "x.first", "x.shape[a]", "", ("x",), ("x", -1), ("x", True), ("", 0), 3.5, None])
def test_parse_rejects_what_names_no_axis_with_the_accepted_forms(bad):
    with pytest.raises(ValueError, match=r"does not name an input axis; write 'x.shape\[0\]', 'x.0' or \('x', 0\)"):
        Axis.parse(bad)


def test_records_hold_axis_objects_even_when_built_from_pairs():
    guard = Guard("equality", "x.shape[0] == y.shape[0]", "Eq(s0, s1)", axes=(("x", 0), ("y", 0)))
    assert all(isinstance(a, Axis) for a in guard.axes)
    assert guard.involves("x", 0) and guard.involves(Axis("y", 0)) and guard.involves("y.0") and not guard.involves("x", 1)
    assert guard.to_dict()["axes"] == "x.0, y.0"


class AddsTwo(torch.nn.Module):
    def forward(self, x, y):
        return x + y


def test_session_tables_key_on_axis_objects():
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    session = Session(AddsTwo(), (x, y), {}, ExportOptions(dynamic_shapes={"x": {0: Dim("batch")}, "y": {0: AUTO}}))
    dims = session.dims
    row = dims[Axis("x", 0)]
    assert row is dims["x.shape[0]"] is dims["x.0"] is dims["x", 0]
    assert row.axis_key == Axis("x", 0) and row.name == "x.0" and row.equal_to == ("y.0",)
    assert all(isinstance(a, Axis) for g in session.guards for a in g.axes)
    with pytest.raises(KeyError):
        dims["x.shape[first]"]


def test_spec_errors_name_the_axis_by_its_label():
    with pytest.raises(SpecError) as caught:
        Session(AddsTwo(), (torch.randn(3, 4), torch.randn(3, 4)), {},
                ExportOptions(dynamic_shapes={"x": {0: Dim("b", min=5)}}))
    assert caught.value.axis_key == Axis("x", 0) and "input: x.shape[0]" in str(caught.value)


class TwoLayer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.fc(x).relu()


@pytest.fixture(scope="module")
def batch_session():
    torch.manual_seed(0)
    session = Session(TwoLayer().eval(), (torch.randn(3, 4),), {}, ExportOptions(dynamic_shapes={"x": {0: Dim("batch")}}))
    session.run()
    return session


def test_verify_sizes_accept_an_axis_as_the_key_of_its_dim_group(batch_session):
    by_label = batch_session.verify(sizes={"batch": [5]}, locate=False)
    for key in (Axis("x", 0), "x.0", "x.shape[0]", ("x", 0)):
        result = batch_session.verify(sizes={key: [5]}, locate=False)
        assert result.groups[0].sizes == by_label.groups[0].sizes == (3, 5)
        assert [c.sizes for c in result.cases] == [c.sizes for c in by_label.cases]
    with pytest.raises(ValueError, match=r"'x.1'.*\['batch'\]"):
        batch_session.verify(sizes={"x.1": [5]})


def test_benchmark_sweep_and_benchmark_accept_an_axis_for_the_dim(batch_session):
    sweep = batch_session.benchmark_sweep(Axis("x", 0), (1, 2), budget=0.01, min_runs=3, threads=1, eager=False)
    assert sweep.dim == "batch" and sweep.sizes == (1, 2) and not sweep.error
    point = batch_session.benchmark(sizes={Axis("x", 0): 2}, budget=0.01, min_runs=3, threads=1, eager=False)
    assert point.ok and point.sizes == (("batch", 2),)
    with pytest.raises(ValueError, match="unknown dim"):
        batch_session.benchmark_sweep(Axis("x", 1), (1,))
