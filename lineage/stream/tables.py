"""Write a stream's two tables: `occurrences` in ordinal order (with the stream's digest)
and `occurrence_hashes`, the same rows in content-hash order.

A canonical stream hands over its occurrences as numpy arrays. Each document gets the
list of its occurrences (one per epoch it was kept in), and the lists are joined to
Parquet the corpus already has, by position, which no hash join or sort beats:

* to the documents (doc_id order), then sorted by ordinal for `occurrences`;
* to the corpus's `document_hashes` (content hash, then doc_id order), which needs no
  sort at all: those rows already are in the index's order.

An imported order (`lineage ingest order`) is written the same way (`write_segments`):
its lists hold each document's occurrences in ordinal order, with their own n_tokens
and doc_offset. A recorded stream (`lineage ingest windows`), and a canonical one
ordered out of core, build a table `ordered` instead, which is sorted twice. The digest
of imported and recorded streams is lineage-occurrences/2 (doc_offset hashed too), a
canonical stream's lineage-occurrences/1 (docs/stream-spec.md §5).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lineage.corpora.digest import LINE_COLUMN, LineHasher
from lineage.errors import StoreError
from lineage.schemas import occurrence_hashes_schema, occurrences_schema
from lineage.store import faults
from lineage.store.base import BaseStore
from lineage.store.parts import (
    LOOKUP_PART_ROWS,
    LOOKUP_ROW_GROUP_ROWS,
    SORTED_INTEGERS,
    Progress,
    WrittenPart,
    discard_parts,
    write_overlapped,
    write_parts,
)
from lineage.stream.order import Placed, content_hash_order
from lineage.stream.spec import OCCURRENCES_SPEC, OCCURRENCES_SPEC_2, digest_columns

if TYPE_CHECKING:
    import duckdb
    import numpy as np
    import pyarrow as pa

    from lineage.store.arrays_rows import StreamColumns
    from lineage.stream.order import IntArray, UIntArray

_FETCH_ROWS = 65_536
# Equal hashes in (doc_id, epoch) order, the order the in-memory path streams them in, so
# both paths write the same bytes; ordinal breaks the ties of recorded segments.
HASH_ORDER = ("('0x' || left(content_hash, 16))::UBIGINT, content_hash, doc_id, epoch, "
               "ordinal")


@dataclass
class StreamTables:
    parts: list[WrittenPart]  # occurrences
    hash_parts: list[WrittenPart]  # occurrence_hashes
    digest: str
    occurrences: int
    columns: StreamColumns | None = None  # the lookup arrays file's, when spooled


@dataclass
class CorpusParts:
    """The corpus's Parquet parts the occurrences are joined to, in table order."""

    documents: list[str]
    document_hashes: list[str]
    hash_words: UIntArray  # each document's content hash as 4 words (rid order)


def write_canonical(
    con: duckdb.DuckDBPyConnection, store: BaseStore, name: str, corpus: str,
    handed: list[Placed], kept: int, corpus_parts: CorpusParts, progress: Progress,
    arrays_folder: Path | None = None,
) -> StreamTables:
    """The first `kept` occurrences of the placed arrays (ordinal order) as the stream's
    tables. `handed` holds the arrays and is emptied, and `corpus_parts.hash_words`
    dropped, as soon as the occurrence lists are built: memory is what bounds a build.
    With `arrays_folder`, the lookup arrays file's columns are spooled there first.

    The content-hash copy needs no sort and is encoded on one core while DuckDB sorts
    the occurrences on both (the two writes: 13.9 s -> 11-13 s at 10M)."""
    import numpy as np

    documents = len(corpus_parts.hash_words)
    placed = handed.pop()
    # A document kept in epoch e was kept in epochs 0..e-1 too, earlier in the stream,
    # so its epoch is its place in the list of its occurrences.
    rid, epoch = placed.rid[:kept], placed.epoch[:kept]
    values = {"ordinal": np.arange(kept, dtype=np.int64), "epoch": epoch,
              "stream_start": placed.stream_start[:kept]}
    by_rid = _occurrence_lists(rid, epoch, values, documents)
    values["n_tokens"] = placed.n_tokens[:kept]
    by_hash = content_hash_order(corpus_parts.hash_words)
    columns = _spooled_columns(arrays_folder, rid, epoch, values, by_hash)
    held = [_hash_lists(rid, epoch, values, corpus_parts.hash_words, by_hash)]
    del placed, rid, epoch, values, by_hash  # held is dropped once written
    corpus_parts.hash_words = np.zeros((0, 4), dtype=np.uint64)
    return _written_with(columns, lambda: _write_lists(
        con, store, name, corpus, by_rid, held, kept, corpus_parts, progress,
        whole_documents=True, occurrences=OCCURRENCES_SPEC))


