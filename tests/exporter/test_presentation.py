"""One presentation model: every result lowers once to display blocks, and its summary(), repr,
_repr_html_, the CLI's Markdown and the report are renderers of those blocks. Text is asserted
exactly; HTML is smoke-tested for what a person must never see (None, nan, e+00, L['x'],
Traceback outside a folded <details>) and for tables made for reading."""

from __future__ import annotations

import ast
import math
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from exporter.display import (
    Badge,
    Bullets,
    Code,
    Details,
    Item,
    KeyValues,
    Note,
    Section,
    Table,
    Verdict,
    number,
    render,
    repr_html,
    to_markdown,
)
from exporter.errors import Failure, Status

EXPORTER = Path(__import__("exporter").__file__).parent


class Visible(HTMLParser):
    """The text a reader sees without opening anything: outside <details>, without tooltips;
    and every <td> with its style."""

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=True)
        self.folded = 0
        self.shown: list[str] = []
        self.cells: list[tuple[str, str]] = []  # (style, text) of each td
        self._cell: list[str] | None = None
        self._style = ""
        self.scroll_styles: list[str] = []
        self.header_styles: list[str] = []
        self.feed(markup)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "details":
            self.folded += 1
        elif tag == "td":
            self._cell, self._style = [], attrs.get("style") or ""
        elif tag == "th":
            self.header_styles.append(attrs.get("style") or "")
        elif tag == "div" and "oxw-scroll" in (attrs.get("class") or ""):
            self.scroll_styles.append(attrs.get("style") or "")

    def handle_endtag(self, tag):
        if tag == "details":
            self.folded -= 1
        elif tag == "td" and self._cell is not None:
            self.cells.append((self._style, "".join(self._cell)))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        if not self.folded:
            self.shown.append(data)

    @property
    def text(self) -> str:
        return " ".join(" ".join(self.shown).split())


# -- the vocabulary -----------------------------------------------------------------------------


@pytest.mark.parametrize(("word", "badge"), [
    ("ok", Badge("ok", "ok")), (Status.FAILED, Badge("failed", "fail")), ("cancelled", Badge("cancelled", "warn")),
    ("not run", Badge("not run", "muted")), ("running", Badge("running", "info")),
    ("pass", Badge("pass", "ok")), ("passed", Badge("pass", "ok")),  # verify's overall word reads pass
    ("fail", Badge("fail", "fail")), ("ort_error", Badge("fail", "fail")),  # onnxruntime failed the check
    ("error", Badge("failed", "fail")), ("eager_error", Badge("skipped", "muted")),  # nothing was checked
    ("not_verified", Badge("not_verified", "warn")),  # nothing was wrong: not a red badge
])
def test_every_status_word_reads_as_one_vocabulary_in_one_palette(word, badge):
    assert Badge.status(word) == badge
    assert Status.of(badge.text) is not None  # what a badge says is a member of the vocabulary


def test_status_reads_only_its_own_members_and_the_palette_shows_every_member_once():
    assert Status.of("passed") is Status.PASSED and Status.of(Status.ORT_ERROR) is Status.ORT_ERROR
    assert Status.of("pased") is None and Status.of("dynamic") is None  # no synonyms, no guesses
    source = (EXPORTER / "display" / "style.py").read_text()
    palette = source[source.index("_STATUS_BADGE = {"):source.index("_WORD_TONE")]
    assert sorted(re.findall(r"Status\.(\w+):", palette)) == sorted(m.name for m in Status)  # every member, once


# -- the registration: results do not import the renderer ------------------------------------------


RESULT_MODULES = ["session.py", "guards.py", "errors.py", "passes.py", "shapes/outcomes.py", "shapes/fixes.py",
                  "bench/latency.py", "bench/compare.py", "bench/profiling.py", "bench/stats.py",
                  "verify/results.py", "verify/contract.py", "verify/divergence.py", "verify/recorded.py",
                  "verify/intermediates/result.py", "graphs/mapping.py", "pipeline/pass_records.py",
                  "recording/recording.py", "recording/groups.py", "recording/ranges.py", "recording/replay.py",
                  "sweep/results.py", "sweep/diff.py"]
