"""The graphs' analyses: the FX ↔ ONNX node mapping, and the per-node numeric differences
(``session.compare_intermediates()``)."""

from __future__ import annotations

import math
from dataclasses import replace

from ...verify.intermediates import IntermediateComparison
from ...graphs.mapping import NodeMapping
from ...presentation import presents
from ..blocks import Badge, Block, Details, KeyValues, Note, Pre, Section, Table, Verdict
from ..cells import number

__all__ = ["intermediates_section", "mapping_section"]

_EAGER_FROM = {"verify": "verify's, on the same inputs (module unchanged since)", "this call": "run for this comparison"}


@presents(NodeMapping)
def mapping_section(mapping: NodeMapping, title: str = "Node mapping", top: int = 10) -> Section:
    """How the optimized ONNX nodes map to FX nodes: the counts of each origin in one line,
    then the first ``top`` nodes with no known origin and the removed nodes by fate."""
    counts = mapping.counts()
    line = (f"{len(mapping.entries)} ONNX nodes: {counts['fx']} from FX, {counts['optimizer']} created by the "
            f"optimizer, {counts['unmapped']} unmapped (coverage {mapping.coverage:.1%}); "
            f"{len(mapping.removed)} removed by the optimizer")
    body: list[Block] = []
    unmapped = [(e.onnx_node, e.onnx_op) for e in mapping.entries if e.origin == "unmapped"]
    if unmapped:
        body.append(Table.from_rows(("ONNX node", "op"), unmapped[:top], code=("ONNX node",),
                                    caption=f"no known origin ({len(unmapped)})"))
    fates: dict[str, int] = {}
    for removed in mapping.removed:
        fate = removed.fate.partition(" into ")[0]  # "fused into <node>": counted as fused
        fates[fate] = fates.get(fate, 0) + 1
    if fates:
        body.append(Details(f"{len(mapping.removed)} node(s) removed by the optimizer",
                            (Table.from_rows(("fate", "ONNX nodes"), sorted(fates.items())),), in_text=False))
    return Section(title, Badge(f"coverage {mapping.coverage:.0%}", "info"), tuple(body),
                   verdict=Verdict(line, "muted"))


@presents(IntermediateComparison)
def intermediates_section(result: IntermediateComparison, title: str = "Intermediate values", top: int = 10) -> Section:
    """``session.compare_intermediates()``: the verdict (the first bad node, or all match),
    the first bad node's pair, the ``top`` largest errors, then what was run and held."""
    bad = result.first_bad
    tone = "fail" if result.error or bad is not None or result.program_differs else "ok"
    badge = Badge.status(result.status)
    verdict = Verdict(result.verdict, tone)
    if result.error:
        return Section(title, badge, (Note(result.error, "fail"),), verdict=verdict)
    body: list[Block] = []
    if result.program_differs:
        body.append(Note(result.program_differs, "warn"))
    if bad is not None:
        body.append(Pre(bad.describe() + (f"\n  at: {bad.source}" if bad.source else "")))
    compared = [r for r in result.rows if r.status != "not compared"]
    worst = sorted(compared, key=lambda r: (not r.bad, -(r.max_abs if r.max_abs is not None else math.inf)))[:top]
    table = Table.from_rows(
        ("ONNX node", "op", "FX node", "module", "status", "max abs", "max rel", "allowed abs"),
        [(r.onnx_node, r.onnx_op, r.fx_value, r.module, r.status, r.max_abs, r.max_rel, r.atol_applied) for r in worst],
        caption=f"the {len(worst)} largest differences", badges=("status",))
    table = replace(table, rows=tuple(
        tuple(Badge(c.text, "fail") if isinstance(c, Badge) and c.text == "mismatch" else c for c in row)
        for row in table.rows))
    body.append(table)
    skipped: dict[str, int] = {}
    for r in result.rows:
        if r.status == "not compared":
            reason = r.reason or ""
            if reason.startswith("an inner step"):  # one line for all, not one per FX node
                reason = "an inner step of an FX node's translation: no FX counterpart"
            skipped[reason] = skipped.get(reason, 0) + 1
    if skipped:
        body.append(Details(f"{len(result.rows) - len(compared)} node(s) not compared",
                            (Table.from_rows(("reason", "nodes"), sorted(skipped.items(), key=lambda kv: -kv[1])),)))
    body.append(KeyValues((
        ("case", result.case),
        ("runs", f"{result.chunks} onnxruntime, {result.fx_runs} FX interpreter"),
        *((("eager outputs", _EAGER_FROM.get(result.eager_from, result.eager_from)),) if result.eager_from else ()),
        ("values held at most", f"{number(result.peak_bytes / 2**20)} MiB"),
        ("seconds", number(result.seconds)),
    )))
    return Section(title, badge, tuple(body), verdict=verdict)