@dataclass
class Segments:
    """An imported order's occurrences in ordinal order: each one's document (rid) and
    its place among that document's occurrences (`within`: 0, 1, ... in ordinal order),
    with the columns it is stored with."""

    rid: IntArray
    within: IntArray
    epoch: IntArray
    n_tokens: IntArray
    stream_start: IntArray
    doc_offset: IntArray


def write_segments(
    con: duckdb.DuckDBPyConnection, store: BaseStore, name: str, corpus: str,
    handed: list[Segments], corpus_parts: CorpusParts, progress: Progress,
    arrays_folder: Path | None = None,
) -> StreamTables:
    """An imported order's occurrences as the stream's tables, written as a build writes
    its own (`write_canonical`): the rows, and so the bytes, are those a sort of the rows
    by ordinal and by (content hash, doc_id, epoch, ordinal) gives. `handed` is emptied
    and `corpus_parts.hash_words` dropped once the occurrence lists are built; with
    `arrays_folder`, the lookup arrays file's columns are spooled there first."""
    import numpy as np

    documents = len(corpus_parts.hash_words)
    segments = handed.pop()
    kept = len(segments.rid)
    values = {"ordinal": np.arange(kept, dtype=np.int64), "epoch": segments.epoch,
              "stream_start": segments.stream_start, "n_tokens": segments.n_tokens,
              "doc_offset": segments.doc_offset}
    by_rid = _occurrence_lists(segments.rid, segments.within, values, documents)
    by_hash = content_hash_order(corpus_parts.hash_words)
    columns = _spooled_columns(arrays_folder, segments.rid, segments.within, values,
                               by_hash)
    held = [_hash_lists(segments.rid, segments.within, values, corpus_parts.hash_words,
                        by_hash)]
    del segments, values, by_hash
    corpus_parts.hash_words = np.zeros((0, 4), dtype=np.uint64)
    return _written_with(columns, lambda: _write_lists(
        con, store, name, corpus, by_rid, held, kept, corpus_parts, progress,
        whole_documents=False, occurrences=OCCURRENCES_SPEC_2))


def _spooled_columns(folder: Path | None, rid: IntArray, within: IntArray,
                     values: dict[str, IntArray], by_hash: IntArray) -> StreamColumns | None:
    """The stream arrays file's columns (`values` in ordinal order, with n_tokens and,
    for segments, doc_offset), each occurrence's document numbered by its row in
    content-hash order (`by_hash`: rids in that order), spooled in `folder`; `within`:
    each occurrence's place in its document's list."""
    import numpy as np

    from lineage.store.arrays_rows import StreamColumns

    if folder is None:
        return None
    row_of = np.empty(len(by_hash), dtype=np.int64)
    row_of[by_hash] = np.arange(len(by_hash))
    doc = row_of[rid]
    del row_of
    offsets = values.get("doc_offset")
    return StreamColumns(
        folder, stream_start=values["stream_start"], n_tokens=values["n_tokens"],
        epoch=values["epoch"], doc=doc, within=within, corpus_rows=len(by_hash),
        doc_offset=np.zeros(len(rid), dtype=np.int64) if offsets is None else offsets)


def _written_with(columns: StreamColumns | None,
                  write: Callable[[], StreamTables]) -> StreamTables:
    """`write()`'s tables carrying `columns` (discarded if it fails)."""
    try:
        written = write()
    except BaseException:
        if columns is not None:
            columns.discard()
        raise
    written.columns = columns
    return written


