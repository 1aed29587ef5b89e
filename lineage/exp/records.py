"""Experiment records in the store: save, list, show.

A record's id is derived from its content ('exp-' + 12 hex of the BLAKE3 of its
canonical JSON), so the same record imported twice is one record.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lineage.answer import AnswerList
from lineage.errors import UnknownObjectError
from lineage.exp.answers import Experiment, ExperimentSummary
from lineage.exp.log_files import register_logs
from lineage.runs.chain import blake3_hex, canonical_json
from lineage.store.base import BaseStore


def record_digest(record: dict[str, Any]) -> str:
    return blake3_hex(canonical_json(record).encode("utf-8"))


def record_id(record: dict[str, Any]) -> str:
    return "exp-" + record_digest(record).split(":", 1)[1][:12]


def save_record(store: BaseStore, record: dict[str, Any],
                logs: Sequence[dict[str, Any]] = ()) -> tuple[str, bool]:
    """Store a record and register its logs (rows of lineage.exp.log_files, files already in
    place) in one transaction; returns (id, added). Saving it again adds nothing."""
    text = canonical_json(record)
    exp_id, digest = record_id(record), record_digest(record)
    sums = (record.get("sums") or {}).get("text")
    with store.writer() as con:
        register_logs(con, exp_id, list(logs))
        if con.execute("SELECT 1 FROM experiments WHERE id = ?", [exp_id]).fetchone():
            return exp_id, False
        con.execute("INSERT INTO experiments VALUES (?, ?, ?, ?, ?::TIMESTAMPTZ, ?, ?, ?)",
                    [exp_id, record.get("name"), record.get("outcome", "unknown"),
                     record.get("revision"), record.get("created_at"), text, digest, sums])
    return exp_id, True


def list_records(store: BaseStore) -> AnswerList[ExperimentSummary]:
    with store.reader(views=False) as con:
        rows = con.execute("SELECT id, name, outcome, revision, created_at, record FROM "
                           "experiments ORDER BY created_at, id").fetchall()
    return AnswerList(ExperimentSummary, (_summary(*row) for row in rows))


def _summary(exp_id: str, name: str | None, outcome: str, revision: str | None,
             created: object, text: str) -> ExperimentSummary:
    record = json.loads(text)
    return ExperimentSummary(
        id=exp_id, name=name, attempt=record.get("attempt"), outcome=outcome,
        revision=revision, created_at=str(created),
        host_cpu=(record.get("host") or {}).get("cpu"),
        exit_code=(record.get("command") or {}).get("exit_code"))


def get_record(store: BaseStore, exp_id: str) -> Experiment:
    """A record by id, by a unique id prefix, by name (its latest attempt) or by
    NAME#N (attempt N of that name)."""
    # The record is stored as JSON of its spec version: read back as the Document it is
    return Experiment.from_dict(stored_record(store, exp_id))


def stored_record(store: BaseStore, exp_id: str) -> dict[str, Any]:
    """The record's JSON object as stored (keys sorted), with its id first: what a bundle
    holds and what `get_record` reads (found as `get_record` says)."""
    name, _, number = exp_id.rpartition("#")
    if name and number.isdigit():
        return _get_attempt(store, name, int(number))
    with store.reader(views=False) as con:
        rows = con.execute(
            "SELECT id, name, record FROM experiments WHERE id = ? OR id LIKE ? OR name = ? "
            "ORDER BY created_at DESC, id", [exp_id, f"{exp_id}%", exp_id]).fetchall()
    exact = [r for r in rows if r[0] == exp_id]
    named = [r for r in rows if r[1] == exp_id]
    prefixed = {r[0] for r in rows if r[0].startswith(exp_id)}
    if not exact and named:  # the highest attempt, which is not always the newest
        latest = max(attempts_of(store, exp_id), key=lambda e: e.attempt)
        named = [r for r in named if r[0] == latest.id]
    if exact or named:
        chosen = (exact or named)[0]
    elif len(prefixed) == 1:
        chosen = rows[0]
    elif prefixed:
        raise UnknownObjectError(f"{exp_id!r} is ambiguous: {', '.join(sorted(prefixed))}")
    else:
        raise UnknownObjectError(f"no experiment {exp_id!r} (`lineage exp list` shows them)")
    return {"id": chosen[0], **json.loads(chosen[2])}


def _get_attempt(store: BaseStore, name: str, number: int) -> dict[str, Any]:
    for attempt in attempts_of(store, name):
        if attempt.attempt == number:
            return stored_record(store, attempt.id)
    raise UnknownObjectError(f"no attempt {number} of experiment {name!r} "
                        "(`lineage exp list` shows them)")


@dataclass(frozen=True)
class Attempt:
    """One record of a name: its id and attempt number."""

    id: str
    attempt: int


def attempts_of(store: BaseStore, name: str) -> list[Attempt]:
    """The records with this name, oldest first; a record without a number counts as 1."""
    with store.reader(views=False) as con:
        rows = con.execute(
            "SELECT id, TRY_CAST(json_extract(record, '$.attempt') AS BIGINT) FROM experiments "
            "WHERE name = ? ORDER BY created_at, id", [name]).fetchall()
    return [Attempt(exp_id, attempt or 1) for exp_id, attempt in rows]
