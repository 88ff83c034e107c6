"""Dim ranges torch narrowed, carried by the ONNX model itself (``metadata_props``).

An ONNX input dim is a ``dim_param`` (``height``): nothing in the model says that torch
verified the program only for ``60 <= height <= 115`` (a guard in Swin's window code) or
``2 <= seq <= 128`` (BERT's position embeddings), and onnxruntime does not check it: outside
that range the model runs and can be wrong. The range is known at export time
(:attr:`~exporter.Session.dims`); :func:`with_range_metadata` writes it into the final model,
one readable entry per narrowed input axis, so every copy of the model carries it
(``session.model_proto``, ``session.save(...)``, Netron's model properties)::

    onnx_workbench.range.pixel_values.2 =
        pixel_values.2 height: 60..115 (at least 60: …, swin_transformer.py:608; at most 115: …)

The key names the ONNX input and axis; the value says the input, axis, dim name, ``min..max``
(``inf`` when unbounded) and why: the user's ``Dim(min, max)`` when they asked for it, and the
bounds torch's guards put on it, with the line that added each. A model without a narrowed
range is handed on unchanged (the same object, the same bytes).

Narrowed means a dynamic axis whose range is not ``[0 or 1, inf]``: an upper bound, a lower
bound above 2, or a lower bound of 2 that a guard (``seq != 1``) or the user's ``Dim`` asked for
(plain ``torch.export`` starts every dynamic range at 2 by itself: that is no narrowing).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..dims import Dim

if TYPE_CHECKING:
    from .outcomes import DimOutcome, DimOutcomes

__all__ = ["METADATA_PREFIX", "NarrowedRange", "narrowed_ranges", "range_metadata", "read_range_metadata",
           "with_range_metadata"]

METADATA_PREFIX = "onnx_workbench.range."


@dataclass(frozen=True)
class NarrowedRange:
    """One input axis whose valid range is narrower than ``[1, inf]``, in the user's terms:
    the ONNX input name, the axis, the dim name, ``[min, max]`` (``max`` None: unbounded) and
    ``why`` (the requested Dim and the guards' bounds, each with its line)."""

    input: str
    axis: int
    dim: str
    min: int
    max: int | None
    why: str

    @property
    def key(self) -> str:
        """``onnx_workbench.range.pixel_values.2``: the ``metadata_props`` key."""
        return f"{METADATA_PREFIX}{self.input}.{self.axis}"

    @property
    def range_text(self) -> str:
        """``60..115``; ``2..inf`` when unbounded."""
        return f"{self.min}..{'inf' if self.max is None else self.max}"

    def __str__(self) -> str:
        """``pixel_values.2 height: 60..115 (at least 60: …, swin_transformer.py:608; …)``."""
        return f"{self.input}.{self.axis} {self.dim}: {self.range_text} ({self.why})"


def _requested_bounds(outcome: DimOutcome) -> bool:
    policy = outcome.policy
    return isinstance(policy, Dim) and ((policy.min or 0) > 1 or policy.max is not None)


def _narrowed(outcome: DimOutcome) -> bool:
    if not outcome.dynamic:
        return False
    low = outcome.shown_min or 1
    if outcome.max is not None or low > 2:
        return True
    return low == 2 and (bool(outcome.bounds) or _requested_bounds(outcome))


def _why(outcome: DimOutcome) -> str:
    parts = [f"requested {outcome.requested}"] if _requested_bounds(outcome) else []
    if outcome.why:
        parts.append(outcome.why)
    return "; ".join(parts) or "the range torch obtained"


def narrowed_ranges(dims: DimOutcomes, onnx_names: Mapping[str, str] | None = None) -> tuple[NarrowedRange, ...]:
    """Every dynamic axis of ``dims`` (:attr:`~exporter.Session.dims`) whose range is
    narrowed (see the module docstring), in input order; ``onnx_names`` maps an input path to
    its ONNX input name (``Session.onnx_input_names``; missing: the path)."""
    names = onnx_names or {}
    return tuple(
        NarrowedRange(names.get(o.input, o.input), o.axis, o.dim or o.symbol or "?", o.shown_min or 1, o.max, _why(o))
        for o in dims.outcomes
        if _narrowed(o)
    )


def range_metadata(ranges: tuple[NarrowedRange, ...]) -> dict[str, str]:
    """The ``metadata_props`` entries of ``ranges``: key → readable text."""
    return {r.key: str(r) for r in ranges}


def _has_symbolic_input(model: Any) -> bool:
    for value in model.graph.inputs:
        shape = value.shape
        if shape is not None and any(not isinstance(d, int) for d in shape):
            return True
    return False


def with_range_metadata(model: Any, session: Any) -> Any:
    """``model`` (the final ``onnx_ir.Model`` of ``session``, a
    :class:`~exporter.Session`) with the narrowed dim ranges in its ``metadata_props``: a copy
    (sharing the weights) when there are some, ``model`` itself otherwise. The shared stage
    output is never changed. Never raises: a range it cannot read leaves the model as it is."""
    if not _has_symbolic_input(model):  # all static: nothing to say, and no dims to compute
        return model
    try:
        ranges = narrowed_ranges(session.dims, session.onnx_input_names)
    except Exception:  # noqa: BLE001 - metadata is extra: the model stays as exported
        return model
    if not ranges:
        return model
    copy = model.clone()
    copy.metadata_props.update(range_metadata(ranges))
    return copy


def read_range_metadata(model: Any) -> dict[str, str]:
    """The range entries of a model's metadata (an ``onnx.ModelProto`` or an
    ``onnx_ir.Model``), key → text, as :func:`with_range_metadata` wrote them."""
    props = model.metadata_props
    items = props.items() if isinstance(props, Mapping) else ((p.key, p.value) for p in props)
    return {key: value for key, value in items if key.startswith(METADATA_PREFIX)}
