"""Field types of JSONL and Parquet inputs, checked before DuckDB reads them.

DuckDB coerces what it is told to read as VARCHAR or BIGINT (a number becomes a text,
"12" and 12.0 become counts) and reads NaN; a JSONL shard is therefore read once here,
to its end (so the decompressor verifies the gzip CRC and length, or the zstd checksum
and frames), every line parsed with the nesting bound of the step logs, and every named
field checked for its type. A Parquet file's column types are checked from its schema.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lineage.errors import InputError
from lineage.ingest.input_rules import (
    INT64_MAX,
    IngestRuleError,
    bounded_lines,
    compressed_error,
    depth_error,
    is_compressed,
    os_error,
)
from lineage.ingest.step_log import depth_over
from lineage.runs.chain import MAX_DEPTH

# What a field may hold. Absent fields and nulls are left to the row rules that follow,
# except where the kind says "not null".
STRING = "string"  # a JSON string, or null
TEXT = "text"  # a JSON string, never null
ID = "id"  # a string or an integer in 0..2^63-1, never null when present
COUNT = "count"  # an integer that fits a signed 64-bit column, or null
ANY = "any"  # any JSON value (nesting bounded)

_NAMES = {STRING: "a string", TEXT: "a string", ID: "a string or an integer",
          COUNT: "an integer"}


class _NotANumber(ValueError):
    pass


def _refuse_constant(name: str) -> Any:
    raise _NotANumber(name)


def check_jsonl(path: Path, fields: Mapping[str, str]) -> list[int]:
    """Read the whole shard and check each record; returns where each record's line
    starts in the (decompressed) bytes, blank lines not counted."""
    from lineage.ingest.inputs import open_text_stream

    offsets: list[int] = []
    position = 0
    try:
        with open_text_stream(path) as handle:
            for line_no, raw in enumerate(bounded_lines(handle, path), start=1):
                if raw.strip():
                    offsets.append(position)
                    check_record(path, f"line {line_no}", raw, fields)
                position += len(raw)
    except IngestRuleError:
        raise
    except (OSError, EOFError) as exc:
        if is_compressed(path) and not isinstance(exc, PermissionError):
            raise compressed_error(path, exc) from exc
        if isinstance(exc, OSError):
            raise os_error(path, exc) from exc
        raise
    except Exception as exc:  # zstandard.ZstdError is not an OSError
        if type(exc).__name__ == "ZstdError":
            raise compressed_error(path, exc) from exc
        raise
    return offsets


def check_record(path: Path, where: str, raw: bytes, fields: Mapping[str, str]) -> None:
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(path, f"invalid UTF-8 at byte {exc.start} of the line",
                         where=where) from exc
    if depth_over(line, MAX_DEPTH):
        raise depth_error(path, where)
    try:
        value = json.loads(line, parse_constant=_refuse_constant)
    except _NotANumber as exc:
        raise IngestRuleError(path, "not-a-number", f"{exc.args[0]} is not a JSON number",
                              where=where) from exc
    except ValueError as exc:
        raise InputError(path, f"malformed JSON ({exc.args[0].split(':')[0]})",
                         where=where) from exc
    if not isinstance(value, dict):
        raise InputError(path, f"expected a JSON object, found {type(value).__name__}",
                         where=where)
    for name, kind in fields.items():
        _check_field(path, where, name, kind, value)


def _check_field(path: Path, where: str, name: str, kind: str, record: dict[str, Any]) -> None:
    if name not in record:
        if kind == TEXT:
            raise InputError(path, "record has no `text` string", where=where)
        return
    value = record[name]
    if kind == ANY or (value is None and kind in (STRING, COUNT)):
        return
    is_int = isinstance(value, int) and not isinstance(value, bool)
    if isinstance(value, str) and kind in (STRING, TEXT, ID):
        if kind == TEXT and not _encodable(value):
            raise InputError(path, "`text` holds an unpaired surrogate escape (not valid "
                             "Unicode)", where=where)
        return
    if is_int and kind in (ID, COUNT):
        low = 0 if kind == ID else -INT64_MAX - 1
        if not low <= value <= INT64_MAX:
            raise IngestRuleError(path, "integer-range", f"`{name}` {value} is outside "
                                  f"{low}..{INT64_MAX}", where=where)
        return
    raise IngestRuleError(path, "value-type", f"`{name}` must be {_NAMES[kind]}, not "
                          f"{_json_kind(value)} (nothing is coerced)", where=where)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {str: "a string", int: "an integer", float: "a float", list: "a list",
            dict: "an object"}.get(type(value), type(value).__name__)


def check_parquet_types(path: Path, fields: Mapping[str, str]) -> None:
    """Each named column that is present has a type of its kind; unsigned 64-bit counts
    hold no value above 2^63-1."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except Exception as exc:
        raise IngestRuleError(path, "value-type", "not a readable Parquet file "
                              f"({str(exc).splitlines()[0]})") from exc
    for name, kind in fields.items():
        if name not in schema.names or kind == ANY:
            continue
        typ = schema.field(name).type
        strings = pa.types.is_string(typ) or pa.types.is_large_string(typ) or \
            getattr(pa.types, "is_string_view", lambda _t: False)(typ)
        ints = pa.types.is_integer(typ)
        if pa.types.is_null(typ) and kind != TEXT:
            continue  # no value at all: the row rules name the row that needs one
        ok = strings if kind in (STRING, TEXT) else strings or ints if kind == ID else ints
        if not ok:
            raise IngestRuleError(path, "value-type", f"column `{name}` must be "
                                  f"{_NAMES[kind]}, not {typ} (nothing is coerced)")
        if typ == pa.uint64():
            _check_uint64(path, name)


