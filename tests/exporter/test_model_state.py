"""exporter.model_state.preserved: a run's changes to the module are put back and reported."""

from __future__ import annotations

import pytest
import torch

from exporter.model_state import preserved


class ShrinksWindow(torch.nn.Module):
    """Like Swin's set_shift_and_window_size: a small input rebinds the window for good."""

    def __init__(self) -> None:
        super().__init__()
        self.block = torch.nn.Module()
        self.block.window_size = 4
        self.block.shift = (2, 2)

    def forward(self, x):
        if x.shape[-1] <= self.block.window_size:
            self.block.window_size = x.shape[-1]
            self.block.shift = (0, 0)
        return x * self.block.window_size


class CountsCalls(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("calls", torch.zeros(()))
        self.linear = torch.nn.Linear(3, 3)

    def forward(self, x):
        self.calls += 1
        return self.linear(x)


class CachesTensor(torch.nn.Module):
    """Like transformers' longrope: stores a tensor attribute computed during the first call."""

    def forward(self, x):
        if getattr(self, "cached", None) is None:
            self.cached = torch.arange(x.shape[-1], dtype=x.dtype)
        return x + self.cached


def test_rebound_attributes_are_restored_and_reported_by_path():
    model = ShrinksWindow()
    with preserved(model, what="when called at 1×1") as report:
        model(torch.ones(1, 1))
    assert model.block.window_size == 4 and model.block.shift == (2, 2)
    assert [change.path for change in report.changes] == ["block.window_size", "block.shift"]
    assert report.message.startswith("this model changes itself when called at 1×1: `block.window_size` 4 → 1")
    assert report.all_restored


def test_a_buffer_written_in_place_gets_its_value_back():
    model = CountsCalls()
    buffer = model.calls
    with preserved(model) as report:
        model(torch.ones(2, 3))
        model(torch.ones(2, 3))
    assert model.calls is buffer and model.calls.item() == 0
    (change,) = report.changes
    assert (change.path, change.kind, change.before, change.after) == ("calls", "buffer", "tensor(0.0)", "tensor(2.0)")


def test_batch_norm_running_statistics_in_training_mode_are_restored():
    model = torch.nn.Sequential(torch.nn.BatchNorm1d(3)).train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with preserved(model) as report:
        model(torch.randn(4, 3))
    for key, value in model.state_dict().items():
        assert torch.equal(value, before[key]), key
    assert {c.path for c in report.changes} == {"0.running_mean", "0.running_var", "0.num_batches_tracked"}


def test_a_tensor_attribute_stored_by_the_run_is_removed():
    model = CachesTensor()
    with preserved(model) as report:
        model(torch.ones(2, 3))
    assert not hasattr(model, "cached")
    (change,) = report.changes
    assert change.path == "cached" and change.before == "(absent)" and change.after == "tensor(float32[3])"


def test_a_fake_tensor_left_by_a_trace_is_removed_and_named_as_such():
    model = CachesTensor()
    torch.export.export(model, (torch.ones(2, 3),), strict=False)
    assert type(model.cached).__name__ == "FakeTensor"  # what torch.export alone leaves behind
    del model.cached
    with preserved(model, what="during capture") as report:
        torch.export.export(model, (torch.ones(2, 3),), strict=False)
    assert not hasattr(model, "cached")
    (leftover,) = report.trace_leftovers
    assert leftover.trace_leftover == "FakeTensor" and leftover.after.startswith("FakeTensor(")
    assert torch.equal(model(torch.ones(2, 3)), torch.tensor([[1.0, 2.0, 3.0]] * 2))


def test_state_is_restored_when_the_run_raises():
    class Fails(ShrinksWindow):
        def forward(self, x):
            super().forward(x)
            raise RuntimeError("boom")

    model = Fails()
    with pytest.raises(RuntimeError, match="boom"), preserved(model) as report:
        model(torch.ones(1, 1))
    assert model.block.window_size == 4
    assert [c.path for c in report.changes] == ["block.window_size", "block.shift"]


def test_a_list_changed_in_place_keeps_its_identity_and_contents():
    model = torch.nn.Module()
    model.sizes = [1, 2]
    sizes = model.sizes
    with preserved(model) as report:
        model.sizes.append(3)
    assert model.sizes is sizes and sizes == [1, 2]
    assert str(report.changes[0]) == "`sizes` [1, 2] → [1, 2, 3]"


def test_replaced_parameter_and_submodule_are_put_back():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    weight, layer = model[0].weight, model[0]
    with preserved(model) as report:
        model[0].weight = torch.nn.Parameter(torch.zeros(2, 2))
        model[0] = torch.nn.Identity()
    assert model[0] is layer and model[0].weight is weight
    assert {(c.path, c.kind) for c in report.changes} == {("0", "submodule"), ("0.weight", "parameter")}


def test_a_parameter_written_in_place_is_reported_as_not_restored():
    # parameters are not copied (they can be most of the memory): the write is named, not undone
    model = torch.nn.Linear(2, 2)
    with preserved(model) as report, torch.no_grad():
        model.weight.add_(1)
    (change,) = report.changes
    assert change.path == "weight" and not change.restored and not report.all_restored
    assert "(not restored)" in report.message


def test_a_replaced_parameter_data_is_put_back_without_a_copy():
    model = torch.nn.Linear(2, 2)
    original = model.weight.detach().clone()
    with preserved(model) as report:
        model.weight.data = torch.zeros(2, 2)
    assert torch.equal(model.weight, original)
    assert report.changes[0].restored


def test_an_unchanged_model_gives_an_empty_report_even_with_tied_weights():
    model = torch.nn.Sequential(torch.nn.Embedding(5, 4), torch.nn.Linear(4, 5, bias=False), torch.nn.BatchNorm1d(5))
    model[1].weight = model[0].weight
    model.eval()
    with preserved(model, what="when called") as report, torch.inference_mode():
        model(torch.tensor([1, 2]))
    assert not report.changed and report.changes == () and report.message == ""


def test_a_value_that_is_not_a_module_is_left_alone():
    # was: a block that did nothing, so its assertion could not fail whatever preserved did
    def model(x):
        return x

    model.calls = 0
    with preserved(model) as report:
        model.calls += 1
        model.added = True
    assert model.calls == 1 and model.added  # not a module: nothing snapshotted, nothing put back
    assert not report.changed and report.changes == ()


def test_trace_tensor_kind_names_fake_and_meta_tensors_and_passes_real_ones():
    from torch._subclasses.fake_tensor import FakeTensorMode

    from exporter.compat import trace_tensor_kind

    with FakeTensorMode():
        fake = torch.ones(2)
    assert trace_tensor_kind(fake) == "FakeTensor"
    assert trace_tensor_kind(torch.ones(2, device="meta")) == "meta tensor"
    assert trace_tensor_kind(torch.ones(2)) is None and trace_tensor_kind(3) is None


def test_export_leaves_no_trace_on_the_module_and_says_what_the_capture_changed():
    from exporter import export

    model = CachesTensor()
    first = export(model, torch.ones(2, 3))
    assert not hasattr(model, "cached")  # torch.export alone leaves a FakeTensor here
    capture = first.stages[0]
    (warning,) = capture.warnings
    assert warning.startswith("this model changes itself during capture (nonstrict): `cached` (absent) → FakeTensor(")
    assert warning in capture.detail
    second = export(model, torch.ones(2, 3))  # the same module object again
    assert second.stages[0].warnings == capture.warnings
    (out,) = second.run_onnx(torch.ones(2, 3))
    assert (out == [[1.0, 2.0, 3.0]] * 2).all()


def test_capture_of_an_unchanging_model_records_no_warning():
    from exporter import export

    session = export(torch.nn.Linear(3, 2), torch.ones(2, 3))
    assert all(stage.warnings == () for stage in session.stages)
    assert session.attempts[0].model_state is not None and not session.attempts[0].model_state.changed


def test_containers_rebuilt_with_the_same_objects_are_not_changes():
    # what a trace does to nn.LSTM's _flat_weights / _flat_weight_refs and Qwen2's _kernel_funcs
    import weakref

    model = torch.nn.Linear(2, 2)
    model.flat = [model.weight, model.bias]
    model.refs = [weakref.ref(model.weight)]
    model.funcs = {"rotary": len}
    flat = model.flat
    with preserved(model) as report:
        model.flat = [model.weight, model.bias]
        model.refs = [weakref.ref(model.weight)]
        model.funcs = {"rotary": len}
    assert not report.changed and model.flat is flat


def test_a_list_of_tensors_changed_in_place_is_refilled():
    model = torch.nn.Linear(2, 2)
    model.flat = [model.weight, model.bias]
    flat = model.flat
    with preserved(model) as report:
        model.flat[1] = torch.zeros(2)
    assert model.flat is flat and model.flat[1] is model.bias
    assert str(report.changes[0]) == "`flat` list of 2 → list of 2"


def test_a_fake_tensor_an_earlier_trace_left_is_set_aside_for_the_capture_and_put_back():
    # torch.export (and torch.onnx.export) leave it; the export recomputes it and succeeds
    from exporter import export

    model = CachesTensor()
    torch.export.export(model, (torch.ones(2, 3),), strict=False)
    leftover = model.cached
    session = export(model, torch.ones(2, 3))
    assert model.cached is leftover  # the user's model as it was, leftover included
    assert any("set aside for this capture and put back: cached (FakeTensor)" in w for w in session.stages[0].warnings)
    (out,) = session.run_onnx(torch.full((2, 3), 2.0))
    assert (out == [[2.0, 3.0, 4.0]] * 2).all()


def test_a_buffer_holding_nan_that_the_run_leaves_alone_is_not_a_change():
    model = torch.nn.Module()
    model.register_buffer("stat", torch.tensor([float("nan"), 1.0]))
    with preserved(model) as report:
        pass
    assert not report.changed


def test_a_keeper_reports_each_runs_own_changes_and_restores_after_every_run():
    from exporter.model_state import StateKeeper

    model = ShrinksWindow()
    keeper = StateKeeper(model)
    reports = []
    for width in (1, 8, 1, 8):
        with keeper.run(what=f"when called at {width}") as report:
            assert model.block.window_size == 4  # every run starts from the state snapshotted
            model(torch.ones(1, width))
        reports.append(report)
    assert [[change.path for change in r.changes] for r in reports] == [
        ["block.window_size", "block.shift"], [], ["block.window_size", "block.shift"], []]
    assert model.block.window_size == 4 and model.block.shift == (2, 2)


def test_a_keeper_reports_a_change_it_cannot_undo_once_not_again_on_every_later_run():
    from exporter.model_state import StateKeeper

    model = torch.nn.Linear(2, 2)
    keeper = StateKeeper(model)
    with keeper.run() as first, torch.no_grad():
        model.weight.add_(1.0)  # in place into a parameter: only a full copy could undo it
    with keeper.run() as second:
        model(torch.ones(1, 2))
    assert [(c.path, c.restored) for c in first.changes] == [("weight", False)]
    assert not second.changed


def test_hook_dicts_and_flag_sets_filled_by_a_run_are_emptied_again_by_a_keeper():
    from exporter.model_state import StateKeeper

    model = CountsCalls()
    keeper = StateKeeper(model)
    with keeper.run() as report:
        model.register_forward_hook(lambda *_: None)
        model._non_persistent_buffers_set.add("calls")
    assert not model._forward_hooks and not model._non_persistent_buffers_set
    assert {c.path for c in report.changes} == {"_forward_hooks", "_non_persistent_buffers_set"}
    with keeper.run() as again:
        model(torch.ones(1, 3))
    assert [c.path for c in again.changes] == ["calls"] and model.calls.item() == 0


def test_a_keeper_that_does_not_reuse_its_snapshot_keeps_a_change_made_between_runs():
    from exporter.model_state import StateKeeper

    model = ShrinksWindow()
    keeper = StateKeeper(model, reuse=False)  # a module the user's code holds (one that cannot be twinned)
    with keeper.run():
        model(torch.ones(1, 8))
    model.block.window_size = 6  # the user's own change, between two runs
    with keeper.run() as report:
        model(torch.ones(1, 8))
    assert model.block.window_size == 6 and not report.changed
