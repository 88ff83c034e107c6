"""The chunked delta rule's loop over chunks as one ``scan``.

Linear-attention layers in transformers (Qwen3-Next, Qwen3.5 and Qwen3.5-MoE, OLMo-Hybrid,
LARA-mini through ``torch_chunk_gated_delta_rule``; Kimi-Linear, Bailing-Hybrid, GLM-5-Next
through ``chunk_kimi_delta_attention``) pad the sequence to a multiple of 64 and walk the
chunks with ``for i in range(num_chunks)``. torch.export unrolls the loop at the example's
number of chunks and guards it (``(seq + pad) // 64 == 1``): the ONNX model holds only for
sequences of that many chunks, and onnxruntime fails in a ``Slice`` (or runs out of memory) at a
longer one, as torch.onnx.export's does. The replacement computes every chunk's output and
state from the state before, in the same order, as one ``scan`` over the chunks
(:func:`exporter.compat.scan`, an ONNX ``Scan``); everything before the loop is the original's.
"""

from __future__ import annotations

from typing import Any

from .base import Patch, PatchTarget, function_targets, replacing_marked

__all__ = ["DeltaRuleChunkScan"]


def _l2norm(x: Any, dim: int = -1, eps: float = 1e-6) -> Any:
    """Qwen3-Next's ``l2norm`` (FLA's)."""
    import torch

    return x * torch.rsqrt((x * x).sum(dim=dim, keepdim=True) + eps)


def _kimi_l2norm(x: Any, dim: int = -1, eps: float = 1e-6) -> Any:
    """Kimi-Linear's ``l2norm``: a square root and a division, as its Triton kernel."""
    import torch

    return x / torch.sqrt((x * x).sum(dim=dim, keepdim=True) + eps)


