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
from .tolerance import first_difference

__all__ = ["random_draws"]

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
                 expected: Sequence[Any], output_names: Sequence[str], tolerances: Any) -> Finding | None:
    """A ``not_verified`` finding when eager PyTorch, run again on the example inputs, gives
    other outputs than ``expected`` (its first run): where the program draws random numbers,
    and what to do; None for a model that gives the same outputs twice."""
    try:
        again = run_eager(model, args, kwargs, what="again on the example inputs, to tell a random model")
    except Exception:  # noqa: BLE001 - no second run: the comparison stands as it is
        return None
    if len(again) != len(expected) or first_difference("example", output_names, expected, again, tolerances) is None:
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
        what + ": eager PyTorch gives other outputs at each run with the same inputs, and onnxruntime's "
        "cannot follow, so no comparison says anything",
        "example", tuple(sizes),
        fix="make the randomness an input of forward, or turn it off for export (a noise scale of 0), then verify again",
    )
