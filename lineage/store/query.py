"""`lineage sql`: read-only SQL over the catalog and the Parquet-backed views.

The query runs in the session lineage.store.sql_guard builds: the catalog read-only, no file
access, no extensions, the configuration locked, a time and a row limit. This module
holds the result type and the JSON conversion every `--json` uses.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import re
import uuid
from dataclasses import dataclass
from typing import Any

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


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


def json_text(value: Any) -> str:
    """The JSON every `--json` prints: indented, UTF-8 as is, with the scalars JSON lacks
    (dates, decimals, UUIDs, bytes) converted as `to_jsonable` does. Conversion happens in
    json's `default` hook, so large answers are not walked twice."""
    import json

    text = json.dumps(value, indent=2, ensure_ascii=False, default=_json_scalar)
    if text.isascii():  # constant time in CPython: most answers end here
        return text
    # A lone surrogate (an undecodable byte of a file name) cannot be written as UTF-8:
    # JSON's own escape for it reads back as the same string.
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _json_scalar(value: Any) -> Any:
    converted = to_jsonable(value)
    if converted is value:
        raise TypeError(f"{type(value).__name__} is not JSON serializable")
    return converted


def to_jsonable(value: Any) -> Any:
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    return value

