"""exporter.display: one rendering model, its exact text, its escaped HTML, and the results'
_repr_html_ built on it."""

from __future__ import annotations

import subprocess
import sys
import pytest

from exporter.display import (
    Badge,
    KeyValues,
    Note,
    Pre,
    Section,
    Svg,
    Table,
    clean_svg,
    render,
    repr_html,
    to_html,
)
from exporter.display.sections import session_html

from html_page import Page

EVIL = "<script>alert(1)</script>"


def test_section_renders_as_exact_text():
    section = Section("Session: M", Badge("ok", "ok"), (
        KeyValues((("model", "M"), ("captured by", "nonstrict"))),
        Table.from_rows(("stage", "status", "seconds"), [("capture", "ok", 0.0123456), ("optimize", "skipped", None)],
                        badges=("status",)),
        Note("not run: verify"),
        Section("Guards", Badge("1 guard", "info"), (Pre("x.shape[0] > 2\n  at m.py:3"),)),
    ))
    assert section.to_text() == (
        "Session: M [ok]\n"
        "  model:       M\n"
        "  captured by: nonstrict\n"
        "  stage     status   seconds\n"
        "  capture   ok        0.0123\n"
        "  optimize  skipped\n"
        "  not run: verify\n"
        "  Guards [1 guard]\n"
        "    x.shape[0] > 2\n"
        "      at m.py:3"
    )


def test_section_html_has_title_badge_and_table_rows():
    section = Section("Stages", Badge("ok", "ok"), (
        Table.from_rows(("stage", "status"), [("capture", "ok"), ("translate", "failed")], badges=("status",)),
    ))
    page = Page(section.to_html())
    assert page.tables == [[["stage", "status"], ["capture", "ok"], ["translate", "failed"]]]
    assert {"oxw-section", "oxw-badge", "oxw-ok", "oxw-fail"} <= page.classes()
    assert page.all_text.startswith("Stages ok")


def test_every_string_is_escaped_in_html():
    section = Section(EVIL, Badge(EVIL), (
        KeyValues(((EVIL, EVIL),)),
        Table.from_rows((EVIL,), [(EVIL,)], caption=EVIL),
        Pre(EVIL),
        Note(EVIL),
    ))
    markup = section.to_html()
    page = Page(markup)
    assert "script" not in page.tags
    assert "<script" not in markup
    assert page.all_text.count(EVIL) == 9  # all nine strings arrive as text, unchanged


def test_table_cells_format_none_nan_floats_bools_and_sequences():
    table = Table.from_rows(("a", "b", "c", "d", "e"), [(None, float("nan"), 1 / 3, True, (1, 2))])
    assert table.rows == (("", "", "0.333", "yes", "1, 2"),)


def test_table_from_frame_keeps_the_chosen_columns():
    import pandas as pd
    frame = pd.DataFrame({"input": ["x", "y"], "axis": [0, 1], "hidden": ["a", "b"]})
    table = Table.from_frame(frame, ["input", "axis"])
    assert table.text_lines() == ["input  axis", "x         0", "y         1"]  # numbers right-aligned


def test_svg_is_inlined_without_prolog_and_refused_with_active_content():
    drawing = '<?xml version="1.0"?>\n<!DOCTYPE svg>\n<!-- dot -->\n<svg width="10pt"><g class="node"><text>a&lt;b</text></g></svg>'
    assert clean_svg(drawing) == '<svg width="10pt"><g class="node"><text>a&lt;b</text></g></svg>'
    for bad in ('<svg><script>x()</script></svg>', '<svg><g onclick="x()"/></svg>',
                '<svg><image href="https://example.com/a.png"/></svg>', '<svg><a xlink:href="javascript:x()"/></svg>'):
        assert clean_svg(bad) is None
        assert "<svg" not in Svg(bad).to_html()


