"""A Cancel pressed while an analysis runs on the export worker is answered within a second:
the benchmark's timing loops (warm-up, batches, compared variants, each size of a sweep), the
profiler's runs and compare_intermediates' chunks check the token as they go, whatever the
budget asked for."""

from __future__ import annotations

import time

import pytest
import torch

import exporter
from exporter.events import CancelToken
from exporter.worker import submit_work

PRESS_AFTER = 0.3
ANSWER_WITHIN = 1.0


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.fc2(torch.relu(self.fc1(x))))


class Deep(torch.nn.Module):
    """Many nodes: one small onnxruntime chunk per node when ``max_bytes`` is tiny."""

    def __init__(self, layers: int = 60) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(16, 16) for _ in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def _exported(model: torch.nn.Module) -> exporter.Session:
    torch.manual_seed(0)
    session = exporter.export(model.eval(), torch.randn(4, 16),
                              options=exporter.ExportOptions(dynamic_shapes={"x": {0: "batch"}}))
    assert session.run().ok  # the export is done before the clock starts
    return session


def _cancel_after_a_while(start) -> tuple[object, float]:
    """Start the work, press Cancel after PRESS_AFTER seconds; (its result, seconds to answer)."""
    token = CancelToken()
    future = start(token)
    time.sleep(PRESS_AFTER)
    assert not future.done(), "the work ended before Cancel was pressed: it is too short to test anything"
    pressed = time.perf_counter()
    token.cancel()
    result = future.result(timeout=30)
    return result, time.perf_counter() - pressed


# Budgets of a minute: without checks inside the timing loops, the warm-up (a quarter of the
# budget at most) and one batch (a twentieth of it) alone run for seconds after the press.
LONG_ANALYSES = [
    ("benchmark", {"budget": 60.0}),
    ("benchmark", {"budget": 60.0, "eager": False}),
    ("compare", {"variants": ["threads=1", "level=basic"], "budget": 60.0}),
    ("benchmark_sweep", {"sizes": (2, 4, 8), "budget": 60.0}),
    ("profile", {"runs": 10_000_000}),
]


@pytest.mark.parametrize(("task", "options"), LONG_ANALYSES, ids=lambda v: v if isinstance(v, str) else "")
def test_a_long_analysis_submitted_to_the_worker_is_cancelled_within_a_second(task, options):
    session = _exported(Block())

    result, answered = _cancel_after_a_while(lambda token: session.submit(task, cancel=token, **options))

    assert str(result.status) == "cancelled"
    assert answered < ANSWER_WITHIN, f"{task} answered Cancel after {answered:.2f}s"
    assert result.seconds >= PRESS_AFTER * 0.8  # it was under way, not cancelled before it started
    assert task not in session.analyses  # a cancelled result is not kept


def test_a_streamed_compare_intermediates_on_the_worker_is_cancelled_within_a_second():
    session = _exported(Deep())
    session.compare_intermediates(max_bytes=1)  # the plan and interpreter built: the calls below are the loop

    result, answered = _cancel_after_a_while(
        lambda token: submit_work(session.compare_intermediates, cancel=token, max_bytes=1))

    assert result.status == "cancelled" and result.rows == ()
    assert answered < ANSWER_WITHIN, f"compare_intermediates answered Cancel after {answered:.2f}s"
    assert result.seconds >= PRESS_AFTER * 0.8
