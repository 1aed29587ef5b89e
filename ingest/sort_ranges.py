"""One ORDER BY over a table, run as several sorts of key ranges, one after another.

A single ORDER BY of a 100M-row table holds every row's sort keys and payload at once:
beyond the memory limit DuckDB spills them, uncompressed, to its temp directory (a
10M-row reduce spilled several bytes for each byte of the manifest). Sorting the rows of
one key range at a time keeps each sort within memory and the scratch space at zero;
the ranges, taken in key order, give exactly the rows of the global sort in its order.
The stream is cut again into batches of `batch_rows` rows, as one query's reader cuts
them, so what is written from it (row groups, parts, digests) does not depend on where
the ranges fall. The bounds come from a sample of the keys, which only decides how even
the ranges are, never what is written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

# Rows sorted at once: a reduce row is a few hundred bytes in DuckDB's sort, so two sorts
# of this many (the documents' and the content-hash index's overlap) fit the 2 GB budget.
RANGE_ROWS = 2_000_000
BATCH_ROWS = 65_536
_SAMPLES_PER_RANGE = 256
_SAMPLE_SEED = 33


def sorted_by_ranges(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    params: Sequence[Any],
    key: str,
    total: int,
    *,
    key_type: str = "VARCHAR",
    table: str = "docs",
    range_rows: int | None = None,
    batch_rows: int = BATCH_ROWS,
    after_first: Callable[[], None] | None = None,
) -> pa.RecordBatchReader:
    """The rows of `sql` (whose WHERE holds `{range}`, and which ends ORDER BY `key`, ...)
    as one reader. `key` must not be NULL on any row of `table`; `after_first` is called
    once the first range is sorted."""
    import pyarrow as pa

    bounds = range_bounds(con, key, total, table=table,
                          range_rows=range_rows or RANGE_ROWS)
    readers = _range_readers(con, sql, params, key, key_type, bounds)
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


def _range_readers(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any],
                   key: str, key_type: str, bounds: list[Any]
                   ) -> Iterator[pa.RecordBatchReader]:
    """A reader for each range in key order: [-inf, b1), [b1, b2), ..., [bn, inf)."""
    edges: list[Any] = [None, *bounds, None]
    for low, high in zip(edges, edges[1:], strict=False):
        where, values = [], []
        if low is not None:
            where.append(f"{key} >= ?::{key_type}")
            values.append(low)
        if high is not None:
            where.append(f"{key} < ?::{key_type}")
            values.append(high)
        query = sql.replace("{range}", " AND ".join(where) or "true")
        # a fresh cursor for each: no pending result of another query in the way
        yield con.cursor().sql(query, params=[*params, *values]).to_arrow_reader(
            BATCH_ROWS)


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
