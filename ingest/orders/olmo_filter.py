"""OLMo-core's instance filter: instances that repeat themselves are masked, not trained on.

With an `InstanceFilterConfig`, an OLMo-core dataset marks each instance it yields with
`instance_mask`, false when some run of tokens repeats too often, and the train module
sets every label of a masked instance to the ignore index: its tokens are read, but no
loss is taken on them. lineage therefore stores no segment for a masked instance's
window (the window keeps its place in the step).

The test is OLMo-core's `find_periodic_sequences` (olmo_core/data/utils.py): for each
period p from `min_period` to min(`max_period`, length // 3), the instance is padded to
whole rows of p tokens and each row compared with the one before it (the first with the
last, which always holds padding). A run of rows each equal to the one before is a
repetition; it reaches back into the row before the run by that row's trailing tokens
that equal their counterparts (to the row before that), and forward into the row after
the run by its leading ones. It spans `times` = ⌊(end - start) / p⌋ periods; one with
`times` >= `max_count` masks the instance.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from lineage.errors import UsageError


@dataclass(frozen=True)
class InstanceFilter:
    """`InstanceFilterConfig`'s settings, by its names' meaning and with its defaults."""

    max_period: int = 13
    min_period: int = 1
    max_count: int = 32

    def __post_init__(self) -> None:
        if self.min_period < 1 or self.max_period < self.min_period or self.max_count < 1:
            raise UsageError("instance filter: need 1 <= min period <= max period and a max "
                             "count of at least 1")

    def to_json(self) -> dict[str, int]:
        return {"repetition_max_period": self.max_period,
                "repetition_min_period": self.min_period,
                "repetition_max_count": self.max_count}

    @classmethod
    def parse(cls, text: str) -> InstanceFilter:
        """'MAX_PERIOD:MIN_PERIOD:MAX_COUNT', e.g. '13:1:32' (the defaults)."""
        try:
            max_period, min_period, max_count = (int(part) for part in text.split(":"))
        except ValueError:
            raise UsageError(f"--instance-filter {text!r}: give MAX_PERIOD:MIN_PERIOD:"
                             "MAX_COUNT, e.g. 13:1:32 (OLMo-core's defaults)") from None
        return cls(max_period, min_period, max_count)


def is_masked(tokens: np.ndarray, rule: InstanceFilter) -> bool:
    """Does OLMo-core's filter mask an instance of these tokens?"""
    values = np.asarray(tokens, dtype=np.int64)
    n = len(values)
    for period in range(rule.min_period, min(rule.max_period, n // 3) + 1):
        rows = n // period + 1  # one more row than whole ones: padding always follows
        flat = np.full(rows * period, -1, dtype=np.int64)
        flat[:n] = values
        grid = flat.reshape(rows, period)
        same = grid == np.roll(grid, 1, axis=0)
        equal_rows = np.flatnonzero(same.all(axis=1))
        if not len(equal_rows):
            continue
        breaks = np.flatnonzero(np.diff(equal_rows) != 1)
        for first, last in zip(equal_rows[np.concatenate(([0], breaks + 1))],
                               equal_rows[np.concatenate((breaks, [len(equal_rows) - 1]))],
                               strict=True):
            back = _trailing_true(same[first - 1])
            ahead = _leading_true(same[last + 1])
            times = ((last + 1) * period + ahead - ((first - 1) * period - back)) // period
            if times > 2 and times >= rule.max_count:
                return True
    return False


def _leading_true(row: np.ndarray) -> int:
    false = np.flatnonzero(~row)
    return int(false[0]) if len(false) else len(row)


def _trailing_true(row: np.ndarray) -> int:
    """The Trues that end the row; none when the row is all True (a row in the run)."""
    false = np.flatnonzero(~row)
    return len(row) - 1 - int(false[-1]) if len(false) else 0


def masked_windows(order: np.ndarray, tokens_of: Callable[[int], np.ndarray],
                   rule: InstanceFilter) -> np.ndarray:
    """For each window (order[w] the instance it read), whether the filter masks it; each
    instance is tested once, however often it was read."""
    instances, where = np.unique(np.asarray(order, dtype=np.int64), return_inverse=True)
    masked = np.array([is_masked(tokens_of(int(i)), rule) for i in instances], dtype=bool)
    return masked[where] if len(instances) else np.zeros(len(order), dtype=bool)
