"""`lineage sql`: read-only SQL over the catalog and the Parquet-backed views.

The catalog is attached read-only, and only statements that read (SELECT, EXPLAIN,
DESCRIBE, SHOW, PRAGMA) run, so COPY ... TO, ATTACH or INSTALL from a query string are
refused before anything executes.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import re
import uuid
from dataclasses import dataclass
from typing import Any

from lineage.errors import UsageError
from lineage.store import Store

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_READING = {"SELECT", "EXPLAIN", "PRAGMA", "DESCRIBE", "SHOW", "SUMMARIZE"}


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]

    def records(self) -> list[dict[str, Any]]:
        """Rows as JSON-ready objects (dates ISO 8601, blobs base64, decimals as strings)."""
        return [
            {name: to_jsonable(value) for name, value in zip(self.columns, row, strict=True)}
            for row in self.rows
        ]


def run_sql(store: Store, sql: str) -> QueryResult:
    import duckdb

    with store.reader() as con:
        try:
            statements = con.extract_statements(sql)
        except duckdb.Error as exc:
            raise UsageError(f"SQL does not parse: {_first_line(exc)}") from exc
        if not statements:
            raise UsageError("no SQL statement given")
        for statement in statements:
            kind = statement.type.name
            if kind not in _READING:
                raise UsageError(f"read-only: {kind} statements are not allowed here")
        try:
            for statement in statements[:-1]:
                con.execute(statement.query)
            cursor = con.execute(statements[-1].query)
            columns = [d[0] for d in cursor.description or []]
            return QueryResult(columns, cursor.fetchall())
        except duckdb.Error as exc:
            raise UsageError(f"SQL failed: {_first_line(exc)}") from exc


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


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
