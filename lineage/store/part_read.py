"""Lookups in sorted parts without a query engine: only checked bytes are decoded.

A point or range lookup (the documents of a step, the rows of one content or text hash)
needs one or two row groups of one part. The catalog records the first and last key of
every part and every row group, so they are chosen without opening a file; their bytes
and the footer's are read once, checked against the catalog's BLAKE3
(lineage/store/part_check.py), and decoded by pyarrow from those same bytes: for a hash,
the key column first and the others only where a key matched; for a token range, every
column at once (an admitted row group always holds some of the range), the rows kept
being a slice of those decoded. A byte that was not checked is never decoded, and the
file is read once instead of twice (once to check it, once by DuckDB).
docs/performance.md has what it saves.

A part registered before schema 7 records no row groups: its whole file is checked, then
read, as before."""

from __future__ import annotations

import bisect
import io
import itertools
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

from lineage.store.budget import refuse_within_budget
from lineage.store.part_check import CheckedBytes, checked_ranges
from lineage.store.part_select import PartEntry, candidate_parts, key_admits

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

    from lineage.store.base import BaseStore


def lookup_rows(
    con: duckdb.DuckDBPyConnection, store: BaseStore, table: str, owner: str | None,
    columns: Sequence[str], *, span: tuple[int, int] | None = None,
    equal: tuple[str, Any] | None = None, any_of: tuple[str, Sequence[Any]] | None = None,
) -> list[tuple[Any, ...]]:
    """`lookup_table`'s rows as tuples of `columns`."""
    found = lookup_table(con, store, table, owner, columns, span=span, equal=equal,
                         any_of=any_of)
    if found is None:
        return []
    return list(zip(*(found[name].to_pylist() for name in columns), strict=True))


def lookup_table(
    con: duckdb.DuckDBPyConnection, store: BaseStore, table: str, owner: str | None,
    columns: Sequence[str], *, span: tuple[int, int] | None = None,
    equal: tuple[str, Any] | None = None, any_of: tuple[str, Sequence[Any]] | None = None,
) -> pa.Table | None:
    """The rows of `table` (of `owner`) that meet the token range `span` ([start, end) of
    stream_start..stream_end), or whose sort column `equal[0]` holds the value `equal[1]`
    (a content or text hash), or one of the values `any_of[1]` (a text's fingerprints),
    as a table of `columns` in file order; None when no row does. DamagedPartError if a
    byte they come from is not as written."""
    import pyarrow as pa

    if [span, equal, any_of].count(None) != 2:
        raise ValueError("a lookup is by a token range, a key's value or a key's values")
    if equal is not None:
        any_of = (equal[0], [equal[1]])
    if any_of is None:
        admits, keys = key_admits(span=span), ["stream_start", "stream_end"]
    else:
        admits, keys = key_admits(any_of=any_of), [any_of[0]]
    found: list[pa.Table] = []
    copies = store.lookup_copies
    for part in candidate_parts(con, store, table, owner, admits):
        if copies is not None and (copy := copies.of(part.path, part.sha256)) is not None:
            batches = copies.batches(copy, admits)  # IPC batches: read, never decoded
            decoded = None if batches is None else _matching(batches, columns, span, any_of)
        else:
            refuse_within_budget("a Parquet lookup")
            chunks = checked_ranges(store.root, part.path, part.n_bytes, part.sha256,
                                    part.row_groups, admits)
            parquet = open_checked(chunks, part.n_bytes)
            groups = range(parquet.num_row_groups) if chunks.whole else sorted(chunks.groups)
            if not groups:
                continue
            decoded = _decoded(parquet, groups, keys, columns, span, any_of)
        if decoded is not None:
            found.append(decoded)
    if len(found) < 2:
        return found[0] if found else None
    return pa.concat_tables(found)


