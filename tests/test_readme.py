"""The README's Python examples run as written."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def python_block(*markers: str) -> str:
    """The one ```python block of the README that contains every marker."""
    blocks = re.findall(r"^```python\n(.*?)^```", README.read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL)
    found = [block for block in blocks if all(marker in block for marker in markers)]
    assert len(found) == 1, f"expected one README python block with {markers}, found {len(found)}"
    return found[0]


def test_readme_infer_dims_example_runs_as_written_and_its_spec_exports_as_is(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # the API example saves block.onnx in the current directory
    namespace: dict = {}
    exec(compile(python_block("demo_block()", "session = export("), "README.md: Python API", "exec"), namespace)  # noqa: S102 - the README's examples run as written
    exec(compile(python_block("session.infer_dims(", "x2"), "README.md: infer_dims", "exec"), namespace)  # noqa: S102

    printed = capsys.readouterr().out
    assert "batch = Dim('batch', min=1, max=4)" in printed and "seq = Dim('seq', min=7, max=30)" in printed
    spec, inferred = namespace["spec"], namespace["inferred"]
    assert spec.policy("x", 0) == spec.policy("attention_mask", 0)  # one name for axes that vary together
    assert spec.policy("x", 1) == spec.policy("attention_mask", 1)
    assert [stage.status for stage in inferred.stages] == ["ok"] * 4
    assert [list(value.shape) for value in inferred.onnx_model.graph.inputs] == [["batch", "seq", 64], ["batch", "seq"]]


def test_readme_model_patch_example_fixes_mambas_capture_as_it_says():
    namespace: dict = {}
    exec(compile(python_block("selective_scan_loop", "apply_suggested_fixes()"), "README.md: model patches", "exec"), namespace)  # noqa: S102

    session, fixed = namespace["session"], namespace["fixed"]
    assert session.run().status == "failed"
    assert session.suggested_fixes.patch_names == ("selective_scan_loop",)
    assert fixed.options.patches == ("selective_scan_loop",) and fixed.spec == session.spec
    result = fixed.verify()
    assert result.status == "passed"
    [seq] = [group for group in result.groups if group.label == "seq"]
    # 1 to twice the example; whether it goes past that (up to 8x, 96) is verify's time budget's to
    # say, and a loaded machine leaves none
    assert min(seq.sizes) == 1 and 24 in seq.sizes
