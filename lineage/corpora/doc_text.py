"""Read a document's bytes again from where it was ingested, and check them.

Corpora ingested with text keep, per document, the input file (`origin`) and the 1-based
record or row inside it (`record`, NULL for a whole file). The bytes read back must
still hash to the document's content hash; a changed file is an error, never an answer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import blake3

from lineage.errors import StoreError


def read_document(con: Any, origin: str, record: int | None,
                  byte_offset: int | None = None) -> bytes:
    """The exact bytes ingested for one document (a whole file, or one record's text).

    A record of a plain JSONL shard with a known `byte_offset` is one seek and one line;
    a Parquet row reads one row group; other records (compressed JSONL) scan the shard.
    """
    try:
        if record is None:
            return Path(origin).read_bytes()
        if byte_offset is not None:
            return _jsonl_line_text(origin, byte_offset).encode("utf-8")
        if origin.lower().endswith(".parquet"):
            return _parquet_row_text(origin, record - 1).encode("utf-8")
    except OSError as exc:
        raise StoreError(f"{origin}: cannot read the document ({exc.strerror or exc})") from exc
    sql = ("SELECT text FROM (SELECT text, row_number() OVER () AS n FROM read_json(?, "
           "format = 'newline_delimited', columns = {text: 'VARCHAR'})) WHERE n = ?")
    try:
        row = con.execute(sql, [origin, record]).fetchone()
    except Exception as exc:  # duckdb.Error, without importing duckdb here
        raise StoreError(f"{origin}: cannot read record {record} ({exc})") from exc
    if row is None:
        raise StoreError(f"{origin}: record {record} is gone (the shard changed after ingest)")
    return str(row[0]).encode("utf-8")


def _jsonl_line_text(origin: str, byte_offset: int) -> str:
    with open(origin, "rb") as handle:
        handle.seek(byte_offset)
        line = handle.readline()
    try:
        value = json.loads(line)
        return str(value["text"])
    except (ValueError, KeyError, TypeError) as exc:
        raise StoreError(f"{origin}: no record at byte {byte_offset} (the shard changed "
                         "after ingest)") from exc


def _parquet_row_text(origin: str, row: int) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    changed = f"{origin}: row {row + 1} is gone (the shard changed after ingest)"
    try:
        shard = pq.ParquetFile(origin)
        if "text" not in shard.schema_arrow.names:
            raise StoreError(changed)
        left = row
        for group in range(shard.num_row_groups):
            rows = shard.metadata.row_group(group).num_rows
            if left < rows:
                value = shard.read_row_group(group, columns=["text"]).column(0)[left]
                return str(value.as_py())
            left -= rows
    except (pa.ArrowException, ValueError) as exc:
        raise StoreError(f"{changed}: {exc}") from exc
    raise StoreError(changed)


def read_checked(con: Any, doc_id: str, content_hash: str, origin: str | None,
                 record: int | None, byte_offset: int | None = None) -> bytes:
    """`read_document`, then the bytes must hash to `content_hash`."""
    if origin is None:
        raise StoreError(f"document {doc_id!r} was ingested from a ready manifest: "
                         "its text is not available")
    data = read_document(con, origin, record, byte_offset)
    if blake3.blake3(data).hexdigest() != content_hash:
        where = origin if record is None else f"{origin} record {record}"
        raise StoreError(f"{where}: bytes of {doc_id!r} no longer match their content hash "
                         "(the file changed after ingest)")
    return data