def torch_chunk_gated_delta_rule(query: Any, key: Any, value: Any, g: Any, beta: Any, chunk_size: int = 64,
                                 initial_state: Any = None, output_final_state: bool = False,
                                 use_qk_l2norm_in_kernel: bool = False, **kwargs: Any) -> Any:
    """The gated delta rule by chunks (Qwen3-Next's), the loop over chunks a ``scan``."""
    import torch
    import torch.nn.functional as F

    from ..compat import scan

    initial_dtype = query.dtype
    batch_size, sequence_length, num_k_heads, k_head_dim = key.shape
    num_v_heads, v_head_dim = value.shape[-2:]
    recurrent_state_shape = (batch_size, num_v_heads, k_head_dim, v_head_dim)
    padded_output_shape = (batch_size, num_v_heads, -1, v_head_dim)
    decay = g
    if num_k_heads != num_v_heads:
        query = query.repeat_interleave(num_v_heads // num_k_heads, dim=2)
        key = key.repeat_interleave(num_v_heads // num_k_heads, dim=2)
    query, key, value, beta, decay = [
        x.transpose(1, 2).to(torch.float32, memory_format=torch.contiguous_format)
        for x in (query, key, value, beta, decay)
    ]
    if use_qk_l2norm_in_kernel:
        query = _l2norm(query, dim=-1, eps=1e-6)
        key = _l2norm(key, dim=-1, eps=1e-6)
    scaling = query.shape[-1] ** -0.5
    query = query * scaling
    pad_size = (chunk_size - sequence_length % chunk_size) % chunk_size
    query, key, value = (F.pad(x, (0, 0, 0, pad_size)) for x in (query, key, value))
    beta, decay = (F.pad(x, (0, pad_size)) for x in (beta, decay))
    v_beta = value * beta.unsqueeze(-1)
    k_beta = key * beta.unsqueeze(-1)
    query, key, k_beta, v_beta = [
        x.reshape(x.shape[0], x.shape[1], -1, chunk_size, x.shape[-1]) for x in (query, key, k_beta, v_beta)
    ]
    decay = decay.reshape(decay.shape[0], decay.shape[1], -1, chunk_size)
    strictly_upper_mask = torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=query.device).triu(1)
    cum_decay = decay.cumsum(dim=3)
    pairwise_decay = cum_decay.unsqueeze(4) - cum_decay.unsqueeze(3)
    pairwise_decay = pairwise_decay.masked_fill(strictly_upper_mask, float("-inf"))
    pairwise_decay = pairwise_decay.exp()
    ut_system = (k_beta @ key.transpose(-1, -2)) * pairwise_decay
    intra_chunk_attn = (query @ key.transpose(-1, -2)) * pairwise_decay
    decayed_k_beta = k_beta * cum_decay.exp().unsqueeze(-1)
    if not torch.compiler.is_exporting():
        new_values = torch.linalg.solve_triangular(ut_system, v_beta, upper=False, unitriangular=True)
        k_cumdecay = torch.linalg.solve_triangular(ut_system, decayed_k_beta, upper=False, unitriangular=True)
    else:
        ut_system = -ut_system.tril(-1)
        for i in range(1, chunk_size):  # over the chunk's positions: a constant count
            row = ut_system[..., i, :i].clone()
            sub = ut_system[..., :i, :i].clone()
            ut_system[..., i, :i] = row + (row.unsqueeze(-1) * sub).sum(-2)
        ut_system = ut_system + torch.eye(chunk_size, dtype=ut_system.dtype, device=ut_system.device)
        new_values, k_cumdecay = ut_system @ v_beta, ut_system @ decayed_k_beta
    if initial_state is None:
        last_recurrent_state = torch.zeros(recurrent_state_shape, dtype=new_values.dtype, device=new_values.device)
    else:
        last_recurrent_state = initial_state.to(new_values)
    query = query * cum_decay.exp().unsqueeze(-1)
    key = key * (cum_decay[..., -1:] - cum_decay).exp().unsqueeze(-1)
    chunk_decay = cum_decay[..., -1].exp()[..., None, None]

    def chunk(state: Any, inputs: Any) -> Any:
        new_values_i, k_cumdecay_i, query_i, intra_i, chunk_decay_i, key_i = inputs
        v_new = new_values_i - k_cumdecay_i @ state
        out = query_i @ state + intra_i @ v_new
        return state * chunk_decay_i + key_i.transpose(-1, -2) @ v_new, out

    chunks = tuple(x.movedim(2, 0) for x in (new_values, k_cumdecay, query, intra_chunk_attn, chunk_decay, key))
    last_recurrent_state, outputs = scan(chunk, last_recurrent_state, chunks)
    core_attn_out = outputs.movedim(0, 2).reshape(padded_output_shape)
    core_attn_out = core_attn_out[:, :, :sequence_length]
    core_attn_out = core_attn_out.transpose(1, 2).to(initial_dtype, memory_format=torch.contiguous_format)
    return core_attn_out, last_recurrent_state if output_final_state else None


def chunk_kimi_delta_attention(query: Any, key: Any, value: Any, g: Any, beta: Any, chunk_size: int = 64,
                               initial_state: Any = None, output_final_state: bool = False,
                               use_qk_l2norm_in_kernel: bool = False, **kwargs: Any) -> Any:
    """Kimi delta attention by chunks (Kimi-Linear's), the loop over chunks a ``scan``."""
    import torch
    import torch.nn.functional as F

    from ..compat import scan

    initial_dtype = query.dtype
    query, key, value, beta, g = [x.transpose(1, 2).contiguous().to(torch.float32) for x in (query, key, value, beta, g)]
    if use_qk_l2norm_in_kernel:
        query = _kimi_l2norm(query, dim=-1, eps=1e-6)
        key = _kimi_l2norm(key, dim=-1, eps=1e-6)
    batch_size, num_heads, sequence_length, k_head_dim = key.shape
    v_head_dim = value.shape[-1]
    scale = 1 / (query.shape[-1] ** 0.5)
    pad_size = (chunk_size - sequence_length % chunk_size) % chunk_size
    query = F.pad(query, (0, 0, 0, pad_size)) * scale
    key = F.pad(key, (0, 0, 0, pad_size))
    value = F.pad(value, (0, 0, 0, pad_size))
    g = F.pad(g, (0, 0, 0, pad_size))
    beta = F.pad(beta, (0, pad_size))
    v_beta = value * beta.unsqueeze(-1)
    k_beta = key * beta.unsqueeze(-1)
    query, key, value, g, k_beta, v_beta = [
        x.reshape(x.shape[0], x.shape[1], -1, chunk_size, x.shape[-1]) for x in (query, key, value, g, k_beta, v_beta)
    ]
    beta = beta.reshape(beta.shape[0], beta.shape[1], -1, chunk_size)
    g = g.cumsum(dim=-2)
    mask = torch.triu(torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=query.device), diagonal=0)
    strict_mask = torch.triu(torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=query.device), diagonal=1)
    decay_mask = (g.unsqueeze(-2) - g.unsqueeze(-3)).masked_fill(strict_mask[..., None], float("-inf")).exp().float()
    attn = -(k_beta.unsqueeze(-2) * key.unsqueeze(-3) * decay_mask).sum(dim=-1).masked_fill(mask, 0)
    for i in range(1, chunk_size):  # over the chunk's positions: a constant count
        row = attn[..., i, :i].clone()
        sub = attn[..., :i, :i].clone()
        attn[..., i, :i] = row + (row.unsqueeze(-1) * sub).sum(-2)
    attn = attn + torch.eye(chunk_size, dtype=attn.dtype, device=attn.device)
    value = attn @ v_beta
    k_cumdecay = attn @ (k_beta * g.exp())
    last_recurrent_state = (
        torch.zeros(batch_size, num_heads, k_head_dim, v_head_dim, dtype=value.dtype, device=value.device)
        if initial_state is None
        else initial_state.to(value)
    )
    # The causal mask of a chunk, one copy per chunk: scanned like the rest, not closed over.
    future = torch.triu(torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=query.device), diagonal=1)
    futures = future.expand(query.shape[2], chunk_size, chunk_size)

    def chunk(state: Any, inputs: Any) -> Any:
        q_i, k_i, v_i, g_i, decay_mask_i, k_cumdecay_i, future_i = inputs
        attn_inter = (q_i * g_i.exp()) @ state
        attn_intra = (q_i.unsqueeze(-2) * k_i.unsqueeze(-3) * decay_mask_i).sum(dim=-1).masked_fill(future_i, 0)
        v_new = v_i - k_cumdecay_i @ state
        out = attn_inter + attn_intra @ v_new
        state = state * g_i[:, :, -1].exp().unsqueeze(-1) + (k_i * (g_i[:, :, -1:] - g_i).exp()).transpose(-1, -2) @ v_new
        return state, out

    chunks = tuple(x.movedim(2, 0) for x in (query, key, value, g, decay_mask, k_cumdecay)) + (futures,)
    last_recurrent_state, outputs = scan(chunk, last_recurrent_state, chunks)
    core_attn_out = outputs.movedim(0, 2)
    core_attn_out = core_attn_out.reshape(core_attn_out.shape[0], core_attn_out.shape[1], -1, core_attn_out.shape[-1])
    core_attn_out = core_attn_out[:, :, :sequence_length]
    core_attn_out = core_attn_out.transpose(1, 2).contiguous().to(initial_dtype)
    return core_attn_out, last_recurrent_state if output_final_state else None


