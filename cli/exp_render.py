"""Experiment records as text for people: values read as words, never as Python reprs."""

from __future__ import annotations

import math
import shlex
from typing import Any

SPARKS = "▁▂▃▄▅▆▇█"
SPARK_WIDTH = 32


def readable(value: Any) -> str:
    """A value in a table cell: no `None`, no `{'a': 1}`, no `['x']`."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, list | tuple):
        return ", ".join(readable(v) for v in value) if value else "(none)"
    if isinstance(value, dict):
        return ", ".join(f"{k}={readable(v)}" for k, v in value.items()) if value else "(none)"
    return str(value)


def number(value: float | None) -> str:
    """A measured difference: 3 significant digits, `-` when there is none."""
    return "-" if value is None else f"{value:.3g}"


def diff_cell(field: str, value: Any) -> str:
    if field == "command" and isinstance(value, list):
        return shlex.join(value)
    return readable(value)


def run_summary(exp_id: str, record: dict[str, Any]) -> list[str]:
    """What `exp run` says on stderr after the command's own output (like `time`)."""
    lines = [f"experiment {exp_id}: {record['outcome']}{_attempt(record)}"]
    lines += [f"  {c['name']}: exit {c['exit_code']}" for c in record["checks"]]
    command = record.get("command")
    if command:
        lines.append(f"  command: {_exit(command)} in {command['duration_s']} s")
        lines += [f"  {note}" for note in _process_notes(command)]
        lines += [f"  {cut_note(s, command[s]['kept'])}" for s in ("stdout", "stderr")
                  if (command.get(s) or {}).get("kept")]
    if record.get("interrupted"):
        stop = record["interrupted"]
        lines.append(f"  interrupted by {stop['signal']} during the {stop['during']}")
    if record.get("failure"):
        failure = record["failure"]
        files = f" ({', '.join(failure['files'])})" if failure.get("files") else ""
        lines.append(f"stopped: {failure['type']}{files}: {failure['action']}")
    return lines


def show_lines(record: dict[str, Any]) -> list[str]:
    weights = record["weights"]
    command = record.get("command") or {}
    lines = [
        f"experiment  {record['id']} ({record['outcome']}){_named(record)}",
        f"created     {record['created_at']}",
        f"revision    {record['revision']}  quantization {readable(record.get('quantization'))}"
        f"  source {readable(record.get('source'))}",
        f"weights     {weights['path']} ({len(weights['files'])} files"
        + (f", {weights['digest']})" if weights.get("digest") else ")"),
        *_snapshot_lines(record),
        "checks      " + (", ".join(f"{c['name']} exit {c['exit_code']}"
                                     for c in record["checks"]) or "(none)"),
    ]
    if record.get("failure"):
        lines.append(f"failure     {record['failure']['type']}: {record['failure']['action']}")
    if record.get("interrupted"):
        stop = record["interrupted"]
        lines.append(f"interrupted by {stop['signal']} during the {stop['during']}")
    lines += _command_lines(record, command)
    lines += _report_lines(record.get("report") or {})
    lines += [f"interpreter {_interpreter(record.get('runtime') or {})}",
              f"git         {_git(record.get('git'))}",
              "env         " + readable({k: v for k, v in (record.get("env") or {}).items()
                                         if v is not None} or None),
              f"params      {readable(record.get('params') or None)}",
              f"metrics     {_metrics(record.get('metrics'))}",
              *metric_history_lines(record.get("metrics")),
              f"host        {_host(record['host'])}"]
    lines += [f"warning     {w}" for w in record.get("warnings", [])]
    return lines


def _command_lines(record: dict[str, Any], command: dict[str, Any]) -> list[str]:
    if not command:
        return ["command     (not run)"]
    lines = [f"command     {shlex.join(command['argv'])}",
             f"            in {command.get('cwd', '-')}: {_exit(command)} in "
             f"{command['duration_s']} s"]
    for stream in ("stdout", "stderr"):
        kept = command.get(stream) or {}
        note = kept.get("incomplete") or kept.get("log_error") or (
            cut_note(stream, kept["kept"]) if kept.get("kept") else "")
        lines.append(f"{stream:<11} {readable(kept.get('bytes'))} bytes, {kept.get('blake3')}"
                     + (f" ({note})" if note else ""))
    lines += [f"processes   {note}" for note in _process_notes(command)]
    return lines


def cut_note(stream: str, kept: dict[str, Any]) -> str:
    """What --max-log left out of a stream."""
    return (f"{stream} cut by --max-log: its first {kept['head']:,} and last "
            f"{kept['tail']:,} bytes are kept, {kept['omitted']:,} between them left out")


