"""Bulk tables as Parquet parts: written under temp names, published in one commit.

Writers stream sorted Arrow batches into parts of at most `part_rows` rows (row groups of
`row_group_rows`, zstd, min/max statistics on the sort and range columns, so range and
point lookups prune row groups), feeding each batch to the digests that describe the
table. Parts are hashed (SHA-256) as they are written and fsynced before any lock is
taken; `publish_parts` then renames them into place and registers them inside the
caller's catalog transaction.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
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
    from lineage.store.part_check import Admits, RangeRecord

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
                "INSERT INTO parquet_files VALUES (?, ?, ?, ?, ?, ?, now()::TIMESTAMP, ?, ?)",
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


def part_files(
    con: duckdb.DuckDBPyConnection, store: BaseStore, table: str, owner: str | None = None, *,
    span: tuple[int, int] | None = None, digest: str | None = None,
    any_of: tuple[str, Sequence[Any]] | None = None,
) -> list[str]:
    """The registered parts of a table that can hold the rows asked for, checked.

    Parts record the first and last value of their sort columns (`key_ranges`), so a
    lookup opens one part instead of all of them: at hundreds of parts, reading every
    footer would cost more than the lookup itself. `any_of=(column, values)` keeps the
    parts whose range of that column holds at least one of the values. The footer and the
    row groups of each part that the same conditions keep are checked against the
    catalog (lineage/store/part_check.py): DamagedPartError if they differ. Without conditions,
    every row group is checked.
    """
    from lineage.store.part_check import check_part

    admits = key_admits(span, digest, any_of)
    keep = []
    for part in candidate_parts(con, store, table, owner, admits):
        check_part(store.root, part.path, part.n_bytes, part.sha256, part.row_groups, admits)
        keep.append(str(store.root / part.path))
    return keep


@dataclass(frozen=True)
class PartEntry:
    """A registered part as the catalog lists it: where, its size and SHA-256, the first
    and last values of its range columns, and its row groups' record (None for a part
    registered before schema 7), parsed where it is kept for many questions, else as
    written (parsed by the check only if the part is read)."""

    path: str
    n_bytes: int
    sha256: str
    n_rows: int
    first: dict[str, Any]
    last: dict[str, Any]
    row_groups: RangeRecord | str | None


def candidate_parts(
    con: duckdb.DuckDBPyConnection, store: BaseStore, table: str, owner: str | None,
    admits: Admits,
) -> list[PartEntry]:
    """The registered parts of a table (of one owner) whose recorded key ranges `admits`,
    in path order. The catalog's list is read once per catalog state where the store
    keeps one (lineage/store/memo.py)."""
    from lineage.store.memo import remembered

    if store.catalog_memo is None:
        # Asked once: the row groups' records are read only for the parts the key ranges
        # admit (reading all of a 10M table's 40 took 9.7 ms; its key ranges 0.8 ms).
        admitted = [part for part in _part_entries(con, table, owner, records=False)
                    if admits(part.first, part.last)]
        return _with_records(con, admitted)
    listed = remembered(store, ("parts", table, owner),
                        lambda: _part_entries(con, table, owner, records=True))
    keys = remembered(store, ("part keys", table, owner), lambda: _part_keys(listed))
    if keys is None:
        return [part for part in listed if admits(part.first, part.last)]
    return [listed[i] for i in keys.admitted(admits)[:-1]]  # the last is no part


def _part_keys(parts: list[PartEntry]) -> RangeRecord | None:
    """The parts' first and last key values as a record of ranges (one per part), so
    that a lookup bisects them as it does a part's row groups (a table of one owner is
    written in key order); None when the parts do not all record the same keys."""
    from lineage.store.part_check import RangeRecord

    columns = {tuple(sorted(part.first)) for part in parts}
    if len(columns) != 1 or not next(iter(columns)):
        return None
    return RangeRecord(list(range(len(parts) + 1)), [],
                       {k: [part.first[k] for part in parts] for k in parts[0].first},
                       {k: [part.last[k] for part in parts] for k in parts[0].last})


def _part_entries(con: duckdb.DuckDBPyConnection, table: str, owner: str | None, *,
                  records: bool) -> list[PartEntry]:
    """The parts of a table, with their row groups' records parsed (`records`) or not
    read at all."""
    from lineage.store.part_check import RangeRecord

    where, params = "table_name = ?", [table]
    if owner is not None:
        where, params = where + " AND owner = ?", [table, owner]
    record = "row_groups" if records else "NULL"
    rows = con.execute(f"SELECT path, key_ranges, n_bytes, sha256, n_rows, {record} FROM "
                       f"parquet_files WHERE {where} ORDER BY path", params).fetchall()
    entries = []
    for path, ranges, n_bytes, sha256, n_rows, row_groups in rows:
        bounds = json.loads(ranges) if ranges else {}
        entries.append(PartEntry(
            path, n_bytes, sha256, n_rows, {k: v[0] for k, v in bounds.items()},
            {k: v[1] for k, v in bounds.items()},
            None if row_groups is None else RangeRecord.parse(row_groups)))
    return entries


def _with_records(con: duckdb.DuckDBPyConnection, parts: list[PartEntry]) -> list[PartEntry]:
    """`parts` with their row groups' records as written (parsed by the check that reads
    the part)."""
    if not parts:
        return parts
    marks = ", ".join("?" * len(parts))  # plain parameters: a list one plans slower
    records = dict(con.execute(f"SELECT path, row_groups FROM parquet_files WHERE path IN "
                               f"({marks})", [p.path for p in parts]).fetchall())
    return [dataclasses.replace(part, row_groups=records[part.path]) for part in parts]


def key_admits(span: tuple[int, int] | None = None, digest: str | None = None,
               any_of: tuple[str, Sequence[Any]] | None = None) -> Admits:
    """Whether a part or row group, by the first and last values of its range columns,
    can hold rows a lookup asks for (the conditions of `part_files`)."""
    return KeyAdmits(span, digest, any_of)


@dataclass(frozen=True)
class KeyAdmits:
    """`key_admits`' conditions: a token range [start, end), a content hash, or any of
    some values of a column."""

    span: tuple[int, int] | None
    digest: str | None
    any_of: tuple[str, Sequence[Any]] | None

    def __call__(self, first: dict[str, Any], last: dict[str, Any]) -> bool:
        """Whether rows between `first` and `last` (values of range columns) can match."""
        return bool(self._kept({k: [v] for k, v in first.items()},
                               {k: [v] for k, v in last.items()}, [0]))

    def narrow(self, record: RangeRecord) -> Iterable[int]:
        """The row groups of a part that can hold a token range, a content hash or some
        values of a sorted column (a text's fingerprints), found by bisection where the
        recorded values ascend (a part of 1M rows has ~500 row groups; testing each is a
        tenth of a lookup). A superset: each is still tested."""
        groups = len(record.ends) - 1
        if self.span is not None and record.ascends("last", "stream_end") and \
                record.ascends("first", "stream_start"):  # last end > start, first start < end
            return range(bisect.bisect_right(record.last["stream_end"], self.span[0]),
                         bisect.bisect_left(record.first["stream_start"], self.span[1]))
        key = self._key_values()
        if key is not None and record.ascends("last", key[0]) and \
                record.ascends("first", key[0]):  # first <= value <= last
            column, values = key
            lows, highs = record.last[column], record.first[column]
            windows = [range(bisect.bisect_left(lows, value), bisect.bisect_right(highs, value))
                       for value in values]
            if len(windows) == 1:
                return windows[0]
            return sorted(set(itertools.chain.from_iterable(windows)))
        return range(groups)

    def among(self, record: RangeRecord, window: Iterable[int]) -> list[int]:
        """The row groups of `window` that can hold rows: what calling this on each
        group's first and last values keeps, read from the record's columns in place (a
        lookup tests a few per part, and more parts than it reads)."""
        return self._kept(record.first, record.last, window)

    def _kept(self, first: dict[str, list[Any]], last: dict[str, list[Any]],
              window: Iterable[int]) -> list[int]:
        """The indexes of `window` whose first and last values (by column) can match."""
        kept = list(window)
        if self.span and "stream_start" in first:
            start, end = self.span
            starts, ends = first["stream_start"], last["stream_end"]
            kept = [i for i in kept if starts[i] < end and ends[i] > start]
        if self.digest and "content_hash" in first:
            low, high, digest = first["content_hash"], last["content_hash"], self.digest
            kept = [i for i in kept if low[i] <= digest <= high[i]]
        if self.any_of and self.any_of[0] in first:
            column, values = self.any_of
            low, high = first[column], last[column]
            kept = [i for i in kept if any(low[i] <= value <= high[i] for value in values)]
        return kept

    def _key_values(self) -> tuple[str, Sequence[Any]] | None:
        """(column, values) when the condition is values of one column."""
        if self.digest is not None:
            return "content_hash", [self.digest]
        return self.any_of


def check_all_parts(con: duckdb.DuckDBPyConnection, store: BaseStore, paths: Sequence[str]) -> None:
    """Check every byte of the given registered parts (for reads of whole tables)."""
    from lineage.store.part_check import check_part

    for path, n_bytes, sha256, row_groups in con.execute(
            "SELECT path, n_bytes, sha256, row_groups FROM parquet_files "
            "WHERE path IN (SELECT unnest(?)) ORDER BY path", [list(paths)]).fetchall():
        check_part(store.root, path, n_bytes, sha256, row_groups)
