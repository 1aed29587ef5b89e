"""The rules a harness doc_map must keep, checked on whole columns at once (numpy).

`check_rows`: each row on its own (its shard, source, local document and token range).
`check_layout`: the rows together (windows full and in order, steps following the
batch ramp, micro-batches and ranks following micro-batch mod W). Each returns the
problems found, naming the first rows (1-based, in file order) that break each rule.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lineage.ingest.orders.indexed import IndexedDataset
from lineage.ingest.orders.open_transformers_manifest import HarnessManifest

if TYPE_CHECKING:
    import numpy as np

_SHOW = 3


def named(mask: np.ndarray[Any, Any], rule: str) -> str | None:
    """'rows 4, 9, 12: rule' for the first rows where `mask` holds, else None."""
    import numpy as np

    where = np.flatnonzero(mask)
    if not len(where):
        return None
    rows = ", ".join(str(int(i) + 1) for i in where[:_SHOW])
    more = f" (and {len(where) - _SHOW} more)" if len(where) > _SHOW else ""
    return f"row{'s' if len(where) > 1 else ''} {rows}{more}: {rule}"


def check_rows(rows: dict[str, Any], run: HarnessManifest, datasets: list[IndexedDataset]
               ) -> list[str]:
    """Sets rows['global_doc'] (the manifest's document index of each row)."""
    import numpy as np
    import pyarrow as pa

    names = pa.array([shard.shard for shard in run.shards], pa.string())
    found = _positions(rows["shard"], names)
    known = found >= 0
    shard = np.where(known, found, 0)  # unknown: any shard, every mask below excludes it
    del found
    sources = pa.array([s.source for s in run.shards], pa.string())
    # the same text has the same first position: compared by position, not by string
    source_differs = _positions(rows["source"], sources) \
        != _positions(sources, sources)[shard]
    sizes = np.array([d.sequences for d in datasets], dtype=np.int64)
    firsts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    local = rows["local_doc"]
    in_shard = known & (local >= 0) & (local < sizes[shard])
    # in place: 14.5M rows make each int64 temporary 116 MB
    global_doc = firsts[shard]
    del shard
    global_doc += local
    global_doc[~in_shard] = 0
    lengths = np.concatenate([d.sequence_lengths for d in datasets]).astype(np.int64)
    start, end = rows["token_start"], rows["token_end"]
    rows["global_doc"] = global_doc
    checks = [
        (~known, "shard is not in the manifest"),
        (known & source_differs, "source is not the manifest's source of that shard"),
        (known & ~in_shard, "local_doc is outside the shard (0 <= local_doc < its "
         "documents in the .idx)"),
        (in_shard & ((start < 0) | (end <= start) | (end > lengths[global_doc])),
         "token range must satisfy 0 <= token_start < token_end <= the document's "
         "length in the .idx"),
        ((rows["window"] < 0) | (rows["slot"] < 0) | (rows["step"] < 0)
         | (rows["micro_batch"] < 0) | (rows["rank"] < 0),
         "step, window, micro_batch, slot and rank must be >= 0"),
    ]
    return [p for mask, rule in checks if (p := named(mask, rule)) is not None]


def _positions(column: Any, names: Any) -> np.ndarray[Any, Any]:
    """Each row's text as its first position in `names` (-1: not there); a dictionary
    column is looked up once per dictionary entry."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(column.type):
        return _positions(column.dictionary, names)[  # type: ignore[no-any-return]
            column.indices.to_numpy(zero_copy_only=False)]
    found = pc.index_in(column, value_set=names)  # int32: half the memory of int64
    return found.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int32, copy=False)  # type: ignore[no-any-return]


def check_layout(rows: dict[str, Any], run: HarnessManifest) -> list[str]:
    """Windows full and in order, then steps, micro-batches and ranks."""
    problems = _window_problems(rows, run.seq_len)
    if problems:
        return problems
    problems = _schedule_problems(run)
    return problems or _step_problems(rows, run)


def _window_problems(rows: dict[str, Any], seq_len: int) -> list[str]:
    import numpy as np

    window, slot = rows["window"], rows["slot"]
    if not len(window):
        return ["the doc_map has no rows"]
    end = rows["token_end"] - rows["token_start"]
    end += slot  # in place: one int64 temporary, not three
    # against the row before (window -1 ending at seq_len before the first), compared
    # on slices rather than shifted copies
    same = np.empty(len(window), dtype=bool)
    same[0] = window[0] == -1
    same[1:] = window[1:] == window[:-1]
    new = np.empty(len(window), dtype=bool)
    new[0] = window[0] == 0
    np.equal(window[1:], window[:-1] + 1, out=new[1:])
    after_previous = np.empty(len(window), dtype=bool)
    after_previous[0] = slot[0] == seq_len
    after_previous[1:] = slot[1:] == end[:-1]
    last_of_window = np.concatenate((window[1:] != window[:-1], [True]))
    checks = [
        (~same & ~new, "windows must run 0, 1, 2, ... in file order (a window skipped, "
         "repeated later or out of order)"),
        (same & ~after_previous, "a segment must start where the one before it in "
         "its window ends"),
        (new & (slot != 0), "a window's first segment must start at slot 0"),
        (last_of_window & (end != seq_len), f"every window holds exactly seq_len {seq_len} "
         "tokens (this one ends elsewhere)"),
    ]
    return [p for mask, rule in checks if (p := named(mask, rule)) is not None]


def _schedule_problems(run: HarnessManifest) -> list[str]:
    per_micro = run.micro_batch_size * run.world_size
    wrong = [windows for _, windows in run.schedule.segments if windows % per_micro]
    if wrong:
        return [f"{run.path}: a step of {wrong[0]} windows cannot be cut into micro-batches "
                f"of {run.micro_batch_size} for {run.world_size} ranks"]
    return []


def _step_problems(rows: dict[str, Any], run: HarnessManifest) -> list[str]:
    import numpy as np

    schedule = run.schedule
    firsts = np.array([first for first, _ in schedule.segments], dtype=np.int64)
    sizes = np.array([windows for _, windows in schedule.segments], dtype=np.int64)
    starts = np.array([schedule.first_window(int(f)) for f in firsts], dtype=np.int64)
    window = rows["window"]
    segment = np.searchsorted(starts, window, side="right") - 1
    step = firsts[segment] + (window - starts[segment]) // sizes[segment]
    first_window = starts[segment] + (step - firsts[segment]) * sizes[segment]
    micro = (window - first_window) // run.micro_batch_size
    checks = [
        (rows["step"] != step, "step is not the step the batch ramp gives its window"),
        (rows["micro_batch"] != micro, "micro_batch must be (window - the step's first "
         f"window) // micro_batch_size {run.micro_batch_size}"),
        (rows["rank"] != micro % run.world_size, "rank must be micro_batch mod world_size "
         f"{run.world_size}"),
    ]
    problems = [p for mask, rule in checks if (p := named(mask, rule)) is not None]
    windows = int(window[-1]) + 1
    last = int(step[-1])
    if not problems and schedule.first_window(last) + schedule.windows_of(last) != windows:
        problems.append(f"the last step ({last}) holds "
                        f"{windows - schedule.first_window(last)} of its "
                        f"{schedule.windows_of(last)} windows (the harness trains whole steps)")
    return problems
