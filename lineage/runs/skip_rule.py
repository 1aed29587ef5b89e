"""The skip rule a run declares in its chain header, and the check of its records against it.

`lineage-skip/1` (docs/chain-spec.md, "Skip rule"): a step whose pre-clip grad norm is
above `grad_norm_above` (or not finite) is skipped, and so are the `skip_following` steps
after it; a trigger inside a cascade starts a new one. So step s must be skipped exactly
when some step t in s - skip_following .. s triggered.

    rule = SkipRule(grad_norm_above=5.0, skip_following=4)   # the Open-1B rule
    tracker = SkipTracker(rule)
    skipped = tracker.decide(step, grad_norm)                 # in the training loop
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

SKIP_RULE_SPEC = "lineage-skip/1"
_NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


@dataclass(frozen=True)
class SkipRule:
    grad_norm_above: float
    skip_following: int

    def to_json(self) -> dict[str, Any]:
        return {"grad_norm_above": float(self.grad_norm_above),
                "skip_following": int(self.skip_following), "rule": SKIP_RULE_SPEC}

    @classmethod
    def from_json(cls, value: Any) -> SkipRule:
        """The rule a header declares; ValueError names what is wrong with it."""
        if not isinstance(value, Mapping) or value.get("rule") != SKIP_RULE_SPEC:
            raise ValueError(f"`skip_rule` must be an object with \"rule\": \"{SKIP_RULE_SPEC}\"")
        threshold, following = value.get("grad_norm_above"), value.get("skip_following")
        if not isinstance(threshold, int | float) or isinstance(threshold, bool) or \
                not math.isfinite(threshold) or threshold < 0:
            raise ValueError("`skip_rule.grad_norm_above` must be a finite number >= 0")
        if not isinstance(following, int) or isinstance(following, bool) or \
                not 0 <= following <= 2**53 - 1:
            raise ValueError("`skip_rule.skip_following` must be an integer >= 0")
        if set(value) != {"rule", "grad_norm_above", "skip_following"}:
            raise ValueError("`skip_rule` has fields other than rule, grad_norm_above, "
                             "skip_following")
        return cls(float(threshold), following)

    def triggers(self, grad_norm: float) -> bool:
        return not math.isfinite(grad_norm) or grad_norm > self.grad_norm_above

    def describe(self) -> str:
        return (f"pre-clip grad norm > {self.grad_norm_above:g} skips the step and the next "
                f"{self.skip_following}")


class SkipTracker:
    """The trainer's side: feed each step's pre-clip grad norm, get the skip decision."""

    def __init__(self, rule: SkipRule) -> None:
        self.rule = rule
        self._until = -1

    def decide(self, step: int, grad_norm: float) -> bool:
        if self.rule.triggers(grad_norm):
            self._until = step + self.rule.skip_following
        return step <= self._until


def grad_norm_value(value: Any) -> float | None:
    """A record's grad_norm as a float (canonical JSON writes non-finite ones as strings)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:  # an integer beyond float range is above any threshold
            return math.inf
    return _NON_FINITE.get(value) if isinstance(value, str) else None


def check_skips(rule: SkipRule, records: Iterable[tuple[int, Any, Any]]) -> list[dict[str, Any]]:
    """Every step whose skip decision disagrees with the rule, named with the reason.

    `records` are (step, grad_norm, skipped) of consecutive steps from the chain's start.
    """
    violations = []
    trigger: tuple[int, float] | None = None  # the latest step that started a cascade
    for step, raw_norm, skipped in records:
        norm = grad_norm_value(raw_norm)
        if norm is None or not isinstance(skipped, bool):
            violations.append({"step": step, "reason": "no numeric grad_norm and boolean "
                               "skipped to check the rule against"})
            continue
        if rule.triggers(norm):
            trigger = (step, norm)
            if not skipped:
                violations.append({"step": step, "reason": f"grad norm {norm:g} is above "
                                   f"{rule.grad_norm_above:g}: the rule skips this step, "
                                   "but it was not skipped"})
            continue
        in_cascade = trigger is not None and step <= trigger[0] + rule.skip_following
        if in_cascade and not skipped:
            assert trigger is not None
            violations.append({"step": step, "reason": (
                f"cascade cut short: step {trigger[0]}'s grad norm {trigger[1]:g} skips steps "
                f"{trigger[0]}..{trigger[0] + rule.skip_following}, but step {step} was not "
                "skipped")})
        elif skipped and not in_cascade:
            violations.append({"step": step, "reason": (
                f"skipped without cause: no grad norm above {rule.grad_norm_above:g} in steps "
                f"{max(step - rule.skip_following, 0)}..{step}")})
    return violations
