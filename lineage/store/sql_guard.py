"""The guarded DuckDB session that runs user SQL (`lineage sql`, `Store.sql`, a server).

The guard holds by construction, not by recognising bad statements:

- the session's only database is the catalog, opened read-only: there is no writable
  database to CREATE, INSERT or ATTACH ':memory:' into;
- external access is off, so DuckDB opens no file at all (no COPY ... TO, EXPORT, ATTACH,
  read_text, read_csv, glob, INSTALL, secrets directory); the Parquet views are Arrow
  datasets that Python opens read-only and DuckDB scans in memory, so even the store's
  own parts are not files DuckDB could write;
- extensions are neither installed nor loaded automatically, community extensions and
  extension repositories are refused, spilling to a temporary directory is off;
- the configuration is locked after all of this, so SET, RESET and PRAGMA cannot undo it.

What remains writable is the connection's own temporary schema, which lives in memory
and dies with the connection (one per query). A statement check refuses statements that
would use it (CREATE TEMP ...), also inside EXPLAIN ANALYZE, so that every refusal says
"read-only" in one line; it is a courtesy, not the guard.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from lineage.errors import LineageError, StoreError, UsageError
from lineage.schemas import BULK_TABLES
from lineage.store.base import BaseStore, open_catalog_read_only, part_paths
from lineage.store.query import QueryResult

if TYPE_CHECKING:
    import duckdb

DEFAULT_TIMEOUT = 60.0  # seconds; the CLI's --timeout
DEFAULT_MAX_ROWS = 10_000  # the CLI's --max-rows

_SCAN_FAILED = re.compile(
    r".*reading the stream registered as '(\w+)' failed: (?:\w+: )?(.*)$")
READING_STATEMENTS = frozenset({"SELECT", "EXPLAIN", "PRAGMA", "DESCRIBE", "SHOW", "SUMMARIZE"})

# Fixed when the connection starts: before any user SQL, and before the lock.
_STARTUP_CONFIG = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "allow_extension_repositories": "forbidden",
    "allow_persistent_secrets": False,
    "temp_directory": "",  # a read-only catalog would otherwise spill next to itself
}


def run_guarded_sql(
    store: BaseStore, sql: str, *, timeout: float | None = DEFAULT_TIMEOUT,
    max_rows: int | None = DEFAULT_MAX_ROWS,
) -> QueryResult:
    """Run user SQL in a guarded session: the one entry point for untrusted queries.

    `timeout` (seconds) interrupts the query; `max_rows` keeps the first rows and marks
    the result `truncated`. None (or 0) means no limit. A refused or failing query raises
    `UsageError`, a damaged part `StoreError`, each with a one-line message; the store is
    never changed.
    """
    import duckdb

    with guarded_connection(store) as con:
        statements = reading_statements(con, sql)
        _check_named_tables(store, con, sql)
        with _interrupt_after(con, timeout):
            try:
                for statement in statements[:-1]:
                    con.execute(statement.query)
                cursor = con.execute(statements[-1].query)
                return _fetch(cursor, cursor.description or [], max_rows)
            except duckdb.InterruptException as exc:
                raise UsageError(
                    f"SQL stopped after the {timeout:g} s time limit (--timeout)") from exc
            except duckdb.InvalidInputException as exc:
                raise _damage_or_failure(store, exc) from exc
            except duckdb.PermissionException as exc:
                raise UsageError(f"SQL refused, the session is read-only and reads only "
                                 f"the store: {_first_line(exc)}") from exc
            except duckdb.Error as exc:
                raise UsageError(f"SQL failed: {_first_line(exc)}") from exc


@contextmanager
def guarded_connection(store: BaseStore) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection to the catalog (read-only) with the bulk tables as views, locked down.

    Close it after one query: the views hold the list of parts at opening time.
    """
    store._require_catalog()
    con = open_catalog_read_only(store.catalog_path, _STARTUP_CONFIG)
    try:
        _register_bulk_views(store, con)
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
        yield con
    finally:
        con.close()


def reading_statements(con: duckdb.DuckDBPyConnection, sql: str) -> list[duckdb.Statement]:
    """The statements of `sql`, refused unless each one (and what it explains) reads."""
    statements = _parse(con, sql)
    if not statements:
        raise UsageError("no SQL statement given")
    for statement in statements:
        _require_reading(con, statement)
    return statements


