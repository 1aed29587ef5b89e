"""Audit bundles check themselves: records come back exactly as written, and an altered,
forged, smuggled or unsigned record is refused by name."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lineage.audit import bundle, sshsig
from lineage.errors import InputError, UsageError
from lineage.runs.chain import blake3_hex, canonical_json

from .audit_helpers import RUN, attestation, checkpoint, claim, public_line


@pytest.fixture(scope="module")
def records(keys) -> list[dict[str, Any]]:
    """A small ledger: signed attestations and a relay checkpoint, an unsigned claim."""
    first = sshsig.sign_record(attestation(100), keys["alice"])
    second = sshsig.sign_record(attestation(101, "bob"), keys["bob"])
    relay = sshsig.sign_record(checkpoint(101, bundle.record_id(second), "bob"), keys["bob"])
    return [first, second, relay, claim(102, 199)]


def _members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _rewrite(path: Path, members: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def _manifest_for(members: dict[str, bytes], ids: list[str]) -> bytes:
    """The manifest a forger would write: every digest recomputed."""
    body = {"spec": bundle.BUNDLE_SPEC, "run": RUN, "records": ids,
            "members": {n: blake3_hex(d) for n, d in members.items() if n != "MANIFEST.json"}}
    return canonical_json({**body, "digest": blake3_hex(canonical_json(body).encode())}).encode()


def test_records_come_back_exactly_as_written(records, tmp_path):
    result = bundle.write_bundle(records, tmp_path / "ledger.zip", run=RUN)
    assert result["records"] == 4 and result["spec"] == "lineage-audit-bundle/1"
    assert bundle.read_bundle(tmp_path / "ledger.zip") == records
    manifest = json.loads(_members(tmp_path / "ledger.zip")["MANIFEST.json"])
    assert manifest["records"] == [bundle.record_id(r) for r in records]
    assert manifest["run"] == RUN and manifest["digest"] == result["digest"]
    assert set(manifest["members"]) == {"records.jsonl"}


def test_the_same_records_give_the_same_bytes(records, tmp_path):
    bundle.write_bundle(records, tmp_path / "a.zip", run=RUN)
    bundle.write_bundle(records + records[:2], tmp_path / "b.zip", run=RUN)  # repeats dropped
    assert (tmp_path / "a.zip").read_bytes() == (tmp_path / "b.zip").read_bytes()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")]


def test_a_record_of_another_run_is_not_written(records, tmp_path):
    other = {**claim(1, 2), "run": "other"}
    with pytest.raises(UsageError, match="a record of run 'other' in the bundle of 'tiny'"):
        bundle.write_bundle([*records, other], tmp_path / "x.zip", run=RUN)
    assert not (tmp_path / "x.zip").exists()


def test_an_altered_record_is_refused_by_its_id(records, tmp_path):
    path = tmp_path / "ledger.zip"
    bundle.write_bundle(records, path, run=RUN)
    members = _members(path)
    lines = members["records.jsonl"].decode().splitlines()
    edited = json.loads(lines[3])
    edited["last_step"] = 299  # the claim, unsigned, grows
    lines[3] = canonical_json(edited)
    members["records.jsonl"] = ("\n".join(lines) + "\n").encode()
    members["MANIFEST.json"] = _manifest_for(members, [bundle.record_id(r) for r in records])
    _rewrite(path, members)
    with pytest.raises(InputError) as caught:
        bundle.read_bundle(path)
    assert f"record {bundle.record_id(records[3])} was altered" in str(caught.value)
    assert "records.jsonl:4" in str(caught.value)


def test_a_forged_record_with_a_consistent_manifest_fails_its_signature(records, tmp_path):
    forged = json.loads(json.dumps(records[0]))
    forged["result"] = "mismatch"  # alice's signature kept, her verdict changed
    path = tmp_path / "forged.zip"
    bundle.write_bundle([forged, *records[1:]], path, run=RUN)  # every digest consistent
    with pytest.raises(InputError) as caught:
        bundle.read_bundle(path)
    message = str(caught.value)
    assert f"record {bundle.record_id(forged)}: signature: does not verify" in message
    assert "forged or altered, refused" in message


def test_a_member_the_manifest_does_not_list_is_refused(records, tmp_path):
    path = tmp_path / "ledger.zip"
    bundle.write_bundle(records, path, run=RUN)
    members = _members(path)
    members["extra.json"] = b"{}"
    _rewrite(path, members)
    with pytest.raises(InputError, match="extra.json: a member the manifest does not list"):
        bundle.read_bundle(path)


def test_a_listed_member_that_is_missing_is_refused(records, tmp_path):
    path = tmp_path / "ledger.zip"
    bundle.write_bundle(records, path, run=RUN)
    members = _members(path)
    del members["records.jsonl"]
    _rewrite(path, members)
    with pytest.raises(InputError, match="records.jsonl: listed in the manifest but missing"):
        bundle.read_bundle(path)


def test_a_manifest_that_does_not_match_its_digest_is_refused(records, tmp_path):
    path = tmp_path / "ledger.zip"
    bundle.write_bundle(records, path, run=RUN)
    members = _members(path)
    manifest = json.loads(members["MANIFEST.json"])
    manifest["digest"] = blake3_hex(b"something else")
    members["MANIFEST.json"] = canonical_json(manifest).encode()
    _rewrite(path, members)
    with pytest.raises(InputError, match="the manifest does not match its digest"):
        bundle.read_bundle(path)


def test_a_damaged_records_member_is_refused(records, tmp_path):
    path = tmp_path / "ledger.zip"
    bundle.write_bundle(records, path, run=RUN)
    members = _members(path)
    members["records.jsonl"] = members["records.jsonl"].replace(b"\n", b"\r\n")  # same records
    _rewrite(path, members)
    with pytest.raises(InputError, match="records.jsonl does not match the manifest"):
        bundle.read_bundle(path)


def test_a_record_added_to_the_file_is_refused(records, tmp_path):
    path = tmp_path / "ledger.zip"
    bundle.write_bundle(records, path, run=RUN)
    members = _members(path)
    members["records.jsonl"] += (canonical_json(claim(5, 6, "mallory")) + "\n").encode()
    _rewrite(path, members)
    with pytest.raises(InputError, match="records.jsonl has 5 records, the manifest lists 4"):
        bundle.read_bundle(path)


@pytest.mark.parametrize("content, message", [
    (b"not a zip", "not a readable bundle"),
    (None, "no MANIFEST.json: not an audit bundle"),
])
def test_what_is_not_a_bundle_is_refused(tmp_path, content, message):
    path = tmp_path / "x.zip"
    if content is None:
        _rewrite(path, {"records.jsonl": b""})
    else:
        path.write_bytes(content)
    with pytest.raises(InputError, match=message):
        bundle.read_bundle(path)


def test_an_experiment_bundle_is_not_an_audit_bundle(tmp_path):
    from ..conftest import write_spec_1_bundle

    write_spec_1_bundle(tmp_path / "exp.zip")
    with pytest.raises(InputError, match="unknown bundle spec 'lineage-experiment-bundle/1'"):
        bundle.read_bundle(tmp_path / "exp.zip")


def test_allowed_signers_decide_whose_signatures_count(records, keys, tmp_path):
    path = tmp_path / "ledger.zip"
    bundle.write_bundle(records, path, run=RUN)
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(f"alice {public_line(keys['alice'])}\nbob {public_line(keys['bob'])}\n")
    assert bundle.read_bundle(path, allowed_signers=allowed) == records
    allowed.write_text(f"alice {public_line(keys['alice'])}\n")  # bob's key not listed
    with pytest.raises(InputError) as caught:
        bundle.read_bundle(path, allowed_signers=allowed)
    assert f"record {bundle.record_id(records[1])}: not-allowed" in str(caught.value)
    assert "may not sign as 'bob'" in str(caught.value)


def test_a_key_signing_under_someone_elses_name_is_refused(keys, tmp_path):
    impostor = sshsig.sign_record(attestation(100, "alice"), keys["bob"])  # valid signature
    path = tmp_path / "ledger.zip"
    bundle.write_bundle([impostor], path, run=RUN)
    assert bundle.read_bundle(path) == [impostor]  # signed, but nobody asked whose key
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(f"alice {public_line(keys['alice'])}\nbob {public_line(keys['bob'])}\n")
    with pytest.raises(InputError, match="not-allowed: its key may not sign as 'alice'"):
        bundle.read_bundle(path, allowed_signers=allowed)


def test_unsigned_records_are_accepted_unless_signatures_are_required(records, tmp_path):
    path = tmp_path / "ledger.zip"
    bundle.write_bundle(records, path, run=RUN)
    assert bundle.read_bundle(path) == records
    with pytest.raises(InputError) as caught:
        bundle.read_bundle(path, require_signed=True)
    assert f"record {bundle.record_id(records[3])} (auditor 'bob') is unsigned" in \
        str(caught.value)
    bundle.write_bundle(records[:3], path, run=RUN)
    assert bundle.read_bundle(path, require_signed=True) == records[:3]


@settings(max_examples=25, deadline=None)
@given(picks=st.lists(st.integers(min_value=0, max_value=3), max_size=8))
def test_any_selection_round_trips_once_each_in_order(records, tmp_path_factory, picks):
    chosen = [records[i] for i in picks]
    path = tmp_path_factory.mktemp("b") / "ledger.zip"
    bundle.write_bundle(chosen, path, run=RUN)
    assert bundle.read_bundle(path) == [records[i] for i in dict.fromkeys(picks)]


def test_records_files_are_read_in_three_forms_and_written_back_the_same(records, tmp_path,
                                                                         keys):
    forms = {"one.json": json.dumps(records[0], indent=2),
             "list.json": json.dumps(records),
             "lines.jsonl": "".join(json.dumps(r) + "\n\n" for r in records)}
    for name, text in forms.items():
        (tmp_path / name).write_text(text)
        read, form = bundle.read_records_file(tmp_path / name)
        assert read == (records[:1] if name == "one.json" else records)
        again = tmp_path / f"again-{name}"
        again.write_text(bundle.records_text(read, form))
        assert bundle.read_records_file(again) == (read, form)
    (tmp_path / "bad.jsonl").write_text(json.dumps(records[0]) + "\n[1]\n")
    with pytest.raises(InputError, match="record 2 is not a lineage-audit/1 record"):
        bundle.sign_records_file(tmp_path / "bad.jsonl", keys["alice"])


@settings(max_examples=40, deadline=None)
@given(texts=st.lists(st.text(), min_size=1, max_size=4),
       numbers=st.lists(st.floats(allow_nan=False, allow_infinity=False) | st.integers(
           min_value=-2**53 + 1, max_value=2**53 - 1), min_size=1, max_size=4))
def test_records_with_any_text_and_numbers_round_trip(keys, tmp_path_factory, texts, numbers):
    made = []
    for i, (text, number) in enumerate(zip(texts, numbers * len(texts), strict=False)):
        record = {**checkpoint(i, "blake3:" + "00" * 32), "location": text, "loss": number}
        made.append(sshsig.sign_record(record, keys["alice"]) if i % 2 else record)
    path = tmp_path_factory.mktemp("b") / "ledger.zip"
    bundle.write_bundle(made, path, run=RUN)
    assert bundle.read_bundle(path) == made


def test_lines_break_only_at_newlines(tmp_path):
    record = {**claim(1, 2), "auditor": {"name": "a\u2028b\x85c\x1cd\re", "public_key": None,
                                         "payout": None}}
    bundle.write_bundle([record], tmp_path / "b.zip", run=RUN)
    assert bundle.read_bundle(tmp_path / "b.zip") == [record]
    (tmp_path / "r.jsonl").write_text(bundle.records_text([record, record], "jsonl"),
                                      encoding="utf-8")
    assert bundle.read_records_file(tmp_path / "r.jsonl") == ([record, record], "jsonl")


def test_a_damaged_zip_member_is_refused_in_one_line(records, tmp_path):
    path = tmp_path / "ledger.zip"
    bundle.write_bundle(records, path, run=RUN)
    data = bytearray(path.read_bytes())
    at = data.index(b"records.jsonl") + len(b"records.jsonl") + 40  # compressed bytes
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(InputError, match="not a readable bundle"):
        bundle.read_bundle(path)


@pytest.mark.filterwarnings("ignore:Duplicate name")
def test_a_member_name_given_twice_is_refused(records, tmp_path):
    path = tmp_path / "ledger.zip"
    bundle.write_bundle(records, path, run=RUN)
    with zipfile.ZipFile(path, "a") as archive:  # a second records.jsonl would shadow the first
        archive.writestr("records.jsonl", canonical_json(claim(1, 2, "mallory")) + "\n")
    with pytest.raises(InputError, match="a member name appears twice"):
        bundle.read_bundle(path)


def test_a_bundle_that_cannot_be_written_is_a_usage_error(records, tmp_path):
    with pytest.raises(UsageError, match="no-such-folder.*cannot write"):
        bundle.write_bundle(records, tmp_path / "no-such-folder" / "b.zip", run=RUN)
