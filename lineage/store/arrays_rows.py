"""What a corpus's and a stream's lookup arrays files hold (docs/arrays-spec.md), read
from their Parquet parts by DuckDB in batches and written with
lineage/store/arrays_spool.py.

- A corpus file: the rows of `document_hashes` in their order (content hash, then
  doc_id), with each document's uri from `documents`: content_hash, doc_id, source, uri.
  A document's row in this file is its number everywhere else.
- A stream file: the rows of `occurrences` in their order (ordinal), as integers:
  stream_start, stream_end, epoch, doc_offset and doc (the document's row in the corpus
  file); then post_at and postings, each document's occurrence rows in row order
  (document d's are postings[post_at[d]:post_at[d + 1]]).

Rows that a binary search cannot use (a sort column that goes down somewhere, a content
hash that is not 64 lowercase hex, an occurrence whose document is not in the corpus,
ordinals out of order) make no file (None): the lookups read Parquet. Every query orders
by unique keys, so the bytes do not depend on DuckDB's threads or the machine.
"""

from __future__ import annotations

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
)

if TYPE_CHECKING:
    import duckdb
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
    Spooled in `folder`; `write` makes the file, None when the rows cannot be searched."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        self.spools: list[Spool] = [HashSpool("content_hash", folder),
                                    StrSpool("doc_id", folder), DictSpool("source", folder),
                                    StrSpool("uri", folder)]
        self.rows = 0
        self.searchable = True
        self._last: Any = None

    def update(self, batch: pa.RecordBatch) -> None:
        if not self.searchable:
            return
        try:
            hashes = batch.column("content_hash")
            _check_hashes(hashes)
            self._last = _ascending(hashes, self._last)
        except _Unsearchable:
            self.searchable = False
            return
        for spool in self.spools:
            spool.add(batch.column(spool.name))  # type: ignore[attr-defined]
        self.rows += batch.num_rows

    def write(self, temp: Path, folder: Path, corpus: str) -> Written | None:
        if not self.searchable:
            return None
        return assemble(temp, folder, "corpus", self.rows, self.spools,
                        {"corpus": corpus, "sorted_by": ["content_hash"]})

    def close(self) -> None:
        for spool in self.spools:
            spool.close()

    def discard(self) -> None:
        """Close and remove the spools (as large as the file: the disk is freed now)."""
        from lineage.store.durable import remove_quietly

        self.close()
        remove_quietly(self.folder)


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
            POSITIONAL JOIN read_parquet({_literal(uris)}) u"""
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
        TO {_literal(by_doc)} (FORMAT parquet, COMPRESSION zstd)""").fetchall()
    con.execute(f"""
        COPY (SELECT r.row, d.uri, d.doc_id IS NOT DISTINCT FROM r.doc_id AS same
              FROM read_parquet({_paths(doc_parts)}) d POSITIONAL JOIN
                   read_parquet({_literal(by_doc)}) r
              ORDER BY r.row NULLS LAST)
        TO {_literal(uris)} (FORMAT parquet, COMPRESSION zstd)""").fetchall()
    by_doc.unlink()
    return uris


def stream_file(temp: Path, folder: Path, stream: str, occurrence_parts: Sequence[Path],
                corpus: str, corpus_blake3: str, hash_parts: Sequence[Path], *,
                threads: int = 2) -> Written | None:
    """A stream's arrays file from its `occurrences` parts, its documents numbered by
    their rows in the corpus file (`corpus_blake3`) made from `hash_parts`."""
    by_name = {name: IntSpool(name, folder) for name in (
        "stream_start", "stream_end", "epoch", "doc_offset", "doc", "post_at", "postings")}
    spools: list[Spool] = list(by_name.values())
    con = _session(folder, threads)
    try:
        corpus_rows = _bases(con, "hash_parts", hash_parts)
        _bases(con, "occurrence_parts", occurrence_parts)
        con.execute(f"""
            CREATE TEMP VIEW doc_rows AS SELECT h.doc_id, b.base + h.file_row_number AS doc
            FROM read_parquet({_paths(hash_parts)}, filename = true, file_row_number = true) h
            JOIN hash_parts b ON b.filename = h.filename""")
        con.execute(f"""
            CREATE TEMP VIEW occurrence_rows AS SELECT o.*, b.base + o.file_row_number AS row
            FROM read_parquet({_paths(occurrence_parts)}, filename = true,
                              file_row_number = true) o
            JOIN occurrence_parts b ON b.filename = o.filename""")
        rows = _occurrences(con, by_name)
        _postings(con, by_name["post_at"], by_name["postings"], corpus_rows)
        return assemble(temp, folder, "stream", rows, spools, {
            "stream": stream, "corpus": corpus, "corpus_rows": corpus_rows,
            "corpus_blake3": corpus_blake3, "sorted_by": ["stream_start", "stream_end"]})
    except _Unsearchable:
        return None
    finally:
        con.close()
        for spool in spools:
            spool.close()


