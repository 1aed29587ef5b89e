"""The store: a directory holding `catalog.duckdb` and the Parquet files it lists.

DuckDB lets one process hold a database file read-write and then refuses every other
open, read-only ones included. So writers open the catalog only for the short final
commit, and both readers and writers retry a held lock with bounded backoff before
reporting "store busy (pid ...)". Readers open the catalog read-only, attached to an
in-memory database that exposes each Parquet table as a view over exactly the files
the catalog lists, so a reader never sees a half-finished ingest.
"""

from __future__ import annotations

import itertools
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from lineage.errors import CommitUnknownError, StoreBusyError, StoreError
from lineage.schemas import BULK_TABLES, SCHEMA_VERSION, catalog_ddl, migrations
from lineage.store import faults
from lineage.store.notices import add_notice
from lineage.store.notices import take_notices as take_notices  # where callers import it
from lineage.store.part_check import require_plain

if TYPE_CHECKING:
    import duckdb

    from lineage.store.answers import StoreInit
    from lineage.store.arrays_use import KeptArrays
    from lineage.store.kept_reads import KeptReads, Recorder
    from lineage.store.lookup_copy import LookupCopies
    from lineage.store.memo import CatalogMemo


STORE_ENV = "LINEAGE_STORE"
DEFAULT_STORE = "lineage-store"
BUSY_TIMEOUT_ENV = "LINEAGE_BUSY_TIMEOUT"
DEFAULT_BUSY_TIMEOUT = 10.0
CATALOG_NAME = "catalog.duckdb"

_LOCK_PID = re.compile(r"\(PID (\d+)\)")
T = TypeVar("T")


def resolve_store_path(path: str | os.PathLike[str] | None = None) -> Path:
    """The store a command means: the argument, else $LINEAGE_STORE, else ./lineage-store."""
    if path is not None and str(path) != "":
        return Path(path)
    return Path(os.environ.get(STORE_ENV) or DEFAULT_STORE)


def busy_timeout() -> float:
    raw = os.environ.get(BUSY_TIMEOUT_ENV)
    try:
        return float(raw) if raw else DEFAULT_BUSY_TIMEOUT
    except ValueError:
        return DEFAULT_BUSY_TIMEOUT


