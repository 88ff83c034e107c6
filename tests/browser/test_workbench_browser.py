"""The workbench in a real JupyterLab and a real Chromium: what only a browser shows.

A notebook written by the test loads the extension, defines a tiny model and runs
``%onnx_export --dynamic x.0=batch model(x)``; the test then picks STATIC for ``x`` axis 0 in
the page, as a user would, and waits until that row's result says ``static``.

Set ``WB_UPDATE_DOCS=1`` to also write the cropped widget screenshot to ``docs/workbench.png``.
"""

from __future__ import annotations

import os
from pathlib import Path

from harness import cell_errors, open_notebook, run_all, wait_for_widget, write_notebook

REPO = Path(__file__).resolve().parents[2]

CELLS = [
    "%load_ext workbench",
    "import torch\n"
    "\n"
    "class TinyModel(torch.nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.linear = torch.nn.Linear(4, 3)\n"
    "\n"
    "    def forward(self, x):\n"
    "        return torch.relu(self.linear(x)) * 2\n"
    "\n"
    "model = TinyModel().eval()\n"
    "x = torch.randn(3, 4)",
    "%onnx_export --dynamic x.0=batch model(x)",
]

WIDGET = ".jp-Cell-outputArea .wb-workbench"
RESULT = ".jp-Cell-outputArea .wb-dim-result-x-0"
POLICY = ".jp-Cell-outputArea .wb-axis-x-0"


def _show_dims_tab(page) -> None:
    tab = page.locator(f"{WIDGET} .lm-TabBar-tab", has_text="Dims").first
    tab.click()
    page.locator(POLICY).first.wait_for(state="visible")


def _choose(page, policy: str) -> None:
    """Pick a policy in the axis control: a Dropdown (``<select>``) or ToggleButtons."""
    control = page.locator(POLICY).first
    select = control.locator("select")
    if control.evaluate("e => e.tagName") == "SELECT":
        control.select_option(label=policy)
    elif select.count():
        select.first.select_option(label=policy)
    else:
        control.get_by_role("button", name=policy, exact=True).click()


def _wait_for_result(page, word: str, timeout: float = 60_000) -> str:
    page.wait_for_function(
        "([selector, word]) => { const e = document.querySelector(selector);"
        " return e !== null && e.innerText.trim().startsWith(word); }",
        arg=[RESULT, word],
        timeout=timeout,
    )
    return page.locator(RESULT).first.inner_text().strip()


def test_choosing_static_for_an_axis_in_the_page_recaptures_and_shows_static(lab, page, artifacts, failure_screenshot):
    failure_screenshot(page)
    write_notebook(lab.root, "workbench.ipynb", CELLS)
    open_notebook(page, lab, "workbench.ipynb")
    run_all(page)
    assert cell_errors(page) == []
    wait_for_widget(page, ".wb-workbench")
    _show_dims_tab(page)

    before = _wait_for_result(page, "dynamic")
    assert before.startswith("dynamic batch [")
    if os.environ.get("WB_UPDATE_DOCS"):  # the README's picture: the first export done, batch dynamic
        page.wait_for_function("() => (document.querySelector('.wb-job-status') || {}).innerText?.startsWith('done')")
        (REPO / "docs").mkdir(exist_ok=True)
        page.locator(WIDGET).first.screenshot(path=str(REPO / "docs" / "workbench.png"))

    _choose(page, "STATIC")
    after = _wait_for_result(page, "static")

    assert after == "static 3"
    widget = page.locator(WIDGET).first
    page.screenshot(path=str(artifacts / "workbench-page.png"), full_page=True)
    widget.screenshot(path=str(artifacts / "workbench.png"))
