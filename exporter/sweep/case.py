"""What a zoo factory returns: a model, its example inputs and the dim names to export with."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SweepCase"]


@dataclass(frozen=True, eq=False)
class SweepCase:
    """One model ready to export, as a ``torch.onnx.export`` user would call it:
    ``model(*args, **kwargs)`` with ``dynamic_shapes`` naming the dynamic dims with strings
    (``{"input_ids": {0: "batch", 1: "seq"}}``). A factory builds a fresh model each time it
    is called; the sweep never shares one between units."""

    model: Any
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    dynamic_shapes: Any = None
