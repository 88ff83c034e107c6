"""One verdict for the export on screen (``session.verdict``), read by every surface: a spec
changed after a failed verify is "not verified" in the summary, the report's headline and its
Benchmark section until verify runs on it; a failed verify is "failed"; only a verify of this
spec that passed reads "passed" (or a green "ok"). Another spec's verify never counts.

The model is right only at its example size: ``x.shape[0] == 1`` takes a branch, and with
AUTO size-oblivious capture keeps the dim symbolic while baking that branch in, so verify
fails at size 2. Made STATIC, the same model exports right (verify compares the example only).
"""

from __future__ import annotations

import pytest
import torch

from exporter import AUTO, DYNAMIC, STATIC, ExportOptions, Session
from exporter import verdict as verdict_module
from exporter.errors import Status
from exporter.report import report_html
from exporter.verdict import ExportVerdict, export_verdict, qualified_status, verify_again

from html_page import Page

QUICK = {"budget": 0.05, "min_runs": 5}


class RightOnlyAtOne(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] == 1:
            return x * 2
        return x + 1


@pytest.fixture(scope="module")
def failed():
    """Exported with AUTO and verified: wrong at size 2, and timed."""
    session = Session(RightOnlyAtOne(), (torch.randn(1, 4),), options=ExportOptions(dynamic_shapes={"x": {0: AUTO}}))
    assert session.verify().status == "failed"
    session.benchmark(**QUICK)
    return session


@pytest.fixture(scope="module")
def changed(failed):
    """The spec changed after the failed verify (STATIC), exported, not verified, then timed."""
    session = failed.with_axis("x", 0, STATIC)
    session.run()
    assert session.succeeded
    return session


@pytest.fixture(scope="module")
def passed(failed):
    """The STATIC spec in another session of the family, verified: passes."""
    session = failed.with_axis("x", 0, STATIC)
    assert session.verify().status == "passed"
    return session


@pytest.fixture
def no_reverify(monkeypatch):
    """The report never verifies on its own (the rule is tested on its own below)."""
    monkeypatch.setattr(verdict_module, "AUTO_VERIFY_SECONDS", 0.0)


def headline(session):
    return session.summary().splitlines()[:2]


def report_section(session, name, **kwargs):
    return Page(report_html(session, graphs=False, **kwargs)).section_text(name)


# -- the verdict itself ---------------------------------------------------------------------------

def test_a_failed_verify_makes_the_export_failed_at_verify(failed):
    verdict = failed.verdict
    assert (verdict.word, verdict.failed, verdict.passed) == ("failed", "verify", False)
    assert verdict.verify is failed.last_verify and verdict.text == failed.last_verify.verdict


def test_a_spec_changed_after_a_failed_verify_is_not_verified_and_the_old_verify_does_not_count(failed, changed):
    verdict = changed.verdict
    assert (verdict.word, verdict.verify, verdict.exported) == ("not verified", None, True)
    assert changed.last_verify is None and failed.last_verify is not None  # kept with the other exported model
    assert "not verified: verify has not run on this spec" == verdict.text


def test_the_changed_spec_verified_and_passing_reads_passed_and_going_back_reads_failed_again(failed, changed, passed):
    assert passed.verdict.passed and passed.verdict.word == "passed"
    assert changed.verdict.passed  # the same spec and exported model: its verify is found
    back = passed.with_axis("x", 0, AUTO)
    back.run()
    assert back.verdict.word == "failed" and back.verdict.verify is failed.last_verify


@pytest.mark.parametrize(("status", "word"), [
    ("passed", "passed"), ("failed", "failed"), ("not_verified", "not verified"), ("error", "not verified"),
    ("cancelled", "not verified"),
])
def test_each_verify_status_gives_its_verdict_word(status, word, failed):
    class Verified:
        verdict, error, seconds = f"Verification {status}", None, 0.1

    Verified.status = Status(status)
    assert export_verdict(failed.stages, Verified()).word == word