def _write_lists(
    con: duckdb.DuckDBPyConnection, store: BaseStore, name: str, corpus: str,
    by_rid: pa.Table, held: list[pa.Table], kept: int, corpus_parts: CorpusParts,
    progress: Progress, *, whole_documents: bool, occurrences: str,
) -> StreamTables:
    """Both tables from the occurrence lists, in rid order (`by_rid`) and in
    `document_hashes` order (`held`, emptied once written). Whole documents take their
    n_tokens from the corpus and start at offset 0; segments carry both in their lists.
    The digest is of spec `occurrences` (/1 for whole documents, /2 for segments)."""
    digest = LineHasher(occurrences, digest_columns(occurrences))
    whole = ("d.n_tokens, ", "0::BIGINT AS doc_offset, ") if whole_documents else ("", "")

    def hash_copy() -> list[WrittenPart]:
        # Streamed from `document_hashes` row by row: no sort. Within one content hash,
        # rows are in (doc_id, epoch) order.
        source = (
            f"(SELECT h.content_hash, h.doc_id, h.source, {whole[1]}"
            "('0x' || left(h.content_hash, 8))::UINTEGER <> p.h32 AS misaligned, "
            "unnest(p.occurrences, recursive := true) "
            "FROM read_parquet(?) h POSITIONAL JOIN placed p)"
        )
        try:
            return _write(con, store, "occurrence_hashes", name, corpus, source=source,
                          params=[corpus_parts.document_hashes], registered=held[0],
                          order=None, digests=[_Aligned(corpus_parts.document_hashes[0])],
                          total=kept, progress=progress, stage="indexing occurrences",
                          checks=["misaligned"])
        finally:
            held.clear()

    def in_order(start_copy: Callable[[], None]) -> list[WrittenPart]:
        start_copy()  # it encodes on one core while DuckDB sorts on both
        source = (f"(SELECT d.doc_id, d.source, {whole[0]}d.content_hash, d.uri, {whole[1]}"
                  "unnest(p.occurrences, recursive := true) "
                  "FROM read_parquet(?) d POSITIONAL JOIN placed p)")
        return _write(con, store, "occurrences", name, corpus, source=source,
                      params=[corpus_parts.documents], registered=by_rid, order="ordinal",
                      digests=[digest], total=kept, progress=progress,
                      stage="writing occurrences")

    parts, hash_parts = write_overlapped(in_order, hash_copy)
    try:
        faults.reach("stream-written")
    except BaseException:
        discard_parts([*parts, *hash_parts])
        raise
    return StreamTables(parts, hash_parts, digest.prefixed(), kept)


def _hash_lists(rid: IntArray, within: IntArray, values: dict[str, IntArray],
                hash_words: UIntArray, order: IntArray) -> pa.Table:
    """The occurrence lists in `document_hashes` order (`order`: the rids in it), with
    the first 4 bytes of each row's hash (the writer checks them against the row it is
    joined to)."""
    import numpy as np
    import pyarrow as pa

    lists = _occurrence_lists(rid, within, values, len(order), order)
    return lists.append_column("h32", pa.array((hash_words[order, 0] >> 32).astype(np.uint32)))


class _Aligned:
    """Fed the hash copy's batches: each row's content hash must begin like the one of
    the document its occurrence list was built for (a guard on `content_hash_order`)."""

    def __init__(self, where: str) -> None:
        self.where = where

    def update(self, batch: Any) -> None:
        import pyarrow.compute as pc

        if batch.num_rows and pc.any(batch.column("misaligned")).as_py():
            raise StoreError(f"{self.where}: the content-hash index does not follow its "
                               "documents; run `lineage store verify`")


def _occurrence_lists(rid: IntArray, within: IntArray, values: dict[str, IntArray],
                      documents: int, row_order: IntArray | None = None) -> pa.Table:
    """One row per document, in `row_order` (rids; default: rid order): the list of its
    occurrences (`values`, one entry per occurrence of `rid`), the entry of an occurrence
    at its place `within` its document's list."""
    import numpy as np
    import pyarrow as pa

    kept = len(rid)
    if row_order is None:
        row = rid
    else:
        position = np.empty(documents, dtype=np.int64)
        position[row_order] = np.arange(documents)
        row = position[rid]
        del position
    offsets = np.zeros(documents + 1, dtype=np.int64)
    np.cumsum(np.bincount(row, minlength=documents), out=offsets[1:])
    slots = offsets[row] + within
    del row
    fields = []
    for column in values.values():
        # 32-bit where the values fit (DuckDB widens them back): these lists are held
        # while DuckDB sorts, and memory is what bounds the build
        spread = np.empty(kept, dtype=_narrowest(column))
        spread[slots] = column
        fields.append(pa.array(spread))
    items = pa.StructArray.from_arrays(fields, names=list(values))
    if kept < 2**31:
        lists = pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), items)
    else:
        lists = pa.LargeListArray.from_arrays(pa.array(offsets), items)
    return pa.table({"occurrences": lists})


def _narrowest(column: IntArray) -> type[np.signedinteger[Any]]:
    import numpy as np

    low, high = (int(column.min()), int(column.max())) if len(column) else (0, 0)
    for kind in (np.int16, np.int32):
        if np.iinfo(kind).min <= low and high <= np.iinfo(kind).max:
            return kind
    return np.int64


