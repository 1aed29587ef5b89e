"""Batch-size schedules and rank rules: how a stream's windows are cut into steps, and how
a step's windows are split among ranks (docs/stream-spec.md §4).

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
from functools import cached_property
from typing import Any

from lineage.errors import UsageError


@dataclass(frozen=True)
class BatchSchedule:
    """Windows per step by step ranges: ((0, b0), (s1, b1), ...), s strictly increasing.

    Neighbouring segments with the same windows per step are merged, so every schedule
    has one form: a schedule of one segment is a fixed batch, whatever it was written as.
    """

    segments: tuple[tuple[int, int], ...]

    def __post_init__(self) -> None:
        if not self.segments or self.segments[0][0] != 0:
            raise UsageError("a batch schedule starts at step 0")
        for (first, _), (after, _) in zip(self.segments, self.segments[1:], strict=False):
            if after <= first:
                raise UsageError(f"batch schedule: step {after} does not follow step {first}")
        if any(windows < 1 for _, windows in self.segments):
            raise UsageError("batch schedule: every step takes at least 1 window")
        merged = [self.segments[0]]
        for first, windows in self.segments[1:]:
            if windows != merged[-1][1]:
                merged.append((first, windows))
        object.__setattr__(self, "segments", tuple(merged))

    @classmethod
    def fixed(cls, batch: int) -> BatchSchedule:
        return cls(((0, batch),))

    @classmethod
    def from_json(cls, value: Sequence[Sequence[int]]) -> BatchSchedule:
        return cls(tuple((int(first), int(windows)) for first, windows in value))

    def to_json(self) -> list[list[int]]:
        """The canonical form that enters the stream's parameters (and so its spec hash)."""
        return [[first, windows] for first, windows in self.segments]

    def to_text(self) -> str:
        """The `--schedule` form: `0:4,100:8`."""
        return ",".join(f"{first}:{windows}" for first, windows in self.segments)

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

    def full_steps(self, windows: int) -> int:
        """Whole steps within the first `windows` windows (a partial last step left out)."""
        return self.step_of_window(windows) if windows > 0 else 0

    @cached_property
    def _firsts(self) -> list[int]:
        return [first for first, _ in self.segments]

    @cached_property
    def _starts(self) -> list[int]:
        """The first window of each segment."""
        starts, total = [0], 0
        for (first, windows), (after, _) in zip(self.segments, self.segments[1:],
                                                strict=False):
            total += (after - first) * windows
            starts.append(total)
        return starts


def parse_schedule(text: str, *, option: str = "--schedule") -> BatchSchedule:
    """`0:4,100:8` (first step : windows per step, ...) as a schedule."""
    return BatchSchedule(tuple(_pairs(text, option)))