_HAND_WRITTEN = {"summary", "__repr__", "_repr_pretty_", "_repr_html_"}


@pytest.mark.parametrize("module", RESULT_MODULES)
def test_result_modules_do_not_import_the_renderer(module):
    tree = ast.parse((EXPORTER / module).read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert not {m for m in imported if m.split(".")[-1] == "display"}, module


@pytest.mark.parametrize("module", RESULT_MODULES)
def test_results_leave_their_text_and_html_to_one_builder(module):
    tree = ast.parse((EXPORTER / module).read_text())
    own = {(cls.name, fn.name) for cls in ast.walk(tree) if isinstance(cls, ast.ClassDef)
           for fn in cls.body if isinstance(fn, ast.FunctionDef) and fn.name in _HAND_WRITTEN}
    assert not own, f"{module}: inherit exporter.presentation.Presentable and register a builder instead"


@pytest.mark.parametrize("module", RESULT_MODULES)
def test_every_presentable_in_a_result_module_has_a_builder(module):
    import importlib
    import inspect

    from exporter.presentation import Presentable, registered

    name = "exporter." + module.removesuffix(".py").replace("/", ".")
    results = [cls for _, cls in inspect.getmembers(importlib.import_module(name), inspect.isclass)
               if cls.__module__ == name and issubclass(cls, Presentable)]
    assert results, f"{module} defines no result"
    shown = set(registered())
    missing = [cls.__name__ for cls in results if not any(f"{c.__module__}.{c.__qualname__}" in shown for c in cls.__mro__)]
    assert not missing, module


def test_the_presentation_seam_imports_nothing_from_the_project():
    tree = ast.parse((EXPORTER / "presentation.py").read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level > 0]


def _project_imports(path: Path) -> set[str]:
    """The project modules ``path`` imports (relative imports resolved), counting imports inside functions."""
    package = list(path.relative_to(EXPORTER.parent).with_suffix("").parts)[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("exporter")):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)  # `from .display import sections`
    return found


def test_the_block_model_imports_nothing_above_errors_and_presentation():
    for path in sorted((EXPORTER / "display").glob("*.py")):
        above = {m for m in _project_imports(path)
                 if m.split(".")[:2] not in (["exporter", "errors"], ["exporter", "presentation"], ["exporter", "display"])
                 or "sections" in m.split(".")}
        assert not above, path.name


def test_only_the_package_the_report_and_the_cli_import_the_builders():
    builders = "exporter.display.sections"
    importers = {str(path.relative_to(EXPORTER)) for path in EXPORTER.rglob("*.py")
                 if any(m == builders or m.startswith(builders + ".") for m in _project_imports(path))
                 and "sections" not in path.parts}
    assert importers <= {"__init__.py", "report.py", "cli.py"}


def test_every_result_type_has_a_builder():
    from exporter.presentation import registered

    assert {"exporter.session.Session", "exporter.verify.results.VerifyResult", "exporter.guards.Guards",
            "exporter.shapes.outcomes.DimOutcomes", "exporter.shapes.fixes.SuggestedFixes",
            "exporter.bench.latency.BenchmarkResult", "exporter.bench.latency.SweepResult",
            "exporter.bench.compare.Comparison", "exporter.bench.profiling.ProfileResult",
            "exporter.errors.Failure", "exporter.graphs.mapping.NodeMapping",
            "exporter.verify.contract.ContractReport", "exporter.verify.divergence.Divergence",
            "exporter.bench.stats.LatencyStats", "exporter.recording.recording.Recorder",
            "exporter.sweep.results.SweepResults", "exporter.sweep.diff.SweepDiff"} <= set(registered())


# -- numbers, cells, tables -----------------------------------------------------------------------


