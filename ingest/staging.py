"""Per-ingest scratch space inside the store, and the normalized shape of staged rows.

Map tasks write their rows here as Parquet parts (unsorted, one per input shard or
batch); the reduce reads them back. The folder carries the ingest's pid so a later run
can remove what a killed one left behind.
"""

from __future__ import annotations

from dataclasses import dataclass
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
        ]
    )


@dataclass(frozen=True)
class ShardSummary:
    """What one map task produced: its staged part and what it dropped."""

    part: str | None  # path of the staged Parquet part, None when nothing was kept
    documents: int
    dropped_empty: int
