"""The run questions build their typed answers themselves: each returns its Answer type,
typed all the way down, printing exactly what it printed as a dict."""

from __future__ import annotations

from typing import Any

import pytest

from lineage.answer import AnswerList, json_text
from lineage.api import Store
from lineage.runs.answers import (
    ChainVerification,
    Checkpoints,
    CheckpointVerdict,
    NearestCheckpoint,
    Run,
    RunSegment,
    RunSkipRule,
    RunSummary,
    SkipRuleVerdict,
    SkipViolation,
    Trace,
    TracedDocument,
    TracedStep,
)
from lineage.runs.chain_verify import verify_chain
from lineage.runs.query import get_run, list_checkpoints, list_runs
from lineage.runs.trace import trace, trace_answer

from .test_answers_runs import runs  # noqa: F401  (the module's store of runs)


def _reads_back(answer: Any) -> None:
    """The answer prints as the JSON its type reads back (keys, order, values)."""
    assert type(answer).from_dict(answer.to_dict()).to_json() == answer.to_json()


def test_list_runs_returns_run_summaries(runs: Store) -> None:  # noqa: F811
    listed = list_runs(runs)
    assert type(listed) is AnswerList and listed.row_type is RunSummary
    assert [type(r) for r in listed] == [RunSummary] * 3
    assert [r.name for r in listed] == ["c", "empty", "r"]
    assert listed.to_json() == runs.runs().to_json()


def test_get_run_returns_a_run_typed_all_the_way_down(runs: Store) -> None:  # noqa: F811
    r = get_run(runs, "r")
    assert type(r) is Run and type(r.skip_rule) is RunSkipRule
    assert r.skip_rule.skip_following == 4 and r.skipped_steps == (7, 8, 9, 10, 11)
    assert all(type(s) is RunSegment for s in r.segments)
    c = get_run(runs, "c")
    assert c.skip_rule is None and [type(k) for k in c.checkpoints] == [CheckpointVerdict] * 2
    empty = get_run(runs, "empty")
    assert (empty.first_step, empty.last_step, empty.progress) == (None, None, 0.0)
    for run in (r, c, empty):
        _reads_back(run)
        assert run["name"] == run.name  # still read by key where a record is wanted


def test_list_checkpoints_returns_checkpoints(runs: Store) -> None:  # noqa: F811
    plain = list_checkpoints(runs, "c")
    assert type(plain) is Checkpoints and plain.nearest is None
    assert "nearest_to" not in plain.to_dict()
    near = list_checkpoints(runs, "c", nearest=4)
    assert type(near.nearest) is NearestCheckpoint
    assert (near.nearest.step, near.nearest.replays, near.nearest_to) == (3, 1, 4)
    for answer in (plain, near):
        _reads_back(answer)


def test_verify_chain_returns_a_chain_verification(runs: Store) -> None:  # noqa: F811
    violated = verify_chain(runs, "r")
    assert type(violated) is ChainVerification and type(violated.skip_rule) is SkipRuleVerdict
    assert violated.verdict == "rule-violated" and not violated.ok
    assert violated.skip_rule.violations
    assert all(type(v) is SkipViolation for v in violated.skip_rule.violations)
    closed = verify_chain(runs, "c", batches=False)
    assert closed.skip_rule.description is None and "description" not in closed.skip_rule
    short = verify_chain(runs, "r", expect_steps=50)
    assert short.verdict == "broken" and short.first_broken_step == 40
    for answer in (violated, closed, short):
        _reads_back(answer)


@pytest.mark.parametrize("options", [{"step": 3}, {"clipped": True}, {"skipped": True}])
def test_trace_answer_is_the_trace_typed(runs: Store, options: dict[str, Any]) -> None:  # noqa: F811
    typed = trace_answer(runs, "r", **options)
    assert type(typed) is Trace and typed.steps
    assert all(type(s) is TracedStep for s in typed.steps)
    assert all(type(d) is TracedDocument for s in typed.steps for d in s.documents)
    assert typed.to_json() == json_text(trace(runs, "r", **options))
    _reads_back(typed)
