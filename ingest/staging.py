"""Per-ingest scratch space inside the store, and the normalized shape of staged rows.

Map tasks write their rows here as Parquet parts (unsorted, one per input shard or
batch); the reduce reads them back. The folder carries the ingest's pid so a later run
can remove what a killed one left behind.
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lineage.durable import pid_alive, remove_quietly

if TYPE_CHECKING:
    import pyarrow as pa

STAGED_COLUMNS = (
    "doc_id", "source", "uri", "n_bytes", "n_tokens", "content_hash", "license", "metadata",
    "origin", "record", "has_text",
)  # fmt: skip


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


def new_staging_dir(staging_root: Path) -> Path:
    """A fresh folder for one ingest; also clears folders of ingests that died."""
    staging_root.mkdir(parents=True, exist_ok=True)
    clear_abandoned(staging_root)
    folder = staging_root / f"{os.getpid()}-{int(time.time())}-{secrets.token_hex(4)}"
    folder.mkdir()
    return folder


def clear_abandoned(staging_root: Path) -> list[Path]:
    """Remove staging folders whose owning process is gone."""
    removed: list[Path] = []
    if not staging_root.is_dir():
        return removed
    for folder in sorted(staging_root.iterdir()):
        head = folder.name.split("-", 1)[0]
        if head.isdigit() and not pid_alive(int(head)):
            remove_quietly(folder)
            removed.append(folder)
    return removed
