"""`lineage sql`: read-only SQL over the catalog and the Parquet-backed views.

The query runs in the session lineage.store.sql_guard builds: the catalog read-only, no file
access, no extensions, the configuration locked, a time and a row limit. This module
holds the result type: the rows as DuckDB gave them, the JSON `lineage sql --json`
prints, and a polars frame typed by the column types DuckDB reported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lineage.jsonout import json_text, to_jsonable

if TYPE_CHECKING:
    import polars as pl

# DuckDB types with one polars type each; `_polars_of` handles the others it can.
_POLARS_TYPES = {
    "boolean": "Boolean", "tinyint": "Int8", "smallint": "Int16", "integer": "Int32",
    "bigint": "Int64", "hugeint": "Int128", "utinyint": "UInt8", "usmallint": "UInt16",
    "uinteger": "UInt32", "ubigint": "UInt64", "float": "Float32", "double": "Float64",
    "varchar": "String", "date": "Date", "time": "Time", "blob": "Binary", "null": "Null",
    "uhugeint": "UInt128",  # in recent polars only: else the values decide
}
# DuckDB types polars has no type for: their `--json` text.
_AS_TEXT = {"uuid", "enum", "time with time zone", "bit"}
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
        """The rows as a DataFrame, the columns in order, each typed after DuckDB's type
        where polars has one (integers keep their width and sign, decimals their scale,
        a map is a list of key/value structs as in Arrow), as text where polars has none
        (UUIDs, enums, times with a zone: their `--json` text), else after the values."""
        import polars as pl

        kinds = self.column_types or (None,) * len(self.columns)
        names = _unique_names(self.columns)
        return pl.DataFrame([
            _series(name, [row[index] for row in self.rows], kind)
            for index, (name, kind) in enumerate(zip(names, kinds, strict=True))
        ])


def _unique_names(columns: list[str]) -> list[str]:
    """Column names a DataFrame accepts: a repeated name gets `_1`, `_2`, ... appended."""
    seen: dict[str, int] = {}
    names = []
    for name in columns:
        count = seen.get(name, 0)
        seen[name] = count + 1
        names.append(name if count == 0 else f"{name}_{count}")
    return names


def _series(name: str, values: list[Any], kind: str | None) -> pl.Series:
    """One column of the frame (see `QueryResult.to_polars`)."""
    import polars as pl

    parsed = _parse_type(kind)
    dtype = None if parsed is None else _polars_of(parsed, pl)
    if parsed is not None and parsed.id == "map":  # as Arrow holds it: key/value structs
        values = [None if v is None else [{"key": k, "value": x} for k, x in v.items()]
                  for v in values]
        key, value = (_polars_of(child, pl) for _, child in parsed.children)
        if key is not None and value is not None:
            dtype = pl.List(pl.Struct({"key": key, "value": value}))
    if dtype is not None:
        return pl.Series(name, values, dtype=dtype)
    if parsed is not None and parsed.id in _AS_TEXT:
        return pl.Series(name, [None if v is None else str(to_jsonable(v)) for v in values],
                         dtype=pl.String)
    try:
        return pl.Series(name, values, strict=False)
    except (pl.exceptions.PolarsError, OverflowError, TypeError, ValueError):
        return pl.Series(name, [to_jsonable(v) for v in values], strict=False)


def _parse_type(kind: str | None) -> Any:
    """DuckDB's type object for a type name, or None."""
    import duckdb

    if not kind:
        return None
    try:
        return duckdb.type(kind)
    except duckdb.Error:
        return None


def _polars_of(parsed: Any, pl: Any) -> Any:
    """The polars type of a DuckDB type, or None where polars has none."""
    kind = parsed.id
    if kind in _POLARS_TYPES:
        return getattr(pl, _POLARS_TYPES[kind], None)
    if kind in _DATETIME_UNITS:
        return pl.Datetime(_DATETIME_UNITS[kind])
    if kind == "timestamp with time zone":
        return pl.Datetime("us", "UTC")
    if kind == "interval":
        return pl.Duration("us")
    if kind == "decimal":
        (_, precision), (_, scale) = parsed.children
        return pl.Decimal(precision, scale)
    if kind in ("list", "array"):
        inner = _polars_of(parsed.children[0][1], pl)
        if inner is None:
            return None
        return pl.List(inner) if kind == "list" else pl.Array(inner, parsed.children[1][1])
    if kind == "struct":
        fields = [(field, _polars_of(child, pl)) for field, child in parsed.children]
        if any(dtype is None for _, dtype in fields):
            return None
        return pl.Struct(dict(fields))
    return None
