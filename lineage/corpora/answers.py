"""The typed answers of the corpus questions (lineage.answer explains the pattern)."""

from __future__ import annotations

from typing import ClassVar

from lineage.answer import Answer


class CorpusSummary(Answer):
    """`lineage corpus list`: one corpus with its totals and manifest hash."""

    name: str
    manifest_hash: str  # blake3:<hex> of the manifest (docs/manifest-spec.md)
    documents: int
    tokens: int
    bytes: int
    dropped_empty: int  # empty documents seen in the input and not kept
    tokenizer: str  # bytes, manifest, input:token_count or tokenizer.json:blake3:<hex>
    created_at: str  # ISO 8601, UTC, whole seconds, e.g. 2026-01-31T12:00:00Z


class CorpusSource(Answer):
    """One source of a corpus: its counts, token share and licences."""

    source: str
    documents: int
    tokens: int
    bytes: int
    share: float  # the source's tokens / the corpus's tokens, rounded to 6 places
    licenses: tuple[str, ...]  # distinct SPDX identifiers, sorted


class TextIndex(Answer):
    """A corpus's text index (docs/text-spec.md): what `trained-on` matches text against."""

    text_spec: str  # normalization, e.g. lineage-text/1
    fingerprint_spec: str  # e.g. lineage-fingerprint/1
    k: int  # words per gram
    w: int  # grams per winnowing window
    documents: int  # documents with a text identity
    not_text: int  # documents without one (not UTF-8, or no words)
    words: int  # normalized words over those documents
    fingerprints: int
    text_bytes: int  # bytes of the indexed documents
    index_bytes: int  # bytes of the fingerprint parts
    unicode_version: str | None  # Unicode version of the normalization; None: not recorded


class Corpus(Answer):
    """`lineage corpus show`: one corpus with its sources, token shares and licences."""

    ROWS: ClassVar[str | None] = "sources"

    name: str
    manifest_hash: str  # blake3:<hex> under manifest_spec
    manifest_spec: str  # e.g. lineage-manifest/1
    documents: int
    tokens: int
    bytes: int
    dropped_empty: int
    tokenizer: str
    created_at: str  # ISO 8601, UTC, whole seconds
    sources: tuple[CorpusSource, ...]
    licenses: tuple[str, ...]  # every licence of every source, sorted
    text_index: TextIndex | None  # None: ingested without a text index


class ChangedDocument(Answer):
    """A document whose bytes differ between the reference and the local copy."""

    doc_id: str
    recorded: str  # the reference's content hash (BLAKE3-256 hex)
    local: str  # the local copy's


class CorpusStatus(Answer):
    """`lineage corpus status`: a local copy (folders, shards) against a recorded corpus or
    a published ready manifest, document by document (by doc_id and content hash)."""

    reference: str  # "corpus NAME" or the manifest file compared against
    reference_hash: str  # the reference's manifest hash
    local_hash: str  # the manifest hash of the local copy, read as `ingest corpus` would
    in_sync: bool  # no document new, changed or missing
    recorded: int  # documents in the reference
    local: int  # documents in the local copy (empty files are never documents)
    unchanged: int
    new: int  # in the local copy only
    changed: int  # same doc_id, other bytes
    missing: int  # in the reference only
    limit: int  # at most this many doc_ids are listed per kind
    new_documents: tuple[str, ...]
    changed_documents: tuple[ChangedDocument, ...]
    missing_documents: tuple[str, ...]
    paths: tuple[str, ...]  # what was read, resolved
    skipped_hidden: int
    skipped_links: int