def test_dims_table_text_is_exact():
    from exporter.dims import STATIC, Dim
    from exporter.shapes.outcomes import DimOutcome, DimOutcomes

    dims = DimOutcomes((
        DimOutcome("x", 0, 3, Dim("batch"), "dynamic", 3, None, symbol="s77", dim="batch",
                   reason="narrowed from [0, inf] to [3, inf]: x.shape[0] > 2 at m.py:3", source="m.py:3: if x.shape[0] > 2:",
                   differs=True),
        DimOutcome("x", 1, 4, STATIC, "static", 4, 4),
    ), spec=None, strategy="nonstrict")
    assert render(dims).to_text() == (
        "Dims [nonstrict]\n"
        "  1 dynamic axis(es) of 2; 1 not as requested\n"
        "  axis  example  requested     obtained  range     dim    why                                                           source\n"
        "  x.0         3  Dim('batch')  dynamic   [3, inf]  batch  narrowed from [0, inf] to [3, inf]: x.shape[0] > 2 at m.py:3  m.py:3: if x.shape[0] > 2:\n"
        "  x.1         4  STATIC        static    4"
    )
    page = Page(dims._repr_html_())
    assert [row[:4] for row in page.tables[0]] == [
        ["axis", "example", "requested", "obtained"],
        ["x.0", "3", "Dim('batch')", "dynamic"],
        ["x.1", "4", "STATIC", "static"],
    ]
    assert repr(dims) == dims.summary() == render(dims).to_text()  # one text, from the section


def _guards(code: str = "if x.shape[0] > 2:"):
    from exporter.guards import Guard, Guards

    return Guards((
        Guard("guard", "x.shape[0] > 2", "s77 > 2", axes=(("x", 0),), file="/src/m.py", line=3, code=code),
        Guard("equality", "x.shape[0] == y.shape[0]", "Eq(s77, s17)", axes=(("x", 0), ("y", 0))),
    ), "nonstrict")


def test_guards_text_is_exact_and_html_has_one_row_per_guard():
    guards = _guards()
    assert render(guards).to_text() == (
        "Guards [2 guards]\n"
        "  kind      expression                axes      line\n"
        "  guard     x.shape[0] > 2            x.0       m.py:3: if x.shape[0] > 2:\n"
        "  equality  x.shape[0] == y.shape[0]  x.0, y.0"
    )
    page = Page(guards._repr_html_())
    assert page.tables[0][1] == ["guard", "x.shape[0] > 2", "x.0", "m.py:3: if x.shape[0] > 2:"]
    assert len(page.tables[0]) == 3


def test_guard_code_with_a_script_tag_is_shown_as_text():
    markup = _guards(code=f"y = f('{EVIL}')")._repr_html_()
    page = Page(markup)
    assert "script" not in page.tags
    assert EVIL in page.all_text


def test_no_guards_says_so():
    from exporter.guards import Guards

    assert render(Guards((), "strict")).to_text() == "Guards [0 guards]\n  no shape guards (strict)"


def _verify_result():
    from exporter.verify.results import CaseResult, Finding, VerifyResult

    cases = (
        CaseResult("example", (("batch", 3),), "pass"),
        CaseResult("larger", (("batch", 7),), "ort_error", error="Got invalid dimensions for input: x"),
    )
    finding = Finding("wrong_at_size", "wrong at batch=7", cause="a branch on x.shape[0]")
    return VerifyResult("failed", cases=cases, findings=(finding,), seconds=0.5)


def test_verify_result_html_shows_status_findings_and_cases():
    result = _verify_result()
    section = render(result)
    assert section.badge == Badge("failed", "fail")
    assert section.verdict.text == result.verdict
    page = Page(result._repr_html_())
    cases = page.tables[-1]
    assert cases[0][:3] == ["case", "sizes", "status"]
    assert cases[1][:3] == ["example", "batch=3", "pass"]
    assert cases[2][:3] == ["larger", "batch=7", "fail"]  # onnxruntime's error fails the check
    detail = "onnxruntime error: Got invalid dimensions for input: x"
    assert cases[2][-1] == detail[:47] + "…"  # a long cell is cut: rows stay one line high
    assert ("td", "title", detail) in page.attrs  # the full text on hover
    assert "details" in page.tags and detail in page.all_text  # and folded below the table
    assert "li" in page.tags  # findings are bullets: kind, message, then the likely cause under it
    assert "wrong_at_size wrong at batch=7likely cause: a branch on x.shape[0]" in page.all_text
    assert page.all_text.count(result.verdict) == 1


