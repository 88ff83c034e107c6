"""Shared test helpers: tiny models and an eager-vs-onnxruntime check."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def flat_outputs(value):
    """Eager outputs flattened to numpy arrays, in pytree order (as ONNX outputs are)."""
    import torch
    from torch.utils._pytree import tree_leaves

    return [leaf.detach().numpy() for leaf in tree_leaves(value) if isinstance(leaf, torch.Tensor)]


def assert_onnx_matches_eager(session, *args, rtol=1e-4, atol=1e-5, **kwargs):
    """Run the session's ONNX model in onnxruntime and the module in eager on the same
    inputs; assert every output matches."""
    import torch

    with torch.no_grad():
        expected = flat_outputs(session.model(*args, **kwargs))
    actual = session.run_onnx(*args, **kwargs)
    assert len(actual) == len(expected), (len(actual), len(expected))
    for got, want in zip(actual, expected):
        assert got.shape == want.shape, (got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


@pytest.fixture(scope="session")
def ipython_shell():
    """IPython's test shell, one per test process (``globalipapp.get_ipython`` imported by
    name returns None once another test has started it)."""
    from IPython.testing import globalipapp

    globalipapp.start_ipython()
    return globalipapp.get_ipython()


@pytest.fixture
def assert_matches_eager():
    return assert_onnx_matches_eager


def pytest_runtest_setup(item):
    """``@pytest.mark.needs_dot`` tests lay out graphs with Graphviz's ``dot`` (Debian package
    ``graphviz``): skipped where it is missing, except in CI (``$CI`` set), which installs it."""
    if item.get_closest_marker("needs_dot") and shutil.which("dot") is None and not os.environ.get("CI"):
        pytest.skip("needs Graphviz's dot: apt-get install graphviz (.ci/run installs it)")


TESTS = Path(__file__).resolve().parent
DIRECTORY_MARKERS = ("browser", "notebooks")  # tests/<name>/ tests are marked <name>: -m "not browser"


def pytest_collection_modifyitems(items):
    """Mark tests/<name>/ tests <name>; under pytest-xdist (``-n 2 --dist loadgroup``, the
    README's command) each of those directories runs on one worker, one test at a time: one
    JupyterLab and Chromium at once, one local Ray cluster at once (the notebooks' and
    ``test_sweep.py``'s, marked ``xdist_group("notebooks")``)."""
    for item in items:
        parts = Path(str(item.fspath)).resolve().relative_to(TESTS).parts
        if len(parts) > 1 and parts[0] in DIRECTORY_MARKERS:
            item.add_marker(getattr(pytest.mark, parts[0]))
            item.add_marker(pytest.mark.xdist_group(parts[0]))
