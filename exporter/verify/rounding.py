"""Float32 rounding told apart from a wrong export, with the model run in float64.

A deep stack of random convolutions (HGNetV2, MobileNetV2 from tiny configs) amplifies float32
rounding: eager PyTorch itself is 0.005 away from the exact result on outputs of 18, and an
ONNX model that adds its ops in another order is as far, in another direction, so it fails a
1e-4 tolerance against eager although it is as right as eager is. When an output fails by a
little (:data:`NEAR`), :class:`Float64Reference` runs the model once more with its parameters,
buffers and inputs in float64 (``torch.func.functional_call``: the module itself is not
changed) and the output passes when onnxruntime is no farther from that reference than eager
float32 is: its root-mean-square distance at most :data:`RMS_FACTOR` times eager's, and its
largest at most :data:`MAX_FACTOR` times eager's (the largest of thousands of rounding errors
varies from run to run by 2x; the mean does not; one element wrong by more than rounding fails
the second). A model that cannot run in float64 (a tensor it makes in float32 meets a float64
one) keeps its failure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..errors import Status
from .eager import map_tensors, run_eager
from .tolerance import OutputCheck

__all__ = ["MAX_FACTOR", "NEAR", "RMS_FACTOR", "Float64Reference", "rounding_rejudged"]

NEAR = 1e-2  # an output whose largest difference is at most this share of its largest |value|
RMS_FACTOR = 2.0  # onnxruntime's distances from float64, at most these times eager float32's
MAX_FACTOR = 4.0


class Float64Reference:
    """The model's outputs with its floating parameters, buffers and inputs in float64,
    computed only when asked, the float64 weights made once."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self._weights: dict[str, Any] | None = None
        self.failed = False

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

            def in_float64(*call_args: Any, **call_kwargs: Any) -> Any:
                return functional_call(self.model, weights, call_args, call_kwargs, strict=False)

            return run_eager(self.model, map_tensors(tuple(args), _float64), map_tensors(dict(kwargs), _float64),
                             what="in float64, to tell rounding from a wrong export", call=in_float64)
        except Exception:  # noqa: BLE001 - the comparison stands as it was
            self.failed = True
            return None


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
    return float(values.square().mean().sqrt())


def rounding_rejudged(checks: Sequence[OutputCheck], actual: Sequence[Any], expected: Sequence[Any],
                      reference: Float64Reference | None, args: Sequence[Any],
                      kwargs: Mapping[str, Any]) -> list[OutputCheck]:
    """``checks`` with each float32 output that failed by a little passed when onnxruntime is
    as close to the float64 outputs as eager float32 is (see the module docstring; its
    ``rounding`` set to the two largest distances); as they were otherwise."""
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
        own = expected[i].double() - truth
        theirs = torch.as_tensor(actual[i]).double() - truth
        own_max, theirs_max = float(own.abs().max()), float(theirs.abs().max())
        if own_max > 0 and theirs_max <= MAX_FACTOR * own_max and _rms(theirs) <= RMS_FACTOR * _rms(own):
            out[i] = replace(checks[i], status=Status.PASS, rounding=(theirs_max, own_max))
    return out
