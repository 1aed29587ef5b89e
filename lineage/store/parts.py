"""Bulk tables as Parquet parts: written under temp names, published in one commit.

Writers stream sorted Arrow batches into parts of at most `part_rows` rows (row groups of
`row_group_rows`, zstd, min/max statistics on the sort and range columns, so range and
point lookups prune row groups), feeding each batch to the digests that describe the
table. Parts are hashed (SHA-256) as they are written and fsynced before any lock is
taken; `publish_parts` then renames them into place and registers them inside the
caller's catalog transaction.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lineage.errors import CommitUnknownError
from lineage.store.durable import TEMP_PREFIX, close_writers, fsync_dir

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

    from lineage.store.base import BaseStore

PART_ROWS = 4_000_000  # rows per part: parts stay a few hundred MB
ROW_GROUP_ROWS = 131_072  # bulk tables read whole or by wide ranges
# Tables answering point and range lookups (occurrences, occurrence_hashes,
# document_hashes). A lookup decompresses whole row groups (the parts have no page
# index), so keep them small: 2,048 rows (at 16,384, decoding the row group was over half
# of a `docs --step` answer's CPU). A lookup also reads and hashes its part's footer, about
# 1 KB per row group, so keep parts small too: 250,000 rows (123 row groups, footers of
# 55-130 KB). docs/performance.md has what each costs and saves. Stores written with
# other sizes read as before: a part records its own row groups.
LOOKUP_ROW_GROUP_ROWS = 2_048
LOOKUP_PART_ROWS = 250_000
# The text index's tables (fingerprints, text hashes, text documents): a text's lookup
# asks for many fingerprints at once, so it reads many row groups; they keep the sizes
# measured when they were made (docs/text-spec.md).
TEXT_ROW_GROUP_ROWS = 16_384
TEXT_PART_ROWS = 1_000_000
# Columns whose values are (nearly) all distinct: a dictionary only costs there, so they
# are written PLAIN (or as a writer's `encodings` say); and min/max statistics of long
# strings cost encoding time without pruning anything, so those get none unless the
# table is sorted or ranged by them. Together 10-25 % faster to encode, and smaller.
DISTINCT_COLUMNS = frozenset({"doc_id", "uri", "content_hash", "metadata", "text_hash",
                              "ordinal", "stream_start", "stream_end"})
# Encoding of sorted integer columns: deltas pack into a few bits each (occurrences:
# 20 % faster to encode than PLAIN, and smaller).
SORTED_INTEGERS = "DELTA_BINARY_PACKED"
RANGE_DIGEST_BYTES = 16  # BLAKE3 of each row group's bytes: catches damage, not forgery

Progress = Callable[[str, int | None, int | None], None] | None


def report(progress: Progress, stage: str, done: int | None, total: int | None) -> None:
    """Tell an optional progress callback how far a stage got (the core never prints)."""
    if progress:
        progress(stage, done, total)


@dataclass
class WrittenPart:
    temp: Path
    rows: int = 0
    n_bytes: int = 0
    sha256: str = ""
    first: dict[str, Any] = field(default_factory=dict)  # range columns in the first row
    last: dict[str, Any] = field(default_factory=dict)  # ... and in the last row

    # The part cut into checked byte ranges: each row group, then the footer
    # (lineage/store/part_check.py reads them back)
    ends: list[int] = field(default_factory=list)  # where each range ends
    digests: list[str] = field(default_factory=list)  # BLAKE3-128 hex of each range
    group_first: dict[str, list[Any]] = field(default_factory=dict)  # range columns, per
    group_last: dict[str, list[Any]] = field(default_factory=dict)  # row group

    def key_ranges(self) -> str | None:
        if not self.first:
            return None
        return json.dumps({k: [self.first[k], self.last[k]] for k in sorted(self.first)})

    def row_groups(self) -> str:
        return json.dumps({"ends": self.ends, "blake3": self.digests,
                           "first": self.group_first, "last": self.group_last})


def write_parts(
    batches: Iterable[pa.RecordBatch],
    *,
    schema: pa.Schema,
    out_dir: Path,
    sorted_by: Sequence[str],
    digests: Sequence[Any] = (),  # LineHasher or anything else with .update(batch)
    part_rows: int | None = None,
    row_group_rows: int = ROW_GROUP_ROWS,
    progress: Progress = None,
    stage: str = "writing",
    total: int | None = None,
    range_columns: Sequence[str] = (),
    encodings: dict[str, str] | None = None,
) -> list[WrittenPart]:
    """Write `batches` (already in table order) into fsynced temp parts; remove them on error.

    For each of `range_columns` (monotone in table order), every part records its first
    and last value, so lookups can skip parts before opening them. `encodings` sets the
    Parquet encoding of some columns (those columns are not dictionary-encoded).
    """
    import pyarrow as pa

    out_dir.mkdir(parents=True, exist_ok=True)
    parts: list[WrittenPart] = []
    writer = _RotatingWriter(out_dir, schema, parts, sorted_by, part_rows or PART_ROWS,
                             row_group_rows, range_columns, encodings or {})
    pending: list[pa.RecordBatch] = []
    pending_rows = written = 0
    try:
        with writer, _Background(writer.write) as background:
            for batch in batches:
                for digest in digests:  # before conform: they may read extra columns
                    digest.update(batch)
                batch = conform(batch, schema)
                pending.append(batch)
                pending_rows += batch.num_rows
                if pending_rows >= row_group_rows:
                    background.put(pa.Table.from_batches(pending, schema))
                    written += pending_rows
                    pending, pending_rows = [], 0
                    if progress:
                        progress(stage, written, total)
            if pending:
                background.put(pa.Table.from_batches(pending, schema))
                written += pending_rows
        if progress:
            progress(stage, written, total)
    except BaseException:
        discard_parts(parts)
        raise
    return parts


def write_overlapped(
    first: Callable[[Callable[[], None]], list[WrittenPart]],
    second: Callable[[], list[WrittenPart]],
) -> tuple[list[WrittenPart], list[WrittenPart]]:
    """Run `first(start_second)`; `start_second()` starts `second` on another thread,
    when `first` chooses (at the latest when `first` returns). Returns both parts lists.

    Two sorted copies of a table overlap this way: one copy's DuckDB sort or streaming
    runs while the other's Parquet is encoded on one core. (Two sorts at once are
    slower: each uses both cores.) If either fails, the parts of both are removed and the
    error is raised."""
    from concurrent.futures import Future, ThreadPoolExecutor

    with ThreadPoolExecutor(1, thread_name_prefix="second-copy") as pool:
        started: list[Future[list[WrittenPart]]] = []

        def start_second() -> None:
            if not started:
                started.append(pool.submit(second))

        first_parts: list[WrittenPart] = []
        try:
            first_parts = first(start_second)
            start_second()
            return first_parts, started[0].result()
        except BaseException:
            discard_parts(first_parts)
            for future in started:  # wait for it, then remove what it wrote
                if future.exception() is None:
                    discard_parts(future.result())
            raise


def conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """The batch with exactly the schema's columns, in order and types."""
    import pyarrow as pa

    return pa.RecordBatch.from_arrays(
        [batch.column(field.name).cast(field.type) for field in schema], schema=schema
    )


