"""A record counts once whatever its versions: signing a recorded attestation, importing a
bundle twice, or two keys signing one record adds signatures, never work. Coverage
(status, who, show, report) is compared with the unsigned ledger's, through the CLI."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path
from typing import Any

import blake3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lineage.api import Store
from lineage.audit import records as R
from lineage.audit import sshsig
from lineage.audit.ledger import _insert, _row, add_records, iter_records
from lineage.runs.chain import canonical_json

from ..conftest import Cli
from .audit_run import NOW, RUN, Chain, ledger

# Steps whose records `audit show` lists: a relay, a dispute, a broken custody, a swapped
# mismatch, two claims, a bad checkpoint (audit_run.ledger)
SHOWN = (0, 3, 4, 6, 8, 12, 13, 17, 20, 24, 28, 29)


def _write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(canonical_json(r) + "\n" for r in records), encoding="utf-8")
    return path


def _coverage(store: Store) -> dict[str, Any]:
    """What the ledger adds up to, as `audit status`, `who`, `show` and `report` say it;
    the keys `who` lists are left out (signing adds them, on purpose)."""
    status = store.audit_status(RUN, now=NOW).to_dict()
    who = [{k: v for k, v in p.items() if k != "public_keys"}
           for p in store.audit_who(RUN).to_dict()["participants"]]
    shown = {}
    for step in SHOWN:
        answer = store.audit_step(RUN, step, now=NOW).to_dict()
        shown[step] = {kind: [R.record_identity(r) for r in answer[kind]]
                       for kind in ("attestations", "checkpoints", "claims")}
    from lineage.audit.report import coverage_report

    machines = coverage_report(store, RUN, now=NOW).to_dict()["machines"]
    relays = [[(link["step"], link["auditor"]) for link in chain] for chain in status.pop(
        "relays")]
    return {"status": status, "relays": relays, "who": who, "show": shown,
            "machines": machines}


@pytest.fixture
def unsigned(fresh: tuple[Store, Chain], tmp_path: Path) -> tuple[Store, list[dict[str, Any]],
                                                                   dict[str, Any]]:
    """The fresh store with the ledger of every status recorded unsigned through the CLI,
    and its coverage."""
    store, chain = fresh
    records = ledger(chain)
    Cli(store.root).json("audit", "record", str(_write_jsonl(tmp_path / "ledger.jsonl",
                                                             records)))
    return store, records, _coverage(store)


def _exported_records(store: Store, folder: Path) -> Path:
    """`audit export`, and its records.jsonl taken out of the bundle."""
    bundle = folder / "ledger.zip"
    Cli(store.root).json("audit", "export", RUN, "-o", str(bundle))
    with zipfile.ZipFile(bundle) as archive:
        (folder / "exported.jsonl").write_bytes(archive.read("records.jsonl"))
    return folder / "exported.jsonl"


def test_signing_recorded_records_adds_signatures_not_work(unsigned, keys, tmp_path):
    store, records, before = unsigned
    cli = Cli(store.root)
    exported = _exported_records(store, tmp_path)
    cli("audit", "sign", str(exported), "--key", str(keys["alice"]), "-o",
        str(tmp_path / "signed.jsonl"))
    again = cli("audit", "record", str(tmp_path / "signed.jsonl"))
    assert again.stdout == (f"added 0 record(s); 0 already in the ledger; signatures added "
                            f"to {len(records)} record(s) it held (each counted once)\n")
    assert _coverage(store) == before
    text = cli("audit", "status", RUN).stdout
    assert text.count("relay        ") == len(before["relays"]) == 2
    assert cli.json("audit", "record", str(tmp_path / "signed.jsonl")) == {
        "added": [], "present": [R.record_id(r) for r in _read(tmp_path / "signed.jsonl")],
        "newly_signed": []}
    who = {p["name"]: p for p in cli.json("audit", "who", RUN)["participants"]}
    assert who["ann"]["public_keys"] == [sshsig.public_key_line(keys["alice"])]
    shown = cli.json("audit", "show", RUN, "--step", "8")
    assert [a["auditor"]["name"] for a in shown["attestations"]] == ["ann", "bob"]
    assert all("signature" in a for a in shown["attestations"])  # the signed version shows
    assert sorted(shown["signed_by"]) == sorted(R.record_id(a) for a in shown["attestations"])
    assert ", signed by 1 key(s)" in cli("audit", "show", RUN, "--step", "8").stdout


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_bundle_imported_twice_counts_once(unsigned, keys, tmp_path, base):
    store, records, before = unsigned
    signed = [sshsig.sign_record(r, keys["bob"]) for r in records]
    add_records(store, signed, source="signed")
    bundle = tmp_path / "both.zip"
    Cli(store.root).json("audit", "export", RUN, "-o", str(bundle))
    from .audit_run import copy_store

    other = copy_store(base, tmp_path / "other")
    first = Cli(other.root).json("audit", "import", str(bundle))
    assert len(first["added"]) == len(records)
    # the other version of each: a signature when it is the signed one, else nothing new
    assert len(first["newly_signed"]) + len(first["already_present"]) == len(records)
    assert set(first["newly_signed"]) <= {R.record_id(r) for r in signed}
    second = Cli(other.root).json("audit", "import", str(bundle))
    assert second["added"] == second["newly_signed"] == []
    assert len(second["already_present"]) == 2 * len(records)
    assert _coverage(other) == before == _coverage(store)
    line = Cli(other.root)("audit", "import", str(bundle)).stdout
    assert line == f"imported 0 records, {2 * len(records)} already present " \
                   f"({len(records)} of {2 * len(records)} signed)\n"


def test_one_record_signed_by_two_keys_is_one_record_with_two_signatures(fresh, keys,
                                                                         tmp_path):
    store, chain = fresh
    replay = chain.published(4, who="ann", duration=3600.0)
    by_alice, by_bob = (sshsig.sign_record(replay, keys[k]) for k in ("alice", "bob"))
    assert R.record_id(by_alice) != R.record_id(by_bob)
    assert R.record_identity(by_alice) == R.record_identity(by_bob) == R.record_id(replay)
    answer = Cli(store.root).json("audit", "record", str(_write_jsonl(
        tmp_path / "two.jsonl", [by_alice, by_bob])))
    assert answer == {"added": [R.record_id(by_alice)], "present": [],
                      "newly_signed": [R.record_id(by_bob)]}
    status = store.audit_status(RUN, now=NOW)
    assert (status.steps_verified, status.replay_hours, status.participants) == (1, 1.0, 1)
    (ann,) = store.audit_who(RUN).participants
    assert (ann.attestations, ann.steps, ann.replay_hours) == (1, 1, 1.0)
    assert sorted(ann.public_keys) == sorted(sshsig.public_key_line(keys[k])
                                             for k in ("alice", "bob"))
    shown = store.audit_step(RUN, 4, now=NOW)
    assert len(shown.attestations) == 1
    assert "signature" in shown.attestations[0]
    assert shown.signed_by == {R.record_id(shown.attestations[0]): tuple(sorted(ann.public_keys))}
    # unsigned, the record adds nothing more; exported, both signatures travel
    assert add_records(store, [replay], source="again").present == [R.record_id(replay)]
    assert sorted(map(R.record_id, iter_records(store, RUN))) == sorted(
        map(R.record_id, (by_alice, by_bob)))


def test_a_signed_copy_of_a_held_record_signs_it(fresh, keys):
    """A replay signed with --sign-key names the key before it is signed: its unsigned copy
    (as a relay folder holds it) has the signed one's id."""
    store, chain = fresh
    key = sshsig.public_key_line(keys["alice"])
    replay = chain.published(4, who="ann")
    keyed = R.validate({**replay, "auditor": {**replay["auditor"], "public_key": key}})
    signed = sshsig.sign_record(keyed, keys["alice"])
    assert R.record_id(keyed) == R.record_id(signed)
    add_records(store, [keyed], source="relay folder")
    assert add_records(store, [signed], source="signed").newly_signed == [R.record_id(signed)]
    assert iter_records(store, RUN) == [signed]
    assert store.sql("SELECT count(*), bool_and(signed) FROM audit_records").rows == [(1, True)]
    assert store.audit_step(RUN, 4, now=NOW).signed_by == {R.record_id(signed): (key,)}


