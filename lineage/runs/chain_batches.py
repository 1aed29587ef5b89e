"""The batch digests a stream implies for a run's steps (docs/chain-spec.md, "Batch digest").

A step reads the B windows that end at its cursor: windows [cursor - B, cursor); rank r of
W gets windows [cursor - B + r·B/W, cursor - B + (r+1)·B/W). Digests for many steps are
made in one pass over the occurrences, in window order.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import blake3

from lineage.store.base import BaseStore
from lineage.store.parts import part_files
from lineage.stream.batch_digest import BATCH_TAG
from lineage.stream.query import _resolve, window_pieces


def stream_batch_digests(store: BaseStore, stream: str, first_window: int,
                         world_size: int) -> list[str]:
    """Per rank, the digests of a step that reads the B windows from `first_window` on:
    what a trainer records for a step after a data skip (or any step)."""
    with store.reader(views=False) as con:
        info = _resolve(con, stream)
        return batch_digests(con, store, info, world_size, [(0, first_window)])[0]


def batch_digests(con: Any, store: BaseStore, stream: dict[str, Any], world_size: int,
                  starts: list[tuple[int, int]]) -> dict[int, list[str]]:
    """Per step, the digest of each rank's segments; `starts` holds (step, first window)
    in increasing window order, the windows of different steps never overlapping."""
    if not starts:
        return {}
    batch, seq_len = int(stream["batch"]), int(stream["seq_len"])
    per_rank = batch // world_size if world_size and batch % world_size == 0 else batch
    hashers: dict[tuple[int, int], Any] = {}
    index, (step, first) = 0, starts[0]
    for window, doc_id, token_start, token_end in _segments(
            con, store, stream, starts[0][1], starts[-1][1] + batch, seq_len):
        while window >= first + batch and index + 1 < len(starts):
            index += 1
            step, first = starts[index]
        if not first <= window < first + batch:
            continue  # a window a data skip jumped over
        rank = (window - first) // per_rank
        hasher = hashers.get((step, rank))
        if hasher is None:
            hasher = hashers[(step, rank)] = blake3.blake3(BATCH_TAG)
        hasher.update(f"{window}\t{doc_id}\t{token_start}\t{token_end}\n".encode())
    empty = "blake3:" + blake3.blake3(BATCH_TAG).hexdigest()
    ranks = batch // per_rank
    return {s: ["blake3:" + hashers[(s, r)].hexdigest() if (s, r) in hashers else empty
                for r in range(ranks)] for s, _ in starts}


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
