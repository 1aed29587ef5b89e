"""`lineage chain verify`: recompute every link of a run's chain that can be recomputed.

For lineage-chain/2 (and /1): the genesis from the whole header, each record's canonical
form, its state hash, its link to the previous step, its stream cursor (data skips
included), its batch digests against digests recomputed from the stream (proof that the
trainer read the canonical order), the end record of a closed chain, and every step's skip
decision against the rule the header declares. For a foreign chain: continuity only, a
verdict of its own (`continuity-only`), and its batch digests when it is bound to a stream.
The answer names the first broken step.

Verdicts: ok (fully verified), broken, rule-violated (intact, but steps disagree with the
declared skip rule), continuity-only.
"""

from __future__ import annotations

import json
from typing import Any

from lineage.runs.answers import ChainVerification, SkipRuleVerdict, SkipViolation
from lineage.runs.chain import (
    CHAIN_SPEC,
    CHAIN_SPEC_V1,
    CHAIN_SPECS,
    canonical_json,
    end_hash,
    expected_genesis,
    line_step_hash,
)
from lineage.runs.chain_batches import batch_digests
from lineage.runs.skip_rule import SkipRule, check_skips
from lineage.store.base import BaseStore
from lineage.stream.query import stream_named, stream_schedule
from lineage.stream.record import StreamRecord

_END_KEYS = {"end", "last_state_hash", "state_hash", "steps"}
_SKIP_KEYS = {"reason", "windows"}


class _Broken(Exception):
    def __init__(self, step: int | None, reason: str) -> None:
        super().__init__(reason)
        self.step, self.reason = step, reason


def verify_chain(store: BaseStore, run: str, *, batches: bool = True,
                 expect_steps: int | None = None) -> ChainVerification:
    with store.reader(views=False) as con:
        from lineage.runs.query import _summary

        info = _summary(con, run)
        row = con.execute("SELECT header, end_record, skip_rule FROM runs WHERE name = ?",
                          [run]).fetchone()
        assert row is not None  # _summary raised UnknownObjectError for an unknown run
        header_text, end_text, rule_text = row
        header = json.loads(header_text)
        stream = stream_named(con, info.stream) if info.stream else None
        rows = con.execute("SELECT step, record FROM steps WHERE run = ? ORDER BY step",
                           [run]).fetchall()
        full = header.get("chain") in CHAIN_SPECS
        end = json.loads(end_text) if end_text else None
        walk = _Walk(header, stream, full, int(info.world_size))
        broken = _attempt(walk.run, rows)
        batches_checked = False
        if batches and stream is not None:  # a digest breaks before any later link
            batches_checked = True
            broken = _attempt(_check_batches, con, store, stream, int(info.world_size),
                              walk) or broken
        broken = broken or _attempt(_check_end, end_text, walk) or \
            _attempt(_check_length, expect_steps, walk)
    first_broken_step, reason = (broken.step, broken.reason) if broken else (None, None)
    if broken is not None:
        walk.checked = [r for r in walk.checked if broken.step is None or r[0] < broken.step]
    # the rule as recorded: the header's, or what the import declared for a foreign chain
    declared = json.loads(rule_text) if rule_text is not None else None
    skip_rule = _skip_verdict(declared, walk.checked, broken)
    verdict = _verdict(first_broken_step, reason, skip_rule, full)
    return ChainVerification(
        run=run, chain=header.get("chain"), algorithm=header.get("algorithm"),
        checked="full" if full else "continuity", verdict=verdict, ok=verdict == "ok",
        genesis=header.get("genesis"), stream=stream.name if stream else None,
        batches_checked=batches_checked, closed=end is not None,
        end_steps=end.get("steps") if isinstance(end, dict) else None,
        expect_steps=expect_steps, steps_checked=len(walk.checked),
        first_broken_step=first_broken_step, reason=reason,
        last_state_hash=walk.checked[-1][3] if walk.checked else None, skip_rule=skip_rule)


def _attempt(check: Any, *args: Any) -> _Broken | None:
    try:
        check(*args)
    except _Broken as broken:
        return broken
    return None


def _verdict(first_broken_step: int | None, reason: str | None, skip_rule: SkipRuleVerdict,
             full: bool) -> str:
    if first_broken_step is not None or reason:
        return "broken"
    if skip_rule.verdict in ("violated", "invalid"):
        return "rule-violated"
    return "ok" if full else "continuity-only"


