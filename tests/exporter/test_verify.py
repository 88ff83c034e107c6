"""Shape-sweep verification: ONNX models that are right at the example size but wrong (or
failing) at other sizes are flagged with the size and the cause; correct dynamic models pass
at every swept size; the ONNX contract is checked against the dim spec; the first divergent
node is mapped back to the FX node, module and source line.

Observed on torch 2.13 (what these tests are built on): a shape-dependent Python branch with
AUTO on the example size 3 is *specialized* by capture (guard ``L['x'].size()[0] == 3``); the
translator would name that ONNX dim ``'3'`` (accepting any size and silently computing the
size-3 branch), so exporter.pipeline.translate makes it the static 3 it is, and onnxruntime refuses
other sizes. With a size-1 example, size-oblivious capture keeps the dim symbolic (range
[1, 2]) and bakes in the ``== 1`` branch: wrong at size 2 *inside* the obtained range, and at
3+ outside it.
"""

from __future__ import annotations

import inspect
import os
import re

import numpy as np
import pytest
import torch
from shape_models import BranchOnOne

from exporter import AUTO, Dim, ExportOptions, Session
from exporter import compat
from exporter.verify import DEFAULT_TOLERANCES, InputCase, Tolerance, compare


class BranchOnThree(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] == 3:
            return x * 2
        return x + 1


class ReshapeOnOne(torch.nn.Module):
    """Size-oblivious capture keeps the dim symbolic but bakes in the size-1 reshape."""

    def forward(self, x):
        if x.shape[0] == 1:
            return x.reshape(4)
        return x.flatten()


class PinnedToThree(torch.nn.Module):
    def forward(self, x):
        return x.reshape(3, 4) + 1


class TwoLayer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 8)
        self.fc2 = torch.nn.Linear(8, 2)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class Tanh(torch.nn.Module):
    def forward(self, y):
        return torch.tanh(y)  # TANH_LINE


