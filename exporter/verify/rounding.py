"""Float32 rounding told apart from a wrong export, with the model run in float64.

A deep stack of random convolutions (HGNetV2, MobileNetV2 from tiny configs) amplifies float32
rounding: eager PyTorch itself is 0.005 away from the exact result on outputs of 18, and an
ONNX model that adds its ops in another order is as far, in another direction, so it fails a
1e-4 tolerance against eager although it is as right as eager is. When an output fails by a
little (:data:`NEAR`), :class:`Float64Reference` runs the model once more with its parameters,
buffers and inputs in float64 (``torch.func.functional_call`` of a twin: the module itself is not
changed) and the output passes when onnxruntime is no farther from that reference than eager
float32 is, *element by element*:

- every element beyond the tolerance is within :data:`ELEMENT_FACTOR` times eager's distance
  from float64 *there*, plus its tolerance. "There" is the element's channel
  (:func:`exporter.verify.channels.channel_scale` of eager's distances): the largest distance
  of the slices it lies in, the quietest of them, each holding at least
  :data:`ROUNDING_SAMPLES` elements. One distance is one draw of the rounding: onnxruntime's
  and eager's at one element differ by 10x one time in 15; the largest of 8 draws beside it
  gives the scale (rounding goes past 8x it about once in 2 million elements). An error on
  elements eager computes exactly (a ``Linear`` beside columns that lose precision) is never
  excused by the others' rounding;
- over the whole output, onnxruntime's root-mean-square distance is at most
  :data:`RMS_FACTOR` times eager's: a shift of every element by a few times its rounding,
  which each element's test lets through, is not rounding.

Where no slice holds 8 elements (a small output), the scale is the median distance of the
whole output; where only some do (8 columns over a batch of 4), those decide, and the other
sizes compared (a batch of 8 and more) tell the columns apart. A model that cannot run in
float64 (a tensor it makes in float32 meets a float64 one) keeps its failure, and so does one
whose float64 run does not repeat itself (it draws random numbers: see :mod:`.randomness`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..errors import Status
from .channels import channel_scale
from .eager import map_tensors, run_eager
from .tolerance import OutputCheck, allowance

__all__ = ["ELEMENT_FACTOR", "NEAR", "RMS_FACTOR", "ROUNDING_SAMPLES", "Float64Reference", "rounding_rejudged"]

NEAR = 1e-2  # an output whose largest difference is at most this share of its largest |value|
ELEMENT_FACTOR = 8.0  # onnxruntime's distance from float64 at an element, at most this times eager's there
ROUNDING_SAMPLES = 8  # eager distances a slice needs to give the rounding scale of its elements
RMS_FACTOR = 2.0  # ... and over the whole output, its root-mean-square at most this times eager's


class Float64Reference:
    """The model's outputs with its floating parameters, buffers and inputs in float64,
    computed only when asked, the float64 weights made once."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self._weights: dict[str, Any] | None = None
        self.failed = False
        self._repeats: bool | None = None

    def outputs(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> list[Any] | None:
        """The float64 outputs in the order eager's are compared, or None when the model does
        not run in float64 (said once: no second try)."""
        import torch
        from torch.func import functional_call

        if self.failed or not isinstance(self.model, torch.nn.Module):
            return None
        try:
            if self._weights is None:
                named = {**dict(self.model.named_parameters()), **dict(self.model.named_buffers())}
                self._weights = {name: _float64(t) for name, t in named.items()}
            weights = self._weights

            def in_float64(twin: Any, *call_args: Any, **call_kwargs: Any) -> Any:  # swaps weights on the twin
                return functional_call(twin, weights, call_args, call_kwargs, strict=False)

            return run_eager(self.model, map_tensors(tuple(args), _float64), map_tensors(dict(kwargs), _float64),
                             what="in float64, to tell rounding from a wrong export", call=in_float64)
        except Exception:  # noqa: BLE001 - the comparison stands as it was
            self.failed = True
            return None

    def repeats(self, args: Sequence[Any], kwargs: Mapping[str, Any], first: Sequence[Any]) -> bool:
        """Whether the model run in float64 again gives ``first`` again, asked once per
        reference: one that draws random numbers does not, and its distance from eager is other
        draws, not rounding (noise of 1e-3 passed as rounding before)."""
        import torch

        if self._repeats is None:
            again = self.outputs(args, kwargs)
            self._repeats = again is not None and len(again) == len(first) and all(
                not isinstance(a, torch.Tensor) or (isinstance(b, torch.Tensor) and a.shape == b.shape
                                                    and bool(torch.allclose(a, b, rtol=1e-12, atol=0.0, equal_nan=True)))
                for a, b in zip(first, again))
        return self._repeats


def _float64(tensor: Any) -> Any:
    import torch

    return tensor.detach().to(torch.float64) if tensor.dtype == torch.float32 else tensor.detach()


def _near(check: OutputCheck, expected: Any) -> bool:
    import torch

    if check.status != Status.FAIL or check.nonfinite_actual or check.nonfinite_expected:
        return False
    if not isinstance(expected, torch.Tensor) or expected.dtype != torch.float32 or not expected.numel():
        return False
    return (check.max_abs or 0.0) <= NEAR * float(expected.abs().max())


def _rms(values: Any) -> float:
    import numpy as np

    return float(np.sqrt(np.mean(np.square(values))))


def _as_rounding(check: OutputCheck, actual: Any, expected: Any, truth: Any) -> tuple[float, float] | None:
    """(onnxruntime's, eager's) largest distance from the float64 output ``truth`` when every
    element of ``check``'s output beyond the tolerance is as close to it as rounding allows (see
    the module docstring); None otherwise."""
    import numpy as np

    tol = check.tolerance
    if tol is None:
        return None
    want = expected.detach().cpu().numpy().astype(np.float64)
    got = np.asarray(actual, dtype=np.float64)
    exact = truth.detach().cpu().numpy().astype(np.float64, copy=False)
    if got.shape != want.shape:
        return None
    own, theirs = np.abs(want - exact), np.abs(got - exact)
    own_max = float(own.max())
    if own_max == 0 or _rms(theirs) > RMS_FACTOR * _rms(own):
        return None
    diff = np.abs(got - want)
    allowed = allowance(np.abs(want), diff, tol, check.relative_atol)[0].reshape(-1)
    beyond = np.flatnonzero(diff.reshape(-1) > allowed)
    local = np.maximum(own.reshape(-1)[beyond], channel_scale(own, beyond, ROUNDING_SAMPLES))
    if np.count_nonzero(theirs.reshape(-1)[beyond] > ELEMENT_FACTOR * local + allowed[beyond]):
        return None
    return float(theirs.max()), own_max


def rounding_rejudged(checks: Sequence[OutputCheck], actual: Sequence[Any], expected: Sequence[Any],
                      reference: Float64Reference | None, args: Sequence[Any],
                      kwargs: Mapping[str, Any]) -> list[OutputCheck]:
    """``checks`` with each float32 output that failed by a little passed when onnxruntime is
    as close to the float64 outputs as eager float32 is, element by element (see the module
    docstring; its ``rounding`` set to the two largest distances); as they were otherwise."""
    import torch

    out = list(checks)
    near = [i for i, check in enumerate(checks) if i < len(expected) and _near(check, expected[i])]
    if reference is None or not near or any(not c.ok and i not in near for i, c in enumerate(checks)):
        return out  # a shape, a dtype, a NaN or a large difference: not rounding
    exact = reference.outputs(args, kwargs)
    if exact is None or len(exact) != len(expected):
        return out
    for i in near:
        truth = exact[i]
        if not isinstance(truth, torch.Tensor) or truth.shape != expected[i].shape:
            return list(checks)
        distances = _as_rounding(checks[i], actual[i], expected[i], truth)
        if distances is not None:
            out[i] = replace(checks[i], status=Status.PASS, rounding=distances)
    if out != list(checks) and not reference.repeats(args, kwargs, exact):
        return list(checks)  # random draws, not rounding
    return out
