"""`store verify` and `store gc`: re-check what the catalog promises, clear leftovers.

Parquet page checksums do not catch every flipped byte, so verification re-hashes each
registered file and compares size and SHA-256 with the catalog's record. Files under
`tables/` that the catalog does not list are garbage from an interrupted write: reported
by verify, removed by gc. The same holds for the experiment logs under `logs/`
(`experiment_logs` lists them).
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from lineage.store.answers import PartProblem, StoreVerification
from lineage.store.base import BaseStore
from lineage.store.durable import guarded_write, sha256_file

GC_MIN_AGE_SECONDS = 3600.0  # an unregistered file younger than this may be mid-commit


def verify_store(store: BaseStore, *, workers: int | None = None) -> StoreVerification:
    """Check every registered Parquet file; `ok` is False when any differs or is missing.
    Each problem names the record its file belongs to; `pending_log` says that commits
    wait in the catalog's log (every open replays them; not a problem)."""
    from lineage.store.arrays_use import arrays_problems

    with store.reader(views=False) as con:
        rows = con.execute(
            "SELECT path, table_name, n_bytes, sha256, owner FROM parquet_files UNION "
            "SELECT DISTINCT path, 'experiment_logs', stored_bytes, stored_sha256, experiment "
            "FROM experiment_logs ORDER BY path"
        ).fetchall()
        unused = arrays_problems(con)  # whole lookup arrays that lookups would not use
    with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
        checked = list(pool.map(lambda row: _check_file(store.root, *row[:4]), rows))
    # by path: a log several experiments share is listed once per experiment, named by one
    owners = {row[0]: f"{owner_kind(row[1])} {row[4]}" for row in rows}
    problems = []
    for (path, table, *_), found in zip(rows, checked, strict=True):
        problem = found or unused.get(path)  # a file intact but unused is a problem too
        if problem is not None:
            status, message = problem
            problems.append(PartProblem(path=path, table=table, status=status,
                                        message=message, owner=owners[path]))
    registered = {row[0] for row in rows}
    garbage = sorted(p for p in _table_files(store) if p not in registered)
    log = store.root / f"{store.catalog_path.name}.wal"
    return StoreVerification(
        store=str(store.root),
        ok=not problems,
        files_checked=len(checked),
        bytes_checked=sum(row[2] for row in rows),
        problems=tuple(problems),
        unregistered=tuple(garbage),
        pending_log=log.exists() and log.stat().st_size > 0,
    )


# A record's tables, its lookup arrays files (lineage/store/arrays.py) among them
CORPUS_TABLES = ("documents", "document_hashes", "text_documents", "text_hashes",
                 "fingerprints", "near_bands", "document_hashes_arrays")
STREAM_TABLES = ("occurrences", "occurrence_hashes", "occurrences_arrays",
                 "occurrence_hashes_arrays")  # the last: lineage-arrays/1's, made no more


def owner_kind(table: str) -> str:
    """What owns a registered file of `table`: a corpus, a stream or an experiment."""
    if table in CORPUS_TABLES:
        return "corpus"
    if table in STREAM_TABLES:
        return "stream"
    return "experiment"


@guarded_write
def gc_store(store: BaseStore, *, min_age: float = GC_MIN_AGE_SECONDS) -> dict[str, Any]:
    """Remove unregistered files under tables/ older than `min_age` seconds, and dead staging."""
    from lineage.store.durable import remove_abandoned_temps
    from lineage.store.scratch import clear_abandoned

    removed: list[str] = []
    with store.writer() as con:  # holding the lock: no commit can register a file meanwhile
        registered = {r[0] for r in con.execute(
            "SELECT path FROM parquet_files UNION SELECT path FROM experiment_logs").fetchall()}
        now = time.time()
        for rel in _table_files(store):
            path = store.root / rel
            if rel not in registered and now - path.stat().st_mtime >= min_age:
                path.unlink(missing_ok=True)
                removed.append(rel)
        for folder in sorted(p for p in store.tables_dir.glob("*") if p.is_dir()):
            gone = remove_abandoned_temps(folder)
            removed += [p.relative_to(store.root).as_posix() for p in gone]
        removed += [p.relative_to(store.root).as_posix()
                    for p in clear_abandoned(store.staging_dir)]
    return {"store": str(store.root), "removed": sorted(set(removed))}


def _check_file(root: Path, rel: str, table: str, size: int,
                sha256: str) -> tuple[str, str] | None:
    """The file's problem as (status, message); None when it is as the catalog says."""
    path = root / rel
    if not path.is_file():
        return "missing", "registered file is missing"
    actual_size = path.stat().st_size
    if actual_size != size:
        return "size-mismatch", f"size {actual_size} bytes, catalog says {size}"
    actual = sha256_file(path)
    if actual != sha256:
        return "hash-mismatch", f"sha256 {actual[:16]}…, catalog says {sha256[:16]}…"
    return None


def _table_files(store: BaseStore) -> list[str]:
    folders = [d for d in (store.tables_dir, store.root / "logs") if d.is_dir()]
    return sorted(
        p.relative_to(store.root).as_posix()
        for folder in folders
        for p in folder.rglob("*")
        if p.is_file()
    )
