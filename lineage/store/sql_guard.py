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

Resources. DuckDB's `memory_limit` (three quarters of `max_memory`) makes hash tables,
sorts and aggregates fail early, and an interrupt from a timer stops a query between two
chunks of rows. Neither reaches inside one call of a scalar function: `repeat('x', 3e9)`
allocates outside DuckDB's accounting and runs to its end (25-32 s, 3-6 GB, measured).
What does is the process: `process_bounds` limits its data segment (RLIMIT_DATA, so such
an allocation fails at once) and ends it shortly after the time limit. The command line
runs a query in a process it may end; a server runs each in a process of its own
(lineage/serve/sql_process.py). docs/store.md, "SQL", says what each one guarantees.
"""

from __future__ import annotations

import re
import resource
import threading
import time
from collections.abc import Callable, Iterator, Sequence
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
DEFAULT_MAX_MEMORY = 1 << 30  # bytes; the CLI's --max-memory
# DuckDB's share of max_memory: the rest is room for what it does not count (strings a
# function makes, the rows' Python copies) under the process's limit.
DUCKDB_SHARE = 0.75
# A process past its time limit by this much is ended: the interrupt did not stop it.
GRACE_SECONDS = 2.0

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


# Receives each batch of a streamed result: (column names, rows as DuckDB gives them).
RowSink = Callable[[list[str], list[tuple[Any, ...]]], None]
_STREAM_BATCH = 10_000


def run_guarded_sql(
    store: BaseStore, sql: str, *, timeout: float | None = DEFAULT_TIMEOUT,
    max_rows: int | None = DEFAULT_MAX_ROWS, max_memory: int | None = DEFAULT_MAX_MEMORY,
    on_rows: RowSink | None = None,
) -> QueryResult:
    """Run user SQL in a guarded session: the one entry point for untrusted queries.

    `timeout` (seconds, from the call: opening, checking the parts the query names,
    running and fetching) interrupts the query; `max_rows` keeps the first rows and marks
    the result `truncated`; `max_memory` (bytes) bounds what DuckDB counts (a quarter of
    it is left for what it does not, see `process_bounds`). None (or 0) means no limit.
    A refused or failing query raises `UsageError`, a damaged part `StoreError`, each with
    a one-line message; the store is never changed. With `on_rows`, the rows are handed
    to it in batches as DuckDB gives them (`on_rows(columns, rows)`), never all held, and
    the result holds none.
    """
    import duckdb

    deadline = time.monotonic() + timeout if timeout else None
    with guarded_connection(store, max_memory=max_memory) as con, \
            _interrupt_at(con, deadline):
        try:
            statements = reading_statements(con, sql)
            _check_named_tables(store, con, sql, deadline)
            for statement in statements[:-1]:
                con.execute(statement.query)
            cursor = con.execute(statements[-1].query)
            if on_rows is not None:
                return _stream(cursor, cursor.description or [], max_rows, on_rows)
            return _fetch(cursor, cursor.description or [], max_rows)
        except duckdb.InterruptException as exc:
            raise UsageError(time_limit_message(timeout)) from exc
        except (duckdb.OutOfMemoryException, MemoryError) as exc:
            raise UsageError(memory_limit_message(max_memory)) from exc
        except duckdb.InvalidInputException as exc:
            raise _damage_or_failure(store, exc) from exc
        except duckdb.PermissionException as exc:
            raise UsageError(f"SQL refused, the session is read-only and reads only "
                             f"the store: {_first_line(exc)}") from exc
        except duckdb.Error as exc:
            raise UsageError(f"SQL failed: {_first_line(exc)}") from exc


def time_limit_message(timeout: float | None) -> str:
    return f"SQL stopped after the {timeout or 0:g} s time limit (--timeout)"


def memory_limit_message(max_memory: int | None) -> str:
    return (f"SQL stopped at the {_size(max_memory or 0)} memory limit (--max-memory): "
            "the query needs more memory than that")


@contextmanager
def guarded_connection(store: BaseStore, *, max_memory: int | None = None
                       ) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection to the catalog (read-only) with the bulk tables as views, locked down;
    DuckDB may use `DUCKDB_SHARE` of `max_memory` bytes.

    Close it after one query: the views hold the list of parts at opening time.
    """
    store.require_catalog()
    config: dict[str, Any] = dict(_STARTUP_CONFIG)
    if max_memory:
        config["memory_limit"] = f"{int(max_memory * DUCKDB_SHARE)}B"
    con = open_catalog_read_only(store.catalog_path, config)
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


