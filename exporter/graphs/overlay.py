"""Values per node for a graph overlay (verification error, profiled latency), how a module
box sums up its nodes' values, and the colour ramp that paints them
(:func:`exporter.graphs.draw.side_by_side`'s ``overlay``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Union

from ..bench.profiling import ProfileResult

__all__ = ["REDUCERS", "OverlaySource", "check_reducer", "overlay_values", "ramp_colour", "reduce_values"]


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
