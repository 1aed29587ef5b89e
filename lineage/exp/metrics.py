"""What a command reports in files: its `--metrics` (final values, or their history) and
its report file. Read after it exits, with the rules every file lineage reads follows.

A metrics file is opened with lineage.userfiles (a FIFO, device or socket is refused
without blocking; at most MAX_METRICS_BYTES), parsed with its nesting bounded, and kept
in the record whatever happens: a file that breaks a rule is recorded as refused, with
the rule and why, and the command's record is committed all the same.

Two forms (docs/experiments.md, "Metrics"):

- `*.json`: one JSON object, the final values: `{"loss": 0.25, "accuracy": 0.91}`;
- `*.jsonl` or `*.ndjson`: one JSON object a line, appended as the command goes, as
  MLflow's `log_metric(key, value, step)` keeps a history. A row is either wide,
  `{"step": 10, "loss": 2.3, "lr": 0.0001}` (every number but `step` a metric), or
  long, `{"key": "loss", "value": 2.3, "step": 10}` (what `providers.log_metric` writes).
  `step` is an integer; when absent, it counts that metric's points before this one.
  Each metric keeps its points in file order (at most MAX_POINTS, evenly thinned
  beyond: the count of all is kept), and its last value is its value, as MLflow shows a
  run's latest value. A last line cut short (the command was killed mid-write) is left
  out and said, not refused.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from lineage.errors import InputError
from lineage.runs.chain import MAX_DEPTH
from lineage.userfiles import read_regular

MAX_METRICS_BYTES = 16 * 2**20  # a metrics or report file is small: 16 MiB is ~300k rows
MAX_POINTS = 10_000  # per metric kept in a record; the record is read by `exp list` too
JSONL_SUFFIXES = (".jsonl", ".ndjson")
# A string (an unterminated one swallows the rest: no later quote could close it either,
# and this keeps the scan linear), or a bracket.
_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*+(?:"|\\?\Z)|[\[\]{}]', re.DOTALL)


class Refused(Exception):
    """A file that breaks a rule: `rule` is its id, the message says why."""

    def __init__(self, rule: str, message: str, *, line: int | None = None) -> None:
        self.rule, self.line = rule, line
        super().__init__(f"line {line}: {message}" if line else message)


def read_metrics(path: Path) -> dict[str, Any]:
    """{path, values[, history, rows, cut_last_line]}, or {path, error} when the command
    wrote none, or {path, error, rule, refused: True} when the file broke a rule."""
    jsonl = path.suffix.lower() in JSONL_SUFFIXES
    try:
        data = _read(path, "metrics file")
        if data is None:
            return {"path": str(path), "error": f"{path}: the command did not write its "
                    "metrics file"}
        found = _history(data) if jsonl else {"values": _object(data, "metrics")}
    except Refused as exc:
        return refusal(path, exc)
    return {"path": str(path), **found}


def read_report(path: Path) -> dict[str, Any]:
    """The report file a command wrote ($LINEAGE_EXP_REPORT), or {"error": why not}."""
    try:
        return _object(_read(path, "report file") or b"", "report")
    except Refused as exc:
        return {"error": f"{path}: {exc.rule}: {exc}"}


def refusal(path: Path, exc: Refused) -> dict[str, Any]:
    return {"path": str(path), "error": f"{path}: {exc.rule}: {exc}", "rule": exc.rule,
            "refused": True}


def _read(path: Path, what: str) -> bytes | None:
    """The file's bytes, or None when there is no such file; Refused otherwise."""
    try:
        return read_regular(path, what=what, max_bytes=MAX_METRICS_BYTES)
    except InputError as exc:
        if isinstance(exc.__cause__, FileNotFoundError):
            return None
        rule, _, message = exc.rule.partition(": ")
        if not message:
            rule, message = "unreadable", exc.rule
        raise Refused(rule, message) from exc