def _require_reading(con: duckdb.DuckDBPyConnection, statement: duckdb.Statement) -> None:
    kind = statement.type.name
    if kind not in READING_STATEMENTS:
        raise UsageError(f"read-only: {kind} statements are not allowed here")
    if kind == "EXPLAIN":
        explained = _explained_text(statement.query)
        inner = _parse(con, explained) if explained else []
        if len(inner) != 1:
            raise UsageError("read-only: EXPLAIN must explain one statement")
        _require_reading(con, inner[0])


def _explained_text(query: str) -> str:
    """The statement after `EXPLAIN [ANALYZE] [(options)]`, found with DuckDB's tokenizer
    (so comments, case and whitespace tricks are read the way DuckDB reads them)."""
    import duckdb

    tokens = duckdb.tokenize(query)
    index, depth = 1, 0  # token 0 is EXPLAIN
    while index < len(tokens):
        start, kind = tokens[index]
        word = _token_text(query, tokens, index).upper()
        if kind == duckdb.token_type.comment:
            pass
        elif word == "(":
            depth += 1
        elif word == ")":
            depth -= 1
        elif depth == 0 and word not in {"ANALYZE", "ANALYSE"}:
            return query[start:]
        index += 1
    return ""


def _token_text(query: str, tokens: Sequence[tuple[int, object]], index: int) -> str:
    end = tokens[index + 1][0] if index + 1 < len(tokens) else len(query)
    return query[tokens[index][0]:end].strip()


def _parse(con: duckdb.DuckDBPyConnection, sql: str) -> list[duckdb.Statement]:
    import duckdb

    try:
        return con.extract_statements(sql)
    except duckdb.Error as exc:
        raise UsageError(f"SQL does not parse: {_first_line(exc)}") from exc


def _register_bulk_views(store: BaseStore, con: duckdb.DuckDBPyConnection) -> None:
    """Each bulk table as an Arrow dataset over exactly the parts the catalog lists."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    for table, columns in BULK_TABLES.items():
        files = part_paths(store.root, store.registered_files(con, table))
        if files:
            try:  # opens the first part for the schema, checks the others exist
                con.register(table, ds.dataset(files, format="parquet"))
            except (pa.ArrowException, OSError) as exc:
                raise _unreadable(store, table, exc) from exc
        else:
            cols = ", ".join(f"NULL::{kind} AS {name}" for name, kind in columns.items())
            con.execute(f"CREATE TEMP VIEW {table} AS SELECT {cols} WHERE false")


def _check_named_tables(store: BaseStore, con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Every byte of the parts of each bulk table the query names, against the catalog.

    A query reads the tables it names, usually whole, so hashing their parts first costs
    about what the scan does, and an answer never comes silently from a damaged part
    (lineage/store/part_check.py). A table is taken as named when its name appears in the SQL as
    a word (over-counting only costs time).
    """
    from lineage.store.part_check import check_part

    named = [t for t in BULK_TABLES if re.search(rf"\b{t}\b", sql, flags=re.IGNORECASE)]
    for table in named:
        rows = con.execute("SELECT path, n_bytes, sha256, row_groups FROM parquet_files "
                           "WHERE table_name = ? ORDER BY path", [table]).fetchall()
        for path, n_bytes, sha256, row_groups in rows:
            check_part(store.root, path, n_bytes, sha256, row_groups)


@contextmanager
def _interrupt_after(con: duckdb.DuckDBPyConnection, timeout: float | None) -> Iterator[None]:
    if not timeout:
        yield
        return
    timer = threading.Timer(timeout, con.interrupt)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _fetch(cursor: duckdb.DuckDBPyConnection, description: list[Any],
           max_rows: int | None) -> QueryResult:
    columns = [d[0] for d in description]
    types = tuple(str(d[1]) for d in description)
    if not max_rows:
        return QueryResult(columns, cursor.fetchall(), column_types=types)
    rows = cursor.fetchmany(max_rows + 1)
    truncated = len(rows) > max_rows
    return QueryResult(columns, rows[:max_rows], truncated=truncated, max_rows=max_rows,
                       column_types=types)


def _damage_or_failure(store: BaseStore, exc: Exception) -> LineageError:
    """A part that fails while a view is scanned is damage, not a bad query."""
    scan = _SCAN_FAILED.match(_first_line(exc))
    if scan:
        return _unreadable(store, scan.group(1), scan.group(2))
    return UsageError(f"SQL failed: {_first_line(exc)}")


def _unreadable(store: BaseStore, table: str, cause: Exception | str) -> StoreError:
    first = cause if isinstance(cause, str) else _first_line(cause)
    return StoreError(f"{store.root}: the {table} table cannot be read ({first}); "
                      "run `lineage store verify`")


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