def _decoded(parquet: Any, groups: Sequence[int], keys: list[str], columns: Sequence[str],
             span: tuple[int, int] | None, any_of: tuple[str, Sequence[Any]] | None,
             ) -> pa.Table | None:
    """The rows of `groups` that match the lookup, as `columns`; None when no row does."""
    import pyarrow.compute as pc

    others = [name for name in columns if name not in keys]
    if span is not None:  # a row group admitted for a token range holds some of it: one read
        rows = parquet.read_row_groups(groups, columns=[*keys, *others], use_threads=False)
        return _matching(rows, columns, span, None)
    assert any_of is not None
    # The key column first: most of a row group's bytes are in the others, decoded only
    # when a row matches (for a content hash that no document has, never).
    key_rows = parquet.read_row_groups(groups, columns=keys, use_threads=False)
    matching = _holding(key_rows, any_of)
    if not pc.any(matching).as_py():
        return None
    rest = parquet.read_row_groups(groups, columns=others, use_threads=False)
    for name, column in zip(keys, key_rows.columns, strict=True):
        rest = rest.append_column(name, column)
    return rest.filter(matching).select(list(columns))


def _matching(rows: pa.Table, columns: Sequence[str], span: tuple[int, int] | None,
              any_of: tuple[str, Sequence[Any]] | None) -> pa.Table | None:
    """The rows of `rows` that match the lookup, as `columns`; None when no row does."""
    if span is not None:
        rows = _meeting(rows, span)
    else:
        assert any_of is not None
        rows = rows.filter(_holding(rows, any_of))
    return None if rows is None or not rows.num_rows else rows.select(list(columns))


def _holding(rows: pa.Table, any_of: tuple[str, Sequence[Any]],
             value_set: pa.Array | None = None) -> pa.ChunkedArray:
    """Which of `rows` hold one of the values in their column `any_of[0]` (`value_set`:
    those values as an array of the column's type, made once for many tables)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    column, values = any_of
    if len(values) == 1:
        return pc.equal(rows[column], values[0])
    if value_set is None:
        value_set = pa.array(values, rows.schema.field(column).type)
    return pc.is_in(rows[column], value_set=value_set)


def _meeting(rows: pa.Table, span: tuple[int, int]) -> pa.Table | None:
    """The rows holding tokens of `span` ([start, end)). In a part written in stream
    order they are consecutive, so the answer is a slice of the decoded rows (no copy)."""
    import numpy as np

    ends, starts = rows["stream_end"].to_numpy(), rows["stream_start"].to_numpy()
    where = np.flatnonzero((ends > span[0]) & (starts < span[1]))
    if not len(where):
        return None
    first, last = int(where[0]), int(where[-1])
    if last - first + 1 == len(where):
        return rows.slice(first, len(where))
    return rows.take(where)


def rows_at(
    con: duckdb.DuckDBPyConnection, store: BaseStore, table: str, owner: str,
    columns: Sequence[str], *, offset: int, limit: int,
) -> tuple[int, list[dict[str, Any]]]:
    """The rows `offset`..`offset + limit` of `owner`'s rows of `table`, in the order its
    parts were written (their path order; each part is sorted, and a writer's parts follow
    one another in its sort order), as `columns`, and how many rows there are in all.

    Only the footers of the parts the rows are in and the row groups that hold them are
    read, checked and decoded: the explorer's pages of a 10M-document corpus read one
    row group instead of hashing and sorting the whole table."""
    parts = candidate_parts(con, store, table, owner, lambda first, last: True)
    total = sum(part.n_rows for part in parts)
    found: list[dict[str, Any]] = []
    start = 0  # the position of the part's first row
    for part in parts:
        end = start + part.n_rows
        if start < offset + limit and offset < end and len(found) < limit:
            first = max(offset, start) - start
            found.extend(_part_rows(store, part, columns, first, limit - len(found)))
        start = end
    return total, found


def _part_rows(store: BaseStore, part: PartEntry, columns: Sequence[str], first: int,
               count: int) -> list[dict[str, Any]]:
    """`count` rows of a part from its row `first` (fewer where the part ends)."""
    def holding(metadata: Any) -> list[int]:
        starts = row_group_starts(metadata)
        return [i for i, (at, end) in enumerate(itertools.pairwise(starts))
                if at < first + count and first < end]

    parquet, groups = _chosen_groups(store, part, holding)
    if not groups:
        return []
    rows = parquet.read_row_groups(groups, columns=list(columns), use_threads=False)
    skipped = first - row_group_starts(parquet.metadata)[groups[0]]
    return rows.slice(skipped, count).to_pylist()  # type: ignore[no-any-return]


def row_group_starts(metadata: Any) -> list[int]:
    """The first row of each row group, then the part's row count."""
    sizes = [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)]
    return [0, *itertools.accumulate(sizes)]


