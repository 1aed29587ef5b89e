"""`lineage attest`: write a signed attestation of a store's object, and verify one
against the store (docs/attestations.md)."""

from __future__ import annotations

from pathlib import Path

from lineage.attest.answers import AttestationVerified, AttestationWritten
from lineage.attest.envelope import payload, public_key, read_envelope, sign_statement, signed_by
from lineage.attest.statements import kind_of, statement
from lineage.errors import LineageError
from lineage.runs.chain import canonical_json
from lineage.store.base import BaseStore
from lineage.userfiles import check_output_path, write_output

NAME_FIELDS = {"corpus": "corpus", "stream": "stream", "run": "run", "audit": "record_id",
               "exp": "experiment"}


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
