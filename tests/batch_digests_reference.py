"""The batch digests of docs/chain-spec.md ("Batch digest") the plain way: one pass over
the occurrences in ordinal order, each cut at window edges one at a time
(`window_pieces`, the stream spec's §6 cut), each segment's line hashed on its own.

This was lineage's own code (lineage/runs/chain_batches.py) before the digests were
made a chunk of steps at a time on Arrow columns; the tests hold the new code to it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import blake3

from lineage.store.part_select import part_files
from lineage.stream.batch_digest import BATCH_TAG
from lineage.stream.query import window_pieces
from lineage.stream.schedule import BatchSchedule, RankRule

# (doc_id, stream_start, stream_end, doc_offset); batches of them in ordinal order
Row = tuple[str, int, int, int]


def reference_digests(batches: Iterable[list[Row]], schedule: BatchSchedule, rule: RankRule,
                      seq_len: int, world_size: int, starts: list[tuple[int, int]],
                      ) -> dict[int, list[str]]:
    """Per step, the digest of each rank's segments; `starts` holds (step, first window)
    in increasing window order, the windows of different steps never overlapping."""
    if not starts:
        return {}
    spans = [(step, first, schedule.windows_of(step)) for step, first in starts]
    hashers: dict[tuple[int, int], Any] = {}
    index, (step, first, count) = 0, spans[0]
    for window, doc_id, token_start, token_end in _segments(
            batches, spans[0][1], spans[-1][1] + spans[-1][2], seq_len):
        while window >= first + count and index + 1 < len(spans):
            index += 1
            step, first, count = spans[index]
        if not first <= window < first + count:
            continue  # a window a data skip jumped over
        # a world the rule cannot split reads the step as one batch: one digest
        rank = rule.rank_of(window - first, count, world_size) \
            if rule.splits(count, world_size) else 0
        hasher = hashers.get((step, rank))
        if hasher is None:
            hasher = hashers[(step, rank)] = blake3.blake3(BATCH_TAG)
        hasher.update(f"{window}\t{doc_id}\t{token_start}\t{token_end}\n".encode())
    empty = "blake3:" + blake3.blake3(BATCH_TAG).hexdigest()
    return {s: ["blake3:" + hashers[(s, r)].hexdigest() if (s, r) in hashers else empty
                for r in range(world_size if rule.splits(count, world_size) else 1)]
            for s, _, count in spans}


def store_rows(con: Any, store: Any, stream: str, first_window: int, end_window: int,
               seq_len: int) -> Iterator[list[Row]]:
    """The stream's occurrences that meet windows first_window..end_window - 1, in
    ordinal order and batches of 8,192, read from its parts as the old code read them."""
    start, end = first_window * seq_len, end_window * seq_len
    files = part_files(con, store, "occurrences", stream, span=(start, end))
    if not files:
        return
    cursor = con.execute(
        "SELECT doc_id, stream_start, stream_end, doc_offset FROM read_parquet(?) "
        "WHERE stream_end > ? AND stream_start < ? ORDER BY ordinal", [files, start, end])
    while rows := cursor.fetchmany(8192):
        yield rows


def _segments(batches: Iterable[list[Row]], first_window: int, end_window: int, seq_len: int,
              ) -> Iterator[tuple[int, str, int, int]]:
    """(window, doc_id, token_start, token_end) in window and position order."""
    pending: list[tuple[int, int, str, int, int]] = []
    for rows in batches:
        for doc_id, a, b, offset in rows:
            pending += [(w, lo, doc_id, token_start, token_end) for w, lo, token_start, token_end
                        in window_pieces(a, b, offset, seq_len, first_window, end_window - 1)]
        # segments of finished windows can go out in order; keep the last window open
        if pending:
            open_window = pending[-1][0]
            pending.sort()
            done = [p for p in pending if p[0] < open_window]
            pending = [p for p in pending if p[0] >= open_window]
            for w, _, doc_id, start, end in done:
                yield w, doc_id, start, end
    for w, _, doc_id, start, end in sorted(pending):
        yield w, doc_id, start, end
