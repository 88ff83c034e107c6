"""A stage that runs long says so while it runs: notes to the observers, one logged warning
past the budget, nothing for a quick stage."""

from __future__ import annotations

import logging
import time

import torch

from exporter import ExportOptions, Session
from exporter.events import Observer
from exporter.pipeline import watch


class SlowForward(torch.nn.Module):
    def forward(self, x):
        time.sleep(0.6)  # capture runs this: the stage takes at least as long
        return x * 2


class Notes(Observer):
    def __init__(self):
        self.notes: list[tuple[str, str]] = []

    def on_progress(self, task, done, total, note=""):
        self.notes.append((task, note))


def test_a_long_capture_tells_the_observer_how_long_it_has_run_and_warns_once_past_its_budget(monkeypatch, caplog):
    monkeypatch.setattr(watch, "NOTE_EVERY", 0.15)
    monkeypatch.setattr(watch, "BUDGET", 0.3)
    notes = Notes()
    session = Session(SlowForward(), (torch.randn(2, 3),), {}, ExportOptions(dynamic_shapes={"x": {0: "batch"}}))

    with caplog.at_level(logging.WARNING, logger="exporter"):
        result = session.run("capture", observer=notes)

    assert result.ok
    capture_notes = [note for task, note in notes.notes if task == "capture"]
    assert capture_notes and capture_notes[0].startswith("capture has run for 0 s; still working")
    assert any("past its 0 s budget" in note for note in capture_notes)
    warnings = [r.getMessage() for r in caplog.records if "past its" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].startswith("capture has run for")


def test_the_command_lines_progress_bar_prints_a_note_without_a_count_as_one_line(capsys):
    from exporter.events import ProgressBarObserver

    ProgressBarObserver().on_progress("capture", 0, 0, watch.running_note("capture", 31))
    assert capsys.readouterr().err == "capture: capture has run for 31 s; still working (Cancel or Ctrl+C stops it)\n"


def test_a_quick_stage_says_nothing():
    notes = Notes()
    with watch.watched("translate", notes, every=5.0):
        time.sleep(0.05)
    assert notes.notes == []


def test_the_watch_stops_with_its_stage():
    notes = Notes()
    with watch.watched("optimize", notes, every=0.05, budget=100):
        time.sleep(0.18)
    heard = len(notes.notes)
    time.sleep(0.2)
    assert heard >= 2 and len(notes.notes) == heard
