"""Mamba's selective scan as one ``scan`` instead of a Python loop over the sequence.

transformers' Mamba, Falcon-Mamba, Jamba and Zamba share ``mamba_selective_scan``; without the
CUDA kernels it runs the recurrence as ``for index in range(seq_len)``, which torch.export
unrolls at the example's length: the capture refuses a dynamic sequence ("the model's code
makes it the constant 16", at the loop's ``torch.matmul``), and torch.onnx.export does too.
The replacement computes the same values in the same order, each step's state and output
from the step before, as one ``scan`` over the sequence (:func:`exporter.compat.scan`), which
the export keeps as a single node whatever the length (an ONNX ``Scan``). transformers wraps
the function for its hub kernels (an ``nn.Module`` calling it); the patch replaces the module
attribute its callers look up, wrapper and all, for the block's duration.
"""

from __future__ import annotations

from typing import Any

from .base import Patch, PatchTarget, function_targets, source_of

__all__ = ["SelectiveScanLoop"]

FUNCTION = "mamba_selective_scan"


def mamba_selective_scan(hidden_states: Any, dt: Any, A: Any, B: Any, C: Any, D: Any = None, z: Any = None,
                         delta_bias: Any = None, delta_softplus: bool = False, return_last_state: bool = False,
                         use_mambapy: bool = False, use_associative_scan: bool = False, **kwargs: Any) -> Any:
    """The selective scan of Mamba (the recurrent path), the loop over the sequence a ``scan``."""
    import torch
    import torch.nn.functional as F

    from ..compat import scan

    batch_size, intermediate_size, _ = hidden_states.shape
    input_dtype = hidden_states.dtype
    if delta_bias is not None:
        dt = dt + delta_bias.to(dt.dtype)[..., None]
    if delta_softplus:
        dt = F.softplus(dt)
    B = B.transpose(1, 2)
    C = C.transpose(1, 2)
    discrete_A = torch.exp(A[None, :, None, :] * dt[:, :, :, None])
    discrete_B = dt[:, :, :, None] * B[:, None, :, :].float()
    deltaB_u = discrete_B * hidden_states[:, :, :, None].float()

    def step(ssm_state: Any, inputs: Any) -> Any:
        decay, update, readout = inputs
        ssm_state = decay * ssm_state + update
        state = ssm_state if ssm_state.dtype == input_dtype else ssm_state.to(input_dtype)
        return ssm_state, torch.matmul(state, readout.unsqueeze(-1))[:, :, 0]

    initial = torch.zeros(batch_size, intermediate_size, A.shape[-1], dtype=deltaB_u.dtype, device=hidden_states.device)
    ssm_state, outputs = scan(step, initial, (discrete_A.movedim(2, 0), deltaB_u.movedim(2, 0), C.movedim(1, 0)))
    scan_output = outputs.movedim(0, -1)
    if D is not None:
        scan_output = scan_output + hidden_states * D[None, :, None]
    if z is not None:
        scan_output = scan_output * F.silu(z)
    if return_last_state:
        return scan_output, ssm_state
    return scan_output


def _is_sequence_loop(source: str) -> bool:
    """The recurrent path this replacement computes (transformers 5's shared implementation)."""
    return all(mark in source for mark in (
        "for index in range(seq_len):",
        "ssm_state = discrete_A[:, :, index] * ssm_state + deltaB_u[:, :, index]",
        "torch.matmul(ssm_state.to(input_dtype), C[:, index, :].unsqueeze(-1))",
        "discrete_B = dt[:, :, :, None] * B[:, None, :, :].float()",
    ))


class SelectiveScanLoop(Patch):
    name = "selective_scan_loop"
    idiom = ("Mamba's selective scan as a Python loop over the sequence (`for index in range(seq_len)` in "
             "`mamba_selective_scan`)")
    symptom = "the loop is unrolled at the example's length: the sequence length is made static"

    def targets(self, model: Any) -> tuple[PatchTarget, ...]:
        return function_targets(model, FUNCTION, _rewrite)


def _rewrite(function: Any) -> tuple[Any, str, str] | None:
    source = source_of(function)
    return (mamba_selective_scan, source, source_of(mamba_selective_scan)) if _is_sequence_loop(source) else None
