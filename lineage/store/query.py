"""`lineage sql`: read-only SQL over the catalog and the Parquet-backed views.

The query runs in the session lineage.store.sql_guard builds: the catalog read-only, no file
access, no extensions, the configuration locked, a time and a row limit. This module
holds the result type: the rows as DuckDB gave them, the JSON `lineage sql --json`
prints, and a polars frame typed by the column types DuckDB reported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lineage.answer import json_text, to_jsonable

if TYPE_CHECKING:
    import polars as pl

# DuckDB types with one polars type each; the others (nested, UUID, ...) are handled or
# inferred by `_polars_dtype`.
_POLARS_TYPES = {
    "boolean": "Boolean", "tinyint": "Int8", "smallint": "Int16", "integer": "Int32",
    "bigint": "Int64", "hugeint": "Int128", "utinyint": "UInt8", "usmallint": "UInt16",
    "uinteger": "UInt32", "ubigint": "UInt64", "float": "Float32", "double": "Float64",
    "varchar": "String", "date": "Date", "time": "Time", "blob": "Binary", "null": "Null",
}
_DATETIME_UNITS = {"timestamp": "us", "timestamp_ms": "ms", "timestamp_ns": "ns",
                   "timestamp_s": "ms"}


@dataclass(frozen=True)
class QueryResult:
    """The answer of `lineage sql`: columns and rows as DuckDB returned them."""

    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool = False  # more rows than max_rows: only the first max_rows are here
    max_rows: int | None = None
    # Each column's DuckDB type as DuckDB spells it (e.g. BIGINT, DECIMAL(10,2), VARCHAR[]);
    # empty when unknown.
    column_types: tuple[str, ...] = ()

    def records(self) -> list[dict[str, Any]]:
        """Rows as JSON-ready objects (dates ISO 8601, blobs base64, decimals as strings)."""
        return [
            {name: to_jsonable(value) for name, value in zip(self.columns, row, strict=True)}
            for row in self.rows
        ]

    def to_list(self) -> list[dict[str, Any]]:
        """The JSON array `lineage sql --json` prints, as Python values (= `records()`)."""
        return self.records()

    def to_json(self) -> str:
        """Exactly what `lineage sql --json` prints (the cut-off warning goes to stderr)."""
        return json_text(self.records())

    def to_polars(self) -> pl.DataFrame:
        """The rows as a DataFrame: the columns in order, each typed after DuckDB's type
        where polars has one (integers keep their width and sign, decimals their scale),
        else inferred from the values."""
        import polars as pl

        names = _unique_names(self.columns)
        series = []
        for index, name in enumerate(names):
            values = [row[index] for row in self.rows]
            kind = self.column_types[index] if self.column_types else None
            dtype = _polars_dtype(kind) if kind else None
            if kind is not None and kind.upper() in ("UUID", "JSON") or \
                    (dtype is None and _is_enum(kind)):
                values = [None if v is None else str(v) for v in values]
                dtype = pl.String
            series.append(pl.Series(name, values, dtype=dtype, strict=dtype is not None))
        return pl.DataFrame(series)


def _unique_names(columns: list[str]) -> list[str]:
    """Column names a DataFrame accepts: a repeated name gets `_1`, `_2`, ... appended."""
    seen: dict[str, int] = {}
    names = []
    for name in columns:
        count = seen.get(name, 0)
        seen[name] = count + 1
        names.append(name if count == 0 else f"{name}_{count}")
    return names


def _polars_dtype(kind: str) -> Any:
    """The polars type of a DuckDB type name, or None where the values decide."""
    import duckdb
    import polars as pl

    try:
        parsed = duckdb.type(kind)
    except duckdb.Error:
        return None
    return _polars_of(parsed, pl)


def _polars_of(parsed: Any, pl: Any) -> Any:
    kind = parsed.id
    if kind in _POLARS_TYPES:
        return getattr(pl, _POLARS_TYPES[kind])
    if kind in _DATETIME_UNITS:
        return pl.Datetime(_DATETIME_UNITS[kind])
    if kind == "timestamp with time zone":
        return pl.Datetime("us", "UTC")
    if kind == "interval":
        return pl.Duration("us")
    if kind == "decimal":
        (_, precision), (_, scale) = parsed.children
        return pl.Decimal(precision, scale)
    if kind == "list":
        inner = _polars_of(parsed.children[0][1], pl)
        return None if inner is None else pl.List(inner)
    if kind == "array":
        inner = _polars_of(parsed.children[0][1], pl)
        return None if inner is None else pl.Array(inner, parsed.children[1][1])
    if kind == "struct":
        fields = [(name, _polars_of(child, pl)) for name, child in parsed.children]
        if any(dtype is None for _, dtype in fields):
            return None
        return pl.Struct(dict(fields))
    return None


def _is_enum(kind: str | None) -> bool:
    return kind is not None and kind.upper().startswith("ENUM(")
