"""`lineage attest`: write a signed attestation of a store's object, and verify one
against the store (docs/attestations.md)."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

from lineage.attest.answers import AttestationVerified, AttestationWritten
from lineage.attest.envelope import payload, public_key, read_envelope, sign_statement, signed_by
from lineage.attest.statements import kind_of, statement
from lineage.errors import LineageError
from lineage.runs.chain import canonical_json
from lineage.store.base import BaseStore
from lineage.userfiles import check_output_path, write_output

NAME_FIELDS = {"corpus": "corpus", "stream": "stream", "run": "run", "audit": "record_id",
               "exp": "experiment", "checkpoint": "checkpoint"}


def attest(store: BaseStore, kind: str, name: str, *, key: str | Path,
           out: str | Path) -> AttestationWritten:
    """Write the Statement of `kind` about `name`, signed with `key`, to `out`."""
    check_output_path(out)
    made = statement(store, kind, name)
    envelope = sign_statement(made, key)
    write_output(out, canonical_json(envelope) + "\n")
    return AttestationWritten(path=str(out), kind=kind,
                              subject=str(made["predicate"][NAME_FIELDS[kind]]),
                              predicate_type=made["predicateType"],
                              subjects=len(made["subject"]),
                              keyid=envelope["signatures"][0]["keyid"])


def verify(store: BaseStore, path: str | Path, *, key: str | Path) -> AttestationVerified:
    """Check the envelope's signature under `key`, then rebuild its Statement from the
    store and compare: every field must be the same, subjects and digests included."""
    envelope = read_envelope(path)
    signature = signed_by(envelope, public_key(key))
    said = payload(path, envelope)
    predicate_type = str(said.get("predicateType"))
    kind = kind_of(predicate_type)
    predicate = said.get("predicate")
    name = predicate.get(NAME_FIELDS[kind]) if kind and isinstance(predicate, dict) else None
    differences: tuple[str, ...] = ()
    if kind is None or not isinstance(name, str):
        verdict = "not-checked"
    else:
        try:
            now = statement(store, kind, name)
        except LineageError:
            verdict = "unknown"
        else:
            differences = tuple(_differences(said, now))
            verdict = "differs" if differences else "matches"
    return AttestationVerified(
        path=str(path), kind=kind, subject=name, predicate_type=predicate_type,
        signature=signature, store=verdict, differences=differences,
        ok=signature and verdict == "matches", statement=said)


def _differences(said: dict, now: dict) -> list[str]:  # type: ignore[type-arg]
    """Top-level Statement fields, and predicate fields, whose values differ (the
    `lineage` version that made it aside)."""
    found = [key for key in ("_type", "subject", "predicateType") if said.get(key) != now.get(key)]
    old, new = said.get("predicate") or {}, now.get("predicate") or {}
    if not isinstance(old, dict):
        return [*found, "predicate"]
    found += [f"predicate.{key}" for key in sorted(set(old) | set(new))
              if key != "lineage" and old.get(key) != new.get(key)]
    return found


def attest_checkpoint(store: BaseStore, run: str, step: int, *, key: str | Path,
                      out: str | Path, folder: str | Path | None = None
                      ) -> AttestationWritten:
    """Sign the checkpoint's folder with OpenSSF model signing (its own library, an
    elliptic-curve key) into `out`, and write beside it (`out` + `.lineage.json`) the
    lineage Statement that binds the same files, by the same subject digest, to the run's
    chain, signed with the same key. The files must still be the ones ingested."""
    from lineage.errors import InputError, UsageError

    try:
        from model_signing import signing
    except ImportError as exc:
        raise UsageError("attest checkpoint needs OpenSSF's model signing library: pip "
                         "install 'lineage[model-signing]'") from exc
    check_output_path(out)
    binding_path = Path(f"{out}.lineage.json")
    check_output_path(binding_path)
    made = statement(store, "checkpoint", f"{run}@{step}")
    path = Path(folder) if folder is not None else Path(_checkpoint_path(store, run, step))
    if not path.is_dir():
        raise UsageError(f"{path}: the checkpoint's folder is not there (give it with --path)")
    signed = Path(f"{out}.tmp")
    try:
        config = signing.Config()  # type: ignore[no-untyped-call]
        config.use_elliptic_key_signer(private_key=str(key)).sign(path, signed)
        bundle = json.loads(signed.read_text(encoding="utf-8"))
        said = json.loads(base64.b64decode(bundle["dsseEnvelope"]["payload"]))
    except (ValueError, OSError, KeyError) as exc:
        signed.unlink(missing_ok=True)
        raise InputError(key, f"model signing failed ({exc})") from exc
    if said["subject"][0]["digest"] != made["subject"][0]["digest"]:
        signed.unlink(missing_ok=True)
        raise InputError(path, "the folder's files are not the ones ingested at step "
                         f"{step} of {run} (model signing's digest "
                         f"{said['subject'][0]['digest'].get('sha256')}, recorded "
                         f"{made['subject'][0]['digest']['sha256']}): refused")
    envelope = sign_statement(made, key)
    write_output(binding_path, canonical_json(envelope) + "\n")
    os.replace(signed, out)
    return AttestationWritten(path=str(out), kind="checkpoint", subject=f"{run}@{step}",
                              predicate_type=made["predicateType"],
                              subjects=len(made["subject"]),
                              keyid=envelope["signatures"][0]["keyid"])


def _checkpoint_path(store: BaseStore, run: str, step: int) -> str:
    with store.reader(views=False) as con:
        row = con.execute("SELECT path FROM checkpoints WHERE run = ? AND step = ?",
                          [run, step]).fetchone()
    return str(row[0]) if row else ""
