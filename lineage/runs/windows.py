"""Which of a run's steps read a stream window, by the cursor rule of docs/chain-spec.md:
step s read windows [cursor_s - B, cursor_s); windows a data skip jumped over were read by
no step. Only runs with a data skip need this: the others read [s·B, (s+1)·B)."""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Iterable
from typing import Any


class RunWindows:
    def __init__(self, steps: list[int], firsts: list[int], batch: int) -> None:
        self.steps, self.firsts, self.batch = steps, firsts, batch
        self.end = firsts[-1] + batch if firsts else 0  # the cursor after the last step

    @classmethod
    def read(cls, con: Any, run: str, batch: int) -> RunWindows | None:
        """The run's windows, or None when it declared no data skip."""
        if con.execute("SELECT count(*) FROM steps WHERE run = ? AND contains(record, "
                       "'\"data_skip\":')", [run]).fetchone()[0] == 0:
            return None
        steps, firsts = [], []
        for step, text in con.execute("SELECT step, record FROM steps WHERE run = ? "
                                      "ORDER BY step", [run]).fetchall():
            cursor = json.loads(text).get("cursor")
            if isinstance(cursor, int) and not isinstance(cursor, bool):
                steps.append(step)
                firsts.append(cursor - batch)
        return cls(steps, firsts, batch)

    def steps_for(self, windows: Iterable[int]) -> tuple[list[int], bool]:
        """The steps that read these windows, and whether the run jumped over any."""
        read, jumped = set(), False
        for window in windows:
            i = bisect_right(self.firsts, window) - 1
            if i >= 0 and window < self.firsts[i] + self.batch:
                read.add(self.steps[i])
            elif window < self.end:
                jumped = True
        return sorted(read), jumped
