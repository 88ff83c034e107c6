"""Does a captured program compute what the model computes at sizes other than the example's?

The capture stage asks this of the programs it gets other than by the default capture, before
keeping one: the strict (TorchDynamo) program it tries after torch rejected the dim spec in the
default capture, as ``torch.onnx.export`` falls back to strict; the program captured again at a
larger example (:mod:`.grown_example`), also at the user's example; and a draft-export program,
at the example itself. Strict can keep a dim symbolic where the default capture read it into a
Python int (``n = int(x.shape[1])``), and then its program is right at every size; but it can
also trace a size-dependent path at the example only and give a program that is silently wrong
elsewhere (a pooling that comes out ``1×1`` where the model gives ``2×2``). So the program is
run beside the model at one or two other sizes of its dynamic dims, and kept only when every
output matches.
"""

from __future__ import annotations

from typing import Any

from ..inputs import BoundInputs

__all__ = ["differs_at_example", "differs_from_model", "example_sizes", "inputs_at", "other_size_assignments"]

RTOL, ATOL = 1e-4, 1e-5  # the same ATen kernels run on both sides: only summation order differs


def example_sizes(symbols: dict[tuple[str, int], str], bound: BoundInputs) -> dict[str, int]:
    """Each input symbol's size in ``bound``, read at the first input axis that has it."""
    sizes: dict[str, int] = {}
    for (path, axis), expr in symbols.items():
        if expr.isidentifier() and expr not in sizes:
            sizes[expr] = bound.leaf(path).shape[axis]
    return sizes


def other_size_assignments(program: Any, bound: BoundInputs,
                           symbols: dict[tuple[str, int], str] | None = None) -> list[dict[str, int]]:
    """Sizes for the program's input symbols other than the example's, inside the ranges it
    was captured for: each symbol one larger (or one smaller at its maximum), then twice the
    example (when that fits and differs). Empty when the program has no symbol. ``symbols``:
    ``symbol_of(program, bound)`` if known."""
    from .. import compat
    from ..program_symbols import symbol_of

    symbols = symbol_of(program, bound) if symbols is None else symbols
    examples = example_sizes(symbols, bound)
    ranges = compat.program_ranges(program)
    assignments: list[dict[str, int]] = []
    for pick in (lambda v: v + 1, lambda v: 2 * v):
        assignment = {}
        for symbol, example in examples.items():
            low, high = ranges.get(symbol, (0, None))
            size = pick(example)
            if high is not None and size > high:
                size = example - 1 if example - 1 >= max(low, 1) else example
            assignment[symbol] = size
        if assignment != examples and assignment not in assignments:
            assignments.append(assignment)
    return assignments


def inputs_at(symbols: dict[tuple[str, int], str], bound: BoundInputs,
              assignment: dict[str, int]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``bound``'s inputs with the axes of every symbol in ``assignment`` at its size (derived
    axes evaluated), values like the example's."""
    import sympy
    import torch

    from ..cases.inputs import tensor_like

    sizes: dict[tuple[str, int], int] = {}
    for key, expr in symbols.items():
        if expr in assignment:
            sizes[key] = assignment[expr]
        elif not expr.lstrip("-").isdigit():
            try:  # a derived axis (2*s0): evaluated at the new sizes
                sizes[key] = int(sympy.sympify(expr).subs({sympy.Symbol(k): v for k, v in assignment.items()}))
            except (TypeError, ValueError, sympy.SympifyError):
                pass
    generator = torch.Generator().manual_seed(0)
    leaves = list(bound.values)
    for leaf in bound.leaves:
        example = leaves[leaf.index]
        if isinstance(example, torch.Tensor):
            shape = tuple(sizes.get((leaf.path, axis), size) for axis, size in enumerate(leaf.shape))
            if shape != tuple(example.shape):
                leaves[leaf.index] = tensor_like(example, shape, generator)
    return bound.rebuild(leaves)


def _tensors(value: Any) -> list[Any]:
    import torch

    from ..compat import tree_flatten_with_path

    return [leaf for _, leaf in tree_flatten_with_path(value) if isinstance(leaf, torch.Tensor)]