def _occurrences(con: duckdb.DuckDBPyConnection, spools: dict[str, IntSpool]) -> int:
    """The integer columns in row (ordinal) order; the rows written."""
    query = """
        SELECT o.stream_start, o.stream_end, o.epoch, o.doc_offset, d.doc, o.ordinal
        FROM occurrence_rows o LEFT JOIN doc_rows d ON d.doc_id = o.doc_id
        ORDER BY o.row"""
    lasts: dict[str, Any] = {"stream_start": None, "stream_end": None, "ordinal": None}
    rows = 0
    for batch in _batches(con, query, []):
        if batch.column(4).null_count:
            raise _Unsearchable  # an occurrence of a document the corpus does not hold
        for name in lasts:
            lasts[name] = _ascending(batch.column(name), lasts[name])
        for name in ("stream_start", "stream_end", "epoch", "doc_offset", "doc"):
            spools[name].add(batch.column(name).to_numpy())
        rows += batch.num_rows
    return rows


def _postings(con: duckdb.DuckDBPyConnection, post_at: IntSpool, postings: IntSpool,
              corpus_rows: int) -> None:
    """Each document's occurrence rows (`postings`, by document, then row) and where
    they start (`post_at`, one entry per corpus row and one past the last)."""
    import numpy as np

    query = """
        SELECT d.doc, o.row FROM occurrence_rows o JOIN doc_rows d ON d.doc_id = o.doc_id
        ORDER BY d.doc, o.row"""
    done, seen = 0, 0  # documents whose start is written; postings so far
    for batch in _batches(con, query, []):
        docs = batch.column(0).to_numpy()
        top = int(docs[-1]) + 1  # the starts of documents up to the batch's last are known
        for lo in range(done, top, POSTINGS_CHUNK):
            wanted = np.arange(lo, min(lo + POSTINGS_CHUNK, top), dtype=np.int64)
            post_at.add(seen + np.searchsorted(docs, wanted, side="left"))
        done = max(done, top)
        postings.add(batch.column(1).to_numpy())
        seen += batch.num_rows
    for lo in range(done, corpus_rows + 1, POSTINGS_CHUNK):
        count = min(lo + POSTINGS_CHUNK, corpus_rows + 1) - lo
        post_at.add(np.full(count, seen, dtype=np.int64))


def _session(folder: Path, threads: int) -> duckdb.DuckDBPyConnection:
    import duckdb

    con = duckdb.connect(":memory:")
    con.execute(f"SET threads = {max(1, int(threads))}")
    con.execute("SET memory_limit = ?", [MEMORY_LIMIT])
    con.execute("SET temp_directory = ?", [str(folder / "spill")])
    con.execute("SET preserve_insertion_order = true")
    return con


def _bases(con: duckdb.DuckDBPyConnection, table: str, parts: Sequence[Path]) -> int:
    """A table `table` of each part's path and its first row's number; the rows in all."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    bases, total = [], 0
    for part in parts:
        bases.append(total)
        total += pq.ParquetFile(part).metadata.num_rows
    listed = pa.table({"filename": [str(p) for p in parts], "base": bases},
                      schema=pa.schema([("filename", pa.string()), ("base", pa.int64())]))
    con.register(f"{table}_listed", listed)
    con.execute(f"CREATE TEMP TABLE {table} AS SELECT * FROM {table}_listed")
    con.unregister(f"{table}_listed")
    return total


def _paths(parts: Sequence[Path]) -> str:
    """A list of paths as a SQL literal (a view's definition takes no parameters)."""
    return "[" + ", ".join(_literal(p) for p in parts) + "]"


def _literal(path: Path) -> str:
    """A path as a SQL string literal."""
    return "'" + str(path).replace("'", "''") + "'"


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
