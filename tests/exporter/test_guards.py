"""Guards with provenance: each shape guard torch adds during capture, in symbol and input
terms, with its kind and the user's exact file, line and code, for both capture strategies."""

from __future__ import annotations

import inspect
import re

import pytest
import torch

from exporter import AUTO, Dim, ExportOptions, Guards, Session
from exporter.guards import EQUALITY, GUARD, RUNTIME_ASSERT, SPECIALIZATION, axes_in_text, axis_of_source
from exporter.inputs import bind_inputs
from shape_models import STRATEGIES, BranchOnBatch, PinnedWidth, line_of

class Broadcast(torch.nn.Module):
    def forward(self, x, y):
        return x + y


class DataDependent(torch.nn.Module):
    def forward(self, x, n):
        k = n.item()
        torch._check(k >= 2)
        torch._check(k <= x.shape[0])
        return x[:k] * 2


def session(model, *args, strategy="nonstrict", **dynamic_shapes):
    return Session(model, args, options=ExportOptions(strategy=strategy, dynamic_shapes=dynamic_shapes or None))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_branch_guard_is_reported_with_its_exact_user_line(strategy):
    guards = session(BranchOnBatch(), torch.randn(5, 3), strategy=strategy, x={0: AUTO}).guards
    (guard,) = guards
    assert guard.kind == GUARD
    assert guard.expression == "x.shape[0] > 2"
    assert re.fullmatch(r"s\d+ > 2", guard.symbolic)
    assert guard.axes == (("x", 0),)
    assert (guard.file, guard.line, guard.function, guard.code) == (
        inspect.getsourcefile(BranchOnBatch), line_of(BranchOnBatch, "if x.shape[0] > 2:"), "forward", "if x.shape[0] > 2:"
    )
    assert guard.source == f"{inspect.getsourcefile(BranchOnBatch)}:{guard.line}: if x.shape[0] > 2:"
    assert guard.strategy == guards.strategy == strategy


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_broadcast_is_an_equality_between_the_two_dims(strategy):
    guards = session(Broadcast(), torch.randn(4, 3), torch.randn(4, 3), strategy=strategy, x={0: AUTO}, y={0: AUTO}).guards
    (guard,) = guards.of_kind(EQUALITY)
    assert guard.expression == "x.shape[0] == y.shape[0]"
    assert re.fullmatch(r"s\d+ == s\d+", guard.symbolic)
    assert guard.axes == (("x", 0), ("y", 0))
    assert (guard.line, guard.code) == (line_of(Broadcast, "return x + y"), "return x + y")
    assert guards.for_axis("y", 0) == (guard,)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_eq_4_is_a_specialization_with_its_value(strategy):
    guards = session(PinnedWidth(), torch.randn(3, 4), strategy=strategy, x={0: AUTO, 1: AUTO}).guards
    (guard,) = guards
    assert (guard.kind, guard.value, guard.expression) == (SPECIALIZATION, 4, "x.shape[1] == 4")
    assert guard.line == line_of(PinnedWidth, "if x.shape[1] == 4:")


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_torch_check_on_a_data_dependent_size_is_a_runtime_assert(strategy):
    guards = session(DataDependent(), torch.randn(5, 3), torch.tensor(3), strategy=strategy, x={0: AUTO}).guards
    asserts = guards.of_kind(RUNTIME_ASSERT)
    assert [g.code for g in asserts] == ["torch._check(k >= 2)", "torch._check(k <= x.shape[0])"]
    assert re.fullmatch(r"u\d+ <= x\.shape\[0\]", asserts[1].expression)
    assert asserts[1].axes == (("x", 0),) and asserts[0].axes == ()


def test_guards_keep_their_user_lines_across_repeated_exports_in_one_process():
    seen = []
    for strategy in ["nonstrict", "strict", "nonstrict", "strict"]:
        (guard,) = session(BranchOnBatch(), torch.randn(5, 3), strategy=strategy, x={0: AUTO}).guards
        seen.append((guard.file, guard.line, guard.code))
    assert len(set(seen)) == 1 and seen[0][0] == inspect.getsourcefile(BranchOnBatch)


def test_a_rejected_spec_keeps_the_guards_that_caused_the_rejection():
    rejected = session(BranchOnBatch(), torch.randn(5, 3), x={0: Dim("n", max=10)})
    assert rejected.run("capture").status == "failed"
    (guard,) = rejected.guards
    assert guard.expression == "x.shape[0] > 2" and guard.line == line_of(BranchOnBatch, "if x.shape[0] > 2:")