def row_by_doc_id(con: duckdb.DuckDBPyConnection, store: BaseStore, table: str, owner: str,
                  doc_id: str, columns: Sequence[str]) -> dict[str, Any] | None:
    """The row of `doc_id` in `owner`'s rows of `table` (a corpus's `documents` or
    `text_documents`), as `columns`; None if it has none."""
    return rows_by_doc_id(con, store, table, owner, [doc_id], columns).get(doc_id)


def rows_by_doc_id(con: duckdb.DuckDBPyConnection, store: BaseStore, table: str, owner: str,
                   doc_ids: Collection[str], columns: Sequence[str],
                   ) -> dict[str, dict[str, Any]]:
    """The rows of `doc_ids` in `owner`'s rows of `table` (a corpus's `documents` or
    `text_documents`), as `columns`, by doc_id; a doc_id with no row is left out.

    The catalog records no doc_ids per row group, but a part's footer does (each row
    group's smallest and largest): the footer is checked first, and only the row groups
    whose range holds one of the doc_ids are read, checked and decoded. On a 10M-document
    corpus that is one row group per document instead of the whole table (about 540 MB)."""
    import pyarrow as pa

    wanted = sorted(set(doc_ids))
    found: dict[str, dict[str, Any]] = {}
    if not wanted:
        return found
    value_set: pa.Array | None = None  # the doc_ids as an array, made once
    for part in candidate_parts(con, store, table, owner, key_admits(any_of=("doc_id", wanted))):
        parquet, groups = _chosen_groups(
            store, part, lambda metadata: _groups_holding(metadata, "doc_id", wanted))
        if not groups:
            continue
        # One decode of the columns asked for: the doc_ids are nearly always there (a
        # page links to documents that exist), so reading their column first would only
        # add one. Decoded a row group at a time: many doc_ids spread over a large table
        # (a trainer's steps read ahead) would otherwise have all of its row groups
        # decoded in memory at once (1.6 GB at 10M documents; their checked compressed
        # bytes, held together, are a fraction of that).
        for group in groups:
            rows = parquet.read_row_group(group, use_threads=False,
                                          columns=list(dict.fromkeys(["doc_id", *columns])))
            if value_set is None or value_set.type != rows.schema.field("doc_id").type:
                value_set = pa.array(wanted, rows.schema.field("doc_id").type)
            # The first row of a doc_id, in part order.
            for row in rows.filter(_holding(rows, ("doc_id", wanted), value_set)).to_pylist():
                found.setdefault(row["doc_id"], {name: row[name] for name in columns})
    return found


def _chosen_groups(store: BaseStore, part: PartEntry,
                   choose: Callable[[Any], list[int]]) -> tuple[Any, list[int]]:
    """The part opened on the row groups `choose` picks from its checked footer's
    metadata, those row groups checked too (a part without a record of row groups: its
    whole file checked, every row group readable)."""
    footer = checked_ranges(store.root, part.path, part.n_bytes, part.sha256,
                            part.row_groups, only=())
    if footer.whole:
        parquet = open_checked(footer, part.n_bytes)
        return parquet, choose(parquet.metadata)
    groups = choose(_footer(footer.footer_digest, footer.data[max(footer.data)]))
    if not groups:
        return None, []
    chunks = checked_ranges(store.root, part.path, part.n_bytes, part.sha256,
                            part.row_groups, only=groups)
    return open_checked(chunks, part.n_bytes), groups


