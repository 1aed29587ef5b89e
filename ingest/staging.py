"""Per-ingest scratch space inside the store, and the normalized shape of staged rows.

Map tasks write their rows here as Parquet parts (unsorted, one per input shard or
batch); the reduce reads them back. The folder carries the ingest's pid so a later run
can remove what a killed one left behind.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

def staged_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            ("doc_id", pa.string()),
            ("source", pa.string()),
            ("uri", pa.string()),
            ("n_bytes", pa.int64()),
            ("n_tokens", pa.int64()),
            ("content_hash", pa.string()),
            ("license", pa.string()),
            ("metadata", pa.string()),
            ("origin", pa.string()),  # the input file, for error messages only
            ("record", pa.int64()),  # 1-based record or row inside `origin`, or null
            ("has_text", pa.bool_()),  # false for ready manifests: `origin` holds no text
            ("text_hash", pa.string()),  # lineage-text/1 hash; null: no text identity
            ("n_words", pa.int64()),  # normalized words; null when text_hash is
            ("byte_offset", pa.int64()),  # where the record's line starts (plain JSONL)
        ]
    )


def staged_fingerprint_schema() -> pa.Schema:
    """Fingerprints as a map task stages them: keyed by doc_id until the reduce numbers
    the documents."""
    import pyarrow as pa

    return pa.schema(
        [("doc_id", pa.string()), ("position", pa.uint32()), ("fingerprint", pa.uint64())]
    )


def staged_near_schema() -> pa.Schema:
    """Near-duplicate band keys as a map task stages them, keyed by doc_id."""
    import pyarrow as pa

    return pa.schema([("doc_id", pa.string()), ("band_key", pa.uint64())])


def record_place(origin: str, record: int | None) -> str | None:
    """Where a row came from inside its input file, for error messages: `row N` of a
    Parquet file, `record N` of a JSONL one, nothing for a whole file."""
    if record is None:
        return None
    return f"row {record}" if origin.lower().endswith(".parquet") else f"record {record}"


@dataclass(frozen=True)
class StagedParts:
    """Everything the map staged for the reduce."""

    documents: list[str]
    fingerprints: list[str]
    near: list[str] = field(default_factory=list)  # staged band keys (lineage-near/1)


@dataclass(frozen=True)
class ShardSummary:
    """What one map task produced: its staged part and what it dropped."""

    part: str | None  # path of the staged Parquet part, None when nothing was kept
    documents: int
    dropped_empty: int
    fingerprint_part: str | None = None  # staged fingerprints, when any were made
    near_part: str | None = None  # staged band keys, when any were made