@pytest.mark.parametrize(("value", "text"), [
    (0.0, "0"), (-0.0, "0"), (3.0, "3"), (1 / 3, "0.333"), (2.5e-8, "2.5e-08"), (12.3456, "12.3"), (0.25, "0.25"),
    (1234.5, "1234"), (0.012345, "0.0123"), (math.inf, "inf"), (25_000_000.5, "2.5e+07"), (0.1 + 0.2, "0.3"),
])
def test_numbers_read_at_three_significant_digits_and_zero_is_zero(value, text):
    assert number(value) == text


def _wide_table() -> Table:
    long = "onnxruntime error: Got invalid dimensions for input: x for the following indices index: 0 Got: 7"
    return Table.from_rows(
        ("case", "max abs diff", "runs", "detail"),
        [("example", 0.0, 3, None), ("larger", 1.5e-8, float("nan"), long), ("odd", 12.345, 10, "")],
    )


def test_table_text_right_aligns_numbers_and_leaves_missing_values_blank():
    table = _wide_table()
    lines = table.text_lines()
    assert lines[0].startswith("case     max abs diff  runs  detail")
    assert lines[1] == "example             0     3"
    assert lines[3] == "odd              12.3    10"
    assert table.align == ("l", "r", "r", "l")


def test_table_html_is_made_for_reading():
    markup = _wide_table().to_html()
    page = Visible(markup)
    assert page.scroll_styles and "overflow:auto" in page.scroll_styles[0] and "max-width:100%" in page.scroll_styles[0]
    assert all("position:sticky" in s and "white-space:nowrap" in s for s in page.header_styles)
    numbers = [(style, text) for style, text in page.cells if text in ("0", "1.5e-08", "12.3", "3", "10")]
    assert len(numbers) == 5 and all("text-align:right" in style for style, _ in numbers)
    assert all("white-space:nowrap" in style for style, _ in page.cells)  # rows stay one line high
    for bad in ("None", "nan", "e+00"):
        assert bad not in page.text
    cut = [text for _, text in page.cells if text.endswith("…")]
    assert cut == ["onnxruntime error: Got invalid dimensions for i…"]
    assert 'title="onnxruntime error: Got invalid dimensions for input: x for the following' in markup
    assert "<details" in markup and "for the following indices index: 0 Got: 7" in markup  # the whole text, folded


# -- blocks ---------------------------------------------------------------------------------------


def _section() -> Section:
    return Section("Verification", Badge.status("passed"), (
        KeyValues((("cases", "3"),)),
        Table.from_rows(("case", "status", "max abs diff"), [("example", "pass", 0.0), ("odd", "fail", 0.25)],
                        badges=("status",)),
        Details("how to reproduce", (Code("session.verify(sizes={'batch': [5]})"),)),
        Details("traceback", (Note("Traceback (most recent call last): ..."),), in_text=False),
    ), verdict=Verdict("Verification FAILED: wrong at batch=5", "fail"))


def test_section_text_is_verdict_first_with_details_indented_and_tracebacks_left_out():
    assert _section().to_text() == (
        "Verification [pass]\n"
        "  Verification FAILED: wrong at batch=5\n"
        "  cases: 3\n"
        "  case     status  max abs diff\n"
        "  example  pass               0\n"
        "  odd      fail            0.25\n"
        "  how to reproduce:\n"
        "    session.verify(sizes={'batch': [5]})"
    )


def test_section_markdown_is_exact():
    assert _section().to_markdown() == (
        "## Verification `pass`\n\n"
        "**Verification FAILED: wrong at batch=5**\n\n"
        "- **cases**: 3\n\n"
        "| case | status | max abs diff |\n"
        "| --- | --- | ---: |\n"
        "| example | pass | 0 |\n"
        "| odd | fail | 0.25 |\n\n"
        "*how to reproduce*\n\n"
        "```python\n"
        "session.verify(sizes={'batch': [5]})\n"
        "```"
    )


def test_markdown_escapes_markup_from_user_strings():
    section = Section("M", None, (Table.from_rows(("a", "code"), [("<b>*x*</b>", "a | b")], code=("code",)),))
    markdown = section.to_markdown()
    assert r"\<b\>\*x\*\</b\>" in markdown and r"`a \| b`" in markdown