def test_a_relay_signed_after_the_fact_keeps_its_custody(unsigned, keys, base, tmp_path):
    """Only the signed versions reach a ledger: their references name the records as they
    were unsigned (their identities), and custody holds through them."""
    _, records, before = unsigned
    from .audit_run import copy_store

    other = copy_store(base, tmp_path / "other")
    add_records(other, [sshsig.sign_record(r, keys["alice"]) for r in records],
                source="signed")
    assert _coverage(other) == before
    assert before["relays"] == [[(0, "ann"), (1, "bob"), (2, "cat"), (3, "dan")],
                                [(4, "ann"), (5, "bob"), (6, "bob")]]


def test_a_ledger_already_holding_both_versions_counts_each_record_once(unsigned, keys):
    """What earlier versions wrote (every version kept as a record of its own) reads as
    one record per identity, without a repair."""
    store, records, before = unsigned
    signed = [sshsig.sign_record(r, keys["bob"]) for r in records]
    keyed = [R.validate({**r, "auditor": {**r["auditor"], "public_key": sshsig.public_key_line(
        keys["alice"])}}) for r in records]  # unsigned copies naming a key
    with store.writer() as con:
        _insert(con, [_row(r, bool(i < len(signed))) for i, r in enumerate(signed + keyed)])
    assert store.sql("SELECT count(*) FROM audit_records").rows == [(3 * len(records),)]
    assert _coverage(store) == before


