"""quiet_library_warnings: torch's own deprecation noise hidden, the user's warnings kept."""

from __future__ import annotations

import copy
import warnings

import pytest

from exporter._quiet import quiet_library_warnings


def torch_leafspec_warning() -> None:
    """What run_decompositions does: deepcopy a pytree spec, which makes torch warn
    `isinstance(treespec, LeafSpec)` is deprecated (attributed to copyreg)."""
    from torch.utils._pytree import tree_flatten

    copy.deepcopy(tree_flatten([1, (2, 3)])[1])


def users_deprecated_helper() -> None:
    warnings.warn("my_helper() is deprecated", FutureWarning, stacklevel=1)


def caught(action) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as log:
        warnings.simplefilter("always")  # undo pytest.ini's filters: see everything
        action()
    return log


def test_torchs_leafspec_deprecation_shows_without_the_context_manager():
    assert any("LeafSpec" in str(w.message) for w in caught(torch_leafspec_warning))


def test_torchs_leafspec_deprecation_is_silenced_inside():
    def action():
        with quiet_library_warnings():
            torch_leafspec_warning()

    assert not caught(action)


@pytest.mark.parametrize("module", ["torch._dynamo.utils", "onnxscript.function_libs", "onnx_ir.serde", "torch"])
def test_deprecations_attributed_to_the_libraries_are_silenced(module):
    def action():
        with quiet_library_warnings():
            for category in (FutureWarning, DeprecationWarning):
                warnings.warn_explicit("old API", category, "lib.py", 1, module=module)

    assert not caught(action)


@pytest.mark.parametrize("module", ["torchvision_like_user_pkg", "torch_models", "mymodels", "__main__"])
def test_deprecations_attributed_to_other_modules_still_show(module):
    def action():
        with quiet_library_warnings():
            warnings.warn_explicit("old API", FutureWarning, "user.py", 1, module=module)

    assert [str(w.message) for w in caught(action)] == ["old API"]


def test_a_warning_raised_from_user_code_still_shows_inside():
    def action():
        with quiet_library_warnings():
            torch_leafspec_warning()
            users_deprecated_helper()
            warnings.warn("a UserWarning is not silenced", UserWarning, stacklevel=1)

    log = caught(action)
    assert [str(w.message) for w in log] == ["my_helper() is deprecated", "a UserWarning is not silenced"]
    assert log[0].filename == __file__


def test_the_warning_filters_are_restored_on_exit_even_after_an_error():
    before = list(warnings.filters)
    with pytest.raises(RuntimeError), quiet_library_warnings():
        assert warnings.filters != before
        raise RuntimeError("boom")
    assert warnings.filters == before


def test_disabled_changes_nothing():
    def action():
        with quiet_library_warnings(enabled=False):
            torch_leafspec_warning()

    assert any("LeafSpec" in str(w.message) for w in caught(action))


class Doubler:
    """A tiny module whose forward warns about itself, as a user's deprecated layer would."""

    def __new__(cls):
        import torch

        class _Doubler(torch.nn.Module):
            def forward(self, x):
                warnings.warn("Doubler is deprecated", FutureWarning, stacklevel=1)
                return x * 2

        return _Doubler()


def test_the_python_api_hides_torchs_deprecations_and_keeps_the_users():
    import torch

    from exporter import Session

    def action():
        session = Session(Doubler(), (torch.randn(2, 3),))
        assert session.run().status == "ok"

    messages = [str(w.message) for w in caught(action)]
    assert "Doubler is deprecated" in messages
    assert not [m for m in messages if "LeafSpec" in m], messages


class Gate(__import__("torch").nn.Module):
    """Branches on a value: strict and non-strict capture fail (torch prints the partial FX
    graph to stderr and logs warnings), draft export passes (and logs its banner)."""

    def forward(self, x):
        print("forward sees", tuple(x.shape))  # the user's own print
        if x.sum() > 0:
            return x * 2
        return x - 1


def test_torchs_prints_and_logs_during_a_stage_are_kept_on_the_stage_not_shown(capfd):
    import torch

    from exporter import Dim, ExportOptions, Session

    session = Session(Gate(), (torch.ones(3, 4),), {}, ExportOptions(dynamic_shapes={"x": {0: Dim("b")}}))
    assert session.run().status == "ok" and session.strategy == "draft"
    shown = capfd.readouterr()
    assert "def forward" not in shown.err and "Unable to find user code" not in shown.err
    assert "forward sees" in shown.out  # a print in the model's code still shows
    kept = session.stages[0].library_output
    assert "def forward(self, arg0_1" in kept  # the partial graph torch printed for the failed strategy
    assert "WARNING torch." in kept


def test_only_the_exporting_threads_library_output_is_captured(capsys):
    import logging
    import threading

    from exporter._quiet import captured_library_output

    def other_thread():
        print("from another thread")
        logging.getLogger("torch.fx").warning("torch warns on another thread")

    handler = logging.StreamHandler()  # writes to sys.stderr as it was when made
    logging.getLogger("torch.fx").addHandler(handler)
    try:
        with captured_library_output() as output:
            logging.getLogger("torch.fx").warning("torch warns here")
            logging.getLogger("torch.export").error("always_classified is unsupported.")  # torch's own noise
            logging.getLogger("mine").warning("the user's logger")
            thread = threading.Thread(target=other_thread)
            thread.start()
            thread.join()
    finally:
        logging.getLogger("torch.fx").removeHandler(handler)
    assert output.text == "WARNING torch.fx: torch warns here\nERROR torch.export: always_classified is unsupported.\n"
    assert "from another thread" in capsys.readouterr().out


def test_the_streams_are_restored_after_the_block(capsys):
    import sys

    from exporter._quiet import captured_library_output

    before = sys.stdout, sys.stderr
    with captured_library_output():
        assert sys.stderr is not before[1]
    assert (sys.stdout, sys.stderr) == before
