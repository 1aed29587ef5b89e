"""`lineage attest`: in-toto Statements in DSSE envelopes, signed with ssh-keygen's keys,
checked by securesystemslib and in-toto's own bindings without lineage, and against the
store by `attest verify`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from cryptography.hazmat.primitives.serialization import load_ssh_public_key
from google.protobuf import json_format
from in_toto_attestation.v1.statement import Statement
from in_toto_attestation.v1.statement_pb2 import Statement as StatementProto
from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import VerificationError
from securesystemslib.signer import SSlibKey

from lineage.api import Store
from lineage.audit.ledger import add_records
from lineage.audit.records import record_id

from ..conftest import REPO, Cli
from .audit_run import RUN, Chain, ledger


def _objects(store: Store, chain: Chain) -> dict[str, str]:
    """One object of each kind the audit store holds (an experiment aside); the ledger
    added is `chain.records`."""
    records = ledger(chain)
    add_records(store, records, source="ledger")
    chain.records = records  # type: ignore[attr-defined]
    return {"corpus": "example", "stream": "s", "run": RUN, "audit": record_id(records[1])}


def _standard_check(path: Path, public: Path) -> dict:  # type: ignore[type-arg]
    """What a verifier without lineage does: securesystemslib and in-toto-attestation."""
    envelope = Envelope.from_dict(json.loads(path.read_text()))
    key = SSlibKey.from_crypto(load_ssh_public_key(public.read_bytes()))
    envelope.verify([key], 1)
    assert envelope.payload_type == "application/vnd.in-toto+json"
    parsed = json_format.Parse(envelope.payload, StatementProto())
    Statement.copy_from_pb(parsed).validate()
    result: dict = json.loads(envelope.payload)  # type: ignore[type-arg]
    return result


@pytest.mark.parametrize("kind", ["corpus", "stream", "run", "audit"])
def test_each_kind_is_signed_checked_by_standard_tools_and_matches_its_schema(
        fresh: tuple[Store, Chain], keys: dict[str, Path], tmp_path: Path, kind: str) -> None:
    store, chain = fresh
    name = _objects(store, chain)[kind]
    out = tmp_path / f"{kind}.intoto.json"
    written = Cli(store.root).json("attest", kind, name, "--key", str(keys["alice"]),
                                   "-o", str(out))
    statement = _standard_check(out, keys["alice"].with_suffix(".pub"))
    assert statement["predicateType"] == written["predicate_type"] == (
        f"https://github.com/lineage-dev/lineage/attestation/{kind}/v1")
    assert len(statement["subject"]) == written["subjects"] > 0
    schema = json.loads((REPO / "schemas" / "attestations" / f"{kind}.schema.json").read_text())
    jsonschema.validate(statement["predicate"], schema)
    with pytest.raises(VerificationError):  # bob did not sign it
        Envelope.from_dict(json.loads(out.read_text())).verify(
            [SSlibKey.from_crypto(load_ssh_public_key(
                keys["bob"].with_suffix(".pub").read_bytes()))], 1)
    verified = Cli(store.root).json("attest", "verify", str(out), "--key",
                                    str(keys["alice"].with_suffix(".pub")))
    assert (verified["signature"], verified["store"], verified["ok"]) == (True, "matches", True)


def test_what_each_statement_says(fresh: tuple[Store, Chain], keys: dict[str, Path],
                                  tmp_path: Path) -> None:
    from lineage.attest.statements import statement

    store, chain = fresh
    names = _objects(store, chain)
    corpus = statement(store, "corpus", "example")
    row = store.sql("SELECT manifest_hash FROM corpora WHERE name = 'example'").rows[0]
    parts = store.sql("SELECT path, sha256 FROM parquet_files WHERE table_name = 'documents' "
                      "AND owner = 'example' ORDER BY path").rows
    assert corpus["subject"] == [
        {"name": "manifest:example", "digest": {"blake3": row[0].removeprefix("blake3:")}},
        *({"name": p, "digest": {"sha256": h}} for p, h in parts)]
    stream = statement(store, "stream", "s")["predicate"]
    digest = store.sql("SELECT occurrences_digest FROM streams WHERE name = 's'").rows[0][0]
    assert stream["occurrences_digest"] == digest and stream["corpus"] == "example"
    run = statement(store, "run", RUN)
    files = store.sql(f"SELECT step, files FROM checkpoints WHERE run = '{RUN}'").rows
    assert sorted(s["name"] for s in run["subject"]) == sorted(
        f"step-{step}/{f['path']}" for step, listed in files for f in json.loads(listed))
    assert run["predicate"]["head"]["state_hash"] == chain.head
    record = chain.records[1]  # type: ignore[attr-defined]
    audit = statement(store, "audit", names["audit"])
    assert audit["predicate"]["record"] == record
    assert {s["name"]: s["digest"] for s in audit["subject"]}[
        f"state:step-{record['step']}"] == {"blake3": record["state_hash"].split(":")[1]}
    assert audit["predicate"]["log"]["size"] == len(chain.records)  # type: ignore[attr-defined]
    # the same store and key give the same envelope, byte for byte
    for n in (1, 2):
        Cli(store.root).json("attest", "run", RUN, "--key", str(keys["alice"]), "-o",
                             str(tmp_path / f"{n}.json"))
    assert (tmp_path / "1.json").read_bytes() == (tmp_path / "2.json").read_bytes()


def test_verify_names_what_changed_and_what_is_forged(
        fresh: tuple[Store, Chain], keys: dict[str, Path], tmp_path: Path) -> None:
    store, chain = fresh
    names = _objects(store, chain)
    out = tmp_path / "audit.json"
    cli = Cli(store.root)
    cli.json("attest", "audit", names["audit"], "--key", str(keys["alice"]), "-o", str(out))
    public = str(keys["alice"].with_suffix(".pub"))
    add_records(store, [chain.published(8, who="zed")], source="later")  # the log grows
    changed = cli.json("attest", "verify", str(out), "--key", public, code=1)
    assert (changed["signature"], changed["store"]) == (True, "differs")
    assert changed["differences"] == ["predicate.log"]
    wrong = cli.json("attest", "verify", str(out), "--key",
                     str(keys["bob"].with_suffix(".pub")), code=1)
    assert wrong["signature"] is False
    envelope = json.loads(out.read_text())
    forged = json.loads(__import__("base64").b64decode(envelope["payload"]))
    forged["predicate"]["record"]["result"] = "mismatch"
    envelope["payload"] = __import__("base64").b64encode(
        json.dumps(forged).encode()).decode()
    (tmp_path / "forged.json").write_text(json.dumps(envelope))
    result = cli("attest", "verify", str(tmp_path / "forged.json"), "--key", public, code=1)
    assert "signature    FAILED" in result.stdout and result.stdout.rstrip().endswith("FAILED")


def test_bad_input_is_one_line(fresh: tuple[Store, Chain], keys: dict[str, Path],
                               tmp_path: Path) -> None:
    store, _ = fresh
    cli = Cli(store.root)
    result = cli("attest", "corpus", "nope", "--key", str(keys["alice"]), "-o",
                 str(tmp_path / "x.json"), code=2)
    assert result.stderr.count("\n") == 1 and "no corpus 'nope'" in result.stderr
    result = cli("attest", "corpus", "example", "--key", str(keys["rsa"]), "-o",
                 str(tmp_path / "x.json"), code=2)
    assert "key-type" in result.stderr and not (tmp_path / "x.json").exists()
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
    )

    (tmp_path / "rsa.pem").write_bytes(rsa.generate_private_key(65537, 2048).private_bytes(
        Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
    result = cli("attest", "run", RUN, "--key", str(tmp_path / "rsa.pem"), "-o",
                 str(tmp_path / "x.json"), code=2)
    assert "key-type: only ed25519 and elliptic-curve keys" in result.stderr
    (tmp_path / "junk.json").write_text("{}")
    result = cli("attest", "verify", str(tmp_path / "junk.json"), "--key",
                 str(keys["alice"]), code=2)
    assert "not a DSSE envelope" in result.stderr


def test_the_docs_program_verifies_without_lineage(
        fresh: tuple[Store, Chain], keys: dict[str, Path], tmp_path: Path) -> None:
    """docs/attestations.md's verification program, run as a separate Python process."""
    store, chain = fresh
    text = (REPO / "docs" / "attestations.md").read_text(encoding="utf-8")
    block = text[text.index("<!-- verify-without-lineage:start -->"):
                 text.index("<!-- verify-without-lineage:end -->")]
    program = block[block.index("```python\n") + 10:block.rindex("```")]
    (tmp_path / "verify.py").write_text(program)
    out = tmp_path / "run.json"
    Cli(store.root).json("attest", "run", RUN, "--key", str(keys["alice"]), "-o", str(out))
    done = subprocess.run([sys.executable, "-I", str(tmp_path / "verify.py"), str(out),
                           str(keys["alice"].with_suffix(".pub"))],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("https://github.com/lineage-dev/lineage/attestation/run/v1")
    refused = subprocess.run([sys.executable, "-I", str(tmp_path / "verify.py"), str(out),
                              str(keys["bob"].with_suffix(".pub"))],
                             capture_output=True, text=True, check=False)
    assert refused.returncode != 0 and "VerificationError" in refused.stderr


def test_a_checkpoint_signed_as_model_signing_does_and_bound_to_the_chain(
        fresh: tuple[Store, Chain], tmp_path: Path) -> None:
    """The real model_signing library verifies the signature (key-based, offline); the
    binding names the same subject digest and the chain's state at that step."""
    import shutil

    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
        PublicFormat,
    )
    from model_signing import verifying

    store, chain = fresh
    key = ec.generate_private_key(ec.SECP256R1())
    (tmp_path / "ec.pem").write_bytes(key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8,
                                                        NoEncryption()))
    (tmp_path / "ec.pub").write_bytes(key.public_key().public_bytes(
        Encoding.PEM, PublicFormat.SubjectPublicKeyInfo))
    recorded = Path(store.sql(f"SELECT path FROM checkpoints WHERE run = '{RUN}' AND step = 7"
                              ).rows[0][0])
    folder = tmp_path / "checkpoint-7"
    shutil.copytree(recorded, folder)
    out = tmp_path / "model.sig"
    cli = Cli(store.root)
    written = cli.json("attest", "checkpoint", RUN, "--step", "7", "--key",
                       str(tmp_path / "ec.pem"), "-o", str(out), "--path", str(folder))
    assert written["kind"] == "checkpoint" and out.exists()
    verifying.Config().use_elliptic_key_verifier(public_key=tmp_path / "ec.pub").verify(
        folder, out)
    bundle = json.loads(out.read_text())
    signed = json.loads(__import__("base64").b64decode(bundle["dsseEnvelope"]["payload"]))
    assert signed["predicateType"] == "https://model_signing/signature/v1.0"
    binding = Path(f"{out}.lineage.json")
    envelope = Envelope.from_dict(json.loads(binding.read_text()))
    envelope.verify([SSlibKey.from_crypto(key.public_key())], 1)
    statement = json.loads(envelope.payload)
    assert statement["subject"][0] == signed["subject"][0]  # the same folder, by digest
    assert {r["name"]: r["digest"] for r in signed["predicate"]["resources"]} == {
        s["name"]: s["digest"]["sha256"] for s in statement["subject"][1:]}
    assert statement["predicate"]["state_hash"] == chain.state[7]
    schema = json.loads((REPO / "schemas" / "attestations" / "checkpoint.schema.json"
                         ).read_text())
    jsonschema.validate(statement["predicate"], schema)
    assert cli.json("attest", "verify", str(binding), "--key", str(tmp_path / "ec.pub"))["ok"]
    # docs/attestations.md's command: model_signing's own command line
    done = subprocess.run([str(Path(sys.executable).parent / "model_signing"), "verify", "key",
                           str(folder), "--signature", str(out), "--public_key",
                           str(tmp_path / "ec.pub")], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    # a file changed since the ingest: nothing is signed
    target = next(p for p in folder.rglob("*") if p.is_file())
    target.write_bytes(target.read_bytes() + b"\0")
    result = cli("attest", "checkpoint", RUN, "--step", "7", "--key", str(tmp_path / "ec.pem"),
                 "-o", str(tmp_path / "again.sig"), "--path", str(folder), code=2)
    assert "not the ones ingested at step 7" in result.stderr
    assert not (tmp_path / "again.sig").exists()
