"""Batch digests (docs/chain-spec.md, "Batch digest") of consecutive steps, computed at
once from the occurrences that meet their windows: numpy and Arrow, no loop per segment.

Each window of the span gets the (step, rank) group that reads it, or none (a window a
data skip jumped over); the occurrences are cut at window edges (`window_piece_arrays`,
the stream's own cut), ordered by group, window and position, and written as the spec's
lines `window TAB doc_id TAB token_start TAB token_end LF` into one Arrow string array.
A group's lines then are one run of the array's bytes, hashed with one update after the
tag (BLAKE3 of a concatenation is the same as of its pieces fed one after another).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import blake3

from lineage.stream.batch_digest import BATCH_TAG
from lineage.stream.query import window_piece_arrays
from lineage.stream.schedule import RankRule

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import pyarrow as pa

    from lineage.stream.order import IntArray

# (step, first window, windows): the steps of a span, in window order, never overlapping
Span = tuple[int, int, int]


def span_digests(rows: pa.Table | None, spans: Sequence[Span], seq_len: int, rule: RankRule,
                 world_size: int) -> dict[int, list[str]]:
    """Per step of `spans`, the digest of each rank's segments (one digest when the rule
    cannot split the step among `world_size` ranks). `rows` holds at least the
    occurrences meeting the spans' windows (doc_id, stream_start, stream_end,
    doc_offset), in any order; None when there are none."""
    import numpy as np

    first, end = spans[0][1], spans[-1][1] + spans[-1][2]
    group, ranks = _window_groups(spans, rule, world_size)
    digests = ["blake3:" + blake3.blake3(BATCH_TAG).hexdigest()] * int(ranks.sum())
    if rows is not None and rows.num_rows:
        starts = rows["stream_start"].to_numpy()
        row, window, lo, hi = window_piece_arrays(
            starts, rows["stream_end"].to_numpy(), seq_len, first, end - 1)
        owner = group[window - first]
        read = owner >= 0  # not in a window a data skip jumped over
        if read.all():
            order = _group_order(lo, owner)
        else:
            kept = np.flatnonzero(read)
            within = _group_order(lo[kept], owner[kept])
            order = kept if within is None else kept[within]
        if order is not None:
            row, window, lo, hi, owner = (row[order], window[order], lo[order], hi[order],
                                          owner[order])
        shift = rows["doc_offset"].to_numpy()[row] - starts[row]
        doc_id = rows["doc_id"].take(row).combine_chunks()
        token_start, token_end = lo + shift, hi + shift
        tied = lo[1:] == lo[:-1]  # at one position, so in one window
        if tied.any():  # overlapping occurrences (no stream has them): the lines decide
            order = _tie_order(np.flatnonzero(tied), doc_id, token_start, token_end)
            window, token_start, token_end = window[order], token_start[order], token_end[order]
            doc_id = doc_id.take(order)
        _hash_groups(*_lines(window, doc_id, token_start, token_end), owner, digests)
    found, at = {}, 0
    for (step, _, _), count in zip(spans, ranks.tolist(), strict=True):
        found[step], at = digests[at:at + count], at + count
    return found


def _window_groups(spans: Sequence[Span], rule: RankRule, world_size: int,
                   ) -> tuple[IntArray, IntArray]:
    """(the group of each window from the first span's first window to the last span's
    end, -1 for a window no step reads; the number of groups of each step). A step's
    groups are its ranks, numbered on from the groups of the steps before it."""
    import numpy as np

    first = spans[0][1]
    firsts = np.array([f for _, f, _ in spans], dtype=np.int64)
    counts = np.array([c for _, _, c in spans], dtype=np.int64)
    sizes, size_of = np.unique(counts, return_inverse=True)  # a few batch sizes
    splits = np.array([rule.splits(int(c), world_size) for c in sizes], dtype=bool)[size_of]
    ranks = np.where(splits, world_size, 1)
    step = np.repeat(np.arange(len(spans)), counts)  # each read window's step, in order
    index = np.arange(len(step)) - np.repeat(np.cumsum(counts) - counts, counts)
    rank = np.zeros(len(step), dtype=np.int64)
    split = splits[step]  # a world the rule cannot split reads the step as one batch
    if split.any():
        rank[split] = rule.rank_of(index[split], counts[step[split]], world_size)
    group = np.full(spans[-1][1] + spans[-1][2] - first, -1, dtype=np.int64)
    group[firsts[step] - first + index] = (np.cumsum(ranks) - ranks)[step] + rank
    return group, ranks


def _group_order(position: IntArray, group: IntArray) -> IntArray | None:
    """The order of segments by group, then stream position (so by window: a position
    is in one window); None when they are in it. Rows read in ordinal order and a rule
    that gives each rank consecutive windows need no sort."""
    import numpy as np

    order = None
    if len(position) > 1 and not bool(np.all(position[1:] >= position[:-1])):
        order = np.argsort(position, kind="stable")
    by_position = group if order is None else group[order]
    if len(group) > 1 and not bool(np.all(by_position[1:] >= by_position[:-1])):
        by_group = np.argsort(by_position, kind="stable")
        order = by_group if order is None else order[by_group]
    return order


def _lines(window: IntArray, doc_id: pa.Array, token_start: IntArray, token_end: IntArray,
           ) -> tuple[npt.NDArray[np.uint8], IntArray]:
    """The spec's lines, one a segment: their bytes, end to end, and where each begins
    (and the last ends)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    def text(values: IntArray) -> pa.Array:
        return pc.cast(pa.array(values), pa.string())

    # One join, each line ending in a tab that becomes its LF in place (the array is
    # made here and goes nowhere else): a second join to add the LF would copy it all.
    lines = pc.binary_join_element_wise(text(window), doc_id.cast(pa.string()),
                                        text(token_start), text(token_end), "", "\t")
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32)[
        lines.offset:lines.offset + len(lines) + 1].astype(np.int64)
    data = np.frombuffer(lines.buffers()[2], dtype=np.uint8)[:offsets[-1]]
    if not data.flags.writeable:  # an Arrow build whose new buffers are not mutable
        data = data.copy()
    data[offsets[1:] - 1] = ord("\n")
    return data, offsets


def _tie_order(tied: IntArray, doc_id: pa.Array, token_start: IntArray, token_end: IntArray,
               ) -> IntArray:
    """The segments' order when some share a window and a position (`tied[i]`: segments i
    and i + 1 do): each such run by doc_id, token_start, token_end, as the lines sort."""
    import numpy as np

    order = np.arange(len(doc_id))
    runs: list[list[int]] = []
    for i in tied.tolist():
        if runs and runs[-1][-1] == i:
            runs[-1].append(i + 1)
        else:
            runs.append([i, i + 1])
    for run in runs:
        order[run] = sorted(run, key=lambda i: (doc_id[i].as_py(), int(token_start[i]),
                                                int(token_end[i])))
    return order


def _hash_groups(data: npt.NDArray[np.uint8], offsets: IntArray, owner: IntArray,
                 digests: list[Any]) -> None:
    """digests[g] = H(tag || the lines of group g), for each group with lines; `owner`
    (each line's group) ascends."""
    import numpy as np

    if not len(owner):
        return
    view = data.data  # the bytes, as a memoryview
    bounds = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1], True])
    at = offsets[bounds].tolist()
    for group, a, b in zip(owner[bounds[:-1]].tolist(), at[:-1], at[1:], strict=True):
        hasher = blake3.blake3(BATCH_TAG)
        hasher.update(view[a:b])
        digests[group] = "blake3:" + hasher.hexdigest()
