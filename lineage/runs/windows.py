"""Which of a run's steps read a stream window, by the cursor rule of docs/chain-spec.md:
step s read windows [cursor_s - B_s, cursor_s), B_s the stream's windows per step at step s;
windows a data skip jumped over were read by no step. Only runs with a data skip need
this: the others read the steps of the stream's schedule ([s·B, (s+1)·B) for a fixed B)."""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Iterable
from typing import Any

from lineage.stream.schedule import BatchSchedule


class RunWindows:
    def __init__(self, steps: list[int], firsts: list[int], counts: list[int]) -> None:
        self.steps, self.firsts, self.counts = steps, firsts, counts
        self.end = firsts[-1] + counts[-1] if firsts else 0  # the cursor after the last step

    @classmethod
    def read(cls, con: Any, run: str, schedule: BatchSchedule) -> RunWindows | None:
        """The run's windows, or None when it declared no data skip."""
        if con.execute("SELECT count(*) FROM steps WHERE run = ? AND contains(record, "
                       "'\"data_skip\":')", [run]).fetchone()[0] == 0:
            return None
        steps, firsts, counts = [], [], []
        for step, text in con.execute("SELECT step, record FROM steps WHERE run = ? "
                                      "ORDER BY step", [run]).fetchall():
            cursor = json.loads(text).get("cursor")
            if isinstance(cursor, int) and not isinstance(cursor, bool):
                steps.append(step)
                counts.append(schedule.windows_of(step))
                firsts.append(cursor - counts[-1])
        return cls(steps, firsts, counts)

    def steps_for(self, windows: Iterable[int]) -> tuple[list[int], bool]:
        """The steps that read these windows, and whether the run jumped over any."""
        read, jumped = set(), False
        for window in windows:
            i = bisect_right(self.firsts, window) - 1
            if i >= 0 and window < self.firsts[i] + self.counts[i]:
                read.add(self.steps[i])
            elif window < self.end:
                jumped = True
        return sorted(read), jumped
