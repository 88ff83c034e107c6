"""Every registered capture strategy, tried on the same tiny models."""

from __future__ import annotations

import pytest
import torch

import exporter
from exporter import STRATEGIES, Dim, ExportOptions, Session
from exporter.pipeline.capture import CaptureStrategy, get_strategy, strategy_names, suggested_fixes


class AddMul(torch.nn.Module):
    def forward(self, x, y):
        return (x + y) * y


@pytest.mark.parametrize("strategy", [cls.name for cls in STRATEGIES])
def test_each_strategy_captures_a_plain_model_with_a_named_dim(strategy, assert_matches_eager):
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    batch = Dim("batch")
    session = Session(AddMul(), (x, y), {}, ExportOptions(strategy=strategy, dynamic_shapes={"x": {0: batch}, "y": {0: batch}}))
    session.run()
    assert session.succeeded, session.summary()
    assert [a.strategy for a in session.attempts] == [strategy]
    assert session.strategy == strategy
    dims = [d.dim_param for d in session.model_proto.graph.input[0].type.tensor_type.shape.dim]
    assert dims[0] == "batch"
    assert_matches_eager(session, torch.randn(6, 4), torch.randn(6, 4))


@pytest.mark.parametrize("strategy", [cls.name for cls in STRATEGIES])
def test_each_strategy_reports_a_failure_as_an_attempt_not_an_exception(strategy):
    class Broken(torch.nn.Module):
        def forward(self, x):
            return x @ torch.randn(5, 5)  # (2, 3) @ (5, 5) cannot work

    session = Session(Broken(), (torch.randn(2, 3),), {}, ExportOptions(strategy=strategy))
    result = session.run()
    assert result.status == "failed"
    (attempt,) = session.attempts
    assert attempt.outcome == "failed" and attempt.strategy == strategy
    assert attempt.first_error_line and attempt.full_error


def test_registry_is_ordered_and_only_fx_symbolic_is_experimental():
    assert strategy_names() == ("nonstrict", "strict", "draft", "fx_symbolic")
    assert [cls.experimental for cls in STRATEGIES] == [False, False, False, True]
    assert all(issubclass(cls, CaptureStrategy) and cls.description for cls in STRATEGIES)
    assert get_strategy("draft").name == "draft"


def test_the_strategy_names_the_options_check_are_the_registry_s():
    from exporter.pipeline.names import STRATEGY_NAMES

    assert strategy_names() == STRATEGY_NAMES


def test_each_stage_declares_what_it_consumes_and_the_registry_is_in_that_order():
    from exporter.pipeline.stages import PIPELINE, STAGES

    assert STAGES == exporter.STAGES == ("capture", "decompose", "translate", "optimize")
    assert [stage.consumes for stage in PIPELINE] == [None, "capture", "decompose", "translate"]
    assert all(stage.produces for stage in PIPELINE)


def test_constraint_violation_stops_auto_instead_of_hiding_it_behind_a_fallback():
    """Only the strict capture torch.onnx.export falls back to is tried for a pinned dim
    (test_strict_after_rejection): here it pins it too, and the rejection stands."""
    class PinsDim(torch.nn.Module):
        def forward(self, x):
            return x.reshape(2, 6)

    session = Session(PinsDim(), (torch.randn(3, 4),), {}, ExportOptions(dynamic_shapes={"x": {0: Dim("rows")}}))
    session.run()
    outcomes = [(a.strategy, a.outcome) for a in session.attempts]
    assert outcomes == [("nonstrict", "failed"), ("strict", "failed"), ("draft", "skipped"), ("fx_symbolic", "skipped")]
    assert "rows" in str(session.failed_stage.error)


def test_a_range_narrowed_by_a_guard_tries_no_other_capture():
    class NeedsMoreThanFour(torch.nn.Module):
        def forward(self, x):
            return x * 2 if x.shape[0] > 4 else x + 1

    session = Session(NeedsMoreThanFour(), (torch.randn(6, 4),), {},
                      ExportOptions(dynamic_shapes={"x": {0: Dim("rows", min=1, max=64)}}))
    session.run()
    assert [a.outcome for a in session.attempts] == ["failed", "skipped", "skipped", "skipped"]


def test_suggested_fixes_are_parsed_from_a_torch_constraint_violation():
    message = (
        "Constraints violated (b)!\n  - Not all values of b ...\nSuggested fixes:\n"
        "  b = Dim('b', min=3)\n  b2 = b\n  d = 32\n\nThe error above occurred ..."
    )
    assert suggested_fixes(RuntimeError(message)) == ("b = Dim('b', min=3)", "b2 = b", "d = 32")
    assert suggested_fixes(RuntimeError("no fixes here")) == ()


class CastsItsHead(torch.nn.Module):
    """SwitchTransformers' router: ``self.classifier = self.classifier.to(self.dtype)`` in forward."""

    def __init__(self) -> None:
        super().__init__()
        self.head = torch.nn.Linear(4, 3)

    def forward(self, x):
        self.head = self.head.to(torch.float32)
        return self.head(x)


def test_a_forward_that_casts_a_submodule_to_its_own_dtype_exports_and_verifies(assert_matches_eager):
    model = CastsItsHead().eval()
    weight = model.head.weight
    session = Session(model, (torch.randn(2, 4),), {}, ExportOptions(dynamic_shapes={"x": {0: "batch"}}))
    session.run()
    assert session.succeeded, session.summary()
    assert [a.strategy for a in session.attempts] == ["nonstrict"]  # alone: "_apply(): Couldn't swap Linear.weight"
    assert session.verify().status == "passed"
    assert_matches_eager(session, torch.randn(5, 4))
    assert model.head.weight is weight
