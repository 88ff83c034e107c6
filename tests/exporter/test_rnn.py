"""nn.LSTM and nn.GRU with a dynamic batch and sequence: captured under torch's while_loop
decompositions (what torch.onnx.export applies), decomposed under them too, translated to
ONNX's native LSTM/GRU, right at another (batch, seq) and passing ``verify()``; the patch is
on only while capturing. nn.RNN, which torch has no such decomposition for, is refused with
the reason."""

from __future__ import annotations

import threading
import typing

import numpy as np
import pytest
import torch

from exporter import AUTO, STATIC, Dim, ExportOptions, Session
from exporter import compat
from exporter.pipeline.capture import DraftExportStrategy, NonStrictStrategy, StrictStrategy

HIDDEN = 16
FEATURES = 8

# (kind, batch_first, num_layers, bidirectional): each RNN both ways round, 1-2 layers, bidirectional.
CONFIGS = [
    ("LSTM", True, 1, False),
    ("LSTM", False, 2, True),
    ("GRU", True, 2, True),
    ("GRU", False, 1, False),
]


class Recurrent(torch.nn.Module):
    def __init__(self, kind: str, batch_first: bool, num_layers: int = 1, bidirectional: bool = False) -> None:
        super().__init__()
        self.batch_first = batch_first
        self.rnn = getattr(torch.nn, kind)(
            FEATURES, HIDDEN, num_layers=num_layers, batch_first=batch_first, bidirectional=bidirectional
        )

    def forward(self, x):
        return self.rnn(x)  # (output, h_n) or (output, (h_n, c_n))


def sequence(model: Recurrent, batch: int, seq: int, seed: int = 0) -> torch.Tensor:
    shape = (batch, seq, FEATURES) if model.batch_first else (seq, batch, FEATURES)
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def axes(model: Recurrent) -> tuple[int, int]:
    """(batch axis, seq axis) of the input."""
    return (0, 1) if model.batch_first else (1, 0)


def spec_for(model: Recurrent, how: str) -> dict:
    batch, seq = axes(model)
    if how == "AUTO":
        return {"x": {batch: AUTO, seq: AUTO}}
    if how == "names":  # torch.onnx.export's string names
        return {"x": {batch: "batch", seq: "seq"}}
    # A named Dim is a hard contract: the code's guards (batch != 1, seq != 1) need min=2.
    return {"x": {batch: Dim("batch", min=2), seq: Dim("seq", min=2)}}


def flat(value) -> list[np.ndarray]:
    return [leaf.detach().numpy() for _, leaf in compat.tree_flatten_with_path(value)]


def onnx_shapes(session) -> dict[str, list]:
    graph = session.onnx_model.graph
    return {v.name: [getattr(d, "value", d) for d in v.shape] for v in [*graph.inputs, *graph.outputs]}


@pytest.mark.parametrize("how", ["AUTO", "names", "Dim"])
@pytest.mark.parametrize(
    "kind, batch_first, num_layers, bidirectional", CONFIGS,
    ids=[f"{k}-{'batch_first' if bf else 'seq_first'}-{n}layer{'-bidir' if bi else ''}" for k, bf, n, bi in CONFIGS],
)
def test_rnn_with_dynamic_batch_and_seq_matches_eager_at_a_second_size_and_verifies(
    kind, batch_first, num_layers, bidirectional, how
):
    model = Recurrent(kind, batch_first, num_layers, bidirectional).eval()
    session = Session(model, (sequence(model, 2, 7),), {}, ExportOptions(dynamic_shapes=spec_for(model, how)))
    assert session.run().status == "ok", session.failed_stage and session.failed_stage.error
    assert not session.applied_fixes and all(e.policy is not STATIC for e in session.spec if e.axis != 2)

    # The input and every output keep a symbolic batch and seq, not the example's 2 and 7.
    batch_axis, seq_axis = axes(model)
    shapes = onnx_shapes(session)
    assert isinstance(shapes["x"][batch_axis], str) and isinstance(shapes["x"][seq_axis], str), shapes
    assert all(2 not in dims and 7 not in dims for dims in shapes.values()), shapes
    assert kind in {node.op_type for node in session.onnx_model.graph}  # ONNX's own LSTM/GRU, no unrolled loop

    x = sequence(model, 3, 5, seed=1)
    got = session.run_onnx(x)
    with torch.no_grad():
        want = flat(model(x))
    assert [g.shape for g in got] == [w.shape for w in want]
    for actual, expected in zip(got, want):
        np.testing.assert_allclose(actual, expected, rtol=1e-3, atol=1e-5)

    result = session.verify(max_size=12)
    assert result.ok, result.summary()


