"""Edge values in verify: masks all ones / all zeros / with one fully masked row, ids at 0 and
at the last row of their embedding, each at the example size.

Observed on torch 2.13 + onnxscript 0.7.2: torchlib translates ``scaled_dot_product_attention``
with a bool mask by adding the float's lowest finite value at masked keys, so a query row with
every key masked softmaxes to equal weights and onnxruntime returns the mean of ``v``, where
PyTorch returns 0. A size sweep keeps every mask's pattern and never sees it. With
``ExportOptions(fully_masked_rows="mean")`` (torch.onnx.export's translation) verify must flag
it and name the fix; with the default ``"zero"`` the model matches PyTorch and verify passes.
Correct models (a tiny BERT, a masked mean) must not raise a false alarm.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from exporter import AUTO, Dim, ExportOptions, Session
from exporter.examples import demo_block
from exporter.verify import edge_values

MEAN_OF_V = "onnxruntime returns the mean of v where PyTorch returns 0 for a fully masked row"


class BareAttention(torch.nn.Module):
    def forward(self, q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def bare_inputs(mask_dtype=torch.bool):
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 2, 5, 4, generator=generator) for _ in range(3))
    mask = torch.ones(2, 1, 5, 5, dtype=torch.bool)
    mask[1, 0, :, 3:] = False  # padding, never a whole row
    if mask_dtype != torch.bool:
        mask = torch.zeros(mask.shape).masked_fill(~mask, float("-inf"))
    return q, k, v, mask


def demo_session(**options):
    model, args, kwargs, dims = demo_block()
    return Session(model, args, kwargs, ExportOptions(dynamic_shapes=dims, **options))


class MaskedMean(torch.nn.Module):
    """Mean over the unmasked positions, 0 for a row with none: correct in ONNX at any mask."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 4)

    def forward(self, x, attention_mask):
        weights = attention_mask.to(x.dtype)[..., None]
        return self.proj((x * weights).sum(1) / weights.sum(1).clamp(min=1.0))


class TypedTokens(torch.nn.Module):
    """token_type_ids of 0/1 read by a 2-row embedding: ids, not a mask."""

    def __init__(self):
        super().__init__()
        self.words = torch.nn.Embedding(50, 8)
        self.types = torch.nn.Embedding(2, 8)

    def forward(self, input_ids, token_type_ids):
        return self.words(input_ids.reshape(input_ids.shape)) + self.types(token_type_ids)


# -- the fully masked row ------------------------------------------------------------------------
def _line_of_sdpa_in_examples() -> int:
    import exporter.examples

    source = Path(exporter.examples.__file__).read_text().splitlines()
    return next(i for i, line in enumerate(source, 1) if "F.scaled_dot_product_attention(" in line)


def test_demo_block_with_torch_onnx_translation_fails_at_a_fully_masked_row_in_plain_words():
    result = demo_session(fully_masked_rows="mean").verify()

    assert result.status == "failed", result.summary()
    sizes = [c for c in result.cases if not c.is_edge_value]
    assert len(sizes) > 1 and all(c.ok for c in sizes)  # the size sweep alone says PASSED
    row = result.case("attention_mask: one row all False (a fully masked row)")
    assert row.status == "fail" and row.max_abs > 0.1
    assert result.case("attention_mask: all True").ok  # nothing masked: same numbers
    [finding] = [f for f in result.findings if f.kind == "wrong_at_value"]
    assert finding.message.startswith("With attention_mask all False (every row fully masked) or one row all False")
    assert MEAN_OF_V in finding.message
    assert "scaled_dot_product_attention" in finding.cause and f"examples.py:{_line_of_sdpa_in_examples()}" in finding.cause
    assert "lowest float value, not -inf" in finding.cause
    assert 'fully_masked_rows="zero"' in finding.fix
    assert result.suggested_options == {"fully_masked_rows": "zero"}
    assert f"  - {finding.message}\n      likely cause: " in result.summary()
    assert result.divergence.fx_target == "aten.scaled_dot_product_attention.default"
    html = result._repr_html_()
    assert "wrong_at_value" in html and "fully_masked_rows=&quot;zero&quot;" in html


def test_demo_block_passes_with_the_suggested_fix_and_by_default():
    flagged = demo_session(fully_masked_rows="mean")
    fixed = flagged.with_options(**flagged.verify(edge_values=True).suggested_options).verify()
    default = demo_session().verify()

    for result in (fixed, default):
        assert result.ok, result.summary()
        assert [c.name for c in result.cases if c.is_edge_value] == [
            "attention_mask: all True",
            "attention_mask: all False (every row fully masked)",
            "attention_mask: one row all False (a fully masked row)",
        ]
        assert result.suggested_options == {}
        assert "  - correct with edge values: attention_mask: all True; " in result.summary()


