"""Questions about streams: which streams exist, and which documents a step holds.

`docs_in_step` reads only the stream's own occurrence files and asks for the rows whose
[stream_start, stream_end) meets the step's token range. Both columns grow with the
ordinal, so the catalog's record of each part's and row group's first and last values
picks the one or two row groups that hold the step (lineage/store/part_read.py): a binary
search on disk, whatever the corpus size.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lineage.errors import UnknownObjectError, UsageError
from lineage.jsonout import PlainRows
from lineage.store.arrays_use import span_bounds, span_rows, stream_records, with_records
from lineage.store.base import BaseStore
from lineage.store.memo import remembered
from lineage.stream.record import COLUMNS as STREAM_COLUMNS
from lineage.stream.record import StreamRecord
from lineage.stream.schedule import BatchSchedule, RankRule

if TYPE_CHECKING:
    import duckdb

    from lineage.answer import AnswerList
    from lineage.store.arrays import ArraysFile
    from lineage.stream.answers import StreamSummary
    from lineage.stream.order import IntArray

def stream_row(con: duckdb.DuckDBPyConnection, name: str) -> StreamRecord | None:
    row = con.execute(
        f"SELECT {', '.join(STREAM_COLUMNS)} FROM streams WHERE name = ?", [name]
    ).fetchone()
    return None if row is None else StreamRecord.from_row(row)


def stream_rows(con: duckdb.DuckDBPyConnection) -> list[StreamRecord]:
    """Every stream, by name, in one query."""
    rows = con.execute(f"SELECT {', '.join(STREAM_COLUMNS)} FROM streams ORDER BY name")
    return [StreamRecord.from_row(row) for row in rows.fetchall()]


def stream_schedule(row: StreamRecord | Mapping[str, Any]) -> BatchSchedule:
    """A stream's windows per step, step by step: its declared `schedule`, else its fixed
    `batch`. `row` is a stream's record, or a row with its `parameters` (a run log's
    stream, a `Stream` answer). Every caller that cuts windows into steps reads the
    schedule here."""
    if isinstance(row, StreamRecord):
        return BatchSchedule.fixed(row.batch) if row.schedule is None else row.schedule
    declared = _declared(row, "schedule")
    if declared is not None:
        return BatchSchedule.from_json(declared)
    return BatchSchedule.fixed(int(row["batch"]))


def stream_rank_rule(row: StreamRecord | Mapping[str, Any]) -> RankRule:
    """How a stream's steps are split among ranks: its declared `rank_rule`, else lineage's
    own contiguous split (the same rows as `stream_schedule`)."""
    if isinstance(row, StreamRecord):
        return RankRule() if row.rank_rule is None else row.rank_rule
    declared = _declared(row, "rank_rule")
    return RankRule() if declared is None else RankRule.from_json(declared)


def _declared(row: Mapping[str, Any], key: str) -> Any:
    if key in row:
        return row[key]
    parameters = row.get("parameters")
    if isinstance(parameters, str):
        import json

        return json.loads(parameters).get(key)
    return parameters.get(key) if isinstance(parameters, Mapping) else None


def list_streams(store: BaseStore) -> AnswerList[StreamSummary]:
    """Every stream, by name, as `stream list` prints it."""
    from lineage.answer import AnswerList
    from lineage.stream.answers import StreamSummary, stream_answer

    with store.reader(views=False) as con:
        rows = stream_rows(con)
    return AnswerList(StreamSummary, (stream_answer(row, StreamSummary) for row in rows))


def get_stream(store: BaseStore, name: str | None = None) -> StreamRecord:
    """One stream by name; without a name, the only stream of the store."""
    with store.reader(views=False) as con:
        return stream_named(con, name)


def resolved_stream(con: duckdb.DuckDBPyConnection, store: BaseStore, name: str | None,
                    ) -> StreamRecord:
    """`stream_named`'s record, read once per catalog state where the store keeps one (a
    server's copy of the catalog: lineage/store/memo.py)."""
    return remembered(store, ("stream", name), lambda: stream_named(con, name))


