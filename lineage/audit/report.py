"""`lineage audit report`: a run's audit coverage as one page (HTML or Markdown) or JSON.

The page shows every interval of the run as a grid coloured by status, the relay chains,
the participants, the machines the replays ran on (as their auditors reported them), the
inconclusive steps, the next unclaimed steps, and the rule that bounds what a match
proves. Everything comes from `audit_status` and `participants`, so the page and
`lineage audit status` never disagree. The HTML is one self-contained file: no script, no
network (its content security policy forbids both), every ledger value escaped by
`lineage.markup` (control and bidi characters spelled out too), since auditor names and
machine descriptions are whatever their authors wrote.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from lineage.audit.records import SPEC, format_time, utc_now
from lineage.audit.status import STATUSES, audit_status, participants
from lineage.audit.versions import counted_versions
from lineage.errors import UsageError
from lineage.markup import html_text, md_code, md_table, md_text
from lineage.store.base import BaseStore
from lineage.version import __version__

if TYPE_CHECKING:
    from lineage.audit.answers import AuditMachine, AuditReport, AuditStatus

FORMATS = ("html", "md", "json")
# What a match proves. lineage-chain/2 puts the cursor, the RNG seed and counter and the
# skip decision in the hash (docs/chain-spec.md), but a replay takes them from the record.
RULE = ("A match proves only that this replay range, started from the artifacts it names "
        "and fed the step's canonical batch, produced the expected state hash on that "
        "backend. The hash covers the state digest's tensors and the step's record; in the "
        "record, the data cursor, the RNG seed and counter and the skip decision are logged "
        "values the replay takes as given, not re-derives, and state the trainer keeps "
        "elsewhere (a random generator's full state, a loss-spike rule's countdown, a data "
        "loader's buffers) is in no hash. Machines and durations are self-reported, and a "
        "mismatch from a machine that swapped (or could not tell) is inconclusive until "
        "a re-run with more memory.")
# Colour and a symbol per status: the symbol carries the status where colour cannot
# (Markdown, a grey-scale print, colour-blind readers).
COLOURS = {"confirmed": "#1b5e20", "provisional": "#8bc34a", "claimed": "#fdd835",
           "untouched": "#e4e4e4", "disputed": "#ef6c00", "mismatch": "#b00020"}
SYMBOLS = {"confirmed": "✓", "provisional": "p", "claimed": "c", "untouched": "·",
           "disputed": "!", "mismatch": "✗"}
GRID_COLUMNS = 50  # intervals per grid row: 810 intervals make 17 rows
MD_COLUMNS = 20

_MACHINES = """
SELECT json_extract_string(record, '$.machine.backend') AS backend,
       json_extract_string(record, '$.machine.device') AS device,
       CAST(json_extract(record, '$.machine.memory_bytes') AS BIGINT) AS memory_bytes,
       count(*) AS replays, coalesce(sum(duration_s), 0) AS seconds,
       count(*) FILTER (WHERE swapped IS NOT FALSE) AS swapped
FROM audit_records WHERE run = ? AND kind = 'attestation'
    AND {counted}
GROUP BY ALL ORDER BY backend, device, memory_bytes
"""


def coverage_report(store: BaseStore, run: str, *, now: datetime | None = None) -> AuditReport:
    """The run's coverage at time `now` (naive UTC; claims expire): what the page shows,
    and what `audit report --format json` prints."""
    from lineage.audit.answers import AuditReport

    moment = now or utc_now()
    status = audit_status(store, run, now=moment)
    return AuditReport(
        run=run, chain_head=status.chain_head, at=format_time(moment), status=status,
        participants=participants(store, run).participants, machines=machines(store, run),
        rule=RULE, lineage=__version__, spec=SPEC)


def machines(store: BaseStore, run: str) -> tuple[AuditMachine, ...]:
    """The machines the run's attestations name, by backend, device and memory."""
    from lineage.audit.answers import AuditMachine

    with store.reader(views=False) as con, counted_versions(con, run) as counted:
        rows = con.execute(_MACHINES.replace("{counted}", counted.where()), [run]).fetchall()
    return tuple(AuditMachine(backend=backend, device=device, memory_bytes=memory, replays=n,
                              replay_hours=round(float(seconds) / 3600, 3), swapped=swapped)
                 for backend, device, memory, n, seconds, swapped in rows)


