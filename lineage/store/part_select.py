"""The read side of parts: which registered parts, and which of their row groups, a
lookup opens, found from the key ranges the catalog records for each part (the writer,
lineage/store/parts.py, records them), and checked before they are read.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import itertools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb

    from lineage.store.base import BaseStore
    from lineage.store.part_check import Admits, RangeRecord


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
            if len(values) > groups:  # more values than groups: `among` tests each group
                return range(groups)
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
            low, high = first[self.any_of[0]], last[self.any_of[0]]
            kept = [i for i in kept if self._holds_one(low[i], high[i])]
        return kept

    @functools.cached_property
    def _sorted_values(self) -> list[Any]:
        return sorted(set(self.any_of[1])) if self.any_of else []

    def _holds_one(self, low: Any, high: Any) -> bool:
        """Whether one of `any_of`'s values lies in [low, high], by bisection: a corpus's
        duplicate clusters ask for 800,000 documents at 10M, against each part."""
        values = self._sorted_values
        at = bisect.bisect_left(values, low)
        return at < len(values) and values[at] <= high

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
