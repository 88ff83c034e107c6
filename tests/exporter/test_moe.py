"""Mixture-of-experts: ``torch._grouped_mm`` and transformers' ``grouped_mm_fallback`` (what a
transformers 5 MoE model with its default "grouped_mm" experts calls under torch.export) have
no torchlib translation; ``exporter/pipeline/translations.py`` adds one. Tiny modules check every
grouped_mm form against eager, then Mixtral and Qwen2-MoE (tiny configs, random weights) export
with named dynamic batch/seq, match eager at another size and pass verify."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from exporter import Dim, ExportOptions, Session

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def exported(session: Session) -> Session:
    result = session.run()
    assert result.ok and session.succeeded, session.failed_stage.error if session.failed_stage else result
    return session


def op_types(session: Session) -> set[str]:
    return {node.op_type for node in session.model_proto.graph.node}


# --- grouped_mm forms against torch's own kernel ------------------------------------------------
# torch's kernel takes bfloat16 only (its fake kernel refuses float32 at capture), with row
# strides that are multiples of 16 bytes; onnxruntime's CPU MatMul has no bfloat16 kernel, so
# the translation multiplies in float32 (as the kernel accumulates) and rounds the result once.
# The modules take and return float32; inside they call the kernel in bfloat16.

BF16 = torch.bfloat16


class RowsByExpert(torch.nn.Module):
    """2-D x 3-D, the MoE case: rows ``offs[g-1]:offs[g]`` times expert ``g``'s weight."""

    def __init__(self, experts: int = 4, k: int = 8, n: int = 16):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(experts, k, n).to(BF16))

    def forward(self, rows, offs):
        return torch._grouped_mm(rows.to(BF16), self.weight, offs=offs).float()


def offsets(counts) -> torch.Tensor:
    return torch.tensor(np.cumsum(counts), dtype=torch.int32)


def assert_bf16_close(got, want):
    """Equal up to one bfloat16 rounding step of the result (summation order may differ)."""
    np.testing.assert_allclose(got, want, rtol=2 ** -7, atol=1e-2)


def rows_session(model) -> Session:
    return exported(Session(model, (torch.randn(7, 8), offsets([2, 0, 3, 2])), None,
                            ExportOptions(dynamic_shapes={"rows": {0: Dim("tokens")}, "offs": None})))


def test_rows_by_expert_match_torchs_kernel_with_empty_experts_at_any_row_count():
    torch.manual_seed(0)
    model = RowsByExpert().eval()
    session = rows_session(model)
    assert {"Split", "MatMul"} <= op_types(session)
    for counts in ([2, 0, 3, 2], [0, 0, 0, 1], [5, 6, 0, 4], [0, 9, 0, 0]):
        rows = torch.randn(sum(counts), 8)
        (got,) = session.run_onnx(rows, offsets(counts))
        with torch.no_grad():
            assert_bf16_close(got, model(rows, offsets(counts)).numpy())


def test_rows_past_the_last_offset_come_out_zero():
    """torch's kernel leaves them uninitialized; transformers' fallback writes 0, as we do."""
    torch.manual_seed(0)
    model = RowsByExpert().eval()
    session = rows_session(model)
    rows = torch.randn(9, 8)
    (got,) = session.run_onnx(rows, offsets([1, 2, 0, 3]))
    with torch.no_grad():
        assert_bf16_close(got[:6], model(rows, offsets([1, 2, 0, 3])).numpy()[:6])
    assert not got[6:].any()


class OtherForms(torch.nn.Module):
    """3-D x 3-D (no offs), 2-D x 2-D (K split by offs) and 3-D x 2-D (N split by offs)."""

    def forward(self, batched, weights, a, b, grouped, wide, offs):
        a = a.to(BF16).t().contiguous().t()  # the kernel wants mat_a column-major when K is jagged
        outs = (
            torch._grouped_mm(batched.to(BF16), weights.to(BF16)),
            torch._grouped_mm(a, b.to(BF16), offs=offs),
            torch._grouped_mm(grouped.to(BF16), wide.to(BF16), offs=offs),
        )
        return tuple(out.float() for out in outs)


