"""Read a document's bytes again from where it was ingested, and check them.

Corpora ingested with text keep, per document, the input file (`origin`) and the 1-based
record or row inside it (`record`, NULL for a whole file). The bytes read back must
still hash to the document's content hash; a changed file is an error, never an answer.
"""

from __future__ import annotations

import bisect
import json
from collections import defaultdict
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import blake3

from lineage.errors import StoreError

if TYPE_CHECKING:
    import duckdb

    from lineage.store.base import BaseStore


@dataclass(frozen=True)
class StoredDocument:
    """Where a document's bytes were ingested from, and the hash they must have."""

    doc_id: str
    content_hash: str
    origin: str | None
    record: int | None  # 1-based record or row in `origin`; None: the whole file
    byte_offset: int | None = None  # where a plain JSONL record's line starts


def document_texts(store: BaseStore, corpus: str, doc_ids: Collection[str]) -> dict[str, bytes]:
    """The exact bytes of the named documents of `corpus`, by doc_id, each checked against
    its content hash; a doc_id the corpus lacks is left out."""
    with store.reader(views=False) as con:
        return read_all_checked(con, document_locations(con, store, corpus, doc_ids).values())


def document_locations(con: duckdb.DuckDBPyConnection, store: BaseStore, corpus: str,
                       doc_ids: Collection[str]) -> dict[str, StoredDocument]:
    """Where the named documents of `corpus` were ingested from, by doc_id: from the row
    groups of the documents table that hold them, and a JSONL record's line from the text
    index's (when the corpus has one); a doc_id the corpus lacks is left out."""
    from lineage.store.part_read import rows_by_doc_id

    rows = rows_by_doc_id(con, store, "documents", corpus, doc_ids,
                          ("content_hash", "origin", "record"))
    lines = rows_by_doc_id(con, store, "text_documents", corpus,
                           [doc_id for doc_id, row in rows.items() if row["record"]],
                           ("origin", "record", "byte_offset"))
    return {doc_id: StoredDocument(doc_id, row["content_hash"], row["origin"], row["record"],
                                   _line_start(row, lines.get(doc_id)))
            for doc_id, row in rows.items()}


def _line_start(document: dict[str, Any], text_row: dict[str, Any] | None) -> int | None:
    """Where the text index says the document's record starts, if it names the same one."""
    if text_row is None or (text_row["origin"], text_row["record"]) != \
            (document["origin"], document["record"]):
        return None
    return cast(int | None, text_row["byte_offset"])


def needs_scan(document: StoredDocument) -> bool:
    """Whether reading the document scans its whole shard: a JSONL record whose line start
    is not recorded (a compressed shard, or a corpus without the text index)."""
    return (document.record is not None and document.byte_offset is None
            and not str(document.origin).lower().endswith(".parquet"))


def read_checked(con: Any, doc_id: str, content_hash: str, origin: str | None,
                 record: int | None, byte_offset: int | None = None) -> bytes:
    """One document's exact bytes, which must hash to `content_hash`."""
    return read_all_checked(con, [StoredDocument(doc_id, content_hash, origin, record,
                                                 byte_offset)])[doc_id]


def read_all_checked(con: Any, documents: Iterable[StoredDocument]) -> dict[str, bytes]:
    """The exact bytes of each document, by doc_id, each checked against its content hash.

    Documents are read file by file, each file opened once: a record of a plain JSONL
    shard with a known `byte_offset` is one seek and one line, the rows of a Parquet
    shard read each of their row groups once, and other records (compressed JSONL) one
    scan of the shard for all of them. A step of a 1M-document JSONL corpus had scanned
    its shard once per document: 100 s."""
    by_origin: dict[str, list[StoredDocument]] = defaultdict(list)
    for document in documents:
        if document.origin is None:
            raise StoreError(f"document {document.doc_id!r} was ingested from a ready "
                             "manifest: its text is not available")
        by_origin[document.origin].append(document)
    found: dict[str, bytes] = {}
    for origin, held in by_origin.items():
        for document, data in zip(held, _read_from(con, origin, held), strict=True):
            if blake3.blake3(data).hexdigest() != document.content_hash:
                where = origin if document.record is None else f"{origin} record {document.record}"
                raise StoreError(f"{where}: bytes of {document.doc_id!r} no longer match their "
                                 "content hash (the file changed after ingest)")
            found[document.doc_id] = data
    return found


