"""Ready manifests: JSONL or Parquet rows that already carry hashes and token counts.

For corpora too large to re-read, nothing is re-hashed: the rows are loaded as they are
(`doc_id, source, uri, n_bytes, n_tokens, content_hash`, optional `license`) and checked
by the reduce like every other row. Loading happens inside the reduce's DuckDB session,
so a 10M-row manifest is read once, in parallel, without Python touching each row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lineage.errors import InputError
from lineage.ingest.inputs import ShardInput

if TYPE_CHECKING:
    import duckdb

REQUIRED = ("doc_id", "source", "uri", "n_bytes", "n_tokens", "content_hash")

_JSON_COLUMNS = (
    "{doc_id: 'VARCHAR', source: 'VARCHAR', uri: 'VARCHAR', n_bytes: 'BIGINT', "
    "n_tokens: 'BIGINT', content_hash: 'VARCHAR', license: 'VARCHAR'}"
)


def load_manifest(
    con: duckdb.DuckDBPyConnection, shard: ShardInput, *, table: str
) -> None:
    """Append the manifest's rows to `table` (the reduce's staging table)."""
    import duckdb

    path = str(shard.path)
    if shard.kind == "manifest-jsonl":
        source = f"read_json(?, format = 'newline_delimited', columns = {_JSON_COLUMNS})"
        record = "row_number() OVER ()"
        license_expr = "NULLIF(license, '')"
    else:
        present = _parquet_columns(con, path)
        missing = [name for name in REQUIRED if name not in present]
        if missing:
            raise InputError(path, f"manifest lacks column(s): {', '.join(missing)}")
        source = "read_parquet(?, file_row_number = true)"
        record = "file_row_number + 1"
        license_expr = "NULLIF(CAST(license AS VARCHAR), '')" if "license" in present else "NULL"
    sql = f"""
        INSERT INTO {table}
        SELECT CAST(doc_id AS VARCHAR), CAST(source AS VARCHAR), CAST(uri AS VARCHAR),
               CAST(n_bytes AS BIGINT), CAST(n_tokens AS BIGINT),
               CAST(content_hash AS VARCHAR), {license_expr}, NULL,
               ?, {record}, false, NULL, NULL, NULL
        FROM {source}
    """
    try:
        con.execute(sql, [path, path])
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0]
        raise InputError(path, f"cannot be read as a ready manifest ({first})") from exc


def _parquet_columns(con: duckdb.DuckDBPyConnection, path: str) -> set[str]:
    import duckdb

    try:
        rows = con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [path]).fetchall()
    except duckdb.Error as exc:
        raise InputError(path, f"not a readable Parquet file ({str(exc).splitlines()[0]})") from exc
    return {row[0] for row in rows}