def _groups_holding(metadata: Any, column: str, values: Sequence[Any]) -> list[int]:
    """The row groups whose smallest..largest `column` (the footer's statistics) holds one
    of `values` (sorted); a row group without statistics may hold anything."""
    index = metadata.schema.to_arrow_schema().get_field_index(column)
    groups = []
    for number in range(metadata.num_row_groups):
        stats = metadata.row_group(number).column(index).statistics
        if stats is None or not stats.has_min_max:
            groups.append(number)
            continue
        first = bisect.bisect_left(values, stats.min)  # the first value not below the min
        if first < len(values) and values[first] <= stats.max:
            groups.append(number)
    return groups


def open_checked(chunks: CheckedBytes, n_bytes: int) -> Any:
    """A `pyarrow.parquet.ParquetFile` that reads only `chunks`' checked bytes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if chunks.whole:  # a part without a record of row groups: its whole file was checked
        return pq.ParquetFile(chunks.path)
    footer = chunks.data[max(chunks.data)]  # the last range
    # pyarrow joins the reads of row groups a few KB apart into one: across a row group
    # that was not checked when the checked ones are not consecutive (a text's
    # fingerprints, in row groups 0 and 2 of a part), which would read unchecked bytes.
    groups = chunks.groups
    consecutive = not groups or max(groups) - min(groups) + 1 == len(groups)
    return pq.ParquetFile(pa.PythonFile(_CheckedFile(chunks.data, n_bytes), mode="r"),
                          metadata=_footer(chunks.footer_digest, footer),
                          pre_buffer=consecutive)


_FOOTERS: OrderedDict[str, Any] = OrderedDict()
_FOOTERS_LOCK = threading.Lock()
KEPT_FOOTERS = 256  # a 10M-document store's lookup tables have about 120 parts
footer_parses = 0  # how many footers this process parsed (tests count them)


def _footer(digest: str, checked: bytes) -> Any:
    """A part's footer parsed from its checked bytes. Bytes that hash to the same BLAKE3
    parse the same, so a process parses each part's footer once, kept by that digest
    (not by the bytes: hashing 200-500 KB of footer in Python for a dictionary key cost
    0.3 ms a lookup)."""
    global footer_parses
    import pyarrow as pa
    import pyarrow.parquet as pq

    with _FOOTERS_LOCK:
        found = _FOOTERS.get(digest)
        if found is not None:
            _FOOTERS.move_to_end(digest)
            return found
    parsed = pq.read_metadata(pa.BufferReader(checked))
    with _FOOTERS_LOCK:
        footer_parses += 1
        _FOOTERS[digest] = parsed
        while len(_FOOTERS) > KEPT_FOOTERS:
            _FOOTERS.popitem(last=False)
    return parsed


class _CheckedFile(io.RawIOBase):
    """A part as a file that holds only the byte ranges that were checked: reading any
    other byte is an error, so nothing unchecked is ever decoded."""

    def __init__(self, data: dict[int, bytes], size: int) -> None:
        super().__init__()
        self._size, self._at = size, 0
        self._pieces = sorted(data.items())  # (start, bytes), by start
        self._starts = [start for start, _ in self._pieces]

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._at

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._at, io.SEEK_END: self._size}[whence]
        self._at = base + offset
        return self._at

    def read(self, size: int | None = -1) -> bytes:
        end = self._size if size is None or size < 0 else min(self._size, self._at + size)
        # The checked pieces from the one holding the first byte, as long as each begins
        # where the last ended (a read may span adjacent row groups: pyarrow joins them).
        index = bisect.bisect_right(self._starts, self._at) - 1
        found, at = [], self._at
        while 0 <= index < len(self._pieces) and at < end:
            start, data = self._pieces[index]
            if not start <= at < start + len(data):
                break
            found.append(data[at - start:end - start])
            at = start + len(data)
            index += 1
        if at < end or (not found and end > self._at):
            raise OSError(f"bytes {self._at}..{end} of the part were not checked")
        self._at = end
        return found[0] if len(found) == 1 else b"".join(found)
