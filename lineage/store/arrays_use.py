"""Lookups answered from the lookup arrays files (lineage/store/arrays.py) when the
catalog registers current ones, else None (the caller reads the Parquet parts).

A file that is registered but damaged (a byte differs from its record), of an earlier
format, or a stream file made against another file of its corpus than the current one,
is not used: the caller answers from Parquet, and a notice says so and names the remedy
(`lineage store repair` makes the file again). A file made from other parts than its
tables have now is not used either (silently: the table was written again after it was
made).

A long-running reader (`lineage serve`) opens each file once, checks all of it against
the catalog's BLAKE3 and keeps it mapped (`KeptArrays`); a command checks the head and
the blocks it reads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from lineage.errors import DamagedPartError
from lineage.store.arrays import (
    ARRAY_SOURCES,
    ARRAY_TABLES,
    OLD_ARRAY_TABLES,
    REMEDY,
    ArraysFile,
    ArraysRecord,
    OldArraysError,
    parts_digest,
)
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
                "SELECT path, n_bytes, arrays_record FROM parquet_files WHERE list_contains(?, "
                "table_name) ORDER BY path",
                [[*ARRAY_TABLES.values(), *OLD_ARRAY_TABLES]]).fetchall()
        problems = []
        for path, n_bytes, record in rows:
            try:
                self.get(store, ArraysRecord.parse(path, n_bytes, record))
            except DamagedPartError as exc:
                problems.append(str(exc))
        return problems


def with_record(store: BaseStore, record: ArraysRecord, answer: Callable[[ArraysFile], T],
                ) -> T | None:
    """`answer(arrays)` from the file of `record`; None when it is damaged (with a
    notice)."""
    found = with_records(store, (record,), lambda files: answer(files[0]))
    return found


def with_records(store: BaseStore, records: Sequence[ArraysRecord],
                 answer: Callable[[list[ArraysFile]], T]) -> T | None:
    """`answer(files)` from the files of `records`, open together; None when one of
    them is damaged (with a notice)."""
    kept = store.kept_arrays
    opened: list[ArraysFile] = []
    try:
        if kept is not None:
            return answer([kept.get(store, record) for record in records])
        for record in records:
            opened.append(ArraysFile.open(store.root, record))
        return answer(opened)
    except DamagedPartError as exc:
        if kept is None:  # a server found it once, at start-up or first use: no notice
            add_notice(f"{exc}; answered from the Parquet parts")
        return None
    finally:
        for arrays in opened:
            arrays.close()


def current_records(con: duckdb.DuckDBPyConnection, table: str, owner: str | None, *,
                    store: BaseStore | None = None, notify: bool = False,
                    ) -> dict[str, ArraysRecord | None]:
    """Each owner of `table`'s parts (`owner` alone, if given) with its arrays file, if
    one is registered and was made from the parts its tables have now (read once per
    catalog state where `store` keeps one: lineage/store/memo.py). `notify`: a file of
    an earlier format says so in a notice (a lookup's; once per catalog state)."""
    if store is not None:
        from lineage.store.memo import remembered

        return remembered(store, ("arrays", table, owner),
                          lambda: current_records(con, table, owner, notify=notify))
    notices: list[str] = []
    found = _records_from(_registered(con, [(table, owner)]), table, notices)
    for notice in notices if notify else ():
        add_notice(notice)
    return found


def _kinds(table: str) -> list[str]:
    """The tables a lookup table's file is made from, then its file's (old ones too)."""
    return [*ARRAY_SOURCES[table], ARRAY_TABLES[table],
            *(OLD_ARRAY_TABLES if table == "occurrences" else ())]


def _registered(con: duckdb.DuckDBPyConnection, wanted: Sequence[tuple[str, str | None]],
                ) -> list[tuple[Any, ...]]:
    """The registered files of each (lookup table, owner or None for all), in one query.
    (The arrays records have a column of their own: reading `row_groups`, the parts'
    long column, cost a lookup tens of milliseconds at 100M documents.)"""
    where, params = [], []
    for table, owner in wanted:
        where.append("list_contains(?, table_name)" + ("" if owner is None else
                                                        " AND owner = ?"))
        params += [_kinds(table), *(() if owner is None else (owner,))]
    return con.execute(
        "SELECT owner, table_name, path, n_bytes, sha256, arrays_record FROM parquet_files "
        f"WHERE ({') OR ('.join(where)}) ORDER BY owner, path", params).fetchall()


def _records_from(rows: Sequence[tuple[Any, ...]], table: str, notices: list[str],
                  ) -> dict[str, ArraysRecord | None]:
    """Each owner of `table`'s parts among `rows` with its current arrays file, or None;
    a file of an earlier format is said in `notices`."""
    sources, kinds = ARRAY_SOURCES[table], _kinds(table)
    parts: dict[str, list[tuple[str, str]]] = {}
    files: dict[str, list[tuple[str, int, str]]] = {}
    owners = {name for name, kind, *_ in rows if kind == table}
    for name, kind, path, n_bytes, sha256, record in rows:
        if kind in sources:
            parts.setdefault(name, []).append((path, sha256))
        elif kind in kinds:
            files.setdefault(name, []).append((path, n_bytes, record))
    found: dict[str, ArraysRecord | None] = {}
    for name, listed in parts.items():
        if name not in owners:
            continue  # a corpus's documents without its hashes: not an owner of `table`
        mine = files.get(name, [])
        found[name] = None
        if len(mine) == 1:
            try:
                record = ArraysRecord.parse(*mine[0])
            except OldArraysError as exc:
                notices.append(f"{exc}; answered from the Parquet parts")
                continue
            except (ValueError, KeyError, TypeError, DamagedPartError):
                continue  # an unreadable record: the parts answer
            if record.parts_digest == parts_digest(listed):
                found[name] = record
    return found


def stream_records(con: duckdb.DuckDBPyConnection, store: BaseStore, stream: str,
                   corpus: str) -> tuple[ArraysRecord, ArraysRecord] | None:
    """The stream's current arrays file and its corpus's, when the stream's was made
    against that very corpus file; else None (with a notice, for a command, when the
    stream has a file that cannot be used). Read once per catalog state where the store
    keeps one, in one query for both."""
    from lineage.store.memo import remembered

    pair, notices = remembered(store, ("arrays-of-stream", stream, corpus),
                               lambda: _stream_pair(con, stream, corpus))
    if store.kept_arrays is None:  # a server says it once, at start-up
        for notice in notices:
            add_notice(notice)
    return pair


def _stream_pair(con: duckdb.DuckDBPyConnection, stream: str, corpus: str,
                 ) -> tuple[tuple[ArraysRecord, ArraysRecord] | None, list[str]]:
    notices: list[str] = []
    rows = _registered(con, [("occurrences", stream), ("document_hashes", corpus)])
    mine = _records_from(rows, "occurrences", notices).get(stream)
    theirs = _records_from(rows, "document_hashes", notices).get(corpus)
    if mine is None or theirs is None:  # no corpus file (dropped, or none made): Parquet
        return None, notices
    if theirs.blake3 != mine.corpus_blake3:
        return None, [*notices, f"{mine.path}: made against another lookup arrays file of "
                      f"corpus {corpus!r} than its current one; {REMEDY}; answered from "
                      "the Parquet parts"]
    return (mine, theirs), notices


def span_bounds(stream: ArraysFile, start: int, end: int) -> tuple[int, int]:
    """The rows of the occurrences whose [stream_start, stream_end) meets [start, end):
    both sort columns ascend, so they are the rows between two binary searches."""
    first = stream.search("stream_end", start, right=True)  # the first ending after start
    last = stream.search("stream_start", end)  # the first starting at or after end
    spend(max(last - first, 0))  # a server's question answered at once reads few rows
    return first, max(first, last)


def span_rows(stream: ArraysFile, corpus: ArraysFile, first: int, last: int,
              ) -> dict[str, list[Any]]:
    """Occurrences first..last (`span_bounds`), in stream order, as lists by column, with
    each one's document's attributes from the corpus file."""
    rows = {name: stream.values(name, first, last)
            for name in ("epoch", "stream_start", "stream_end", "doc_offset")}
    docs = stream.values("doc", first, last)
    wanted = sorted(set(docs))
    for name in DOCUMENT_COLUMNS:
        if len(wanted) == len(docs):  # each document once: read in the rows' order
            rows[name] = corpus.value_at(name, docs)
            continue
        found = dict(zip(wanted, corpus.value_at(name, wanted), strict=True))
        rows[name] = [found[doc] for doc in docs]
    return rows


DOCUMENT_COLUMNS = ("doc_id", "source", "uri", "content_hash")


def document_rows(corpus: ArraysFile, digests: Sequence[str]) -> list[tuple[Any, ...]]:
    """(content_hash, corpus, source, doc_id) of each document whose content hash is one
    of `digests` (hex)."""
    name = corpus.directory["corpus"]
    found: list[tuple[Any, ...]] = []
    for digest, first, last in _hash_ranges(corpus, digests):
        found += [(digest, name, source, doc_id) for source, doc_id in zip(
            corpus.values("source", first, last), corpus.values("doc_id", first, last),
            strict=True)]
    return found


def placement_rows(stream: ArraysFile, corpus: ArraysFile, digests: Sequence[str],
                   ) -> list[tuple[Any, ...]]:
    """(content_hash, corpus, doc_id, epoch, stream_start, stream_end, doc_offset) of
    each occurrence of a document whose content hash is one of `digests`: the documents'
    rows from the corpus file, then each one's postings in the stream file."""
    name = corpus.directory["corpus"]
    found: list[tuple[Any, ...]] = []
    for digest, first, last in _hash_ranges(corpus, digests):
        bounds = stream.values("post_at", first, last + 1)
        for doc_id, lo, hi in zip(corpus.values("doc_id", first, last), bounds, bounds[1:],
                                  strict=False):
            if hi <= lo:
                continue
            spend(hi - lo)
            rows = stream.values("postings", lo, hi)
            found += [(digest, name, doc_id, *values) for values in zip(*(
                stream.value_at(column, rows) for column in (
                    "epoch", "stream_start", "stream_end", "doc_offset")), strict=True)]
    return found


def _hash_ranges(corpus: ArraysFile, digests: Sequence[str]) -> list[tuple[str, int, int]]:
    """Each digest that some rows hold, with the first and one past the last."""
    found = []
    for digest in digests:
        if len(digest) != 64 or not _is_hex(digest):
            continue  # not a content hash: no row holds it
        first = corpus.search("content_hash", digest)
        last = corpus.search("content_hash", digest, right=True)
        if first < last:
            spend(last - first)
            found.append((digest, first, last))
    return found


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdef" for c in text)


def arrays_problems(con: duckdb.DuckDBPyConnection) -> dict[str, tuple[str, str]]:
    """Registered arrays files that lookups do not use although their bytes may be
    whole, by path: (status, message). `outdated`: an earlier format; `stale`: made from
    other parts than its tables have now, or (a stream's) against another file of its
    corpus than the current one. What `store verify` reports beside the hashes."""
    kinds = [*ARRAY_TABLES.values(), *OLD_ARRAY_TABLES]
    rows = con.execute("SELECT table_name, owner, path, n_bytes, arrays_record FROM "
                       "parquet_files WHERE list_contains(?, table_name) ORDER BY path",
                       [kinds]).fetchall()
    found: dict[str, tuple[str, str]] = {}
    current = {table: current_records(con, table, None) for table in ARRAY_TABLES}
    for kind, owner, path, n_bytes, text in rows:
        try:
            record = ArraysRecord.parse(path, n_bytes, text)
        except OldArraysError as exc:
            found[path] = ("outdated", f"{exc.what}; {REMEDY}")
            continue
        except (ValueError, KeyError, TypeError, DamagedPartError):
            found[path] = ("stale", f"its catalog record cannot be read; {REMEDY}")
            continue
        table = next(t for t, k in ARRAY_TABLES.items() if k == kind)
        mine = current[table].get(owner)
        if mine is None or mine.path != record.path:
            found[path] = ("stale", f"made from other parts than {table} has now; {REMEDY}")
            continue
        if table == "occurrences":
            corpus = con.execute("SELECT corpus FROM streams WHERE name = ?",
                                 [owner]).fetchone()
            theirs = None if corpus is None else current["document_hashes"].get(corpus[0])
            # (a corpus without a current file, dropped or of an earlier format, is
            # reported on its own; made again from the same parts, it is the same file)
            if theirs is not None and theirs.blake3 != record.corpus_blake3:
                found[path] = ("stale", "made against another lookup arrays file of its "
                               f"corpus than the current one; {REMEDY}")
    return found
