"""The sweep dashboard: one self-contained HTML page (inline CSS and script, no network) with
the model × spec matrix, the failure buckets and the comparison with ``torch.onnx.export``.
Clicking a cell shows the unit's stages, its error and the code that reproduces it."""

from __future__ import annotations

import html
import json
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from .buckets import failure_buckets
from .record import STATUSES, UnitRecord, status_counts, zoo_counts
from .repro import reproduction_code

__all__ = ["dashboard_html"]

COLORS = {"passed": "#1a7f37", "not_verified": "#9a6700", "exported": "#4d7c0f", "verify_failed": "#cf222e",
          "export_failed": "#d1242f", "build_failed": "#8250df", "timeout": "#bc4c00", "oom": "#a40e26",
          "crashed": "#6e7781", "skipped": "#afb8c1"}
SHORT = {"passed": "pass", "not_verified": "unverified", "exported": "exported", "verify_failed": "wrong",
         "export_failed": "export ✗", "build_failed": "build ✗", "timeout": "timeout", "oom": "oom",
         "crashed": "crash", "skipped": "skip"}
VERSUS = {"better": "▲ better", "same": "= same", "worse": "▼ worse"}

_STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1f2328;background:#f6f8fa}
header{background:#fff;border-bottom:1px solid #d0d7de;padding:14px 20px}
h1{font-size:20px;margin:0 0 6px} h2{font-size:16px;margin:22px 0 8px}
main{padding:0 20px 30px;max-width:1400px}
.chips span{display:inline-block;border-radius:10px;padding:1px 9px;margin:2px 4px 2px 0;color:#fff;font-size:12px}
.meta{color:#59636e;font-size:12px}
table{border-collapse:collapse;background:#fff;border:1px solid #d0d7de}
th,td{border-bottom:1px solid #eaeef2;padding:4px 9px;text-align:left;vertical-align:top}
th{background:#f6f8fa;font-weight:600;font-size:12px;position:sticky;top:0}
td.cell{cursor:pointer;color:#fff;font-size:12px;font-weight:600;text-align:center;min-width:74px;border-left:2px solid #fff}
td.cell:hover{outline:2px solid #0969da}
td.sel{outline:3px solid #0969da}
tr.group th{background:#eaeef2;font-size:13px;text-align:left}
.matrix td{white-space:nowrap} td.vs{font-size:12px;color:#59636e}
.layout{display:flex;gap:16px;align-items:flex-start}
.matrix{flex:0 1 auto;max-width:560px;max-height:82vh;overflow:auto}
#detail{flex:1 1 340px;min-width:300px;background:#fff;border:1px solid #d0d7de;padding:12px 14px;position:sticky;top:8px}
#detail h3{margin:0 0 6px;font-size:15px;word-break:break-all}
pre{background:#f6f8fa;border:1px solid #d0d7de;padding:8px;overflow:auto;font-size:12px;white-space:pre-wrap}
.stages span{display:inline-block;font-size:11px;padding:0 6px;margin:1px;border-radius:3px;background:#eaeef2}
.stages .ok,.stages .passed{background:#dafbe1}.stages .failed,.stages .verify_failed,.stages .export_failed{background:#ffebe9}
.err{color:#cf222e;font-family:ui-monospace,monospace;font-size:12px;word-break:break-word}
input#filter{padding:4px 8px;width:240px;border:1px solid #d0d7de;border-radius:4px;margin:4px 0 8px}
button{font-size:12px;padding:2px 8px;cursor:pointer}
.num{text-align:right}
"""

_SCRIPT = """
const units = JSON.parse(document.getElementById('units').textContent);
const detail = document.getElementById('detail');
function esc(t){return String(t ?? '').replace(/[&<>"]/g, c => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c]));}
function show(cell){
  document.querySelectorAll('td.sel').forEach(c => c.classList.remove('sel'));
  cell.classList.add('sel');
  const u = units[cell.dataset.unit];
  const stages = Object.entries(u.stages).map(([s, v]) => `<span class="${esc(v)}">${esc(s)}: ${esc(v)}</span>`).join('');
  const secs = Object.entries(u.seconds).map(([s, v]) => `${esc(s)} ${Number(v).toFixed(1)}s`).join(' · ');
  detail.innerHTML = `<h3>${esc(u.zoo)}/${esc(u.model)} <small>(${esc(u.spec)})</small></h3>
    <div><b>${esc(u.status)}</b>${u.failed_stage ? ' at <b>' + esc(u.failed_stage) + '</b>' : ''}</div>
    <div class="stages">${stages}</div>
    ${u.error ? '<p class="err">' + esc(u.error) + '</p>' : ''}
    ${u.failure_class ? '<div class="meta">bucket: ' + esc(u.failure_class) + '</div>' : ''}
    ${u.verdict ? '<p>' + esc(u.verdict) + '</p>' : ''}
    <p>torch.onnx.export: <b>${esc(u.baseline ?? 'not run')}</b>${u.versus ? ' — ours is <b>' + esc(u.versus) + '</b>' : ''}
    ${u.baseline_error ? '<br><span class="err">' + esc(u.baseline_error) + '</span>' : ''}</p>
    <div class="meta">${secs}${u.onnx_bytes ? ' · ONNX ' + (u.onnx_bytes / 1024).toFixed(0) + ' KiB' : ''}</div>
    <p>Reproduce in a notebook: <button id="copy">copy</button></p><pre id="code">${esc(u.code)}</pre>
    <div class="meta">${esc(u.unit_id)}</div>`;
  document.getElementById('copy').onclick = () => navigator.clipboard && navigator.clipboard.writeText(u.code);
}
document.querySelectorAll('td.cell').forEach(c => c.addEventListener('click', () => show(c)));
document.getElementById('filter').addEventListener('input', e => {
  const q = e.target.value.toLowerCase();
  document.querySelectorAll('tr.unit').forEach(r => { r.style.display = r.textContent.toLowerCase().includes(q) ? '' : 'none'; });
});
const first = document.querySelector('td.cell.failed') || document.querySelector('td.cell');
if (first) show(first);
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _chips(counts: dict[str, int]) -> str:
    return "".join(f'<span style="background:{COLORS.get(s, "#6e7781")}">{n} {_e(s)}</span>' for s, n in counts.items())


def dashboard_html(records: Sequence[UnitRecord], *, title: str = "Zoo sweep") -> str:
    """The dashboard of a sweep's ``records`` as one HTML document that opens offline."""
    specs = [s for s in ("dynamic", "static") if any(r.spec == s for r in records)] or ["dynamic"]
    units: dict[str, dict[str, Any]] = {}
    rows: dict[tuple[str, str], dict[str, UnitRecord]] = {}
    for record in records:
        data = record.to_dict()
        data["code"] = reproduction_code(record)
        units[record.unit_id] = data
        rows.setdefault((record.zoo, record.model), {})[record.spec] = record
    counts = status_counts(records)
    versus = Counter(r.versus for r in records if r.versus)
    versions = next((r.versions for r in records if r.versions), {})

    body = []
    width = len(specs) + 3
    current_zoo = None
    for (zoo, model), by_spec in rows.items():
        if zoo != current_zoo:
            current_zoo = zoo
            mine = [r for r in records if r.zoo == zoo]
            body.append(f'<tr class="group" data-zoo="{_e(zoo)}"><th colspan="{width}">{_e(zoo)} — '
                        f'{_e(zoo_counts(mine))}</th></tr>')
        cells = []
        for spec in specs:
            found = by_spec.get(spec)
            if found is None:
                cells.append("<td></td>")
                continue
            record = found
            failed = " failed" if record.failed else ""
            patched = (f" · patched: {SHORT.get(record.fixed_status or '', record.fixed_status)}"
                       if record.fixed_by else "")
            tip = (record.error or record.status) + (f" (with {', '.join(record.fixed_by)}: {record.fixed_status})"
                                                     if record.fixed_by else "")
            cells.append(f'<td class="cell{failed}" data-unit="{_e(record.unit_id)}" title="{_e(tip)}" '
                         f'style="background:{COLORS.get(record.status, "#6e7781")}">'
                         f'{_e(SHORT.get(record.status, record.status) + patched)}</td>')
        base: UnitRecord | None = next((r for r in by_spec.values() if r.baseline), None)
        baseline = (f'<td class="cell" data-unit="{_e(base.unit_id)}" style="background:{COLORS.get(base.baseline or "", "#6e7781")}">'
                    f'{_e(SHORT.get(base.baseline or "", base.baseline))}</td><td class="vs">{_e(VERSUS.get(base.versus or "", ""))}</td>'
                    if base and base.baseline else "<td></td><td></td>")
        body.append(f'<tr class="unit" data-zoo="{_e(zoo)}"><td>{_e(model)}</td>{"".join(cells)}{baseline}</tr>')
    spec_heads = "".join(f"<th>{_e(s)}</th>" for s in specs)
    buckets = failure_buckets(records)
    bucket_rows = "".join(
        f"<tr><td class='num'>{row.count}</td><td>{_e(row.stage)}</td><td>{_e(row.status)}</td>"
        f"<td class='err'>{_e(row.failure_class)}</td><td>{_e(row.models)}</td></tr>" for row in buckets.itertuples())
    bucket_table = (f"<table><tr><th>units</th><th>stage</th><th>status</th><th>failure class</th><th>models</th></tr>"
                    f"{bucket_rows}</table>" if bucket_rows else "<p>No failures.</p>")
    versus_text = ", ".join(f"{versus[k]} {k}" for k in ("better", "same", "worse")) if versus else "not run"
    payload = json.dumps(units).replace("</", "<\\/")
    generated = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_STYLE}</style></head>
<body><header><h1>{_e(title)}</h1>
<div class="chips">{len(records)} units: {_chips(counts)}</div>
<div class="meta">vs torch.onnx.export: {_e(versus_text)} · {_e(", ".join(f"{k} {v}" for k, v in versions.items()))} · {generated}</div>
</header><main>
<h2>Models × specs</h2><input id="filter" placeholder="filter models, statuses, errors…">
<div class="layout"><div class="matrix"><table>
<tr><th>model</th>{spec_heads}<th>torch.onnx.export</th><th>ours vs it</th></tr>
{"".join(body)}</table></div>
<div id="detail">Click a cell for its stages, error and the code that reproduces it.</div></div>
<h2>Failure buckets</h2>{bucket_table}
<p class="meta">Statuses: {", ".join(_e(s) for s in STATUSES)}.</p>
</main>
<script type="application/json" id="units">{payload}</script>
<script>{_SCRIPT}</script></body></html>
"""
