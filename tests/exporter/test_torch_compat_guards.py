"""One test per private torch API the shapes work uses through exporter.compat:
``ShapeEnv._log_guard`` (wrapped to record guards), ``ShapeEnv.source_to_var`` /
``replacements``, ``torch._guards.TracingContext.extract_stack`` (strict-mode user frames),
``ExportedProgram.range_constraints`` value ranges, ``fx_config.backed_size_oblivious``,
``AdditionalInputs._examples`` and ``torch.utils._pytree.keystr``. When torch changes one of them, the failing test names it."""

from __future__ import annotations

import inspect

import pytest
import torch
from torch.export import Dim

from exporter import compat


class BranchThenAdd(torch.nn.Module):
    def forward(self, x, y):
        if x.shape[0] > 2:
            x = x * 2
        return x + y


def line_of(obj, text: str) -> int:
    lines, start = inspect.getsourcelines(obj)
    return start + next(i for i, line in enumerate(lines) if text in line)


def export(strict: bool, example=4):
    args = (torch.randn(example, 3), torch.randn(example, 3))
    shapes = {"x": {0: Dim.AUTO}, "y": {0: Dim.AUTO}}
    with compat.size_oblivious_capture():
        return torch.export.export(BranchThenAdd(), args, dynamic_shapes=shapes, strict=strict)


@pytest.mark.parametrize("strict", [False, True], ids=["nonstrict", "strict"])
def test_record_shape_guards_gets_each_guard_with_sources_and_the_user_frame(strict):
    with compat.record_shape_guards() as events:
        export(strict)
    branch = next(e for e in events if "> 2" in str(e.expr))
    assert branch.prefix == "eval"
    (symbol, sources), = branch.sources
    assert str(branch.expr) == f"{symbol} > 2"
    assert sources == (("L['flat_args'][0].size()[0]",) if strict else ("L['x'].size()[0]",))
    filename, line, function, code = branch.frames[-1]
    assert (filename, line, function, code) == (
        __file__, line_of(BranchThenAdd, "if x.shape[0] > 2:"), "forward", "if x.shape[0] > 2:"
    )
    equality = next(e for e in events if type(e.expr).__name__ == "Equality")
    assert len(equality.sources) == 2
    assert equality.frames[-1][3] == "return x + y"


def test_replaced_symbols_keep_every_equal_source():
    class AddThenBranch(torch.nn.Module):
        def forward(self, x, y):
            z = x + y
            if x.shape[0] > 2:
                z = z * 2
            return z

    with compat.record_shape_guards() as events, compat.size_oblivious_capture():
        torch.export.export(
            AddThenBranch(), (torch.randn(4, 3), torch.randn(4, 3)), dynamic_shapes={"x": {0: Dim.AUTO}, "y": {0: Dim.AUTO}}
        )
    branch = next(e for e in events if "> 2" in str(e.expr))
    (_, sources), = branch.sources  # one symbol left after x.shape[0] == y.shape[0]
    assert set(sources) == {"L['x'].size()[0]", "L['y'].size()[0]"}


def test_record_shape_guards_wraps_log_guard_once_for_good_and_nests():
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    with compat.record_shape_guards() as outer:
        installed = ShapeEnv._log_guard
        assert getattr(installed, compat.guards._GUARD_MARK)
        with compat.record_shape_guards() as inner:
            export(False)
        assert ShapeEnv._log_guard is installed  # not wrapped twice
    assert ShapeEnv._log_guard is installed  # never uninstalled: no race with other threads
    with compat.record_shape_guards():
        assert ShapeEnv._log_guard is installed
    assert inner and [str(e.expr) for e in outer] == [str(e.expr) for e in inner]
    with compat.record_shape_guards() as after:
        pass
    export(False)  # outside any block: nothing recorded
    assert after == []


def test_program_ranges_reads_range_constraints_with_open_max():
    program = export(False)
    ranges = compat.program_ranges(program)
    assert list(ranges.values()) == [(3, None)]
    bounded = torch.export.export(
        BranchThenAdd(), (torch.randn(4, 3), torch.randn(4, 3)), dynamic_shapes={"x": {0: Dim("n", min=3, max=9)}, "y": {0: Dim("n", min=3, max=9)}}
    )
    assert list(compat.program_ranges(bounded).values()) == [(3, 9)]


def test_size_oblivious_capture_is_available_and_keeps_a_size_one_example_dynamic():
    assert compat.size_oblivious_available()

    class Plain(torch.nn.Module):
        def forward(self, x):
            return x * 2

    with compat.size_oblivious_capture():
        program = torch.export.export(Plain(), (torch.randn(1, 3),), dynamic_shapes={"x": {0: Dim.AUTO}})
    assert list(compat.program_ranges(program).values()) == [(0, None)]


