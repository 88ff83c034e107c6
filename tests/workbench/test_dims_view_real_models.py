"""The Dims tab on real architectures, read as a person reads it (issue #34, point 3): a tiny
BERT exported with torch.onnx-style string names, and a tiny GPT-2 exported from a recorded
``generate()``. Every assertion reads what the tab shows with its folds closed
(``wb.dims_view.shown_html()``), the code the Copy button carries, or ``session.dims.to_frame()``.

Tiny configs, random weights, no hub; one export per model for the module.
"""

from __future__ import annotations

import os
import re

import pytest
import torch
import transformers  # noqa: F401 - the test extra installs it: missing, this fails instead of skipping

from exporter import ExportOptions, Session, record
from exporter.dims import DimSpec
from workbench import Workbench

os.environ.setdefault("HF_HUB_OFFLINE", "1")

NAMES = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
SYMPY = ("Min(", "Max(", "Eq(", "Ne(", "shape[")


def folded_out(html: str) -> str:
    """What the page shows with every ``<details>`` closed: the summaries stay, the bodies go."""
    return re.sub(r"(<details[^>]*>\s*<summary[^>]*>.*?</summary>).*?</details>", r"\1</details>", html, flags=re.S)


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).replace("&gt;", ">").replace("&lt;", "<")


def rows(wb) -> list[str]:
    """The text of each top-level row of the tab, folds closed."""
    return [text(folded_out(row)).strip() for row in wb.dims_view.shown_rows()]


@pytest.fixture(scope="module")
def bert():
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=2, intermediate_size=128,
                        vocab_size=1000)
    model = BertModel(config).eval()
    ids = torch.randint(0, 1000, (2, 16), generator=torch.Generator().manual_seed(0))
    session = Session(model, (), {"input_ids": ids, "attention_mask": torch.ones(2, 16, dtype=torch.long)},
                      options=ExportOptions(dynamic_shapes=NAMES))
    return Workbench(session, follow="capture").wait()