class _Walk:
    """The records in step order, checked link by link; `checked` holds
    (step, first window, record, state_hash) of every record that passed."""

    def __init__(self, header: dict[str, Any], stream: StreamRecord | None, full: bool,
                 world_size: int) -> None:
        self.header, self.stream, self.full = header, stream, full
        self.spec = header.get("chain") if full else None
        # windows per step, step by step (the stream's batch, or its schedule)
        self.schedule = stream_schedule(stream) if stream else None
        self.windows = self.schedule.first_window(stream.steps) \
            if stream and self.schedule else None
        self.world_size = world_size
        self.checked: list[tuple[int, int | None, dict[str, Any], str | None]] = []

    def run(self, rows: list[tuple[int, str]]) -> None:
        if self.full:
            self._check_genesis()
        prev, cursor = self.header.get("genesis"), 0
        for expected, (step, text) in enumerate(rows):
            if step != expected:
                raise _Broken(expected, f"gap: step {expected} is missing" if expected
                              else "the chain does not start at step 0")
            record = json.loads(text)
            if record.get("prev_hash") != prev:
                raise _Broken(step, "prev_hash does not equal the previous step's state_hash"
                              if step else "prev_hash of step 0 is not the genesis")
            first = self._check_full(step, text, record, cursor) if self.full \
                else self._foreign_window(step, record)
            prev = record.get("state_hash")
            cursor = record.get("cursor") if self.full else cursor
            self.checked.append((step, first, record, prev))

    def _check_genesis(self) -> None:
        header, stream = self.header, self.stream
        if header.get("algorithm") != "blake3":
            raise _Broken(0, f"{header.get('chain')} is defined for blake3 only, the header "
                          f"says {header.get('algorithm')!r}")
        if header.get("genesis") != expected_genesis(header):
            raise _Broken(0, "the header's genesis does not match its fields")
        if stream is None or header.get("stream_spec_hash") != stream.spec_hash or \
                header.get("manifest_hash") != stream.manifest_hash or \
                header.get("world_size") != self.world_size:
            raise _Broken(0, "the header names another stream, corpus or world size than "
                          "the run")

    def _check_full(self, step: int, text: str, record: dict[str, Any], cursor: int) -> int:
        if text != canonical_json(record):
            raise _Broken(step, "the record is not canonical JSON (its bytes are what is hashed)")
        if record.get("state_hash") != line_step_hash(text, record,
                                                      spec=self.spec or CHAIN_SPEC):
            raise _Broken(step, "state_hash does not match the record (the record was changed)")
        assert self.schedule is not None and self.windows is not None
        jump = self._data_skip(step, record)
        batch = self.schedule.windows_of(step)
        expected = cursor + jump + batch
        if record.get("cursor") != expected:
            detail = f" + data skip {jump}" if jump else ""
            raise _Broken(step, f"cursor {record.get('cursor')} is not {expected} windows "
                          f"(previous cursor {cursor}{detail} + batch {batch})")
        if expected > self.windows:
            raise _Broken(step, f"cursor {expected} is past the stream's end "
                          f"({self.windows} windows)")
        return expected - batch

    def _data_skip(self, step: int, record: dict[str, Any]) -> int:
        skip = record.get("data_skip")
        if skip is None:
            return 0
        windows = skip.get("windows") if isinstance(skip, dict) else None
        if self.spec == CHAIN_SPEC_V1 or not isinstance(skip, dict) or \
                set(skip) != _SKIP_KEYS or not isinstance(windows, int) or \
                isinstance(windows, bool) or windows < 1 or \
                not isinstance(skip["reason"], str) or not skip["reason"]:
            raise _Broken(step, "data_skip must be {\"reason\": text, \"windows\": n >= 1} "
                          f"(lineage-chain/2 only), not {skip!r}")
        return windows

    def _foreign_window(self, step: int, record: dict[str, Any]) -> int | None:
        if self.schedule is None:
            return None
        cursor = record.get("cursor")
        if isinstance(cursor, int) and not isinstance(cursor, bool):
            return cursor - self.schedule.windows_of(step)
        return self.schedule.first_window(step)


def _check_batches(con: Any, store: BaseStore, stream: StreamRecord, world_size: int,
                   walk: _Walk) -> None:
    starts = [(step, first) for step, first, _, _ in walk.checked if first is not None]
    expected = batch_digests(con, store, stream, world_size, starts)
    for step, _, record, _ in walk.checked:
        if record.get("batch_digests") != expected.get(step):
            raise _Broken(step, "batch digests differ from the stream's segments for this step")


def _check_end(end_text: str | None, walk: _Walk) -> None:
    if end_text is None:
        return
    end = json.loads(end_text)
    steps = len(walk.checked)
    last = walk.checked[-1][3] if walk.checked else walk.header.get("genesis")
    if end_text != canonical_json(end) or set(end) != _END_KEYS or end["end"] is not True \
            or end["state_hash"] != end_hash(end):
        raise _Broken(steps, "the end record is not a canonical, correctly hashed end record")
    said = end["steps"]
    if said > steps:
        raise _Broken(steps, f"cut: the end record says {said} steps, the chain stops "
                      f"after step {steps - 1} (steps {steps}..{said - 1} are missing)")
    if said < steps:
        raise _Broken(said, f"step {said} follows the end record (the chain was closed "
                      f"after {said} steps)")
    if end["last_state_hash"] != last:
        raise _Broken(steps, f"the end record's last_state_hash is not step {steps - 1}'s "
                      "state_hash")


def _check_length(expect_steps: int | None, walk: _Walk) -> None:
    steps = len(walk.checked)
    if expect_steps is None or steps == expect_steps:
        return
    if steps < expect_steps:
        raise _Broken(steps, f"cut: {expect_steps} steps expected, the chain stops after "
                      f"step {steps - 1}")
    raise _Broken(expect_steps, f"the chain has {steps} steps, {expect_steps} expected")


def _skip_verdict(declared: Any, checked: list[Any],
                  broken: _Broken | None) -> SkipRuleVerdict:
    """The rule checked over the verified steps. A violation among them stands; without
    one, a broken chain's rule is `not-checked`: the records past the break are not
    evidence, so "every step agrees" cannot be said."""
    skipped_steps = sum(1 for c in checked if c[2].get("skipped") is True)
    if declared is None:
        return SkipRuleVerdict(declared=None, description=None, verdict="no rule declared",
                               violations=(), reason=None, skipped_steps=skipped_steps)
    try:
        rule = SkipRule.from_json(declared)
    except ValueError as exc:
        return SkipRuleVerdict(declared=declared, description=None, verdict="invalid",
                               violations=(), reason=str(exc), skipped_steps=None)
    violations = tuple(SkipViolation(step=v["step"], reason=v["reason"]) for v in check_skips(
        rule, ((c[0], c[2].get("grad_norm"), c[2].get("skipped")) for c in checked)))
    verdict = "violated" if violations else "not-checked" if broken is not None else "ok"
    return SkipRuleVerdict(declared=declared, description=rule.describe(), verdict=verdict,
                           violations=violations, reason=None, skipped_steps=skipped_steps)
