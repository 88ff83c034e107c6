"""The Dims tab of a tiny BERT (torch.onnx-style string names) in a real JupyterLab 4 and
Chromium, a 1000 px window with the file browser open (a ~570 px pane): one row per tied dim,
the range in words, torch's guards folded (closed), nothing wider than the pane, the axis
labels on one line when a row is opened. The screenshot goes to the artifacts
(``WB_UPDATE_DOCS=1``: also to ``docs/tab-dims-bert.png``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from harness import new_page, run_workbench_notebook, tiny_bert_cells, wait_for_job_done

REPO = Path(__file__).resolve().parents[2]

CELLS = tiny_bert_cells("Workbench(session, follow='capture')")


@pytest.fixture(scope="module")
def narrow_page(lab, browser):
    with new_page(browser, lab, width=1000, height=900, timeout=60_000) as page:
        yield page


def test_bert_dims_tab_reads_in_words_in_a_narrow_pane(lab, narrow_page, artifacts, failure_screenshot):
    page = narrow_page
    failure_screenshot(page)
    run_workbench_notebook(page, lab, "dims_bert.ipynb", CELLS)
    widget = page.locator(".jp-Cell-outputArea .wb-workbench").first
    wait_for_job_done(page, timeout=240_000)
    widget.locator(".lm-TabBar-tab", has_text="Dims").first.click()
    widget.scroll_into_view_if_needed()
    page.wait_for_timeout(500)

    heads = widget.locator(".wb-dim-group")
    assert heads.count() == 2
    texts = [t.strip() for t in heads.all_inner_texts()]
    assert texts[0].startswith("batch: input_ids.0 = attention_mask.0"), texts
    assert "at most 512: position embeddings, transformers/models/bert/modeling_bert.py:95" in texts[1], texts
    for text in texts:  # torch's guards are folded: their summary shows, their text does not
        assert "Min(" not in text and "shape[" not in text and "site-packages" not in text, text
    assert widget.locator("details.wb-torch-guards[open]").count() == 0

    seen = page.evaluate(
        """() => { const w = document.querySelector('.jp-Cell-outputArea .wb-workbench');
                   const panel = w.querySelector('.wb-dim-rows');
                   return {pane: panel.clientWidth, wide: panel.scrollWidth > panel.clientWidth + 1}; }""")
    assert seen["pane"] <= 600 and not seen["wide"], seen

    shot = artifacts / "tab-dims-bert.png"
    widget.screenshot(path=str(shot))
    if os.environ.get("WB_UPDATE_DOCS"):
        shutil.copy(shot, REPO / "docs" / shot.name)

    # Opened, a row lists its axes' controls; each axis label stays on one line.
    widget.locator(".wb-dim-group-toggle").nth(1).click()
    page.wait_for_timeout(300)
    heights = page.evaluate(
        """() => [...document.querySelectorAll('.jp-Cell-outputArea .wb-workbench .wb-dim-rows code')]
                 .filter(c => c.offsetParent !== null && /^\\w+\\.\\d$/.test(c.innerText))
                 .map(c => [c.innerText, c.getClientRects().length])""")
    assert heights and all(lines == 1 for _, lines in heights), heights


GPT2_CELLS = [
    "%load_ext workbench",
    "import os\n"
    "os.environ['HF_HUB_OFFLINE'] = '1'\n"
    "import torch, transformers\n"
    "from exporter import record\n"
    "from workbench import Workbench\n"
    "\n"
    "torch.manual_seed(0)\n"
    "config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=128,\n"
    "                                 bos_token_id=0, eos_token_id=0)\n"
    "gpt2 = transformers.GPT2LMHeadModel(config).eval()\n"
    "with torch.no_grad(), record(gpt2) as rec:\n"
    "    for batch, length, seed in [(2, 5, 0), (3, 3, 1)]:\n"
    "        ids = torch.randint(1, 100, (batch, length), generator=torch.Generator().manual_seed(seed))\n"
    "        mask = torch.ones_like(ids)\n"
    "        mask[0, 0] = 0\n"
    "        gpt2.generate(ids, attention_mask=mask, max_new_tokens=4, do_sample=False, pad_token_id=0)\n"
    "decode = rec.export('decode', sweep=False)\n"
    "Workbench(decode.session, recording=rec.group('decode'), follow='capture')",
]


def test_recorded_gpt2_dims_tab_fits_about_one_screen(lab, narrow_page, artifacts, failure_screenshot):
    """21 axes of a decode step with a 2-layer KV cache: a row per dim and per cache family, the
    recorded chart a row per family, the per-axis table folded: about one screen, not 3,790 px."""
    page = narrow_page
    failure_screenshot(page)
    run_workbench_notebook(page, lab, "dims_gpt2.ipynb", GPT2_CELLS)
    widget = page.locator(".jp-Cell-outputArea .wb-workbench").first
    wait_for_job_done(page)
    widget.locator(".lm-TabBar-tab", has_text="Dims").first.click()
    widget.scroll_into_view_if_needed()
    page.wait_for_timeout(800)
    height = page.evaluate(
        """() => { const w = document.querySelector('.jp-Cell-outputArea .wb-workbench');
                   const panel = [...w.querySelectorAll('.lm-TabPanel-stackedPanel > .lm-Widget, .widget-tab-contents > .lm-Widget')]
                       .find(p => !p.classList.contains('lm-mod-hidden') && p.offsetParent !== null);
                   return Math.round(panel.getBoundingClientRect().height); }""")
    viewport = page.viewport_size
    page.set_viewport_size({"width": viewport["width"], "height": height + 400})
    page.wait_for_timeout(300)
    widget.screenshot(path=str(artifacts / "tab-dims-gpt2.png"))
    page.set_viewport_size(viewport)
    # about 730 px measured with the recorded chart folded (1,097 px open; 3,790 px before rows were grouped)
    assert height <= 900, f"the Dims tab is {height} px tall"