@pytest.mark.parametrize("rows, flagged", [("mean", True), ("zero", False)])
def test_bare_sdpa_is_flagged_with_torch_onnx_translation_and_passes_with_the_fix(rows, flagged):
    session = Session(BareAttention(), bare_inputs(), {}, ExportOptions(fully_masked_rows=rows))
    result = session.verify()

    assert result.ok is not flagged, result.summary()
    failed = {c.name for c in result.cases if not c.ok}
    if flagged:
        assert failed == {"mask: all False (every row fully masked)", "mask: one row all False (a fully masked row)"}
        [finding] = [f for f in result.findings if f.kind == "wrong_at_value"]
        assert MEAN_OF_V in finding.message and finding.options == (("fully_masked_rows", "zero"),)
    else:
        assert failed == set()


def test_fix_returns_zero_for_a_fully_masked_float_row_where_torch_onnx_returns_nan():
    q, k, v, mask = bare_inputs(torch.float32)
    mask[0, 0, 2, :] = float("-inf")
    with torch.no_grad():
        want = BareAttention()(q, k, v, mask).numpy()
    assert (want[0, :, 2] == 0).all()

    zero = Session(BareAttention(), (q, k, v, mask), {}).run_onnx(q, k, v, mask)[0]
    mean = Session(BareAttention(), (q, k, v, mask), {}, ExportOptions(fully_masked_rows="mean")).run_onnx(q, k, v, mask)[0]
    np.testing.assert_allclose(zero, want, atol=1e-5)
    assert np.isnan(mean[0, :, 2]).all()


def test_fully_masked_rows_rejects_an_unknown_choice_with_the_choices():
    from exporter.errors import SpecError

    with pytest.raises(SpecError, match="fully_masked_rows='nan'") as info:
        ExportOptions(fully_masked_rows="nan")
    assert "'zero'" in str(info.value.hint) and "'mean'" in str(info.value.hint)


# -- which cases, and no false alarm -------------------------------------------------------------
def test_mask_cases_skip_the_example_value_and_stay_at_the_example_size():
    model = MaskedMean().eval()
    x = torch.randn(3, 6, 8)
    ones = torch.ones(3, 6, dtype=torch.long)
    session = Session(model, (x, ones), {}, ExportOptions(dynamic_shapes={"x": {0: Dim("batch")}, "attention_mask": {0: Dim("batch")}}))
    result = session.verify()

    assert result.ok, result.summary()
    edges = [c for c in result.cases if c.is_edge_value]
    assert [c.name for c in edges] == [  # all ones is the example itself: not repeated
        "attention_mask: all zeros (every row fully masked)",
        "attention_mask: one row all zeros (a fully masked row)",
    ]
    assert all(dict(c.sizes)["batch"] == 3 for c in edges)
    assert [c.name for c in session.verify(edge_values=False).cases if c.is_edge_value] == []


def test_ids_read_by_an_embedding_get_the_first_and_last_id_never_past_it():
    model = TypedTokens().eval()
    ids = torch.randint(1, 49, (2, 5), generator=torch.Generator().manual_seed(0))
    types = torch.zeros(2, 5, dtype=torch.long)
    types[0, 3:] = 1
    session = Session(model, (ids, types), {})
    cases = edge_values(session, session.exported_program)

    assert [(c.input, c.kind, c.vocabulary) for c in cases] == [
        ("input_ids", "ids_first", 50), ("input_ids", "ids_last", 50),
        ("token_type_ids", "ids_first", 2), ("token_type_ids", "ids_last", 2),  # 0/1, yet ids: no mask cases
    ]
    assert cases[1].name == "input_ids: all 49 (the last id of a 50-row embedding)"
    result = session.verify()
    assert result.ok, result.summary()


class WrongUnderExport(TypedTokens):
    """Wrong with any ids, the example's included: the model asks whether torch is exporting."""

    def forward(self, input_ids, token_type_ids):
        out = super().forward(input_ids, token_type_ids)
        return out * 2 if torch.compiler.is_exporting() else out


def test_edge_ids_wrong_as_the_example_is_are_not_blamed_on_the_vocabulary_edge():
    ids = torch.randint(1, 49, (2, 5), generator=torch.Generator().manual_seed(0))
    result = Session(WrongUnderExport().eval(), (ids, torch.zeros(2, 5, dtype=torch.long)), {}).verify()
    assert result.status == "failed"
    edge_findings = [f for f in result.findings if f.kind == "wrong_at_value"]
    assert edge_findings, result.summary()
    assert all("as it does with the example's values" in f.message for f in edge_findings)
    assert "vocabulary edge" not in result.summary()


