"""Values per node for a graph overlay (verification error, profiled latency), how a module
box sums up its nodes' values, and the colour ramp that paints them
(:func:`exporter.graphs.draw.side_by_side`'s ``overlay``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union

from ..bench.profiling import ProfileResult

__all__ = ["REDUCERS", "ErrorOverlay", "OverlayLegend", "OverlaySource", "check_reducer", "error_legend", "error_overlay",
           "overlay_values",
           "ramp_colour", "reduce_values", "time_legend", "tolerance_colour"]


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


# How a module box shows the values of the nodes inside it.
REDUCERS: dict[str, Callable[[Sequence[float]], float]] = {"sum": sum, "max": max, "mean": _mean}

# light yellow → orange → dark red (the ColorBrewer YlOrRd ends and middle)
_STOPS = ((255, 255, 204), (253, 141, 60), (189, 0, 38))


# What an overlay is made from: node name → number (a mapping or a pandas Series), or a profile.
OverlaySource = Union[Mapping[str, float], ProfileResult, None]


def overlay_values(overlay: OverlaySource, known: Iterable[str]) -> dict[str, float]:
    """Node name → value, from what the caller has at hand:

    - a mapping or a pandas ``Series`` (node name → number; ONNX or FX node names),
    - a :class:`~exporter.bench.ProfileResult` (``session.profile()``): microseconds per run
      of each ONNX node. onnxruntime names a fused kernel after a model node (``fused
      node_MatMul_3``...); such a name is matched to the longest model node name it starts with.

    Names that match no node of ``known`` are dropped."""
    known = set(known)
    if overlay is None:
        return {}
    if isinstance(overlay, ProfileResult):
        runs = max(int(overlay.runs), 1)
        raw: dict[str, float] = {}
        for node in overlay.nodes:
            raw[node.node] = raw.get(node.node, 0.0) + float(node.total_us) / runs
    elif hasattr(overlay, "items"):
        raw = {str(k): float(v) for k, v in overlay.items()}
    else:
        raise TypeError(
            f"overlay must be a mapping of node name → number, a pandas Series or a ProfileResult, "
            f"not {type(overlay).__name__}"
        )
    out: dict[str, float] = {}
    for name, value in raw.items():
        target = _match(name, known)
        if target is not None and value == value:  # drop NaN
            out[target] = out.get(target, 0.0) + value
    return out


def _match(name: str, known: set[str]) -> str | None:
    if name in known:
        return name
    base = name.removeprefix("fused ")
    if base in known:
        return base
    prefixes = [k for k in known if base.startswith(k)]
    return max(prefixes, key=len) if prefixes else None


def ramp_colour(fraction: float) -> str:
    """``0`` → light yellow, ``1`` → dark red, as ``#rrggbb``."""
    fraction = min(max(float(fraction), 0.0), 1.0)
    position = fraction * (len(_STOPS) - 1)
    low = min(int(position), len(_STOPS) - 2)
    t = position - low
    rgb = (round(a + (b - a) * t) for a, b in zip(_STOPS[low], _STOPS[low + 1]))
    return "#" + "".join(f"{c:02x}" for c in rgb)


def reduce_values(values: Sequence[float], how: str) -> float:
    """``values`` summed up by the reducer named ``how`` (``sum``, ``max``, ``mean``)."""
    return REDUCERS[how](values)


def check_reducer(how: str) -> None:
    """Raises ``ValueError`` unless ``how`` names a reducer."""
    if how not in REDUCERS:
        raise ValueError(f"overlay_reduce must be one of {', '.join(REDUCERS)}, not {how!r}")


# an error within its tolerance: light → mid green; over it: orange (1×) → dark red (100× and more)
_GREENS = ((229, 245, 224), (116, 196, 118))
_OVER = ((253, 141, 60), (189, 0, 38))


def _mix(a: tuple[int, int, int], b: tuple[int, int, int], t: float) -> str:
    t = min(max(t, 0.0), 1.0)
    return "#" + "".join(f"{round(x + (y - x) * t):02x}" for x, y in zip(a, b))


def tolerance_colour(ratio: float) -> str:
    """The colour of an error that is ``ratio`` times its allowed error: green up to 1 (lighter
    the smaller), orange just over 1 → dark red at 100× and more."""
    if ratio != ratio:  # NaN: as bad as it gets
        return _mix(*_OVER, 1.0)
    if ratio <= 1.0:
        return _mix(*_GREENS, max(ratio, 0.0))
    return _mix(*_OVER, math.log10(ratio) / 2)


@dataclass(frozen=True)
class OverlayLegend:
    """What an overlay's colours mean, as the page draws it under the toolbar: ``title``
    (what is painted, with its ``units``), ``stops`` (colour, label) from low to high,
    ``tolerance`` (the error overlay's rule, ``""`` otherwise) and ``case`` (the inputs the
    values were computed on)."""

    kind: str
    title: str
    units: str
    stops: tuple[tuple[str, str], ...]
    tolerance: str = ""
    case: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "title": self.title, "units": self.units, "stops": [list(s) for s in self.stops],
                "tolerance": self.tolerance, "case": self.case}


