"""The quickstart tutorial (``notebooks/01_quickstart.ipynb``, as committed) in a real JupyterLab
and a real Chromium: Run All, no error in any cell, the workbench widget rendered with the
export's ONNX inputs and a passed verification, and the files the notebook writes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from harness import cell_errors, open_notebook, run_all, wait_for_widget

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "notebooks" / "01_quickstart.ipynb"
WIDGET = ".jp-Cell-outputArea .wb-workbench"


def _wait_for_text(page, selector: str, text: str, timeout: float = 120_000) -> str:
    """The text of ``selector`` once it contains ``text`` (textContent: JupyterLab does not lay
    out cells scrolled out of view, so their innerText can read empty)."""
    page.wait_for_function(
        "([selector, text]) => { const e = document.querySelector(selector);"
        " return e !== null && e.textContent.includes(text); }",
        arg=[selector, text],
        timeout=timeout,
    )
    return page.locator(selector).first.text_content()


def test_quickstart_runs_top_to_bottom_in_jupyterlab(lab, page, artifacts, failure_screenshot):
    failure_screenshot(page)
    shutil.copy(QUICKSTART, lab.root / QUICKSTART.name)
    open_notebook(page, lab, QUICKSTART.name)
    try:
        run_all(page, timeout=240_000)
    except Exception:  # noqa: BLE001 - Run All stops at a failing cell: say which error stopped it
        errors = "\n".join(cell_errors(page)) or "(no error output)"
        pytest.fail(f"Run All did not finish; error outputs:\n{errors}\nserver log:\n{lab.log_tail()}", pytrace=False)
    assert cell_errors(page) == []
    assert page.locator(".jp-Cell-outputArea [data-mime-type='application/vnd.jupyter.error']").count() == 0

    wait_for_widget(page, ".wb-workbench")
    page.locator(WIDGET).first.scroll_into_view_if_needed()  # the graphs and tables below push it up
    ports = _wait_for_text(page, f"{WIDGET} .wb-onnx-ports", "batch")
    assert "x" in ports and "16" in ports
    page.locator(f"{WIDGET} .lm-TabBar-tab", has_text="Verify").first.click()
    assert "Verification PASSED" in _wait_for_text(page, f"{WIDGET} .wb-verify-status", "Verification PASSED")

    page.get_by_text("x: ['batch', 16]").first.wait_for(state="visible")
    assert (lab.root / "out" / "tiny.onnx").is_file()
    assert (lab.root / "out" / "tiny_report.html").read_text().count("<svg") >= 1
    page.screenshot(path=str(artifacts / "quickstart-page.png"), full_page=True)