class BaseStore:
    """A store's directory and its catalog connections, without the questions.

    The question methods live on `lineage.Store` (lineage/api.py), a subclass, so the
    store layer never imports the layers above it.
    """

    # Catalog rows kept between questions (lineage/store/memo.py): only a reader of a
    # fixed copy of the catalog has them; a store that reads the file keeps nothing.
    catalog_memo: CatalogMemo | None = None
    # The lookup tables' parts as IPC batches (lineage/store/lookup_copy.py): only a
    # long-running reader given them at start-up has them.
    lookup_copies: LookupCopies | None = None
    # The lookup arrays files, each checked whole once (lineage/store/arrays_use.py):
    # only a long-running reader has them.
    kept_arrays: KeptArrays | None = None
    # The lean command line's catalog reads (lineage/store/kept_reads.py): reads kept from
    # an earlier lookup, answering without DuckDB, or a recorder of what DuckDB answers.
    catalog_reads: KeptReads | Recorder | None = None

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.root)!r})"

    @property
    def catalog_path(self) -> Path:
        return self.root / CATALOG_NAME

    @property
    def tables_dir(self) -> Path:
        return self.root / "tables"

    @property
    def staging_dir(self) -> Path:
        return self.root / "staging"

    def table_dir(self, table: str) -> Path:
        return self.tables_dir / table

    # -- connections -----------------------------------------------------------------

    @contextmanager
    def writer(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """The catalog opened read-write inside one transaction; commit on clean exit.

        Hold it for milliseconds: do reading, hashing and Parquet writing before.

        The catalog is attached to the process's one DuckDB instance, like a reader's, and
        detached on exit (which writes the commit from DuckDB's log into the file and
        releases the lock): starting an instance of its own cost each write 30-40 ms.

        The COMMIT is the commit (docs/store.md, "What a commit is"): once it returns, the
        transaction is in `catalog.duckdb.wal`, which every later open replays. Folding
        the log into the file at detach can still fail (a full disk); that does not undo
        the commit, so it is not raised: the next write folds it in, and `take_notices()`
        says it is pending.
        """
        cursor, alias = _attach(self.catalog_path, writable=True)
        token = os.urandom(8).hex()
        committed = False
        try:
            try:
                cursor.execute("BEGIN TRANSACTION")
                _ensure_schema(cursor, self.catalog_path, migrate=True, schema=f"{alias}.main")
                yield cursor
                # A mark only this transaction writes: if its COMMIT fails, reading the
                # catalog again tells whether it committed after all.
                cursor.execute("INSERT OR REPLACE INTO schema_info VALUES (?, ?)",
                               [LAST_COMMIT, token])
                faults.reach("catalog-commit")
                committed = _commit(cursor, self.catalog_path, token)
            except BaseException:
                if not committed:
                    _rollback_quietly(cursor)
                raise
        finally:
            _detach(cursor, alias, self.catalog_path, committed=committed)

    @contextmanager
    def reader(self, *, views: bool = True) -> Iterator[duckdb.DuckDBPyConnection]:
        """An in-memory connection with the catalog attached read-only and bulk views.

        Without views (what the query functions use), the connection is a cursor of one
        process-wide DuckDB instance and the catalog is attached under a fresh name:
        starting DuckDB costs 30-40 ms, attaching ~1 ms, so repeated lookups stay cheap.
        The catalog is detached on exit, which releases its lock for writers.
        """
        self.require_catalog()
        reads = self.catalog_reads
        if reads is not None:
            if not views:
                with reads.reader(marked_cursor(self.catalog_path)) as kept:
                    yield cast("duckdb.DuckDBPyConnection", kept)
                return
            reads.not_recorded()  # the bulk views are DuckDB's alone
        import duckdb

        if not views:
            with _attached_cursor(self.catalog_path) as (cursor, schema):
                _ensure_schema(cursor, self.catalog_path, migrate=False, schema=schema)
                yield cursor
            return
        con = duckdb.connect(":memory:")
        try:
            _retry_locked(self.catalog_path, lambda: _attach_read_only(con, self.catalog_path))
            con.execute("SET search_path = 'memory.main,catalog.main'")
            _ensure_schema(con, self.catalog_path, migrate=False, schema="catalog.main")
            if views:
                self._create_bulk_views(con)
            yield con
        finally:
            con.close()

    def catalog_copy(self) -> duckdb.DuckDBPyConnection:
        """An in-memory copy of the catalog, with the bulk views, for a long-lived reader
        (`lineage serve`): the catalog file is locked only while it is copied, so writers
        are never held off between questions. The caller closes the connection."""
        import duckdb

        self.require_catalog()
        con = duckdb.connect(":memory:")
        try:
            path = str(self.catalog_path)
            _retry_locked(self.catalog_path,
                          lambda: con.execute("ATTACH ? AS source (READ_ONLY)", [path]))
            try:
                _ensure_schema(con, self.catalog_path, migrate=False, schema="source.main")
                con.execute("COPY FROM DATABASE source TO memory")
            finally:
                con.execute("DETACH source")  # releases the lock for writers
            self._create_bulk_views(con)
        except BaseException:
            con.close()
            raise
        return con

    def registered_files(self, con: duckdb.DuckDBPyConnection, table: str) -> list[str]:
        rows = con.execute(
            "SELECT path FROM parquet_files WHERE table_name = ? ORDER BY path", [table]
        ).fetchall()
        return [row[0] for row in rows]

    def _create_bulk_views(self, con: duckdb.DuckDBPyConnection) -> None:
        import duckdb

        for table, columns in BULK_TABLES.items():
            files = self.registered_files(con, table)
            if files:
                listed = ", ".join(sql_text(path) for path in part_paths(self.root, files))
                body = f"SELECT * FROM read_parquet([{listed}])"
            else:
                cols = ", ".join(f"NULL::{kind} AS {name}" for name, kind in columns.items())
                body = f"SELECT {cols} WHERE false"
            try:
                con.execute(f"CREATE VIEW memory.main.{table} AS {body}")
            except duckdb.Error as exc:
                first = str(exc).strip().splitlines()[0]
                raise StoreError(
                    f"{self.root}: the {table} table cannot be read ({first}); "
                    "run `lineage store verify`"
                ) from exc

    def require_catalog(self) -> None:
        if not self.catalog_path.is_file():
            raise StoreError(
                f"no lineage store at {self.root} (missing {CATALOG_NAME}): "
                "run `lineage init` or pass --store"
            )


def init_store(path: str | os.PathLike[str]) -> StoreInit:
    """Create a store (idempotent): the directory, its folders and an empty catalog."""
    from lineage.store.durable import disk_full_guard

    with disk_full_guard():
        return _init_store(path)


def _init_store(path: str | os.PathLike[str]) -> StoreInit:
    from lineage.store.answers import StoreInit

    store = BaseStore(path)
    if store.root.exists() and not store.root.is_dir():
        raise StoreError(f"{store.root}: exists and is not a directory")
    store.root.mkdir(parents=True, exist_ok=True)
    store.tables_dir.mkdir(exist_ok=True)
    store.staging_dir.mkdir(exist_ok=True)
    if store.catalog_path.exists():
        before = _stored_version(store.catalog_path)
        with store.writer():
            pass  # the writer checks the version and applies pending migrations
        return StoreInit(str(store.root), created=False, schema_version=SCHEMA_VERSION,
                          migrated_from=before if before < SCHEMA_VERSION else None)
    temp = store.root / f".tmp-{os.getpid()}-{CATALOG_NAME}"
    for leftover in (temp, temp.with_name(temp.name + ".wal")):
        leftover.unlink(missing_ok=True)
    from lineage.store.durable import publish

    try:
        with _attached_cursor(temp, writable=True) as (con, _):  # detached: all in the file
            con.execute(catalog_ddl())
            con.execute(
                "INSERT INTO schema_info VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)]
            )
        publish(temp, store.catalog_path)  # a crash mid-init leaves no half-made catalog
    except BaseException:
        for leftover in (temp, temp.with_name(temp.name + ".wal")):
            leftover.unlink(missing_ok=True)
        raise
    return StoreInit(str(store.root), created=True, schema_version=SCHEMA_VERSION)


def _stored_version(path: Path) -> int:
    with _attached_cursor(path) as (con, schema):
        try:
            row = con.execute(
                f"SELECT value FROM {schema}.schema_info WHERE key = 'schema_version'",
            ).fetchone()
        except Exception:  # not a lineage catalog: the writer says so
            return int(SCHEMA_VERSION)
    return int(row[0]) if row else 0


# -- internals ---------------------------------------------------------------------------


_SHARED: list[duckdb.DuckDBPyConnection] = []  # one warm DuckDB instance per process
_SHARED_PID: list[int] = [0]  # a forked child must not reuse its parent's instance
_SHARED_LOCK = threading.Lock()
_ALIASES = itertools.count()
LAST_COMMIT = "last_commit"  # schema_info's key for the mark of the last commit


def shared_instance_started() -> bool:
    """Whether this process has started its DuckDB instance (which may hold the catalog's
    lock: a lock taken on the file by other means would be released with it)."""
    return bool(_SHARED)


def _shared_instance() -> duckdb.DuckDBPyConnection:
    import duckdb

    with _SHARED_LOCK:
        if not _SHARED or os.getpid() != _SHARED_PID[0]:
            _SHARED[:] = [duckdb.connect(":memory:")]
            _SHARED_PID[:] = [os.getpid()]
        return _SHARED[0]



@contextmanager
def _attached_cursor(path: Path, *, writable: bool = False,
                     ) -> Iterator[tuple[duckdb.DuckDBPyConnection, str]]:
    """A cursor of the process's DuckDB instance with the catalog at `path` attached under
    a fresh name, where unqualified names are found, and that database's main schema.
    Detaching it on exit releases the file's lock (and a writer's log is written into the
    file: a failure to do so is raised, as nothing here committed a transaction)."""
    cursor, alias = _attach(path, writable=writable)
    try:
        yield cursor, f"{alias}.main"
    finally:
        _detach(cursor, alias, path, committed=False)


def _attach(path: Path, *, writable: bool) -> tuple[duckdb.DuckDBPyConnection, str]:
    """A new cursor of the shared instance with `path` attached under a fresh alias."""
    cursor = _shared_instance().cursor()
    alias = f"catalog_{os.getpid()}_{next(_ALIASES)}"
    mode = "" if writable else " (READ_ONLY)"
    try:
        _retry_locked(path, lambda: cursor.execute(f"ATTACH ? AS {alias}{mode}", [str(path)]))
        if writable:
            cursor.execute(f"USE {alias}")  # where unqualified names are, and are created
            _forget_kept_reads(path)
        else:
            cursor.execute(f"SET search_path = '{alias}.main'")
    except BaseException:
        _detach(cursor, alias, path, committed=False)
        raise
    return cursor, alias


@contextmanager
def marked_cursor(path: Path) -> Iterator[tuple[duckdb.DuckDBPyConnection, str | None]]:
    """A reader's cursor of the catalog at `path`, with the mark of its last commit (each
    commit writes a new one: lineage/store/kept_reads.py tells states apart by it)."""
    with _attached_cursor(path) as (cursor, schema):
        _ensure_schema(cursor, path, migrate=False, schema=schema)
        row = cursor.execute(f"SELECT value FROM {schema}.schema_info WHERE key = ?",
                             [LAST_COMMIT]).fetchone()
        yield cursor, None if row is None else str(row[0])


def _forget_kept_reads(path: Path) -> None:
    """Remove the lookups' kept reads of the catalog (lineage/store/kept_reads.py) before
    anything in it changes: a writer that cannot do so writes nothing."""
    from lineage.store.kept_reads import forget_reads, reads_path

    try:
        forget_reads(path)
    except OSError as exc:
        raise StoreError(f"{reads_path(path)}: cannot be removed ({exc.strerror}); "
                         "nothing was written") from exc


def _commit(cursor: duckdb.DuckDBPyConnection, path: Path, token: str) -> bool:
    """COMMIT; True once committed. A COMMIT that fails may still have reached the log
    (written, then its sync failed), and every later open would replay it. So the
    catalog is read again in a fresh instance, and the transaction's mark decides: True
    when it is there, StoreError ("nothing was committed") when it is not, and
    CommitUnknownError when the catalog cannot be read to tell."""
    import duckdb

    try:
        cursor.execute("COMMIT")
        return True
    except duckdb.Error as exc:  # e.g. the log could not be written or synced
        failure = exc
    try:
        cursor.close()
    except Exception:
        pass
    _drop_shared_instance()  # DuckDB invalidates an instance after a fatal I/O error
    try:
        with _attached_cursor(path) as (con, schema):
            rows = con.execute(f"SELECT value FROM {schema}.schema_info WHERE key = ?",
                               [LAST_COMMIT]).fetchall()
    except Exception as exc:
        raise CommitUnknownError(path.parent, failure) from exc
    if rows and rows[0][0] == token:
        return True
    first = (str(failure).strip().splitlines() or [type(failure).__name__])[0]
    raise StoreError(f"{path}: could not commit ({first}): nothing was committed; "
                     "re-run once the disk is writable") from failure


def _detach(cursor: duckdb.DuckDBPyConnection, alias: str, path: Path, *,
            committed: bool) -> None:
    """Detach `alias` (a writer's detach folds DuckDB's log into the file) and close the
    cursor. A detach that fails after a COMMIT only delays that folding: the log keeps the
    commit and every open replays it, so it is noted, not raised. Any other failure of the
    instance (DuckDB invalidates an instance after a fatal I/O error) drops it, so this
    process's next open starts a fresh one."""
    try:
        cursor.execute("USE memory")  # the attached catalog cannot be detached while in use
        cursor.execute(f"DETACH DATABASE IF EXISTS {alias}")
    except Exception as exc:
        _drop_shared_instance()
        if committed:
            add_notice(deferred_checkpoint_notice(path, exc))
        elif sys.exc_info()[0] is None:  # nothing else is on its way up: say this one
            raise _open_error(path, exc) from exc
    finally:
        try:
            cursor.close()
        except Exception:
            pass  # an invalidated instance's cursor: dropped with it


def deferred_checkpoint_notice(path: Path, exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    plain = ("CHECKPOINT during DETACH failed" in first or "closed" in first.lower())
    why = "" if plain else f" ({first})"
    return (f"{path}: committed, but the commit could not be moved from {path.name}.wal "
            f"into {path.name}{why}; every open replays the log, and the next write (or "
            "`lineage store repair`) moves it")


def _drop_shared_instance() -> None:
    with _SHARED_LOCK:
        dropped, _SHARED[:] = list(_SHARED), []
    for con in dropped:
        try:
            con.close()
        except Exception:
            pass


def _connect(path: Path, read_only: bool,
             config: dict[str, Any] | None = None) -> duckdb.DuckDBPyConnection:
    import duckdb

    return duckdb.connect(str(path), read_only=read_only, config=config or {})


def open_catalog_read_only(path: Path, config: dict[str, Any]) -> duckdb.DuckDBPyConnection:
    """The catalog as a connection's only database, read-only, with startup `config`;
    retries a held lock and checks the schema version like every reader."""
    con = _retry_locked(path, lambda: _connect(path, True, config))
    try:
        _ensure_schema(con, path, migrate=False)
    except BaseException:
        con.close()
        raise
    return con


def _attach_read_only(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    con.execute("ATTACH ? AS catalog (READ_ONLY)", [str(path)])


def _retry_locked(path: Path, action: Callable[[], T]) -> T:
    """Run `action`, retrying while another process holds the catalog's file lock."""
    import duckdb

    deadline = time.monotonic() + busy_timeout()
    started = time.monotonic()
    delay = 0.01
    while True:
        try:
            return action()
        except duckdb.IOException as exc:
            message = str(exc)
            if "Could not set lock" not in message:
                raise _open_error(path, exc) from exc
            if time.monotonic() >= deadline:
                match = _LOCK_PID.search(message)
                pid = int(match.group(1)) if match else None
                raise StoreBusyError(path, pid, time.monotonic() - started) from exc
            time.sleep(delay)
            delay = min(delay * 2, 0.25)
        except duckdb.Error as exc:
            raise _open_error(path, exc) from exc


def _open_error(path: Path, exc: Exception) -> StoreError:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    wal = path.with_name(path.name + ".wal")
    hint = (
        f"; keep {wal.name} (it may hold committed data) and restore the store from a copy"
        if wal.exists()
        else ""
    )
    return StoreError(f"{path}: catalog cannot be opened: {first}{hint}")


def _ensure_schema(
    con: duckdb.DuckDBPyConnection, path: Path, *, migrate: bool, schema: str = "main"
) -> None:
    try:
        rows = con.execute(  # fetched to the end: the connection may run more queries
            f"SELECT value FROM {schema}.schema_info WHERE key = 'schema_version'"
        ).fetchall()
    except Exception as exc:  # duckdb.CatalogException: not a lineage catalog
        raise StoreError(f"{path}: not a lineage catalog (no schema_info table)") from exc
    version = int(rows[0][0]) if rows else 0
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{path}: store schema v{version} is newer than this lineage (v{SCHEMA_VERSION}); "
            "upgrade lineage"
        )
    if version < SCHEMA_VERSION:
        if not migrate:
            raise StoreError(
                f"{path}: store schema v{version} is older than v{SCHEMA_VERSION}; "
                "run `lineage store migrate`"
            )
        apply_migrations(con, version)


def apply_migrations(con: duckdb.DuckDBPyConnection, version: int) -> int:
    """Apply migrations above `version` inside the caller's transaction."""
    for target, script in migrations().items():
        if target > version:
            con.execute(script)
            version = target
    con.execute(
        "UPDATE schema_info SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION)]
    )
    return version


def _rollback_quietly(con: duckdb.DuckDBPyConnection) -> None:
    try:
        con.execute("ROLLBACK")
    except Exception:
        pass  # the transaction may never have started, or is already gone


def part_path(root: Path, relative: str) -> Path:
    """The absolute path of a registered part; catalog paths are checked to be plain."""
    return Path(part_paths(root, [relative])[0])


def part_paths(root: Path, relatives: Iterable[str]) -> list[str]:
    """The absolute paths of registered parts, as text (what DuckDB and pyarrow take).
    Made absolute without asking the file system and without pathlib: resolving links
    took a `stat` per folder of each path, and with pathlib a query over a table of
    1,000 parts spent most of its time naming them."""
    base = os.path.abspath(root)
    return [f"{base}/{require_plain(root, relative)}" for relative in relatives]


def sql_text(text: str) -> str:
    """`text` as an SQL string literal (where a statement takes no parameters: a view's
    definition, a list of files)."""
    return "'" + text.replace("'", "''") + "'"