def test_tiny_bert_ids_and_mask_edges_raise_no_false_alarm():
    from real_models import VOCAB, build

    real = build("bert")
    session = Session(real.model, real.args, real.kwargs, ExportOptions(dynamic_shapes=real.names))
    result = session.verify(sizes={"batch": [3], "seq": [5]})

    assert result.ok, result.summary()
    assert [c.name for c in result.cases if c.is_edge_value] == [
        "input_ids: all 0 (the first id)",
        f"input_ids: all {VOCAB - 1} (the last id of a {VOCAB}-row embedding)",
        "attention_mask: all zeros (every row fully masked)",
        "attention_mask: one row all zeros (a fully masked row)",
    ]


# -- the translation, through the compat module --------------------------------------------------
def test_fix_is_a_copy_of_the_registry_and_leaves_the_shared_one_to_torchlib():
    from exporter import compat
    from exporter.masked_attention import translations

    target = torch.ops.aten.scaled_dot_product_attention.default
    torchlib = compat.registered_translation(18, target)
    assert torchlib is not None and "aten_scaled_dot_product_attention" in repr(torchlib)
    table = translations("zero", 18)
    assert table is translations("zero", 18) and translations("mean", 18) == ()
    fixed = compat.onnx_registry_with(18, table)
    assert fixed.get_decomps(target)[0].onnx_function is table[0][1]
    assert compat.registered_translation(18, target) is torchlib  # the shared registry is unchanged


def test_at_opset_23_the_onnx_attention_op_is_kept_and_already_zeroes_fully_masked_rows():
    session = Session(BareAttention(), bare_inputs(), {}, ExportOptions(opset_version=23))
    ops = [node.op_type for node in session.onnx_model.graph]
    assert "Attention" in ops and "ReduceMax" not in ops
    result = session.verify()
    assert result.ok and any(c.is_edge_value for c in result.cases), result.summary()


# -- masks where True masks a key (issue 53 item 5) ---------------------------------------------------------


class PaddedEncoder(torch.nn.Module):
    """``nn.TransformerEncoder`` with a ``src_key_padding_mask`` (True masks a key): eager PyTorch
    returns NaN for a row whose every key is masked, onnxruntime numbers."""

    def __init__(self):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def forward(self, x, mask):
        return self.encoder(x, src_key_padding_mask=mask)


def test_generated_masks_keep_the_examples_polarity_and_a_key_in_every_row():
    from exporter.cases.inputs import _make_mask, mask_kept_value

    padding = torch.zeros(2, 6, dtype=torch.bool)
    padding[0, -3:] = True  # True masks: the last 3 keys of row 0
    attention = ~padding  # 1 keeps
    assert mask_kept_value(padding) == 0 and mask_kept_value(attention) == 1
    left_padded = torch.tensor([[0, 0, 1, 1, 1]])  # padding_side="left", every row padded
    assert mask_kept_value(left_padded) == 1 and mask_kept_value(torch.tensor([[0, 0, 1], [1, 1, 1]])) == 1
    assert mask_kept_value(torch.tensor([[False, False, False, True, True]])) == 0  # a key padding mask
    generator = torch.Generator().manual_seed(0)
    for seq in (1, 2, 3, 9):
        for example, kept in ((padding, False), (attention, True)):
            mask = _make_mask(example, (5, seq), generator)
            assert mask.dtype == torch.bool
            assert bool((mask == kept).any(-1).all()), (seq, mask)  # a key kept in every row
            assert bool((mask[:, 0] == kept).all())  # padding at the end, as in the example


def test_a_transformer_encoder_with_a_key_padding_mask_passes_and_eager_nan_rows_are_not_counted():
    torch.manual_seed(0)
    x = torch.randn(2, 6, 32)
    mask = torch.zeros(2, 6, dtype=torch.bool)
    mask[0, -3:] = True
    dims = ({0: AUTO, 1: AUTO}, {0: AUTO, 1: AUTO})
    result = Session(PaddedEncoder().eval(), (x, mask), {}, ExportOptions(dynamic_shapes=dims)).verify()
    assert result.status == "passed", result.summary()
    sized = [c for c in result.cases if not c.is_example and not c.is_edge_value]
    assert sized and all(c.status == "pass" for c in sized if c.status != "eager_error")
    assert any(dict(c.sizes)["x.shape[1]"] <= 2 for c in sized if c.status == "pass")  # seq 1 and 2 compared, not NaN
    fully = [c for c in result.cases if c.is_edge_value and c.edge.masks_a_row]
    assert fully and all(c.status == "eager_error" and "eager PyTorch itself returns NaN" in c.error for c in fully)
    assert "mask: all True (every row fully masked)" in {c.name for c in fully}  # True masks here
    kept = next(c for c in result.cases if c.is_edge_value and c.edge.kind == "all_ones")
    assert kept.name == "mask: all False" and kept.status == "pass"
