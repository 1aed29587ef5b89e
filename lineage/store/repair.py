"""The store-level steps of `lineage store repair` (the whole command is
lineage.ingest.repair, which can also rebuild lost parts from their inputs).

A store is consistent when the catalog's commits are in `catalog.duckdb`, every file
the catalog registers is present with the size and SHA-256 it recorded, and nothing
else lies under `tables/`. The commit protocol (docs/store.md) keeps it so whatever the
disk does; these steps bring back a store found otherwise: written by an older lineage
that deleted committed parts after a failed checkpoint, copied without some files, or
damaged on disk.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from lineage.store.base import CATALOG_NAME, BaseStore, _attached_cursor
from lineage.store.durable import fsync_dir, remove_abandoned_temps, temp_owner_pid
from lineage.store.integrity import (
    CORPUS_TABLES,
    GC_MIN_AGE_SECONDS,
    STREAM_TABLES,
    owner_kind,
)
from lineage.store.scratch import clear_abandoned


@dataclass(frozen=True)
class Lost:
    """A registered file that is missing or differs, and the record it belongs to."""

    path: str
    table: str
    owner: str  # the corpus or stream name; the experiment id for a command log
    status: str  # missing, size-mismatch or hash-mismatch
    message: str
    n_bytes: int
    sha256: str

    @property
    def owner_kind(self) -> str:
        return owner_kind(self.table)


def log_path(store: BaseStore) -> Path:
    return store.root / f"{CATALOG_NAME}.wal"


def fold_log(store: BaseStore) -> bool:
    """Move the commits still in `catalog.duckdb.wal` into `catalog.duckdb` (what a
    write's detach does, and a failed one left undone). True when there was a log.
    Raises StoreError when the catalog cannot be opened or the move fails (a full disk
    still): the log is never deleted here."""
    from lineage.errors import StoreError

    wal = log_path(store)
    if not wal.exists() or wal.stat().st_size == 0:
        return False
    try:
        with _attached_cursor(store.catalog_path, writable=True) as (con, schema):
            # attaching replays the log; the checkpoint writes it into the file (a detach
            # alone skips it when the attach's own checkpoint failed: nothing changed since)
            con.execute(f"FORCE CHECKPOINT {schema.split('.')[0]}")
        if wal.exists() and wal.stat().st_size:
            raise StoreError("the checkpoint left the log in place")
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise StoreError(
            f"{wal}: its commits could not be moved into {store.catalog_path.name} ({first}); "
            "the store answers as it is (every open replays the log): run `lineage store "
            "repair` again once the disk has room") from exc
    return True


def lost_files(store: BaseStore, problems: Iterable[dict[str, object]]) -> list[Lost]:
    """`store verify`'s problems with the record each file belongs to."""
    found = {str(p["path"]): p for p in problems}
    if not found:
        return []
    with store.reader(views=False) as con:
        rows = con.execute(
            "SELECT path, table_name, owner, n_bytes, sha256 FROM parquet_files "
            "WHERE list_contains(?, path) UNION ALL "
            "SELECT DISTINCT path, 'experiment_logs', experiment, stored_bytes, stored_sha256 "
            "FROM experiment_logs WHERE list_contains(?, path) ORDER BY 1",
            [list(found), list(found)]).fetchall()
    return [Lost(path, table, owner, str(found[path]["status"]), str(found[path]["message"]),
                 n_bytes, sha256) for path, table, owner, n_bytes, sha256 in rows]


def put_back(store: BaseStore, rebuilt: Path, lost: Lost) -> None:
    """Move a rebuilt file over a lost one (the caller checked its SHA-256 and size)."""
    import os

    final = store.root / lost.path
    final.parent.mkdir(parents=True, exist_ok=True)
    os.replace(rebuilt, final)
    fsync_dir(final.parent)


def dependents(store: BaseStore, kind: str, name: str) -> list[str]:
    """The records that name a corpus (its streams) or a stream (its runs)."""
    query = {"corpus": "SELECT 'stream ' || name FROM streams WHERE corpus = ? ORDER BY name",
             "stream": "SELECT 'run ' || name FROM runs WHERE stream = ? ORDER BY name"}
    if kind not in query:
        return []
    with store.reader(views=False) as con:
        return [row[0] for row in con.execute(query[kind], [name]).fetchall()]


def drop_record(store: BaseStore, kind: str, name: str) -> list[str]:
    """Unregister a corpus or a stream whose parts are lost, with all of its parts, in
    one transaction (the command logs of an experiment: their rows only; the record
    keeps the tails). Records built on it stay: they answer again once it is ingested
    or built again with the same content. Returns the files it unregistered."""
    with store.writer() as con:
        if kind == "experiment":
            paths = [r[0] for r in con.execute(
                "SELECT DISTINCT path FROM experiment_logs WHERE experiment = ?",
                [name]).fetchall()]
            con.execute("DELETE FROM experiment_logs WHERE experiment = ?", [name])
            return paths
        tables = CORPUS_TABLES if kind == "corpus" else STREAM_TABLES
        paths = [r[0] for r in con.execute(
            "SELECT path FROM parquet_files WHERE owner = ? AND list_contains(?, table_name) "
            "ORDER BY path", [name, list(tables)]).fetchall()]
        con.execute("DELETE FROM parquet_files WHERE owner = ? AND list_contains(?, table_name)",
                    [name, list(tables)])
        if kind == "corpus":
            for table in ("corpus_sources", "text_indexes"):
                con.execute(f"DELETE FROM {table} WHERE corpus = ?", [name])
            con.execute("DELETE FROM corpora WHERE name = ?", [name])
        else:
            con.execute("DELETE FROM streams WHERE name = ?", [name])
    return paths


def remove_garbage(store: BaseStore, *, min_age: float = GC_MIN_AGE_SECONDS) -> list[str]:
    """What no commit registered: files under `tables/` (at once: the lock is held, and
    parts are renamed into place only under it), temporary files and staging folders of
    processes that are gone, and command logs older than `min_age` (a running
    experiment writes its logs before its record)."""
    from lineage.store.integrity import _table_files

    removed: list[str] = []
    with store.writer() as con:
        registered = {r[0] for r in con.execute(
            "SELECT path FROM parquet_files UNION SELECT path FROM experiment_logs").fetchall()}
        now = time.time()
        for rel in _table_files(store):
            path = store.root / rel
            if rel in registered or temp_owner_pid(path) is not None:
                continue
            if rel.startswith("logs/") and now - path.stat().st_mtime < min_age:
                continue
            path.unlink(missing_ok=True)
            removed.append(rel)
        for folder in sorted(p for p in store.tables_dir.glob("*") if p.is_dir()):
            removed += [p.relative_to(store.root).as_posix()
                        for p in remove_abandoned_temps(folder)]
        removed += [p.relative_to(store.root).as_posix()
                    for p in clear_abandoned(store.staging_dir)]
    return sorted(set(removed))
