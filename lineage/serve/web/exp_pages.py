"""An experiment record (`lineage exp show`) and its differences from another record
(`lineage exp diff`, with `?diff=OTHER`). A metric with a history (`--metrics` as JSON
lines) is drawn as a line plot over its steps."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from lineage.charts import line_plot
from lineage.jsonout import json_text
from lineage.serve.web.markup import (
    Markup,
    code,
    esc,
    facts,
    join,
    link,
    section,
    table,
    tag,
    url,
)
from lineage.serve.web.respond import page_routes, text_param

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.routing import BaseRoute

    from lineage.api import Store


def routes() -> list[BaseRoute]:
    return page_routes("/experiments/{name}", load_experiment, render_experiment)


def load_experiment(request: Request, store: Store) -> dict[str, Any]:
    """The record as `exp show` answers; with `?diff=OTHER`, `exp diff NAME OTHER`; and
    the store's other records to compare with."""
    import lineage.exp

    name = request.path_params["name"]
    record = lineage.exp.show(store, name)
    other = text_param(request, "diff")
    diff = lineage.exp.diff(store, name, other).to_dict() if other else None
    others = [e.name or e.id for e in lineage.exp.list(store) if e.id != record.id]
    return {"experiment": record.to_dict(), "diff": diff, "others": others}


def render_experiment(data: dict[str, Any]) -> tuple[str, Markup]:
    record = data["experiment"]
    name = record.get("name") or record["id"]
    body = join([
        facts([("id", code(record["id"])), ("spec", record.get("spec")),
               ("attempt", record.get("attempt")), ("outcome", _outcome(record.get("outcome"))),
               ("revision", record.get("revision")), ("recorded", record.get("created_at")),
               ("quantization", record.get("quantization")), ("source", record.get("source")),
               ("lineage", record.get("lineage"))]),
        section("Weights", _weights(record.get("weights"))),
        section("Checks before the command", _checks(record.get("checks"))),
        section("Command", _command(record.get("command"), record.get("failure"))),
        section("Metrics", _metrics(record.get("metrics"))),
        section("Compare", _diff_form(name, data["others"]), _diff(data["diff"])),
        section("The whole record", tag("details", Markup(tag("summary", "as stored"))
                                         + tag("pre", json_text(record))))])
    return f"Experiment {name}", body


def _outcome(outcome: str | None) -> Markup:
    return tag("span", outcome, cls="ok" if outcome == "passed" else "bad")


def _weights(weights: dict[str, Any] | None) -> Markup:
    if not weights:
        return tag("p", "no weights recorded", cls="muted")
    files = table(["file", "bytes", "sha256"], ([f["path"], f["size"], code(f["sha256"])]
                                                for f in weights.get("files") or ()))
    snapshot = weights.get("snapshot") or {}
    where = [("snapshot", f"{snapshot.get('repo_id')} at revision {snapshot.get('revision')}"
              + (f" (refs: {', '.join(snapshot['refs'])})" if snapshot.get("refs") else ""))
             ] if snapshot else []
    return join([facts([("path", code(weights.get("path"))), *where,
                        ("digest", code(weights.get("digest")))]), files])


def _checks(checks: list[dict[str, Any]] | None) -> Markup:
    if not checks:
        return tag("p", "none recorded", cls="muted")
    rows = ([c.get("name"), _verdict(c.get("ok")), c.get("exit_code"),
             len(c.get("findings") or ()), len(c.get("warnings") or ())] for c in checks)
    return table(["check", "ok", "exit code", "findings", "warnings"], rows)


def _verdict(ok: bool | None) -> Markup:
    if ok is None:
        return esc(None)
    return tag("span", "yes" if ok else "no", cls="ok" if ok else "bad")


def _command(command: dict[str, Any] | None, failure: dict[str, Any] | None) -> Markup:
    parts = []
    if command:
        parts.append(facts([("argv", code(" ".join(command.get("argv") or ()))),
                            ("exit code", command.get("exit_code")),
                            ("signal", command.get("signal")),
                            ("seconds", command.get("duration_s")),
                            ("stdout", f"{command['stdout'].get('bytes', 0):,} bytes"),
                            ("stderr", f"{command['stderr'].get('bytes', 0):,} bytes")]))
    else:
        parts.append(tag("p", "The command did not run.", cls="muted"))
    if failure:
        parts.append(tag("p", f"{failure.get('type')}: {failure.get('action')}", cls="bad"))
    return join(parts)


def _metrics(metrics: dict[str, Any] | None) -> Markup:
    """The final values, then one plot a metric with a history (at most 2,000 points are
    drawn: svg.line_plot thins them; the record below has every point kept)."""
    if not metrics:
        return tag("p", "No metrics recorded (--metrics).", cls="muted")
    if metrics.get("error"):
        word = "refused" if metrics.get("refused") else "not read"
        return tag("p", f"{word}: {metrics['error']}", cls="bad")
    values = metrics.get("values") or {}
    parts = [facts([("file", code(metrics.get("path"))), ("rows", metrics.get("rows"))]),
             table(["metric", "last value"], ([k, code(json_text(v))]
                                               for k, v in sorted(values.items())))]
    for name, series in sorted((metrics.get("history") or {}).items()):
        ys = [v if _finite(v) else None for v in series.get("values") or ()]
        title = f"{name}: {series.get('points', len(ys)):,} points"
        parts.append(line_plot(series.get("steps") or [], ys, title=title, y_label=name,
                               height=200))
    return join(parts)


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and \
        math.isfinite(value)


def _diff_form(name: str, others: list[str]) -> Markup:
    if not others:
        return tag("p", "No other record to compare with.", cls="muted")
    options = join(tag("option", other, value=other) for other in others)
    return Markup(
        f'<form class="inline" method="get" action="{esc(url("experiments", name))}">'
        f'<div><label for="diff">compare with</label><select id="diff" name="diff">{options}'
        '</select></div><button type="submit">show the differences</button></form>'
    ) + tag("p", join((link(url("experiments", name, diff=o), f"diff with {o}")
                         for o in others), " · "))


def _diff(diff: dict[str, Any] | None) -> Markup:
    if diff is None:
        return Markup("")
    if diff["same"]:
        return tag("p", f"{diff['a']} and {diff['b']} record the same facts.", cls="ok")
    rows = ([c["field"], c.get("key"), code(json_text(c["a"])), code(json_text(c["b"]))]
            for c in diff["changes"])
    return join([tag("h3", f"{diff['a']} → {diff['b']}"),
                 table(["field", "key", diff["a"], diff["b"]], rows)])
