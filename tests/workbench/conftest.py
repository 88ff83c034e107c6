"""Fixtures for widget tests that run without a front end."""

from __future__ import annotations

import pytest


class DummyComm:
    """Records what a widget sends to the page (ipywidgets' tests/utils.py pattern)."""

    comm_id = "a-b-c-d"
    kernel = "Truthy"

    def __init__(self, *args, **kwargs):
        self.messages: list[dict] = []

    def open(self, *args, **kwargs):
        pass

    def on_msg(self, *args, **kwargs):
        pass

    def send(self, data=None, *args, **kwargs):
        self.messages.append(data)

    def close(self, *args, **kwargs):
        pass


@pytest.fixture
def dummy_comm(monkeypatch):
    """Widgets created in the test open a DummyComm instead of a kernel comm."""
    import ipywidgets.widgets.widget as widget_module

    monkeypatch.setattr(widget_module.comm, "create_comm", lambda *a, **k: DummyComm())