def test_section_html_puts_the_verdict_first_and_folds_details():
    markup = _section().to_html()
    assert markup.index("oxw-verdict") < markup.index("oxw-table")
    page = Visible(markup)
    assert "Traceback" not in page.text and "session.verify" not in page.text  # folded
    assert "Verification FAILED: wrong at batch=5" in page.text


def _bullets() -> Section:
    return Section("Verification", Badge.status("failed"), (Bullets((
        Item("wrong at batch=7", (("likely cause", "a branch on x.shape[0]"), ("fix", "make it <static>")),
             tone="fail", tag="wrong_at_size"),
        Item("x.shape[0]: fixed to 3", badge=Badge.status("error")),
    )),), verdict=Verdict("Verification FAILED: wrong at batch=7", "fail"), verdict_as_title=True)


def test_bullets_read_as_sentences_with_their_cause_and_fix_under_them():
    assert _bullets().to_text() == (
        "Verification FAILED: wrong at batch=7\n"  # the verdict stands for the title in text
        "  - wrong at batch=7\n"
        "      likely cause: a branch on x.shape[0]\n"
        "      fix: make it <static>\n"
        "  - [failed] x.shape[0]: fixed to 3"
    )
    assert "- `wrong_at_size` wrong at batch=7\n  - *likely cause*: a branch on x.shape[0]" in _bullets().to_markdown()


def test_bullets_are_an_html_list_with_the_kind_as_a_tag():
    markup = _bullets().to_html()
    assert markup.count("<li") == 2 and "<ul" in markup and "<h3" in markup  # HTML keeps the heading
    assert "wrong_at_size wrong at batch=7 likely cause : a branch on x.shape[0]" in Visible(markup).text
    assert "&lt;static&gt;" in markup and "<static>" not in markup


# -- failures -------------------------------------------------------------------------------------


def _failure() -> Failure:
    torch_said = ("Not all values of seq = L['x'].size()[1] in the specified range seq <= 512 satisfy the "
                  "generated guard 5 <= L['x'].size()[1] and L['x'].size()[1] <= 512")
    return Failure(
        "capture", "CaptureError",
        "x.shape[1] (seq): sizes 1–4 take another branch at `if x.shape[1] > 4`; the range [1, 512] cannot hold",
        hint="change these dims:\nx.shape[1]: Dim('seq', min=5, max=512)",
        source="Cell In[6], line 7 in forward: if x.shape[1] > 4:",
        traceback="Traceback (most recent call last):\n  File ...\ntorch._dynamo.exc.UserError: " + torch_said,
        library_text=torch_said,
    )


def test_a_failure_reads_as_a_sentence_its_line_and_the_fix():
    failure = _failure()
    assert repr(failure) == failure.summary() == render(failure).to_text() == (
        "capture failed [failed]\n"
        "  x.shape[1] (seq): sizes 1–4 take another branch at `if x.shape[1] > 4`; the range [1, 512] cannot hold\n"
        "  at: Cell In[6], line 7 in forward: if x.shape[1] > 4:\n"
        "  fix: change these dims:\n"
        "  x.shape[1]: Dim('seq', min=5, max=512)"
    )
    assert str(failure).startswith("[capture] x.shape[1] (seq)")  # an error's own text is unchanged


def test_a_failure_in_html_shows_torchs_text_and_the_traceback_only_folded():
    markup = repr_html(_failure())
    page = Visible(markup)
    assert "L['" not in page.text and "Traceback" not in page.text
    assert page.text.count("sizes 1–4 take another branch") == 1
    assert re.findall(r"<summary[^>]*>([^<]*)</summary>", markup) == ["torch said", "traceback"]  # one click away
    assert "L[&#x27;x&#x27;].size()[1]" in markup  # torch's own words are kept, escaped, in the fold


