"""What a reader of one fixed state of the catalog may keep between questions.

A long-lived reader (`lineage serve`) answers from an in-memory copy of the catalog that
is replaced, never changed, after each commit. What is read from that copy alone (the
parts a table has and the byte ranges their row groups cover, a stream's catalog row)
is then the same for every question asked of the copy, so it is read once per copy and
kept with it. A store reading the catalog file itself keeps nothing: a commit can land
between any two questions.

Only catalog rows are kept. The bytes of the parts are read and checked against the
catalog on every lookup (lineage/store/part_check.py), whatever is kept here.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Protocol, TypeVar

T = TypeVar("T")


class CatalogMemo:
    """Values read from one state of the catalog, by key. Questions in parallel may read
    the same value at the same time: each then reads it, and one of the copies is kept
    (values are never changed after they are made, so either serves)."""

    def __init__(self) -> None:
        self._values: dict[Hashable, Any] = {}

    def get(self, key: Hashable, read: Callable[[], T]) -> T:
        try:
            found: T = self._values[key]
            return found
        except KeyError:
            value = self._values.setdefault(key, read())
            return value  # type: ignore[no-any-return]

    def __len__(self) -> int:
        return len(self._values)


class _Keeps(Protocol):
    """A store (lineage.store.base.BaseStore), by the one attribute read here."""

    catalog_memo: CatalogMemo | None


def remembered(store: _Keeps, key: Hashable, read: Callable[[], T]) -> T:
    """`read()`, kept for the store's catalog state when the store reads a fixed copy of
    the catalog (else read every time). What `read` returns is shared between questions:
    the caller never changes it."""
    memo = store.catalog_memo
    return read() if memo is None else memo.get(key, read)