def _difference(got: list[Any], want: list[Any]) -> str | None:
    import torch

    if len(got) != len(want):
        return f"it returns {len(got)} tensor(s) where the model returns {len(want)}"
    for index, (mine, theirs) in enumerate(zip(got, want, strict=True)):
        if tuple(mine.shape) != tuple(theirs.shape):
            return f"its output {index} has shape {list(mine.shape)} where the model's has {list(theirs.shape)}"
        if mine.dtype != theirs.dtype:
            return f"its output {index} is {mine.dtype} where the model's is {theirs.dtype}"
        close = torch.allclose(mine, theirs, rtol=RTOL, atol=ATOL, equal_nan=True) if mine.is_floating_point() \
            else torch.equal(mine, theirs)
        if not close:
            return f"its output {index} differs from the model's"
    return None


def _labels(symbols: dict[tuple[str, int], str]) -> dict[str, str]:
    """Each input symbol by the first input axis that has it: ``x.shape[1]``."""
    labels: dict[str, str] = {}
    for (path, axis), expr in symbols.items():
        labels.setdefault(expr, f"{path}.shape[{axis}]")
    return labels


def differs_from_model(model: Any, program: Any, bound: BoundInputs, *, also: tuple[dict[str, int], ...] = (),
                       what: str = "strict capture", guarded: bool = True) -> str | None:
    """None when ``program`` matches ``model`` at every other size tried (``also``'s
    assignments first, then :func:`other_size_assignments`); else why not, in words ("at
    x.shape[1]=7 its output 0 has shape [2, 3] where the model's has [2, 3, 1]"). A size the
    model itself refuses is not one to judge at; when the model refuses them all (the sizes the
    program was captured at, given in ``also``, are no other size), the program cannot be shown
    right elsewhere, which is said. ``guarded=False`` runs the program without
    torch's guard check: the question is then what it computes there, not what torch proved."""
    import torch

    from .. import compat
    from ..model_state import preserved
    from ..model_twin import twin_of
    from ..program_symbols import symbol_of

    symbols = symbol_of(program, bound)
    assignments = [*also, *(a for a in other_size_assignments(program, bound, symbols) if a not in also)]
    if not assignments:
        return "its program has no dynamic dim"
    runnable = program.module() if guarded else compat.unguarded_module(program)
    labels = _labels(symbols)
    captured_at = example_sizes(symbols, bound)  # where the program was captured: no other size
    judged = 0
    for assignment in assignments:
        where = ", ".join(f"{labels.get(symbol, symbol)}={size}" for symbol, size in assignment.items())
        args, kwargs = inputs_at(symbols, bound, assignment)
        try:
            twin = twin_of(model)  # the user's own module is never called
            with preserved(twin, what=f"checking the {what} at {where}"), torch.no_grad():
                want = _tensors(twin(*args, **kwargs))
        except Exception:  # noqa: BLE001 - the model refuses this size: no judgement there
            continue
        judged += assignment != captured_at
        try:
            with torch.no_grad():
                got = _tensors(runnable(*args, **kwargs))
        except Exception as exc:  # noqa: BLE001 - the program refuses a size the model takes
            return f"at {where} it fails where the model runs ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
        difference = _difference(got, want)
        if difference is not None:
            return f"at {where} {difference}"
    return None if judged else "the model runs at no other size tried, so the program cannot be shown right there"


def differs_at_example(model: Any, program: Any, bound: BoundInputs) -> str | None:
    """None when ``program`` gives the model's outputs at the example inputs themselves; else
    how it differs. For a program torch could not trace soundly (draft export fixed values
    it could not know), which may not even reproduce the example."""
    import torch

    from .. import compat
    from ..model_state import preserved
    from ..model_twin import twin_of

    twin = twin_of(model)  # the user's own module is never called
    with preserved(twin, what="checking the draft capture at the example"), torch.no_grad():
        want = _tensors(twin(*bound.args, **bound.kwargs))
    with torch.no_grad():
        got = _tensors(compat.unguarded_module(program)(*bound.args, **bound.kwargs))
    return _difference(got, want)
