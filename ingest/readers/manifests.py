"""Ready manifests: JSONL or Parquet rows that already carry hashes and token counts.

For corpora too large to re-read, nothing is re-hashed: the rows are loaded as they are
(`doc_id, source, uri, n_bytes, n_tokens, content_hash`, optional `license`) and checked
by the reduce like every other row. Loading happens inside the reduce's DuckDB session,
so a 10M-row Parquet manifest is read once, in parallel, without Python touching each
row; its column types are checked from the schema, and a JSONL manifest's field types
by DuckDB reading them as JSON first (ingest/value_rules.py), because reading them as
BIGINT would coerce "5" and 5.0 into counts.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from lineage.errors import InputError
from lineage.ingest.input_rules import check_unchanged, stat_of
from lineage.ingest.inputs import ShardInput
from lineage.ingest.value_rules import (
    COUNT,
    STRING,
    check_jsonl_columns,
    check_parquet_types,
)
from lineage.store.base import sql_text

if TYPE_CHECKING:
    import duckdb

REQUIRED = ("doc_id", "source", "uri", "n_bytes", "n_tokens", "content_hash")

FIELDS = {"doc_id": STRING, "source": STRING, "uri": STRING, "n_bytes": COUNT,
          "n_tokens": COUNT, "content_hash": STRING, "license": STRING}

_JSON_COLUMNS = (
    "{doc_id: 'VARCHAR', source: 'VARCHAR', uri: 'VARCHAR', n_bytes: 'BIGINT', "
    "n_tokens: 'BIGINT', content_hash: 'VARCHAR', license: 'VARCHAR'}"
)


def load_manifests(con: duckdb.DuckDBPyConnection, shards: list[ShardInput], *,
                   table: str) -> None:
    """Append every manifest's rows to `table` (the reduce's staging table): JSONL ones
    file by file, all Parquet ones in one statement after checking each file's columns
    (DuckDB then reads them in parallel: 10M rows in 16 files took 2.1 s instead of
    4.5 s file by file). When that statement fails, the files are loaded one by one
    into a scratch copy of the table, so the error names the file at fault. A file
    changed between its check and its load is refused (changed-while-read)."""
    read = stat_manifests(shards)
    for shard in shards:
        if shard.kind == "manifest-jsonl":
            check_jsonl_columns(con, shard.path, FIELDS)
            _insert(con, table, [str(shard.path)], jsonl=True, license_column=True)
    parquet = [str(s.path) for s in shards if s.kind != "manifest-jsonl"]
    if parquet:
        _load_parquet(con, parquet, table)
    check_manifests_unchanged(read)


def _load_parquet(con: duckdb.DuckDBPyConnection, parquet: list[str], table: str) -> None:
    with_license = [_checked_parquet_columns(con, path) for path in parquet]
    try:
        _insert(con, table, parquet, jsonl=False, license_column=any(with_license))
    except InputError:
        if len(parquet) == 1:
            raise
        con.execute(f"CREATE TEMP TABLE manifest_check AS SELECT * FROM {table} LIMIT 0")
        for path, license_column in zip(parquet, with_license, strict=True):
            _insert(con, "manifest_check", [path], jsonl=False, license_column=license_column)
        raise


ManifestStats = list[tuple[Path, os.stat_result]]


def stat_manifests(shards: list[ShardInput]) -> ManifestStats:
    """Each manifest's size, mtime and inode before it is first read."""
    return [(shard.path, stat_of(shard.path)) for shard in shards]


def check_manifests_unchanged(read: ManifestStats) -> None:
    """Refuse (changed-while-read, naming the file) a manifest replaced or rewritten
    since `stat_manifests`: rows read by different passes would mix two contents."""
    for path, before in read:
        check_unchanged(path, before)


def view_parquet_manifests(con: duckdb.DuckDBPyConnection, shards: list[ShardInput], *,
                           view: str) -> ManifestStats:
    """Parquet manifests as view `view`, with the columns of the reduce's staging table:
    read in place by every pass over them, where loading them into that table cost a
    10M-row ingest 14 s (DuckDB compressing the rows it keeps on disk), about as much as
    all the passes save by reading a table. Each file's columns are checked first, as a
    load checks them; a value no cast takes fails the first pass (`load_manifests`
    then names the file). Returns the files' stats before their first read: every pass
    reads them again, so the caller checks them after the last one
    (`check_manifests_unchanged`)."""
    read = stat_manifests(shards)
    paths = [str(shard.path) for shard in shards]
    with_license = [_checked_parquet_columns(con, path) for path in paths]
    listed = ", ".join(sql_text(path) for path in paths)
    con.execute(f"CREATE VIEW {view} AS " + _select(
        f"read_parquet([{listed}], filename = true, file_row_number = true, "
        "union_by_name = true)", "filename", "file_row_number + 1", any(with_license)))
    return read


def _select(source: str, origin: str, record: str, license_column: bool) -> str:
    """The staging table's columns from a manifest reader's rows."""
    license_expr = "NULLIF(CAST(license AS VARCHAR), '')" if license_column else "NULL"
    return f"""
        SELECT CAST(doc_id AS VARCHAR) AS doc_id, CAST(source AS VARCHAR) AS source,
               CAST(uri AS VARCHAR) AS uri, CAST(n_bytes AS BIGINT) AS n_bytes,
               CAST(n_tokens AS BIGINT) AS n_tokens,
               CAST(content_hash AS VARCHAR) AS content_hash, {license_expr} AS license,
               NULL::VARCHAR AS metadata, {origin} AS origin, {record} AS record,
               false AS has_text, NULL::VARCHAR AS text_hash, NULL::BIGINT AS n_words,
               NULL::BIGINT AS byte_offset
        FROM {source}
    """


def _insert(con: duckdb.DuckDBPyConnection, table: str, paths: list[str], *, jsonl: bool,
            license_column: bool) -> None:
    """One INSERT of the rows of `paths`, with their file and 1-based record numbers."""
    import duckdb

    if jsonl:
        source = f"read_json(?, format = 'newline_delimited', columns = {_JSON_COLUMNS})"
        origin, record = "?", "row_number() OVER ()"
        params: list[object] = [paths[0], paths[0]]
    else:
        source = ("read_parquet(?, filename = true, file_row_number = true, "
                  "union_by_name = true)")
        origin, record = "filename", "file_row_number + 1"
        params = [paths]
    sql = f"INSERT INTO {table} {_select(source, origin, record, license_column)}"
    try:
        con.execute(sql, params)
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0]
        raise InputError(paths[0], f"cannot be read as a ready manifest ({first})") from exc


def _checked_parquet_columns(con: duckdb.DuckDBPyConnection, path: str) -> bool:
    """Raise for a Parquet manifest without a required column; whether it has `license`."""
    present = _parquet_columns(con, path)
    check_parquet_types(Path(path), FIELDS)
    missing = [name for name in REQUIRED if name not in present]
    if missing:
        raise InputError(path, f"manifest lacks column(s): {', '.join(missing)}")
    return "license" in present


def _parquet_columns(con: duckdb.DuckDBPyConnection, path: str) -> set[str]:
    import duckdb

    try:
        rows = con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [path]).fetchall()
    except duckdb.Error as exc:
        raise InputError(path, f"not a readable Parquet file ({str(exc).splitlines()[0]})") from exc
    return {row[0] for row in rows}