def test_verify_error_shows_the_failure_record():
    from exporter.errors import Failure
    from exporter.verify.results import VerifyResult

    failure = Failure("capture", "CaptureError", f"could not capture {EVIL}", hint="make x static")
    text = render(VerifyResult("error", error="export failed", failure=failure)).to_text()
    assert text == (  # the verdict is the first line (it names the section and its status)
        "Verification could not run: export failed\n"
        f"  could not capture {EVIL}\n"
        "  fix: make x static"
    )


def _benchmark():
    from exporter.bench.latency import BenchmarkResult, EngineTiming
    from exporter.bench.stats import LatencyStats

    ort = EngineTiming("onnxruntime", LatencyStats.from_samples([0.001, 0.002, 0.003]))
    eager = EngineTiming("eager", LatencyStats.from_samples([0.002, 0.004, 0.006]))
    return BenchmarkResult(ort, eager, None, sizes=(("batch", 3),))


def test_benchmark_text_starts_with_its_headline_then_one_row_per_engine():
    result = _benchmark()
    lines = render(result).to_text().splitlines()
    assert lines[:2] == ["Benchmark [ok]", f"  {result.headline}"]
    header = next(line for line in lines if line.lstrip().startswith("engine"))
    rows = lines[lines.index(header) + 1:]
    assert [row.split()[0] for row in rows] == ["onnxruntime", "eager"]
    assert repr(result) == result.summary() == render(result).to_text()  # one text, from the section


def test_failed_benchmark_engine_shows_its_error():
    from exporter.bench.latency import BenchmarkResult, EngineTiming

    result = BenchmarkResult(EngineTiming("onnxruntime", error=f"InvalidArgument: {EVIL}"), None, None)
    page = Page(result._repr_html_())
    assert page.tables[-1][1][0] == "onnxruntime"
    assert page.tables[-1][1][-1] == f"InvalidArgument: {EVIL}"
    assert "script" not in page.tags


def test_sweep_has_one_row_per_size():
    from exporter.bench.latency import SweepResult

    point = _benchmark()
    sweep = SweepResult("batch", (1, 8), (point, point))
    page = Page(sweep._repr_html_())
    assert [row[0] for row in page.tables[-1]] == ["size", "1", "8"]
    speedup = page.tables[-1][0].index("speedup")
    assert [row[speedup] for row in page.tables[-1][1:]] == ["2.00x", "2.00x"]
    assert render(sweep).title == "Latency vs batch"


def test_a_renderer_never_raises_it_shows_the_error():
    from exporter.guards import Guards

    broken = Guards(records=(object(),), strategy="nonstrict")  # not a Guard: rendering fails
    markup = broken._repr_html_()
    page = Page(markup)
    assert "display error" in page.all_text
    assert "AttributeError" in page.all_text
    assert repr_html(object()).count("TypeError: no display for object") == 1


def test_unknown_objects_are_refused_by_render():
    with pytest.raises(TypeError, match="no display for int"):
        to_html(3)


def test_importing_display_loads_no_heavy_or_ui_library():
    code = "import sys, exporter.display\nprint(' '.join(sorted(sys.modules)))"
    loaded = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split())
    assert not loaded & {"torch", "onnx", "onnxruntime", "pandas", "IPython", "ipywidgets", "matplotlib"}


# -- sessions (real exports of tiny models) ---------------------------------------------------------


@pytest.fixture(scope="module")
def torch():
    import torch

    return torch