def test_an_export_that_failed_or_did_not_finish_is_never_passed_whatever_the_verify(failed):
    class Passed:
        status, verdict, error, seconds = Status.PASSED, "Verification PASSED", None, 0.1

    capture = failed.stages[0]
    assert export_verdict(failed.stages[:1], Passed()).word == "not run"
    broken = type(capture)("translate", Status.FAILED, 0.0, detail="boom")
    assert export_verdict((capture, broken), Passed()).word == "failed"


def test_a_timing_is_ok_only_beside_a_model_verified_as_passed():
    passed = ExportVerdict("passed", "Verification PASSED", exported=True)
    assert qualified_status("ok", passed) == "ok"
    assert qualified_status("ok", ExportVerdict("failed", "...", failed="verify", exported=True)) == "verify failed"
    assert qualified_status("ok", ExportVerdict("not verified", "...", exported=True)) == "not verified"
    assert qualified_status("failed", ExportVerdict("not verified", "...", exported=True)) == "failed"


def test_verify_runs_again_on_its_own_only_without_a_verify_of_its_own_and_after_a_quick_one():
    assert verify_again(None, 0.5, 2.0)
    assert not verify_again(None, 3.0, 2.0)
    assert not verify_again(object(), 0.5, 2.0)  # it has its own
    assert not verify_again(None, None, 2.0)  # nothing verified before
    assert not verify_again(None, 0.5, 0)  # 0: never


# -- summary() ------------------------------------------------------------------------------------

def test_summary_heads_a_failed_verify_failed_with_its_verdict(failed):
    title, line = headline(failed)
    assert title == "Session: RightOnlyAtOne [failed]"
    assert "; Verification FAILED" in line


def test_summary_of_a_changed_spec_says_not_verified_never_ok(failed):
    other = failed.with_axis("x", 0, STATIC).with_axis("x", 1, AUTO)  # another spec: exported, never verified
    other.run()
    title, line = headline(other)
    assert title == "Session: RightOnlyAtOne [not verified]"
    assert line.endswith("not verified: verify has not run on this spec")
    assert "[ok]" not in other.summary()


def test_summary_of_the_changed_spec_verified_says_passed(passed):
    title, line = headline(passed)
    assert title == "Session: RightOnlyAtOne [passed]" and "; Verification PASSED" in line


def test_summary_shows_a_timing_of_a_model_that_fails_verify_as_such(failed):
    rows = {line.split()[0]: line.split()[1:3] for line in failed.summary().splitlines()[1:] if line.startswith("  benchmark")}
    assert rows["benchmark"] == ["verify", "failed"]


# -- report() -------------------------------------------------------------------------------------

def test_report_heads_a_failed_verify_failed_and_its_timing_is_not_a_green_ok(failed, no_reverify):
    page = Page(report_html(failed, graphs=False))
    assert page.section_text("summary").startswith("Summary failed exported in")
    assert page.section_text("stages").startswith("Stages exported")  # the stages ran: no verdict on the numbers
    benchmark = page.section_text("benchmark")
    assert benchmark.startswith("Benchmark verify failed onnxruntime"), benchmark  # the timing's badge: never ok
    assert "the model timed fails verify: these are the timings of wrong numbers" in benchmark


def test_report_of_a_spec_changed_after_a_failed_verify_says_not_verified(failed, no_reverify):
    other = failed.with_axis("x", 1, AUTO)  # the Swin case: toggle, save, report
    other.run()
    summary = report_section(other, "summary")
    assert summary.startswith("Summary not verified exported in"), summary
    assert "not verified: verify has not run on this spec" in summary
    assert "not run" in report_section(other, "verification")
    other.benchmark(**QUICK)
    benchmark = report_section(other, "benchmark")
    assert benchmark.startswith("Benchmark not verified onnxruntime"), benchmark
    assert "the model timed is not verified: the timings say nothing of its numbers" in benchmark
    assert other.last_verify is None  # the report verified nothing on its own


