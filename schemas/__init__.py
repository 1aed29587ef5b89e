"""Table DDL and Arrow schemas of the store, versioned.

`catalog.sql` creates a new catalog at SCHEMA_VERSION; `migrations/NNNN.sql` take a
catalog from version NNNN-1 to NNNN. Arrow schemas of the Parquet tables are built on
demand so importing this module stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

SCHEMA_VERSION = 12

_V, _I = "VARCHAR", "BIGINT"
# Parquet-backed views and their columns with DuckDB types (used for views of tables that
# have no files yet); tests check them against the Arrow schemas below.
BULK_TABLES: dict[str, dict[str, str]] = {
    "documents": {
        "corpus": _V, "doc_id": _V, "source": _V, "uri": _V, "n_bytes": _I, "n_tokens": _I,
        "content_hash": _V, "license": _V, "metadata": _V, "origin": _V, "record": _I,
    },
    "document_hashes": {"corpus": _V, "content_hash": _V, "doc_id": _V, "source": _V},
    "occurrences": {
        "stream": _V, "ordinal": _I, "corpus": _V, "doc_id": _V, "source": _V, "epoch": _I,
        "stream_start": _I, "stream_end": _I, "doc_offset": _I, "content_hash": _V, "uri": _V,
    },
    "occurrence_hashes": {
        "stream": _V, "content_hash": _V, "corpus": _V, "doc_id": _V, "source": _V,
        "ordinal": _I, "epoch": _I, "stream_start": _I, "stream_end": _I, "doc_offset": _I,
    },
    "text_documents": {
        "corpus": _V, "doc": _I, "doc_id": _V, "source": _V, "content_hash": _V,
        "text_hash": _V, "n_words": _I, "n_bytes": _I, "origin": _V, "record": _I,
        "byte_offset": _I,
    },
    "text_hashes": {"corpus": _V, "text_hash": _V, "doc": _I},
    "fingerprints": {
        "corpus": _V, "fingerprint": "UBIGINT", "doc": "UINTEGER", "position": "UINTEGER",
    },
    "near_bands": {"corpus": _V, "band_key": "UBIGINT", "doc": "UINTEGER"},
}  # fmt: skip


def catalog_ddl() -> str:
    from importlib import resources  # here, not at import: it costs queries ~4 ms

    return resources.files(__name__).joinpath("catalog.sql").read_text(encoding="utf-8")


def migrations() -> dict[int, str]:
    """Migration scripts by the version they lead to."""
    from importlib import resources

    found: dict[int, str] = {}
    folder = resources.files(__name__).joinpath("migrations")
    for entry in folder.iterdir():
        stem = entry.name.removesuffix(".sql")
        if entry.name.endswith(".sql") and stem.isdigit():
            found[int(stem)] = entry.read_text(encoding="utf-8")
    return dict(sorted(found.items()))


def documents_schema() -> pa.Schema:
    """One row per document of a corpus, sorted by doc_id (UTF-8 byte order)."""
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("corpus", pa.string(), nullable=False),
            pa.field("doc_id", pa.string(), nullable=False),
            pa.field("source", pa.string(), nullable=False),
            pa.field("uri", pa.string()),
            pa.field("n_bytes", pa.int64(), nullable=False),
            pa.field("n_tokens", pa.int64(), nullable=False),
            pa.field("content_hash", pa.string(), nullable=False),
            pa.field("license", pa.string()),
            pa.field("metadata", pa.string()),
            pa.field("origin", pa.string()),  # the file the bytes were read from
            pa.field("record", pa.int64()),  # 1-based record or row in `origin`; NULL: whole file
        ]
    )


def document_hashes_schema() -> pa.Schema:
    """Content hash -> document, sorted by content_hash: "was this file in a corpus?"."""
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("corpus", pa.string(), nullable=False),
            pa.field("content_hash", pa.string(), nullable=False),
            pa.field("doc_id", pa.string(), nullable=False),
            pa.field("source", pa.string(), nullable=False),
        ]
    )


def occurrences_schema() -> pa.Schema:
    """One row per document occurrence (or recorded segment), sorted by ordinal."""
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("stream", pa.string(), nullable=False),
            pa.field("ordinal", pa.int64(), nullable=False),
            pa.field("corpus", pa.string(), nullable=False),
            pa.field("doc_id", pa.string(), nullable=False),
            pa.field("source", pa.string(), nullable=False),
            pa.field("epoch", pa.int64(), nullable=False),
            pa.field("stream_start", pa.int64(), nullable=False),  # first token, global
            pa.field("stream_end", pa.int64(), nullable=False),  # one past the last token
            pa.field("doc_offset", pa.int64(), nullable=False),  # document tokens before start
            pa.field("content_hash", pa.string(), nullable=False),
            pa.field("uri", pa.string()),
        ]
    )


def occurrence_hashes_schema() -> pa.Schema:
    """The occurrences again, sorted by content_hash: "where in the stream is this file?".

    Rows with the same content hash follow in (doc_id, epoch, ordinal) order."""
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("stream", pa.string(), nullable=False),
            pa.field("content_hash", pa.string(), nullable=False),
            pa.field("corpus", pa.string(), nullable=False),
            pa.field("doc_id", pa.string(), nullable=False),
            pa.field("source", pa.string(), nullable=False),
            pa.field("ordinal", pa.int64(), nullable=False),
            pa.field("epoch", pa.int64(), nullable=False),
            pa.field("stream_start", pa.int64(), nullable=False),
            pa.field("stream_end", pa.int64(), nullable=False),
            pa.field("doc_offset", pa.int64(), nullable=False),
        ]
    )


def text_documents_schema() -> pa.Schema:
    """Documents with a text identity, numbered (`doc`) in doc_id order, sorted by doc."""
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("corpus", pa.string(), nullable=False),
            pa.field("doc", pa.int64(), nullable=False),  # the document's rank by doc_id
            pa.field("doc_id", pa.string(), nullable=False),
            pa.field("source", pa.string(), nullable=False),
            pa.field("content_hash", pa.string(), nullable=False),
            pa.field("text_hash", pa.string(), nullable=False),  # lineage-text/1
            pa.field("n_words", pa.int64(), nullable=False),
            pa.field("n_bytes", pa.int64(), nullable=False),
            pa.field("origin", pa.string()),  # where the text can be read again
            pa.field("record", pa.int64()),
            pa.field("byte_offset", pa.int64()),  # start of the record's line (plain JSONL)
        ]
    )


def text_hashes_schema() -> pa.Schema:
    """Normalized-text hash -> document, sorted by text_hash: "is this text in a corpus?"."""
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("corpus", pa.string(), nullable=False),
            pa.field("text_hash", pa.string(), nullable=False),
            pa.field("doc", pa.int64(), nullable=False),  # text_documents.doc
        ]
    )


def fingerprints_schema() -> pa.Schema:
    """Winnowed k-gram fingerprints (lineage-fingerprint/1), sorted by fingerprint."""
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("corpus", pa.string(), nullable=False),
            pa.field("fingerprint", pa.uint64(), nullable=False),
            pa.field("doc", pa.uint32(), nullable=False),  # text_documents.doc
            pa.field("position", pa.uint32(), nullable=False),  # first word of the gram
        ]
    )


def near_bands_schema() -> pa.Schema:
    """LSH band keys of near-duplicate signatures (lineage-near/1), sorted by band_key."""
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("corpus", pa.string(), nullable=False),
            pa.field("band_key", pa.uint64(), nullable=False),
            pa.field("doc", pa.uint32(), nullable=False),  # text_documents.doc
        ]
    )


def duckdb_columns(schema: pa.Schema) -> dict[str, str]:
    """Column name -> DuckDB type, for empty views of tables with no files yet."""
    kinds = {"string": "VARCHAR", "int64": "BIGINT", "bool": "BOOLEAN", "uint64": "UBIGINT",
             "uint32": "UINTEGER"}
    return {field.name: kinds[str(field.type)] for field in schema}
