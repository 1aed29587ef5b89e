"""A run's step records as columns in memory, for a server answering `trace --step`.

A served lookup answers in about a tenth of a millisecond of CPU from what the server
keeps (lineage/store/memo.py) and the lookup arrays; one DuckDB query costs more than
that, and the point query for a step scans the run's steps (1-2 ms for 80,957 steps). So
a server reads each run's steps once per catalog state, as columns (about 20 MB for
80,957 steps, in half a second), and finds a step by bisection. A command reads its one
step with a query: it asks once.

The cursor is read from each record as the query path reads it (Python's JSON: the last
of duplicate keys), so both paths find the same windows.
"""

from __future__ import annotations

import bisect
import json
from array import array
from dataclasses import dataclass
from typing import Any

# Above this many steps a run is read by the query, even by a server (memory).
MAX_KEPT_STEPS = 5_000_000

STEP_COLUMNS = "step, loss, grad_norm, lr, clipped, skipped, state_hash, record"


@dataclass(frozen=True)
class RunSteps:
    """One run's steps, sorted, as parallel columns."""

    steps: array[int]
    loss: list[float | None]
    grad_norm: list[float | None]
    lr: list[float | None]
    clipped: list[bool | None]
    skipped: list[bool | None]
    state_hash: list[str | None]
    cursor: list[Any]  # the record's "cursor", as json.loads reads it

    @classmethod
    def read(cls, con: Any, run: str) -> RunSteps | None:
        """The run's steps, or None when there are too many to keep."""
        (count,) = con.execute("SELECT count(*) FROM steps WHERE run = ?", [run]).fetchone()
        if count > MAX_KEPT_STEPS:
            return None
        rows = con.execute(f"SELECT {STEP_COLUMNS} FROM steps WHERE run = ? ORDER BY step",
                           [run]).fetchall()
        return cls(array("q", (r[0] for r in rows)), [r[1] for r in rows],
                   [r[2] for r in rows], [r[3] for r in rows], [r[4] for r in rows],
                   [r[5] for r in rows], [r[6] for r in rows],
                   [_cursor(r[7]) for r in rows])

    def row(self, step: int) -> tuple[Any, ...] | None:
        """(step, loss, grad_norm, lr, clipped, skipped, state_hash, cursor), or None."""
        at = bisect.bisect_left(self.steps, step)
        if at == len(self.steps) or self.steps[at] != step:
            return None
        return (step, self.loss[at], self.grad_norm[at], self.lr[at], self.clipped[at],
                self.skipped[at], self.state_hash[at], self.cursor[at])


def record_cursor(record: str) -> Any:
    """A step record's cursor (None when it has none), as the query path reads it."""
    return json.loads(record).get("cursor")


def _cursor(record: str) -> Any:
    import orjson

    try:  # orjson, five times faster, where it reads as json does
        value = orjson.loads(record)
    except orjson.JSONDecodeError:  # NaN, lone surrogates, ...: json reads those
        return record_cursor(record)
    if not isinstance(value, dict):
        return record_cursor(record)  # fails as the query path does
    cursor = value.get("cursor")
    # orjson reads an integer past 64 bits as a float, json as the integer
    return record_cursor(record) if isinstance(cursor, float) else cursor