def write_occurrences(
    con: duckdb.DuckDBPyConnection, store: BaseStore, name: str, corpus: str, progress: Progress,
    *, digest_spec: str = OCCURRENCES_SPEC,
) -> StreamTables:
    """Table `ordered` (a recorded stream, or a canonical one ordered out of core) as the
    stream's two tables, each a sort; its digest of spec `digest_spec` (a recorded
    stream's is lineage-occurrences/2)."""
    occurrences = int(con.execute("SELECT count(*) FROM ordered").fetchall()[0][0])
    digest = LineHasher(digest_spec, digest_columns(digest_spec))
    parts = _write(con, store, "occurrences", name, corpus, source="ordered", params=[],
                   order="ordinal", digests=[digest], total=occurrences, progress=progress,
                   stage="writing occurrences")
    try:
        hash_parts = _write(con, store, "occurrence_hashes", name, corpus, source="ordered",
                            params=[], order=HASH_ORDER, digests=[], total=occurrences,
                            progress=progress, stage="indexing occurrences")
        faults.reach("stream-written")
    except BaseException:
        discard_parts(parts)
        raise
    return StreamTables(parts, hash_parts, digest.prefixed(), occurrences)


_ROW_COLUMNS = ("ordinal", "doc_id", "source", "epoch", "stream_start", "n_tokens",
                "doc_offset", "content_hash", "uri")


def _write(
    con: duckdb.DuckDBPyConnection, store: BaseStore, table: str, name: str, corpus: str, *,
    source: str, params: list[Any], order: str | None, digests: list[Any], total: int,
    progress: Progress, stage: str, registered: pa.Table | None = None,
    checks: Sequence[str] = (),
) -> list[WrittenPart]:
    """One table from the rows of `source` (sorted by `order` unless None, when they
    already are in the table's order)."""
    with con.cursor() as cursor:
        if registered is not None:
            cursor.register("placed", registered)
        batches = table_rows(cursor, table, name, corpus, source=source, params=params,
                             order=order, digests=digests, checks=checks)
        return write_table(store, table, batches, digests=digests, total=total,
                           progress=progress, stage=stage)


def table_rows(
    cursor: duckdb.DuckDBPyConnection, table: str, name: str, corpus: str, *, source: str,
    params: list[Any], order: str | None, digests: Sequence[Any], checks: Sequence[str] = (),
) -> pa.RecordBatchReader:
    """The rows of `table` from those of `source`, sorted by `order` unless None. A sort
    carries only the columns that vary by row and that the table has, plus the `checks`
    columns the digests read; the constants, `stream_end` and the digest lines are added
    after it (positions widened first: the lists may hold them in 16 or 32 bits)."""
    schema = occurrences_schema() if table == "occurrences" else occurrence_hashes_schema()
    payload = ", ".join([c for c in _ROW_COLUMNS if c in schema.names or c == "n_tokens"]
                        + list(checks))
    lines = "".join(f", {d.sql_line()} AS {LINE_COLUMN}" for d in digests
                    if isinstance(d, LineHasher))
    return cursor.sql(
        f"""
        SELECT *{lines} FROM (
            SELECT ?::VARCHAR AS stream, ?::VARCHAR AS corpus, *,
                   stream_start::BIGINT + n_tokens::BIGINT AS stream_end
            FROM (SELECT {payload} FROM {source}
                  {f"ORDER BY {order}" if order else ""}))
        """,
        params=[name, corpus, *params],
    ).to_arrow_reader(_FETCH_ROWS)


def write_table(store: BaseStore, table: str, batches: Iterable[pa.RecordBatch], *,
                digests: Sequence[Any], total: int, progress: Progress,
                stage: str) -> list[WrittenPart]:
    """`batches` (in the table's order) as the parts of `table`."""
    occurrences = table == "occurrences"
    schema = occurrences_schema() if occurrences else occurrence_hashes_schema()
    # In ordinal order the positions grow with the ordinal: deltas encode them best.
    sorted_integers = ("ordinal", "stream_start", "stream_end") if occurrences else ()
    return write_parts(
        batches, schema=schema, out_dir=store.table_dir(table),
        sorted_by=["ordinal"] if occurrences else ["content_hash"], digests=digests,
        progress=progress, stage=stage, total=total, row_group_rows=LOOKUP_ROW_GROUP_ROWS,
        part_rows=LOOKUP_PART_ROWS,
        range_columns=["stream_start", "stream_end"] if occurrences else ["content_hash"],
        encodings=dict.fromkeys(sorted_integers, SORTED_INTEGERS))
