"""The typed answers of the store questions (lineage.answer explains the pattern).

`lineage sql` answers with `lineage.store.query.QueryResult`: its rows have the query's
own columns, so it is not an Answer, but it prints and converts the same way.
"""

from __future__ import annotations

from typing import ClassVar

from lineage.answer import Answer


class StoreInit(Answer):
    """`lineage init` and `lineage store migrate`: the store made, found or migrated."""

    path: str  # the store's folder
    created: bool  # False: the store existed already
    schema_version: int  # the catalog's schema version now
    migrated_from: int | None = None  # the version before a migration; None: none ran


class PartProblem(Answer):
    """A registered file whose bytes differ from what the catalog recorded, or are gone."""

    path: str  # relative to the store's folder
    table: str  # the table the file belongs to (experiment_logs for command logs)
    status: str  # missing, size-mismatch or hash-mismatch
    message: str  # what differs, e.g. the size found and the size recorded
    owner: str  # the record it belongs to: "corpus NAME", "stream NAME", "experiment ID"


class StoreVerification(Answer):
    """`lineage store verify`: every registered file re-hashed against the catalog."""

    ROWS: ClassVar[str | None] = "problems"

    store: str  # the store's folder
    ok: bool  # True when every registered file is present and unchanged
    files_checked: int
    bytes_checked: int
    problems: tuple[PartProblem, ...]
    unregistered: tuple[str, ...]  # files no commit registered (`lineage store gc` removes them)
    pending_log: bool  # commits wait in catalog.duckdb.wal (every open replays them;
    # `lineage store repair`, or the next write, moves them into catalog.duckdb)


class RepairAction(Answer):
    """One thing `lineage store repair` did or could not do."""

    action: str  # moved-log, rebuilt, cannot-rebuild, unregistered, dropped or removed
    target: str  # a file (relative to the store's folder) or a record ("corpus NAME")
    detail: str  # why, and what the file or record is now


class StoreRepair(Answer):
    """`lineage store repair`: a store found half-way brought back to a consistent state."""

    ROWS: ClassVar[str | None] = "actions"

    store: str  # the store's folder
    ok: bool  # True when every registered file is now present and unchanged
    actions: tuple[RepairAction, ...]  # in the order they were done
    remaining: tuple[PartProblem, ...]  # lost files it could not rebuild (not dropped)


class Removal(Answer):
    """`lineage corpus|stream|run|exp remove`: what one commit took out of the catalog. The
    files of the removed records are no longer registered: `lineage store gc` deletes them."""

    kind: str  # corpus, stream, run or experiment
    name: str  # as asked
    status: str  # removed, or absent (nothing by that name: nothing to do)
    corpora: tuple[str, ...]  # every record removed, by kind
    streams: tuple[str, ...]
    runs: tuple[str, ...]
    experiments: tuple[str, ...]
    audit_records: int  # ledger records of the removed runs
    parts: int  # files no longer registered
    part_bytes: int  # their size