def _number(value: float) -> str:
    return f"{value:.3g}"


def time_legend(top_us: float, *, case: str = "the example inputs", reduce: str = "sum") -> OverlayLegend:
    """The time overlay's legend: onnxruntime time per node in ms per run, light yellow at 0
    to dark red at ``top_us`` (the value the top colour stands for, in µs)."""
    top_ms = top_us / 1000.0
    stops = tuple((ramp_colour(f), f"{_number(top_ms * f)} ms") for f in (0.0, 0.25, 0.5, 0.75, 1.0))
    boxes = "a module box: the sum of its nodes" if reduce == "sum" else f"a module box: the {reduce} of its nodes"
    return OverlayLegend("time", f"onnxruntime time per node, ms per run ({boxes})", "ms per run", stops, case=case)


def error_legend(allowed: Sequence[float], *, case: str, rule: str = "") -> OverlayLegend:
    """The error overlay's legend: each node's max abs error ÷ the error verify allows it
    (``allowed``: the allowed abs errors of the nodes compared), green within the tolerance,
    orange → red over it; ``rule`` is verify's tolerance (``Tolerance.__str__``)."""
    stops = ((tolerance_colour(0.0), "0"), (tolerance_colour(1.0), "≤ tolerance"),
             (tolerance_colour(1.01), "just over"), (tolerance_colour(10.0), "10× over"),
             (tolerance_colour(100.0), "≥ 100× over"))
    finite = [a for a in allowed if a == a and 0 < a != float("inf")]  # exact (int) values allow 0
    span = (f"allowed abs error per node {_number(min(finite))} … {_number(max(finite))}" if finite
            else "no allowed error recorded")
    text = f"{rule}; {span}" if rule else span
    return OverlayLegend("error", "max abs error ÷ allowed error, FX vs ONNX (a module box: its worst node)",
                         "× tolerance", stops, tolerance=text, case=case)


#: The error ratio painted for a shape or dtype mismatch, or an infinite error: as bad as it gets.
WORST_RATIO = 1000.0


@dataclass(frozen=True)
class ErrorOverlay:
    """An error overlay as data, from a comparison of every intermediate value
    (:func:`exporter.graphs.compare_intermediates`): per ONNX node compared, ``ratios`` (its
    max abs error ÷ the error verify allows it: ≤ 1 within tolerance; :data:`WORST_RATIO` for a
    mismatch) and ``errors`` (its max abs error); ``over``: the nodes over the tolerance, in
    graph order; ``allowed``: the allowed abs errors; ``case``: the inputs compared."""

    case: str
    ratios: Mapping[str, float]
    errors: Mapping[str, float]
    over: tuple[str, ...]
    allowed: tuple[float, ...]

    @property
    def compared(self) -> int:
        return len(self.ratios)

    @property
    def worst_error(self) -> float:
        return max(self.errors.values(), default=0.0)

    def summary(self, case: str | None = None) -> str:
        """What the overlay shows, in one line (``case``: how to name the inputs, default its ``case``)."""
        where = case or self.case
        if not self.over:
            return (f"error: all {self.compared} compared nodes within tolerance (max error {self.worst_error:.3g}) "
                    f"on case {where}")
        return f"error: {len(self.over)} of {self.compared} compared nodes exceed the tolerance on case {where}"


def error_overlay(result: Any) -> ErrorOverlay:
    """The overlay of an :class:`~exporter.graphs.IntermediateComparison` (see :class:`ErrorOverlay`)."""
    ratios: dict[str, float] = {}
    errors: dict[str, float] = {}
    allowed: list[float] = []
    for row in result.rows:
        if row.status == "mismatch":
            ratios[row.onnx_node] = WORST_RATIO
            continue
        if row.status not in ("pass", "fail") or row.max_abs is None:
            continue
        error = float(row.max_abs)
        errors[row.onnx_node] = error
        if row.atol_applied is not None:
            allowed.append(float(row.atol_applied))
        if not math.isfinite(error):
            ratio = WORST_RATIO
        elif row.atol_applied:
            ratio = min(error / float(row.atol_applied), WORST_RATIO)
        else:  # nothing allowed (an exact dtype): none or all of it
            ratio = 0.0 if error == 0 else WORST_RATIO
        if row.status == "fail":
            ratio = max(ratio, 1.0 + 1e-6)  # over, whatever the rounding
        ratios[row.onnx_node] = ratio
    over = tuple(row.onnx_node for row in result.rows if row.bad)
    return ErrorOverlay(result.case, ratios, errors, over, tuple(allowed))
