"""The typed answers of `lineage attest ...`."""

from __future__ import annotations

from typing import Any

from lineage.answer import Answer


class AttestationWritten(Answer):
    """`lineage attest KIND NAME -o FILE`: the signed envelope written."""

    path: str
    kind: str  # corpus, stream, run, audit or exp
    subject: str  # what it is about: the name or id given, resolved
    predicate_type: str
    subjects: int  # the Statement's subjects
    keyid: str  # the signature's key id (securesystemslib's)


class AttestationVerified(Answer):
    """`lineage attest verify FILE --key KEY`: the signature, then the Statement against
    what the store holds now."""

    path: str
    kind: str | None  # None: a predicate type lineage does not make
    subject: str | None
    predicate_type: str
    signature: bool  # a signature verifies under the key given
    store: str  # matches, differs, unknown (the store does not hold it) or not-checked
    differences: tuple[str, ...]  # the top-level fields that differ, "subject" included
    ok: bool  # signature and store both hold
    statement: dict[str, Any]  # the Statement, as signed
