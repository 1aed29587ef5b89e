"""SSHSIG signatures against the real ssh-keygen: it verifies what lineage signs, lineage
verifies what it signs, and both refuse the same tampering."""

from __future__ import annotations

import base64
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lineage.audit import sshsig
from lineage.audit.records import record_id
from lineage.errors import InputError, RuleError

from .audit_helpers import attestation, public_line, ssh_sign, ssh_verify


def _blob(armored: str) -> bytes:
    return base64.b64decode("".join(armored.strip().splitlines()[1:-1]))


def _armor(blob: bytes) -> str:
    text = base64.b64encode(blob).decode()
    return "\n".join([sshsig.BEGIN, *(text[i:i + 70] for i in range(0, len(text), 70)),
                      sshsig.END]) + "\n"


def test_lineage_verifies_what_ssh_keygen_signs(keys, tmp_path):
    data = b"step 101 replayed\n"
    signature = ssh_sign(keys["alice"], data, tmp_path)
    assert sshsig.verify(data, signature) == public_line(keys["alice"])


def test_ssh_keygen_verifies_what_lineage_signs(keys, tmp_path):
    data = "a record, in UTF-8: ✓".encode()
    signature = sshsig.sign(data, keys["alice"])
    allowed = f"alice {public_line(keys['alice'])}\n"
    checked = ssh_verify(allowed, "alice", signature, data, tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert b'Good "lineage-audit" signature for alice' in checked.stdout


def test_lineage_writes_the_very_bytes_ssh_keygen_writes(keys, tmp_path):
    # ed25519 is deterministic: the same key, namespace and data give the same signature
    data = b"\x00\xffbinary too"
    assert sshsig.sign(data, keys["bob"]) == ssh_sign(keys["bob"], data, tmp_path)


def test_the_armor_has_lines_of_70_characters(keys):
    lines = sshsig.sign(b"x" * 500, keys["alice"]).splitlines()
    assert lines[0] == "-----BEGIN SSH SIGNATURE-----"
    assert lines[-1] == "-----END SSH SIGNATURE-----"
    assert {len(line) for line in lines[1:-2]} == {70}
    assert 0 < len(lines[-2]) <= 70


def test_a_flipped_byte_in_the_data_fails_both(keys, tmp_path):
    data = b"state_hash blake3:00ff"
    signature = sshsig.sign(data, keys["alice"])
    flipped = bytes([data[0] ^ 1]) + data[1:]
    with pytest.raises(RuleError) as caught:
        sshsig.verify(flipped, signature)
    assert caught.value.rule_id == "signature"
    allowed = f"alice {public_line(keys['alice'])}\n"
    assert ssh_verify(allowed, "alice", signature, flipped, tmp_path).returncode != 0


def test_a_flipped_byte_in_the_signature_fails_both(keys, tmp_path):
    data = b"claim steps 100-199"
    blob = bytearray(_blob(sshsig.sign(data, keys["alice"])))
    blob[-1] ^= 0x40  # inside the ed25519 signature itself
    damaged = _armor(bytes(blob))
    with pytest.raises(RuleError) as caught:
        sshsig.verify(data, damaged)
    assert caught.value.rule_id == "signature"
    allowed = f"alice {public_line(keys['alice'])}\n"
    assert ssh_verify(allowed, "alice", damaged, data, tmp_path).returncode != 0


@settings(max_examples=60, deadline=None)
@given(position=st.integers(min_value=0), bit=st.integers(min_value=0, max_value=7))
def test_any_flipped_bit_of_the_blob_is_refused(keys, position, bit):
    data = b"any flip anywhere"
    blob = bytearray(_blob(sshsig.sign(data, keys["alice"])))
    blob[position % len(blob)] ^= 1 << bit
    with pytest.raises(RuleError):
        sshsig.verify(data, _armor(bytes(blob)))


def test_another_namespace_is_refused_both_ways(keys, tmp_path):
    data = b"signed for git"
    foreign = ssh_sign(keys["alice"], data, tmp_path, namespace="git")
    with pytest.raises(RuleError) as caught:
        sshsig.verify(data, foreign)
    assert caught.value.rule_id == "namespace"
    assert "'git'" in str(caught.value)
    ours = sshsig.sign(data, keys["alice"], namespace="file")
    allowed = f"alice {public_line(keys['alice'])}\n"
    assert ssh_verify(allowed, "alice", ours, data, tmp_path).returncode != 0
    assert sshsig.verify(data, ours, namespace="file") == public_line(keys["alice"])


def test_another_key_is_not_the_signer(keys, tmp_path):
    data = b"who signed this?"
    signature = sshsig.sign(data, keys["alice"])
    assert sshsig.verify(data, signature) != public_line(keys["bob"])
    allowed = f"alice {public_line(keys['bob'])}\n"  # alice's name, bob's key
    assert ssh_verify(allowed, "alice", signature, data, tmp_path).returncode != 0


def test_an_rsa_key_is_refused_by_name(keys, tmp_path):
    with pytest.raises(InputError) as caught:
        sshsig.sign(b"data", keys["rsa"])
    assert "key-type: a ssh-rsa key; only ed25519" in str(caught.value)
    assert str(keys["rsa"]) in str(caught.value)
    signature = ssh_sign(keys["rsa"], b"data", tmp_path)  # valid for ssh-keygen
    with pytest.raises(RuleError) as refused:
        sshsig.verify(b"data", signature)
    assert refused.value.rule_id == "key-type"
    assert "ssh-rsa" in str(refused.value)


def test_an_encrypted_key_is_a_clear_error(keys):
    with pytest.raises(InputError) as caught:
        sshsig.sign(b"data", keys["locked"])
    assert "encrypted-key: the key is protected by a passphrase" in str(caught.value)


def test_a_file_that_is_not_a_key_is_a_clear_error(tmp_path):
    (tmp_path / "notes.txt").write_text("not a key\n")
    with pytest.raises(InputError, match="key-format: not an OpenSSH private key"):
        sshsig.sign(b"data", tmp_path / "notes.txt")
    with pytest.raises(InputError, match="private key not found"):
        sshsig.sign(b"data", tmp_path / "missing")


@pytest.mark.parametrize("armored, rule", [
    ("hello", "armor"),
    (f"{sshsig.BEGIN}\n!!!!\n{sshsig.END}\n", "armor"),
    (_armor(b"NOTSIG\x00\x00\x00\x01"), "magic"),
    (_armor(b"SSHSIG\x00\x00\x00\x02"), "version"),
    (_armor(b"SSHSIG\x00\x00\x00\x01\x00\x00\x10\x00"), "blob"),
])
def test_malformed_signatures_name_their_rule(armored, rule):
    with pytest.raises(RuleError) as caught:
        sshsig.verify(b"data", armored)
    assert caught.value.rule_id == rule


@settings(max_examples=40, deadline=None)
@given(data=st.binary(max_size=2048))
def test_sign_then_verify_round_trips_for_any_data(keys, data):
    assert sshsig.verify(data, sshsig.sign(data, keys["alice"])) == public_line(keys["alice"])


# --- records ---------------------------------------------------------------------------


def test_sign_record_names_the_key_then_signs(keys, tmp_path):
    record = attestation(101)
    signed = sshsig.sign_record(record, keys["alice"])
    assert record["auditor"]["public_key"] is None  # the input is left as it was
    assert signed["auditor"]["public_key"] == public_line(keys["alice"])
    assert sshsig.verify_record(signed) is True
    # the signature covers the canonical bytes without it; ssh-keygen agrees
    allowed = f"alice {public_line(keys['alice'])}\n"
    checked = ssh_verify(allowed, "alice", signed["signature"],
                         sshsig.canonical_bytes(signed), tmp_path)
    assert checked.returncode == 0, checked.stderr


def test_an_unsigned_record_is_false(keys):
    assert sshsig.verify_record(attestation(5)) is False


def test_a_record_altered_after_signing_is_refused_by_rule_signature(keys):
    signed = sshsig.sign_record(attestation(101), keys["alice"])
    signed["result"] = "mismatch"
    with pytest.raises(RuleError) as caught:
        sshsig.verify_record(signed)
    assert caught.value.rule_id == "signature"
    assert caught.value.path == record_id(signed)


def test_a_signature_by_another_key_than_the_named_one_is_refused(keys, tmp_path):
    record = attestation(101)
    record["auditor"]["public_key"] = public_line(keys["bob"])
    record["signature"] = ssh_sign(keys["alice"], sshsig.canonical_bytes(record), tmp_path)
    with pytest.raises(RuleError) as caught:
        sshsig.verify_record(record)
    assert caught.value.rule_id == "signature"
    assert f"signed by {public_line(keys['alice'])}" in str(caught.value)


def test_a_record_signed_by_ssh_keygen_verifies(keys, tmp_path):
    record = attestation(7)
    record["auditor"]["public_key"] = Path(f"{keys['bob']}.pub").read_text().strip()  # + comment
    record["signature"] = ssh_sign(keys["bob"], sshsig.canonical_bytes(record), tmp_path)
    assert sshsig.verify_record(record) is True


def test_resigning_replaces_the_signature(keys):
    by_alice = sshsig.sign_record(attestation(3), keys["alice"])
    by_bob = sshsig.sign_record(by_alice, keys["bob"])
    assert by_bob["auditor"]["public_key"] == public_line(keys["bob"])
    assert sshsig.verify_record(by_bob) is True
    assert sshsig.sign_record(by_bob, keys["bob"]) == by_bob  # deterministic


# --- allowed signers ---------------------------------------------------------------------


def test_allowed_signers_lines_parse(keys, tmp_path):
    alice, bob = public_line(keys["alice"]), public_line(keys["bob"])
    path = tmp_path / "allowed_signers"
    path.write_text(f"# who may sign audit records\n\n"
                    f"alice@example.org,alice {alice} alice's laptop\n"
                    f'"bob smith" namespaces="lineage-audit,git" {bob}\n'
                    f'*@example.org cert-authority {bob}\n'
                    f'carol valid-after="20260101",valid-before="20270101Z" {alice}\n')
    entries = sshsig.parse_allowed_signers(path)
    assert [(e.principals, e.key) for e in entries] == [
        (("alice@example.org", "alice"), alice), (("bob smith",), bob),
        (("*@example.org",), bob), (("carol",), alice)]
    assert entries[1].namespaces == ("lineage-audit", "git")
    assert entries[2].cert_authority is True
    assert entries[3].valid_before == datetime(2027, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize("line, message", [
    ("alice", "line 1: allowed-signers: no public key"),
    ('alice bogus="x" ssh-ed25519 AAAA', "unknown option 'bogus=\"x\"'"),
    ("alice namespaces=git ssh-ed25519 AAAA", "namespaces takes a quoted value"),
    ("alice ssh-ed25519 not-base64!", "the key's base64 is damaged"),
    ('alice valid-after="2026" ssh-ed25519 AAAA', "'2026' is not a time"),
])
def test_a_bad_allowed_signers_line_names_the_file_and_line(tmp_path, line, message):
    path = tmp_path / "allowed_signers"
    path.write_text(line + "\n")
    with pytest.raises(InputError) as caught:
        sshsig.parse_allowed_signers(path)
    assert str(path) in str(caught.value) and message in str(caught.value)


# Each case: an allowed_signers line (alice's key as {key}), the name asked for, and
# whether the signature counts. ssh-keygen is asked the same question.
CASES = [
    ("alice {key}", "alice", True),
    ("alice {key}", "bob", False),
    ("alice,bob {key}", "bob", True),
    ("*@example.org {key}", "alice@example.org", True),
    ("*@example.org,!mallory@example.org {key}", "mallory@example.org", False),
    ("al?ce {key}", "alice", True),
    ('alice namespaces="lineage-audit" {key}', "alice", True),
    ('alice namespaces="git,lineage-*" {key}', "alice", True),
    ('alice namespaces="git" {key}', "alice", False),
    ('alice valid-before="20200101Z" {key}', "alice", False),
    ('alice valid-after="20200101",valid-before="29990101" {key}', "alice", True),
    ("alice cert-authority {key}", "alice", False),
    ('"alice" {key}', "alice", True),
]


@pytest.mark.parametrize("line, name, counts", CASES)
def test_is_allowed_agrees_with_ssh_keygen(keys, tmp_path, line, name, counts):
    data = b"the record's canonical bytes"
    signature = sshsig.sign(data, keys["alice"])
    text = line.format(key=public_line(keys["alice"])) + "\n"
    path = tmp_path / "allowed"
    path.write_text(text)
    signer = sshsig.verify(data, signature)
    assert sshsig.is_allowed(signer, name, sshsig.parse_allowed_signers(path)) is counts
    assert (ssh_verify(text, name, signature, data, tmp_path).returncode == 0) is counts


def test_is_allowed_reads_the_time_it_is_given(keys, tmp_path):
    path = tmp_path / "allowed"
    path.write_text(f'alice valid-after="20261201Z" {public_line(keys["alice"])}\n')
    entries = sshsig.parse_allowed_signers(path)
    key = public_line(keys["alice"])
    assert not sshsig.is_allowed(key, "alice", entries, now=datetime(2026, 11, 30, tzinfo=UTC))
    assert sshsig.is_allowed(key, "alice", entries, now=datetime(2026, 12, 2, tzinfo=UTC))


def test_a_sha256_signature_by_ssh_keygen_is_read_too(keys, tmp_path):
    data = b"hashed with sha256"
    (tmp_path / "message").write_bytes(data)
    subprocess.run(["ssh-keygen", "-Y", "sign", "-f", str(keys["alice"]), "-n",
                    "lineage-audit", "-O", "hashalg=sha256", str(tmp_path / "message")],
                   check=True, capture_output=True)
    signature = (tmp_path / "message.sig").read_text()
    assert b"sha256" in _blob(signature)
    assert sshsig.verify(data, signature) == public_line(keys["alice"])
    with pytest.raises(RuleError):
        sshsig.verify(data + b"!", signature)


def test_an_unknown_hash_algorithm_is_named(keys):
    blob = _blob(sshsig.sign(b"data", keys["alice"]))
    odd = blob.replace(b"\x00\x00\x00\x06sha512", b"\x00\x00\x00\x06sha999")
    with pytest.raises(RuleError) as caught:
        sshsig.verify(b"data", _armor(odd))
    assert caught.value.rule_id == "hash-algorithm" and "'sha999'" in str(caught.value)


@pytest.mark.parametrize("named", [None, "not a key", "ssh-ed25519 !!!"])
def test_a_signed_record_naming_no_usable_key_is_refused_by_rule_signature(keys, named):
    record = attestation(9)
    record["auditor"]["public_key"] = named  # signed as it is: only the key is wrong
    record["signature"] = sshsig.sign(sshsig.canonical_bytes(record), keys["alice"])
    with pytest.raises(RuleError) as caught:
        sshsig.verify_record(record)
    assert caught.value.rule_id == "signature"
    assert f"but auditor.public_key is {named!r}" in str(caught.value)
