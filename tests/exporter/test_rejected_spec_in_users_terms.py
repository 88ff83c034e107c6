"""A spec torch rejects is said once, in the user's terms: which sizes the code excludes, at which
line, why the requested range cannot hold and the fix (the one ``apply_suggested_fixes()``
applies); torch's own text is kept apart (``library_text``, "torch said"); only the failing
axis is "failed", the rows that are fine keep their meaning."""

from __future__ import annotations

import torch

from exporter import STATIC, Dim, ExportOptions, Session
from exporter.dims import Name


class Branches(torch.nn.Module):
    def forward(self, x):
        y = x.relu()
        if x.shape[1] > 4:
            return y * 2
        return y + 1


class PositionTable(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(128, 4))

    def forward(self, x):
        return x + self.table[: x.shape[1]]


class NotOne(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] == 1:
            return x
        return x * 2


LINE = Branches.forward.__code__.co_firstlineno + 2  # the `if x.shape[1] > 4:` line


def rejected(model, args, spec):
    session = Session(model, args, {}, ExportOptions(dynamic_shapes=spec))
    assert session.run("capture").status == "failed"
    return session


def test_the_rejected_range_is_said_once_as_the_user_would_say_it():
    session = rejected(Branches(), (torch.randn(2, 8, 3),), {"x": {1: Dim("seq", min=1, max=512)}})
    failure = session.failed_stage.failure
    problem = (f"x.shape[1] (seq): sizes 1–4 take another branch at `if x.shape[1] > 4` "
               f"(test_rejected_spec_in_users_terms.py:{LINE}); the range [1, 512] cannot hold")
    assert failure.message == problem
    assert failure.hint == ("change these dims (session.apply_suggested_fixes() applies them):\n"
                            "x.shape[1]: Dim('seq', min=5, max=512)")
    assert failure.source.endswith(f"test_rejected_spec_in_users_terms.py:{LINE} in forward: if x.shape[1] > 4:")
    text = str(failure)
    assert text.count("sizes 1–4") == 1 and "Not all values" not in text and "L['x']" not in text
    assert "tried:" not in text  # the other strategies were skipped: the spec was rejected
    assert "Not all values of seq = L['x'].size()[1] in the specified range" in failure.library_text
    assert all("For more information" not in (a.first_error_line or "") for a in session.attempts)


def test_only_the_failing_axis_is_failed_and_the_static_rows_stay_static():
    session = rejected(Branches(), (torch.randn(2, 8, 3),), {"x": {1: Dim("seq", min=1, max=512)}})
    dims = session.dims
    assert [(o.name, o.obtained, o.min, o.max, o.differs) for o in dims if o.name != "x.1"] == [
        ("x.0", "static", 2, 2, False), ("x.2", "static", 3, 3, False)]
    row = dims["x", 1]
    assert row.obtained == "failed"
    assert row.reason == "sizes 1–4 take another branch at `if x.shape[1] > 4`; fix: Dim('seq', min=5, max=512)"
    assert row.source.endswith(f":{LINE}: if x.shape[1] > 4:")
    assert dims.error == "the dim spec was rejected"
    (said,) = dims.rejected
    assert said.sentence == (f"x.shape[1] (seq): sizes 1–4 take another branch at `if x.shape[1] > 4` "
                             f"(test_rejected_spec_in_users_terms.py:{LINE}); the range [1, 512] cannot hold. "
                             "Fix: seq in [5, 512]")


def test_the_fix_in_the_sentence_is_the_one_apply_suggested_fixes_applies():
    session = rejected(Branches(), (torch.randn(2, 8, 3),), {"x": {1: Dim("seq", min=1, max=512)}})
    (said,) = session.dims.rejected
    fixed = session.apply_suggested_fixes()
    assert fixed.run("capture").status == "ok"
    assert fixed.spec.policy("x", 1) == said.fix == Dim("seq", min=5, max=512)
    assert (fixed.dims["x", 1].min, fixed.dims["x", 1].max) == (5, 512)


def test_a_bound_outside_a_branch_names_the_guard_and_the_line():
    session = rejected(PositionTable(), (torch.randn(2, 16, 4),), {"x": {1: Dim("seq")}})
    failure = session.failed_stage.failure
    assert failure.message.startswith("x.shape[1] (seq): sizes above 128 fail `")
    assert "at `return x + self.table[: x.shape[1]]` (test_rejected_spec_in_users_terms.py:" in failure.message
    assert failure.message.endswith("; the range [0, inf] cannot hold")
    assert failure.source.endswith("in forward: return x + self.table[: x.shape[1]]")  # the cited guard's line
    (said,) = session.dims.rejected
    assert said.fix_text == "seq in [0, 128]" and said.fix == Dim("seq", max=128)