# -- any versions, in any order, in any batches ------------------------------------------


_SIGNED: dict[tuple[str, str], dict[str, Any]] = {}


def _version(record: dict[str, Any], who: str, keys: dict[str, Path]) -> dict[str, Any]:
    """The record unsigned, or signed by alice's or bob's key (signed once per test run)."""
    if who == "unsigned":
        return record
    made = (R.record_id(record), who)
    if made not in _SIGNED:
        _SIGNED[made] = sshsig.sign_record(record, keys[who])
    return _SIGNED[made]


@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_coverage_is_the_same_whatever_versions_arrive_in_whatever_order(unsigned, keys, data):
    store, records, before = unsigned
    with store.writer() as con:
        con.execute("DELETE FROM audit_records")
    versions = []
    for record in records:  # at least one version of each record
        chosen = data.draw(st.sets(st.sampled_from(["unsigned", "alice", "bob"]), min_size=1))
        versions += [_version(record, who, keys) for who in sorted(chosen)]
    order = data.draw(st.permutations(versions))
    cuts = sorted(data.draw(st.sets(st.integers(1, len(order) - 1), max_size=3)))
    for batch in (order[a:b] for a, b in zip([0, *cuts], [*cuts, len(order)], strict=True)):
        add_records(store, batch, source="batch")
    assert _coverage(store) == before
    # kept: every signature, and an unsigned version only when it came first of its record
    firsts = {R.record_identity(v): v for v in reversed(order)}
    kept = {R.record_id(v) for v in order if "signature" in v} | {
        R.record_id(v) for v in firsts.values() if "signature" not in v}
    assert {r[0] for r in store.sql("SELECT id FROM audit_records").rows} == kept


# -- the ledger's SQL tells versions apart as the identity does ---------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-10**30, max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                max_size=3),
    max_leaves=8)


@settings(max_examples=200, deadline=None)
@given(extras=st.lists(_JSON, min_size=2, max_size=2), names=st.sampled_from(["ann", "ann\u2028"]),
       keyed=st.lists(st.booleans(), min_size=2, max_size=2),
       signed=st.lists(st.booleans(), min_size=2, max_size=2), same=st.booleans())
def test_the_sql_body_is_the_same_exactly_when_the_identity_is(extras, names, keyed, signed,
                                                                same):
    import duckdb

    from lineage.audit.versions import unsigned_body

    records = []
    for extra, has_key, has_signature in zip(extras if not same else extras[:1] * 2, keyed,
                                             signed, strict=True):
        record = {"spec": "lineage-audit/1", "kind": "claim", "run": RUN,
                  "auditor": {"name": names, "payout": None,
                              "public_key": "ssh-ed25519 AAAA" if has_key else None},
                  "created_at": "2026-12-01T12:00:00Z", "extra": extra}
        if has_signature:
            record["signature"] = "-----BEGIN SSH SIGNATURE-----\nAAAA\n"
        records.append(record)
    con = duckdb.connect()
    bodies = [con.execute(f"SELECT {unsigned_body('?')}", [canonical_json(r)]).fetchone()[0]
              for r in records]
    assert (bodies[0] == bodies[1]) == (R.record_identity(records[0]) ==
                                        R.record_identity(records[1]))


# -- the identity, as docs/audit-spec.md defines it -----------------------------------------

SPEC = Path(__file__).parents[2] / "docs" / "audit-spec.md"


def _plain_id(record: dict[str, Any]) -> str:
    text = json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "blake3:" + blake3.blake3(text.encode()).hexdigest()


def test_the_documented_identity_vector_holds(keys):
    page = SPEC.read_text(encoding="utf-8")
    found = re.search(r"<!-- identity-vector -->\n```json\n(.*?)```", page, re.S)
    assert found, "docs/audit-spec.md lost its identity vector"
    vector = json.loads(found.group(1))
    record = vector["record"]
    keyed = {**record, "auditor": {**record["auditor"], "public_key": vector["public_key"]}}
    assert R.record_id(record) == _plain_id(record) == vector["id"]
    assert R.record_identity(record) == vector["identity"] == vector["id"]
    assert R.record_id(keyed) == _plain_id(keyed) == vector["keyed_id"]
    assert R.record_identity(keyed) == vector["identity"]
    signed = sshsig.sign_record(R.validate(record), keys["alice"])
    assert R.record_identity(signed) == vector["identity"] != R.record_id(signed)
    assert R.record_identity({**record, "created_at": "2026-12-01T12:00:01Z"}) != \
        vector["identity"]  # another field: another record
