"""OrtModel: the exported model as onnxruntime loads it, with a lifecycle of its own (the
external-data paths of a large model are in test_large_models.py)."""

from __future__ import annotations

import gc
import os
import weakref

import numpy as np
import pytest
import torch

from exporter import ExportOptions, Session
from exporter.ort_model import OrtModel


class Small(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.linear(x)


@pytest.fixture(scope="module")
def session():
    torch.manual_seed(0)
    session = Session(Small().eval(), (torch.randn(2, 4),), {}, ExportOptions())
    assert session.run().ok
    return session


def test_the_session_hands_out_one_ort_model_of_its_final_model(session):
    ort_model = session.ort_model
    assert isinstance(ort_model, OrtModel) and session.ort_model is ort_model
    assert ort_model.model is session.stage_output("optimize")
    assert not ort_model.is_large and ort_model.external_path is None


def test_a_small_model_loads_from_its_bytes_built_once(session):
    ort_model = OrtModel(session.stage_output("optimize"))
    assert ort_model.source is ort_model.model_bytes and isinstance(ort_model.source, bytes)
    assert ort_model.model_proto.SerializeToString() == ort_model.model_bytes
    assert ort_model.model_proto is not ort_model.model_proto  # copies: changing one changes nothing


def test_the_inference_session_is_built_once_and_outputs_are_read_through_it_when_readable(session):
    ort_model = OrtModel(session.stage_output("optimize"))
    first = ort_model.inference_session
    assert ort_model.inference_session is first and ort_model.output_session is first
    x = np.ones((2, 4), np.float32)
    (out,) = first.run(None, {"x": x})
    np.testing.assert_allclose(out, session.model(torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_make_room_keeps_a_small_models_session_and_release_frees_everything_until_asked_again(session):
    ort_model = OrtModel(session.stage_output("optimize"))
    first = ort_model.inference_session
    ort_model.make_room()
    assert ort_model.inference_session is first
    built = weakref.ref(first)
    del first
    ort_model.release()
    gc.collect()
    assert built() is None and "nothing built" in repr(ort_model)
    ort_model.release()  # idempotent
    assert ort_model.inference_session is not None  # rebuilt on demand


def test_session_members_delegate_to_its_ort_model(session):
    assert session.ort_model_source is session.ort_model.source
    assert session.model_bytes is session.ort_model.model_bytes
    assert session.ort_session is session.ort_model.inference_session
    assert session.output_ort_session is session.ort_model.output_session
    ort_model = session.ort_model
    session.release()
    assert session.ort_model is ort_model and "nothing built" in repr(ort_model)


class Widening(torch.nn.Module):
    """Its intermediate is 4096 times its input: 64 MB at 16 rows, 128 MB at 32."""

    def forward(self, x):
        return (x.unsqueeze(-1) * torch.ones(4096)).sum(-1)


def _resident_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads /proc/self/statm (Linux)")
def test_runs_at_several_sizes_leave_no_arena_behind_unlike_a_default_onnxruntime_session():
    import onnxruntime as ort

    widening = Session(Widening(), (torch.randn(16, 1024),), {}, ExportOptions(dynamic_shapes=({0: "rows"},)))
    assert widening.run().ok
    ort_model = widening.ort_model

    def held_after_runs(inference_session) -> float:
        before = _resident_mb()
        for rows in (16, 32, 8):
            inference_session.run(None, {"x": np.ones((rows, 1024), np.float32)})
        return _resident_mb() - before

    held_by_ours = held_after_runs(ort_model.inference_session)
    held_by_default = held_after_runs(ort.InferenceSession(ort_model.model_bytes, providers=["CPUExecutionProvider"]))
    assert held_by_default > 100  # the arena keeps the 128 MB run's buffers
    assert held_by_ours < 40, (held_by_ours, held_by_default)
