"""A model left in training mode: verify says so first (modules by path), fails, and names
``model.eval()`` as the fix; the same model in eval mode passes without the finding."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import exporter


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.5)
        self.norm = nn.BatchNorm1d(8)

    def forward(self, x):
        return self.norm(self.drop(x))


class DropNormNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.head = Head()

    def forward(self, x):
        return self.head(self.lin(x))


class NormOnly(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.bn = nn.BatchNorm1d(8)

    def forward(self, x):
        return self.bn(self.lin(x))


def verified(model):
    torch.manual_seed(0)
    session = exporter.export(model, torch.randn(4, 8))
    return model, session.verify()


@pytest.fixture(scope="module")
def in_training():
    return verified(DropNormNet())


def test_verdict_first_line_names_training_mode_and_the_modules_by_path(in_training):
    _, result = in_training
    first = result.verdict.splitlines()[0]
    assert first.startswith("Verification FAILED: the model is in training mode: head.drop (Dropout), "
                            "head.norm (BatchNorm1d)")
    assert str(result).splitlines()[0] == first
    assert first.index("training mode") < first.index("compared case(s) wrong")


def test_training_mode_fails_with_model_eval_as_the_fix(in_training):
    model, result = in_training
    assert result.status == "failed" and not result.ok
    finding = result.findings[0]
    assert finding.kind == "training_mode"
    assert "model.eval()" in finding.fix and "model.eval()" in result.verdict
    assert "dropout" in finding.cause and "batch norm" in finding.cause
    assert model.training and model.head.drop.training  # verify does not switch the user's module


def test_training_mode_is_not_blamed_on_a_divergent_node(in_training):
    _, result = in_training
    assert result.divergence is None


def test_batch_norm_alone_in_training_mode_is_named_without_dropout():
    _, result = verified(NormOnly())
    assert result.status == "failed"
    assert result.verdict.startswith("Verification FAILED: the model is in training mode: bn (BatchNorm1d) ")
    assert "dropout" not in result.findings[0].cause and "batch norm" in result.findings[0].cause


def test_one_submodule_switched_back_to_training_is_named_alone():
    model = DropNormNet().eval()
    model.head.drop.train()
    _, result = verified(model)
    assert result.status == "failed"
    assert "the model is in training mode: head.drop (Dropout) make" in result.verdict


def test_eval_model_passes_without_a_training_mode_finding():
    _, result = verified(DropNormNet().eval())
    assert result.status == "passed", result.summary()
    assert "training" not in result.summary()
    assert all(f.kind != "training_mode" for f in result.findings)


class NoDropAtAll(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.drop = nn.Dropout(0.0)  # as nn.TransformerEncoderLayer(dropout=0.0) has

    def forward(self, x):
        return self.drop(self.lin(x))


def test_a_dropout_that_drops_nothing_is_no_training_mode_alarm():
    model, result = verified(NoDropAtAll())  # left in training mode, but p=0
    assert model.training
    assert result.status == "passed", result.summary()
    assert all(f.kind != "training_mode" for f in result.findings)
