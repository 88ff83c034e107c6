"""Why the decomposed program differs from eager PyTorch at the example when the model itself
branches on torch's exporting flag: eager PyTorch run again as if exporting gives the program's
outputs (transformers' masking utilities never skip a causal mask while exporting; a model
whose attention also says ``is_causal = False`` (AIMv2's text tower) is causal only there)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ... import compat
from ...frames import source_label
from ..eager import run_eager
from ..tolerance import first_difference
from .fx_side import program_tensors

__all__ = ["export_path_cause"]


def export_path_cause(model: Any, args: Sequence[Any], kwargs: Mapping[str, Any], case: str,
                      output_names: Sequence[str], outputs: Sequence[Any], tolerances: Any) -> str | None:
    """What to say instead of "torch.export baked in behaviour of the example" when eager
    PyTorch, run with ``torch.compiler.is_exporting()`` answering True, gives the program's
    ``outputs``: where the model asked; None when it never asked or still differs."""
    try:
        with compat.as_if_exporting() as asked:
            as_exported = run_eager(model, args, kwargs, what="when run as if exporting, to explain a difference")
    except Exception:  # noqa: BLE001 - a model that cannot run that way: the usual explanation stands
        return None
    tensors = program_tensors(outputs)
    if not asked or len(tensors) != len(as_exported) \
            or first_difference(case, output_names, tensors, as_exported, tolerances) is not None:
        return None
    places = ", ".join(source_label(file, line, short=True) for file, line in asked[:3]) + (f" and {len(asked) - 3} more" if len(asked) > 3 else "")
    return (f"the model takes another path while torch exports: it asks torch.compiler.is_exporting() or "
            f"is_compiling() at {places}, and eager PyTorch run as if exporting gives the program's outputs; "
            "the ONNX model computes what the model computes under export")
