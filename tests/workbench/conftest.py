"""Fixtures for widget tests that run without a front end."""

from __future__ import annotations

import pytest
from widget_page import DummyComm


@pytest.fixture
def dummy_comm(monkeypatch):
    """Widgets created in the test open a DummyComm instead of a kernel comm."""
    import ipywidgets.widgets.widget as widget_module

    monkeypatch.setattr(widget_module.comm, "create_comm", lambda *a, **k: DummyComm())
