"""A budget of rows for the lookups of one question, for a reader that answers small
questions at once and hands the others to a thread (`lineage serve`), and for a text's
lookups, read from the copies when they are few rows and by a query when they are not
(lineage/text/match.py).

Within `lookup_budget(rows)`, a lookup may read at most that many rows from lookup
copies (lineage/store/lookup_copy.py), and nothing that costs more than a `pread` per
batch: no Parquet part (a lookup there decodes whole row groups), no DuckDB query, and
no matching of text (its fingerprints take milliseconds). What would go past the budget
raises `OverBudget` before it reads anything, so the caller can ask the question again
where it may take its time. Outside a budget, spending is free.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar


class OverBudget(Exception):
    """A lookup would read more, or more slowly, than the question's budget allows."""


_LEFT: ContextVar[list[int] | None] = ContextVar("lineage_lookup_budget", default=None)


@contextmanager
def lookup_budget(rows: int) -> Iterator[None]:
    """Lookups within may read `rows` rows of lookup copies in all, and nothing else."""
    token = _LEFT.set([rows])
    try:
        yield
    finally:
        _LEFT.reset(token)


def spend(rows: int) -> None:
    """Count `rows` about to be read from lookup copies; OverBudget past the budget."""
    left = _LEFT.get()
    if left is None:
        return
    if rows > left[0]:
        raise OverBudget(f"{rows} rows asked, {left[0]} left")
    left[0] -= rows


def refuse_within_budget(what: str) -> None:
    """OverBudget if a budget is set: `what` (a Parquet read, a DuckDB query) is not
    cheap enough to do within one."""
    if _LEFT.get() is not None:
        raise OverBudget(what)