def publish_parts(
    con: duckdb.DuckDBPyConnection,
    store: BaseStore,
    *,
    table: str,
    owner: str,
    name: str,
    parts: Sequence[WrittenPart],
) -> list[str]:
    """Rename parts to `tables/<table>/<name>-NNNN.parquet` and register them.

    Call inside `store.writer()`. Renamed files that end up unregistered (the transaction
    fails) are removed here, or left as garbage for `store gc` if the process dies.
    """
    if not parts:
        return []
    folder = store.table_dir(table)
    finals = [folder / f"{name}-{i:04d}.parquet" for i in range(len(parts))]
    relative = [final.relative_to(store.root).as_posix() for final in finals]
    try:
        for part, final in zip(parts, finals, strict=True):
            os.replace(part.temp, final)
        fsync_dir(folder)
        for part, rel in zip(parts, relative, strict=True):
            con.execute(
                "INSERT INTO parquet_files VALUES (?, ?, ?, ?, ?, ?, now()::TIMESTAMP, ?, ?, NULL)",
                [rel, table, owner, part.rows, part.n_bytes, part.sha256, part.key_ranges(),
                 part.row_groups()],
            )
    except BaseException:
        for final in finals:
            final.unlink(missing_ok=True)
        raise
    return relative


def unpublish(store: BaseStore, relative: Iterable[str]) -> None:
    """Remove published files whose registering transaction did not commit."""
    for rel in relative:
        (store.root / rel).unlink(missing_ok=True)


def unpublish_unless_unknown(store: BaseStore, relative: Sequence[str],
                             exc: BaseException) -> None:
    """Call in the `except` of a write that renamed `relative` into place: its
    transaction did not commit (the writer raised), so the files are removed, unless the
    writer could not tell (CommitUnknownError): then they stay, data if registered,
    garbage for `store gc` if not."""
    if not isinstance(exc, CommitUnknownError):
        unpublish(store, relative)


def discard_parts(parts: Iterable[WrittenPart]) -> None:
    for part in parts:
        part.temp.unlink(missing_ok=True)


