"""`lineage attest exp`: an experiment record made by a real run, attested with a key made
by ssh-keygen, checked by securesystemslib and against the store."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
from cryptography.hazmat.primitives.serialization import load_ssh_public_key
from securesystemslib.dsse import Envelope
from securesystemslib.signer import SSlibKey

import lineage.exp
from lineage.api import Store

from .conftest import REPO, Cli


def test_an_experiment_record_is_attested_by_its_weights(store: Store, weights: Path,
                                                          tmp_path: Path) -> None:
    made = lineage.exp.run(store, [sys.executable, "-c", "print('ok')"], weights=weights,
                           revision="r1", echo=False)
    key = tmp_path / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    out = tmp_path / "exp.intoto.json"
    cli = Cli(store.root)
    written = cli.json("attest", "exp", made.id[:10], "--key", str(key), "-o", str(out))
    assert written["subject"] == made.id
    envelope = Envelope.from_dict(json.loads(out.read_text()))
    envelope.verify([SSlibKey.from_crypto(load_ssh_public_key(
        key.with_suffix(".pub").read_bytes()))], 1)
    statement = json.loads(envelope.payload)
    files = lineage.exp.show(store, made.id).weights.files
    assert sorted(s["name"] for s in statement["subject"]) == sorted(f.path for f in files)
    assert {s["name"]: s["digest"]["sha256"] for s in statement["subject"]} == {
        f.path: f.sha256 for f in files}
    schema = json.loads((REPO / "schemas" / "attestations" / "exp.schema.json").read_text())
    jsonschema.validate(statement["predicate"], schema)
    assert cli.json("attest", "verify", str(out), "--key", str(key.with_suffix(".pub")))["ok"]
