"""A model that draws random numbers in eval mode (VITS samples its durations and waveform with
``torch.randn_like``): eager PyTorch gives other outputs at every run with the same inputs, and
onnxruntime's draws cannot be torch's, so no comparison means anything. Told apart from a wrong
export by running eager PyTorch at the example a second time (:func:`random_draws`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..frames import short_source, source_of_stack
from .eager import run_eager
from .results import Finding
from .tolerance import OutputCheck, first_difference

__all__ = ["random_draws"]

_FAR = 10.0  # onnxruntime this many times farther from eager than two eager runs are: said plainly

# aten ops that draw from torch's generator.
_RANDOM = ("rand", "randn", "randint", "randperm", "normal", "bernoulli", "uniform", "exponential",
           "multinomial", "poisson", "native_dropout")


def _draw_lines(program: Any) -> list[str]:
    """Where the program draws random numbers: ``file:line in func: code``, once each."""
    lines: list[str] = []
    for node in program.graph.nodes:
        name = getattr(getattr(node.target, "_overloadpacket", None), "__name__", "") if node.op == "call_function" else ""
        if name.rstrip("_").removesuffix("_like") in _RANDOM:  # normal_, randn_like
            where = short_source(source_of_stack(node.meta.get("stack_trace")))
            if where and where not in lines:
                lines.append(where)
    return lines


def random_draws(model: Any, program: Any, args: Sequence[Any], kwargs: Mapping[str, Any], sizes: Any,
                 expected: Sequence[Any], output_names: Sequence[str], tolerances: Any,
                 seen: Sequence[OutputCheck] = ()) -> Finding | None:
    """A ``not_verified`` finding when eager PyTorch, run again on the example inputs, gives
    other outputs than ``expected`` (its first run): where the program draws random numbers,
    how far apart two eager runs are and how far onnxruntime is (``seen``: the example's
    checks), and what to do; None for a model that gives the same outputs twice."""
    try:
        again = run_eager(model, args, kwargs, what="again on the example inputs, to tell a random model")
    except Exception:  # noqa: BLE001 - no second run: the comparison stands as it is
        return None
    runs = first_difference("example", output_names, expected, again, tolerances) if len(again) == len(expected) else None
    if runs is None:
        return None
    try:
        lines = _draw_lines(program)
    except Exception:  # noqa: BLE001 - the finding stands without the lines
        lines = []
    if lines:
        what = ("the model draws random numbers (" + "; ".join(lines[:3])
                + (f"; and {len(lines) - 3} more" if len(lines) > 3 else "") + ")")
    else:  # no draw in the program: a global the forward reads, say
        what = "the model gives other outputs at each run (random numbers, or state outside the module that changes)"
    return Finding(
        "random",
        what + f": eager PyTorch gives other outputs at each run with the same inputs{_gap(runs, seen)}",
        "example", tuple(sizes),
        fix="make the randomness an input of forward, or turn it off for export (a noise scale of 0), then verify again",
    )


def _gap(runs: OutputCheck, seen: Sequence[OutputCheck]) -> str:
    """How far apart two eager runs are, how far onnxruntime is, and why that cannot be judged."""
    eager = runs.max_abs or 0.0
    text = f" (two runs differ by up to {eager:.3g})"
    worst = max((c for c in seen if c.max_abs is not None), key=lambda c: c.max_abs or 0.0, default=None)
    if worst is None or worst.max_abs is None:
        return text + ", and onnxruntime's draws cannot follow torch's, so no comparison says anything"
    ratio = f", {worst.max_abs / eager:.3g}x that" if eager > 0 else ""
    text += (f"; onnxruntime differs from eager by up to {worst.max_abs:.3g} (output {worst.output!r}{ratio}) and its "
             "draws cannot follow torch's, so no comparison tells a wrong export from other draws")
    if eager > 0 and worst.max_abs > _FAR * eager:
        text += f", though a gap over {_FAR:g}x is more than other draws explain: likely a wrong export"
    return text
