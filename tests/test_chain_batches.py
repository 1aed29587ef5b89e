"""Batch digests made a chunk of steps at a time on Arrow columns are the digests the
plain per-segment code makes (tests/batch_digests_reference.py): on random streams in
memory, and on real streams read from their parts."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lineage.api import Store
from lineage.ingest import ingest_corpus
from lineage.runs.batch_groups import span_digests
from lineage.runs.chain_batches import batch_digests, step_chunks, stream_batch_digests
from lineage.stream.build import build_stream
from lineage.stream.query import stream_rank_rule, stream_schedule
from lineage.stream.schedule import BatchSchedule, RankRule

from .batch_digests_reference import Row, reference_digests, store_rows

DOC_IDS = ("a", "b/7", "doc ü", "ß-ç", "x" * 40, "0", "é\u2028")
RULES = st.sampled_from([RankRule(), RankRule("strided"), RankRule("micro-batches", 1),
                         RankRule("micro-batches", 2), RankRule("micro-batches", 3)])


@st.composite
def streams(draw: st.DrawFn) -> tuple[list[Row], int]:
    """(occurrences in ordinal order, seq_len): documents of 0 to 5 windows' tokens,
    some separator tokens between them, so a window holds many documents or a part of
    one, and some windows none."""
    seq_len = draw(st.integers(1, 6))
    separator = draw(st.integers(0, 2))
    rows, at = [], draw(st.integers(0, 3))
    for _ in range(draw(st.integers(0, 40))):
        n_tokens = draw(st.integers(0, 5 * seq_len))
        offset = draw(st.sampled_from([0, 0, 3]))  # a segment of a document may not start it
        rows.append((draw(st.sampled_from(DOC_IDS)), at, at + n_tokens, offset))
        at += n_tokens + separator
    return rows, seq_len


@st.composite
def steps(draw: st.DrawFn) -> tuple[BatchSchedule, list[tuple[int, int]]]:
    """A schedule, and (step, first window) of some consecutive steps of a run that
    read by it, with data skips between some."""
    segments, first = [(0, draw(st.integers(1, 6)))], 0
    for _ in range(draw(st.integers(0, 3))):
        first += draw(st.integers(1, 4))
        segments.append((first, draw(st.integers(1, 6))))
    schedule = BatchSchedule(tuple(segments))
    starts, cursor = [], 0
    for step in range(draw(st.integers(1, 14))):
        cursor += draw(st.sampled_from([0, 0, 0, 1, 5]))  # a data skip's windows
        starts.append((step, cursor))
        cursor += schedule.windows_of(step)
    begin = draw(st.integers(0, len(starts) - 1))
    return schedule, starts[begin:begin + draw(st.integers(1, len(starts)))]


def _table(rows: list[Row]) -> pa.Table | None:
    if not rows:
        return None
    return pa.table({name: [r[i] for r in rows] for i, name in enumerate(
        ("doc_id", "stream_start", "stream_end", "doc_offset"))})


@settings(max_examples=400, deadline=None)
@given(stream=streams(), run=steps(), rule=RULES, world_size=st.integers(1, 4),
       chunk_windows=st.integers(1, 20), seed=st.integers(0, 2**16), every_row=st.booleans())
def test_digests_made_at_once_are_the_per_segment_digests(
        stream: tuple[list[Row], int], run: tuple[BatchSchedule, list[tuple[int, int]]],
        rule: RankRule, world_size: int, chunk_windows: int, seed: int,
        every_row: bool) -> None:
    """Any stream, schedule, rank rule (a world it cannot split included), data skips and
    chunking; rows handed over in any order, with or without rows outside the chunk."""
    rows, seq_len = stream
    schedule, starts = run
    expected = reference_digests([rows], schedule, rule, seq_len, world_size, starts)
    spans = [(step, first, schedule.windows_of(step)) for step, first in starts]
    found: dict[int, list[str]] = {}
    for chunk in step_chunks(spans, chunk_windows):
        start, end = chunk[0][1] * seq_len, (chunk[-1][1] + chunk[-1][2]) * seq_len
        mine = rows if every_row else [r for r in rows if r[2] > start and r[1] < end]
        mine = random.Random(seed).sample(mine, len(mine))
        found |= span_digests(_table(mine), chunk, seq_len, rule, world_size)
    assert found == expected


@settings(max_examples=200, deadline=None)
@given(starts=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 5)), min_size=1,
                       max_size=12), windows=st.integers(1, 12))
def test_chunks_hold_every_step_once_in_order_within_their_bound(
        starts: list[tuple[int, int]], windows: int) -> None:
    spans, cursor = [], 0
    for step, (skip, count) in enumerate(starts):
        spans.append((step, cursor + skip, count))
        cursor += skip + count
    chunks = list(step_chunks(spans, windows))
    assert [span for chunk in chunks for span in chunk] == spans
    for chunk in chunks:
        covered = chunk[-1][1] + chunk[-1][2] - chunk[0][1]
        assert covered <= windows or len(chunk) == 1


def test_overlapping_segments_are_ordered_by_their_lines() -> None:
    """No stream has two segments at one position, but the spec orders them anyway:
    by their lines' doc_id, then token_start and token_end."""
    rows = [("b", 0, 4, 0), ("a", 0, 4, 2), ("a", 0, 4, 0), ("c", 2, 6, 0)]
    for order in ([0, 1, 2, 3], [3, 2, 1, 0], [1, 3, 0, 2]):
        table = _table([rows[i] for i in order])
        assert span_digests(table, [(0, 0, 2)], 4, RankRule(), 1) == reference_digests(
            [rows], BatchSchedule.fixed(2), RankRule(), 4, 1, [(0, 0)])


