"""What a corpus's and a stream's lookup arrays files hold (docs/arrays-spec.md), read
from their Parquet parts by DuckDB in batches (a corpus ingest feeds its file from its
own sort instead: `CorpusColumns`) and written with lineage/store/arrays_spool.py.

- A corpus file: the rows of `document_hashes` in their order (content hash, then
  doc_id), with each document's uri from `documents`: content_hash, doc_id, source, uri.
  A document's row in this file is its number everywhere else.
- A stream file: the rows of `occurrences` in their order (ordinal), as integers:
  stream_start, stream_end, epoch, doc_offset and doc (the document's row in the corpus
  file); then post_at and postings, each document's occurrence rows in row order
  (document d's are postings[post_at[d]:post_at[d + 1]]).

Rows that a binary search cannot use (a sort column that goes down somewhere, a content
hash that is not 64 lowercase hex, an occurrence whose document is not in the corpus,
ordinals that are not the rows' numbers, a stream's two tables that disagree) make no
file (None): the lookups read Parquet. Every query orders by unique keys or reads parts
in their order, so the bytes do not depend on DuckDB's threads or the machine.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lineage.store.arrays_spool import (
    DictSpool,
    HashSpool,
    IntSpool,
    Spool,
    StrSpool,
    Written,
    assemble,
    close_spools,
)
from lineage.store.base import sql_text

if TYPE_CHECKING:
    import duckdb
    import numpy as np
    import pyarrow as pa

BATCH_ROWS = 1 << 16  # rows DuckDB hands over at a time
MEMORY_LIMIT = "1GB"  # DuckDB's share: its joins and sorts spill to the scratch folder
POSTINGS_CHUNK = 1 << 20  # documents whose post_at entries are made at a time


class _Unsearchable(Exception):
    """The rows cannot be made into a file a binary search can use."""


class CorpusColumns:
    """A corpus file's columns (content_hash, doc_id, source, uri), taken from batches
    in the file's row order as they pass (`update`, the `digests` protocol of
    `write_parts`): an ingest feeds them from its own content-hash sort while it writes
    `document_hashes`, where `corpus_file` reads and sorts the parts' rows again.
    Spooled in `folder`; `write` makes the file, None when the rows cannot be searched.
    `hashes_checked`: every content hash is known to be 64 lowercase hex digits (an
    ingest's row rules held them to it), so the batches are not checked again."""

    def __init__(self, folder: Path, *, hashes_checked: bool = False) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.hashes_checked = hashes_checked
        self.spools: list[Spool] = [HashSpool("content_hash", folder),
                                    StrSpool("doc_id", folder), DictSpool("source", folder),
                                    StrSpool("uri", folder)]
        self.rows = 0
        self.searchable = True
        self._last: Any = None
        self._made: Written | None = None

    def update(self, batch: pa.RecordBatch) -> None:
        if not self.searchable:
            return
        try:
            hashes = batch.column("content_hash")
            if not self.hashes_checked:
                _check_hashes(hashes)
            self._last = _ascending(hashes, self._last)
        except _Unsearchable:
            self.searchable = False
            return
        for spool in self.spools:
            spool.add(batch.column(spool.name))  # type: ignore[attr-defined]
        self.rows += batch.num_rows

    def make_now(self, corpus: str) -> None:
        """Make the file now, in the spools' folder, while other work still runs (an
        ingest's documents are still being written): `write` then hands it over."""
        if self.searchable and self._made is None:
            self._made = self.write(self.folder / "made.arrays", self.folder, corpus)

    def write(self, temp: Path, folder: Path, corpus: str) -> Written | None:
        import dataclasses

        if not self.searchable:
            return None
        if self._made is not None:
            os.replace(self._made.temp, temp)
            return dataclasses.replace(self._made, temp=temp)
        return assemble(temp, folder, "corpus", self.rows, self.spools,
                        {"corpus": corpus, "sorted_by": ["content_hash"]})

    def close(self) -> None:
        close_spools(self.spools)

    def discard(self) -> None:
        """Close and remove the spools (as large as the file: the disk is freed now)."""
        _discard(self.spools, self.folder)


def corpus_file(temp: Path, folder: Path, corpus: str, hash_parts: Sequence[Path],
                doc_parts: Sequence[Path], *, threads: int = 2) -> Written | None:
    """A corpus's arrays file from its `document_hashes` and `documents` parts (what
    repair does; an ingest feeds `CorpusColumns` from its own sort instead)."""
    import pyarrow.compute as pc

    columns = CorpusColumns(folder)
    con = _session(folder, threads)
    try:
        uris = _uris_in_hash_order(con, folder, hash_parts, doc_parts)
        query = f"""
            SELECT h.content_hash, h.doc_id, h.source, u.uri, u.same
            FROM read_parquet({_paths(hash_parts)}) h
            POSITIONAL JOIN read_parquet({sql_text(str(uris))}) u"""
        for batch in _batches(con, query, []):
            if not pc.all(batch.column(4)).as_py():
                return None  # the tables do not hold the same documents
            columns.update(batch)
        return columns.write(temp, folder, corpus)
    finally:
        con.close()
        columns.close()


def _uris_in_hash_order(con: duckdb.DuckDBPyConnection, folder: Path,
                        hash_parts: Sequence[Path], doc_parts: Sequence[Path]) -> Path:
    """A scratch Parquet file of each document's uri in `document_hashes` row order,
    and whether the two tables' rows lined up there (`same`: the doc_ids agree).

    Both tables hold each document once: `documents` by doc_id, `document_hashes` by
    content hash. Sorting the hash rows' numbers by doc_id lines them up with the
    documents row for row, and sorting the uris by those numbers puts them in hash order:
    two external sorts of narrow rows, where a hash join of the two tables held one
    side's doc_ids in memory (at 100M documents, more than the session's budget)."""
    _bases(con, "hash_parts", hash_parts)
    by_doc, uris = folder / "rows-by-doc_id.parquet", folder / "uris-by-row.parquet"
    con.execute(f"""
        COPY (SELECT h.doc_id, b.base + h.file_row_number AS row
              FROM read_parquet({_paths(hash_parts)}, filename = true,
                                file_row_number = true) h
              JOIN hash_parts b ON b.filename = h.filename
              ORDER BY h.doc_id)
        TO {sql_text(str(by_doc))} (FORMAT parquet, COMPRESSION zstd)""").fetchall()
    con.execute(f"""
        COPY (SELECT r.row, d.uri, d.doc_id IS NOT DISTINCT FROM r.doc_id AS same
              FROM read_parquet({_paths(doc_parts)}) d POSITIONAL JOIN
                   read_parquet({sql_text(str(by_doc))}) r
              ORDER BY r.row NULLS LAST)
        TO {sql_text(str(uris))} (FORMAT parquet, COMPRESSION zstd)""").fetchall()
    by_doc.unlink()
    return uris


# A stream file's columns, in the file's order.
STREAM_COLUMNS = ("stream_start", "stream_end", "epoch", "doc_offset", "doc", "post_at",
                  "postings")


class StreamColumns:
    """A stream file's columns from the occurrences a build holds in memory (ordinal
    order), spooled in `folder` before the build lets them go: the values `stream_file`
    reads back from the written parts, and so the same file, without reading both tables
    and the corpus's index again (a quarter of a 10M-document build). `doc` is each
    occurrence's document as its row in the corpus file (content hash, then doc_id);
    `corpus_rows` the corpus's documents; `within` each occurrence's place among its
    document's occurrences in row order (0, 1, ...), which places the postings without a
    sort. `write` makes the file, None when the rows cannot be searched; `discard` frees
    the disk."""

    def __init__(self, folder: Path, *, stream_start: np.ndarray, n_tokens: np.ndarray,
                 epoch: np.ndarray, doc_offset: np.ndarray, doc: np.ndarray,
                 within: np.ndarray, corpus_rows: int) -> None:
        import numpy as np

        folder.mkdir(parents=True, exist_ok=True)
        self.folder, self.rows, self.corpus_rows = folder, len(doc), corpus_rows
        self.spools: dict[str, IntSpool] = {}
        stream_end = stream_start.astype(np.int64) + n_tokens
        self.searchable = bool(_rising(stream_start) and _rising(stream_end) and (
            not len(doc) or (doc.min() >= 0 and doc.max() < corpus_rows)))
        if not self.searchable:
            return
        try:
            for name in STREAM_COLUMNS:
                self.spools[name] = IntSpool(name, folder)
            for name, values in (("stream_start", stream_start), ("stream_end", stream_end),
                                 ("epoch", epoch), ("doc_offset", doc_offset), ("doc", doc)):
                self._add(name, values)
            del stream_end
            post_at = np.zeros(corpus_rows + 1, dtype=np.int64)
            np.cumsum(np.bincount(doc, minlength=corpus_rows), out=post_at[1:])
            self._add("post_at", post_at)
            self._add("postings", _postings(doc, within, post_at))
        except BaseException:
            self.discard()
            raise

    def _add(self, name: str, values: np.ndarray) -> None:
        for lo in range(0, len(values), POSTINGS_CHUNK):
            self.spools[name].add(values[lo:lo + POSTINGS_CHUNK])

    def write(self, temp: Path, folder: Path, stream: str, corpus: str,
              corpus_blake3: str) -> Written | None:
        if not self.searchable:
            return None
        return assemble(temp, folder, "stream", self.rows, list(self.spools.values()), {
            "stream": stream, "corpus": corpus, "corpus_rows": self.corpus_rows,
            "corpus_blake3": corpus_blake3, "sorted_by": ["stream_start", "stream_end"]})

    def discard(self) -> None:
        """Close and remove the spools."""
        _discard(list(self.spools.values()), self.folder)


def _discard(spools: Sequence[Spool], folder: Path) -> None:
    """Close `spools` and remove `folder` with them: what they could not flush (a full
    disk) goes with the files, so a close's error is not raised (a discard runs while
    another error is on its way)."""
    from lineage.store.durable import remove_quietly

    with contextlib.suppress(OSError):
        close_spools(spools)
    remove_quietly(folder)


def _postings(doc: np.ndarray, within: np.ndarray, post_at: np.ndarray) -> np.ndarray:
    """Each document's rows in row order: row i goes to slot post_at[doc[i]] + within[i]
    (8.8M occurrences: 0.2 s, where a stable sort of the rows by document took 1.5 s);
    the sort when `within` does not number each document's rows 0, 1, ... in row order."""
    import numpy as np

    postings = np.full(len(doc), -1, dtype=np.int64)
    slots = post_at[doc] + within
    postings[slots] = np.arange(len(doc))
    del slots
    placed = doc[postings] if len(doc) and postings.min() >= 0 else None
    if placed is not None and _rising(placed):
        same = placed[1:] == placed[:-1]
        if bool(np.all(postings[1:][same] > postings[:-1][same])):
            return postings
    return np.argsort(doc, kind="stable")


def _rising(values: np.ndarray) -> bool:
    """Whether `values` never go down (what `_ascending` asks of a batch)."""
    import numpy as np

    return len(values) < 2 or bool(np.all(values[1:] >= values[:-1]))


def stream_file(temp: Path, folder: Path, stream: str, occurrence_parts: Sequence[Path],
                occurrence_hash_parts: Sequence[Path], corpus: str, corpus_blake3: str,
                hash_parts: Sequence[Path], *, threads: int = 2) -> Written | None:
    """A stream's arrays file from its `occurrences` parts (ordinal order) and its
    `occurrence_hashes` parts (content-hash order), its documents numbered by their rows
    in the corpus file (`corpus_blake3`) made from `hash_parts`.

    No join: `occurrence_hashes` and `document_hashes` are sorted by the same key (the
    content hash, then doc_id), so one pass over both, side by side, finds each
    occurrence's document row, and gives the postings already grouped by document; the
    `doc` column is then those rows put back in ordinal order through a file of one
    integer an occurrence. (Two hash joins on doc_id took a 100M-document build about 4
    minutes and 8.5 GB of spill.)"""

    by_name = {name: IntSpool(name, folder) for name in STREAM_COLUMNS}
    spools: list[Spool] = list(by_name.values())
    con = _session(folder, threads)
    try:
        rows, digest = _occurrences(con, occurrence_parts, by_name)
        corpus_rows = sum(_row_counts(hash_parts))
        doc_of = _allocated(folder / "doc-by-ordinal.bin", max(rows, 1))
        doc_of[:] = -1
        postings = _Postings(by_name["post_at"], by_name["postings"])
        matched, digest_by_hash = 0, 0
        for docs, ordinals, row_hashes in _documents_of(con, occurrence_hash_parts,
                                                        hash_parts):
            if len(ordinals) and (ordinals.min() < 0 or ordinals.max() >= rows):
                raise _Unsearchable  # an ordinal that is not a row of the occurrences
            doc_of[ordinals] = docs
            postings.add(docs, ordinals)
            matched += len(ordinals)
            digest_by_hash = _add_hashes(digest_by_hash, row_hashes)
        postings.finish(corpus_rows)
        if matched != rows or digest_by_hash != digest or (rows and doc_of[:rows].min() < 0):
            raise _Unsearchable  # the two tables do not hold the same occurrences
        for lo in range(0, rows, POSTINGS_CHUNK):
            by_name["doc"].add(doc_of[lo:lo + POSTINGS_CHUNK])
        del doc_of
        return assemble(temp, folder, "stream", rows, spools, {
            "stream": stream, "corpus": corpus, "corpus_rows": corpus_rows,
            "corpus_blake3": corpus_blake3, "sorted_by": ["stream_start", "stream_end"]})
    except _Unsearchable:
        return None
    finally:
        con.close()
        with contextlib.suppress(OSError):  # on success every spool is closed already
            close_spools(spools)
        (folder / "doc-by-ordinal.bin").unlink(missing_ok=True)


def _allocated(path: Path, count: int) -> np.ndarray:
    """A file of `count` int64, its blocks allocated on disk before it is mapped: a
    mapped page of a file with holes that the disk has no room for stops the process
    (SIGBUS); allocating first turns a full disk into an error (ENOSPC) here."""
    import numpy as np

    with open(path, "wb") as handle:
        if hasattr(os, "posix_fallocate"):
            os.posix_fallocate(handle.fileno(), 0, count * 8)
        else:
            handle.truncate(count * 8)
    return np.memmap(path, dtype="<i8", mode="r+", shape=(count,))


def _occurrences(con: duckdb.DuckDBPyConnection, parts: Sequence[Path],
                 spools: dict[str, IntSpool]) -> tuple[int, int]:
    """The integer columns in row order, each row's ordinal its number (the lookups
    take an occurrence's row for its ordinal); the rows written, and the sum of the
    rows' `_ROW_HASH` (which `occurrence_hashes` must give too)."""
    import numpy as np

    query = f"""SELECT stream_start, stream_end, epoch, doc_offset, ordinal, {_ROW_HASH}
                FROM read_parquet({_paths(parts)})"""
    lasts: dict[str, Any] = {"stream_start": None, "stream_end": None}
    rows, digest = 0, 0
    for batch in _batches(con, query, []):
        ordinals = batch.column("ordinal").to_numpy()
        if not np.array_equal(ordinals, np.arange(rows, rows + batch.num_rows)):
            raise _Unsearchable
        for name in lasts:
            lasts[name] = _ascending(batch.column(name), lasts[name])
        for name in ("stream_start", "stream_end", "epoch", "doc_offset"):
            spools[name].add(batch.column(name).to_numpy())
        digest = _add_hashes(digest, batch.column("row_hash").to_numpy())
        rows += batch.num_rows
    return rows, digest


_PREFIX = "TRY_CAST('0x' || left(content_hash, 16) AS UBIGINT) AS prefix"
# Each occurrence's (ordinal, doc_id, epoch) hashed; summed over a table's rows, in any
# order, the two tables of one stream give the same sum (uint64, wrapping).
_ROW_HASH = "hash(ordinal, doc_id, epoch) AS row_hash"


def _add_hashes(total: int, hashes: np.ndarray) -> int:
    """`total` plus the sum of `hashes` (uint64), wrapping at 2**64."""
    import numpy as np

    return (total + int(hashes.sum(dtype=np.uint64))) % (1 << 64)


def _documents_of(con: duckdb.DuckDBPyConnection, occurrence_hash_parts: Sequence[Path],
                  hash_parts: Sequence[Path],
                  ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(document row, ordinal, `_ROW_HASH`) of every occurrence, in batches, in
    `occurrence_hashes` order: by
    document row, then epoch and ordinal. Both tables are read once, side by side; a
    window of the document rows reaches a little past the occurrences of each batch,
    and each occurrence is placed among the window's rows by the first 8 bytes of its
    content hash (a binary search), ties of those bytes (copies of one text) by the
    whole hash and doc_id. Every match is then checked on both."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    documents = _batches(con.cursor(), f"SELECT {_PREFIX}, content_hash, doc_id FROM "
                         f"read_parquet({_paths(hash_parts)})", [])
    window = _Window()
    for batch in _batches(con.cursor(), f"SELECT {_PREFIX}, content_hash, doc_id, ordinal, "
                          f"{_ROW_HASH} FROM read_parquet({_paths(occurrence_hash_parts)})",
                          []):
        if batch.column("prefix").null_count:
            raise _Unsearchable  # a content hash that is not hex
        prefixes = batch.column("prefix").to_numpy()
        window.reach(documents, int(prefixes[-1]))
        lo = np.searchsorted(window.prefixes, prefixes, side="left")
        hi = np.searchsorted(window.prefixes, prefixes, side="right")
        if (hi == lo).any():
            raise _Unsearchable  # an occurrence of a document the corpus does not hold
        found = lo
        shared = np.nonzero(hi - lo > 1)[0]
        if len(shared):
            found = lo.copy()
            hashes, doc_ids = batch.column("content_hash"), batch.column("doc_id")
            for i in shared.tolist():
                found[i] = window.find(int(lo[i]), int(hi[i]), hashes[i].as_py(),
                                       doc_ids[i].as_py())
        taken = pa.array(found)
        same = pc.and_(
            pc.equal(batch.column("content_hash").cast(pa.string()), window.hashes.take(taken)),
            pc.equal(batch.column("doc_id").cast(pa.string()), window.doc_ids.take(taken)))
        if not pc.all(same).as_py():
            raise _Unsearchable
        yield (window.base + found, batch.column("ordinal").to_numpy(),
               batch.column("row_hash").to_numpy())
        window.drop_before(int(found[-1]))


class _Window:
    """Consecutive rows of `document_hashes` (from row `base`), as read so far."""

    def __init__(self) -> None:
        import numpy as np
        import pyarrow as pa

        self.base = 0
        self.prefixes = np.empty(0, dtype=np.uint64)
        self.hashes: pa.Array = pa.array([], pa.string())
        self.doc_ids: pa.Array = pa.array([], pa.string())
        self._done = False
        self._keys: tuple[tuple[int, int], list[tuple[str, str]]] = ((0, 0), [])

    def reach(self, batches: Iterator[pa.RecordBatch], prefix: int) -> None:
        """Read on until the window holds every row whose prefix is `prefix` or less."""
        import numpy as np
        import pyarrow as pa

        added: list[pa.RecordBatch] = []
        last = self.prefixes[-1] if len(self.prefixes) else None
        while not self._done and (last is None or last <= prefix):
            batch = next(batches, None)
            if batch is None:
                self._done = True
                break
            if batch.column("prefix").null_count:
                raise _Unsearchable
            added.append(batch)
            last = batch.column("prefix")[-1].as_py()
        if added:
            self.prefixes = np.concatenate(
                [self.prefixes, *(b.column("prefix").to_numpy() for b in added)])
            self.hashes = pa.concat_arrays(
                [self.hashes, *(b.column("content_hash").cast(pa.string()) for b in added)])
            self.doc_ids = pa.concat_arrays(
                [self.doc_ids, *(b.column("doc_id").cast(pa.string()) for b in added)])

    def find(self, lo: int, hi: int, content_hash: str, doc_id: str) -> int:
        """The row among lo..hi (rows sharing a prefix) of this hash and doc_id, or lo
        (which the check after it then refuses)."""
        import bisect

        if self._keys[0] != (self.base + lo, self.base + hi):  # a run of one text's copies
            self._keys = ((self.base + lo, self.base + hi), list(zip(
                self.hashes[lo:hi].to_pylist(), self.doc_ids[lo:hi].to_pylist(), strict=True)))
        at = lo + bisect.bisect_left(self._keys[1], (content_hash, doc_id))
        return at if at < hi else lo

    def drop_before(self, row: int) -> None:
        """Forget the rows before `row` (window-relative): no later occurrence needs them."""
        self.base += row
        self.prefixes = self.prefixes[row:]
        self.hashes = self.hashes[row:]
        self.doc_ids = self.doc_ids[row:]


class _Postings:
    """Each document's occurrence rows (`postings`, by document, then row) and where
    they start (`post_at`, one entry per corpus row and one past the last), from pairs
    (document row, occurrence row) that come by document: a document's rows are sorted
    once all of them have come (they may span batches)."""

    def __init__(self, post_at: IntSpool, postings: IntSpool) -> None:
        import numpy as np

        self._post_at, self._postings = post_at, postings
        self._done = self._seen = 0  # documents whose start is written; postings so far
        self._held = (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64))

    def add(self, docs: np.ndarray, rows: np.ndarray) -> None:
        import numpy as np

        docs = np.concatenate([self._held[0], docs.astype(np.int64)])
        rows = np.concatenate([self._held[1], rows.astype(np.int64)])
        if not len(docs):
            return
        last = int(np.searchsorted(docs, docs[-1], side="left"))  # the last document's
        self._held = (docs[last:], rows[last:])  # may go on in the next batch
        self._write(docs[:last], rows[:last])

    def finish(self, corpus_rows: int) -> None:
        import numpy as np

        self._write(*self._held)
        for lo in range(self._done, corpus_rows + 1, POSTINGS_CHUNK):
            count = min(lo + POSTINGS_CHUNK, corpus_rows + 1) - lo
            self._post_at.add(np.full(count, self._seen, dtype=np.int64))

    def _write(self, docs: np.ndarray, rows: np.ndarray) -> None:
        import numpy as np

        if not len(docs):
            return
        order = np.lexsort((rows, docs))
        docs, rows = docs[order], rows[order]
        top = int(docs[-1]) + 1  # the starts of documents up to the last one are known
        for lo in range(self._done, top, POSTINGS_CHUNK):
            wanted = np.arange(lo, min(lo + POSTINGS_CHUNK, top), dtype=np.int64)
            self._post_at.add(self._seen + np.searchsorted(docs, wanted, side="left"))
        self._done = max(self._done, top)
        self._postings.add(rows)
        self._seen += len(rows)


