"""One ORDER BY over a table, run as several sorts of key ranges, one after another.

A single ORDER BY of a 100M-row table holds every row's sort keys and payload at once:
beyond the memory limit DuckDB spills them, uncompressed, to its temp directory (a
10M-row reduce spilled several bytes for each byte of the manifest). Sorting the rows of
one key range at a time keeps each sort within memory; the ranges, taken in key order,
give exactly the rows of the global sort in its order.

The rows are dealt into their ranges in one pass over the table (a Parquet file for each
range, in a scratch folder, zstd at level 1: the default level cost a 10M-row ingest
about 8 s of its 66, for a file 6% smaller): a range read by filtering the whole table would
cost a scan of the table per range, which grows as the square of the corpus (a 100M-row
reduce scanned its table 100 times). Each range's file is deleted once it is sorted.

The stream is cut again into batches of `batch_rows` rows, as one query's reader cuts
them, so what is written from it (row groups, parts, digests) does not depend on where
the ranges fall. The bounds come from a sample of the keys, which only decides how even
the ranges are, never what is written.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lineage.store.base import sql_text

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

# Rows sorted at once: a reduce row is a few hundred bytes in DuckDB's sort, so two sorts
# of this many (the documents' and the content-hash index's overlap) fit the 2 GB budget.
RANGE_ROWS = 2_000_000
BATCH_ROWS = 65_536
_SAMPLES_PER_RANGE = 256
_SAMPLE_SEED = 33
# Small row groups in the scratch files: the partitioned write buffers one per range.
_SCRATCH_ROW_GROUP = 16_384
_RANGE_COLUMN = "lineage_range"


def sorted_by_ranges(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    params: Sequence[Any],
    key: str,
    total: int,
    *,
    scratch: Path,
    key_type: str = "VARCHAR",
    table: str = "docs",
    columns: str = "*",
    range_rows: int | None = None,
    batch_rows: int = BATCH_ROWS,
    after_first: Callable[[], None] | None = None,
) -> pa.RecordBatchReader:
    """The rows of `sql` (which reads `{rows}`, a relation with `columns` of `table`, and
    ends ORDER BY `key`, ...) as one reader. `key` must not be NULL on any row of `table`;
    `scratch` is a folder of this sort's own (made, then deleted); `after_first` is called
    once the first range is sorted."""
    import pyarrow as pa

    bounds = range_bounds(con, key, total, table=table,
                          range_rows=range_rows or RANGE_ROWS)
    if not bounds:  # one range: the table as it is
        readers: Iterator[pa.RecordBatchReader] = iter([_reader(
            con, sql.replace("{rows}", f"(SELECT {columns} FROM {table})"), params)])
    else:
        _deal(con, table, columns, key, key_type, bounds, scratch)
        readers = _range_readers(con, sql, params, len(bounds) + 1, scratch)
    first = next(readers)
    if after_first is not None:
        after_first()
    return pa.RecordBatchReader.from_batches(
        first.schema, rebatched(_chain(first, readers), batch_rows))


def range_bounds(con: duckdb.DuckDBPyConnection, key: str, total: int, *, table: str,
                 range_rows: int) -> list[Any]:
    """Ascending distinct keys cutting `table` into ranges of about `range_rows` rows."""
    ranges = -(-total // range_rows)
    if ranges <= 1:
        return []
    samples = min(total, ranges * _SAMPLES_PER_RANGE)
    keys = sorted(row[0] for row in con.execute(
        f"SELECT {key} FROM {table} USING SAMPLE reservoir({int(samples)} ROWS) "
        f"REPEATABLE ({_SAMPLE_SEED})").fetchall())
    picked = (keys[len(keys) * i // ranges] for i in range(1, ranges))
    return sorted(set(picked))


def _deal(con: duckdb.DuckDBPyConnection, table: str, columns: str, key: str,
          key_type: str, bounds: list[Any], scratch: Path) -> None:
    """Every row of `table` into the file of its range, in one pass: range k holds the
    keys in [bounds[k-1], bounds[k]), found by a binary search written as nested CASEs."""
    values: list[Any] = []

    def search(lo: int, hi: int) -> str:  # ranges lo..hi; bounds[mid] parts them
        if lo == hi:
            return str(lo)
        mid = (lo + hi) // 2
        values.append(bounds[mid])
        return (f"CASE WHEN {key} < ?::{key_type} THEN {search(lo, mid)} "
                f"ELSE {search(mid + 1, hi)} END")

    which = search(0, len(bounds))
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    con.cursor().execute(
        f"COPY (SELECT {columns}, {which} AS {_RANGE_COLUMN} FROM {table}) TO "
        f"{sql_text(str(scratch))} (FORMAT parquet, PARTITION_BY ({_RANGE_COLUMN}), "
        f"ROW_GROUP_SIZE {_SCRATCH_ROW_GROUP}, COMPRESSION zstd, COMPRESSION_LEVEL 1)", values)


def _range_readers(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any],
                   ranges: int, scratch: Path) -> Iterator[pa.RecordBatchReader]:
    """A reader for each range in key order, each range's file deleted once read (an
    empty range has no file)."""
    try:
        for k in range(ranges):
            folder = scratch / f"{_RANGE_COLUMN}={k}"
            files = sorted(str(p) for p in folder.glob("*.parquet"))
            if not files:
                continue
            listed = ", ".join(sql_text(str(f)) for f in files)
            rows = f"read_parquet([{listed}], hive_partitioning = false)"
            reader = _reader(con, sql.replace("{rows}", rows), params)
            yield reader
            shutil.rmtree(folder, ignore_errors=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _reader(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any]
            ) -> pa.RecordBatchReader:
    # a fresh cursor for each: no pending result of another query in the way
    return con.cursor().sql(sql, params=list(params)).to_arrow_reader(BATCH_ROWS)


def _chain(first: pa.RecordBatchReader,
           rest: Iterator[pa.RecordBatchReader]) -> Iterator[pa.RecordBatch]:
    yield from first
    for reader in rest:
        yield from reader


def rebatched(batches: Iterator[pa.RecordBatch], rows: int) -> Iterator[pa.RecordBatch]:
    """The same rows in batches of exactly `rows` (the last one shorter), none empty."""
    import pyarrow as pa

    pending: list[pa.RecordBatch] = []
    held = 0
    for batch in batches:
        while batch.num_rows:
            take = min(rows - held, batch.num_rows)
            pending.append(batch.slice(0, take))
            held += take
            batch = batch.slice(take)
            if held == rows:
                yield _joined(pending, pa)
                pending, held = [], 0
    if held:
        yield _joined(pending, pa)


def _joined(pieces: list[pa.RecordBatch], pa: Any) -> pa.RecordBatch:
    if len(pieces) == 1:
        return pieces[0]
    return pa.Table.from_batches(pieces).combine_chunks().to_batches()[0]