class _Background:
    """Runs `write` on a second thread, one row group at a time, while the caller fetches
    and digests the next batches: Parquet encoding and zstd release the GIL, so the two
    overlap on two cores. At most two row groups wait; the first error is re-raised."""

    def __init__(self, write: Callable[[Any], None]) -> None:
        import queue
        import threading

        self._write = write
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=2)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="parquet-writer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (table := self._queue.get()) is not None:
            if self._error is None:
                try:
                    self._write(table)
                except BaseException as exc:  # handed to the caller's thread
                    self._error = exc

    def put(self, table: Any) -> None:
        if self._error is not None:
            raise self._error
        self._queue.put(table)

    def __enter__(self) -> _Background:
        return self

    def __exit__(self, *exc: object) -> None:
        self._queue.put(None)
        self._thread.join()
        if self._error is not None and exc[0] is None:
            raise self._error


class _HashingFile:
    """A part's file that hashes its bytes on the way to disk (so the part is never read
    back) and is fsynced when closed, while the next part is being written. Besides the
    whole file's SHA-256, each byte range between `cut()`s gets its own BLAKE3."""

    def __init__(self, part: WrittenPart) -> None:
        import hashlib

        import blake3

        self._part = part
        self._file = open(part.temp, "wb")  # noqa: SIM115 (closed by close())
        self._sha256 = hashlib.sha256()
        self._new_range = blake3.blake3
        self._range = blake3.blake3()
        self._size = 0
        self.closed = False

    def write(self, data: Any) -> int:
        self._sha256.update(data)
        self._range.update(data)
        self._size += self._file.write(data)
        return len(memoryview(data))

    def cut(self) -> None:
        """End a checked range here (after a row group; at close, after the footer)."""
        if self._part.ends and self._part.ends[-1] == self._size:
            return
        self._part.ends.append(self._size)
        self._part.digests.append(self._range.hexdigest(length=RANGE_DIGEST_BYTES))
        self._range = self._new_range()

    def flush(self) -> None:
        self._file.flush()

    def tell(self) -> int:
        return self._size

    def writable(self) -> bool:
        return True

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.cut()
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
        finally:
            self._file.close()
        self._part.n_bytes, self._part.sha256 = self._size, self._sha256.hexdigest()


class _RotatingWriter:
    """Starts a new part every `part_rows` rows; temp names until publish."""

    def __init__(
        self, out_dir: Path, schema: Any, parts: list[WrittenPart], sorted_by: Sequence[str],
        part_rows: int, row_group_rows: int, range_columns: Sequence[str] = (),
        encodings: dict[str, str] | None = None,
    ) -> None:
        self.out_dir, self.schema, self.parts = out_dir, schema, parts
        self.encodings = dict(encodings or {})
        self.sorting = [schema.get_field_index(name) for name in sorted_by]
        self.part_rows, self.row_group_rows = part_rows, row_group_rows
        self.range_columns = tuple(range_columns)
        self._writer: Any = None
        self._sink: _HashingFile | None = None

    def __enter__(self) -> _RotatingWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        writer, sink, self._writer, self._sink = self._writer, self._sink, None, None
        try:
            close_writers(writer)
        finally:
            if sink is not None:
                sink.close()

    def _column_options(self) -> dict[str, Any]:
        import pyarrow as pa

        names = [f.name for f in self.schema]
        keys = {names[i] for i in self.sorting} | set(self.range_columns)
        encodings = {name: "PLAIN" for name in names if name in DISTINCT_COLUMNS}
        encodings.update(self.encodings)
        long_strings = {f.name for f in self.schema
                        if f.name in DISTINCT_COLUMNS and pa.types.is_string(f.type)}
        return {
            "column_encoding": encodings,
            "use_dictionary": [name for name in names if name not in encodings],
            "write_statistics": [name for name in names
                                 if name not in long_strings or name in keys],
        }

    def write(self, table: Any) -> None:
        import pyarrow.parquet as pq

        while table.num_rows:
            if self._writer is None or self.parts[-1].rows >= self.part_rows:
                self.__exit__()
                temp = self.out_dir / f"{TEMP_PREFIX}{os.getpid()}-{os.urandom(4).hex()}.parquet"
                self.parts.append(WrittenPart(temp))
                self._sink = _HashingFile(self.parts[-1])  # before the writer: closed on error
                self._writer = pq.ParquetWriter(
                    self._sink, self.schema, compression="zstd",
                    sorting_columns=[pq.SortingColumn(i) for i in self.sorting],
                    **self._column_options(),
                )
            room = min(self.part_rows - self.parts[-1].rows, self.row_group_rows)
            head, table = table.slice(0, room), table.slice(room)
            self._writer.write_table(head, row_group_size=self.row_group_rows)
            assert self._sink is not None
            self._sink.cut()  # the row group is on its way to disk: its range ends here
            part = self.parts[-1]
            for name in self.range_columns:
                column = head.column(name)
                if part.rows == 0:
                    part.first[name] = column[0].as_py()
                part.last[name] = column[-1].as_py()
                part.group_first.setdefault(name, []).append(column[0].as_py())
                part.group_last.setdefault(name, []).append(column[-1].as_py())
            part.rows += head.num_rows

