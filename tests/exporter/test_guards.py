"""Guards with provenance: each shape guard torch adds during capture, in symbol and input
terms, with its kind and the user's exact file, line and code, for both capture strategies."""

from __future__ import annotations

import inspect
import re

import pytest
import torch

from exporter import AUTO, Dim, ExportOptions, Guards, Session
from exporter.guards import EQUALITY, GUARD, RUNTIME_ASSERT, SPECIALIZATION, axis_of_source
from exporter.inputs import bind_inputs

STRATEGIES = ["nonstrict", "strict"]


def line_of(obj, text: str) -> int:
    lines, start = inspect.getsourcelines(obj)
    return start + next(i for i, line in enumerate(lines) if text in line)


class BranchOnBatch(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] > 2:
            return x * 2
        return x


class Broadcast(torch.nn.Module):
    def forward(self, x, y):
        return x + y


class PinnedWidth(torch.nn.Module):
    def forward(self, x):
        if x.shape[1] == 4:
            return x * 2
        return x


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
        __file__, line_of(BranchOnBatch, "if x.shape[0] > 2:"), "forward", "if x.shape[0] > 2:"
    )
    assert guard.source == f"{__file__}:{guard.line}: if x.shape[0] > 2:"
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
    assert len(set(seen)) == 1 and seen[0][0] == __file__


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
