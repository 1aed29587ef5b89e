"""The batch digests a stream implies for a run's steps (docs/chain-spec.md, "Batch digest").

Step s reads the B_s windows that end at its cursor: windows [cursor - B_s, cursor), B_s
the stream's windows per step at step s (its batch, or its schedule's); rank r of W gets
the windows the stream's rank rule gives it (contiguous: [cursor - B_s + r·B_s/W,
cursor - B_s + (r+1)·B_s/W)). Digests for many steps are made in one pass over the
occurrences, in window order.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import blake3

from lineage.store.base import BaseStore
from lineage.store.parts import part_files
from lineage.stream.batch_digest import BATCH_TAG
from lineage.stream.query import (
    stream_named,
    stream_rank_rule,
    stream_schedule,
    window_pieces,
)


def stream_batch_digests(store: BaseStore, stream: str, first_window: int,
                         world_size: int, *, step: int | None = None) -> list[str]:
    """Per rank, the digests of step `step` reading its windows from `first_window` on:
    what a trainer records for a step after a data skip (or any step). The step sets how
    many windows it reads (by the stream's schedule); left out, it is the step the
    schedule gives `first_window`."""
    with store.reader(views=False) as con:
        info = stream_named(con, stream)
        if step is None:
            step = stream_schedule(info).step_of_window(first_window)
        return batch_digests(con, store, info, world_size, [(step, first_window)])[step]


def batch_digests(con: Any, store: BaseStore, stream: dict[str, Any], world_size: int,
                  starts: list[tuple[int, int]]) -> dict[int, list[str]]:
    """Per step, the digest of each rank's segments; `starts` holds (step, first window)
    in increasing window order, the windows of different steps never overlapping."""
    if not starts:
        return {}
    schedule, rule = stream_schedule(stream), stream_rank_rule(stream)
    seq_len = int(stream["seq_len"])
    spans = [(step, first, schedule.windows_of(step)) for step, first in starts]
    hashers: dict[tuple[int, int], Any] = {}
    index, (step, first, count) = 0, spans[0]
    for window, doc_id, token_start, token_end in _segments(
            con, store, stream, spans[0][1], spans[-1][1] + spans[-1][2], seq_len):
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


def _segments(con: Any, store: BaseStore, stream: dict[str, Any], first_window: int,
              end_window: int, seq_len: int) -> Iterator[tuple[int, str, int, int]]:
    """(window, doc_id, token_start, token_end) in window and position order."""
    start, end = first_window * seq_len, end_window * seq_len
    files = part_files(con, store, "occurrences", stream["name"], span=(start, end))
    if not files:
        return
    cursor = con.execute(
        "SELECT doc_id, stream_start, stream_end, doc_offset FROM read_parquet(?) "
        "WHERE stream_end > ? AND stream_start < ? ORDER BY ordinal", [files, start, end])
    pending: list[tuple[int, int, str, int, int]] = []
    while rows := cursor.fetchmany(8192):
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
