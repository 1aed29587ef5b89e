"""The stream's keys and their sort as independent tasks: a range-partitioned sort.

On a cluster (`lineage stream build --engine ray`) the keys are not computed by one
DuckDB query over the whole corpus but by one task per documents part (`part_keys`: the
same SHA-256 key, §2, for every (document, epoch) of the part), which range-partitions its
rows by the top bits of their 64-bit key prefix into files under the staging folder. One
task per key range (`sort_range`) then sorts that range's rows by key, with the sort
the local build uses. The ranges, read back in order, are the candidates sorted by key:
`lineage.stream.order.place(..., presorted=True)` goes on from there exactly as the local
build does (grouping by source and epoch is a stable radix sort; keys equal in their
first 64 bits are ordered by their full keys in both), so the stream is the same.

Plain functions over files: the executor that runs them (ingest/engine.py) is any object
with `map(fn, items)`; nothing here knows which one it is.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from lineage.stream.order import Candidates

ROWS_PER_RANGE = 4_000_000  # candidates a sort task holds: ~128 MB of its arrays
ROWS_PER_KEYS = 500_000  # documents a key task hashes (a part holds up to 4M)
_COLUMNS = (("rid", "<i8"), ("srank", "<i4"), ("epoch", "<i4"), ("n_tokens", "<i8"),
            ("k64", "<u8"))


class Executor(Protocol):
    def map(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]: ...


@dataclass(frozen=True)
class Distributed:
    """Where a build's tasks run, and the shared folder their files go to."""

    executor: Executor
    staging: Path


@dataclass(frozen=True)
class KeyTask:
    path: str  # one documents part
    first_rid: int  # the rid of its first row
    rows: tuple[int, int]  # the rows of the part this task reads: [start, end)
    prefix: str  # the key's prefix (spec, seed)
    sources: tuple[tuple[str, str, int, int], ...]  # (source, src hex, epochs, srank)
    out: str  # the task's files: `<out>-<range>.npy`
    bits: int  # ranges by the top `bits` bits of k64


@dataclass(frozen=True)
class RangeTask:
    inputs: tuple[str, ...]  # every key task's file of this range
    out: str


def range_bits(candidates: int) -> int:
    """Key ranges as a power of two: at least two, about ROWS_PER_RANGE rows each."""
    return max(1, math.ceil(math.log2(max(candidates / ROWS_PER_RANGE, 1))))


def part_keys(task: KeyTask) -> list[int]:
    """Every (document, epoch) of one part with its key prefix, written as one file per
    key range; the rows in each range."""
    import numpy as np

    from lineage.stream.order_files import part_key_batches

    batches = list(part_key_batches(task.path, task.first_rid, task.rows, task.prefix,
                                    task.sources))
    rows = np.empty(sum(batch.num_rows for batch in batches), dtype=list(_COLUMNS))
    at = 0
    for batch in batches:
        for name, _ in _COLUMNS:
            rows[name][at:at + batch.num_rows] = batch.column(name).to_numpy()
        at += batch.num_rows
    ranges = (rows["k64"] >> np.uint64(64 - task.bits)).astype(np.int64)
    by_range = np.argsort(ranges, kind="stable")
    bounds = np.searchsorted(ranges[by_range], np.arange((1 << task.bits) + 1))
    counts = []
    for r in range(1 << task.bits):
        np.save(f"{task.out}-{r:05d}.npy", rows[by_range[bounds[r]:bounds[r + 1]]])
        counts.append(int(bounds[r + 1] - bounds[r]))
    return counts


def sort_range(task: RangeTask) -> int:
    """One key range's rows sorted by key, as `_sequence_order` sorts them; its rows."""
    import numpy as np

    rows = np.concatenate([np.load(path) for path in task.inputs])
    rows = rows[np.argsort(rows["k64"])]
    np.save(task.out, rows)
    for path in task.inputs:
        Path(path).unlink()
    return len(rows)


def sorted_candidates(
    distributed: Distributed, parts: list[tuple[str, int, int]], prefix: str,
    sources: list[tuple[str, str, int, int]], candidates: int,
) -> Candidates:
    """The candidates of `parts` (path, first rid, rows) sorted by key prefix, computed
    and sorted by tasks; `sources` are (source, src hex, epochs, srank)."""
    import numpy as np

    from lineage.stream.order import Candidates

    bits = range_bits(candidates)
    folder = distributed.staging / "keys"
    folder.mkdir(parents=True, exist_ok=True)
    slices = [(path, first, (start, min(start + ROWS_PER_KEYS, rows)))
              for path, first, rows in parts for start in range(0, rows, ROWS_PER_KEYS)]
    key_tasks = [KeyTask(path, first, rows, prefix, tuple(sources),
                         str(folder / f"keys-{n:05d}"), bits)
                 for n, (path, first, rows) in enumerate(slices)]
    distributed.executor.map(part_keys, key_tasks)
    range_tasks = [RangeTask(tuple(f"{t.out}-{r:05d}.npy" for t in key_tasks),
                             str(folder / f"range-{r:05d}.npy")) for r in range(1 << bits)]
    distributed.executor.map(sort_range, range_tasks)
    rows = np.concatenate([_take(task.out) for task in range_tasks])
    return Candidates(**{name: _column(rows, name) for name, _ in _COLUMNS})


def _take(path: str) -> npt.NDArray[np.void]:
    import numpy as np

    rows: npt.NDArray[np.void] = np.load(path)
    Path(path).unlink()
    return rows


def _column(rows: Any, name: str) -> Any:
    import numpy as np

    return np.ascontiguousarray(rows[name])