def _object(data: bytes, what: str, *, line: int | None = None) -> dict[str, Any]:
    value = parse_json(data, line=line)
    if not isinstance(value, dict):
        raise Refused("not-an-object", f"{what} must be a JSON object, not "
                      f"{type(value).__name__}", line=line)
    return value


def parse_json(data: bytes | str, *, line: int | None = None) -> Any:
    """One JSON value, nested at most MAX_DEPTH deep, its strings real text. NaN and
    Infinity are kept (a diverged loss is a value worth keeping; the record writes it as
    "nan"), duplicate keys keep the last (as Python's json and most writers do)."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as exc:
        raise Refused("invalid-utf8", f"not UTF-8 at byte {exc.start}", line=line) from None
    depth = 0
    for match in _BRACKETS.finditer(text):  # strings are skipped whole: their brackets too
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise Refused("nesting-depth", f"JSON nested deeper than {MAX_DEPTH} levels",
                              line=line)
        elif token in "]}":
            depth -= 1
    try:
        value = json.loads(text)
    except RecursionError:  # a backstop: the count above stops deep values first
        raise Refused("nesting-depth", f"JSON nested deeper than {MAX_DEPTH} levels",
                      line=line) from None
    except ValueError as exc:  # JSONDecodeError, or an integer past Python's digit limit
        raise Refused("invalid-json", f"not valid JSON ({str(exc).splitlines()[0]})",
                      line=line) from None
    _check_text(value, line)
    return value


def _check_text(value: Any, line: int | None) -> None:
    """A lone surrogate escape (\\ud800) parses, but is not text: no record could hold it."""
    stack = [value]
    while stack:
        item = stack.pop()
        texts = [item] if isinstance(item, str) else list(item) if isinstance(item, dict) \
            else []
        for text in texts:
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                raise Refused("invalid-text", "a JSON string holds a lone surrogate escape",
                              line=line) from None
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _history(data: bytes) -> dict[str, Any]:
    """The rows of a JSON-lines metrics file as each metric's points and last value."""
    lines = data.split(b"\n")
    cut = bool(lines[-1].strip())  # no newline after the last row: maybe killed mid-write
    points: dict[str, tuple[list[int], list[Any]]] = {}
    values: dict[str, Any] = {}
    rows = 0
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            row = _object(raw, "a metrics row", line=number)
        except Refused:
            if cut and number == len(lines):
                break  # the torn last row: counted below
            raise
        rows += 1
        cut = cut and number != len(lines)
        step, metrics = _row(row, number)
        for key, value in metrics.items():
            values[key] = value
            if _is_number(value):
                steps, kept = points.setdefault(key, ([], []))
                steps.append(len(steps) if step is None else step)
                kept.append(value)
    history = {key: _thinned(steps, kept) for key, (steps, kept) in points.items()}
    return {"values": values, "history": history, "rows": rows, "cut_last_line": cut}


def _row(row: dict[str, Any], line: int) -> tuple[int | None, dict[str, Any]]:
    step = row.get("step")
    if step is not None and (not isinstance(step, int) or isinstance(step, bool)):
        raise Refused("invalid-row", f"step must be an integer, not {json.dumps(step)[:40]}",
                      line=line)
    if "key" in row and "value" in row:  # MLflow's long form: one metric a row
        if not isinstance(row["key"], str):
            raise Refused("invalid-row", "key must be a string", line=line)
        return step, {row["key"]: row["value"]}
    return step, {k: v for k, v in row.items() if k not in ("step", "timestamp")}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _thinned(steps: list[int], values: list[Any]) -> dict[str, Any]:
    """At most MAX_POINTS points, every k-th and the last; `points` counts them all."""
    total = len(steps)
    if total > MAX_POINTS:
        stride = math.ceil(total / MAX_POINTS)
        keep = [*range(0, total - 1, stride), total - 1]
        steps, values = [steps[i] for i in keep], [values[i] for i in keep]
    return {"steps": steps, "values": values, "points": total}