def interval_cells(status: AuditStatus) -> list[tuple[int, int, int, str, int]]:
    """Every interval of the run, untouched ones included:
    (k, first step, last step, status, verified steps)."""
    listed = {row.interval: row for row in status.per_interval}
    cells = []
    for k, first in enumerate(range(0, status.steps, status.interval)):
        last = min(first + status.interval, status.steps) - 1
        row = listed.get(k)
        cells.append((k, first, last, row.status if row else "untouched",
                      row.verified if row else 0))
    return cells


def check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise UsageError(f"--format must be html, md or json, not {fmt!r}")


def render(report: AuditReport, fmt: str) -> str:
    """The page in `fmt` (html, md or json)."""
    check_format(fmt)
    if fmt == "html":
        return render_html(report)
    if fmt == "md":
        return render_markdown(report)
    return report.to_json() + "\n"


# -- shared wording ------------------------------------------------------------------


def _facts(report: AuditReport) -> list[str]:
    s = report.status
    return [
        f"{s.steps:,} steps in {len(interval_cells(s)):,} intervals of {s.interval}; "
        f"claims judged at {report.at}",
        f"{s.steps_verified:,} steps verified by {s.participants} participant(s) in "
        f"{s.replay_hours:g} hours of replay (self-reported); longest contiguous verified "
        f"run {s.longest_contiguous} step(s)",
    ]


def _steps_text(steps: tuple[int, ...], none: str) -> str:
    return ", ".join(str(step) for step in steps) or none


_INCONCLUSIVE = ("Steps whose only attestations are mismatches from machines that swapped "
                 "or could not tell (re-run with more memory): ")


def _gib(memory: int) -> str:
    return f"{memory / 2**30:.1f} GiB"


# -- Markdown ------------------------------------------------------------------------


def render_markdown(report: AuditReport) -> str:
    s = report.status
    lines = [f"# Audit coverage: {md_text(report.run)}", "",
             f"Chain head {md_code(s.chain_head)}.", ""]
    lines += [f"- {md_text(fact)}" for fact in _facts(report)]
    lines += ["", *md_table(["status", "intervals"],
                            [[f"{SYMBOLS[name]} {name}", f"{s.intervals[name]:,}"]
                             for name in STATUSES], align="-r")]
    lines += ["", "## Intervals", "", *_md_grid(s), ""]
    touched = [c for c in interval_cells(s) if c[3] != "untouched"]
    if touched:
        lines += md_table(["interval", "steps", "status", "verified"],
                          [[k, f"{first}–{last}", state, f"{verified} of {last - first + 1}"]
                           for k, first, last, state, verified in touched], align="r--r")
    else:
        lines.append("Every interval is untouched.")
    lines += ["", "## Relay chains", "", *_md_relays(s), "",
              "## Participants", "", "Alphabetically: a list, not a ranking.", ""]
    lines += md_table(
        ["name", "public keys", "attestations", "steps", "claims", "checkpoints", "hours",
         "payout"],
        [[p.name, ", ".join(p.public_keys) or "–", p.attestations, p.steps, p.claims,
          p.checkpoints, f"{p.replay_hours:g}", ", ".join(p.payouts) or "–"]
         for p in report.participants], align="--rrrrr-")
    lines += ["", "## Machines (self-reported)", ""]
    lines += md_table(["backend", "device", "memory", "replays", "hours", "swapped"],
                      [[m.backend, m.device, _gib(m.memory_bytes), m.replays,
                        f"{m.replay_hours:g}", m.swapped] for m in report.machines],
                      align="--rrrr")
    lines += ["", "## Inconclusive steps", "",
              _INCONCLUSIVE + _steps_text(s.inconclusive, "none") + ".",
              "", "## Next unclaimed steps", "", _steps_text(s.next_unclaimed, "None."),
              "", "## What a match proves", "", RULE, "",
              f"lineage {report.lineage}, {report.spec}."]
    return "\n".join(lines) + "\n"