def test_report_of_the_changed_spec_verified_says_passed_and_times_in_green(passed, no_reverify):
    passed.benchmark(**QUICK)
    page = Page(report_html(passed, graphs=False))
    assert page.section_text("summary").startswith("Summary passed exported in")
    assert page.section_text("benchmark").startswith("Benchmark ok")


def test_report_never_counts_a_verification_of_another_spec_given_to_it(failed, passed, no_reverify):
    other = failed.with_axis("x", 1, DYNAMIC)
    other.run()
    page = Page(report_html(other, graphs=False, verify=passed.last_verify))
    assert page.section_text("summary").startswith("Summary not verified")
    assert "not the one kept with this exported model" in page.section_text("verification")


def test_report_verifies_a_changed_spec_on_its_own_when_the_last_verify_was_quick(failed, monkeypatch):
    monkeypatch.setattr(verdict_module, "AUTO_VERIFY_SECONDS", 3600.0)
    other = failed.with_axis("x", 0, STATIC).with_axis("x", 1, DYNAMIC)
    other.run()
    summary = report_section(other, "summary")
    assert other.last_verify is not None and other.last_verify.ok
    assert summary.startswith("Summary passed exported in")


# -- the recorded-call check says what failed ------------------------------------------------------

class Double(torch.nn.Module):
    def forward(self, x):
        return x * 2


class Call:
    """A recorded call as :class:`exporter.verify.recorded.RecordedCall` reads it."""

    def __init__(self, index, x, recorded, intact=True):
        self.index, self._x, self._recorded, self.intact = index, x, recorded, intact

    def inputs(self):
        return (self._x,), {}

    def output_tensors(self):
        return [self._recorded]


class Calls:
    def __init__(self, *calls):
        self.name, self.calls = "decode", calls


@pytest.fixture(scope="module")
def double():
    session = Session(Double(), (torch.randn(2, 3),))  # static: onnxruntime refuses another shape
    session.run()
    return session


def checked(session, *calls):
    result = session.analyze("check_recorded", group=Calls(*calls))
    section = result.summary().splitlines()
    return result, section[0], section[1].strip()


def test_a_recorded_call_onnxruntime_refuses_is_failed_and_named_never_all_within_tolerance(double):
    x, bigger = torch.randn(2, 3), torch.randn(5, 3)
    result, title, verdict = checked(double, Call(0, x, x * 2), Call(2, bigger, bigger * 2))
    assert result.status == "failed" and title.endswith("[failed]")
    assert "all within tolerance" not in verdict
    assert verdict.startswith("ONNX vs recorded eager outputs: 1 of 2 recorded decode calls compared (1 outputs each), "
                              "each compared one within tolerance; onnxruntime refused 1 (first, call 2: ")


def test_a_recorded_call_that_differs_is_named_with_how_it_differs(double):
    x = torch.randn(2, 3)
    result, title, verdict = checked(double, Call(0, x, x * 2), Call(1, x, x * 2 + 1))
    assert result.status == "failed" and title.endswith("[failed]")
    assert ", 1 differ (first, call 1: output " in verdict and "max abs diff 1" in verdict


def test_a_recorded_call_written_in_place_is_not_compared_and_not_called_a_failure(double):
    x = torch.randn(2, 3)
    result, title, verdict = checked(double, Call(0, x, x * 2), Call(1, x, x * 2, intact=False))
    assert result.status == "skipped" and title.endswith("[skipped]")
    assert verdict.endswith("each compared one within tolerance; 1 not compared "
                            "(a kept tensor was written in place after it was recorded)")


def test_every_recorded_call_agreeing_still_reads_all_within_tolerance(double):
    x = torch.randn(2, 3)
    result, title, verdict = checked(double, Call(0, x, x * 2), Call(1, x, x * 2))
    assert result.ok and title.endswith("[ok]")
    assert verdict == "ONNX vs recorded eager outputs: 2 of 2 recorded decode calls compared (1 outputs each), all within tolerance"
