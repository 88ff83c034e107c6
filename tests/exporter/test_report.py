"""exporter.report: one standalone HTML file per session, offline, escaped, never failing."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest
import torch

from exporter import Dim, ExportOptions, Session
from exporter.errors import SerializeError
from exporter.report import report_html, write_report

from html_page import Page

EVIL = "<script>alert(1)</script>"
SECTIONS = ["summary", "stages", "dims", "guards", "graphs", "verification", "benchmark"]


def external_references(markup: str, page: Page) -> list[str]:
    """Everything that would make a browser fetch from the network."""
    found = [f"{tag} {name}={value}" for tag, name, value in page.attrs
             if name in ("src", "href", "xlink:href", "action", "data", "poster", "srcset")
             and re.match(r"\s*(https?:)?//", value)]
    found += re.findall(r"url\(\s*['\"]?\s*(?:https?:)?//[^)]*\)|@import[^;]*", markup)
    found += [tag for tag in page.tags if tag in ("script", "link", "iframe", "object", "embed")]
    return found


class Double(torch.nn.Module):
    def forward(self, x):
        return x * 2


@pytest.fixture(scope="module")
def exported():
    session = Session(Double(), (torch.randn(3, 4),), options=ExportOptions(dynamic_shapes={"x": {0: Dim("batch")}}))
    session.run()
    return session


@pytest.fixture(scope="module")
def evil_failed():
    def forward(self, **inputs):
        raise RuntimeError(f"bad input {EVIL}")

    Evil = type(f"Evil{EVIL}", (torch.nn.Module,), {"forward": forward})
    return Session(Evil(), (), {EVIL: torch.randn(2, 3)})


@pytest.fixture(scope="module")
def full_report(exported, tmp_path_factory):
    path = tmp_path_factory.mktemp("report") / "report.html"
    written = write_report(exported, path, verify=exported.verify(), benchmark=exported.benchmark(budget=0.05, min_runs=5))
    assert written == path
    markup = path.read_text(encoding="utf-8")
    return markup, Page(markup)


def test_report_has_every_section_in_order(full_report):
    markup, page = full_report
    assert [i for i in page.sections if i in SECTIONS] == SECTIONS
    assert markup.startswith("<!DOCTYPE html>")
    assert "ONNX export report: Double" in page.all_text


def test_report_sections_hold_stages_dims_verification_and_benchmark(full_report):
    _, page = full_report
    assert "capture ok" in page.section_text("stages")
    assert "optimize ok" in page.section_text("stages")
    assert "nonstrict ok" in page.section_text("stages")  # the capture attempt
    assert "x.0 3 Dim('batch') dynamic [1, inf] batch" in page.section_text("dims")
    assert "no shape guards (nonstrict)" in page.section_text("guards")
    assert page.section_text("verification").startswith("Verification pass Verification PASSED")  # badge, verdict
    assert "example batch=3 pass" in page.section_text("verification")
    assert "onnxruntime" in page.section_text("benchmark") and "eager" in page.section_text("benchmark")


@pytest.mark.needs_dot  # skipped without dot outside CI; CI installs graphviz and fails without it
def test_report_embeds_the_graphs_as_inline_svg(full_report):
    _, page = full_report
    assert "svg" in page.tags
    assert re.search(r"FX \(decomposed\): \d+ nodes.*ONNX \(optimized\): \d+ nodes", page.section_text("graphs"))


def test_report_opens_offline(full_report):
    markup, page = full_report
    assert external_references(markup, page) == []
    assert "default-src 'none'" in markup  # the page itself forbids fetching anything


def test_report_without_analyses_says_how_to_add_them():
    fresh = Session(Double(), (torch.randn(3, 4),))  # nothing verified or timed on its model
    page = Page(report_html(fresh, graphs=False))
    assert "graphs" not in page.sections
    assert "not run: pass verify=session.verify() (or verify=True)" in page.section_text("verification")
    assert "not run: pass benchmark=session.benchmark()" in page.section_text("benchmark")


def test_report_shows_the_analyses_the_session_keeps_without_being_passed_them():
    session = Session(Double(), (torch.randn(3, 4),), options=ExportOptions(dynamic_shapes={"x": {0: Dim("batch")}}))
    result = session.verify()  # as the widget's Verify button does
    derived = session.with_options(optimize=True)  # the same exported model: the same analyses
    page = Page(report_html(derived, graphs=False))
    assert page.section_text("verification").startswith(f"Verification pass {result.verdict}")
    assert "not run" in page.section_text("benchmark")


def test_report_of_a_failed_session_shows_the_failure_escaped(evil_failed, tmp_path):
    path = write_report(evil_failed, tmp_path / "failed.html", verify=True)
    markup = path.read_text(encoding="utf-8")
    page = Page(markup)
    assert [i for i in page.sections if i in SECTIONS] == SECTIONS
    assert "script" not in page.tags
    assert external_references(markup, page) == []
    assert f"ONNX export report: Evil{EVIL}" in page.all_text
    assert f"RuntimeError: bad input {EVIL}" in page.section_text("stages")
    assert "capture failed" in page.section_text("stages")
    assert f"{EVIL}.0" in page.section_text("dims")
    assert "no graphs: the export did not finish" in page.section_text("graphs")
    assert page.section_text("verification").startswith("Verification failed Verification could not run")


def test_report_to_a_directory_is_refused_and_leaves_nothing(exported, tmp_path):
    with pytest.raises(SerializeError, match="is a directory"):
        write_report(exported, tmp_path, graphs=False)
    assert list(tmp_path.iterdir()) == []


def test_report_replaces_an_existing_file_whole(exported, tmp_path):
    path = tmp_path / "report.html"
    path.write_text("old")
    write_report(exported, path, graphs=False)
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]


def test_writing_a_report_imports_no_notebook_or_plotting_library(tmp_path):
    script = textwrap.dedent(f"""
        import sys, torch
        from exporter import Session
        from exporter.report import write_report
        session = Session(torch.nn.ReLU(), (torch.randn(2, 3),))
        write_report(session, {str(tmp_path / 'r.html')!r})
        print(' '.join(sorted(sys.modules)))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert not set(out.stdout.split()) & {"IPython", "ipywidgets", "matplotlib"}
    assert (tmp_path / "r.html").stat().st_size > 0
