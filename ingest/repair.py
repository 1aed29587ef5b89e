"""`lineage store repair`: bring a store found half-way back to a consistent state,
without losing committed data, and say what was done (docs/store.md, "Repair").

In order:
1. commits still in the catalog's log are moved into the catalog file;
2. every registered file is re-hashed (as `store verify` does);
3. a lost or damaged part is rebuilt where its record allows: a corpus from the inputs
   its ingest recorded, a canonical stream from its corpus and parameters. A rebuilt
   part goes back only when its size and SHA-256 are the ones the catalog recorded, so
   the catalog is never changed to fit a file;
4. what cannot be rebuilt is reported (exit 1), or, with `drop_lost=True`, its record is
   unregistered with all its parts so it can be ingested or built again;
5. files no commit registered are removed.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from lineage.errors import StoreFullError, StoreWriteError
from lineage.store.answers import PartProblem, RepairAction, StoreRepair
from lineage.store.arrays import ARRAY_SOURCES, ARRAY_TABLES, OLD_ARRAY_TABLES
from lineage.store.base import BaseStore, init_store
from lineage.store.durable import remove_quietly, sha256_file, write_failure
from lineage.store.integrity import verify_store
from lineage.store.repair import (
    Lost,
    dependents,
    drop_record,
    fold_log,
    lost_files,
    put_back,
    remove_garbage,
)
from lineage.store.scratch import new_staging_dir


def repair_store(store: BaseStore, *, drop_lost: bool = False,
                 logs_min_age: float | None = None) -> StoreRepair:
    """Repair `store` (see the module docstring); the answer lists every action.

    Each step commits on its own, so a disk that fails midway stops the repair with
    what it did before kept (StoreWriteError or StoreFullError saying so); running it
    again goes on from there."""
    try:
        return _repair(store, drop_lost=drop_lost, logs_min_age=logs_min_age)
    except Exception as exc:
        kind = write_failure(exc)
        if kind is None:
            raise
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        error = StoreFullError if kind == "full" else StoreWriteError
        raise error(f"{store.root}: repair stopped ({first}); what it did before stays "
                    "done: run it again once the disk has room") from exc


def _repair(store: BaseStore, *, drop_lost: bool, logs_min_age: float | None) -> StoreRepair:
    store.require_catalog()
    actions: list[RepairAction] = []
    if fold_log(store):
        actions.append(RepairAction("moved-log", "catalog.duckdb.wal",
                                    "moved the commits kept in the log into catalog.duckdb"))
    lost = lost_files(store, verify_store(store)["problems"])
    arrays = [item for item in lost if item.table in (*ARRAY_TABLES.values(), *OLD_ARRAY_TABLES)]
    by_owner: dict[tuple[str, str], list[Lost]] = defaultdict(list)
    for item in lost:
        if item not in arrays:
            by_owner[(item.owner_kind, item.owner)].append(item)
    remaining: list[Lost] = []
    for (kind, owner), items in sorted(by_owner.items()):
        why = _rebuild(store, kind, owner, items, actions)
        if why is None:
            continue
        if not drop_lost:
            remaining += items
            actions.append(RepairAction("cannot-rebuild", f"{kind} {owner}", why))
            continue
        for path in drop_record(store, kind, owner):
            actions.append(RepairAction("unregistered", path, f"part of {kind} {owner}"))
        after = dependents(store, kind, owner)
        note = f"dropped: {why}"
        if after:
            note += (f"; {', '.join(after)} answer again once {kind} {owner} is "
                     f"{'ingested' if kind == 'corpus' else 'built'} again with the same content")
        actions.append(RepairAction("dropped", f"{kind} {owner}", note))
    remaining += _remake_arrays(store, arrays, remaining, actions)
    age = {} if logs_min_age is None else {"min_age": logs_min_age}
    for path in remove_garbage(store, **age):
        actions.append(RepairAction("removed", path, "no commit registered it"))
    if fold_log(store):  # a commit of this repair that its own detach could not move
        actions.append(RepairAction("moved-log", "catalog.duckdb.wal",
                                    "moved this repair's commits into catalog.duckdb"))
    problems = tuple(PartProblem(i.path, i.table, i.status, i.message,
                                 f"{i.owner_kind} {i.owner}") for i in remaining)
    return StoreRepair(store=str(store.root), ok=not problems, actions=tuple(actions),
                       remaining=problems)


def _remake_arrays(store: BaseStore, lost: list[Lost], remaining: list[Lost],
                   actions: list[RepairAction]) -> list[Lost]:
    """Make lost lookup arrays files again from their tables' parts (which are then
    whole: rebuilt above, or never lost); those that cannot be, as still lost."""
    from lineage.store.arrays_write import build_arrays

    left: list[Lost] = []
    unusable = {(item.table, item.owner) for item in remaining}
    done: set[tuple[str, str]] = set()
    # A corpus's file first: a stream's is made against its corpus's current one.
    for item in sorted(lost, key=lambda i: (i.owner_kind != "corpus", i.path)):
        table = next((t for t, kind in ARRAY_TABLES.items() if kind == item.table),
                     "occurrences")  # lineage-arrays/1's occurrence_hashes: the stream's
        if (table, item.owner) in done or not _registered(store, item.path):
            continue  # made with its stream's other file, or dropped with its record
        done.add((table, item.owner))
        if any((source, item.owner) in unusable for source in ARRAY_SOURCES[table]):
            left.append(item)  # its parts are lost too: reported with them
            continue
        made = build_arrays(store, table, item.owner)
        if made is None:
            left.append(item)
            actions.append(RepairAction("cannot-rebuild", item.path,
                                        "its table's rows could not be made into arrays"))
            continue
        actions.append(RepairAction("rebuilt", made, f"{item.status} before; made again "
                                    f"from the parts of {table} of {item.owner_kind} "
                                    f"{item.owner}"))
    return left


def _registered(store: BaseStore, path: str) -> bool:
    with store.reader(views=False) as con:
        return con.execute("SELECT count(*) FROM parquet_files WHERE path = ?",
                           [path]).fetchone() == (1,)


def _rebuild(store: BaseStore, kind: str, owner: str, items: list[Lost],
             actions: list[RepairAction]) -> str | None:
    """Rebuild and put back `items`; None when all went back, else why not."""
    staging = new_staging_dir(store.staging_dir)
    try:
        if kind == "corpus":
            rebuilt = _rebuild_corpus(store, owner, staging)
        elif kind == "stream":
            from lineage.stream.build import rebuild_parts

            parts = rebuild_parts(store, owner, staging)
            rebuilt = parts if isinstance(parts, str) else {str(p.temp): p.temp for p in parts}
        else:
            rebuilt = "a command's log is kept only in the store"
        if isinstance(rebuilt, str):
            return rebuilt
        return _put_back_matching(store, items, list(rebuilt.values()), actions)
    except Exception as exc:  # an input that moved or broke: reported, never half-applied
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return f"rebuilding it failed: {first}"
    finally:
        remove_quietly(staging)


def _put_back_matching(store: BaseStore, items: list[Lost], candidates: list[Path],
                       actions: list[RepairAction]) -> str | None:
    """Put back each lost file from the candidate whose size and SHA-256 match."""
    by_digest = {}
    for path in candidates:
        by_digest[(path.stat().st_size, sha256_file(path))] = path
    missing = [i for i in items if (i.n_bytes, i.sha256) not in by_digest]
    if missing:
        return (f"rebuilt from its inputs, {missing[0].path} differs from what the catalog "
                "recorded (the inputs changed)")
    for item in items:
        put_back(store, by_digest[(item.n_bytes, item.sha256)], item)
        actions.append(RepairAction("rebuilt", item.path,
                                    f"{item.status} before; rebuilt with sha256 {item.sha256}"))
    return None


def _rebuild_corpus(store: BaseStore, corpus: str, staging: Path) -> dict[str, Path] | str:
    """The corpus ingested again from the inputs its ingest recorded, into a scratch store
    in `staging`: its parts by file name, or why it cannot be."""
    from lineage.api import open_store
    from lineage.ingest.corpus import ingest_corpus

    with store.reader(views=False) as con:
        row = con.execute(
            "SELECT i.inputs, i.parameters, c.manifest_hash, c.tokenizer, "
            "t.corpus IS NOT NULL FROM corpora c JOIN ingests i ON i.target = c.name "
            "AND i.kind = 'corpus' LEFT JOIN text_indexes t ON t.corpus = c.name "
            "WHERE c.name = ? ORDER BY i.finished_at DESC LIMIT 1", [corpus]).fetchone()
    if row is None:
        return "its ingest record is missing"
    inputs, parameters, manifest_hash, tokenizer, indexed = row
    tokenizer_arg = _tokenizer_argument(tokenizer)
    if tokenizer_arg is None:
        return "the tokenizer.json it was counted with is not recorded by path"
    paths = _input_paths(json.loads(inputs))
    gone = [p for p in paths if not Path(p).exists()]
    if gone:
        return f"its input {gone[0]} is gone"
    options: dict[str, Any] = json.loads(parameters)
    licenses = options.get("license") or {}
    license_args = [*([licenses["default"]] if licenses.get("default") else []),
                    *(f"{s}={spdx}" for s, spdx in sorted((licenses.get("by_source") or {})
                                                          .items()))]
    scratch_root = staging / "store"
    init_store(scratch_root)
    scratch = open_store(scratch_root)
    result = ingest_corpus(scratch, list(paths), corpus=corpus, source=options.get("source"),
                           license=license_args or None, tokenizer=tokenizer_arg,
                           fmt=options.get("format") or "auto", fingerprints=bool(indexed),
                           links=options.get("links") or "skip")  # recorded since --links
    if result.manifest_hash != manifest_hash:
        return (f"its inputs now give manifest {result.manifest_hash}, not the recorded "
                f"{manifest_hash}")
    return {p: scratch_root / p for p in result.parts}


def _tokenizer_argument(recorded: str) -> str | None:
    """The --tokenizer an ingest was run with, from the corpus's recorded tokenizer;
    None when the record cannot say (a tokenizer.json is recorded by hash only)."""
    if recorded in ("bytes", "manifest"):
        return "bytes"
    if recorded.startswith("input:"):
        return "input"
    return None


def _input_paths(entries: list[dict[str, Any]]) -> list[str]:
    """The paths the ingest was given: a Croissant file for what it named, else each."""
    paths: list[str] = []
    for entry in entries:
        path = entry.get("croissant") or entry["path"]
        if path not in paths:
            paths.append(path)
    return paths