def _check_named_tables(store: BaseStore, con: duckdb.DuckDBPyConnection, sql: str,
                        deadline: float | None) -> None:
    """Every byte of the parts of each bulk table the query names, against the catalog.

    A query reads the tables it names, usually whole, so hashing their parts first costs
    about what the scan does, and an answer never comes silently from a damaged part
    (lineage/store/part_check.py). A table is taken as named when its name appears in the SQL as
    a word (over-counting only costs time). The time limit is checked between parts.
    """
    import duckdb

    from lineage.store.part_check import check_part

    named = [t for t in BULK_TABLES if re.search(rf"\b{t}\b", sql, flags=re.IGNORECASE)]
    for table in named:
        rows = con.execute("SELECT path, n_bytes, sha256, row_groups FROM parquet_files "
                           "WHERE table_name = ? ORDER BY path", [table]).fetchall()
        for path, n_bytes, sha256, row_groups in rows:
            if deadline is not None and time.monotonic() > deadline:
                raise duckdb.InterruptException("the time limit passed checking the parts")
            check_part(store.root, path, n_bytes, sha256, row_groups)


@contextmanager
def _interrupt_at(con: duckdb.DuckDBPyConnection, deadline: float | None) -> Iterator[None]:
    """Interrupt `con` at `deadline`: DuckDB stops between two chunks of rows."""
    if deadline is None:
        yield
        return
    timer = threading.Timer(max(0.0, deadline - time.monotonic()), con.interrupt)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


@contextmanager
def process_bounds(*, max_memory: int | None, timeout: float | None,
                   on_overrun: Callable[[str], None],
                   grace: float = GRACE_SECONDS) -> Iterator[None]:
    """Bounds on this process while it runs one guarded query, for a process that may be
    ended (the command line's own, a server's SQL process).

    Memory: the data segment (RLIMIT_DATA: heap and private mappings, where DuckDB and
    Python allocate) may grow by `max_memory` bytes from its size now, so an allocation
    past it fails at once, inside a function too, instead of after the fact. Time: if the
    query is still running `grace` seconds after `timeout` (the interrupt could not stop
    it), `on_overrun` is called from a watchdog thread with the time-limit message; it
    is expected to end the process. Both are lifted on leaving. The memory bound needs
    Linux's /proc (elsewhere only DuckDB's own limit holds).
    """
    import duckdb  # noqa: F401  (loaded first: what importing them maps is not the query's)
    import pyarrow.dataset  # noqa: F401

    lowered = _lower_data_limit(max_memory) if max_memory else None
    watchdog = None
    if timeout:
        watchdog = threading.Timer(timeout + grace, on_overrun,
                                   [time_limit_message(timeout)])
        watchdog.daemon = True
        watchdog.start()
    try:
        yield
    finally:
        if watchdog is not None:
            watchdog.cancel()
        if lowered is not None:
            resource.setrlimit(resource.RLIMIT_DATA, lowered)


def _lower_data_limit(max_memory: int) -> tuple[int, int] | None:
    """Lower the soft RLIMIT_DATA to the data segment's size + `max_memory`; the limits
    before, to restore, or None where the size cannot be read."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            line = next(line for line in status if line.startswith("VmData:"))
    except (OSError, StopIteration):
        return None
    before = resource.getrlimit(resource.RLIMIT_DATA)
    soft = int(line.split()[1]) * 1024 + max_memory
    for bound in before:
        if bound != resource.RLIM_INFINITY:
            soft = min(soft, bound)
    resource.setrlimit(resource.RLIMIT_DATA, (soft, before[1]))
    return before


def _size(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n:,} bytes"


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


def _stream(cursor: duckdb.DuckDBPyConnection, description: list[Any],
            max_rows: int | None, on_rows: RowSink) -> QueryResult:
    """The rows to `on_rows` a batch at a time; the result keeps the columns only."""
    columns = [d[0] for d in description]
    types = tuple(str(d[1]) for d in description)
    sent = 0
    while True:
        want = _STREAM_BATCH if not max_rows else min(_STREAM_BATCH, max_rows + 1 - sent)
        rows = cursor.fetchmany(want)
        if max_rows and sent + len(rows) > max_rows:
            on_rows(columns, rows[:max_rows - sent])
            return QueryResult(columns, [], truncated=True, max_rows=max_rows,
                               column_types=types)
        if rows or not sent:
            on_rows(columns, rows)
        sent += len(rows)
        if len(rows) < want:
            return QueryResult(columns, [], max_rows=max_rows or None, column_types=types)


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