def test_torch_names_in_an_unrewritten_message_read_as_the_users():
    failure = Failure("capture", "UserError", "Constraints violated: L['x'].size()[1] and L['cache'][0].size()[2]")
    assert render(failure).to_text().splitlines()[1] == (
        "  UserError: Constraints violated: x.shape[1] and cache[0].shape[2]")


# -- results: one text, from the section ------------------------------------------------------------


def _profile():
    from exporter.bench.profiling import NodeTime, ProfileResult

    nodes = (NodeTime("mm_0", "MatMul", "MatMul", "layer", "mm", 2, 300.0),
             NodeTime("relu_0", "Relu", "Relu", "", "relu", 2, 100.0))
    return ProfileResult(runs=2, nodes=nodes)


def test_a_profile_has_a_status_and_its_text_is_its_section():
    from exporter.bench.profiling import ProfileResult

    profile = _profile()
    assert profile.status == Status.OK
    assert ProfileResult(0, (), error="no onnxruntime").status == Status.FAILED
    assert ProfileResult(0, (), cancelled=True).status == Status.CANCELLED
    assert repr(profile) == profile.summary() == (
        "Profile [ok]\n"
        "  200 µs of kernels per run over 2 run(s)\n"
        "  by op type\n"
        "  op type  nodes  µs per run  share\n"
        "  MatMul       1         150    75%\n"
        "  Relu         1          50    25%\n"
        "  by module\n"
        "  module       nodes  µs per run  share\n"
        "  layer            1         150    75%\n"
        "  (top level)      1          50    25%"
    )


def test_guards_text_and_html_come_from_one_section():
    from exporter.guards import Guard, Guards

    guards = Guards((Guard("guard", "x.shape[0] > 2", "s77 > 2", axes=(("x", 0),), file="/src/m.py", line=3,
                           code="if x.shape[0] > 2:"),), "nonstrict")
    assert repr(guards) == guards.summary() == render(guards).to_text()
    assert guards._repr_html_() == repr_html(guards)
    assert "## Guards `1 guard`" in to_markdown(guards)


def test_a_result_whose_rendering_fails_still_has_a_repr():
    from exporter.guards import Guards

    broken = Guards(records=(object(),), strategy="nonstrict")
    assert repr(broken).startswith("<Guards: could not be shown (AttributeError")
    assert "display error" in broken._repr_html_()


# -- a real rejected spec, as the session shows it --------------------------------------------------


@pytest.fixture(scope="module")
def rejected():
    import torch

    from exporter import Dim, ExportOptions, Session

    class Branchy(torch.nn.Module):
        def forward(self, x):
            if x.shape[1] > 4:
                return x * 2
            return x + 1

    session = Session(Branchy(), (torch.randn(2, 8, 3),),
                      options=ExportOptions(dynamic_shapes={"x": {1: Dim("seq", min=1, max=512)}}))
    session.run()
    session.dims  # noqa: B018 - computed, so the session's summary shows them
    return session


def test_a_rejected_spec_is_said_once_in_the_users_terms_and_healthy_axes_are_not_failed(rejected):
    markup = repr_html(rejected)
    page = Visible(markup)
    for never in ("L['", "Traceback", "None", "nan", "e+00"):
        assert never not in page.text, never
    failure = rejected.failed_stage.failure
    assert page.text.count(failure.message.splitlines()[0].strip()) == 1  # the verdict, nowhere else
    rows = {text for _, text in page.cells}
    assert "x.1" in rows
    dims = render(rejected.dims).to_text().splitlines()
    assert [line.split()[3] for line in dims if line.strip().startswith(("x.0", "x.2"))] == ["static", "static"]
    assert "failed" in next(line for line in dims if line.strip().startswith("x.1"))


def test_a_rejected_spec_in_text_has_no_traceback_and_names_the_fix(rejected):
    text = rejected.summary()
    assert text.startswith("Session: Branchy [failed]\n  capture failed: ")
    assert "Traceback" not in text and "L['" not in text
    assert "Dim('seq', min=5, max=512)" in text
