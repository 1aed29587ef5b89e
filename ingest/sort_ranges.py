"""One ORDER BY over a table, run as several sorts of key ranges, one after another
(tables of up to `WHOLE_SORT_ROWS` rows are sorted whole).

A single ORDER BY of a 100M-row table holds every row's sort keys and payload at once:
beyond the memory limit DuckDB spills them, uncompressed, to its temp directory (a
10M-row reduce spilled several bytes for each byte of the manifest). Sorting the rows of
one key range at a time keeps each sort within memory; the ranges, taken in key order,
give exactly the rows of the global sort in its order.

The rows are dealt into their ranges in one pass over the table: DuckDB names each row's
range, and the rows are written, a range's rows together, to an Arrow IPC file for each
range (LZ4 frames) in a scratch folder. A range read by filtering the whole table would
cost a scan of the table per range, which grows as the square of the corpus (a 100M-row
reduce scanned its table 100 times). Parquet files written by DuckDB's partitioned COPY
were the scratch before: dealing 10M manifest rows took 22.8 s of CPU that way (zstd at
level 1; uncompressed 17.3 s), and 10.4 s as Arrow IPC, for the same sort after it. Each
range's file is deleted once it is sorted.

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

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

# Rows sorted at once: a reduce row is a few hundred bytes in DuckDB's sort, so two sorts
# of this many (the documents' and the content-hash index's overlap) fit the 2 GB budget.
RANGE_ROWS = 2_000_000
# Tables up to this many rows are sorted whole: one ORDER BY spills a few GB to the
# staging folder there, which costs less than dealing the rows (a 10M-row ingest: 44.0 s
# and 2.8 GB sorted whole, 50.2 s and 2.7 GB in ranges). Beyond it the spill grows past
# what a disk holds (45 GB at 100M rows), and the ranges keep it bounded.
WHOLE_SORT_ROWS = 10_000_000
BATCH_ROWS = 65_536
_SAMPLES_PER_RANGE = 256
_SAMPLE_SEED = 33
# Rows held for all ranges together before they are written: a range's rows go to its
# file in pieces of at least 2,048 rows, at most 65,536 (few, large IPC batches).
_PENDING_ROWS = 1_048_576
_RANGE_COLUMN = "lineage_range"
_RANGE_ROWS_VIEW = "lineage_range_rows"
# The scratch files' codec: 1.3 GB for 10M manifest rows, against 3.0 GB uncompressed for
# 1.5 s less CPU; a range's rows are read back at once, so the disk is what counts.
_COMPRESSION: str | None = "lz4"


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
    range_rows: int | None = None,  # rows a range; given, the whole-sort limit too
    batch_rows: int = BATCH_ROWS,
    after_first: Callable[[], None] | None = None,
) -> pa.RecordBatchReader:
    """The rows of `sql` (which reads `{rows}`, a relation with `columns` of `table`, and
    ends ORDER BY `key`, ...) as one reader. `key` must not be NULL on any row of `table`;
    `scratch` is a folder of this sort's own (made, then deleted); `after_first` is called
    once the first range is sorted."""
    import pyarrow as pa

    whole = range_rows or WHOLE_SORT_ROWS
    bounds = [] if total <= whole else range_bounds(
        con, key, total, table=table, range_rows=range_rows or RANGE_ROWS)
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
    keys in [bounds[k-1], bounds[k]), found by a binary search written as nested CASEs.
    Within a range's file the rows keep the table's order (a stable deal)."""
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
    reader = con.cursor().sql(
        f"SELECT {columns}, ({which})::UINTEGER AS {_RANGE_COLUMN} FROM {table}",
        params=values).to_arrow_reader(BATCH_ROWS)
    with _RangeFiles(scratch, reader.schema, len(bounds) + 1) as files:
        for batch in reader:
            files.deal(batch)


class _RangeFiles:
    """The scratch files of a deal, one an occupied range, written as rows arrive."""

    def __init__(self, scratch: Path, schema: pa.Schema, ranges: int) -> None:
        self.scratch, self.ranges = scratch, ranges
        self.which = schema.get_field_index(_RANGE_COLUMN)
        self.schema = schema.remove(self.which)
        self.flush_rows = max(2_048, min(BATCH_ROWS, _PENDING_ROWS // ranges))
        self.pending: list[list[pa.RecordBatch]] = [[] for _ in range(ranges)]
        self.held = [0] * ranges
        self.writers: dict[int, tuple[Any, Any]] = {}  # range: (IPC writer, its file)

    def __enter__(self) -> _RangeFiles:
        return self

    def __exit__(self, *exc: object) -> None:
        failure: BaseException | None = None
        try:
            if exc[0] is None:
                for k in range(self.ranges):
                    self._flush(k)
        except BaseException as error:
            failure = error
        for writer, sink in self.writers.values():  # all, even after a failure (full disk)
            for closing in (writer, sink):  # a writer that fails to close leaves its file open
                try:
                    closing.close()
                except OSError as error:
                    failure = failure or error
        if failure is not None and exc[0] is None:
            raise failure

    def deal(self, batch: pa.RecordBatch) -> None:
        import numpy as np
        import pyarrow as pa

        which = batch.column(self.which).to_numpy()
        order = np.argsort(which, kind="stable")  # each range's rows, in table order
        counts = np.bincount(which, minlength=self.ranges)
        rows = batch.select([i for i in range(batch.num_columns) if i != self.which]
                            ).take(pa.array(order))
        start = 0
        for k in np.flatnonzero(counts).tolist():
            count = int(counts[k])
            self.pending[k].append(rows.slice(start, count))
            self.held[k] += count
            start += count
            if self.held[k] >= self.flush_rows:
                self._flush(k)

    def _flush(self, k: int) -> None:
        import pyarrow as pa
        import pyarrow.ipc as ipc

        if not self.held[k]:
            return
        if k not in self.writers:
            sink = pa.OSFile(str(self.scratch / f"{k}.arrow"), "wb")
            try:
                self.writers[k] = (ipc.new_stream(
                    sink, self.schema, options=ipc.IpcWriteOptions(compression=_COMPRESSION)),
                    sink)
            except BaseException:
                sink.close()
                raise
        rows = pa.Table.from_batches(self.pending[k], self.schema).combine_chunks()
        self.writers[k][0].write_table(rows)
        self.pending[k], self.held[k] = [], 0


def _range_readers(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any],
                   ranges: int, scratch: Path) -> Iterator[pa.RecordBatchReader]:
    """A reader for each range in key order, each range's file deleted once read (an
    empty range has no file)."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    try:
        for k in range(ranges):
            path = scratch / f"{k}.arrow"
            if not path.exists():
                continue
            with pa.memory_map(str(path)) as source:
                cursor = con.cursor()  # its own view of the range's rows
                cursor.register(_RANGE_ROWS_VIEW, ipc.open_stream(source))
                yield cursor.sql(sql.replace("{rows}", _RANGE_ROWS_VIEW),
                                 params=list(params)).to_arrow_reader(BATCH_ROWS)
            path.unlink()
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
