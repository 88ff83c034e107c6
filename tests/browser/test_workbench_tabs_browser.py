"""Every tab of the workbench read as a person reads it: a real JupyterLab 4 and Chromium at a
1000 px wide window with the file browser open (a ~570 px pane), a small MLP and a model
whose dim spec torch rejects.

Per tab: nothing inside the widget is wider than its pane, no table row is taller than 130 px (a verdict wraps in its cell, up to about six lines),
no ``None``/``nan``/``L['``/``e+00``/``Traceback`` is visible; the rejected spec is said once
and only its axis says "failed"; Cancel looks disabled when idle; Copy puts the spec code on
the clipboard. A screenshot of each tab goes to the artifacts (``WB_UPDATE_DOCS=1``: also to
``docs/tab-*.png``, the README's pictures).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from harness import new_page, run_workbench_notebook, screenshot_whole

REPO = Path(__file__).resolve().parents[2]

CELLS = [
    "%load_ext workbench",
    "import torch\n"
    "\n"
    "class MLP(torch.nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))\n"
    "\n"
    "    def forward(self, x):\n"
    "        return self.net(x)\n"
    "\n"
    "class Branchy(torch.nn.Module):\n"
    "    def forward(self, x):\n"
    "        if x.shape[1] > 4:\n"
    "            return x * 2\n"
    "        return x + 1\n"
    "\n"
    "mlp, branchy = MLP().eval(), Branchy()\n"
    "x, xb = torch.randn(8, 16), torch.randn(2, 8, 3)",
    "%onnx_export --dynamic x.0=batch -o s mlp(x)",
    "%onnx_export --dynamic x.1=seq:1:512 -o r branchy(xb)",
]

TABS = ("Stages", "Dims", "Guards", "Graphs", "Verify", "Benchmark")
FORBIDDEN = [r"\bNone\b", r"\bnan\b", r"L\['", r"e\+00", r"Traceback"]
TORCH_SENTENCE = "satisfy the generated guard"


@pytest.fixture(scope="module")
def narrow_page(lab, browser):
    """A 1000 px wide page with clipboard access, once the server answers."""
    with new_page(browser, lab, width=1000, height=900, timeout=60_000, clipboard=True) as page:
        yield page


def _widget(page, index: int):
    return page.locator(".jp-Cell-outputArea .wb-workbench").nth(index)


def _wait_idle(page, index: int, timeout: float = 180_000) -> str:
    """Wait until widget ``index``'s job bar says the job is over (done / failed / cancelled)."""
    page.wait_for_function(
        """(i) => { const w = document.querySelectorAll('.jp-Cell-outputArea .wb-workbench')[i];
                   const s = w && w.querySelector('.wb-job-status');
                   const c = w && w.querySelector('.wb-cancel');
                   return s && c && c.disabled && /^(done|.* failed|cancelled|idle)/.test(s.innerText.trim()); }""",
        arg=index, timeout=timeout)
    return _widget(page, index).locator(".wb-job-status").inner_text()


def _open_tab(page, index: int, title: str) -> None:
    widget = _widget(page, index)
    widget.locator(".lm-TabBar-tab", has_text=title).first.click()
    widget.scroll_into_view_if_needed()
    page.wait_for_timeout(300)  # the tab's layout settles (a frame or two)


def _measure(page, index: int) -> dict:
    """Overflow of the visible tab panel and the output area, tall rows, the visible text."""
    return page.evaluate(
        """(i) => {
            const w = document.querySelectorAll('.jp-Cell-outputArea .wb-workbench')[i];
            const panels = [...w.querySelectorAll('.widget-tab-contents > .lm-Widget, .lm-TabPanel-stackedPanel > .lm-Widget')]
                .filter(p => !p.classList.contains('lm-mod-hidden') && p.offsetParent !== null);
            const area = w.closest('.jp-OutputArea-output') || w.parentElement;
            const wide = [];
            for (const el of [...panels, area, w]) {
                if (el.scrollWidth > el.clientWidth + 1) {
                    const edge = el.getBoundingClientRect().right;
                    const culprit = [...el.querySelectorAll('*')].filter(d => d.getBoundingClientRect().right > edge + 1)
                        .map(d => `${d.tagName}.${String(d.className).slice(0, 40)} ${Math.round(d.getBoundingClientRect().width)}px`)
                        .slice(0, 3);
                    wide.push(`${el.className.slice(0, 60)}: ${el.scrollWidth} > ${el.clientWidth} (${culprit.join('; ')})`);
                }
            }
            const rows = [...w.querySelectorAll('tr')].filter(r => r.offsetParent !== null)
                .map(r => [Math.round(r.getBoundingClientRect().height), r.innerText.slice(0, 80)])
                .filter(([h]) => h > 130);
            return {wide, rows, text: w.innerText, pane: panels.length ? panels[0].clientWidth : 0};
        }""",
        index)


def _check_readable(page, index: int, tab: str) -> str:
    seen = _measure(page, index)
    assert seen["wide"] == [], f"{tab}: wider than the pane: {seen['wide']}"
    assert seen["rows"] == [], f"{tab}: rows taller than 130 px: {seen['rows']}"
    for pattern in FORBIDDEN:
        found = re.findall(rf".{{0,40}}{pattern}.{{0,40}}", seen["text"])
        assert not found, f"{tab}: {pattern!r} visible: {found}"
    return seen["text"]


