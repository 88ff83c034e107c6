"""Marks every test here ``notebooks`` (``-m "not notebooks"`` skips the kernels)."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_configure(config):
    config.addinivalue_line("markers", "notebooks: executes or checks the tutorial notebooks (tests/notebooks)")


def pytest_collection_modifyitems(items):
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.notebooks)