def test_batched_split_k_and_split_n_forms_match_torchs_kernel():
    torch.manual_seed(0)

    def inputs(m: int, counts):
        total = int(sum(counts))
        return (torch.randn(4, m, 8), torch.randn(4, 8, 16), torch.randn(m, total), torch.randn(total, 16),
                torch.randn(4, m, 8), torch.randn(8, total), offsets(counts))

    m, total = "m", "total"  # named, not strict Dims: the kernel's 16-byte strides make them multiples of 8
    session = exported(Session(OtherForms(), inputs(8, [8, 0, 16, 8]), None, ExportOptions(dynamic_shapes={
        "batched": {1: m}, "weights": None, "a": {0: m, 1: total}, "b": {0: total},
        "grouped": {1: m}, "wide": {1: total}, "offs": None})))
    for size, counts in ((8, [8, 0, 16, 8]), (16, [0, 24, 8, 16])):
        args = inputs(size, counts)
        got = session.run_onnx(*args)
        with torch.no_grad():
            want = OtherForms()(*args)
        assert len(got) == 3
        for g, w in zip(got, want):
            assert g.shape == tuple(w.shape)
            assert_bf16_close(g, w.numpy())


def test_a_dynamic_number_of_groups_is_refused_with_the_transformers_workaround():
    from exporter.pipeline import translations

    import onnx_ir as ir

    class Value:  # what the translation sees: an ONNX value, offs of unknown length
        def __init__(self, shape):
            self.shape, self.dtype = shape, ir.DataType.FLOAT

    with pytest.raises(NotImplementedError, match=r'set_experts_implementation\("batched_mm"\)'):
        translations.grouped_mm(Value((6, 8)), Value((4, 8, 12)), Value(("groups",)))


def test_transformers_fallback_op_is_swapped_for_aten_grouped_mm_at_decompose():
    import transformers.integrations.moe  # noqa: F401 - registers transformers::grouped_mm_fallback

    class Fallback(torch.nn.Module):  # float32, as transformers calls it for non-bfloat16 weights
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.randn(4, 8, 16))

        def forward(self, rows, offs):
            return torch.ops.transformers.grouped_mm_fallback(rows, self.weight, offs)

    torch.manual_seed(0)
    model = Fallback().eval()
    session = rows_session(model)
    targets = {str(node.target) for node in session.stage_output("capture").graph.nodes}
    assert "transformers.grouped_mm_fallback.default" in targets  # the capture keeps the user's op
    rows = torch.randn(10, 8)
    (got,) = session.run_onnx(rows, offsets([1, 2, 0, 3]))  # rows 6.. past offs[-1]: 0 in both
    with torch.no_grad():
        np.testing.assert_allclose(got, model(rows, offsets([1, 2, 0, 3])).numpy(), rtol=1e-5, atol=1e-5)


# --- transformers MoE models (tiny configs, random weights) -----------------------------------

def mixtral():
    import transformers

    config = transformers.MixtralConfig(num_hidden_layers=2, hidden_size=32, intermediate_size=64,
                                        num_attention_heads=4, num_key_value_heads=2, num_local_experts=4,
                                        num_experts_per_tok=2, vocab_size=100)
    return transformers.MixtralForCausalLM(config).eval()


def qwen2_moe():
    import transformers

    config = transformers.Qwen2MoeConfig(num_hidden_layers=2, hidden_size=32, intermediate_size=64,
                                         moe_intermediate_size=32, shared_expert_intermediate_size=64,
                                         num_attention_heads=4, num_key_value_heads=2, num_experts=4,
                                         num_experts_per_tok=2, vocab_size=100)
    return transformers.Qwen2MoeForCausalLM(config).eval()


@pytest.mark.parametrize("build", [mixtral, qwen2_moe], ids=["mixtral", "qwen2_moe"])
def test_moe_model_with_default_experts_exports_named_dims_matches_eager_at_3x5_and_verifies(build):
    torch.manual_seed(0)
    model = build()
    assert model.config._experts_implementation == "grouped_mm"  # the default, not a workaround
    options = ExportOptions(dynamic_shapes={"input_ids": {0: "batch", 1: "seq"}})
    session = exported(Session(model, (), {"input_ids": torch.randint(0, 100, (2, 4)), "use_cache": False},
                               options))
    (ids,) = session.model_proto.graph.input
    assert [d.dim_param for d in ids.type.tensor_type.shape.dim] == ["batch", "seq"]
    ids = torch.randint(0, 100, (3, 5))
    with torch.no_grad():
        want = model(input_ids=ids, use_cache=False).logits.numpy()
    got = session.run_onnx(input_ids=ids, use_cache=False)[0]
    assert got.shape == want.shape == (3, 5, 100)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    result = session.verify()
    assert result.ok, result