def test_named_dims_without_a_minimum_are_refused_at_capture_with_the_line_and_a_one_round_fix():
    model = Recurrent("LSTM", True).eval()
    spec = {"x": {0: Dim("batch"), 1: Dim("seq")}}
    session = Session(model, (sequence(model, 2, 8),), {}, ExportOptions(dynamic_shapes=spec))
    assert session.run().status == "failed"
    error = session.failed_stage.error
    assert error.stage == "capture"
    assert "test_rnn.py" in error.source and "return self.rnn(x)" in error.source
    assert session.suggested_fixes.after.policy("x", 0) == Dim("batch", min=2)
    assert session.suggested_fixes.after.policy("x", 1) == Dim("seq", min=2)
    fixed = session.apply_suggested_fixes()
    assert fixed.run().status == "ok" and len(fixed.applied_fixes) == 1


@pytest.mark.filterwarnings("ignore:The tensor attributes:UserWarning")  # plain torch.export on an LSTM
def test_a_dynamic_lstm_exports_after_a_static_lstm_in_the_same_process():
    """torch's patch alone does nothing once the op was dispatched (its kernel is cached):
    torch.onnx.export's second dynamic-seq LSTM export in a process fails that way."""
    model = Recurrent("LSTM", True).eval()
    torch.export.export(model, (sequence(model, 2, 8),))  # caches aten.lstm's default kernel
    session = Session(model, (sequence(model, 2, 8),), {}, ExportOptions(dynamic_shapes={"x": {0: "batch", 1: "seq"}}))
    assert session.run("capture").status == "ok", session.failed_stage and session.failed_stage.error
    assert session.dims["x", 1].dynamic
    from torch.export import _patches

    assert _patches.lstm_while_loop_impl not in _lstm_kernels_cached()  # nor does it stay cached after


def probing(strategy: type, seen: list[tuple[bool, bool]]) -> type:
    """``strategy`` whose ``_capture`` records whether the RNN patch and the jit patch are on
    (the capture itself then runs as usual)."""

    class Probe(strategy):
        def _capture(self, model, args, kwargs, dynamic_shapes):
            seen.append((compat.rnn_while_loop_active(), _jit_isinstance_answers_as_builtin()))
            return super()._capture(model, args, kwargs, dynamic_shapes)

    return Probe


def _jit_isinstance_answers_as_builtin() -> bool:
    """Whether ``torch.jit.isinstance`` answers as ``isinstance`` here: the builtin refuses a
    subscripted generic that torch's own accepts."""
    try:
        torch.jit.isinstance([1], typing.List[int])
    except TypeError:
        return True
    return False


def test_the_jit_isinstance_patch_of_a_strict_capture_is_not_seen_by_another_thread():
    answers: list[bool] = []

    class Probe(StrictStrategy):
        def _capture(self, model, args, kwargs, dynamic_shapes):
            answers.append(_jit_isinstance_answers_as_builtin())
            other = threading.Thread(target=lambda: answers.append(_jit_isinstance_answers_as_builtin()))
            other.start()
            other.join()
            return super()._capture(model, args, kwargs, dynamic_shapes)

    class UsesJitIsinstance(torch.nn.Module):
        def forward(self, x):
            return x + 1 if torch.jit.isinstance(x, torch.Tensor) else x

    attempt = Probe()(UsesJitIsinstance(), (torch.randn(2, 3),), {}, {"x": {0: torch.export.Dim.DYNAMIC}})
    assert attempt.success, attempt.error
    assert answers == [True, False]  # the job's context, then the user's thread: torch's own


class AddOne(torch.nn.Module):
    def forward(self, x):
        return x + 1


class Broken(torch.nn.Module):
    def forward(self, x):
        return x @ torch.ones(5, 5)  # (2, 3) @ (5, 5) cannot work


def _lstm_kernels_cached() -> list:
    return list(torch.ops.aten.lstm.input._dispatch_cache.values())


@pytest.mark.parametrize("fail", [False, True], ids=["success", "failure"])
@pytest.mark.parametrize(
    "strategy, rnn, jit",
    [(NonStrictStrategy, True, False), (StrictStrategy, True, True), (DraftExportStrategy, False, False)],
    ids=["nonstrict", "strict", "draft"],
)
def test_capture_patches_are_on_only_while_capturing_and_undone_after_a_failure(strategy, rnn, jit, fail):
    from torch.export import _patches

    jit_isinstance = torch.jit.isinstance
    seen: list[tuple[bool, bool]] = []
    model = Broken() if fail else AddOne()
    attempt = probing(strategy, seen)()(model, (torch.randn(2, 3),), {}, {"x": {0: torch.export.Dim.DYNAMIC}})
    assert attempt.success is not fail
    assert seen == [(rnn, jit)]
    assert not compat.rnn_while_loop_active() and torch.jit.isinstance is jit_isinstance
    assert _patches.lstm_while_loop_impl not in _lstm_kernels_cached()


