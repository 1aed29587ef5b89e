"""Read a document's bytes again from where it was ingested, and check them.

Corpora ingested with text keep, per document, the input file (`origin`) and the 1-based
record or row inside it (`record`, NULL for a whole file). The bytes read back must
still hash to the document's content hash; a changed file is an error, never an answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import blake3

from lineage.errors import StoreError


def read_document(con: Any, origin: str, record: int | None) -> bytes:
    """The exact bytes ingested for one document (a whole file, or one record's text)."""
    if record is None:
        try:
            return Path(origin).read_bytes()
        except OSError as exc:
            raise StoreError(f"{origin}: cannot read the document ({exc.strerror})") from exc
    if origin.lower().endswith(".parquet"):
        sql = ("SELECT CAST(text AS VARCHAR) FROM read_parquet(?, file_row_number = true) "
               "WHERE file_row_number = ?")
        wanted = record - 1
    else:
        sql = ("SELECT text FROM (SELECT text, row_number() OVER () AS n FROM read_json(?, "
               "format = 'newline_delimited', columns = {text: 'VARCHAR'})) WHERE n = ?")
        wanted = record
    try:
        row = con.execute(sql, [origin, wanted]).fetchone()
    except Exception as exc:  # duckdb.Error, without importing duckdb here
        raise StoreError(f"{origin}: cannot read record {record} ({exc})") from exc
    if row is None:
        raise StoreError(f"{origin}: record {record} is gone (the shard changed after ingest)")
    return str(row[0]).encode("utf-8")


def read_checked(con: Any, doc_id: str, content_hash: str, origin: str | None,
                 record: int | None) -> bytes:
    """`read_document`, then the bytes must hash to `content_hash`."""
    if origin is None:
        raise StoreError(f"document {doc_id!r} was ingested from a ready manifest: "
                         "its text is not available")
    data = read_document(con, origin, record)
    if blake3.blake3(data).hexdigest() != content_hash:
        where = origin if record is None else f"{origin} record {record}"
        raise StoreError(f"{where}: bytes of {doc_id!r} no longer match their content hash "
                         "(the file changed after ingest)")
    return data
