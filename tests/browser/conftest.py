"""A real JupyterLab 4 server and a real Chromium, driven by Playwright, for widget tests.

Module-scoped: one server and one browser per test module (one ``sync_playwright()`` per
process at a time). The server runs on 127.0.0.1 with its own config, runtime, settings and
workspace directories and a temporary root holding the notebooks the test writes, the news
toast disabled, and is stopped with SIGTERM to its own PID (it shuts its kernels down).

Chromium is Debian's (``/usr/bin/chromium``, or ``$WB_CHROMIUM``): ``playwright install``
cannot download browsers here. Without chromium, playwright or jupyterlab the tests are
skipped, except in CI (``$CI`` set), where they fail.

Screenshots go to ``$WB_ARTIFACTS`` or ``tests/browser/artifacts/`` (git-ignored).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness import CHROMIUM, CHROMIUM_FLAGS, new_page, require_prerequisites, start_lab, stop_lab

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def artifacts() -> Path:
    """Where screenshots go: ``$WB_ARTIFACTS`` or ``tests/browser/artifacts/``."""
    path = Path(os.environ.get("WB_ARTIFACTS") or HERE / "artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server whose root is an empty temporary directory (write notebooks there)."""
    require_prerequisites()
    server = start_lab(tmp_path_factory.mktemp("lab"))
    try:
        yield server
    finally:
        stop_lab(server.process)


@pytest.fixture(scope="module")
def browser():
    """Headless Debian Chromium through Playwright, with a fresh profile."""
    require_prerequisites()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def page(lab, browser):
    """A page in a fresh browser context, once the server answers."""
    with new_page(browser, lab, width=1400, height=1000, timeout=30_000) as page:
        yield page


@pytest.fixture
def failure_screenshot(request, artifacts):
    """Register a page: if the test fails, a full-page screenshot is saved beside the artifacts."""
    pages = []
    yield pages.append
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        for i, page in enumerate(pages):
            try:
                page.screenshot(path=str(artifacts / f"FAILED-{request.node.name}-{i}.png"), full_page=True)
            except Exception:  # noqa: BLE001 - the test's own failure is what matters
                pass


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report

