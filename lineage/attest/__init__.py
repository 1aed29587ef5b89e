"""Attestations: what lineage proves, as in-toto Statements in DSSE envelopes that
standard tools check without lineage (docs/attestations.md).

`statements` builds the Statement (v1) of a corpus manifest, a stream, a run's chain, a
ledger record and an experiment record from the store, each with a predicate type under
the project's own URI and a JSON schema in `schemas/attestations/`; `envelope` signs it
in a DSSE envelope with an ed25519 key (the keys the audit ledger already accepts) through
securesystemslib, and opens one; `actions` writes an attestation and verifies one against
the store (`lineage attest ...`), typed by `answers`.

Layer 9. May import: lineage.audit, lineage.exp, lineage.runs, lineage.stream,
lineage.corpora, lineage.formats, lineage.store, lineage.errors, lineage.version,
lineage.userfiles.
"""