def check_parquet_not_null(path: Path, name: str) -> None:
    """A column that, when present, holds a value on every row (a null `id` would be
    replaced by a generated name: refused as in JSONL)."""
    import pyarrow.parquet as pq

    if name not in pq.read_schema(path).names:
        return
    found = _first_row(path, name, f'"{name}" IS NULL')
    if found is not None:
        raise IngestRuleError(path, "value-type", f"`{name}` is null", where=f"row {found[0]}")


def _first_row(path: Path, name: str, predicate: str) -> tuple[int, Any] | None:
    """(1-based row number, value of `name`) of the first row matching `predicate`."""
    import duckdb

    con = duckdb.connect(":memory:")
    try:
        row = con.execute(
            f'SELECT file_row_number + 1, "{name}" FROM read_parquet(?, file_row_number = '
            f"true) WHERE {predicate} LIMIT 1", [str(path)]).fetchone()
    finally:
        con.close()
    return (int(row[0]), row[1]) if row is not None else None


def _check_uint64(path: Path, name: str) -> None:
    found = _first_row(path, name, f'"{name}" > {INT64_MAX}')
    if found is not None:
        raise IngestRuleError(path, "integer-range", f"`{name}` {found[1]} is outside "
                              f"0..{INT64_MAX}", where=f"row {found[0]}")


def check_jsonl_columns(con: Any, path: Path, fields: Mapping[str, str]) -> None:
    """The same field rules as `check_jsonl`, for JSONL too large to parse in Python (a
    ready manifest of millions of rows): DuckDB reads each field as JSON and names the
    first record whose field has the wrong JSON type or range; that one field is then
    parsed here to say why. A compressed file is first read to its end in Python, so the
    decompressor verifies it. Nesting cannot hurt here: DuckDB's parser does not recurse."""
    if is_compressed(path):
        verify_compressed(path)
    columns = ", ".join(f"{name}: 'JSON'" for name in fields)
    flags = ", ".join(f"CASE WHEN {_bad_json(name, kind)} THEN '{name}' END"
                      for name, kind in fields.items())
    found = con.execute(
        f"SELECT record, coalesce({flags}) AS field FROM (SELECT *, row_number() OVER () "
        f"AS record FROM read_json(?, format = 'newline_delimited', columns = {{{columns}}})) "
        f"WHERE field IS NOT NULL ORDER BY record LIMIT 1", [str(path)]).fetchone()
    if found is None:
        return
    record, name = found
    text = con.execute(
        f"SELECT CAST({name} AS VARCHAR) FROM (SELECT *, row_number() OVER () AS record FROM "
        f"read_json(?, format = 'newline_delimited', columns = {{{columns}}})) "
        "WHERE record = ?", [str(path), record]).fetchone()[0]
    where = f"record {record}"
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except _NotANumber as exc:
        raise IngestRuleError(path, "not-a-number", f"{exc.args[0]} is not a JSON number",
                              where=where) from exc
    _check_field(path, where, name, fields[name], {name: value})
    raise IngestRuleError(path, "value-type", f"`{name}` holds {text[:40]!r}", where=where)


def _bad_json(name: str, kind: str) -> str:
    """True when a JSON field is present, not null, and not of `kind` (or out of range)."""
    typ = f"json_type({name})"
    if kind in (STRING, TEXT):
        return f"({name} IS NOT NULL AND {typ} <> 'VARCHAR')"
    return (f"({name} IS NOT NULL AND ({typ} NOT IN ('BIGINT', 'UBIGINT') "
            f"OR TRY_CAST({name} AS BIGINT) IS NULL))")


def verify_compressed(path: Path) -> None:
    """Read a .gz or .zst file to its end: the decompressor checks CRC, length, frames."""
    from lineage.ingest.inputs import open_text_stream

    try:
        with open_text_stream(path) as handle:
            while handle.read(1 << 20):
                pass
    except IngestRuleError:
        raise
    except (OSError, EOFError) as exc:
        if isinstance(exc, PermissionError):
            raise os_error(path, exc) from exc
        raise compressed_error(path, exc) from exc
    except Exception as exc:  # zstandard.ZstdError is not an OSError
        if type(exc).__name__ == "ZstdError":
            raise compressed_error(path, exc) from exc
        raise
