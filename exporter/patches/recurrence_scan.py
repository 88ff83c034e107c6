"""Linear recurrences over the sequence as one ``scan`` instead of a Python loop.

Two more transformers models run a recurrence step by step in Python on CPU, which
torch.export unrolls at the example's length (the capture refuses a dynamic sequence, as
torch.onnx.export does):

- RWKV's ``rwkv_linear_attention_cpu`` (``for current_index in range(seq_length)``: the WKV
  numerator, denominator and running maximum);
- RecurrentGemma's RG-LRU ``_rnn_scan`` (``for t in range(hidden_states.shape[1])``).

Each replacement computes the same values in the same order, each step from the one before,
as one ``scan`` over the sequence (:func:`exporter.compat.scan`): one ONNX ``Scan`` whatever
the length. Tensors the steps share (RWKV's ``time_first`` and decay) go in as the scan's
inputs broadcast over the sequence, so the step function closes over no tensor.
"""

from __future__ import annotations

from typing import Any

from .base import Patch, PatchTarget, function_targets, method_targets, source_of

__all__ = ["LinearRnnScan", "RwkvAttentionScan"]


def rwkv_linear_attention_cpu(time_decay: Any, time_first: Any, key: Any, value: Any, state: Any = None,
                              return_state: bool = False) -> Any:
    """RWKV's WKV attention (the CPU path), the loop over the sequence a ``scan``."""
    import torch

    from ..compat import scan

    if state is None:
        num_state = torch.zeros_like(key[:, 0], dtype=torch.float32)
        den_state = torch.zeros_like(key[:, 0], dtype=torch.float32)
        max_state = torch.zeros_like(key[:, 0], dtype=torch.float32) - 1e38
    else:
        num_state, den_state, max_state = state
    time_decay = -torch.exp(time_decay)
    output_dtype = key.dtype

    def step(carry: Any, inputs: Any) -> Any:
        num_state, den_state, max_state = carry
        current_key, current_value, first, decay = inputs
        current_key = current_key.float()
        max_for_output = torch.maximum(max_state, current_key + first)
        e1 = torch.exp(max_state - max_for_output)
        e2 = torch.exp(current_key + first - max_for_output)
        output = ((e1 * num_state + e2 * current_value) / (e1 * den_state + e2)).to(output_dtype)
        max_for_state = torch.maximum(max_state + decay, current_key)
        e1 = torch.exp(max_state + decay - max_for_state)
        e2 = torch.exp(current_key - max_for_state)
        return (e1 * num_state + e2 * current_value, e1 * den_state + e2, max_for_state), output

    steps = key.shape[1]
    shared = (time_first.expand(steps, *time_first.shape), time_decay.expand(steps, *time_decay.shape))
    (num_state, den_state, max_state), outputs = scan(
        step, (num_state, den_state, max_state), (key.movedim(1, 0), value.movedim(1, 0), *shared))
    if return_state or state is not None:
        state = [num_state, den_state, max_state]
    return outputs.movedim(0, 1), state


def _rnn_scan(self: Any, hidden_states: Any, recurrent_gate: Any, reset: Any, recurrent_states: Any,
              acc_dtype: Any = None) -> Any:
    """RecurrentGemma's linear recurrence, the loop over the sequence a ``scan``."""
    import torch

    from ..compat import scan

    acc_dtype = torch.float32 if acc_dtype is None else acc_dtype
    recurrent_gate = recurrent_gate * ~reset
    if hidden_states.shape[1] == 1:  # one step: transformers' sampling mode, as it is
        if recurrent_states is None:
            return hidden_states, hidden_states[:, 0].type(acc_dtype)
        contextualized_states = recurrent_gate.type(acc_dtype) * recurrent_states[:, None].to(recurrent_gate.device)
        contextualized_states += hidden_states.type(acc_dtype)
        return contextualized_states.type(hidden_states.dtype), contextualized_states[:, -1]
    if recurrent_states is None:
        recurrent_states = torch.zeros(hidden_states[:, 0].shape, dtype=acc_dtype, device=hidden_states.device)
    output_dtype = hidden_states.dtype

    def step(state: Any, inputs: Any) -> Any:
        gate, hidden = inputs
        state = gate.type(acc_dtype) * state + hidden.type(acc_dtype)
        return state, state.to(output_dtype, copy=True)  # a scan's output may not alias its carry

    recurrent_states, outputs = scan(step, recurrent_states.to(recurrent_gate.device),
                                     (recurrent_gate.movedim(1, 0), hidden_states.movedim(1, 0)))
    return outputs.movedim(0, 1), recurrent_states


def _rwkv_rewrite(function: Any) -> tuple[Any, str, str] | None:
    source = source_of(function)
    marks = ("for current_index in range(seq_length):", "max_for_output = torch.maximum(max_state, current_key + time_first)",
             "max_for_state = torch.maximum(max_state + time_decay, current_key)")
    return (rwkv_linear_attention_cpu, source, source_of(rwkv_linear_attention_cpu)) \
        if all(m in source for m in marks) else None


def _rnn_rewrite(method: Any) -> tuple[Any, str, str] | None:
    source = source_of(method)
    marks = ("for t in range(hidden_states.shape[1]):",
             "recurrent_states = recurrent_gate[:, t].type(acc_dtype) * recurrent_states",
             "recurrent_states = recurrent_states + hidden_states[:, t].type(acc_dtype)")
    return (_rnn_scan, source, source_of(_rnn_scan)) if all(m in source for m in marks) else None


class RwkvAttentionScan(Patch):
    name = "rwkv_attention_scan"
    idiom = "RWKV's WKV attention as a Python loop over the sequence (`rwkv_linear_attention_cpu`)"
    symptom = "the loop is unrolled at the example's length: the sequence length is made static"

    def targets(self, model: Any) -> tuple[PatchTarget, ...]:
        return function_targets(model, "rwkv_linear_attention_cpu", _rwkv_rewrite)


class LinearRnnScan(Patch):
    name = "linear_rnn_scan"
    idiom = "RecurrentGemma's RG-LRU recurrence as a Python loop over the sequence (`_rnn_scan`)"
    symptom = "the loop is unrolled at the example's length: the sequence length is made static"

    def targets(self, model: Any) -> tuple[PatchTarget, ...]:
        return method_targets(model, "_rnn_scan", _rnn_rewrite)
