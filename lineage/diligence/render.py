"""Render an inspection as Markdown or as one self-contained HTML page (no network).

The risk section comes first: it decides whether the rest matters. Charts are inline SVG
bars (dtype shares, size per file) so the page opens anywhere, offline. Every line, a file's
name and a model card's fields among them, is text written by `lineage.markup`
(`md_text`, `md_table`, `html_text`): control and bidi characters spelled out, nothing
from the folder read as markup.
"""

from __future__ import annotations

from typing import Any

from lineage.charts import bars
from lineage.diligence import sections as sec
from lineage.markup import html_text, md_table, md_text


def render_markdown(report: dict[str, Any]) -> str:
    lines = [f"# Model report: {md_text(report['path'])}", ""]
    lines += [f"- {md_text(line)}" for line in sec.header_items(report)]
    lines += ["", "## Risks", ""]
    if report["risks"]:
        lines += md_table(["severity", "file", "kind", "detail"], sec.risk_rows(report))
    else:
        lines.append("No risk found: no pickle code paths, no remote code, no links leaving "
                     "the folder.")
    for title, items in (("Integrity (separate verdicts)", sec.integrity_items(report)),
                         ("Weights", sec.weights_items(report)),
                         ("Cost", sec.cost_items(report)),
                         *((("Notes", sec.note_items(report)),) if report.get("notes")
                           else ()),
                         ("Provenance", sec.provenance_items(report)),
                         ("Licence", sec.licence_items(report))):
        lines += ["", f"## {title}", "", *_md_items(items)]
    if report.get("card"):
        lines += ["", "## Model card", "", *_md_items(sec.card_items(report["card"]))]
    lines += ["", "## Files", "", md_text(sec.hashes_note(report)), ""]
    lines += md_table(["file", "format", "size", "sha256", "name says"], sec.file_rows(report))
    return "\n".join(lines) + "\n"


def _md_items(items: list[sec.Item]) -> list[str]:
    out = []
    for line, children in items:
        out.append(f"- {md_text(line)}")
        out += [f"  - {md_text(child)}" for child in children]
    return out


def render_html(report: dict[str, Any]) -> str:
    e = html_text
    risks = report["risks"]
    worst = risks[0]["severity"] if risks else "none"
    banner = {"dangerous": "#b00020", "unknown": "#b26a00", "info": "#245", "none": "#1b5e20"}
    risk_rows = "".join(
        f"<tr class='{e(r[0])}'>" + "".join(f"<td>{e(c)}</td>" for c in r) + "</tr>"
        for r in sec.risk_rows(report)) or "<tr><td colspan=4>No risk found.</td></tr>"
    q, m, p = report["quantization"], report["memory"], report["provenance"]
    total_params = report["parameters"] or 1
    dtype_bars = bars([(k, v, f"{v / total_params:.1%}") for k, v in report["dtypes"].items()],
                      title="parameters by dtype") if report["dtypes"] else ""
    file_bars = bars([(f["path"], f["size"], sec.size(f["size"])) for f in report["files"]],
                     title="size per file", width=980, label_width=300)
    bits = q.get("bits_per_weight")
    facts = [("Model", sec.show((report.get("model") or {}).get("summary"))),
             ("Parameters", f"{report['parameters']:,}" if _has_weights(report)
              else "none (no weights)"),
             ("Quantization", f"{sec.show(q.get('method'), sec.DASH)} ("
              + (f"{bits} bits/weight)" if bits is not None else
                 f"{sec.show(q.get('reason'))})")),
             ("Memory estimate", sec.size(m["total_bytes"], "not estimated")),
             ("Provenance tier", p["tier"]),
             ("Licence", sec.licence_text(report))]
    fact_html = "".join(f"<div class=fact><div class=k>{e(k)}</div><div class=v>{e(v)}</div>"
                        "</div>" for k, v in facts)
    header = "".join(f"<li>{e(x)}</li>" for x in sec.header_items(report))
    load = sec.show(report["integrity"]["load"])
    file_rows = "".join(
        "<tr>" + "".join(f"<td class=hash>{e(c)}</td>" if i == 3 else f"<td>{e(c)}</td>"
                         for i, c in enumerate(row)) + "</tr>" for row in sec.file_rows(report))
    return f"""<!doctype html>
<html lang=en><head><meta charset=utf-8><title>Model report</title>
<style>
body{{font:15px/1.45 system-ui,sans-serif;margin:24px auto;max-width:980px;color:#222}}
h1{{font-size:20px;word-break:break-all}} h2{{font-size:16px;margin-top:28px}}
.banner{{background:{banner[worst]};color:#fff;padding:12px 16px;border-radius:6px}}
table{{border-collapse:collapse;width:100%}} td,th{{border-bottom:1px solid #ddd;padding:4px 8px;
text-align:left;vertical-align:top;overflow-wrap:break-word}}
td.hash{{font:12px/1.3 monospace;word-break:break-all}}
tr.dangerous td:first-child{{color:#b00020;font-weight:bold}}
tr.unknown td:first-child{{color:#b26a00;font-weight:bold}}
.facts{{display:flex;flex-wrap:wrap;gap:12px}} .fact{{border:1px solid #ddd;border-radius:6px;
padding:8px 12px;min-width:150px}} .k{{font-size:12px;color:#666}} .v{{font-size:18px}}
</style></head><body>
<h1>Model report: {e(report['path'])}</h1>
<ul>{header}</ul>
<div class=banner>Risks: {len(risks)} ({e(worst)} at worst). Load: {e(load)}.</div>
<h2>Risks</h2><table><tr><th>severity</th><th>file</th><th>kind</th><th>detail</th></tr>
{risk_rows}</table>
<h2>At a glance</h2><div class=facts>{fact_html}</div>
<h2>Integrity (separate verdicts)</h2>{_html_items(sec.integrity_items(report))}
<h2>Weights</h2>{dtype_bars}{_html_items(sec.weights_items(report))}
<h2>Cost</h2>{_html_items(sec.cost_items(report))}
{"<h2>Notes</h2>" + _html_items(sec.note_items(report)) if report.get("notes") else ""}
<h2>Provenance: {e(p['tier'])}</h2>{_html_items(sec.provenance_items(report)[1:])}
<h2>Licence</h2>{_html_items(sec.licence_items(report))}
{_card_html(report)}<h2>Files</h2><p>{e(sec.hashes_note(report))}</p>{file_bars}
<table><tr><th>file</th><th>format</th><th>size</th><th>sha256</th><th>name says</th></tr>
{file_rows}</table>
</body></html>
"""


def _card_html(report: dict[str, Any]) -> str:
    """The model card section (nothing when the folder has no card)."""
    card = report.get("card")
    return f"<h2>Model card</h2>{_html_items(sec.card_items(card))}\n" if card else ""


def _has_weights(report: dict[str, Any]) -> bool:
    return bool((report.get("weights") or {"present": True})["present"])


def _html_items(items: list[sec.Item]) -> str:
    e = html_text
    parts = []
    for line, children in items:
        sub = "".join(f"<li>{e(c)}</li>" for c in children)
        parts.append(f"<li>{e(line)}" + (f"<ul>{sub}</ul>" if sub else "") + "</li>")
    return f"<ul>{''.join(parts)}</ul>"