def test_only_the_sizes_the_guard_rejects_are_named_in_the_singular_for_one():
    # [0, 64] minus the allowed [2, 64] is 0 and 1, but `x.shape[0] == 1` sends only size 1 elsewhere.
    session = rejected(NotOne(), (torch.randn(3, 4),), {"x": {0: Dim("batch", max=64)}})
    (said,) = session.dims.rejected
    assert said.excluded == "size 1"
    assert said.problem.startswith("x.shape[0] (batch): size 1 takes another branch at `if x.shape[0] == 1` (")
    assert said.problem.endswith("; the range [0, 64] cannot hold")
    assert said.fix_text == "batch in [2, 64]"


def test_a_name_is_not_rejected_and_an_unrelated_failure_leaves_other_rows_not_run():
    named = Session(Branches(), (torch.randn(2, 8, 3),), {}, ExportOptions(dynamic_shapes={"x": {1: "seq"}}))
    assert named.run("capture").status == "ok" and named.spec.policy("x", 1) == Name("seq")

    class Raises(torch.nn.Module):
        def forward(self, x):
            raise RuntimeError("no trace for you")

    broken = rejected(Raises(), (torch.randn(2, 3),), {"x": {0: "batch"}})
    assert [(o.name, o.obtained) for o in broken.dims] == [("x.0", "not run"), ("x.1", "static")]
    assert broken.dims.rejected == () and broken.failed_stage.failure.library_text == "no trace for you"
    assert broken.spec.policy("x", 1) is STATIC


class AddTwo(torch.nn.Module):
    def forward(self, x, y):
        return x + y


def test_two_dims_found_equal_are_no_range_a_guard_rejects_and_keep_torchs_statement():
    session = rejected(AddTwo(), (torch.randn(4, 3), torch.randn(4, 3)),
                       {"x": {0: Dim("a")}, "y": {0: Dim("dx", min=3, max=6)}})
    assert session.dims.rejected == ()  # no guard narrows 'a': its equality with dx does
    assert "must always be equal" in session.failed_stage.failure.message
    assert session.dims["x", 0].obtained == session.dims["y", 0].obtained == "failed"
    assert session.apply_suggested_fixes().run("capture").status == "ok"


class BranchAndTable(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(128, 4))

    def forward(self, x):
        if x.shape[1] > 4:
            x = x * 2
        return x + self.table[: x.shape[1]]


def test_each_end_of_the_range_cites_the_guard_that_sets_it():
    session = rejected(BranchAndTable(), (torch.randn(2, 16, 4),), {"x": {1: Dim("seq")}})
    (said,) = session.dims.rejected
    assert said.allowed == (5, 128) and said.fix == Dim("seq", min=5, max=128)
    low, high = said.exclusions
    assert low.text(located=False) == "sizes 0–4 take another branch at `if x.shape[1] > 4`"
    assert high.text(located=False).startswith("sizes above 128 fail `")
    assert high.text(located=False).endswith("at `return x + self.table[: x.shape[1]]`")
    assert said.excluded == "sizes 0–4 and above 128"
    assert session.failed_stage.failure.message == said.problem


def test_the_diagnosis_reads_the_spec_and_inputs_it_is_given_not_torch_s_form_of_them():
    from exporter.diagnose import capture_error
    from exporter.pipeline.capture import capture
    from exporter.events import Observer

    session = rejected(Branches(), (torch.randn(2, 8, 3),), {"x": {1: Dim("seq", min=1, max=512)}})
    undiagnosed = capture(session.model, session.inputs, session.spec, observer=Observer()).error
    assert "change these dims" not in str(undiagnosed)  # the stage alone says what failed, not the fix
    bare = capture_error(session.attempts)  # no spec: no solved fix, no range in the user's terms
    assert "x.shape[1]: Dim('seq', min=5, max=512)" not in str(bare)
    given = capture_error(session.attempts, session.spec, session.inputs, session.model)
    assert given.hint == session.failed_stage.error.hint
    assert given.hint.endswith("x.shape[1]: Dim('seq', min=5, max=512)")