@pytest.fixture(scope="module")
def streamed(fresh_store: Callable[[Path], Store], example_shards: Path,
             tmp_path_factory: pytest.TempPathFactory) -> Store:
    """The sonnets cut two ways: 16-token windows (a sonnet spans many) under a schedule
    and micro-batches, and 512-token windows (each holds many sonnets), strided."""
    store = fresh_store(tmp_path_factory.mktemp("batches") / "store")
    ingest_corpus(store, [example_shards / "sonnets.jsonl.gz"], corpus="sonnets")
    build_stream(store, corpus="sonnets", name="short", seed=3, seq_len=16,
                 schedule=BatchSchedule(((0, 4), (5, 8), (40, 12))),
                 rank_rule=RankRule("micro-batches", 2))
    build_stream(store, corpus="sonnets", name="long", seed=5, seq_len=512, batch=6,
                 rank_rule=RankRule("strided"), epochs={"sonnets": "2"})
    return store


@pytest.mark.parametrize("name", ["short", "long"])
@pytest.mark.parametrize("world_size", [1, 2, 3, 4])
def test_a_stored_streams_digests_are_the_per_segment_digests(
        streamed: Store, name: str, world_size: int) -> None:
    """Read from the stream's parts, in chunks of every size down to one step, over a
    run with data skips, to the stream's last windows."""
    with streamed.reader(views=False) as con:
        info = streamed.stream(name)
        schedule, rule = stream_schedule(info), stream_rank_rule(info)
        seq_len = int(info["seq_len"])
        starts, cursor = [], 0
        for step in range(int(info["steps"])):
            cursor += 3 if step % 7 == 6 else 0  # a data skip every seventh step
            if cursor + schedule.windows_of(step) > int(info["windows"]):
                break
            starts.append((step, cursor))
            cursor += schedule.windows_of(step)
        assert len(starts) > 10
        end = starts[-1][1] + schedule.windows_of(starts[-1][0])
        expected = reference_digests(store_rows(con, streamed, name, 0, end, seq_len),
                                     schedule, rule, seq_len, world_size, starts)
        for chunk_tokens in (1, 5 * seq_len, 64 * seq_len, 1 << 27):
            found = batch_digests(con, streamed, info, world_size, starts,
                                  chunk_tokens=chunk_tokens)
            assert found == expected
    step, first = starts[-1]
    assert stream_batch_digests(streamed, name, first, world_size, step=step) == \
        expected[step]


def test_steps_past_the_streams_end_read_nothing(streamed: Store) -> None:
    """Windows no occurrence reaches give the digest of no lines, one a rank."""
    info = streamed.stream("long")
    past = int(info["windows"]) + 100
    with streamed.reader(views=False) as con:
        found = batch_digests(con, streamed, info, 2, [(0, past), (1, past + 6)])
    empty = reference_digests([], BatchSchedule.fixed(6), RankRule("strided"), 512, 2,
                              [(0, 0)])[0]
    assert found == {0: empty, 1: empty} and len(empty) == 2
