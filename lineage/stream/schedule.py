"""Batch-size schedules and rank rules: how a stream's windows are cut into steps, and how
a step's windows are split among ranks (docs/stream-spec.md).

A fixed-batch stream takes `B` windows a step: step `s` holds windows `[s·B, (s+1)·B)`.
A schedule changes `B` by step ranges: segments `(first_step, windows_per_step)`, the
first starting at step 0, each holding until the next begins. The order of windows is
the same either way; only where one step ends and the next begins moves.

A rank rule says which of a step's windows rank `r` of `W` read, as the run's framework
split them; the rule is part of the stream's parameters, so an answer can state it.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lineage.errors import UsageError


@dataclass(frozen=True)
class BatchSchedule:
    """Windows per step by step ranges: ((0, b0), (s1, b1), ...), s strictly increasing."""

    segments: tuple[tuple[int, int], ...]

    def __post_init__(self) -> None:
        if not self.segments or self.segments[0][0] != 0:
            raise UsageError("a batch schedule starts at step 0")
        for (first, windows), (after, _) in zip(self.segments, self.segments[1:], strict=False):
            if after <= first:
                raise UsageError(f"batch schedule: step {after} does not follow step {first}")
            if windows < 1:
                raise UsageError("batch schedule: every step takes at least 1 window")
        if self.segments[-1][1] < 1:
            raise UsageError("batch schedule: every step takes at least 1 window")

    @classmethod
    def fixed(cls, batch: int) -> BatchSchedule:
        return cls(((0, batch),))

    @classmethod
    def from_json(cls, value: Sequence[Sequence[int]]) -> BatchSchedule:
        return cls(tuple((int(first), int(windows)) for first, windows in value))

    def to_json(self) -> list[list[int]]:
        """The canonical form that enters the stream's parameters (and so its spec hash)."""
        return [[first, windows] for first, windows in self.segments]

    @property
    def is_fixed(self) -> bool:
        return len(self.segments) == 1

    def windows_of(self, step: int) -> int:
        """How many windows step `step` takes."""
        index = bisect.bisect_right(self._firsts, step) - 1
        return self.segments[index][1]

    def first_window(self, step: int) -> int:
        """The first window of step `step` (= windows consumed by the steps before it)."""
        index = bisect.bisect_right(self._firsts, step) - 1
        first, windows = self.segments[index]
        return self._starts[index] + (step - first) * windows

    def step_range(self, step: int) -> range:
        """The windows of step `step`."""
        start = self.first_window(step)
        return range(start, start + self.windows_of(step))

    def step_of_window(self, window: int) -> int:
        """The step that consumes window `window`."""
        index = bisect.bisect_right(self._starts, window) - 1
        first, windows = self.segments[index]
        return first + (window - self._starts[index]) // windows

    def steps_for(self, windows: int) -> int:
        """Steps needed to consume `windows` windows (the last one may be partial)."""
        if windows <= 0:
            return 0
        return self.step_of_window(windows - 1) + 1

    @property
    def _firsts(self) -> list[int]:
        return [first for first, _ in self.segments]

    @property
    def _starts(self) -> list[int]:
        starts, total = [], 0
        for index, (first, windows) in enumerate(self.segments):
            if index:
                previous_first, previous_windows = self.segments[index - 1]
                total += (first - previous_first) * previous_windows
            starts.append(total)
            del windows
        return starts


RANK_RULES = ("contiguous", "strided", "micro-batches")


@dataclass(frozen=True)
class RankRule:
    """Which of a step's windows a rank reads.

    - `contiguous`: rank r of W reads the r-th of W equal consecutive slices (lineage's
      own split; W must divide the step's windows).
    - `strided`: rank r reads windows r, r+W, r+2W, ... of the step (a `rank::world`
      slice of the global batch).
    - `micro-batches`: the step is cut into micro-batches of `micro_batch` windows;
      micro-batch m goes to rank m mod W (W·micro_batch must divide the step's windows).
    """

    rule: str = "contiguous"
    micro_batch: int | None = None

    def __post_init__(self) -> None:
        if self.rule not in RANK_RULES:
            raise UsageError(f"rank rule {self.rule!r}: expected one of {', '.join(RANK_RULES)}")
        if (self.rule == "micro-batches") != (self.micro_batch is not None):
            raise UsageError("rank rule: micro_batch is given with 'micro-batches' only")
        if self.micro_batch is not None and self.micro_batch < 1:
            raise UsageError("rank rule: micro_batch must be at least 1")

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule} if self.micro_batch is None else {
            "micro_batch": self.micro_batch, "rule": self.rule}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> RankRule:
        return cls(str(value["rule"]), value.get("micro_batch"))

    def windows(self, step_windows: range, rank: int, world_size: int) -> list[int]:
        """The windows of one step that rank `rank` of `world_size` reads, in its order."""
        count = len(step_windows)
        if not 0 <= rank < world_size:
            raise UsageError(f"--rank must be in [0, {world_size}), not {rank}")
        if self.rule == "strided":
            return list(step_windows[rank::world_size])
        if self.rule == "micro-batches":
            size = self.micro_batch or 1
            if count % (size * world_size):
                raise UsageError(f"--world-size {world_size} times micro-batch {size} does "
                                 f"not divide the step's {count} windows")
            return [w for m in range(rank, count // size, world_size)
                    for w in step_windows[m * size:(m + 1) * size]]
        if count % world_size:
            raise UsageError(f"--world-size {world_size} does not divide the step's "
                             f"{count} windows")
        per_rank = count // world_size
        return list(step_windows[rank * per_rank:(rank + 1) * per_rank])
