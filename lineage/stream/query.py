"""Questions about streams: which streams exist, and which documents a step holds.

`docs_in_step` reads only the stream's own occurrence files and asks for the rows whose
[stream_start, stream_end) meets the step's token range. Both columns grow with the
ordinal, so the two conditions prune every Parquet row group but the one or two that
hold the step: a binary search on disk, whatever the corpus size.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lineage.errors import UnknownObjectError, UsageError
from lineage.store.base import BaseStore
from lineage.store.parts import part_files

if TYPE_CHECKING:
    import duckdb

STREAM_COLUMNS = (
    "name", "spec", "spec_hash", "corpus", "manifest_hash", "seed", "seq_len", "batch",
    "separator_tokens", "token_budget", "tokens", "windows", "steps", "occurrences",
    "occurrences_digest", "parameters",
)  # fmt: skip


def stream_row(con: duckdb.DuckDBPyConnection, name: str) -> dict[str, Any] | None:
    row = con.execute(
        f"SELECT {', '.join(STREAM_COLUMNS)} FROM streams WHERE name = ?", [name]
    ).fetchone()
    return None if row is None else _stream_dict(row)


def stream_rows(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Every stream, by name, in one query."""
    rows = con.execute(f"SELECT {', '.join(STREAM_COLUMNS)} FROM streams ORDER BY name")
    return [_stream_dict(row) for row in rows.fetchall()]


def _stream_dict(row: tuple[Any, ...]) -> dict[str, Any]:
    import json

    found = dict(zip(STREAM_COLUMNS, row, strict=True))
    parameters = json.loads(found.pop("parameters"))
    found["epochs"] = parameters.get("epochs", {})
    return found


def list_streams(store: BaseStore) -> list[dict[str, Any]]:
    with store.reader(views=False) as con:
        return stream_rows(con)


def get_stream(store: BaseStore, name: str | None = None) -> dict[str, Any]:
    """One stream by name; without a name, the only stream of the store."""
    with store.reader(views=False) as con:
        return _resolve(con, name)


def _resolve(con: duckdb.DuckDBPyConnection, name: str | None) -> dict[str, Any]:
    if name is not None and (row := stream_row(con, name)) is not None:
        return row  # the common case: one query
    names = [r[0] for r in con.execute("SELECT name FROM streams ORDER BY name").fetchall()]
    if name is None:
        if len(names) != 1:
            listed = ", ".join(names) if names else "none yet: `lineage stream build`"
            raise UsageError(f"say which stream with --stream (streams: {listed})")
        name = names[0]
    row = stream_row(con, name)
    if row is None:
        listed = ", ".join(names) if names else "none yet"
        raise UnknownObjectError(f"no stream named {name!r} (streams: {listed})")
    return row


@dataclass(frozen=True)
class StepRange:
    """Windows [first_window, last_window] of one step, or of one rank or window in it."""

    step: int
    first_window: int
    last_window: int
    world_size: int | None


def step_range(
    stream: dict[str, Any], step: int, *, rank: int | None = None,
    world_size: int | None = None, window: int | None = None,
) -> StepRange:
    """The windows a query covers, checked against the stream's shape."""
    batch, steps = int(stream["batch"]), int(stream["steps"])
    if not 0 <= step < steps:
        raise UnknownObjectError(
            f"stream {stream['name']!r} has steps 0..{steps - 1}, not {step}")
    first, last = step * batch, (step + 1) * batch - 1
    if (rank is None) != (world_size is None):
        raise UsageError("--rank and --world-size go together")
    if world_size is not None and rank is not None:
        if world_size < 1 or batch % world_size:
            raise UsageError(f"--world-size {world_size} must divide the batch ({batch})")
        if not 0 <= rank < world_size:
            raise UsageError(f"--rank must be in 0..{world_size - 1}")
        per_rank = batch // world_size
        first, last = first + rank * per_rank, first + (rank + 1) * per_rank - 1
    if window is not None:
        if not first <= window <= last:
            raise UsageError(f"window {window} is not in step {step} (windows {first}..{last})")
        first = last = window
    return StepRange(step, first, last, world_size)


def docs_in_step(
    store: BaseStore,
    step: int,
    *,
    stream: str | None = None,
    rank: int | None = None,
    world_size: int | None = None,
    window: int | None = None,
) -> dict[str, Any]:
    """Every segment of every document in a step (or one rank's or one window's part)."""
    with store.reader(views=False) as con:
        info = _resolve(con, stream)
        span = step_range(info, step, rank=rank, world_size=world_size, window=window)
        segments = step_segments(con, store, info, span)
    for segment in segments:
        del segment["position"]
    return {
        "stream": info["name"], "spec": info["spec"], "spec_hash": info["spec_hash"],
        "manifest_hash": info["manifest_hash"], "step": step,
        "windows": [span.first_window, span.last_window], "documents": segments,
    }


def step_segments(
    con: duckdb.DuckDBPyConnection, store: BaseStore, info: dict[str, Any], span: StepRange
) -> list[dict[str, Any]]:
    """Segments in stream order; `position` is the segment's first token in the stream."""
    seq_len = int(info["seq_len"])
    start, end = span.first_window * seq_len, (span.last_window + 1) * seq_len
    files = part_files(con, store, "occurrences", info["name"], span=(start, end))
    rows = con.execute(
        """
        SELECT doc_id, source, uri, content_hash, epoch, stream_start, stream_end, doc_offset
        FROM read_parquet(?) WHERE stream_end > ? AND stream_start < ? ORDER BY ordinal
        """,
        [files, start, end],
    ).fetchall() if files else []
    batch = int(info["batch"])
    segments = []
    for doc_id, source, uri, content_hash, epoch, a, b, offset in rows:
        for w, lo, token_start, token_end in window_pieces(
                a, b, offset, seq_len, span.first_window, span.last_window):
            rank = None
            if span.world_size:
                rank = (w - span.step * batch) // (batch // span.world_size)
            segments.append({
                "doc_id": doc_id, "source": source, "uri": uri, "content_hash": content_hash,
                "epoch": epoch, "window": w, "rank": rank,
                "token_start": token_start, "token_end": token_end, "position": lo,
            })
    segments.sort(key=lambda s: (s["window"], s["position"]))
    return segments


def window_pieces(
    a: int, b: int, offset: int, seq_len: int, first_window: int, last_window: int
) -> Iterator[tuple[int, int, int, int]]:
    """Cut an occurrence [a, b) at window edges (docs/stream-spec.md §6), within windows
    first..last: (window, first stream position, token_start, token_end in the document)."""
    for w in range(max(a // seq_len, first_window), min((b - 1) // seq_len, last_window) + 1):
        lo, hi = max(a, w * seq_len), min(b, (w + 1) * seq_len)
        if lo < hi:
            yield w, lo, offset + lo - a, offset + hi - a