# (function name, what its source says, the replacement)
_VARIANTS = (
    ("torch_chunk_gated_delta_rule", (
        "for i in range(num_chunks):",
        "v_new = new_values[:, :, i] - k_cumdecay[:, :, i] @ last_recurrent_state",
        "last_recurrent_state = last_recurrent_state * chunk_decay[:, :, i] + key[:, :, i].transpose(-1, -2) @ v_new",
        "decay = decay.reshape(decay.shape[0], decay.shape[1], -1, chunk_size)",
    ), torch_chunk_gated_delta_rule),
    ("chunk_kimi_delta_attention", (
        "for i in range(total_sequence_length // chunk_size):",
        "attn_intra = (q_i.unsqueeze(-2) * k_i.unsqueeze(-3) * decay_mask[:, :, i]).sum(dim=-1).masked_fill(mask, 0)",
        "v_prime = k_cumdecay[:, :, i] @ last_recurrent_state",
        "+ (k_i * (g_i[:, :, -1:] - g_i).exp()).transpose(-1, -2) @ v_new",
    ), chunk_kimi_delta_attention),
)


class DeltaRuleChunkScan(Patch):
    name = "delta_rule_scan"
    idiom = ("the chunked delta rule's Python loop over chunks of 64 positions (`for i in range(num_chunks)` in "
             "`torch_chunk_gated_delta_rule` / `chunk_kimi_delta_attention`)")
    symptom = ("the loop is unrolled at the example's number of chunks: the ONNX model fails (or runs out of "
               "memory) at a sequence of another number of chunks")

    def targets(self, model: Any) -> tuple[PatchTarget, ...]:
        return tuple(t for name, marks, replacement in _VARIANTS
                     for t in function_targets(model, name, replacing_marked((marks, replacement))))