@pytest.fixture(scope="module")
def gpt2():
    """A GPT-2 decode step exported from a recorded ``generate()`` (two prompts: batch and past vary)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=128, bos_token_id=0,
                        eos_token_id=0)
    model = GPT2LMHeadModel(config).eval()
    with torch.no_grad(), record(model) as rec:
        for batch, length, seed in [(2, 5, 0), (3, 3, 1)]:
            ids = torch.randint(1, 100, (batch, length), generator=torch.Generator().manual_seed(seed))
            mask = torch.ones_like(ids)
            mask[0, 0] = 0
            model.generate(ids, attention_mask=mask, max_new_tokens=4, do_sample=False, pad_token_id=0)
    result = rec.export("decode", sweep=False)
    return Workbench(result.session, recording=rec.group("decode"), follow="capture").wait()


# -- BERT: string names, a seq range narrowed by position embeddings and SDPA ----------------


def test_bert_rows_are_one_per_tied_dim_with_the_tied_axes_named(bert):
    assert rows(bert) == [
        "batch : input_ids.0 = attention_mask.0 dynamic [1, inf]",
        rows(bert)[1],
    ]
    assert rows(bert)[1].startswith("seq : input_ids.1 = attention_mask.1 dynamic [2, 512]")
    assert len(bert.dims_view.rows_box.children) == 2
    assert [g.toggle.description for g in bert.dims_view.groups] == ["2 axes", "2 axes"]


def test_bert_seq_says_its_range_in_words_with_the_short_line_that_asked_for_each_bound(bert):
    seq = rows(bert)[1]
    assert "at most 512 : position embeddings, transformers/models/bert/modeling_bert.py:95" in seq
    assert "at least 2 : q_length > 1, transformers/integrations/sdpa_attention.py:149" in seq
    assert "the ONNX model does not check this range" in seq
    assert "narrowed from" not in seq and "[0, inf]" not in seq


def test_bert_tab_shows_no_sympy_no_site_packages_and_no_absolute_path_outside_closed_folds(bert):
    shown = bert.dims_view.shown_html()
    visible = text(folded_out(shown))
    assert not [s for s in SYMPY if s in visible], visible
    assert "site-packages" not in shown
    assert not re.search(r"(?:^|[\s>(`'\"])/(?:[\w.-]+/)+[\w.-]+\.py", shown), "an absolute path is shown"
    # torch's own text is there, folded, and every fold is closed
    assert "Min(512, input_ids.shape[1])" in shown and "torch&#x27;s guards (4)" in visible.replace("'", "&#x27;")
    assert re.findall(r"<details[^>]*>", shown) and all(" open" not in d for d in re.findall(r"<details[^>]*>", shown))


def test_bert_per_axis_controls_open_under_the_row_and_their_labels_do_not_wrap(bert):
    group = bert.dims_view.groups[1]
    assert group.members.layout.display == "none"
    group.toggle.value = True
    assert group.members.layout.display == "" and group.toggle.icon == "chevron-down"
    group.toggle.value = False
    row = bert.axis_row("input_ids", 1)
    assert row.result.value.count("<b>") == 1 and "dynamic seq [2, 512]" in row.result.value  # the head says why
    assert "class='wb-nowrap'" in row.label.value and row.label.layout.width == "auto"


def test_bert_to_frame_prints_the_ranges_the_tab_prints(bert):
    frame = bert.session.dims.to_frame()
    assert str(frame["min"].dtype) == "Int64" and str(frame["example"].dtype) == "Int64"
    assert frame["min"].tolist() == [1, 2, 1, 2]
    assert frame["max"].tolist() == [float("inf"), 512, float("inf"), 512]
    assert frame["max"].isna().sum() == 0
    visible = " ".join(rows(bert))
    for low, high in zip(frame["min"], frame["max"]):
        assert f"[{low}, {'inf' if high == float('inf') else high}]" in visible
    assert "at most 512: position embeddings" in frame.set_index(["input", "axis"]).loc[("input_ids", 1), "why"]


# -- GPT-2 from a recorded generate(): a KV cache of 2 layers -----------------------------------


def test_gpt2_tab_fits_one_screen_a_row_per_dim_and_per_cache_family(gpt2):
    shown = rows(gpt2)
    assert len(gpt2.dims_view.rows_box.children) == len(shown) <= 8, shown
    def row(start):
        return next((r for r in shown if r.startswith(start)), None)

    assert row("past : cache.*.key/value.2 dynamic [1, inf]")
    assert row("batch : input_ids.0 = cache.*.key/value.0 = attention_mask.0 = position_ids.0 dynamic [1, inf]")
    assert row("cache.*.key/value.3 static 16") and row("cache.*.key/value.1 static 2")
    assert row("attention_mask.1 size 6 dynamic past + 1 [1, inf]")  # a derived dim said with its root's name
    mask = gpt2.axis_row("attention_mask", 1)  # no control of its own (it follows past), not a false STATIC
    assert mask.policy.layout.display == "none" and "derived: <code>past + 1</code>" in mask.derived.value
    past = next(g for g in gpt2.dims_view.groups if g.group.name == "past")
    assert past.toggle.description == "4 axes" and len(past.members.children) == 4
    visible = " ".join(shown)
    assert not [s for s in SYMPY if s in visible], visible


def test_gpt2_recorded_chart_draws_a_row_per_cache_family(gpt2):
    ids = re.findall(r'id="observed:([^"]+)"', gpt2.dims_view.recorded.value)
    # one row per set of axes that saw the same sizes: batch, past, the mask, three static ones
    assert ids == ["input_ids.0 + 6 axes", "input_ids.1 = position_ids.1", "cache.*.key/value.1",
                   "cache.*.key/value.2", "cache.*.key/value.3", "attention_mask.1"], ids
    assert not re.search(r"<details[^>]*\bopen\b", gpt2.dims_view.recorded.value)  # the chart and the table folded


def test_gpt2_copy_as_code_is_compact_and_rebuilds_the_sessions_spec(gpt2):
    code = gpt2.dims_view.code.value
    assert "cache_axes = {0: 'batch', 2: past}" in code and "'cache': [[cache_axes, cache_axes]] * 2," in code
    assert len(code.splitlines()) <= 16
    namespace: dict = {}
    exec(code, namespace)  # noqa: S102 - runs the copied code, as the user would
    session = gpt2.session
    assert DimSpec.parse(namespace["dynamic_shapes"], session.inputs) == session.spec


# -- the compact form on a plain module (fast) ------------------------------------------------


class Layers(torch.nn.Module):
    def forward(self, x, cache):
        return x.sum() + sum(k.sum() + v.sum() for k, v in cache)


@pytest.mark.parametrize("layers", [1, 3])
def test_copy_as_code_writes_a_repeated_cache_spec_once_and_rebuilds_it(layers):
    cache = [[torch.randn(2, 4, 5), torch.randn(2, 4, 5)] for _ in range(layers)]
    kv = {0: "batch", 2: "past"}
    session = Session(Layers(), (torch.randn(2, 3), cache),
                      options=ExportOptions(dynamic_shapes={"x": {0: "batch"}, "cache": [[kv, kv]] * layers}))
    code = session.spec.to_code(session.inputs)
    assert "cache_axes = {0: 'batch', 2: 'past'}" in code
    assert ("'cache': [[cache_axes, cache_axes]] * 3," in code) == (layers == 3)
    namespace: dict = {}
    exec(code, namespace)  # noqa: S102
    assert DimSpec.parse(namespace["dynamic_shapes"], session.inputs) == session.spec
    assert namespace["dynamic_shapes"]["cache"] == [[kv, kv]] * layers


class Add(torch.nn.Module):
    def forward(self, x, y):
        return x + y


def test_an_opened_row_stays_open_when_a_change_re_captures():
    session = Session(Add(), (torch.randn(4, 3), torch.randn(4, 3)),
                      options=ExportOptions(dynamic_shapes={"x": {0: "n"}, "y": {0: "n"}}))
    wb = Workbench(session, follow="capture").wait()
    (tied,) = wb.dims_view.groups
    assert tied.group.label == "n: x.0 = y.0"
    tied.toggle.value = True
    wb.axis_control("x", 1).value = "AUTO"
    wb.wait()
    (tied,) = [g for g in wb.dims_view.groups if g.group.name == "n"]
    assert tied.toggle.value and tied.members.layout.display == ""