def stream_named(con: duckdb.DuckDBPyConnection, name: str | None) -> StreamRecord:
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
    """Windows [first_window, last_window] of one step, or of one rank or window in it.

    `step_windows` are all the step's windows (ranks are numbered inside them by
    `rank_rule`); `only`, when set, are the windows asked about, for a rank whose windows
    are not consecutive (strided or micro-batch rules).
    """

    step: int
    first_window: int
    last_window: int
    world_size: int | None
    step_windows: range | None = None
    rank_rule: RankRule = RankRule()
    only: frozenset[int] | None = None

    def rank_of(self, window: int) -> int | None:
        if not self.world_size or self.step_windows is None:
            return None
        count = len(self.step_windows)
        return self.rank_rule.rank_of(window - self.step_windows.start, count, self.world_size)


def step_range(
    stream: StreamRecord, step: int, *, rank: int | None = None,
    world_size: int | None = None, window: int | None = None,
) -> StepRange:
    """The windows a query covers, checked against the stream's shape, its schedule and
    its rank rule."""
    steps = stream.steps
    if not 0 <= step < steps:
        raise UnknownObjectError(
            f"stream {stream.name!r} has steps 0..{steps - 1}, not {step}")
    return windows_range(stream, step, stream_schedule(stream).step_range(step),
                         rank=rank, world_size=world_size, window=window)


def windows_range(
    stream: StreamRecord, step: int, windows: range, *, rank: int | None = None,
    world_size: int | None = None, window: int | None = None,
) -> StepRange:
    """A step that read `windows` (by the schedule, or by a run's cursor), narrowed to one
    rank under the stream's rank rule, or to one window."""
    rule = stream_rank_rule(stream)
    first, last, only = windows.start, windows.stop - 1, None
    if (rank is None) != (world_size is None):
        raise UsageError("--rank and --world-size go together")
    if world_size is not None and rank is not None:
        if world_size < 1 or not rule.splits(len(windows), world_size):
            rule_text = "" if rule.is_default else f" under rank rule {rule.to_text()}"
            raise UsageError(f"--world-size {world_size} must divide the batch of step "
                             f"{step} ({len(windows)} windows){rule_text}")
        mine = rule.windows(windows, rank, world_size)
        first, last = mine[0], mine[-1]
        if last - first + 1 != len(mine):
            only = frozenset(mine)
    if window is not None:
        if not first <= window <= last or (only is not None and window not in only):
            raise UsageError(f"window {window} is not in step {step} (windows {first}..{last})")
        first = last = window
        only = None
    return StepRange(step, first, last, world_size, windows, rule, only)


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
        info = resolved_stream(con, store, stream)
        span = step_range(info, step, rank=rank, world_size=world_size, window=window)
        segments = step_segments(con, store, info, span, answer=True)
    answer: dict[str, Any] = {
        "stream": info.name, "spec": info.spec, "spec_hash": info.spec_hash,
        "manifest_hash": info.manifest_hash, "step": step,
        "windows": [span.first_window, span.last_window],
    }
    if span.only is not None:
        answer["rank_windows"] = sorted(span.only)
    if info.schedule is not None or info.rank_rule is not None:  # stated when declared
        assert span.step_windows is not None
        answer["step_windows"] = [span.step_windows.start, span.step_windows.stop - 1]
        answer["rank_rule"] = span.rank_rule.to_json()
    answer["documents"] = segments
    return answer


SEGMENT_COLUMNS = ("doc_id", "source", "uri", "content_hash", "epoch", "stream_start",
                   "stream_end", "doc_offset", "ordinal")


