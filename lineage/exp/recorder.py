"""`lineage exp run` against a store: refuse early, run, and commit whatever happens.

Before anything runs: a name already used is refused unless the run is a new attempt of
it, and a checksum list an earlier record used under another revision is refused (a new
revision needs a new baseline). Then the gate and the command run with their output
staged in the store, and the record and its logs are committed together, whether the
gate passed, the command failed, or the run was interrupted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lineage.errors import ConflictError, UsageError
from lineage.exp.gate import run_experiment, weights_digest
from lineage.exp.log_files import publish_logs
from lineage.exp.records import attempts_of, save_record
from lineage.exp.runner import interruptions
from lineage.formats.sha256sums import sha256_files
from lineage.store.base import BaseStore
from lineage.store.durable import remove_quietly
from lineage.store.scratch import new_staging_dir


def record_experiment(
    store: BaseStore, *, revision: str, name: str | None = None, attempt: bool = False,
    sums: str | Path | None = None, **options: Any,
) -> tuple[str, dict[str, Any]]:
    """Run `run_experiment(**options)` and store its record; returns (id, record).

    `attempt=True` records a new attempt of an experiment `name` already has.
    """
    number = next_attempt(store, name, attempt)
    if sums is not None:
        refuse_foreign_baseline(store, Path(sums), revision)
    staging = new_staging_dir(store.staging_dir)
    try:
        with interruptions():  # from here on, a signal is recorded, never lost
            record = run_experiment(revision=revision, name=name, attempt=number, sums=sums,
                                    logs_dir=staging, **options)
            record["warnings"] += baseline_warnings(store, record) + _renumber(store, record)
            exp_id, _ = save_record(store, record, publish_logs(store, staging, record))
    finally:
        remove_quietly(staging)
    return exp_id, record


def next_attempt(store: BaseStore, name: str | None, attempt: bool) -> int | None:
    """1 for a new name; the next number with `attempt`; a used name without it: refused."""
    if name is None:
        if attempt:
            raise UsageError("--attempt needs --name: the experiment it is an attempt of")
        return None
    earlier = attempts_of(store, name)
    if earlier and not attempt:
        last = earlier[-1]
        raise ConflictError(f"experiment name {name!r} is taken ({last.id}, attempt "
                            f"{last.attempt}); pass --attempt to record attempt "
                            f"{last.attempt + 1}, or choose another --name")
    return 1 + max((e.attempt for e in earlier), default=0)


def _renumber(store: BaseStore, record: dict[str, Any]) -> list[str]:
    """Another run took this name while the command ran: keep the record, as the next
    attempt, and say so (the record is committed whatever happens)."""
    if record["name"] is None:
        return []
    latest = max((e.attempt for e in attempts_of(store, record["name"])), default=0)
    if latest < record["attempt"]:
        return []
    record["attempt"] = latest + 1
    return [f"another run recorded {record['name']!r} while this one ran: this is attempt "
            f"{record['attempt']}"]


def refuse_foreign_baseline(store: BaseStore, sums: Path, revision: str) -> None:
    """A checksum list is the baseline of one revision: refuse it under another."""
    digest = sha256_files([sums])[sums]
    with store.reader(views=False) as con:
        rows = con.execute(
            "SELECT id, revision FROM experiments WHERE json_extract_string(record, "
            "'$.sums.sha256') = ? AND revision IS DISTINCT FROM ? ORDER BY created_at, id",
            [digest, revision]).fetchall()
    if rows:
        exp_id, other = rows[0]
        raise UsageError(f"{sums}: this checksum list is the baseline of revision {other!r} "
                         f"({exp_id}), not {revision!r}; a new revision needs its own list")


def baseline_warnings(store: BaseStore, record: dict[str, Any]) -> list[str]:
    """The same folder bytes recorded under another revision: say which, once each."""
    digest = record["weights"].get("digest")
    if not digest or not record["weights"]["files"]:
        return []
    with store.reader(views=False) as con:
        rows = con.execute(
            "SELECT id, revision, json_extract_string(record, '$.weights.digest'), "
            "CASE WHEN json_extract_string(record, '$.weights.digest') IS NULL "
            "THEN json_extract(record, '$.weights.files') END FROM experiments "
            "WHERE revision IS DISTINCT FROM ? ORDER BY created_at, id",
            [record["revision"]]).fetchall()
    seen: dict[str, str] = {}
    for exp_id, revision, theirs, files in rows:
        theirs = theirs or weights_digest(json.loads(files) if files else [])
        if theirs == digest and revision not in seen:
            seen[revision] = exp_id
    return [f"these weights (the same files and SHA-256, {digest}) were recorded under "
            f"revision {revision!r} ({exp_id}): a new revision should be new bytes"
            for revision, exp_id in seen.items()]
