"""`lineage audit sign`, `export` and `import` through the command line."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lineage.audit import bundle, sshsig
from lineage.audit.ledger import add_records, iter_records

from ..conftest import Cli
from .audit_helpers import (
    RUN,
    attestation,
    claim,
    public_line,
    ssh_verify,
)
from .audit_run import NOW, copy_store


def _one_line_error(result: Any, *needles: str) -> None:
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr and result.stdout == ""
    for needle in needles:
        assert needle in result.stderr, result.stderr


def test_sign_writes_signed_records_that_ssh_keygen_accepts(cli, keys, tmp_path):
    source = tmp_path / "records.jsonl"
    records = [attestation(100), attestation(101), claim(102, 199, "alice")]
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    summary = cli.json("audit", "sign", str(source), "--key", str(keys["alice"]),
                       "-o", str(tmp_path / "signed.jsonl"))
    signed, form = bundle.read_records_file(tmp_path / "signed.jsonl")
    assert form == "jsonl" and len(signed) == 3
    assert summary["ids"] == [bundle.record_id(r) for r in signed]
    assert summary["public_key"] == public_line(keys["alice"])
    assert all(sshsig.verify_record(r) for r in signed)
    allowed = f"alice {public_line(keys['alice'])}\n"
    for record in signed:
        checked = ssh_verify(allowed, "alice", record["signature"],
                             sshsig.canonical_bytes(record), tmp_path)
        assert checked.returncode == 0, checked.stderr


def test_sign_prints_the_records_in_the_form_they_came_in(cli, keys, tmp_path):
    source = tmp_path / "one.json"
    source.write_text(json.dumps(attestation(7), indent=2))
    result = cli("audit", "sign", str(source), "--key", str(keys["bob"]))
    record = json.loads(result.stdout)
    assert record["auditor"]["public_key"] == public_line(keys["bob"])
    assert sshsig.verify_record(record) is True
    listed = cli.json("audit", "sign", str(source), "--key", str(keys["bob"]))
    assert listed["records"] == [record] and listed["output"] is None
    written = cli("audit", "sign", str(source), "--key", str(keys["bob"]), "-o",
                  str(source))  # in place: the file is replaced whole
    assert written.stdout == f"signed 1 records with {public_line(keys['bob'])}\n"
    assert json.loads(source.read_text()) == record


@pytest.mark.parametrize("key, needles", [
    ("rsa", ["key-type: a ssh-rsa key; only ed25519 keys sign audit records"]),
    ("locked", ["encrypted-key: the key is protected by a passphrase"]),
])
def test_sign_refuses_keys_it_cannot_use(cli, keys, tmp_path, key, needles):
    source = tmp_path / "one.json"
    source.write_text(json.dumps(attestation(7)))
    result = cli("audit", "sign", str(source), "--key", str(keys[key]), code=None)
    _one_line_error(result, str(keys[key]), *needles)


def test_sign_refuses_what_is_not_an_audit_record(cli, keys, tmp_path):
    source = tmp_path / "other.json"
    source.write_text(json.dumps({"spec": "lineage-experiment/2", "name": "x"}))
    result = cli("audit", "sign", str(source), "--key", str(keys["alice"]), code=None)
    _one_line_error(result, str(source), "record 1 is not a lineage-audit/1 record")
    result = cli("audit", "sign", str(tmp_path / "missing.json"), "--key",
                 str(keys["alice"]), code=None)
    _one_line_error(result, "missing.json", "file of audit records not found")


# `audit export` and `audit import` on a real run's ledger (tests/audit_run.py).




def test_export_then_import_is_idempotent(fresh, base, keys, tmp_path):
    store, chain = fresh
    first = sshsig.sign_record(chain.published(4, who="bob"), keys["bob"])
    records = [first, sshsig.sign_record(chain.offer(first), keys["bob"]),
               chain.claim(8, 11, who="cat", made=NOW)]
    add_records(store, records, source="test")
    written = Cli(store.root).json("audit", "export", RUN, "-o", str(tmp_path / "ledger.zip"))
    assert written["records"] == 3 and written["run"] == RUN
    other = copy_store(base, tmp_path / "other")
    cli = Cli(other.root)
    imported = cli.json("audit", "import", str(tmp_path / "ledger.zip"))
    assert imported["added"] == [bundle.record_id(r) for r in records]
    assert imported["signed"] == 2 and imported["already_present"] == []
    again = cli.json("audit", "import", str(tmp_path / "ledger.zip"))
    assert again["added"] == [] and len(again["already_present"]) == 3
    result = cli("audit", "import", str(tmp_path / "ledger.zip"))
    assert result.stdout == "imported 0 records, 3 already present (2 of 3 signed)\n"
    assert other.audit_status(RUN, now=NOW) == store.audit_status(RUN, now=NOW)
    assert other.audit_status(RUN, now=NOW).steps_verified == 1


def test_import_refuses_a_forged_record_by_its_id(fresh, keys, tmp_path):
    store, chain = fresh
    forged = sshsig.sign_record(chain.published(4), keys["alice"])
    forged["result"] = "mismatch"
    bundle.write_bundle([chain.claim(1, 5, who="ann", made=NOW), forged],
                        tmp_path / "forged.zip", run=RUN)
    result = Cli(store.root)("audit", "import", str(tmp_path / "forged.zip"), code=None)
    _one_line_error(result, "forged.zip", f"record {bundle.record_id(forged)}: signature")
    assert iter_records(store, RUN) == []  # nothing of the bundle was added


def test_import_with_allowed_signers_and_required_signatures(fresh, keys, tmp_path):
    store, chain = fresh
    cli = Cli(store.root)
    signed = sshsig.sign_record(chain.published(4, who="alice"), keys["bob"])  # bob as alice
    bundle.write_bundle([signed], tmp_path / "b.zip", run=RUN)
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(f"alice {public_line(keys['alice'])}\n")
    result = cli("audit", "import", str(tmp_path / "b.zip"), "--allowed-signers",
                 str(allowed), code=None)
    _one_line_error(result, "not-allowed: its key may not sign as 'alice'", str(allowed))
    bundle.write_bundle([chain.claim(1, 5, who="ann", made=NOW)], tmp_path / "u.zip", run=RUN)
    result = cli("audit", "import", str(tmp_path / "u.zip"), "--require-signed", code=None)
    _one_line_error(result, "is unsigned, and signatures are required")
    assert iter_records(store, RUN) == []