def _session(folder: Path, threads: int) -> duckdb.DuckDBPyConnection:
    from lineage.store.scratch import spilling_connection

    con = spilling_connection(folder, MEMORY_LIMIT)
    con.execute(f"SET threads = {max(1, int(threads))}")
    con.execute("SET preserve_insertion_order = true")
    return con


def _bases(con: duckdb.DuckDBPyConnection, table: str, parts: Sequence[Path]) -> int:
    """A table `table` of each part's path and its first row's number; the rows in all."""
    import pyarrow as pa

    bases, total = [], 0
    for rows in _row_counts(parts):
        bases.append(total)
        total += rows
    listed = pa.table({"filename": [str(p) for p in parts], "base": bases},
                      schema=pa.schema([("filename", pa.string()), ("base", pa.int64())]))
    con.register(f"{table}_listed", listed)
    con.execute(f"CREATE TEMP TABLE {table} AS SELECT * FROM {table}_listed")
    con.unregister(f"{table}_listed")
    return total


def _row_counts(parts: Sequence[Path]) -> list[int]:
    """Each part's rows, from its footer."""
    import pyarrow.parquet as pq

    return [pq.ParquetFile(part).metadata.num_rows for part in parts]


def _paths(parts: Sequence[Path]) -> str:
    """A list of paths as a SQL literal (a view's definition takes no parameters)."""
    return "[" + ", ".join(sql_text(str(p)) for p in parts) + "]"


def _batches(con: duckdb.DuckDBPyConnection, query: str, params: list[Any],
             ) -> Iterator[pa.RecordBatch]:
    reader = con.sql(query, params=params or None).to_arrow_reader(BATCH_ROWS)
    for batch in reader:
        if batch.num_rows:
            yield batch


def _check_hashes(hashes: pa.Array) -> None:
    import pyarrow.compute as pc

    if hashes.null_count or not pc.all(pc.match_substring_regex(
            hashes, "^[0-9a-f]{64}$")).as_py():
        raise _Unsearchable


def _ascending(values: pa.Array, last: Any) -> Any:
    """Raise _Unsearchable unless `values` ascend (and start at or above `last`, the
    previous batch's last value); this batch's last value."""
    import pyarrow.compute as pc

    if len(values) == 0:
        return last
    if len(values) > 1 and not pc.all(pc.greater_equal(values[1:], values[:-1])).as_py():
        raise _Unsearchable
    first = values[0].as_py()
    if last is not None and first < last:
        raise _Unsearchable
    return values[-1].as_py()
