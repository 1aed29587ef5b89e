"""Reads that notice damage: the bytes of a Parquet part are checked before a query uses them.

Parquet's own checks do not catch every flipped bit (a flipped value in a PLAIN page, or
in a row group's min/max statistics, decodes into a wrong answer), so the writer records
in the catalog (`parquet_files.row_groups`) where each row group of a part ends, where the
footer ends, and the BLAKE3 of each of those byte ranges. Before a lookup reads a part,
the footer and the row groups that can hold its rows (chosen by the first and last values
recorded for each row group, the way DuckDB prunes them by min/max) are re-hashed: a
lookup reads a few hundred KB that it was about to read anyway.

A part registered before schema 7 has no such record: its whole file is checked against
the catalog's SHA-256 on every read (slower, never silently wrong).
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lineage.errors import DamagedPartError, StoreError

# What an error calls a part's checked ranges, the last of them, and their record
PART_RANGES = ("row group", "footer", "the catalog")
# Whether a row group (by the first and last values of its range columns) can hold rows
Admits = Callable[[dict[str, Any], dict[str, Any]], bool]


@dataclass
class CheckedBytes:
    """What a lookup may decode of a part: `data` (start offset -> bytes) holds the footer
    and the row groups `groups`, each checked; `whole` says the whole file was checked
    instead (a part without a record of row groups), to be read from `path`."""

    path: Path
    groups: set[int] = field(default_factory=set)
    data: dict[int, bytes] = field(default_factory=dict)
    whole: bool = False
    footer_digest: str = ""  # the footer's BLAKE3, as the catalog records and the bytes hash


@dataclass(frozen=True)
class RangeRecord:
    """A part's `row_groups` record, parsed: where each row group and then the footer end
    (`ends`), the BLAKE3 of each range, and the first and last values of the part's range
    columns in each row group (`first[column][i]`, `last[column][i]`; empty when the part
    records none)."""

    ends: list[int]
    digests: list[str]
    first: dict[str, list[Any]]
    last: dict[str, list[Any]]

    @classmethod
    def parse(cls, text: str | RangeRecord) -> RangeRecord:
        """The record as the catalog holds it (JSON text), or one already parsed."""
        return text if isinstance(text, RangeRecord) else cls.from_json(json.loads(text))

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> RangeRecord:
        return cls(record["ends"], record["blake3"], record["first"] or {},
                   record["last"] or {})

    def admitted(self, admits: Admits | None, only: Collection[int] | None = None,
                 ) -> list[int]:
        """The row groups whose recorded values `admits` (all without a condition or a
        record of values), or the row groups `only` (by number), then the footer's range."""
        groups = len(self.ends) - 1
        if only is not None:
            return [*sorted(i for i in only if 0 <= i < groups), groups]
        if admits is None or not self.first:
            return [*range(groups), groups]
        narrow = getattr(admits, "narrow", None)  # a binary search to the few that can
        window = range(groups) if narrow is None else narrow(self)
        among = getattr(admits, "among", None)  # the same test, without a dict per group
        if among is not None:
            return [*among(self, window), groups]
        first, last = self.first, self.last
        return [i for i in window if admits({k: v[i] for k, v in first.items()},
                                            {k: v[i] for k, v in last.items()})] + [groups]

    def ascends(self, side: str, column: str) -> bool:
        """Whether the `side` ("first" or "last") values of `column` never decrease from one
        row group to the next (a table's sort column): a lookup may then bisect them."""
        return (side, column) in self._ascending

    @functools.cached_property
    def _ascending(self) -> frozenset[tuple[str, str]]:
        return frozenset((side, column) for side, values in (("first", self.first),
                                                             ("last", self.last))
                         for column, found in values.items()
                         if all(a <= b for a, b in itertools.pairwise(found)))


_SAFE_RELPATH = re.compile(r"^[A-Za-z0-9._=/-]+$")


def require_plain(root: Path, relative: str) -> str:
    """`relative`, a part's path as the catalog gives it, unless it could name a file
    outside the store or break out of an SQL string: StoreError naming the catalog."""
    if not _SAFE_RELPATH.match(relative) or {"", ".."} & set(relative.split("/")):
        raise StoreError(f"{root / 'catalog.duckdb'}: unexpected Parquet path {relative!r}")
    return relative


def check_part(root: Path, rel: str, n_bytes: int, sha256: str,
               row_groups: str | RangeRecord | None, admits: Admits | None = None) -> None:
    """Raise DamagedPartError unless the bytes a query of `rel` can read are as written.

    `admits` picks the row groups the query can read (None: all of them)."""
    checked_ranges(root, rel, n_bytes, sha256, row_groups, admits, keep=False)


def checked_ranges(root: Path, rel: str, n_bytes: int, sha256: str,
                   row_groups: str | RangeRecord | None, admits: Admits | None = None, *,
                   keep: bool = True, only: Collection[int] | None = None,
                   names: tuple[str, str, str] = PART_RANGES) -> CheckedBytes:
    """`check_part`, keeping the checked bytes (unless `keep` is false) for a reader that
    decodes them instead of reading the file again. `row_groups` is the catalog's record,
    as written or parsed (a reader that asks often parses it once). `only` names the row
    groups to check instead of `admits` (none: the footer alone). `names` are what an
    error calls the ranges, the last one and the record (a lookup copy's differ)."""
    path = root / require_plain(root, rel)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise DamagedPartError(path, f"cannot be opened ({exc.strerror})") from exc
    checked = CheckedBytes(path)
    try:
        size = os.fstat(fd).st_size
        if size != n_bytes:
            raise DamagedPartError(path, f"is {size} bytes, the catalog says {n_bytes}")
        if row_groups is None:
            _check_whole(fd, path, sha256)
            checked.whole = True
        else:
            record = RangeRecord.parse(row_groups)
            read_ranges(fd, checked, record, record.admitted(admits, only), keep=keep,
                        names=names)
    finally:
        os.close(fd)
    return checked


def _check_whole(fd: int, path: Path, sha256: str) -> None:
    import hashlib

    digest = hashlib.sha256()
    while block := os.read(fd, 1 << 20):
        digest.update(block)
    if digest.hexdigest() != sha256:
        raise DamagedPartError(path, "does not match the SHA-256 in the catalog")


def read_ranges(fd: int, checked: CheckedBytes, record: RangeRecord, ranges: list[int], *,
                keep: bool = True, names: tuple[str, str, str] = PART_RANGES) -> None:
    """Read the ranges `ranges` (by number) of the file open at `fd` into `checked`, each
    checked against its BLAKE3 in `record`; DamagedPartError names the first that is not."""
    import blake3

    ends, digests = record.ends, record.digests
    footer = len(ends) - 1  # the last range: the footer, which every read parses
    for index in ranges:
        start, end = ends[index - 1] if index else 0, ends[index]
        data = os.pread(fd, end - start, start)
        if blake3.blake3(data).hexdigest(length=len(digests[index]) // 2) != digests[index]:
            where = names[1] if index == footer else f"{names[0]} {index}"
            raise DamagedPartError(checked.path, f"{where} (bytes {start}..{end}) does not "
                                                 f"match the BLAKE3 in {names[2]}")
        if index != footer:
            checked.groups.add(index)
        else:
            checked.footer_digest = digests[index]
        if keep:
            checked.data[start] = data
