"""The batch digests a stream implies for a run's steps (docs/chain-spec.md, "Batch digest").

Step s reads the B_s windows that end at its cursor: windows [cursor - B_s, cursor), B_s
the stream's windows per step at step s (its batch, or its schedule's); rank r of W gets
the windows the stream's rank rule gives it (contiguous: [cursor - B_s + r·B_s/W,
cursor - B_s + (r+1)·B_s/W)). Digests for many steps are made a chunk of steps at a
time, from the chunk's occurrences as Arrow columns (lineage/runs/batch_groups.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from lineage.runs.batch_groups import Span, span_digests
from lineage.store.base import BaseStore
from lineage.store.part_select import part_files
from lineage.stream.query import stream_named, stream_rank_rule, stream_schedule

if TYPE_CHECKING:
    import pyarrow as pa

    from lineage.stream.record import StreamRecord

# Tokens of windows whose digests are made at once: 2^27 (65,536 windows of 2,048), about
# 100,000 occurrences at 1,356 tokens a document.
CHUNK_TOKENS = 1 << 27


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


def batch_digests(con: Any, store: BaseStore, stream: StreamRecord, world_size: int,
                  starts: list[tuple[int, int]], *,
                  chunk_tokens: int = CHUNK_TOKENS) -> dict[int, list[str]]:
    """Per step, the digest of each rank's segments; `starts` holds (step, first window)
    in increasing window order, the windows of different steps never overlapping.

    The steps go in chunks whose windows hold at most `chunk_tokens` tokens (or one step,
    if it holds more): one chunk's occurrences are in memory at a time."""
    if not starts:
        return {}
    from lineage.store.no_pandas import keep_pandas_out

    keep_pandas_out()  # pyarrow would import it (a second) at its first conversion
    schedule, rule = stream_schedule(stream), stream_rank_rule(stream)
    seq_len = stream.seq_len
    spans = [(step, first, schedule.windows_of(step)) for step, first in starts]
    found: dict[int, list[str]] = {}
    for chunk in step_chunks(spans, max(chunk_tokens // seq_len, 1)):
        rows = _occurrences(con, store, stream.name, chunk[0][1] * seq_len,
                            (chunk[-1][1] + chunk[-1][2]) * seq_len)
        found |= span_digests(rows, chunk, seq_len, rule, world_size)
    return found


def step_chunks(spans: list[Span], windows: int) -> Iterator[list[Span]]:
    """Runs of consecutive spans whose windows, from the first one's first to the last
    one's last (a data skip's windows between them included), are at most `windows`;
    a span longer than that is a run of its own."""
    chunk: list[Span] = []
    for span in spans:
        if chunk and span[1] + span[2] - chunk[0][1] > windows:
            yield chunk
            chunk = []
        chunk.append(span)
    if chunk:
        yield chunk


def _occurrences(con: Any, store: BaseStore, stream: str, start: int, end: int,
                 ) -> pa.Table | None:
    """The stream's occurrences meeting tokens [start, end), in no particular order (the
    digests order the segments); their parts' bytes checked (`part_files`)."""
    files = part_files(con, store, "occurrences", stream, span=(start, end))
    if not files:
        return None
    return con.sql(
        "SELECT doc_id, stream_start, stream_end, doc_offset FROM read_parquet(?) "
        "WHERE stream_end > ? AND stream_start < ?", params=[files, start, end]
    ).to_arrow_table()
