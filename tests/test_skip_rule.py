"""The declared skip rule: the trainer's tracker and the check of a run's records."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lineage.runs.skip_rule import SkipRule, SkipTracker, check_skips

norms = st.lists(st.one_of(st.floats(0, 10, allow_nan=False), st.just(math.nan),
                           st.just(math.inf)), max_size=40)
rules = st.builds(SkipRule, st.floats(0, 10, allow_nan=False), st.integers(0, 6))


def decisions(rule: SkipRule, values: list[float]) -> list[bool]:
    tracker = SkipTracker(rule)
    return [tracker.decide(step, norm) for step, norm in enumerate(values)]


@settings(deadline=None)  # the machine is shared: time is not the property
@given(rule=rules, values=norms)
def test_a_run_that_follows_its_tracker_never_violates_the_rule(
        rule: SkipRule, values: list[float]) -> None:
    skipped = decisions(rule, values)
    assert check_skips(rule, zip(range(len(values)), values, skipped, strict=True)) == []


@settings(deadline=None)  # the machine is shared: time is not the property
@given(rule=rules, values=norms.filter(bool), data=st.data())
def test_one_wrong_decision_is_named_at_its_step_and_nowhere_else(
        rule: SkipRule, values: list[float], data: st.DataObject) -> None:
    skipped = decisions(rule, values)
    step = data.draw(st.integers(0, len(values) - 1))
    skipped[step] = not skipped[step]
    found = check_skips(rule, zip(range(len(values)), values, skipped, strict=True))
    assert [v["step"] for v in found] == [step]


def test_the_open_1b_rule_and_each_kind_of_violation() -> None:
    rule = SkipRule(grad_norm_above=5.0, skip_following=4)
    assert rule.to_json() == {"grad_norm_above": 5.0, "rule": "lineage-skip/1",
                              "skip_following": 4}
    values = [1.0] * 12
    values[2] = 5.5
    honest = [2 <= s <= 6 for s in range(12)]
    assert check_skips(rule, zip(range(12), values, honest, strict=True)) == []
    lying = list(honest)
    lying[2], lying[5], lying[9] = False, False, True
    found = {v["step"]: v["reason"] for v in check_skips(rule, zip(range(12), values, lying,
                                                                   strict=True))}
    assert found[2].startswith("grad norm 5.5 is above 5: the rule skips this step")
    assert found[5].startswith("cascade cut short: step 2's grad norm 5.5 skips steps 2..6")
    assert found[9].startswith("skipped without cause: no grad norm above 5 in steps 5..9")
    assert check_skips(rule, [(0, "nan", True), (1, "inf", True), (2, None, False)]) == [
        {"step": 2, "reason": "no numeric grad_norm and boolean skipped to check the rule "
                              "against"}]


@pytest.mark.parametrize(("value", "message"), [
    ({"grad_norm_above": 5, "skip_following": 4}, "lineage-skip/1"),
    ({"rule": "lineage-skip/1", "grad_norm_above": "5", "skip_following": 4}, "finite number"),
    ({"rule": "lineage-skip/1", "grad_norm_above": 5, "skip_following": -1}, "integer >= 0"),
    ({"rule": "lineage-skip/1", "grad_norm_above": 5, "skip_following": 4, "x": 1}, "other"),
])
def test_a_malformed_rule_is_named(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SkipRule.from_json(value)
