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

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lineage.errors import DamagedPartError

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


def check_part(root: Path, rel: str, n_bytes: int, sha256: str, row_groups: str | None,
               admits: Admits | None = None) -> None:
    """Raise DamagedPartError unless the bytes a query of `rel` can read are as written.

    `admits` picks the row groups the query can read (None: all of them)."""
    checked_ranges(root, rel, n_bytes, sha256, row_groups, admits, keep=False)


def checked_ranges(root: Path, rel: str, n_bytes: int, sha256: str, row_groups: str | None,
                   admits: Admits | None = None, *, keep: bool = True) -> CheckedBytes:
    """`check_part`, keeping the checked bytes (unless `keep` is false) for a reader that
    decodes them instead of reading the file again."""
    path = root / rel
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
            _check_ranges(fd, checked, json.loads(row_groups), admits, keep)
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


def _check_ranges(fd: int, checked: CheckedBytes, record: dict[str, Any], admits: Admits | None,
                  keep: bool) -> None:
    import blake3

    ends, digests = record["ends"], record["blake3"]
    first, last = record["first"], record["last"]
    footer = len(ends) - 1  # the last range: the footer, which every read parses
    for index, (start, end) in enumerate(zip([0, *ends[:-1]], ends, strict=True)):
        if index != footer and admits is not None and first and not admits(
                {k: v[index] for k, v in first.items()},
                {k: v[index] for k, v in last.items()}):
            continue
        data = os.pread(fd, end - start, start)
        if blake3.blake3(data).hexdigest(length=len(digests[index]) // 2) != digests[index]:
            where = "footer" if index == footer else f"row group {index}"
            raise DamagedPartError(checked.path, f"{where} (bytes {start}..{end}) does not "
                                                 "match the BLAKE3 in the catalog")
        if index != footer:
            checked.groups.add(index)
        if keep:
            checked.data[start] = data
