"""``exporter.export(m, x, dynamic_shapes=...)``, as a torch.onnx.export user types it first: an
export option given where forward's inputs go is a SpecError with the code to write, and a
forward that does take a parameter of that name still gets it."""

from __future__ import annotations

import pytest
import torch

import exporter
from exporter import ExportOptions, SpecError


class Double(torch.nn.Module):
    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return x * 2 if mask is None else x * mask


def test_dynamic_shapes_as_a_keyword_points_to_export_options_with_code_that_runs():
    x = torch.randn(2, 3)
    with pytest.raises(SpecError) as caught:
        exporter.export(Double(), x, dynamic_shapes={"x": {0: "batch"}})
    error = caught.value
    assert "export() got dynamic_shapes=, an export option given where forward's inputs go" in error.reason
    assert "forward(x, mask) takes no such parameter" in error.reason
    code = "exporter.export(model, x, options=ExportOptions(dynamic_shapes={'x': {0: 'batch'}}))"
    assert error.hint == code
    session = eval(code, {"exporter": exporter, "ExportOptions": ExportOptions, "model": Double(), "x": x})  # noqa: S307 - the hint is code to run
    assert session.succeeded and str(session.onnx_model.graph.inputs[0].shape[0]) == "batch"


@pytest.mark.parametrize(("keywords", "fix"), [
    ({"opset_version": 18}, "exporter.export(model, x, options=ExportOptions(opset_version=18))"),
    ({"input_names": ["x"], "output_names": ["y"]},
     "exporter.export(model, x, options=ExportOptions(input_names=['x'], output_names=['y']))"),
    ({"dynamic_axes": {"x": {0: "b"}}, "mask": "M"},
     "exporter.export(model, x, mask=mask, options=ExportOptions(dynamic_axes={'x': {0: 'b'}}))"),
    ({"dynamo": True}, "dynamo=: leave it out: exporter.export always captures with torch.export"),
    ({"f": "model.onnx", "opset_version": 20},
     "exporter.export(model, x, options=ExportOptions(opset_version=20)); f=: export, then save: session.save('model.onnx')"),
])
def test_each_torch_onnx_export_option_given_as_a_keyword_says_what_to_write(keywords, fix):
    x = torch.randn(2, 3)
    keywords = {k: (x if v == "M" else v) for k, v in keywords.items()}
    with pytest.raises(SpecError) as caught:
        exporter.export(Double(), x, **keywords)
    assert caught.value.hint.startswith(fix), caught.value.hint


def test_options_already_given_are_kept_in_the_code_to_write():
    with pytest.raises(SpecError) as caught:
        exporter.export(Double(), torch.randn(2, 3), options=ExportOptions(optimize=False), opset_version=18)
    assert caught.value.hint == "exporter.export(model, x, options=dataclasses.replace(options, opset_version=18))"


def test_a_forward_that_takes_a_parameter_named_like_an_option_still_gets_it():
    class Scaled(torch.nn.Module):
        def forward(self, x: torch.Tensor, dynamic_shapes: torch.Tensor) -> torch.Tensor:
            return x * dynamic_shapes

    x, scale = torch.randn(2, 3), torch.full((3,), 3.0)
    session = exporter.export(Scaled(), x, dynamic_shapes=scale)
    assert session.succeeded
    (out,) = session.run_onnx(x, dynamic_shapes=scale)
    torch.testing.assert_close(torch.as_tensor(out), x * 3)
