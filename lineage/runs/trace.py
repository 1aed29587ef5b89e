"""`lineage trace`: from a run's steps (one, the clipped, the skipped) to their documents.

The question after a loss spike: which documents were in that batch? Because the data
order is a function of the seed, a step number is enough to name them: the step's record
says where its batch ended (its cursor, after any data skip), and the stream's schedule
how many windows it took, so the windows follow.
"""

from __future__ import annotations

import json
from typing import Any

from lineage.errors import UnknownObjectError, UsageError
from lineage.runs.query import _summary
from lineage.store.base import BaseStore
from lineage.stream.query import (
    StepRange,
    step_range,
    step_segments,
    stream_named,
    stream_schedule,
    windows_range,
)


def trace(
    store: BaseStore, run: str, *, step: int | None = None, clipped: bool = False,
    skipped: bool = False, limit: int | None = None,
) -> dict[str, Any]:
    if sum([step is not None, clipped, skipped]) != 1:
        raise UsageError("give exactly one of --step N, --clipped, --skipped")
    with store.reader(views=False) as con:
        info = _summary(con, run)
        if info["stream"] is None:
            raise UsageError(f"run {run!r} is a foreign chain bound to no stream: its steps "
                             "name no documents")
        stream = stream_named(con, info["stream"])
        params: list[str | int]
        where, params = "run = ?", [run]
        if step is not None:
            where, params = where + " AND step = ?", [run, step]
        elif clipped:
            where += " AND clipped"
        else:
            where += " AND skipped"
        rows = con.execute(
            f"SELECT step, loss, grad_norm, lr, clipped, skipped, state_hash, record FROM steps "
            f"WHERE {where} ORDER BY step LIMIT ?", [*params, limit]).fetchall()
        if step is not None and not rows:
            raise UnknownObjectError(f"run {run!r} has no record of step {step} "
                                     f"(steps {info['first_step']}..{info['last_step']})")
        steps = []
        for s, loss, norm, lr, was_clipped, was_skipped, state_hash, record in rows:
            span = _windows(stream, s, json.loads(record).get("cursor"))
            segments = step_segments(con, store, stream, span)
            steps.append({"step": s, "loss": loss, "grad_norm": norm, "lr": lr,
                          "clipped": was_clipped, "skipped": was_skipped,
                          "state_hash": state_hash, "documents": _documents(segments)})
    return {"run": run, "stream": stream["name"], "spec_hash": stream["spec_hash"],
            "manifest_hash": stream["manifest_hash"], "steps": steps}


def _windows(stream: dict[str, Any], step: int, cursor: Any) -> StepRange:
    """The windows a step read: the step's batch (by the stream's schedule) that ends at
    its cursor (the schedule's step for a record without one)."""
    schedule = stream_schedule(stream)
    batch = schedule.windows_of(step)
    if not isinstance(cursor, int) or isinstance(cursor, bool) or \
            not batch <= cursor <= schedule.first_window(int(stream["steps"])):
        return step_range(stream, step)
    return windows_range(stream, step, range(cursor - batch, cursor))


def _documents(segments: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per document, with the windows and token ranges it had in the step."""
    by_doc: dict[tuple[str, int], dict[str, Any]] = {}
    for s in segments:
        key = (s["doc_id"], s["epoch"])
        entry = by_doc.setdefault(key, {
            "doc_id": s["doc_id"], "source": s["source"], "uri": s["uri"],
            "content_hash": s["content_hash"], "epoch": s["epoch"], "windows": [],
            "tokens": 0})
        entry["windows"].append(s["window"])
        entry["tokens"] += s["token_end"] - s["token_start"]
    return list(by_doc.values())