def _shot(page, index: int, name: str, artifacts: Path) -> None:
    path = artifacts / f"tab-{name}.png"
    screenshot_whole(page, _widget(page, index), path)
    if os.environ.get("WB_UPDATE_DOCS"):
        shutil.copy(path, REPO / "docs" / path.name)


def test_every_tab_reads_at_a_glance_in_a_narrow_pane(lab, narrow_page, artifacts, failure_screenshot):
    page = narrow_page
    failure_screenshot(page)
    run_workbench_notebook(page, lab, "tabs.ipynb", CELLS)
    page.locator(".jp-Cell-outputArea .wb-workbench").nth(1).wait_for(state="visible")
    assert _wait_idle(page, 0).startswith("done")
    _wait_idle(page, 1)

    # Cancel looks disabled when idle: grey, default cursor.
    style = _widget(page, 0).locator(".wb-cancel").evaluate(
        "b => { const s = getComputedStyle(b); return [s.cursor, s.backgroundColor, b.disabled]; }")
    assert style[2] is True and style[0] != "pointer", style
    assert "255, 152, 0" not in style[1] and "245, 124, 0" not in style[1], style  # not the orange 'warning'

    # The MLP: run the benchmark tab's analyses, then read every tab.
    _open_tab(page, 0, "Benchmark")
    for button in (".wb-run-benchmark", ".wb-run-sweep", ".wb-run-compare"):
        _widget(page, 0).locator(button).click()
        page.wait_for_timeout(500)
        assert _wait_idle(page, 0, timeout=300_000).startswith("done")
    compare = _widget(page, 0).locator(".wb-run-compare")
    assert compare.evaluate("b => b.scrollWidth <= b.clientWidth + 1"), "the Compare variants label is clipped"
    status = _widget(page, 0).locator(".wb-job-status").inner_text()
    assert not re.search(r"\d+/\d+", status), f"status line stuck at progress: {status!r}"

    for tab in TABS:
        _open_tab(page, 0, tab)
        if tab == "Guards":
            page.wait_for_timeout(1500)  # charts are drawn when the tab is shown
        text = _check_readable(page, 0, tab)
        if tab == "Guards":
            assert text.count("no shape guards") <= 1, text
        if tab == "Stages":
            assert "onnxruntime" in text and "Verification PASSED" in text  # benchmark and verify rows: results
        _shot(page, 0, tab.lower(), artifacts)

    # Copy puts the spec code on the clipboard.
    _open_tab(page, 0, "Dims")
    code = _widget(page, 0).locator(".wb-dims-code textarea").input_value()
    _widget(page, 0).locator(".wb-copy-code").click()
    page.wait_for_function("() => document.querySelector('.wb-copy-code').innerText.trim() !== 'Copy'")
    assert page.evaluate("() => navigator.clipboard.readText()") == code and "dynamic_shapes" in code

    # The rejected spec: said once, on the failing axis only.
    for tab in ("Stages", "Dims"):
        _open_tab(page, 1, tab)
        text = _check_readable(page, 1, tab)
        assert text.count(TORCH_SENTENCE) <= 1, f"{tab}: torch's sentence {text.count(TORCH_SENTENCE)} times"
        _shot(page, 1, f"rejected-{tab.lower()}", artifacts)
    for axis in (0, 2):
        healthy = _widget(page, 1).locator(f".wb-dim-result-x-{axis}").inner_text().strip()
        assert not healthy.startswith("failed"), f"x.{axis} is fine but says {healthy!r}"
    assert _widget(page, 1).locator(".wb-dim-result-x-1").inner_text().strip().startswith("failed")


RECORDED_CELLS = [
    "%load_ext workbench",
    CELLS[1],
    "%%onnx_export --record mlp --dynamic x.0=batch:2: --no-verify -o recorded\n"
    "with torch.no_grad():\n"
    "    for batch in (1, 3, 6):\n"
    "        mlp(torch.randn(batch, 16))",
]


def test_a_recorded_export_shows_observed_against_exported_ranges_in_the_dims_tab(
        lab, narrow_page, artifacts, failure_screenshot):
    """``%%onnx_export --record`` with batch narrowed to min 2: the Dims tab puts the observed
    sizes [1, 6] next to the exported [2, inf] (chart and table) and names call 0 as outside."""
    page = narrow_page
    failure_screenshot(page)
    run_workbench_notebook(page, lab, "recorded.ipynb", RECORDED_CELLS)
    assert _wait_idle(page, 0).startswith("done")
    _open_tab(page, 0, "Dims")
    recorded = _widget(page, 0).locator(".wb-dims-recorded")
    recorded.wait_for(state="visible")
    text = _check_readable(page, 0, "Dims (recorded)")
    assert "Recorded calls (forward: 3 calls)" in text, text
    assert "call 0: x.0 = 1, outside [2, inf]" in text, text
    assert recorded.locator("svg").count() == 1
    width = recorded.locator("svg").evaluate("s => s.getBoundingClientRect().width")
    pane = recorded.evaluate("e => e.getBoundingClientRect().width")
    assert 0 < width <= pane + 1, (width, pane)
    _shot(page, 0, "recorded-dims", artifacts)