def step_segments(
    con: duckdb.DuckDBPyConnection, store: BaseStore, info: StreamRecord, span: StepRange,
    *, answer: bool = False,
) -> list[dict[str, Any]]:
    """Segments in stream order; `position` is the segment's first token in the stream.

    As `answer` (`docs_in_step`'s documents): without `position`, and as PlainRows when
    the columns they come from hold only text and integers (json_text need not look)."""
    seq_len = info.seq_len
    start, end = span.first_window * seq_len, (span.last_window + 1) * seq_len
    records = stream_records(con, store, info.name, info.corpus)
    from_arrays = None if records is None else with_records(
        store, records, lambda files: _arrays_segments(files[0], files[1], start, end,
                                                       seq_len, span, answer=answer))
    if from_arrays is not None:
        return from_arrays
    import numpy as np
    import pyarrow as pa

    from lineage.store.part_read import lookup_table

    rows = lookup_table(con, store, "occurrences", info.name, SEGMENT_COLUMNS,
                        span=(start, end))
    if rows is None:
        return PlainRows() if answer else []
    ordinal = rows["ordinal"].to_numpy()
    if len(ordinal) > 1 and not bool(np.all(ordinal[1:] > ordinal[:-1])):
        rows = rows.take(np.argsort(ordinal, kind="stable"))  # in stream order
    pieces = _cut(rows["stream_start"].to_numpy(), rows["stream_end"].to_numpy(),
                  rows["doc_offset"].to_numpy(), seq_len, span)
    columns = {name: rows[name] for name in ("doc_id", "source", "uri", "content_hash",
                                             "epoch")}
    found = _segments({name: column.to_pylist() for name, column in columns.items()},
                      pieces, span, answer=answer)
    if not answer:
        return found
    plain = all(pa.types.is_string(c.type) or pa.types.is_integer(c.type)
                for c in columns.values())
    return PlainRows(found) if plain else found


# Occurrences from which a server's mapped files are read through numpy: below, its
# fixed cost (some 80 array calls) is more than reading value by value saves.
MAPPED_FROM = 24


def _arrays_segments(stream: ArraysFile, corpus: ArraysFile, start: int, end: int,
                     seq_len: int, span: StepRange, *, answer: bool) -> list[dict[str, Any]]:
    """`step_segments` from the lookup arrays files: many occurrences of a server's
    mapped files through numpy (lineage/store/arrays_mapped.py), else in plain Python (a
    command need not import numpy). The same segments, in the same order, as from the
    Parquet parts."""
    first, last = span_bounds(stream, start, end)
    if not (stream.mapped and corpus.mapped) or last - first < MAPPED_FROM:
        return _segments_of(span_rows(stream, corpus, first, last), seq_len, span,
                            answer=answer)
    from lineage.store.arrays_mapped import span_columns

    occurrences, documents = span_columns(stream, corpus, first, last)
    pieces = _cut(occurrences["stream_start"], occurrences["stream_end"],
                  occurrences["doc_offset"], seq_len, span)
    found = _segments({**documents, "epoch": occurrences["epoch"].tolist()}, pieces, span,
                      answer=answer)
    return PlainRows(found) if answer else found  # strings, integers and None


def _cut(starts: IntArray, ends: IntArray, offsets: IntArray, seq_len: int, span: StepRange,
         ) -> tuple[list[int], list[int], list[int], list[int], list[int]]:
    """The pieces of occurrences (in stream order) within the span's windows, by window
    then position: (occurrence, window, position, token_start, token_end) as lists."""
    import numpy as np

    row, window, lo, hi = window_piece_arrays(starts, ends, seq_len, span.first_window,
                                              span.last_window)
    if span.only is not None:  # windows of other ranks, between this rank's windows
        mine = np.isin(window, np.fromiter(span.only, dtype=np.int64))
        row, window, lo, hi = row[mine], window[mine], lo[mine], hi[mine]
    order = np.lexsort((lo, window))  # by window, then position (stable: as cut)
    row, window, lo, hi = row[order], window[order], lo[order], hi[order]
    shift = np.asarray(offsets, dtype=np.int64)[row] - np.asarray(starts, dtype=np.int64)[row]
    return (row.tolist(), window.tolist(), lo.tolist(), (lo + shift).tolist(),
            (hi + shift).tolist())  # ints, from arrays of int64