def test_the_rnn_patch_is_off_without_dynamic_shapes_as_in_torch_onnx():
    seen: list[tuple[bool, bool]] = []
    assert probing(NonStrictStrategy, seen)()(AddOne(), (torch.randn(2, 3),), {}, None).success
    assert seen == [(False, False)]


def test_nested_rnn_patches_are_undone_by_the_outermost_exit_only():
    with compat.rnn_while_loop_decompositions():
        with compat.rnn_while_loop_decompositions():
            assert compat.rnn_while_loop_active()
        assert compat.rnn_while_loop_active()
    assert not compat.rnn_while_loop_active()


class PlainRNN(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rnn = torch.nn.RNN(FEATURES, HIDDEN, batch_first=True)

    def forward(self, x):
        return self.rnn(x)[0]


def test_nn_rnn_with_a_dynamic_seq_is_refused_with_why_and_the_static_fix_exports():
    model = PlainRNN().eval()
    session = Session(model, (torch.randn(2, 8, FEATURES),), {}, ExportOptions(dynamic_shapes={"x": {0: "batch", 1: "seq"}}))
    assert session.run().status == "failed"
    error = session.failed_stage.error
    assert error.stage == "capture"
    assert "return self.rnn(x)[0]" in error.source
    assert "nn.RNN 'rnn'" in error.hint and "nn.LSTM and nn.GRU only" in error.hint
    assert session.suggested_fixes.after.policy("x", 1) is STATIC
    fixed = session.apply_suggested_fixes()
    assert fixed.run().status == "ok"
    x = torch.randn(3, 8, FEATURES)
    with torch.no_grad():
        np.testing.assert_allclose(fixed.run_onnx(x)[0], model(x).numpy(), rtol=1e-3, atol=1e-5)


def test_the_rnn_decompositions_warnings_are_hidden_while_capturing_and_the_filters_restored():
    import warnings

    model = Recurrent("GRU", True).eval()
    session = Session(model, (sequence(model, 2, 7),), {}, ExportOptions(dynamic_shapes={"x": {0: "batch", 1: "seq"}}))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        filters = list(warnings.filters)
        assert session.run("decompose").status == "ok"
        assert warnings.filters == filters
    noise = [w for w in caught if "_check_is_size" in str(w.message) or "_flat_weights" in str(w.message)]
    assert not noise, [str(w.message) for w in noise]


class Projected(torch.nn.Module):
    def __init__(self, proj_size: int = 0, bias: bool = True) -> None:
        super().__init__()
        self.rnn = torch.nn.LSTM(16, 8, batch_first=True, proj_size=proj_size, bias=bias)

    def forward(self, x):
        return self.rnn(x)[0]


def test_an_lstm_with_proj_size_is_refused_at_translate_with_the_line_not_handed_out_unrunnable():
    session = Session(Projected(proj_size=4).eval(), (torch.randn(2, 8, 16),), None,
                      ExportOptions(dynamic_shapes={"x": {0: "batch", 1: "seq"}}))
    result = session.run()
    assert (result.name, result.status) == ("translate", "failed")  # before: exported, then onnxruntime refused it
    assert "nn.LSTM with proj_size has no ONNX translation" in str(result.error)
    assert "test_rnn.py" in result.error.source and "proj_size" in result.error.hint


@pytest.mark.parametrize("bias", [True, False])
def test_an_lstm_without_projection_is_not_taken_for_one(bias):
    session = Session(Projected(bias=bias).eval(), (torch.randn(2, 8, 16),), None,
                      ExportOptions(dynamic_shapes={"x": {0: "batch", 1: "seq"}}))
    assert session.run().status == "ok"


def test_an_eager_lstm_in_another_thread_while_the_rnn_patch_is_on_gives_its_own_outputs():
    lstm = torch.nn.LSTM(4, 8, batch_first=True, num_layers=2).eval()
    x = torch.randn(2, 5, 4)
    before = lstm(x)[0].detach()  # grad mode is per thread: both runs in the default mode
    outputs: list[torch.Tensor] = []
    with compat.rnn_while_loop_decompositions():
        assert compat.rnn_while_loop_active()
        user = threading.Thread(target=lambda: outputs.append(lstm(x)[0].detach()))  # the user's next cell
        user.start()
        user.join()
    assert torch.equal(outputs[0], before)