def parse_token_schedule(text: str, seq_len: int, *,
                         option: str = "--schedule-tokens") -> BatchSchedule:
    """`0:4,1000000:8` (tokens consumed : windows per step, ...) as step ranges.

    docs/stream-spec.md §4: a step takes the windows of the last segment whose token
    threshold the tokens consumed before the step have reached. So segment i begins at
    the first step that starts at or after t_i tokens; a segment whose threshold is
    passed before any of its steps begins is replaced by the next one.
    """
    pairs = _pairs(text, option)
    if pairs[0][0] != 0:
        raise UsageError(f"{option} {text!r}: the first segment starts at 0 tokens")
    for (tokens, _), (after, _) in zip(pairs, pairs[1:], strict=False):
        if after <= tokens:
            raise UsageError(f"{option} {text!r}: {after} tokens does not follow {tokens}")
    segments = [(0, pairs[0][1])]
    consumed = 0  # tokens consumed before the last segment's first step
    for threshold, windows in pairs[1:]:
        first, per_step = segments[-1]
        step_tokens = per_step * seq_len
        steps = max(0, -(-(threshold - consumed) // step_tokens))
        if steps == 0:
            segments[-1] = (first, windows)
            continue
        consumed += steps * step_tokens
        segments.append((first + steps, windows))
    return BatchSchedule(tuple(segments))


def schedule_option(steps: str | None, tokens: str | None, seq_len: int) -> BatchSchedule | None:
    """The schedule of `--schedule` (step ranges) or `--schedule-tokens` (tokens), if any."""
    if steps is not None and tokens is not None:
        raise UsageError("give --schedule (by steps) or --schedule-tokens (by tokens), not both")
    if steps is not None:
        return parse_schedule(steps)
    return None if tokens is None else parse_token_schedule(tokens, seq_len)


def _pairs(text: str, option: str) -> list[tuple[int, int]]:
    pairs = []
    for item in text.split(","):
        left, colon, right = item.strip().partition(":")
        if not colon or not left.strip().isdigit() or not right.strip().isdigit():
            raise UsageError(f"{option} {text!r}: expected START:WINDOWS pairs separated by "
                             "commas, such as 0:4,100:8")
        pairs.append((int(left), int(right)))
    return pairs


RANK_RULES = ("contiguous", "strided", "micro-batches")


@dataclass(frozen=True)
class RankRule:
    """Which of a step's windows a rank reads.

    - `contiguous`: rank r of W reads the r-th of W equal consecutive slices (lineage's
      own split; W must divide the step's windows).
    - `strided`: rank r reads windows r, r+W, r+2W, ... of the step (a `rank::world`
      slice of the global batch; W must divide the step's windows).
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

    @classmethod
    def parse(cls, text: str) -> RankRule:
        """`contiguous`, `strided` or `micro-batches:M` (the `--rank-rule` option)."""
        rule, colon, size = text.strip().partition(":")
        if rule == "micro-batches":
            if not size.isdigit():
                raise UsageError(f"--rank-rule {text!r}: give the micro-batch size, such "
                                 "as micro-batches:2")
            return cls(rule, int(size))
        if colon:
            raise UsageError(f"--rank-rule {text!r}: only micro-batches takes a size")
        return cls(rule)

    @property
    def is_default(self) -> bool:
        return self.rule == "contiguous"

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule} if self.micro_batch is None else {
            "micro_batch": self.micro_batch, "rule": self.rule}

    def to_text(self) -> str:
        return self.rule if self.micro_batch is None else f"{self.rule}:{self.micro_batch}"

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> RankRule:
        return cls(str(value["rule"]), value.get("micro_batch"))

    def check(self, count: int, world_size: int) -> None:
        """UsageError unless `world_size` ranks can split a step of `count` windows."""
        if world_size < 1:
            raise UsageError(f"--world-size must be at least 1, not {world_size}")
        unit = world_size * (self.micro_batch or 1)
        if count % unit:
            what = f"--world-size {world_size}" if self.micro_batch is None else \
                f"--world-size {world_size} times micro-batch {self.micro_batch}"
            raise UsageError(f"{what} does not divide the step's {count} windows "
                             f"(rank rule {self.to_text()})")

    def splits(self, count: int, world_size: int) -> bool:
        return world_size >= 1 and count % (world_size * (self.micro_batch or 1)) == 0

    def rank_of(self, index: int, count: int, world_size: int) -> int:
        """The rank that reads the step's `index`-th window (the rule must split it)."""
        if self.rule == "strided":
            return index % world_size
        if self.rule == "micro-batches":
            return (index // (self.micro_batch or 1)) % world_size
        return index // (count // world_size)

    def windows(self, step_windows: range, rank: int, world_size: int) -> list[int]:
        """The windows of one step that rank `rank` of `world_size` reads, in its order."""
        count = len(step_windows)
        self.check(count, world_size)
        if not 0 <= rank < world_size:
            raise UsageError(f"--rank must be in 0..{world_size - 1}, not {rank}")
        if self.rule == "strided":
            return list(step_windows[rank::world_size])
        if self.rule == "micro-batches":
            size = self.micro_batch or 1
            return [w for m in range(rank, count // size, world_size)
                    for w in step_windows[m * size:(m + 1) * size]]
        per_rank = count // world_size
        return list(step_windows[rank * per_rank:(rank + 1) * per_rank])