class ScaleTanh(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.act = Tanh()

    def forward(self, x):
        return self.act(x * 3) + 1


class TokenEmbedding(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(10, 4)

    def forward(self, ids, mask):
        return self.embed(ids) * mask[..., None]


class RecordsShapes(torch.nn.Module):
    """Records the shapes it is called with in a list outside the module (verify puts the
    module's own attributes back after every eager run)."""

    def __init__(self, seen):
        super().__init__()
        self.register_forward_pre_hook(lambda module, args: seen.append(tuple(args[0].shape))
                                       if not isinstance(args[0], torch._subclasses.FakeTensor) else None)

    def forward(self, x):
        return x * 2


class Raises(torch.nn.Module):
    def forward(self, x):
        raise RuntimeError("boom in user code")


def session(model, *args, dims, **options):
    return Session(model, args, {}, ExportOptions(dynamic_shapes=dims, **options))


@pytest.fixture(scope="module")
def branch_three_session():
    return session(BranchOnThree(), torch.randn(3, 4), dims={"x": {0: AUTO}})


@pytest.fixture(scope="module")
def branch_three(branch_three_session):
    # AUTO made the dim static, so the default sweep leaves it alone (see the next test); sizes=
    # still compares it where asked.
    return branch_three_session.verify(sizes={"x.shape[0]": [1, 2, 5, 7]})


def test_auto_made_static_is_info_not_a_failure_and_is_not_swept(branch_three_session):
    result = branch_three_session.verify()
    assert result.status == "passed", result.summary()
    assert [c.name for c in result.cases] == ["example"]
    (info,) = [f for f in result.findings if f.kind == "auto_static"]
    assert "AUTO let torch decide, and torch made it static at 3" in info.message
    assert re.search(r"guard (x\.shape\[0\]|L\['x'\]\.size\(\)\[0\]) == 3", info.cause)
    assert not any(f.kind in ("static_in_onnx", "wrong_at_size", "not_verified") for f in result.findings)
    assert "made static by AUTO, not swept: x.shape[0]" in result.verdict


def test_branch_specialized_at_the_example_size_is_flagged_at_other_sizes_with_the_guard(branch_three):
    result = branch_three
    assert result.status == "failed"
    assert result.case("example").ok
    wrong = {dict(f.sizes)["x.shape[0]"]: f for f in result.findings if f.kind == "wrong_at_size"}
    assert set(wrong) == {1, 2, 5, 7}  # the sizes asked for
    assert "specialized to 3" in wrong[5].cause
    assert re.search(r"guard (x\.shape\[0\]|L\['x'\]\.size\(\)\[0\]) == 3", wrong[5].cause)
    assert {f.kind for f in result.findings} >= {"example_only", "auto_static", "wrong_at_size"}
    assert result.divergence is None  # nothing computed wrong: onnxruntime refuses the sizes
    text = result.summary()
    assert "correct at the example size only" in text
    assert "onnxruntime fails at size x.shape[0]=5" in text
    assert "AUTO let torch decide, and torch made it static at 3" in text
    assert result.verdict.startswith("Verification FAILED: 4 of 5 compared case(s) wrong or failing")


def test_the_same_onnxruntime_error_at_several_sizes_is_given_in_full_once_then_named(branch_three):
    from exporter.display import Details, render

    failing = [f for f in branch_three.findings if f.kind == "wrong_at_size"]
    assert [dict(f.sizes)["x.shape[0]"] for f in failing] == [1, 2, 5, 7]  # still one finding per size
    first, *later = failing
    assert "onnxruntime fails at size x.shape[0]=1: onnxruntime error: " in first.message
    assert all(f.message.endswith(": the same error as at x.shape[0]=1") for f in later)
    (table,) = next(b for b in render(branch_three).body if isinstance(b, Details) and b.summary == "cases").body
    details = [str(row[-1]) for row in table.rows]
    assert details[1].startswith("onnxruntime error: ")
    assert details[2:] == ["the same error as case 'x.shape[0]=1'"] * 3


def test_specialized_dim_is_a_static_onnx_dim_not_a_numeric_name(branch_three_session, branch_three):
    dim = branch_three_session.model_proto.graph.input[0].type.tensor_type.shape.dim[0]
    assert (dim.dim_value, dim.dim_param) == (3, "")
    assert branch_three.contract.errors == ()  # AUTO permits specializing; the finding says it


def test_results_tabulate_one_row_per_case_and_output(branch_three):
    frame = branch_three.to_frame()
    assert list(frame["case"]) == ["example", "x.shape[0]=1", "x.shape[0]=2", "x.shape[0]=5", "x.shape[0]=7"]
    assert list(frame["status"]) == ["pass", "ort_error", "ort_error", "ort_error", "ort_error"]
    groups = branch_three.groups_frame()
    assert groups.loc[0, "obtained"] == "specialized" and groups.loc[0, "sizes"] == [3, 1, 2, 5, 7]


def test_size_one_example_keeps_the_dim_symbolic_but_is_wrong_at_two_inside_the_obtained_range():
    result = session(BranchOnOne(), torch.randn(1, 4), dims={"x": {0: AUTO}}).verify()
    (group,) = result.groups
    assert not group.specialized and group.obtained_range == (1, 2) and group.onnx_dims == ("x_dim0",)
    assert result.case("example").ok
    assert result.case("2").status == "fail" and result.case("2").outside_obtained == ()
    five = next(f for f in result.findings if f.kind == "wrong_at_size" and dict(f.sizes)["x.shape[0]"] == 5)
    assert "only for x.shape[0] in [1, 2]" in five.cause and "dropped runtime assert" in five.cause
    assert result.contract.ok  # the ONNX dim is a proper symbol: only the sweep catches this


def test_onnxruntime_failure_at_another_size_names_the_onnx_node_and_user_line(capfd):
    result = session(ReshapeOnOne(), torch.randn(1, 4), dims={"x": {0: AUTO}}).verify()
    assert "[E:onnxruntime" not in capfd.readouterr().err  # said once, in the finding, not again in red
    case = result.case("odd")
    assert case.status == "ort_error"
    assert "Reshape" in case.error and "return x.reshape(4)" in case.error and __file__ in case.error
    assert any(f.kind == "wrong_at_size" and "onnxruntime fails at size x.shape[0]=5" in f.message for f in result.findings)


def test_correct_dynamic_model_passes_at_every_swept_size():
    reports = []
    result = session(TwoLayer(), torch.randn(3, 4), dims={"x": {0: Dim("batch")}}).verify(progress=reports.append)
    assert result.ok, result.summary()
    (group,) = result.groups
    # the planned sizes first, then sizes that can see a branch (example + a prime, far above twice)
    assert group.sizes[:5] == (3, 1, 2, 5, 7) and max(group.sizes) >= 4 * 3
    assert f"batch in {{{', '.join(map(str, sorted(group.sizes)))}}}" in result.summary()
    assert [p.done for p in reports] == list(range(len(result.cases) + 1)) and reports[-1].fraction == 1.0
    assert all(c.ok for c in result.cases) and len(result.cases) == len(group.sizes)
    assert result.findings == ()
    named = [c for c in result.contract.checks if c.subject == "x.shape[0]"]
    assert [(c.status, c.message) for c in named] == [("ok", "symbolic 'batch' (Dim('batch'))")]
    assert any(c.check == "output names" and c.subject == "output" and c.ok for c in result.contract.checks)


def test_auto_everywhere_sweeps_the_batch_while_the_pinned_feature_dim_is_reported_not_swept():
    # The feature dim AUTO made static (Linear(4, 8) needs 4 features) is what the user asked
    # torch to decide: info, not swept (it was tried alone and filed as eager errors before).
    result = session(TwoLayer(), torch.randn(3, 4), dims={"x": AUTO}).verify()
    assert result.ok, result.summary()
    batch, feature = result.groups
    assert not batch.specialized and feature.specialized and feature.onnx_dims == (4,)
    batch_cases = [c for c in result.cases if c.changed == ("x.shape[0]",)]
    assert {1, 2, 5, 7} < {dict(c.sizes)["x.shape[0]"] for c in batch_cases} and all(c.ok for c in batch_cases)
    assert not [c for c in result.cases if "x.shape[1]" in c.changed]
    (info,) = [f for f in result.findings if f.kind == "auto_static"]
    assert info.message.startswith("x.shape[1]: AUTO let torch decide, and torch made it static at 4")
    assert result.contract.errors == ()  # the pinned feature dim is the static 4 in ONNX


def test_dim_range_bounds_and_explicit_sizes_are_respected():
    s = session(TwoLayer(), torch.randn(3, 4), dims={"x": {0: Dim("batch", min=2, max=6)}})
    assert s.verify().groups[0].sizes == (3, 2, 5, 6)  # no 1; odd 5; larger capped at max 6
    assert s.verify(sizes={"batch": [4, 6]}).groups[0].sizes == (3, 4, 6)


def test_demo_block_keeps_equal_dims_equal_and_masks_valid():
    from exporter.examples import demo_block

    model, args, kwargs, dims = demo_block()
    seen = []

    def keep(case: InputCase):
        seen.append(case)
        return None

    result = Session(model, args, kwargs, ExportOptions(dynamic_shapes=dims)).verify(make_inputs=keep)
    assert result.ok, result.summary()
    assert [g.label for g in result.groups] == ["batch", "seq"]
    assert result.groups[0].axes == (("x", 0), ("attention_mask", 0))
    for case in seen:
        x, mask = case.args[0], case.kwargs["attention_mask"]
        assert x.shape[:2] == mask.shape == (case.sizes["batch"], case.sizes["seq"])
        assert mask.dtype == torch.bool and mask.any(dim=-1).all()  # never a fully masked row


def test_integer_inputs_are_generated_in_the_valid_range():
    ids = torch.tensor([[1, 9, 3, 4]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    s = Session(TokenEmbedding(), (ids, mask), {}, ExportOptions(dynamic_shapes={"ids": {1: Dim("seq")}, "mask": {1: Dim("seq")}}))
    result = s.verify()
    assert result.ok, result.summary()
    assert all(c.status == "pass" for c in result.cases)  # no eager IndexError: ids stayed in [1, 9]


def test_user_hook_replaces_generated_inputs():
    seen = []
    model = RecordsShapes(seen)
    calls = []

    def hook(case: InputCase):
        calls.append(case)
        if case.sizes["batch"] == 5:
            return (torch.full((11, 2), 7.0),), {}
        return None

    result = session(model, torch.randn(3, 2), dims={"x": {0: Dim("batch")}}).verify(make_inputs=hook)
    assert result.ok
    assert [c.sizes["batch"] for c in calls][:4] == [1, 2, 5, 7]  # then the sizes that can see a branch
    assert calls[0].shapes == {"x": (1, 2)}
    assert (11, 2) in seen and (5, 2) not in seen


def test_a_failing_hook_is_a_failed_case_not_an_exception():
    def hook(case):
        raise ValueError("cannot build inputs")

    result = session(TwoLayer(), torch.randn(3, 4), dims={"x": {0: Dim("batch")}}).verify(make_inputs=hook)
    assert result.status == "failed"
    assert result.case("example").ok
    assert {c.status for c in result.cases if not c.is_example} == {"error"}
    assert "cannot build inputs" in result.case("odd").error


def test_dim_requested_dynamic_but_exported_static_fails_the_contract():
    s = session(PinnedToThree(), torch.randn(3, 4), dims={"x": {0: Dim("batch")}}, strategy="draft")
    report = s.verify().contract
    assert not report.ok
    (error,) = report.errors
    assert error.subject == "x.shape[0]" and "requested Dim('batch')" in error.message
    result = s.verify()
    assert any(f.kind == "static_in_onnx" and "x.shape[0]" in f.message for f in result.findings)
    # The module itself only works at 3: other sizes are reported, not blamed on ONNX.
    assert {c.status for c in result.cases if not c.is_example} == {"eager_error"}
    assert any(f.kind == "eager_error" for f in result.findings)


def test_first_divergent_node_maps_to_fx_node_module_and_source_line():
    s = session(ScaleTanh(), torch.randn(64, 16), dims={"x": {0: Dim("batch")}})
    assert s.verify().ok
    result = s.verify(tolerances=Tolerance(0.0, 0.0))  # exact: kernels round differently
    divergence = result.divergence
    assert divergence.stage == "onnx"
    # Mul by 3 is exact in both; Tanh is the first op that differs, Add after it is not reported.
    assert (divergence.op_type, divergence.fx_node, divergence.module_path) == ("Tanh", "tanh", "act")
    line = next(i for i, text in enumerate(inspect.getsource(Tanh).splitlines()) if "TANH_LINE" in text)
    assert divergence.source.startswith(f"{__file__}:{inspect.getsourcelines(Tanh)[1] + line} in forward")
    assert "first divergence" in result.summary() and re.search(r"module: +act", result.summary())


def test_dropout_left_in_training_mode_is_reported_first():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5))
    result = Session(model, (torch.randn(8, 4),), {}, ExportOptions(dynamic_shapes={"input": {0: Dim("batch")}})).verify()
    assert result.findings[0].kind == "training_mode" and "1 (Dropout)" in result.findings[0].message
    assert model.training  # verification does not switch the user's module to eval


def test_failed_export_is_an_error_result_not_an_exception():
    result = session(Raises(), torch.randn(2, 2), dims={"x": {0: Dim("batch")}}).verify()
    assert result.status == "error" and not result.ok
    assert "boom in user code" in result.error
    assert result.summary().startswith("Verification could not run")


def test_tolerances_are_dtype_aware_and_nan_equals_nan():
    assert DEFAULT_TOLERANCES["float16"].rtol > DEFAULT_TOLERANCES["float32"].rtol > DEFAULT_TOLERANCES["float64"].rtol
    assert DEFAULT_TOLERANCES["bfloat16"].atol >= DEFAULT_TOLERANCES["float16"].atol
    want = torch.tensor([1.0, 2.0, float("nan")])
    assert compare("c", "y", np.array([1.0, 2.00001, np.nan], dtype=np.float32), want).ok
    assert not compare("c", "y", np.array([1.0, 2.001, np.nan], dtype=np.float32), want).ok
    assert compare("c", "y", np.array([1.0, 2.001], dtype=np.float16), want[:2].half()).ok
    assert not compare("c", "i", np.array([1, 3]), torch.tensor([1, 2])).ok  # integers are exact
    check = compare("c", "y", np.zeros((2, 3), dtype=np.float32), torch.zeros(3, 2))
    assert check.status == "shape_mismatch" and check.actual_shape == (2, 3)


def test_compat_guards_code_lists_the_guards_of_a_specialized_program():
    program = torch.export.export(BranchOnThree(), (torch.randn(3, 4),), dynamic_shapes={"x": {0: torch.export.Dim.AUTO}})
    assert compat.guards_code(program) == ["L['x'].size()[0] == 3"]
    assert compat.guards_code(torch.export.export(TwoLayer(), (torch.randn(3, 4),))) == []


def test_compat_tree_replace_leaves_keeps_the_structure():
    value = {"a": [torch.ones(1), 3], "b": None}
    assert compat.tree_replace_leaves(value, [10, 20, 30]) == {"a": [10, 20], "b": 30}
    assert [leaf for _, leaf in compat.tree_flatten_with_path(value)][1:] == [3, None]


class CountsCalls(torch.nn.Module):
    """Updates a buffer in place on every call, like running statistics do."""

    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(1))

    def forward(self, x):
        self.count += 1
        return x + self.count


def test_verify_and_benchmark_leave_the_users_buffers_as_they_were():
    model = CountsCalls()
    s = session(model, torch.randn(3, 4), dims={"x": {0: Dim("batch")}})
    first, second = s.verify(), s.verify()
    assert first.ok and second.ok, second.summary()  # the second compares against the same model
    s.benchmark(budget=0.02, min_runs=5, threads=1)
    assert model.count.item() == 0.0  # capture runs on fake tensors; verify and benchmark restore it


class ThreeBounds(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] > 2:
            x = x * 2
        if x.shape[0] > 3:
            x = x + 1
        if x.shape[0] > 4:
            x = x - 3
        return x


def test_a_likely_cause_names_two_guards_by_file_and_line_and_counts_the_rest():
    session = Session(ThreeBounds(), (torch.randn(6, 2),), {}, ExportOptions(dynamic_shapes={"x": {0: "n"}}))
    result = session.verify()
    assert result.status == "failed"
    cause = next(f.cause for f in result.findings if f.cause and "torch verified the program only for n" in f.cause)
    assert cause.count("guard x.shape[0] >") == 2 and "and 1 more guard(s) (session.guards)" in cause
    assert "test_verify.py:" in cause and os.path.dirname(__file__) not in cause  # the file by its base name