def _read_from(con: Any, origin: str, documents: list[StoredDocument]) -> list[bytes]:
    """The bytes ingested for `documents`, all read from the file `origin`, in order."""
    found: dict[int, bytes] = {}  # by position in `documents`
    whole = [i for i, d in enumerate(documents) if d.record is None]
    seek = [i for i, d in enumerate(documents) if d.record is not None
            and d.byte_offset is not None]
    scan = [i for i, d in enumerate(documents) if needs_scan(d)]
    taken = set(whole) | set(seek) | set(scan)
    rows = [i for i in range(len(documents)) if i not in taken]  # of a Parquet shard
    try:
        if whole:
            data = Path(origin).read_bytes()
            found.update((i, data) for i in whole)
        if seek:
            offsets = [cast(int, documents[i].byte_offset) for i in seek]
            found.update((i, text.encode("utf-8"))
                         for i, text in zip(seek, _jsonl_lines_text(origin, offsets), strict=True))
        if rows:
            numbers = [cast(int, documents[i].record) - 1 for i in rows]
            found.update((i, text.encode("utf-8")) for i, text in
                         zip(rows, _parquet_rows_text(origin, numbers), strict=True))
    except OSError as exc:
        raise StoreError(f"{origin}: cannot read the document ({exc.strerror or exc})") from exc
    if scan:
        records = [cast(int, documents[i].record) for i in scan]
        found.update((i, text.encode("utf-8")) for i, text in
                     zip(scan, _jsonl_records_text(con, origin, records), strict=True))
    return [found[i] for i in range(len(documents))]


def _jsonl_records_text(con: Any, origin: str, records: list[int]) -> list[str]:
    """Records of a JSONL shard by number (1-based), in one scan of the shard."""
    wanted = sorted(set(records))
    sql = ("SELECT n, text FROM (SELECT text, row_number() OVER () AS n FROM read_json(?, "
           "format = 'newline_delimited', columns = {text: 'VARCHAR'})) "
           f"WHERE n IN ({', '.join(str(int(n)) for n in wanted)})")
    try:
        texts = dict(con.execute(sql, [origin]).fetchall())
    except Exception as exc:  # duckdb.Error, without importing duckdb here
        raise StoreError(f"{origin}: cannot read records ({exc})") from exc
    for record in wanted:
        if record not in texts:
            raise StoreError(f"{origin}: record {record} is gone (the shard changed after "
                             "ingest)")
    return [str(texts[record]) for record in records]


def _jsonl_lines_text(origin: str, byte_offsets: list[int]) -> list[str]:
    texts = []
    with open(origin, "rb") as handle:
        for byte_offset in byte_offsets:
            handle.seek(byte_offset)
            line = handle.readline()
            try:
                value = json.loads(line)
                texts.append(str(value["text"]))
            except (ValueError, KeyError, TypeError) as exc:
                raise StoreError(f"{origin}: no record at byte {byte_offset} (the shard "
                                 "changed after ingest)") from exc
    return texts


def _parquet_rows_text(origin: str, rows: list[int]) -> list[str]:
    """The `text` of rows of a Parquet shard (0-based), each row group read once."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from lineage.store.part_read import row_group_starts

    try:
        shard = pq.ParquetFile(origin)
        starts = row_group_starts(shard.metadata)
        gone = [row for row in rows if not 0 <= row < starts[-1]]
        if gone or "text" not in shard.schema_arrow.names:
            row = gone[0] if gone else rows[0]
            raise StoreError(f"{origin}: row {row + 1} is gone (the shard changed after "
                             "ingest)")
        groups = {bisect.bisect_right(starts, row) - 1 for row in rows}
        texts: dict[int, str] = {}
        for group in sorted(groups):
            column = shard.read_row_group(group, columns=["text"]).column(0)
            for row in rows:
                if starts[group] <= row < starts[group + 1]:
                    texts[row] = str(column[row - starts[group]].as_py())
    except (pa.ArrowException, ValueError) as exc:
        raise StoreError(f"{origin}: row {rows[0] + 1} is gone (the shard changed after "
                         f"ingest): {exc}") from exc
    return [texts[row] for row in rows]
