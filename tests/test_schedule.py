"""Batch-size schedules and rank rules (docs/stream-spec.md §4): the step arithmetic's
invariants, and how a stream's catalog row declares them."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lineage.errors import UsageError
from lineage.stream.query import stream_rank_rule, stream_schedule
from lineage.stream.schedule import (
    BatchSchedule,
    RankRule,
    parse_schedule,
    parse_token_schedule,
)


@st.composite
def schedules(draw: st.DrawFn) -> BatchSchedule:
    gaps = draw(st.lists(st.integers(1, 20), max_size=5))
    firsts = [0]
    for gap in gaps:
        firsts.append(firsts[-1] + gap)
    return BatchSchedule(tuple((f, draw(st.integers(1, 9))) for f in firsts))


@given(schedules(), st.integers(0, 200))
def test_consecutive_steps_tile_the_windows(schedule: BatchSchedule, steps: int) -> None:
    covered = [w for s in range(steps) for w in schedule.step_range(s)]
    assert covered == list(range(schedule.first_window(steps)))


@given(schedules(), st.integers(0, 200))
def test_step_of_window_inverts_first_window(schedule: BatchSchedule, step: int) -> None:
    for window in schedule.step_range(step):
        assert schedule.step_of_window(window) == step
    assert schedule.step_of_window(schedule.first_window(step)) == step
    first = schedule.first_window(step)
    assert schedule.full_steps(first) == step
    assert schedule.steps_for(first + 1) == step + 1


@given(st.integers(1, 64), st.integers(0, 500), st.integers(0, 5000))
def test_a_fixed_schedule_is_the_old_arithmetic(batch: int, step: int, window: int) -> None:
    fixed = BatchSchedule.fixed(batch)
    assert fixed.step_range(step) == range(step * batch, (step + 1) * batch)
    assert fixed.step_of_window(window) == window // batch
    assert fixed.full_steps(window) == window // batch
    assert fixed.steps_for(window) == -(-window // batch)


def test_equal_neighbours_merge_into_one_form() -> None:
    assert parse_schedule("0:4,100:4") == BatchSchedule.fixed(4)
    assert parse_schedule("0:4,100:4,200:8").segments == ((0, 4), (200, 8))
    assert parse_schedule("0:4,100:8").to_text() == "0:4,100:8"


@pytest.mark.parametrize(("text", "message"), [
    ("5:4", "starts at step 0"), ("0:4,0:8", "does not follow"), ("0:0", "at least 1"),
    ("0-4", "START:WINDOWS"), ("0:4,x:8", "START:WINDOWS"),
])
def test_bad_schedules_say_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_schedule(text)


def test_a_token_schedule_begins_each_segment_at_the_first_step_past_its_tokens() -> None:
    # seq_len 10: 2 windows a step are 20 tokens; 100 tokens are reached after step 4.
    assert parse_token_schedule("0:2,100:4", 10).segments == ((0, 2), (5, 4))
    # 101 tokens: step 5 starts at 100 (< 101), so the ramp waits for step 6
    assert parse_token_schedule("0:2,101:4", 10).segments == ((0, 2), (6, 4))
    # a threshold passed before its segment's first step: the next segment replaces it
    assert parse_token_schedule("0:2,100:4,101:8", 10).segments == ((0, 2), (5, 4), (6, 8))
    assert parse_token_schedule("0:2,20:4,21:8", 20).segments == ((0, 2), (1, 8))
    with pytest.raises(UsageError, match="starts at 0 tokens"):
        parse_token_schedule("10:2", 10)


@given(schedules(), st.integers(1, 4))
def test_token_schedules_of_step_boundaries_give_the_step_schedule(
        schedule: BatchSchedule, seq_len: int) -> None:
    text = ",".join(f"{schedule.first_window(first) * seq_len}:{windows}"
                    for first, windows in schedule.segments)
    assert parse_token_schedule(text, seq_len) == schedule


@given(st.integers(1, 6), st.integers(1, 4), st.integers(1, 5), st.integers(0, 50),
       st.sampled_from(["contiguous", "strided", "micro-batches"]))
def test_ranks_partition_a_step(world: int, micro: int, units: int, start: int,
                                rule_name: str) -> None:
    rule = RankRule(rule_name, micro if rule_name == "micro-batches" else None)
    count = world * (rule.micro_batch or 1) * units
    step = range(start, start + count)
    read = [rule.windows(step, rank, world) for rank in range(world)]
    assert sorted(w for windows in read for w in windows) == list(step)
    for rank, windows in enumerate(read):
        assert windows == sorted(windows) and len(windows) == count // world
        assert {rule.rank_of(w - start, count, world) for w in windows} == {rank}


def test_each_rule_splits_a_step_as_its_framework_does() -> None:
    step = range(8, 16)
    assert RankRule().windows(step, 1, 2) == [12, 13, 14, 15]
    assert RankRule("strided").windows(step, 1, 2) == [9, 11, 13, 15]
    assert RankRule("micro-batches", 2).windows(step, 1, 2) == [10, 11, 14, 15]
    with pytest.raises(UsageError, match="does not divide the step's 8 windows"):
        RankRule("micro-batches", 3).windows(step, 0, 2)
    with pytest.raises(UsageError, match="does not divide"):
        RankRule("strided").windows(step, 0, 3)
    assert RankRule.parse("micro-batches:2") == RankRule("micro-batches", 2)
    with pytest.raises(UsageError, match="micro-batch size"):
        RankRule.parse("micro-batches")


def test_a_catalog_row_declares_its_schedule_and_rank_rule_or_has_the_defaults() -> None:
    plain = {"batch": 4, "parameters": json.dumps({"batch": 4})}
    assert stream_schedule(plain) == BatchSchedule.fixed(4)
    assert stream_rank_rule(plain) == RankRule()
    declared = {"batch": 2, "parameters": json.dumps({
        "batch": 2, "schedule": [[0, 2], [10, 8]],
        "rank_rule": {"micro_batch": 2, "rule": "micro-batches"}})}
    assert stream_schedule(declared).segments == ((0, 2), (10, 8))
    assert stream_rank_rule(declared) == RankRule("micro-batches", 2)
    lifted = {"batch": 2, "schedule": [[0, 2], [10, 8]], "rank_rule": {"rule": "strided"}}
    assert stream_schedule(lifted).windows_of(10) == 8
    assert stream_rank_rule(lifted) == RankRule("strided")