def _md_grid(status: AuditStatus) -> list[str]:
    cells = interval_cells(status)
    columns = min(MD_COLUMNS, len(cells))
    legend = ", ".join(f"{SYMBOLS[name]} {name}" for name in STATUSES)
    rows = [[f"{start}–{start + len(chunk) - 1}", *(SYMBOLS[c[3]] for c in chunk)]
            for start in range(0, len(cells), columns)
            for chunk in [cells[start:start + columns]]]
    return [f"One symbol per interval ({legend}).", "",
            *md_table(["intervals", *(f"+{i}" for i in range(columns))], rows)]


def _md_relays(status: AuditStatus) -> list[str]:
    if not status.relays:
        return ["None: no replay continued from another auditor's checkpoint."]
    return [f"{n}. " + " → ".join(f"step {link.step} by {md_text(link.auditor)}"
                                  for link in chain)
            for n, chain in enumerate(status.relays, start=1)]


# -- HTML ----------------------------------------------------------------------------

_CSS = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1100px;
       padding: 0 1em; color: #1a1a1a; }
h1 { font-size: 1.6em; margin-bottom: .2em; } h2 { margin-top: 1.6em; }
code { font-size: .85em; word-break: break-all; }
ul.legend { list-style: none; padding: 0; display: flex; gap: 1.4em; flex-wrap: wrap; }
.legend .cell { vertical-align: middle; margin-right: .3em; }
.grid { display: grid; gap: 2px; align-items: center; margin: .8em 0; }
.grid .row { font-size: 11px; line-height: 14px; color: #555; white-space: nowrap;
             padding-right: .6em; }
.cell { display: inline-block; width: 14px; height: 14px; border-radius: 2px;
        box-sizing: border-box; }
.wide .cell { width: 32px; height: 32px; font-size: 11px; line-height: 32px;
              text-align: center; }
