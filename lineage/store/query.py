"""`lineage sql`: read-only SQL over the catalog and the Parquet-backed views.

The query runs in the session lineage.store.sql_guard builds: the catalog read-only, no file
access, no extensions, the configuration locked, a time and a row limit. This module
holds the result type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lineage.answer import to_jsonable


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool = False  # more rows than max_rows: only the first max_rows are here
    max_rows: int | None = None

    def records(self) -> list[dict[str, Any]]:
        """Rows as JSON-ready objects (dates ISO 8601, blobs base64, decimals as strings)."""
        return [
            {name: to_jsonable(value) for name, value in zip(self.columns, row, strict=True)}
            for row in self.rows
        ]
