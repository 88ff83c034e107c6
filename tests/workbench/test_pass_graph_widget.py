"""The Passes view draws a picked pass on the export worker (issue 26): picking returns at once,
the drawing shown stays while the next one is computed, the new one arrives, a Cancel keeps the
drawing shown, an error is said in the view and never raised. A real small export throughout;
the tests wait on the result, never on the clock."""

from __future__ import annotations

import threading

import pytest
import torch
from torch import nn

import exporter
from exporter.graphs.pass_graphs import pass_graphs
from exporter.worker import submit_work
from workbench.pass_graph_widget import PassGraphWidget

from widget_page import page_sends, sent_state

pytestmark = [pytest.mark.needs_dot, pytest.mark.usefixtures("dummy_comm")]


class Folded(nn.Module):
    """Constants the optimizer folds, and a Linear: several passes change the model."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.register_buffer("scale", torch.full((8,), 2.0))

    def forward(self, x):
        return torch.relu(self.fc(x) * (self.scale * 0.5 + 1.0))


@pytest.fixture(scope="module")
def session():
    torch.manual_seed(0)
    session = exporter.export(Folded().eval(), torch.randn(2, 8),
                              options=exporter.ExportOptions(dynamic_shapes={"x": {0: "batch"}}))
    return session.raise_for_status()


@pytest.fixture(scope="module")
def changing(session):
    """Two passes that changed the model (what the Stages tab's picker offers)."""
    found = [r.index for r in session.passes if r.ran and r.changes_model]
    assert len(found) >= 2, [r.label for r in session.passes]
    return found[:2]


def _hold_the_worker():
    """Block the export worker until the returned event is set: what a long replay does."""
    gate = threading.Event()
    submit_work(gate.wait, 120)
    return gate


def test_choosing_a_pass_returns_at_once_and_the_drawing_arrives_from_the_worker(session, changing):
    first, second = changing
    view = PassGraphWidget(pass_graphs(session, first))
    before, details = view.svg, view.details
    sent_state(view)
    gate = _hold_the_worker()
    try:
        job = view.show_pass(session, second)  # returns while the worker is busy: the kernel stays free
        assert view.computing == f"pass {second}" and view.status and not view.wait_pass(0)
        assert view.step is not None and view.step.record.index == first  # the drawing shown stays
        assert view.svg == before and view.details == details
        assert sent_state(view)["computing"] == f"pass {second}"  # the page shows "computing…" and Cancel
    finally:
        gate.set()
    assert view.wait_pass(120)
    assert job.step is view.step and not job.error and not job.cancelled
    assert view.step.record.index == second and view.computing == "" and view.status == ""
    expected = pass_graphs(session, second)
    assert view.step.added == expected.added and view.step.removed == expected.removed
    assert view.svg != before and set(view.highlight) == (
        {f"before-op-{n}" for n in expected.highlighted_before} | {f"after-op-{n}" for n in expected.highlighted_after})
    assert sent_state(view)["computing"] == ""


def test_a_cancel_keeps_the_drawing_shown_and_says_cancelled(session, changing):
    first, second = changing
    view = PassGraphWidget(pass_graphs(session, first))
    before, step = view.svg, view.step
    gate = _hold_the_worker()
    try:
        job = view.show_pass(session, second)
        page_sends(view, {"type": "cancel"})  # the Cancel button
        assert view.computing == "" and view.status == "cancelled" and job.cancelled
    finally:
        gate.set()
    assert view.wait_pass(120)
    submit_work(lambda: None).result(120)  # the cancelled job has ended on the worker
    assert job.done.is_set() and job.step is None
    assert view.step is step and view.svg == before and view.status == "cancelled"
    assert not view.cancel_pass()  # nothing computing any more


def test_a_pass_picked_while_another_is_computed_replaces_it(session, changing):
    first, second = changing
    view = PassGraphWidget()
    gate = _hold_the_worker()
    try:
        replaced = view.show_pass(session, first)
        latest = view.show_pass(session, second)
        assert replaced.cancelled and view.computing == f"pass {second}"
    finally:
        gate.set()
    assert view.wait_pass(120)
    submit_work(lambda: None).result(120)
    assert replaced.step is None and latest.step is view.step and view.step.record.index == second


def test_a_pass_that_cannot_be_drawn_is_said_in_the_view_and_nothing_is_raised(session, changing):
    first, _ = changing
    view = PassGraphWidget(pass_graphs(session, first))
    before = view.svg
    job = view.show_pass(session, len(session.passes) + 5)
    assert view.wait_pass(120)
    assert job.error and isinstance(job.exception, IndexError) and job.step is None
    assert view.message["kind"] == "error" and "out of range" in view.message["text"]
    assert view.svg == before and view.computing == ""


def test_steps_already_built_are_drawn_from_the_cache_without_a_replay(session, changing, monkeypatch):
    first, _ = changing
    cache = {first: pass_graphs(session, first)}
    monkeypatch.setattr("workbench.pass_graph_widget.pass_graphs",
                        lambda *a, **k: pytest.fail("replayed a step the cache holds"))
    view = PassGraphWidget()
    done: list = []
    view.show_pass(session, first, cache=cache, on_done=done.append)
    assert view.wait_pass(120)
    assert view.step is cache[first] and [j.step for j in done] == [cache[first]]


def test_the_stages_tab_picker_returns_at_once_and_the_drawing_arrives(session, changing):
    from workbench import Workbench

    stages = Workbench(session).wait().stages_view
    first, second = changing
    stages.pass_picker.value = first
    assert stages.wait_pass(120)
    drawn, caption = stages.pass_step, stages.pass_graphs.value
    assert drawn is not None and drawn.record.index == first and drawn.record.label in caption
    gate = _hold_the_worker()
    try:
        stages.pass_picker.value = second  # what picking it in the page does: returns while the worker is busy
        widget = stages.pass_widget
        assert widget is not None and widget.computing == f"pass {second}"
        assert stages.pass_step is drawn and stages.pass_graphs.value == caption  # the drawing shown stays
        assert widget.layout.display != "none"
    finally:
        gate.set()
    assert stages.wait_pass(120)
    assert stages.pass_step is not None and stages.pass_step.record.index == second
    assert stages.pass_step.record.label in stages.pass_graphs.value and stages.pass_view is widget.view


def test_a_cancel_in_the_stages_tab_puts_the_picker_back_on_the_pass_drawn(session, changing):
    from workbench import Workbench

    stages = Workbench(session).wait().stages_view
    first, second = changing
    stages.pass_picker.value = first
    assert stages.wait_pass(120)
    gate = _hold_the_worker()
    try:
        stages.pass_picker.value = second
        page_sends(stages.pass_widget, {"type": "cancel"})
    finally:
        gate.set()
    assert stages.wait_pass(120)
    submit_work(lambda: None).result(120)
    assert stages.pass_picker.value == first and stages.pass_step.record.index == first
