"""Messages for failures torch words unhelpfully: a **kwargs forward given dynamic_shapes, a
decomposition that loses a lifted constant, a node torch.onnx cannot translate (torch wraps the
cause in "Error when translating node %x : ... See the stack trace"). (A transformers
DynamicCache, which used to fail both ways, now exports: tests/exporter/test_kv_cache.py.)"""

from __future__ import annotations

import builtins
import os

import torch
from torch._export.db.examples import all_examples

from exporter import Dim, ExportOptions, Session
from exporter.compat import formats
from exporter.compat.translation import TranslationFailure, newer_translation_opset, translation_failure
from exporter.errors import TranslateError
from exporter.hints import decompose_hint, translate_hint, translation_fix
from exporter.pipeline import translations
from exporter.pipeline.translate import translate


class CacheThroughKwargs(torch.nn.Module):
    def forward(self, x, **extra):
        return x + extra["past_key_values"]


def kwargs_session():
    b = Dim("b")
    return Session(
        CacheThroughKwargs(), (torch.randn(3, 4),), {"past_key_values": torch.randn(3, 4)},
        ExportOptions(dynamic_shapes={"x": {0: b}, "past_key_values": {0: b}}, strategy="nonstrict"),
    )


def test_a_kwargs_forward_is_told_the_keys_torch_expected_and_how_to_pass_the_cache():
    session = kwargs_session()
    capture = session.run("capture")
    assert capture.status == "failed"
    cause = session.attempts[0].error
    assert formats.is_tree_name_mismatch(cause)
    assert "pass a KV cache as a named argument (past_key_values=...)" in str(capture.error)
    named = str(capture.error)
    assert "forward takes 'past_key_values' through **extra" in named
    assert "expects the top-level keys 'x', 'extra'" in named
    assert "def forward(self, ..., past_key_values=None, **extra)" in named


def test_decompose_hint_names_the_lifted_constant_or_the_operator():
    lost = RuntimeError("Constant tensor lifted_tensor_3 is not in the constants dictionary.")
    assert formats.lifted_constant(lost) == "lifted_tensor_3"
    assert "torch lost 'lifted_tensor_3' while decomposing" in decompose_hint(lost)
    assert "the error names the operator" not in decompose_hint(lost)
    op = RuntimeError("no decomposition for aten.unfold_backward.default")
    assert decompose_hint(op).startswith("decomposing aten.unfold_backward.default for ONNX failed")


# --- translation failures: torch's cause first, fixes that can work ------------------------------

class WeightedBincount(torch.nn.Module):
    def forward(self, x, w):
        return torch.bincount(x, weights=w, minlength=5)


@torch.library.custom_op("wb_messages::twice", mutates_args=())
def twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@twice.register_fake
def _twice_fake(x):
    return torch.empty_like(x)


class CallsACustomOp(torch.nn.Module):
    def forward(self, x):
        return twice(x) + 1


def translate_failure(model, *args) -> TranslateError:
    session = Session(model, args, None)
    result = session.run()
    assert not result.ok and session.failed_stage.name == "translate"
    error = session.failed_stage.error
    assert isinstance(error, TranslateError)
    return error


def test_a_translation_that_refuses_a_call_fails_with_its_own_reason_first_and_no_opset_or_custom_table_advice():
    error = translate_failure(WeightedBincount(), torch.tensor([0, 1, 1, 3]), torch.rand(4))
    assert error.reason.startswith("aten::bincount with weights is not supported.")
    assert "(NotImplementedError in the translation of aten.bincount.default, node %bincount)" in error.reason
    assert error.source is not None and "test_stage_messages.py" in error.source and "torch.bincount" in error.source
    text = str(error)
    assert "Error when translating node" not in text and "See the stack trace" not in text
    assert "opset_version" not in text and "custom_translation_table" not in text
    assert "torch.onnx's translation of aten.bincount.default does not take this call" in error.hint


def test_an_op_with_no_translation_fails_with_torchs_cause_and_is_offered_a_custom_translation_not_an_opset():
    error = translate_failure(CallsACustomOp(), torch.randn(3))
    assert error.reason == (
        "No ONNX function found for wb_messages.twice.default: No decompositions registered for the "
        "real-valued input (node %twice)"
    )
    assert error.source is not None and "twice(x) + 1" in error.source
    assert "custom_translation_table={torch.ops.wb_messages.twice.default: translation}" in error.hint
    assert "at any opset" in error.hint and "opset_version" not in error.hint


def test_translation_failure_reads_torchs_chain_and_translate_hint_puts_the_cause_first():
    error = translate_failure(CallsACustomOp(), torch.randn(3))
    failure = translation_failure(error.__cause__)
    assert failure == TranslationFailure(
        node="twice", target="wb_messages.twice.default",
        cause="No ONNX function found for wb_messages.twice.default: No decompositions registered for the real-valued input",
        cause_type="DispatchError", missing=True, raised_in=failure.raised_in)
    hint = translate_hint(error.__cause__, [], 20)
    assert hint.startswith(failure.cause) and "custom_translation_table" in hint
    assert translation_failure(RuntimeError("something else")) is None


def test_a_newer_opset_is_suggested_only_for_an_op_torch_onnx_translates_at_that_opset():
    assert newer_translation_opset("aten.rms_norm.default", 20) == 23
    assert newer_translation_opset("aten.rms_norm.default", 23) is None
    assert newer_translation_opset("wb_messages.twice.default", 18) is None
    missing = TranslationFailure("rms_norm", "aten.rms_norm.default", "No ONNX function found for aten.rms_norm.default",
                                 "DispatchError", missing=True)
    assert translation_fix(missing, 20) == (
        "torch.onnx translates aten.rms_norm.default from opset 23: export with opset_version=23")
    assert "opset_version" not in translation_fix(missing, 23)


def test_our_own_translations_refusal_is_the_message_with_no_generic_fix_added():
    """symbolic_round refuses ndigits and says why; the failure reads as that reason alone."""
    example = all_examples()["dynamic_shape_round"]
    session = Session(example.model, example.example_args, None, ExportOptions(dynamic_shapes=example.dynamic_shapes))
    assert session.run("decompose").ok
    program = session.result("decompose").output

    def round_to_one_digit(number, ndigits=None):
        return translations.symbolic_round(number, 1)

    try:
        translate(program, opset_version=20, bound=session.inputs, spec=session.spec,
                  translations=((builtins.round, round_to_one_digit),))
    except TranslateError as error:
        assert error.reason.startswith("round(number, ndigits=1) on a symbolic number has no ONNX translation")
        assert error.hint is None
        failure = translation_failure(error.__cause__)
        assert failure is not None and failure.raised_in is not None
        assert failure.raised_in.endswith(os.path.join("exporter", "pipeline", "translations.py"))
    else:
        raise AssertionError("round with ndigits translated")