def _segments(columns: dict[str, list[Any]],
              pieces: tuple[list[int], list[int], list[int], list[int], list[int]],
              span: StepRange, *, answer: bool) -> list[dict[str, Any]]:
    """One segment a piece, its document's attributes from `columns` (by occurrence);
    with `position` unless as an answer."""
    row, windows, positions, token_starts, token_ends = pieces
    doc_id, source, uri = columns["doc_id"], columns["source"], columns["uri"]
    content_hash, epoch = columns["content_hash"], columns["epoch"]
    rank = {w: span.rank_of(w) for w in set(windows)}  # an int or None
    found = [{"doc_id": doc_id[i], "source": source[i], "uri": uri[i],
              "content_hash": content_hash[i], "epoch": epoch[i], "window": w,
              "rank": rank[w], "token_start": token_start, "token_end": token_end}
             for i, w, token_start, token_end in zip(row, windows, token_starts, token_ends,
                                                     strict=True)]
    if not answer:
        for segment, position in zip(found, positions, strict=True):
            segment["position"] = position
    return found


def _segments_of(rows: dict[str, list[Any]], seq_len: int, span: StepRange, *,
                 answer: bool) -> list[dict[str, Any]]:
    """`step_segments` from rows given as lists by column (a lookup arrays file's), in
    plain Python: the same segments, in the same order, as the Parquet path.
    The rows come in stream (ordinal) order: an arrays file holds them so."""
    starts, ends, offsets = rows["stream_start"], rows["stream_end"], rows["doc_offset"]
    pieces = []  # (window, position, row, token_start, token_end), by row, then window
    for i in range(len(starts)):
        for w, lo, token_start, token_end in window_pieces(
                starts[i], ends[i], offsets[i], seq_len, span.first_window, span.last_window):
            if span.only is None or w in span.only:
                pieces.append((w, lo, i, token_start, token_end))
    pieces.sort(key=lambda piece: (piece[0], piece[1]))  # by window, then position
    windows, positions, row, token_starts, token_ends = (
        [piece[k] for piece in pieces] for k in range(5))
    found = _segments(rows, (row, windows, positions, token_starts, token_ends), span,
                      answer=answer)
    # strings, integers and None: the arrays hold nothing else
    return PlainRows(found) if answer else found


def window_piece_arrays(
    a: IntArray, b: IntArray, seq_len: int, first_window: int, last_window: int,
) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    """`window_pieces` for many occurrences [a, b) at once: (occurrence index, window,
    first and end stream position) of each piece, by occurrence, then window."""
    import numpy as np

    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    low = np.maximum(a // seq_len, first_window)
    high = np.minimum((b - 1) // seq_len, last_window)
    count = np.maximum(high - low + 1, 0)
    row = np.repeat(np.arange(len(a)), count)
    window = low[row] + np.arange(len(row)) - (np.cumsum(count) - count)[row]
    lo, hi = np.maximum(a[row], window * seq_len), np.minimum(b[row], (window + 1) * seq_len)
    kept = lo < hi
    return row[kept], window[kept], lo[kept], hi[kept]


def window_pieces(
    a: int, b: int, offset: int, seq_len: int, first_window: int, last_window: int
) -> Iterator[tuple[int, int, int, int]]:
    """Cut an occurrence [a, b) at window edges (docs/stream-spec.md §6), within windows
    first..last: (window, first stream position, token_start, token_end in the document)."""
    for w in range(max(a // seq_len, first_window), min((b - 1) // seq_len, last_window) + 1):
        lo, hi = max(a, w * seq_len), min(b, (w + 1) * seq_len)
        if lo < hi:
            yield w, lo, offset + lo - a, offset + hi - a