def test_to_frame_has_one_row_per_guard_in_both_forms():
    frame = session(Broadcast(), torch.randn(4, 3), torch.randn(4, 3), x={0: AUTO}, y={0: AUTO}).guards.to_frame()
    assert list(frame.columns) == ["kind", "expression", "symbolic", "axes", "file", "line", "code", "function", "strategy"]
    row = frame.iloc[0]
    assert (row["kind"], row["expression"], row["axes"], row["code"]) == ("equality", "x.shape[0] == y.shape[0]", "x.0, y.0", "return x + y")
    assert Guards().to_frame().empty


def test_axis_of_source_maps_nonstrict_strict_and_nested_sources():
    class Nested(torch.nn.Module):
        def forward(self, x, cache, *, mask=None):
            return x

    bound = bind_inputs(Nested(), (torch.ones(2, 3), [{"key": torch.ones(2, 4)}]), {"mask": torch.ones(2)})
    assert axis_of_source("L['x'].size()[1]", bound) == ("x", 1)
    assert axis_of_source("L['cache'][0]['key'].size()[1]", bound) == ("cache.0.key", 1)
    assert axis_of_source("L['mask'].size()[0]", bound) == ("mask", 0)
    assert axis_of_source("L['flat_args'][1].size()[0]", bound) == ("cache.0.key", 0)
    assert axis_of_source("inputs['x'].shape[0]", bound) == ("x", 0)
    assert axis_of_source("L['x'].stride()[0]", bound) is None
    assert axis_of_source("L['nope'].size()[0]", bound) is None


class VarPositional(torch.nn.Module):
    def forward(self, x, *args):
        if args[0].shape[0] > 2:
            return x * 2
        return x


Pair = __import__("collections").namedtuple("Pair", "a b")


class TakesPair(torch.nn.Module):
    def forward(self, nt):
        if nt.b.shape[0] > 2:
            return nt.a * 2
        return nt.a


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_guard_on_a_var_positional_input_names_that_input(strategy):
    exported = Session(
        VarPositional(), (torch.randn(3, 2), torch.randn(5, 2)),
        options=ExportOptions(strategy=strategy, dynamic_shapes={"args": ({0: AUTO},)}),
    )
    (guard,) = exported.guards
    assert (guard.expression, guard.axes) == ("args.0.shape[0] > 2", (("args.0", 0),))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_guard_on_a_namedtuple_field_names_the_field(strategy):
    exported = Session(
        TakesPair(), (Pair(torch.randn(3), torch.randn(5)),),
        options=ExportOptions(strategy=strategy, dynamic_shapes={"nt.b": {0: AUTO}}),
    )
    (guard,) = exported.guards
    assert (guard.expression, guard.axes) == ("nt.b.shape[0] > 2", (("nt.b", 0),))


def test_input_sources_map_every_torch_source_form_to_its_input():
    from exporter.guards import input_sources

    class Everything(torch.nn.Module):
        def forward(self, x, nt, *args, **kw):
            return x

    bound = bind_inputs(
        Everything(),
        (torch.ones(2), Pair(torch.ones(3), [torch.ones(4)]), torch.ones(5), {"k": torch.ones(6)}),
        {"y": torch.ones(7), "z": 3},
    )
    assert bound.paths == ("x", "nt.a", "nt.b.0", "args.0", "args.1.k", "y")
    sources = input_sources(bound)
    for source, path in {
        "L['x']": "x", "L['nt'].a": "nt.a", "L['nt'].b[0]": "nt.b.0", "L['args'][0]": "args.0",
        "L['args'][1]['k']": "args.1.k", "L['kw']['y']": "y", "inputs['kw']['y']": "y",
        "L['flat_args'][5]": "y", "L['flat_args'][2]": "nt.b.0",
    }.items():
        assert sources[source] == path, source
    assert axis_of_source("L['args'][0].size()[0]", bound) == ("args.0", 0)
    assert axis_of_source("L['kw']['y'].shape[0]", bound) == ("y", 0)
    assert axis_of_source("L['nt'].b[0].size()[0]", bound) == ("nt.b.0", 0)
    assert axis_of_source("L['kw']['z'].size()[0]", bound) is None  # not a tensor
    assert axes_in_text("Not all values of L['nt'].b[0].size()[0] = ... L['kw']['y'].shape[0]", bound) == [
        ("nt.b.0", 0), ("y", 0)
    ]


def test_verify_matches_guard_text_by_the_same_sources():
    from exporter.guards import input_sources
    from exporter.cases.grouping import _source_patterns

    class TakesArgs(torch.nn.Module):
        def forward(self, x, *args):
            return x

    bound = bind_inputs(TakesArgs(), (torch.ones(2), torch.ones(3)), {})
    patterns = _source_patterns(input_sources(bound), "args.0", 0)
    assert "L['args'][0].size()[0]" in patterns and "L['flat_args'][1].size()[0]" in patterns
    assert not any(p.startswith("L['x']") for p in _source_patterns(input_sources(bound), "args.0", 0))
