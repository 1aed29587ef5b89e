"""The status rules on a real run: every interval status, custody through relays, broken
relays, swapped mismatches, expired claims, and properties that hold for any ledger."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lineage.api import Store
from lineage.audit.ledger import add_records
from lineage.audit.status import STATUSES
from lineage.runs.chain import canonical_json, end_hash, genesis_hash, step_hash

from ..conftest import Cli
from .audit_run import NOW, RUN, Chain, copy_store, ledger, rebuild_run

EXPECTED_INTERVALS = ["confirmed", "provisional", "disputed", "mismatch", "provisional",
                      "claimed", "untouched", "provisional"]




@pytest.fixture
def audited(fresh: tuple[Store, Chain]) -> tuple[Store, Chain, list[dict[str, Any]]]:
    store, chain = fresh
    records = ledger(chain)
    add_records(store, records, source="test")
    return store, chain, records


def statuses(store: Store, now: Any = NOW) -> list[str]:
    answer = store.audit_status(RUN, now=now)
    shown = {p.interval: p.status for p in answer.per_interval}
    return [shown.get(k, "untouched") for k in range(-(-answer.steps // answer.interval))]


def test_every_status_follows_its_rule(audited: tuple[Store, Chain, list[dict[str, Any]]]) -> None:
    store, chain, _ = audited
    answer = store.audit_status(RUN, now=NOW)
    assert statuses(store) == EXPECTED_INTERVALS
    assert answer.intervals.to_dict() == {"confirmed": 1, "provisional": 3, "claimed": 1,
                                          "untouched": 1, "disputed": 1, "mismatch": 1}
    assert (answer.interval, answer.steps, answer.chain_head) == (4, 32, chain.head)
    # 0-3 relayed, 4-6 (7 never replayed: one step short), 16, 28 (29's relay is broken)
    assert answer.steps_verified == 9 and answer.longest_contiguous == 7
    assert [p.verified for p in answer.per_interval] == [4, 3, 0, 0, 1, 0, 1]
    assert answer.participants == 7 and answer.replay_hours == 8.0  # 16 replays of 30 min
    assert answer.inconclusive == (17,)
    # Claimed steps 20-23 are not offered; the expired claim on 24-27 no longer counts.
    assert answer.next_unclaimed == (7, 8, 9, 10, 11, 12, 13, 14, 15, 17)
    assert answer.spec == "lineage-audit/1"
    table = answer.to_polars()
    assert table.columns == ["interval", "first_step", "last_step", "status", "verified"]
    assert table["status"].to_list() == [s for s in EXPECTED_INTERVALS if s != "untouched"]


def _relinked(records: list[dict[str, Any]], first: int, folder: Path) -> Path:
    """The log with every record from line `first` on re-hashed (as its trainer, or a
    forger, would write it), saved in `folder`."""
    for line in range(first, len(records)):
        record = records[line]
        if line == 0:
            record["genesis"] = genesis_hash(record)
        elif "end" in record:
            record["last_state_hash"] = records[line - 1]["state_hash"]
            record["state_hash"] = end_hash(record)
        else:
            if line > first or line == 1:
                record["prev_hash"] = records[line - 1].get("state_hash",
                                                            records[0]["genesis"])
            record["state_hash"] = step_hash(record)
    log = folder / "steps.jsonl"
    log.write_text("".join(canonical_json(r) + "\n" for r in records), encoding="utf-8")
    return log


def test_a_declared_non_deterministic_reduction_makes_every_mismatch_inconclusive(
        base: Path, tmp_path: Path) -> None:
    records = [json.loads(line) for line in
               (base.parent / "run" / "steps.jsonl").read_text(encoding="utf-8").splitlines()]
    records[0]["config"]["reduction"] = "non-deterministic"
    store = rebuild_run(base, tmp_path / "store", _relinked(records, 0, tmp_path))
    add_records(store, ledger(Chain.of(store)), source="test")
    answer = store.audit_status(RUN, now=NOW)
    assert answer.chain.reduction == "non-deterministic"
    # 8 (a match and a mismatch) is no longer disputed, 12 (a mismatch) no longer one
    assert statuses(store) == ["confirmed", "provisional", "provisional", "provisional",
                               "provisional", "claimed", "untouched", "provisional"]
    assert answer.inconclusive == (12, 17)
    assert "the run declares a non-deterministic reduction" in \
        Cli(store.root)("audit", "status", RUN).stdout
    records[0]["config"]["reduction"] = "sometimes"
    bad = _relinked(records, 0, tmp_path)
    out = Cli(store.root)("ingest", "steps", str(bad), "--run", "other", "--stream", "s",
                          "--world-size", "2", code=2)
    assert "steps.jsonl:line 1: `config.reduction` must be one of deterministic, " \
        "non-deterministic, not 'sometimes'" in out.stderr


def test_past_a_broken_chain_no_attestation_counts(base: Path, tmp_path: Path) -> None:
    """The trainer's log claims step 13's batch for step 12 and is re-hashed from there on:
    it ingests (its links hold) but `chain verify` breaks at step 12, and the ledger's
    attestations on steps 12 and later are about states the chain no longer vouches for."""
    lines = (base.parent / "run" / "steps.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    records[13]["batch_digests"] = records[14]["batch_digests"]  # line 13 is step 12
    store = rebuild_run(base, tmp_path / "store", _relinked(records, 13, tmp_path))
    add_records(store, ledger(Chain.of(store)), source="test")

    answer = store.audit_status(RUN, now=NOW)
    assert (answer.chain.verdict, answer.chain.first_broken_step) == ("broken", 12)
    assert "batch digests differ" in (answer.chain.reason or "")
    # 12 and its relay 13, 16 twice, 17, 28 and its relay 29: none counts
    assert answer.chain.attestations_past_break == 7
    assert statuses(store) == ["confirmed", "provisional", "disputed", "untouched",
                               "untouched", "claimed", "untouched", "untouched"]
    assert answer.inconclusive == () and answer.steps_verified == 7
    assert all(link.step < 12 for chain in answer.relays for link in chain)
    shown = Cli(store.root)("audit", "status", RUN).stdout
    assert "chain        BROKEN at step 12: " in shown
    assert "7 attestation(s) on steps from there on do not count" in shown
    assert store.audit_step(RUN, 16).status == "past-break"
    assert store.audit_step(RUN, 8).status == "disputed"


def test_relay_chains_say_who_continued_from_whose_checkpoint(
        audited: tuple[Store, Chain, list[dict[str, Any]]]) -> None:
    store, _, _ = audited
    relays = store.audit_status(RUN, now=NOW).relays
    assert [[(link.step, link.auditor) for link in chain] for chain in relays] == [
        [(0, "ann"), (1, "bob"), (2, "cat"), (3, "dan")], [(4, "ann"), (5, "bob"), (6, "bob")]]


def test_a_broken_relay_breaks_custody(audited: tuple[Store, Chain, list[dict[str, Any]]]) -> None:
    store, _, _ = audited
    # 13 matched, but from a checkpoint produced by step 12's mismatch
    assert store.audit_step(RUN, 13).status == "unverified"
    # 29 matched, from a checkpoint whose state hash is not the chain's
    step = store.audit_step(RUN, 29, now=NOW)
    assert (step.status, step.verified, len(step.attestations)) == ("unverified", False, 1)


def test_a_relay_needs_its_producer_verified(fresh: tuple[Store, Chain]) -> None:
    store, chain = fresh
    ungrounded = chain.replay(5, {"kind": "published", "step": 4,
                                  "weights_digest": chain.weights[3]})  # no checkpoint at 4
    offered = chain.offer(ungrounded)
    add_records(store, [ungrounded, offered, chain.relay(offered, who="bob")], source="test")
    assert store.audit_status(RUN, now=NOW).steps_verified == 0
    # Step 5 verified by another replay does not mend the relay: its producer started from
    # a checkpoint the run never published, so step 6's custody stays broken.
    four = chain.published(4)
    offered = chain.offer(four)
    add_records(store, [four, offered, chain.relay(offered, who="cat")], source="test")
    assert store.audit_status(RUN, now=NOW).steps_verified == 2
    assert store.audit_step(RUN, 6).status == "unverified"


def test_one_step_short_of_confirmation_then_confirmed(fresh: tuple[Store, Chain]) -> None:
    store, chain = fresh
    made = [chain.published(4)]
    for who in ("bob", "cat"):
        offered = chain.offer(made[-1])
        made += [offered, chain.relay(offered, who=who)]
    add_records(store, made, source="test")
    assert statuses(store)[1] == "provisional"
    offered = chain.offer(made[-1])
    add_records(store, [offered, chain.relay(offered, who="dan")], source="test")
    assert statuses(store)[1] == "confirmed"
    assert store.audit_status(RUN, now=NOW).longest_contiguous == 4


def test_a_swapped_mismatch_alone_is_inconclusive_not_a_mismatch(
        fresh: tuple[Store, Chain]) -> None:
    store, chain = fresh
    add_records(store, [chain.published(8, match=False, swapped=True)], source="test")
    answer = store.audit_status(RUN, now=NOW)
    assert statuses(store)[2] == "provisional" and answer.inconclusive == (8,)
    assert store.audit_step(RUN, 8).status == "inconclusive"
    add_records(store, [chain.published(8, who="bob", match=False)], source="test")
    assert statuses(store)[2] == "mismatch" and store.audit_step(RUN, 8).status == "mismatch"


def test_initial_state_units_never_count(fresh: tuple[Store, Chain]) -> None:
    store, chain = fresh
    start = chain.initial(unit="initial-state")
    offered = chain.offer(start)  # nor does a relay from what it saved
    add_records(store, [start, offered, chain.relay(offered, who="bob")], source="test")
    answer = store.audit_status(RUN, now=NOW)
    assert answer.steps_verified == 0 and answer.relays == ()
    assert statuses(store) == ["provisional"] + ["untouched"] * 7  # step 1 was replayed
    assert store.audit_step(RUN, 0).status == "unattested"
    assert store.audit_step(RUN, 1).status == "unverified"
    assert answer.participants == 2


def test_claims_expire(fresh: tuple[Store, Chain]) -> None:
    store, chain = fresh
    add_records(store, [chain.claim(0, 5, who="eve", made=NOW, days=2)], source="test")
    assert statuses(store, NOW + timedelta(days=1))[:2] == ["claimed", "claimed"]
    assert statuses(store, NOW + timedelta(days=3))[:2] == ["untouched", "untouched"]
    assert store.audit_status(RUN, now=NOW + timedelta(days=1)).next_unclaimed[0] == 6


def test_a_run_without_an_interval_is_refused(fresh: tuple[Store, Chain]) -> None:
    from lineage.errors import UsageError

    store, _ = fresh
    with store.writer() as con:
        con.execute("UPDATE runs SET checkpoint_every = NULL")
    with pytest.raises(UsageError, match="declares no checkpoint interval"):
        store.audit_status(RUN)


RANK = {"mismatch": 0, "disputed": 0, "untouched": 1, "claimed": 2, "provisional": 3,
        "confirmed": 4}


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(order=st.permutations(range(26)), split=st.integers(0, 26))
def test_status_does_not_depend_on_the_order_records_arrive(
        audited: tuple[Store, Chain, list[dict[str, Any]]], base: Path, tmp_path_factory: Any,
        order: list[int], split: int) -> None:
    _, chain, records = audited
    assert len(records) == 26
    store = copy_store(base, tmp_path_factory.mktemp("order") / "store")
    shuffled = [records[i] for i in order]
    add_records(store, shuffled[:split], source="first")
    add_records(store, shuffled[split:], source="second")
    assert statuses(store) == EXPECTED_INTERVALS


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(step=st.integers(0, 31), match=st.booleans(), swapped=st.booleans(),
       who=st.sampled_from(["ann", "zed"]))
def test_a_record_never_lowers_a_confirmed_interval_but_by_a_counting_mismatch(
        audited: tuple[Store, Chain, list[dict[str, Any]]], tmp_path_factory: Any,
        step: int, match: bool, swapped: bool, who: str) -> None:
    recorded, chain, _ = audited
    store = copy_store(recorded.root, tmp_path_factory.mktemp("more") / "store")  # has them
    before = statuses(store)
    start = {"kind": "initial"} if step == 0 else \
        {"kind": "published", "step": step - 1, "weights_digest": "blake3:" + "0" * 64}
    add_records(store, [chain.replay(step, start, who=who, match=match, swapped=swapped)],
                source="test")
    after = statuses(store)
    counting = not match and not swapped
    for k, (was, now) in enumerate(zip(before, after, strict=True)):
        if was == "confirmed" and not (counting and k == step // 4):
            assert now == "confirmed", (k, was, now)
    assert set(after) <= set(STATUSES)
