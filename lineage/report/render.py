"""Render an inspection as Markdown or as one self-contained HTML page (no network).

The risk section comes first: it decides whether the rest matters. Charts are inline SVG
bars (dtype shares, size per file) so the page opens anywhere, offline.
"""

from __future__ import annotations

import html
from typing import Any

GIB = 2**30


def _size(n: int | None) -> str:
    if n is None:
        return "unknown"
    for unit, scale in (("GiB", GIB), ("MiB", 2**20), ("KiB", 1024)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


def _verdict(ok: bool | None) -> str:
    return {True: "pass", False: "FAIL", None: "not checked"}[ok]


def render_markdown(report: dict[str, Any]) -> str:
    lines = [f"# Model report: {report['path']}", ""]
    lines += ["## Risks", ""]
    if report["risks"]:
        lines += ["| severity | file | kind | detail |", "|---|---|---|---|"]
        lines += [f"| {r['severity']} | {r['file']} | {r['kind']} | {r['detail']} |"
                  for r in report["risks"]]
    else:
        lines.append("No risk found: no pickle code paths, no remote code, no links leaving "
                     "the folder.")
    integrity = report["integrity"]
    lines += ["", "## Integrity (three separate verdicts)", "",
              f"- structure: **{_verdict(integrity['structure']['ok'])}**",
              *[f"  - {e['file']}: {e['rule']}: {e['message']}"
                for e in integrity["structure"]["errors"]],
              f"- checksums: **{_verdict(integrity['checksums']['ok'])}**",
              f"- load: **{integrity['load']}**"]
    q, m = report["quantization"], report["memory"]
    lines += ["", "## Weights", "",
              f"- parameters: {report['parameters']:,} in {report['tensors']:,} tensors",
              "- dtypes: " + (", ".join(f"{k} {v:,}" for k, v in report["dtypes"].items())
                               or "none counted"),
              f"- quantization: {q['method']} ({q['bits_per_weight']} bits per weight)"
              + (f"; evidence: {'; '.join(q['evidence'])}" if q["evidence"] else ""),
              *[f"- warning: {w}" for w in report["precision_warnings"]]]
    if report["uncounted_pickles"]:
        lines.append(f"- not counted (pickles are never loaded): "
                     f"{', '.join(report['uncounted_pickles'])}")
    lines += ["", "## Cost", "",
              f"- weights {_size(m['weights_bytes'])}, KV cache {_size(m['kv_cache_bytes'])} "
              f"(context {m['context']:,}, batch {m['batch']}), overhead "
              f"{_size(m['overhead_bytes'])}: total about **{_size(m['total_bytes'])}**",
              *[f"  - {a}" for a in m["assumptions"]]]
    p = report["provenance"]
    lines += ["", "## Provenance", "", f"- tier: **{p['tier']}**",
              *[f"- evidence: {e}" for e in p["evidence"]],
              *[f"- missing: {x}" for x in p["missing"]]]
    lic = report["license"]
    lines += ["", "## Licence", "", f"- {lic['license'] or 'none found'}",
              *[f"  - {s['file']} ({s['how']}): {s['license']}" for s in lic["sources"]]]
    lines += ["", "## Files", "", "| file | format | size | name says |", "|---|---|---|---|"]
    lines += [f"| {f['path']} | {f['format']} | {_size(f['size'])} | "
              f"{', '.join(f'{k}={v}' for k, v in f['name'].items())} |" for f in report["files"]]
    return "\n".join(lines) + "\n"


def render_html(report: dict[str, Any]) -> str:
    e = html.escape
    risks = report["risks"]
    worst = risks[0]["severity"] if risks else "none"
    banner = {"dangerous": "#b00020", "unknown": "#b26a00", "info": "#245", "none": "#1b5e20"}
    risk_rows = "".join(
        f"<tr class='{e(r['severity'])}'><td>{e(r['severity'])}</td><td>{e(r['file'])}</td>"
        f"<td>{e(r['kind'])}</td><td>{e(r['detail'])}</td></tr>" for r in risks
    ) or "<tr><td colspan=4>No risk found.</td></tr>"
    integrity = report["integrity"]
    q, m, p = report["quantization"], report["memory"], report["provenance"]
    total_params = report["parameters"] or 1
    dtype_bars = _bars([(k, v, f"{v / total_params:.1%}") for k, v in report["dtypes"].items()])
    file_bars = _bars([(f["path"], f["size"], _size(f["size"])) for f in report["files"]])
    facts = [("Parameters", f"{report['parameters']:,}"),
             ("Quantization", f"{q['method']} ({q['bits_per_weight']} bits/weight)"),
             ("Memory estimate", _size(m["total_bytes"])),
             ("Provenance tier", p["tier"]),
             ("Licence", str(report["license"]["license"] or "none found"))]
    fact_html = "".join(f"<div class=fact><div class=k>{e(k)}</div><div class=v>{e(v)}</div>"
                        "</div>" for k, v in facts)
    verdicts = "".join(
        f"<li><b>{e(name)}</b>: {e(value)}</li>" for name, value in (
            ("structure", _verdict(integrity["structure"]["ok"])),
            ("checksums", _verdict(integrity["checksums"]["ok"])), ("load", integrity["load"])))
    errors = "".join(f"<li>{e(x['file'])}: {e(x['rule'])}: {e(x['message'])}</li>"
                     for x in integrity["structure"]["errors"])
    assumptions = "".join(f"<li>{e(a)}</li>" for a in m["assumptions"])
    missing = "".join(f"<li>missing: {e(x)}</li>" for x in p["missing"])
    evidence = "".join(f"<li>{e(x)}</li>" for x in p["evidence"])
    warnings = "".join(f"<li>{e(w)}</li>" for w in report["precision_warnings"])
    return f"""<!doctype html>
<html lang=en><head><meta charset=utf-8><title>Model report</title>
<style>
body{{font:15px/1.45 system-ui,sans-serif;margin:24px auto;max-width:980px;color:#222}}
h1{{font-size:20px;word-break:break-all}} h2{{font-size:16px;margin-top:28px}}
.banner{{background:{banner[worst]};color:#fff;padding:12px 16px;border-radius:6px}}
table{{border-collapse:collapse;width:100%}} td,th{{border-bottom:1px solid #ddd;padding:4px 8px;
text-align:left;vertical-align:top}} tr.dangerous td:first-child{{color:#b00020;font-weight:bold}}
tr.unknown td:first-child{{color:#b26a00;font-weight:bold}}
.facts{{display:flex;flex-wrap:wrap;gap:12px}} .fact{{border:1px solid #ddd;border-radius:6px;
padding:8px 12px;min-width:150px}} .k{{font-size:12px;color:#666}} .v{{font-size:18px}}
</style></head><body>
<h1>Model report: {e(report['path'])}</h1>
<div class=banner>Risks: {len(risks)} ({e(worst)} at worst). Load: {e(integrity['load'])}.</div>
<h2>Risks</h2><table><tr><th>severity</th><th>file</th><th>kind</th><th>detail</th></tr>
{risk_rows}</table>
<h2>At a glance</h2><div class=facts>{fact_html}</div>
<h2>Integrity (three separate verdicts)</h2><ul>{verdicts}</ul><ul>{errors}</ul>
<h2>Weights by dtype</h2>{dtype_bars}<ul>{warnings}</ul>
<h2>Size per file</h2>{file_bars}
<h2>Cost</h2><p>Weights {e(_size(m['weights_bytes']))}, KV cache {e(_size(m['kv_cache_bytes']))}
(context {m['context']:,}, batch {m['batch']}), overhead {e(_size(m['overhead_bytes']))}:
about <b>{e(_size(m['total_bytes']))}</b>.</p><ul>{assumptions}</ul>
<h2>Provenance: {e(p['tier'])}</h2><ul>{evidence}{missing}</ul>
</body></html>
"""


def _bars(items: list[tuple[str, int, str]]) -> str:
    """A horizontal bar chart as inline SVG."""
    if not items:
        return "<p>none</p>"
    items = items[:40]
    top = max(v for _, v, _ in items) or 1
    row, width = 22, 560
    parts = []
    for i, (label, value, text) in enumerate(items):
        y = i * row
        bar = max(1, int(width * value / top))
        parts.append(f"<text x=0 y={y + 15} font-size=12>{html.escape(label[:40])}</text>"
                     f"<rect x=300 y={y + 4} width={bar} height=14 fill='#4a7ab5'/>"
                     f"<text x={306 + bar} y={y + 15} font-size=12>{html.escape(text)}</text>")
    height = row * len(items)
    return (f"<svg xmlns='http://www.w3.org/2000/svg' width={300 + width + 120} "
            f"height={height} role=img>{''.join(parts)}</svg>")
