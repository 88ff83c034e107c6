"""The Stages and Verify tabs of a tiny BERT in a real JupyterLab 4 and Chromium, a 1000 px
window with the file browser open (a ~570 px pane): the verify verdict whole in the Stages
table, the verify chart inside the pane, and after a change of spec a Verify tab that says
"not verified for this spec" in grey, never a green pass of the earlier spec. Screenshots go to
the artifacts (``WB_UPDATE_DOCS=1``: also to ``docs/tab-stages-bert.png`` and
``docs/tab-verify-stale-bert.png``)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from harness import new_page, run_workbench_notebook, tiny_bert_cells, wait_for_job_done

REPO = Path(__file__).resolve().parents[2]

CELLS = tiny_bert_cells("wb = Workbench(session, verify=True, reverify_below=0)\nwb")
# Run after the first export and its verify, as a person changes a control: the batch axis made static.
CHANGE = "wb.wait(600)\nverified = wb.session.last_verify\nwb.axis_control('input_ids', 0).value = 'STATIC'\nwb.wait(600)"

GREEN = "rgb(220, 252, 231)"  # the ok badge's background (#dcfce7)


@pytest.fixture(scope="module")
def page(lab, browser):
    with new_page(browser, lab, width=1000, height=900, timeout=60_000) as page:
        yield page


def _badge_backgrounds(widget, css: str) -> list[str]:
    return widget.locator(f"{css} span").evaluate_all("spans => spans.map(s => getComputedStyle(s).backgroundColor)")


def test_bert_stages_and_verify_tabs_read_whole_and_a_stale_verify_is_never_green(lab, page, artifacts,
                                                                                   failure_screenshot):
    failure_screenshot(page)
    run_workbench_notebook(page, lab, "tabs_bert.ipynb", [*CELLS, CHANGE])
    widget = page.locator(".jp-Cell-outputArea .wb-workbench").first
    wait_for_job_done(page)

    # Stages: every row whole (the result column wraps), nothing wider than the pane.
    widget.locator(".lm-TabBar-tab", has_text="Stages").first.click()
    page.wait_for_timeout(400)
    table = widget.locator("table.oxw-table").first
    rows = [r.strip() for r in table.locator("tr").all_inner_texts()]
    assert any(r.startswith("verify") for r in rows) and not any("…" in r for r in rows), rows
    box = table.evaluate("t => { const d = t.closest('.oxw-scroll'); return [d.scrollWidth, d.clientWidth]; }")
    assert box[0] <= box[1] + 1, box  # the stages table needs no sideways scroll
    stages = artifacts / "tab-stages-bert.png"
    widget.screenshot(path=str(stages))

    # Verify: the earlier spec's pass is folded below a grey "not verified for this spec".
    widget.locator(".lm-TabBar-tab", has_text="Verify").first.click()
    page.wait_for_timeout(400)
    status = widget.locator(".wb-verify-status").first
    assert "not verified for this spec" in status.inner_text()
    assert GREEN not in _badge_backgrounds(widget, ".wb-verify-status")
    assert widget.locator(".wb-verify-status + * details, details", has_text="the last verify, for an earlier spec").count() >= 1
    verify = artifacts / "tab-verify-stale-bert.png"
    widget.screenshot(path=str(verify))
    if os.environ.get("WB_UPDATE_DOCS"):
        for shot in (stages, verify):
            shutil.copy(shot, REPO / "docs" / shot.name)


def _no_sideways_scroll(locator) -> list[int]:
    """[scrollWidth, clientWidth] of the widest box inside ``locator`` that scrolls."""
    return locator.evaluate(
        """el => { let worst = [0, 0];
                   for (const d of [el, ...el.querySelectorAll('*')]) {
                       if (d.scrollWidth - d.clientWidth > worst[0] - worst[1] && getComputedStyle(d).overflowX !== 'visible')
                           worst = [d.scrollWidth, d.clientWidth];
                   }
                   return worst; }""")


def test_bert_guards_and_benchmark_tabs_fit_the_pane_in_the_users_terms(lab, page, artifacts, failure_screenshot):
    """The Guards tab names each guard's short line (no site-packages path) and needs no sideways
    scroll; the Benchmark tab, after Run benchmark and Latency vs size clicked as a person does,
    shows its headlines whole and its charts inside the pane."""
    failure_screenshot(page)
    run_workbench_notebook(page, lab, "tabs_bert_bench.ipynb", tiny_bert_cells("wb = Workbench(session)\nwb"))
    widget = page.locator(".jp-Cell-outputArea .wb-workbench").first
    wait_for_job_done(page)

    widget.locator(".lm-TabBar-tab", has_text="Guards").first.click()
    guards = widget.locator(".wb-guards-table", has_text="modeling_bert.py").first
    guards.wait_for(timeout=120_000)  # drawn when the tab is shown
    page.wait_for_timeout(400)
    text = guards.inner_text()
    assert "modeling_bert.py" in text and "site-packages" not in text, text[:400]
    scroll = _no_sideways_scroll(guards)
    assert scroll[0] <= scroll[1] + 1, scroll
    guards_shot = artifacts / "tab-guards-bert.png"
    widget.screenshot(path=str(guards_shot))

    widget.locator(".lm-TabBar-tab", has_text="Benchmark").first.click()
    for button in (".wb-run-benchmark", ".wb-run-sweep"):
        widget.locator(button).first.click()
        page.wait_for_timeout(500)
        wait_for_job_done(page)
    status = widget.locator(".wb-benchmark-status").first.inner_text()
    assert status.strip() and "not run" not in status and "…" not in status, status
    for image in widget.locator(".wb-benchmark-view img, .jp-Cell-outputArea .wb-workbench img").all():
        box, pane_width = image.bounding_box(), widget.bounding_box()["width"]
        assert box is None or box["width"] <= pane_width, (box, pane_width)
    assert "latency vs" in widget.inner_text()
    bench_shot = artifacts / "tab-benchmark-bert.png"
    viewport = page.viewport_size
    page.set_viewport_size({"width": viewport["width"], "height": 2200})  # the whole tab in the picture
    page.wait_for_timeout(300)
    widget.screenshot(path=str(bench_shot))
    page.set_viewport_size(viewport)
    if os.environ.get("WB_UPDATE_DOCS"):
        for shot in (guards_shot, bench_shot):
            shutil.copy(shot, REPO / "docs" / shot.name)
