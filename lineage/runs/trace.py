"""`lineage trace`: from a run's steps (one, the clipped, the skipped) to their documents.

The question after a loss spike: which documents were in that batch? Because the data
order is a function of the seed, a step number is enough to name them: the step's record
says where its batch ended (its cursor, after any data skip), and the stream's schedule
how many windows it took, so the windows follow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lineage.errors import UnknownObjectError, UsageError
from lineage.runs.answers import Trace, TracedDocument, TracedStep
from lineage.runs.query import _summary
from lineage.runs.step_table import STEP_COLUMNS, RunSteps, record_cursor
from lineage.store.base import BaseStore
from lineage.store.memo import remembered
from lineage.stream.query import (
    StepRange,
    resolved_stream,
    step_range,
    step_segments,
    stream_schedule,
    windows_range,
)

if TYPE_CHECKING:
    from lineage.stream.record import StreamRecord


def trace(
    store: BaseStore, run: str, *, step: int | None = None, clipped: bool = False,
    skipped: bool = False, limit: int | None = None,
) -> dict[str, Any]:
    """The answer as its JSON object, for the server's `trace --step`: a lookup measured
    per document listed, where building the typed answer costs more than the lookup (as
    `docs` answers). `trace_answer` is the same answer, typed."""
    stream, steps = _traced_steps(store, run, step=step, clipped=clipped, skipped=skipped,
                                  limit=limit)
    return {"run": run, "stream": stream.name, "spec_hash": stream.spec_hash,
            "manifest_hash": stream.manifest_hash, "steps": [
                {"step": s, "loss": loss, "grad_norm": norm, "lr": lr, "clipped": was_clipped,
                 "skipped": was_skipped, "state_hash": state_hash,
                 "documents": _documents(segments)}
                for (s, loss, norm, lr, was_clipped, was_skipped, state_hash, _), segments
                in steps]}


def trace_answer(
    store: BaseStore, run: str, *, step: int | None = None, clipped: bool = False,
    skipped: bool = False, limit: int | None = None,
) -> Trace:
    """`lineage trace`: a run's step `step`, or its clipped or skipped steps, with the
    documents each read."""
    stream, steps = _traced_steps(store, run, step=step, clipped=clipped, skipped=skipped,
                                  limit=limit)
    return Trace(run=run, stream=stream.name, spec_hash=stream.spec_hash,
                 manifest_hash=stream.manifest_hash, steps=tuple(
                     TracedStep(step=s, loss=loss, grad_norm=norm, lr=lr, clipped=was_clipped,
                                skipped=was_skipped, state_hash=state_hash,
                                documents=_traced_documents(segments))
                     for (s, loss, norm, lr, was_clipped, was_skipped, state_hash, _), segments
                     in steps))


_Steps = list[tuple[tuple[Any, ...], list[dict[str, Any]]]]  # (step row, its segments)


def _traced_steps(store: BaseStore, run: str, *, step: int | None, clipped: bool,
                  skipped: bool, limit: int | None) -> tuple[StreamRecord, _Steps]:
    """The run's stream and the steps asked for, each with its segments in stream order."""
    if sum([step is not None, clipped, skipped]) != 1:
        raise UsageError("give exactly one of --step N, --clipped, --skipped")
    with store.reader(views=False) as con:
        # the run's stream only (its summary counts every step: most of a served answer)
        bound = remembered(store, ("run-stream", run), lambda: con.execute(
            "SELECT stream FROM runs WHERE name = ?", [run]).fetchone())
        if bound is None:
            _summary(con, run)  # raises, naming the runs there are
            raise AssertionError(f"run {run!r} vanished")  # unreachable: it raised
        if bound[0] is None:
            raise UsageError(f"run {run!r} is a foreign chain bound to no stream: its steps "
                             "name no documents")
        stream = resolved_stream(con, store, bound[0])
        rows = _step_rows(con, store, run, step, clipped=clipped, limit=limit)
        if step is not None and not rows:
            info = _summary(con, run)
            raise UnknownObjectError(f"run {run!r} has no record of step {step} "
                                     f"(steps {info.first_step}..{info.last_step})")
        return stream, [(row, step_segments(con, store, stream, _windows(stream, row[0], row[7])))
                        for row in rows]


def _step_rows(con: Any, store: BaseStore, run: str, step: int | None, *, clipped: bool,
               limit: int | None) -> list[tuple[Any, ...]]:
    """(step, loss, grad_norm, lr, clipped, skipped, state_hash, cursor) of the step asked
    for, or of the clipped (else skipped) steps: one step from the run's kept columns
    where the store keeps them (a server), else by a query."""
    if step is not None and store.catalog_memo is not None:
        table = remembered(store, ("run-steps", run), lambda: RunSteps.read(con, run))
        if table is not None:
            found = table.row(step)
            return [] if found is None else [found]
    where, params = "run = ?", list[str | int]([run])
    if step is not None:
        where, params = where + " AND step = ?", [run, step]
    else:
        where += " AND clipped" if clipped else " AND skipped"
    rows = con.execute(f"SELECT {STEP_COLUMNS} FROM steps WHERE {where} ORDER BY step "
                       "LIMIT ?", [*params, limit]).fetchall()
    return [(*row[:7], record_cursor(row[7])) for row in rows]


def _windows(stream: StreamRecord, step: int, cursor: Any) -> StepRange:
    """The windows a step read: the step's batch (by the stream's schedule) that ends at
    its cursor (the schedule's step for a record without one)."""
    schedule = stream_schedule(stream)
    batch = schedule.windows_of(step)
    if not isinstance(cursor, int) or isinstance(cursor, bool) or \
            not batch <= cursor <= schedule.first_window(stream.steps):
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


def _traced_documents(segments: list[dict[str, Any]]) -> tuple[TracedDocument, ...]:
    return tuple(TracedDocument(doc_id=d["doc_id"], source=d["source"], uri=d["uri"],
                                content_hash=d["content_hash"], epoch=d["epoch"],
                                windows=tuple(d["windows"]), tokens=d["tokens"])
                 for d in _documents(segments))