def _process_notes(command: dict[str, Any]) -> list[str]:
    escaped = command.get("escaped") or []
    ended = [f"{p['name']} ({p['pid']})" for p in escaped if p.get("ended")]
    alive = [f"{p['name']} ({p['pid']})" for p in escaped if not p.get("ended")]
    notes = []
    if ended:
        notes.append(f"ended {len(ended)} process(es) that had left the command's group: "
                     + ", ".join(ended))
    if alive:
        notes.append(f"could not end {len(alive)} process(es) that had left the command's "
                     "group: " + ", ".join(alive))
    return notes


def _snapshot_lines(record: dict[str, Any]) -> list[str]:
    snapshot = (record.get("weights") or {}).get("snapshot")
    if not snapshot:
        return []
    refs = f" (refs: {', '.join(snapshot['refs'])})" if snapshot.get("refs") else ""
    override = "; --revision-override: the given revision does not name it" \
        if record.get("revision_override") else ""
    return [f"snapshot    {snapshot['kind']} {snapshot['repo_id']} at revision "
            f"{snapshot['revision']}{refs}{override}"]


def metric_history_lines(metrics: dict[str, Any] | None) -> list[str]:
    """One line a metric with a history: a sparkline of its points, first and last value."""
    history = (metrics or {}).get("history") or {}
    width = max((len(name) for name in history), default=0)
    lines = []
    for name, series in sorted(history.items()):
        values = [v for v in series["values"] if _finite(v)]
        if not values:
            continue
        steps = series["steps"]
        lines.append(f"            {name:<{width}} {sparkline(series['values'])} "
                     f"{_number(values[0])} → {_number(values[-1])} "
                     f"({series['points']:,} points, steps {steps[0]:,}–{steps[-1]:,})")
    return lines


def sparkline(values: list[Any], width: int = SPARK_WIDTH) -> str:
    """The values in at most `width` characters, each the mean of its share of the points
    on eight levels from the lowest to the highest; a share with no finite value is a
    space."""
    count = min(width, len(values))
    buckets = [values[len(values) * i // count: len(values) * (i + 1) // count]
               for i in range(count)]
    means = [_mean([v for v in bucket if _finite(v)]) for bucket in buckets]
    known = [m for m in means if m is not None] or [0.0]
    low, high = min(known), max(known)
    return "".join(" " if m is None else SPARKS[0 if high == low else
                                                round((m - low) / (high - low) * 7)]
                   for m in means)


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and \
        math.isfinite(value)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _number(value: float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:.4g}"


def _report_lines(report: dict[str, Any]) -> list[str]:
    providers = report.get("providers") or {}
    lines = [f"output      {readable(report.get('output_digest'))}  first load "
             f"{readable(report.get('first_load'))}"]
    if providers:
        lines.append(f"providers   requested {readable(providers.get('requested'))}; "
                     f"obtained {readable(providers.get('obtained'))}")
    if providers.get("session"):
        lines.append(f"session     {readable(providers['session'])}")
    if report.get("error"):
        lines.append(f"report      {report['error']}")
    return lines


def _exit(command: dict[str, Any]) -> str:
    if command.get("signal"):
        return f"killed by {command['signal']}"
    text = f"exit {command['exit_code']}"
    return text + (" (timed out)" if command.get("timed_out") else "")


def _attempt(record: dict[str, Any]) -> str:
    return f" (attempt {record['attempt']})" if record.get("attempt") else ""


def _named(record: dict[str, Any]) -> str:
    return f"  name {record['name']}{_attempt(record)}" if record.get("name") else ""


def _interpreter(runtime: dict[str, Any]) -> str:
    if not runtime:
        return "- (the run stopped before the probe)"
    status = runtime.get("status", "probed")
    if status != "probed":
        return f"{status}: {runtime.get('reason', '-')}"
    where = runtime.get("interpreter") or "lineage's own (recorded before probing)"
    packages = ", ".join(f"{k} {v}" for k, v in sorted(runtime.get("packages", {}).items()))
    return f"{where}, Python {runtime.get('python')}; {packages or 'no packages of interest'}"


def _git(git: Any) -> str:
    if not isinstance(git, dict):
        return readable(git)
    state = "dirty" if git.get("dirty") else "clean"
    return f"{git['commit']} ({state}), remote {readable(git.get('remote'))}"


def _metrics(metrics: dict[str, Any] | None) -> str:
    if not metrics:
        return "-"
    if metrics.get("refused"):
        return f"refused: {metrics['error']}"
    if metrics.get("error"):
        return f"error: {metrics['error']}"
    rows = f" (last of {metrics['rows']:,} rows" + (
        ", a last row cut short left out)" if metrics.get("cut_last_line") else ")") \
        if "rows" in metrics else ""
    return readable(metrics.get("values")) + rows


def _host(host: dict[str, Any]) -> str:
    return (f"{host['os']} {host['machine']}, {host['cpu']}, {host['cores']} cores"
            + (f", {readable(host['accelerators'])}" if host.get("accelerators") else ""))
