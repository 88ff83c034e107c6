"""The code that reproduces one unit of a sweep outside the sweep: what the unit ran (its zoo
source, factory, spec, options and checks), as a notebook cell or a script that raises or
prints the same failure."""

from __future__ import annotations

from .record import UnitRecord
from .unit import Unit

__all__ = ["reproduction_code", "unit_of"]

#: Statuses of a unit whose worker died (or was killed) without a record of its own.
DIED = ("crashed", "timeout", "oom")


def unit_of(record: UnitRecord) -> Unit:
    """The unit ``record`` is the outcome of."""
    options = {k: v for k, v in record.options.items() if k in Unit.__dataclass_fields__}
    return Unit(record.zoo, record.model, record.source, record.spec, **options)


def reproduction_code(record: UnitRecord) -> str:
    """Python that runs what the unit ran, up to the step that failed (the whole export,
    its checks and ``torch.onnx.export`` when nothing failed): run as a script it raises or
    prints the unit's failure. A unit whose worker died (``crashed``, ``timeout``, ``oom``)
    is run again by the sweep's own runner, in this process: a crash is a crash here too."""
    source = record.source or record.zoo
    head = ["import os", "", 'os.environ.setdefault("HF_HUB_OFFLINE", "1")  # as in the sweep\'s worker', ""]
    if record.failed_stage == "import":
        return "\n".join([
            "from exporter.sweep.zoo import load_source", "",
            f"load_source({source!r})  # the sweep could not import this zoo file",
        ]) + "\n"
    if record.status in DIED:
        unit = unit_of(record)
        return "\n".join([
            *head,
            "from exporter.sweep import Unit",
            "from exporter.sweep.runner import run_unit",
            "",
            f"unit = Unit.from_dict({unit.to_dict()!r})",
            f"# the sweep's worker {record.status} in {record.failed_stage or 'an unknown stage'}: "
            "the same stages, in this process",
            "record = run_unit(unit, report=lambda stage: print('stage:', stage, flush=True))",
            "print(record.status, record.failed_stage, record.error)",
        ]) + "\n"
    options = record.options
    spec = "case.dynamic_shapes" if record.spec == "dynamic" else "None"
    lines = [
        *head,
        "import torch",
        "",
        "from exporter import ExportOptions, compat, export",
        "from exporter.sweep import load_case",
        "",
        f"case = load_case({record.zoo!r}, {record.model!r}, source={source!r})",
    ]
    lines += [
        "with torch.no_grad():",
        "    outputs = case.model(*case.args, **case.kwargs)  # eager PyTorch at the example",
        "compat.tree_flatten_with_path(outputs)  # the output tensors, as verify reads them",
    ]
    if record.failed_stage in ("build", "eager"):  # a record of an older release: "build" held the eager call
        return "\n".join(lines) + "\n"
    lines += [
        f"options = ExportOptions(dynamic_shapes={spec}, opset_version={options.get('opset')!r},",
        f"                        strategy={options.get('strategy', 'auto')!r}, optimize={options.get('optimize', True)!r})",
        "session = export(case.model, *case.args, options=options, **case.kwargs)",
    ]
    if options.get("verify", True):
        lines += ["result = session.verify()", "print(result.verdict)"]
    if options.get("benchmark", False) and record.failed_stage != "verify":
        lines.append("print(session.benchmark(budget=0.5, min_runs=10))")
    if record.fixed_by:
        lines += ["", f"# with the model patches its session offers ({record.fixed_status} in the sweep)",
                  "fixed = session.apply_suggested_fixes()  # patches " + ", ".join(record.fixed_by),
                  "print(fixed.verify().verdict)"]
    if options.get("baseline", True) and (record.failed_stage == "baseline"
                                          or record.baseline in ("export_failed", "verify_failed")):
        lines += [
            "",
            "# what torch.onnx.export gives on the same call",
            f"program = torch.onnx.export(case.model, tuple(case.args), kwargs=dict(case.kwargs), dynamic_shapes={spec},",
            f"                            dynamo=True, opset_version={options.get('opset')!r}, "
            f"optimize={options.get('optimize', True)!r})",
            "print(program(*case.args, **case.kwargs))",
        ]
    return "\n".join(lines) + "\n"