def test_additional_inputs_examples_reads_torch_additional_inputs():
    more = torch.export.AdditionalInputs()
    x2, x3 = torch.ones(2, 3), torch.ones(5, 3)
    more.add((x2,))
    more.add((x3,), {"y": x2})
    examples = compat.additional_inputs_examples(more)
    assert [(len(a), sorted(k)) for a, k in examples] == [(1, []), (1, ["y"])]
    assert examples[1][0][0] is x3
    assert compat.additional_inputs_examples([(x2,)]) is None


def test_clear_dim_marks_undoes_what_a_failed_export_leaves_on_the_inputs():
    class Add(torch.nn.Module):
        def forward(self, x, y):
            return x + y

    args = (torch.randn(1, 3), torch.randn(4, 3))
    with compat.size_oblivious_capture(), pytest.raises(RuntimeError, match="must match the size"):
        torch.export.export(Add(), args, dynamic_shapes={"x": {0: Dim.AUTO}, "y": None})
    assert getattr(args[0], "_dynamo_weak_dynamic_indices", None) == {0}  # left behind by torch
    compat.clear_dim_marks(args, {})
    assert not hasattr(args[0], "_dynamo_weak_dynamic_indices")
    with compat.size_oblivious_capture():
        torch.export.export(Add(), args)  # would fail with the stale mark


def _in_thread_while_recorders_come_and_go(work) -> list[BaseException]:
    """Run ``work`` in another thread while this one enters and leaves record_shape_guards
    as fast as it can (threads switching as often as possible); return what ``work`` raised."""
    import sys
    import threading

    errors: list[BaseException] = []

    def run():
        try:
            work()
        except BaseException as exc:  # noqa: BLE001 - reported by the caller
            errors.append(exc)

    worker = threading.Thread(target=run)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    worker.start()
    try:
        while worker.is_alive():
            with compat.record_shape_guards() as mine:
                pass
            assert mine == []  # the other thread's guards never land here
    finally:
        worker.join()
        sys.setswitchinterval(interval)
    return errors


def test_plain_guards_in_another_thread_survive_recorders_coming_and_going():
    import sympy
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    env, expr = ShapeEnv(), sympy.Symbol("s0", integer=True, positive=True) > 2

    def plain_guards():  # what a plain torch.export in this thread runs for each guard
        for _ in range(20000):
            env._log_guard("eval", expr, forcing_spec=False)

    errors = _in_thread_while_recorders_come_and_go(plain_guards)
    assert not errors, repr(errors[0]) if errors else None
    with compat.record_shape_guards() as events:
        export(False)
    assert any("> 2" in str(e.expr) for e in events)


def test_a_thread_records_its_own_export_while_another_enters_and_leaves_recording():
    recorded = []

    def recorded_exports():
        for _ in range(2):
            export(True)  # plain
            with compat.record_shape_guards() as events:
                export(False)
            recorded.append([str(e.expr) for e in events if "> 2" in str(e.expr)])

    errors = _in_thread_while_recorders_come_and_go(recorded_exports)
    assert not errors, repr(errors[0]) if errors else None
    assert len(recorded) == 2 and all(len(r) == 1 for r in recorded)


def test_a_third_party_wrapping_log_guard_meanwhile_neither_recurses_nor_loses_guards():
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    before = ShapeEnv.__dict__["_log_guard"]
    calls = []
    try:
        with compat.record_shape_guards():
            wrapped = ShapeEnv._log_guard

            def third_party(self, prefix, g, *args, **kwargs):  # no functools.wraps
                calls.append(prefix)
                return wrapped(self, prefix, g, *args, **kwargs)

            ShapeEnv._log_guard = third_party
        with compat.record_shape_guards() as events:
            export(False)
        assert calls
        branch = [e for e in events if "> 2" in str(e.expr)]
        assert len(branch) == 1  # recorded once, not once per wrapper
    finally:
        ShapeEnv._log_guard = before


def test_pytree_keystr_writes_key_paths_as_torch_sources_do():
    import collections

    Pair = collections.namedtuple("Pair", "a b")
    paths = [path for path, _ in compat.tree_flatten_with_path({"k": [Pair(torch.ones(1), torch.ones(1))]})]
    assert [compat.pytree_keystr(p) for p in paths] == ["['k'][0].a", "['k'][0].b"]
