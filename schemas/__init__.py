"""Table DDL and Arrow schemas of the store, versioned.

`catalog.sql` creates a new catalog at SCHEMA_VERSION; `migrations/NNNN.sql` take a
catalog from version NNNN-1 to NNNN. Arrow schemas of the Parquet tables are built on
demand so importing this module stays cheap.
"""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

SCHEMA_VERSION = 1

# Parquet-backed views: name -> the columns every file of that table carries.
DOCUMENTS_COLUMNS = (
    "corpus",
    "doc_id",
    "source",
    "uri",
    "n_bytes",
    "n_tokens",
    "content_hash",
    "license",
    "metadata",
    "origin",
    "record",
)


def catalog_ddl() -> str:
    return resources.files(__name__).joinpath("catalog.sql").read_text(encoding="utf-8")


def migrations() -> dict[int, str]:
    """Migration scripts by the version they lead to."""
    found: dict[int, str] = {}
    folder = resources.files(__name__).joinpath("migrations")
    for entry in folder.iterdir():
        stem = entry.name.removesuffix(".sql")
        if entry.name.endswith(".sql") and stem.isdigit():
            found[int(stem)] = entry.read_text(encoding="utf-8")
    return dict(sorted(found.items()))


def documents_schema() -> pa.Schema:
    """The Arrow schema of every `documents` Parquet file (sorted by doc_id)."""
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
