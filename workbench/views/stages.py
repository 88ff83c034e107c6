"""The Stages tab: capture → decompose → translate → optimize → verify → benchmark, each with
its status, seconds and whether it came from the cache; every capture attempt; the error of a
failed stage with its hint and the user's source line; the ONNX inputs and outputs; buttons to
run the next step or everything. A failed run keeps the last good export's summary beside it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from ._html import badge, esc, failure_html, note, pre

__all__ = ["STEPS", "StagesView"]

STEPS = ("capture", "decompose", "translate", "optimize", "verify", "benchmark")


def _ports_html(title: str, ports: list[Any]) -> str:
    rows = "".join(f"<tr><td>{esc(p.kind)}</td><td><code>{esc(p.name)}</code></td><td>{esc(p.dtype)}</td>"
                   f"<td><code>{esc(p.shape_text)}</code></td></tr>" for p in ports)
    return f"<b>{esc(title)}</b><table class='wb-table'>{rows}</table>"


class StagesView:
    """Stage table, attempts, error, ONNX ports; ``on_run(until)`` is called by the buttons
    with a step name, or ``"next"``."""

    title = "Stages"

    def __init__(self, on_run: Callable[[str], None]) -> None:
        self._rows: dict[str, tuple[str, str, str, str]] = {}
        self._attempts: list[Any] = []
        self.table = widgets.HTML()
        self.table.add_class("wb-stages-table")
        self.attempts = widgets.HTML()
        self.error = widgets.HTML()
        self.error.add_class("wb-stages-error")
        self.ports = widgets.HTML()
        self.ports.add_class("wb-onnx-ports")
        self.last_good = widgets.HTML()
        self.next_button = widgets.Button(description="Run next step", icon="step-forward")
        self.all_button = widgets.Button(description="Run all", icon="play")
        self.next_button.add_class("wb-run-next")
        self.all_button.add_class("wb-run-all")
        self.next_button.on_click(lambda _: on_run("next"))
        self.all_button.on_click(lambda _: on_run("benchmark"))
        self.widget = widgets.VBox([widgets.HBox([self.next_button, self.all_button]), self.table,
                                    self.attempts, self.error, self.ports, self.last_good])
        self.reset()

    # -- live events ---------------------------------------------------------------------------
    def reset(self) -> None:
        self._rows = {step: ("not run", "", "", "") for step in STEPS}
        self._attempts = []
        self._draw()

    def started(self, stage: str) -> None:
        if stage == "capture":
            self._attempts = []
            self.attempts.value = ""
        self._rows[stage] = ("running", "", "", "")
        self._draw()

    def ended(self, result: Any) -> None:
        detail = result.detail or (result.failure.first_line if result.failure else "")
        self._rows[result.name] = (str(result.status), f"{result.seconds:.3f}", "yes" if result.cached else "no", detail)
        if result.name == "capture" and result.attempts:
            self._attempts = list(result.attempts)
            self._draw_attempts()
        self._draw()

    def attempt(self, attempt: Any) -> None:
        self._attempts.append(attempt)
        self._draw_attempts()

    def analysis(self, name: str, status: str, seconds: float | None, detail: str) -> None:
        """The row of ``verify`` or ``benchmark``."""
        self._rows[name] = (status, "" if seconds is None else f"{seconds:.3f}", "", detail)
        self._draw()

    # -- whole session ---------------------------------------------------------------------------
    def show(self, session: Any, last_good: Any = None, ports: list[Any] | None = None,
             last_good_ports: list[Any] | None = None) -> None:
        """Every stage the session has run (others "not run"), its failure, its ONNX ports;
        beside a failure, the last session that exported (``last_good``) and its ports."""
        for stage in STEPS[:4]:
            self._rows[stage] = ("not run", "", "", "")
        for result in session.stages:
            self.ended(result)
        failed = session.failed_stage
        self.error.value = failure_html(failed.failure, f"{failed.name} failed") if failed is not None else ""
        self.ports.value = _ports_html("ONNX model", ports) if ports else ""
        if failed is not None and last_good is not None and last_good is not session:
            self.last_good.value = ("<b>last good export</b>" + pre(last_good.summary())
                                    + (_ports_html("its ONNX model", last_good_ports) if last_good_ports else ""))
        else:
            self.last_good.value = ""

    def _draw(self) -> None:
        rows = "".join(
            f"<tr><td>{esc(stage)}</td><td>{badge(status)}</td><td>{esc(seconds)}</td><td>{esc(cached)}</td>"
            f"<td>{esc(detail)}</td></tr>"
            for stage, (status, seconds, cached, detail) in self._rows.items()
        )
        self.table.value = ("<table class='wb-table'><tr><th>stage</th><th>status</th><th>seconds</th>"
                            f"<th>cached</th><th>detail</th></tr>{rows}</table>")

    def _draw_attempts(self) -> None:
        if not self._attempts:
            self.attempts.value = ""
            return
        rows = "".join(
            f"<tr><td>{esc(a.strategy)}</td><td>{badge(a.outcome)}</td><td>{a.seconds:.3f}</td>"
            f"<td>{esc(a.first_error_line or '')}</td></tr>"
            for a in self._attempts
        )
        self.attempts.value = (f"<b>capture attempts</b> {note('(each strategy tried, in order)')}"
                               f"<table class='wb-table'><tr><th>strategy</th><th>outcome</th><th>seconds</th>"
                               f"<th>error</th></tr>{rows}</table>")
