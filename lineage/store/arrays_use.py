"""Lookups answered from a table's arrays file (lineage/store/arrays.py) when the catalog
registers a current one, else None (the caller reads the Parquet parts).

A file that is registered but damaged (a byte differs from its record) is not used:
the caller answers from Parquet, and a notice says so and names the remedy (`lineage
store repair` makes the file again). A file made from other parts than the table has
now is not used either (silently: the table was written again after it was made).

A long-running reader (`lineage serve`) opens each file once, checks all of it against
the catalog's BLAKE3 and keeps it mapped (`KeptArrays`); a command checks the head and
the blocks it reads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from lineage.errors import DamagedPartError
from lineage.store.arrays import ARRAY_TABLES, ArraysFile, ArraysRecord, parts_digest
from lineage.store.budget import spend
from lineage.store.notices import add_notice

if TYPE_CHECKING:
    from contextlib import AbstractContextManager
    from pathlib import Path

    import duckdb

    class BaseStore(Protocol):
        """A store (lineage.store.base.BaseStore), by what is read of it here (the store
        module names this one for a server's files: importing it would make a circle)."""

        root: Path
        kept_arrays: KeptArrays | None
        catalog_memo: Any

        def reader(self, *, views: bool = True,
                   ) -> AbstractContextManager[duckdb.DuckDBPyConnection]: ...


T = TypeVar("T")


class KeptArrays:
    """Arrays files opened once, each checked whole, by path and BLAKE3 (a server's)."""

    def __init__(self) -> None:
        self._files: dict[tuple[str, str], ArraysFile | DamagedPartError] = {}
        self._lock = threading.Lock()

    def get(self, store: BaseStore, record: ArraysRecord) -> ArraysFile:
        key = (record.path, record.blake3)
        with self._lock:
            found = self._files.get(key)
            if found is None:
                try:
                    found = ArraysFile.open(store.root, record, whole=True)
                except DamagedPartError as exc:
                    found = exc
                self._files[key] = found
        if isinstance(found, DamagedPartError):
            raise found
        return found

    def check_all(self, store: BaseStore) -> list[str]:
        """Open and check every registered arrays file now (a server's start-up); the
        problems found, one line each."""
        with store.reader(views=False) as con:
            rows = con.execute(
                "SELECT path, n_bytes, row_groups FROM parquet_files WHERE list_contains(?, "
                "table_name) ORDER BY path", [list(ARRAY_TABLES.values())]).fetchall()
        problems = []
        for path, n_bytes, record in rows:
            try:
                self.get(store, ArraysRecord.parse(path, n_bytes, record))
            except DamagedPartError as exc:
                problems.append(str(exc))
        return problems


def with_arrays(con: duckdb.DuckDBPyConnection, store: BaseStore, table: str, owner: str,
                answer: Callable[[ArraysFile], T]) -> T | None:
    """`answer(arrays)` from `owner`'s current arrays file of `table`; None when there is
    none, or when it is damaged (then with a notice)."""
    record = current_records(con, table, owner, store=store).get(owner)
    return None if record is None else with_record(store, record, answer)


def with_record(store: BaseStore, record: ArraysRecord, answer: Callable[[ArraysFile], T],
                ) -> T | None:
    """`answer(arrays)` from the file of `record`; None when it is damaged (with a
    notice)."""
    kept = store.kept_arrays
    try:
        if kept is not None:
            return answer(kept.get(store, record))
        with ArraysFile.open(store.root, record) as arrays:
            return answer(arrays)
    except DamagedPartError as exc:
        if kept is None:  # a server found it once, at start-up or first use: no notice
            add_notice(f"{exc}; answered from the Parquet parts")
        return None


def current_records(con: duckdb.DuckDBPyConnection, table: str, owner: str | None, *,
                    store: BaseStore | None = None) -> dict[str, ArraysRecord | None]:
    """Each owner of `table`'s parts (`owner` alone, if given) with its arrays file of
    the table, if one is registered and was made from the parts the table has now (read
    once per catalog state where `store` keeps one: lineage/store/memo.py)."""
    if store is not None:
        from lineage.store.memo import remembered

        return remembered(store, ("arrays", table, owner),
                          lambda: current_records(con, table, owner))
    where, params = "", [table, ARRAY_TABLES[table]]
    if owner is not None:
        where, params = " AND owner = ?", [*params, owner]
    rows = con.execute(
        "SELECT owner, table_name, path, n_bytes, sha256, row_groups FROM parquet_files "
        f"WHERE (table_name = ? OR table_name = ?){where} ORDER BY owner, path",
        params).fetchall()
    parts: dict[str, list[tuple[str, str]]] = {}
    files: dict[str, list[tuple[str, int, str]]] = {}
    for name, kind, path, n_bytes, sha256, record in rows:
        if kind == table:
            parts.setdefault(name, []).append((path, sha256))
        else:
            files.setdefault(name, []).append((path, n_bytes, record))
    found: dict[str, ArraysRecord | None] = {}
    for name, listed in parts.items():
        mine = files.get(name, [])
        found[name] = None
        if len(mine) == 1:
            try:
                record = ArraysRecord.parse(*mine[0])
            except (ValueError, KeyError, TypeError, DamagedPartError):
                continue  # an unreadable record: the parts answer
            if record.parts_digest == parts_digest(listed):
                found[name] = record
    return found


def span_rows(arrays: ArraysFile, columns: Sequence[str], start: int, end: int,
              ) -> dict[str, list[Any]]:
    """The rows whose [stream_start, stream_end) meets [start, end), as lists by column
    (both sort columns ascend, so they are the rows between two binary searches)."""
    first = arrays.search("stream_end", start, right=True)  # the first ending after start
    last = arrays.search("stream_start", end)  # the first starting at or after end
    spend(max(last - first, 0))  # a server's question answered at once reads few rows
    return {name: arrays.values(name, first, last) for name in columns}


def hash_rows(arrays: ArraysFile, columns: Sequence[str], digests: Sequence[str],
              ) -> list[tuple[Any, ...]]:
    """The rows whose content hash is one of `digests` (hex), as tuples of `columns`."""
    found: list[tuple[Any, ...]] = []
    for digest in digests:
        if len(digest) != 64 or not _is_hex(digest):
            continue  # not a content hash: no row holds it
        first = arrays.search("content_hash", digest)
        last = arrays.search("content_hash", digest, right=True)
        if first < last:
            spend(last - first)
            found += zip(*(arrays.values(name, first, last) for name in columns), strict=True)
    return found


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdef" for c in text)
