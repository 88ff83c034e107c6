"""The notebook code that reproduces one unit of a sweep, outside the sweep."""

from __future__ import annotations

from .record import UnitRecord

__all__ = ["reproduction_code"]


def reproduction_code(record: UnitRecord) -> str:
    """Python for a notebook cell that builds the unit's model and runs the step that failed
    (the whole export and verify when nothing failed)."""
    options = record.options
    spec = "case.dynamic_shapes" if record.spec == "dynamic" else "None"
    source = record.source or record.zoo
    lines = [
        "from exporter import ExportOptions, export",
        "from exporter.sweep import load_case",
        "",
        f"case = load_case({record.zoo!r}, {record.model!r}, source={source!r})",
    ]
    if record.failed_stage == "build":
        lines.append("case.model(*case.args, **case.kwargs)  # the build step: the eager call on the example inputs")
        return "\n".join(lines) + "\n"
    lines += [
        f"options = ExportOptions(dynamic_shapes={spec}, opset_version={options.get('opset')!r},",
        f"                        strategy={options.get('strategy', 'auto')!r}, optimize={options.get('optimize', True)!r})",
        "session = export(case.model, *case.args, options=options, **case.kwargs)",
        "session.verify()",
    ]
    if record.fixed_by:
        lines += ["", f"# with the model patches its session offers ({record.fixed_status} in the sweep)",
                  "fixed = session.apply_suggested_fixes()  # patches " + ", ".join(record.fixed_by), "fixed.verify()"]
    if record.failed_stage == "baseline" or record.baseline in ("export_failed", "verify_failed"):
        lines += [
            "",
            "# what torch.onnx.export gives on the same call",
            "import torch",
            f"program = torch.onnx.export(case.model, case.args, kwargs=dict(case.kwargs), dynamic_shapes={spec}, dynamo=True)",
            "program(*case.args, **case.kwargs)",
        ]
    return "\n".join(lines) + "\n"