@pytest.fixture(scope="module")
def exported(torch):
    from exporter import Dim, ExportOptions, Session

    class Double(torch.nn.Module):
        def forward(self, x):
            return x * 2

    session = Session(Double(), (torch.randn(3, 4),), options=ExportOptions(dynamic_shapes={"x": {0: Dim("batch")}}))
    session.run()
    return session


@pytest.fixture(scope="module")
def failed(torch):
    from exporter import Session

    def forward(self, **inputs):
        raise RuntimeError(f"bad {EVIL}")

    Evil = type(f"Evil{EVIL}", (torch.nn.Module,), {"forward": forward})
    session = Session(Evil(), (), {EVIL: torch.randn(2, 3)})
    session.run()
    return session


def test_session_html_shows_model_spec_and_one_row_per_stage(exported):
    page = Page(session_html(exported))
    assert "Session: Double" in page.all_text
    kv, stages = page.tables[0], page.tables[1]
    assert ["dims", "x.0=Dim('batch')"] in kv
    assert ["captured by", "nonstrict"] in kv
    assert [row[:2] for row in stages] == [["stage", "status"], ["capture", "ok"], ["decompose", "ok"],
                                           ["translate", "ok"], ["optimize", "ok"]]


def test_session_html_runs_nothing_and_says_what_has_not_run(torch):
    from exporter import Session

    session = Session(torch.nn.ReLU(), (torch.randn(2, 2),))
    page = Page(session_html(session))
    assert "not run: capture, decompose, translate, optimize" in page.all_text
    assert session.stages == ()


def test_session_text_shows_dims_and_guards_once_computed(exported):
    exported.dims, exported.guards  # noqa: B018 - computed, then shown
    text = render(exported).to_text()
    assert "\n  Dims [nonstrict]\n" in text
    assert "\n    x.0         3  Dim('batch')  dynamic   [1, inf]  batch" in text  # torch's 0: an empty tensor
    assert text.endswith("  Guards [0 guards]\n    no shape guards (nonstrict)")


def test_failed_session_shows_the_failure_with_user_strings_escaped(failed):
    markup = session_html(failed)
    page = Page(markup)
    assert "script" not in page.tags
    assert f"Session: Evil{EVIL}" in page.all_text
    assert f"RuntimeError: bad {EVIL}" in page.all_text
    assert render(failed).badge == Badge("failed", "fail")
    assert ["capture", "failed"] == page.tables[1][1][:2]
    assert "not run: decompose, translate, optimize" in page.all_text


def test_failed_session_dims_and_guards_render(failed):
    text = render(failed.dims).to_text()
    assert text.startswith(f"Dims [failed]\n  capture failed: RuntimeError: bad {EVIL}\n")
    assert "failed" not in text.split("\n", 2)[2]  # no axis is named by the failure: none reads "failed"
    assert f"{EVIL}.0" in text
    assert "script" not in Page(failed.dims._repr_html_()).tags


def test_a_wrapped_column_shows_its_whole_text_and_wraps_instead_of_being_cut():
    from html import escape

    from exporter.display import Table

    sentence = "Verification PASSED: ONNX matches eager PyTorch at the example and 9 other size(s) " * 2
    table = Table.from_rows(("stage", "result"), [("verify", sentence)], wrap=("result",))
    html = table.to_html()
    assert escape(sentence) in html and "…" not in html and "white-space:normal" in html
    cut = Table.from_rows(("stage", "result"), [("verify", sentence)]).to_html()
    assert "…</td>" in cut  # without wrap: cut in the cell, the full text folded below


def test_an_svg_drawing_is_fitted_to_the_page_width_not_cut_at_its_top_left():
    from exporter.display import Svg

    drawing = '<svg width="1547pt" height="1022pt" viewBox="0 0 1547 1022"><g><text>node</text></g></svg>'
    html = Svg(drawing).to_html()
    assert '<svg style="max-width:100%;height:auto" width="1547pt"' in html and "viewBox" in html
