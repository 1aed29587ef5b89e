"""Removing a corpus, a stream, a run or an experiment record from the catalog.

A record is removed with what depends on it only when asked (`cascade`): a stream is
built on its corpus, a run on its stream, and a run's audit ledger on the run. Everything
goes in one catalog transaction, so a removal is all or nothing, whatever the disk does.
The record's Parquet parts are unregistered in it; the files stay until `store gc`
deletes them (a file no commit lists is garbage, never data). Removing what is not there
does nothing: the answer says `absent`.

Only SQL over the catalog's tables: which table belongs to which record is the store's
own knowledge (`CORPUS_TABLES`, `STREAM_TABLES`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lineage.errors import ConflictError, UsageError
from lineage.store.answers import Removal
from lineage.store.durable import guarded_write
from lineage.store.integrity import CORPUS_TABLES, STREAM_TABLES

if TYPE_CHECKING:
    import duckdb

    from lineage.store.base import BaseStore

KINDS = ("corpus", "stream", "run", "experiment")
_EXISTS = {
    "corpus": "SELECT name FROM corpora WHERE name = ?",
    "stream": "SELECT name FROM streams WHERE name = ?",
    "run": "SELECT name FROM runs WHERE name = ?",
    "experiment": "SELECT id FROM experiments WHERE id = ?",
}


@dataclass
class _Plan:
    corpora: list[str] = field(default_factory=list)
    streams: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    experiments: list[str] = field(default_factory=list)
    audit_records: int = 0

    def dependents_of(self, kind: str) -> list[str]:
        """What else the removal would take, in words."""
        found = [f"stream {name!r}" for name in self.streams if kind == "corpus"]
        found += [f"run {name!r}" for name in self.runs if kind in ("corpus", "stream")]
        if self.audit_records:
            found.append(f"{self.audit_records} audit record"
                         f"{'' if self.audit_records == 1 else 's'}")
        return found


@guarded_write
def remove_record(store: BaseStore, kind: str, name: str, *, cascade: bool = False) -> Removal:
    """Remove the record `name` of `kind` (an experiment by its full id), with what depends
    on it when `cascade`; ConflictError naming the dependents otherwise."""
    if kind not in KINDS:
        raise UsageError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    with store.writer() as con:
        if con.execute(_EXISTS[kind], [name]).fetchone() is None:
            return Removal(kind=kind, name=name, status="absent", corpora=(), streams=(),
                           runs=(), experiments=(), audit_records=0, parts=0, part_bytes=0)
        plan = _plan(con, kind, name)
        dependents = plan.dependents_of(kind)
        if dependents and not cascade:
            raise ConflictError(
                f"{kind} {name!r} is needed by {', '.join(dependents)}: remove "
                f"{'them' if len(dependents) > 1 else 'it'} first, or pass --cascade")
        parts, part_bytes = _unregister(con, plan)
        _delete(con, plan)
    return Removal(kind=kind, name=name, status="removed", corpora=tuple(plan.corpora),
                   streams=tuple(plan.streams), runs=tuple(plan.runs),
                   experiments=tuple(plan.experiments), audit_records=plan.audit_records,
                   parts=parts, part_bytes=part_bytes)


def _plan(con: duckdb.DuckDBPyConnection, kind: str, name: str) -> _Plan:
    """The record and everything below it, by name, sorted."""
    plan = _Plan()
    if kind == "experiment":
        plan.experiments = [name]
        return plan
    if kind == "corpus":
        plan.corpora = [name]
        plan.streams = _names(con, "SELECT name FROM streams WHERE corpus = ?", [name])
    elif kind == "stream":
        plan.streams = [name]
    if kind == "run":
        plan.runs = [name]
    elif plan.streams:
        plan.runs = _names(con, "SELECT name FROM runs WHERE list_contains(?, stream)",
                           [plan.streams])
    if plan.runs:
        row = con.execute("SELECT count(*) FROM audit_records WHERE list_contains(?, run)",
                          [plan.runs]).fetchone()
        plan.audit_records = int(row[0]) if row else 0
    return plan


def _names(con: duckdb.DuckDBPyConnection, sql: str, parameters: list[object]) -> list[str]:
    return sorted(row[0] for row in con.execute(sql, parameters).fetchall())


def _unregister(con: duckdb.DuckDBPyConnection, plan: _Plan) -> tuple[int, int]:
    """Unlist the parts of the removed corpora and streams; (files, bytes)."""
    owned = [(list(CORPUS_TABLES), plan.corpora), (list(STREAM_TABLES), plan.streams)]
    files = size = 0
    for tables, owners in owned:
        if not owners:
            continue
        where = "list_contains(?, table_name) AND list_contains(?, owner)"
        count, total = con.execute(f"SELECT count(*), coalesce(sum(n_bytes), 0) FROM "
                                   f"parquet_files WHERE {where}", [tables, owners]).fetchall()[0]
        files, size = files + int(count), size + int(total)
        con.execute(f"DELETE FROM parquet_files WHERE {where}", [tables, owners])
    return files, size


# (table, column, the plan's list it is matched against), children before parents.
_ROWS = (
    ("audit_records", "run", "runs"), ("checkpoints", "run", "runs"),
    ("steps", "run", "runs"), ("run_segments", "run", "runs"), ("runs", "name", "runs"),
    ("streams", "name", "streams"),
    ("text_indexes", "corpus", "corpora"), ("corpus_sources", "corpus", "corpora"),
    ("corpora", "name", "corpora"),
    ("experiment_logs", "experiment", "experiments"), ("experiments", "id", "experiments"),
)


def _delete(con: duckdb.DuckDBPyConnection, plan: _Plan) -> None:
    for table, column, names in _ROWS:
        values = getattr(plan, names)
        if values:
            con.execute(f"DELETE FROM {table} WHERE list_contains(?, {column})", [values])
    # What the corpus ingests recorded (their inputs and options) goes with the corpus.
    if plan.corpora:
        con.execute("DELETE FROM ingests WHERE kind = 'corpus' AND list_contains(?, target)",
                    [plan.corpora])