.cell.confirmed, .cell.disputed, .cell.mismatch { color: #fff; }
table { border-collapse: collapse; margin: .5em 0; }
td, th { border: 1px solid #ccc; padding: .2em .6em; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
.rule { background: #f5f5f5; padding: .8em 1em; border-left: 4px solid #555; }
footer { margin-top: 2em; color: #666; font-size: .85em; }
"""


def render_html(report: AuditReport) -> str:
    e = html_text
    s = report.status
    css = _CSS + "".join(f".cell.{name} {{ background: {colour}; }}\n"
                         for name, colour in COLOURS.items())
    facts = "".join(f"<li>{e(fact)}</li>" for fact in _facts(report))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Audit coverage: {e(report.run)}</title>
<style>{css}</style></head><body>
<h1>Audit coverage: {e(report.run)}</h1>
<p>Chain head <code>{e(s.chain_head)}</code></p>
<ul>{facts}</ul>
<h2>Intervals</h2>
{_html_legend(s)}
{_html_grid(s)}
{_html_touched(s)}
<h2>Relay chains</h2>
{_html_relays(s)}
<h2>Participants</h2>
<p>Alphabetically: a list, not a ranking.</p>
{_html_participants(report)}
<h2>Machines (self-reported)</h2>
{_html_machines(report)}
<h2>Inconclusive steps</h2>
<p>{_INCONCLUSIVE}<span id="inconclusive">{e(_steps_text(s.inconclusive, "none"))}</span>.</p>
<h2>Next unclaimed steps</h2>
<p id="next-unclaimed">{e(_steps_text(s.next_unclaimed, "None."))}</p>
<h2>What a match proves</h2>
<p class="rule" id="rule">{e(RULE)}</p>
<footer>Written by lineage {e(report.lineage)} ({e(report.spec)}) from the run's ledger;
claims judged at {e(report.at)}.</footer>
</body></html>
"""


def _html_legend(status: AuditStatus) -> str:
    items = "".join(f'<li><span class="cell {name}"></span>{name}: '
                    f'<b>{status.intervals[name]:,}</b></li>' for name in STATUSES)
    return f'<ul class="legend">{items}</ul>'


def _html_grid(status: AuditStatus) -> str:
    """Every interval as a cell, GRID_COLUMNS to a row, each row labelled by its steps;
    a few intervals get large cells with their numbers in them."""
    cells = interval_cells(status)
    columns = min(GRID_COLUMNS, len(cells))
    wide = len(cells) <= GRID_COLUMNS
    size = "32px" if wide else "14px"
    parts = []
    for start in range(0, len(cells), columns):
        chunk = cells[start:start + columns]
        parts.append(f'<span class="row">steps {chunk[0][1]:,}–{chunk[-1][2]:,}</span>')
        parts += [
            f'<span class="cell {state}" data-interval="{k}" data-status="{state}" '
            f'title="interval {k}: steps {first:,}–{last:,}, {state}, {verified} of '
            f'{last - first + 1} verified">{k if wide else ""}</span>'
            for k, first, last, state, verified in chunk]
        parts += ["<span></span>"] * (columns - len(chunk))
    style = f"grid-template-columns: max-content repeat({columns}, {size})"
    return (f'<div class="grid{" wide" if wide else ""}" id="intervals" '
            f'style="{style}">{"".join(parts)}</div>')


def _html_touched(status: AuditStatus) -> str:
    rows = "".join(
        f'<tr><td class="n">{k}</td><td>{first:,}–{last:,}</td>'
        f'<td><span class="cell {state}"></span> {state}</td>'
        f'<td class="n">{verified} of {last - first + 1}</td></tr>'
        for k, first, last, state, verified in interval_cells(status) if state != "untouched")
    if not rows:
        return "<p>Every interval is untouched.</p>"
    return ("<table><tr><th>interval</th><th>steps</th><th>status</th><th>verified</th>"
            f"</tr>{rows}</table>")


def _html_relays(status: AuditStatus) -> str:
    e = html_text
    if not status.relays:
        return "<p>None: no replay continued from another auditor's checkpoint.</p>"
    chains = "".join(
        "<li>" + " → ".join(f'step {link.step} by <b>{e(link.auditor)}</b>'
                            for link in chain) + "</li>" for chain in status.relays)
    return f'<ol id="relays">{chains}</ol>'


def _html_participants(report: AuditReport) -> str:
    e = html_text
    rows = "".join(
        f"<tr><td>{e(p.name)}</td><td>{_html_keys(p.public_keys)}</td>"
        f'<td class="n">{p.attestations}</td><td class="n">{p.steps}</td>'
        f'<td class="n">{p.claims}</td><td class="n">{p.checkpoints}</td>'
        f'<td class="n">{p.replay_hours:g}</td>'
        f"<td>{'<br>'.join(e(payout) for payout in p.payouts) or '–'}</td></tr>"
        for p in report.participants)
    return ('<table id="participants"><tr><th>name</th><th>public keys</th>'
            "<th>attestations</th><th>steps</th><th>claims</th><th>checkpoints</th>"
            f"<th>hours</th><th>payout</th></tr>{rows}</table>")


def _html_keys(keys: tuple[str, ...]) -> str:
    return "<br>".join(f"<code>{html_text(key)}</code>" for key in keys) or "–"


def _html_machines(report: AuditReport) -> str:
    e = html_text
    rows = "".join(
        f"<tr><td>{e(m.backend)}</td><td>{e(m.device)}</td>"
        f'<td class="n">{_gib(m.memory_bytes)}</td><td class="n">{m.replays}</td>'
        f'<td class="n">{m.replay_hours:g}</td><td class="n">{m.swapped}</td></tr>'
        for m in report.machines)
    if not rows:
        return "<p>No attestation yet.</p>"
    return ('<table id="machines"><tr><th>backend</th><th>device</th><th>memory</th>'
            f"<th>replays</th><th>hours</th><th>swapped</th></tr>{rows}</table>")
