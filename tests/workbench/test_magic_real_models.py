"""``%onnx_export --dynamic INPUT.AXIS=NAME`` with bare names exports what the Python API exports
with string names, on real architectures whose guards only bound a dim (transformers configs,
tiny, random weights, no hub): the magic once refused them all, reading a bare name as a strict
``Dim``. Each export goes through a real IPython shell, ``--no-widget``, and is checked against
eager PyTorch at a second size in onnxruntime."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from exporter import ExportOptions, Session
from exporter.dims import Name


def _real_models():
    """tests/exporter/real_models.py (the builders' home; tests/exporter's modules import it by
    its bare name, which is on sys.path only for tests collected there)."""
    if "real_models" not in sys.modules:
        path = Path(__file__).resolve().parents[1] / "exporter" / "real_models.py"
        spec = importlib.util.spec_from_file_location("real_models", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules["real_models"] = module
        spec.loader.exec_module(module)
    return sys.modules["real_models"]


NARROWED_BY_GUARDS = _real_models().NARROWED_BY_GUARDS


@pytest.fixture(scope="module")
def ip(ipython_shell):
    from transformers.utils import logging

    logging.set_verbosity_error()
    ipython_shell.run_line_magic("load_ext", "workbench")
    return ipython_shell


def magic_line(real, name: str, strict: bool = False) -> str:
    """``--dynamic input_ids.0=batch ... model(input_ids=input_ids, ...)`` for a RealModel
    (``batch::``, a strict Dim, with ``strict``)."""
    from exporter.inputs import bind_inputs

    bound = bind_inputs(real.model, real.args, real.kwargs)
    positional = list(bound.parameter_names)[: len(real.args)]
    tail = "::" if strict else ""
    axes = " ".join(f"--dynamic {path}.{axis}={dim}{tail}" for path, dims in real.names.items() for axis, dim in dims.items())
    call = ", ".join(positional + [f"{key}={key}" for key in real.kwargs])
    return f"--no-widget --no-verify -o {name} {axes} model({call})"


@pytest.mark.slow
@pytest.mark.parametrize("name", list(NARROWED_BY_GUARDS))
def test_the_magic_with_bare_names_exports_what_the_api_exports(ip, capsys, assert_matches_eager, name):
    real = NARROWED_BY_GUARDS[name]()
    from exporter.inputs import bind_inputs

    bound = bind_inputs(real.model, real.args, real.kwargs)
    ip.user_ns.update(model=real.model, **dict(zip(bound.parameter_names, real.args)), **real.kwargs)
    ip.run_line_magic("onnx_export", magic_line(real, "exported"))
    session = ip.user_ns["exported"]
    assert session.succeeded, capsys.readouterr().out

    # The same spec as the API's string names: torch.onnx.export's meaning, not a strict Dim.
    api = Session(real.model, real.args, real.kwargs, ExportOptions(dynamic_shapes=real.names))
    assert session.spec == api.spec
    assert all(isinstance(entry.policy, Name) for entry in session.spec)

    # A guard narrowed at least one named dim: a strict Dim of that name would have been refused.
    narrowed = [o for o in session.dims if o.dynamic and o.differs]
    assert narrowed, session.dims
    onnx_dims = {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
                 for v in session.model_proto.graph.input}
    for path, dims in real.names.items():
        for axis, dim in dims.items():
            assert onnx_dims[path][axis] == dim, onnx_dims

    args, kwargs = real.second()
    assert_matches_eager(session, *args, rtol=1e-3, atol=1e-4, **kwargs)

    # The strict meaning (name::) is refused, said in the user's terms, and its fix is the range
    # the name obtained.
    ip.run_line_magic("onnx_export", magic_line(real, "strict", strict=True))
    refused = ip.user_ns["strict"]
    assert refused.failed_stage is not None and refused.failed_stage.name == "capture"
    said = refused.dims.rejected[0]
    assert refused.failed_stage.failure.message.startswith(said.problem)
    assert "L['" not in said.problem and "Not all values" in refused.failed_stage.failure.library_text
    obtained = session.dims[said.axis]
    assert (said.fix.min or 0, said.fix.max) == (obtained.min, obtained.max), (said.sentence, obtained)
