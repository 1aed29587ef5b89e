"""The catalog rows a lookup reads, kept in a file beside the catalog, so that the next
lookup process answers without starting DuckDB.

A lookup (`docs --step N --json`, `trained-on FILE --json`) reads a handful of catalog
rows: the schema version, the stream's row, the registered lookup arrays files. Importing
DuckDB and attaching the catalog to read them costs more than the rest of the answer
(the arrays files answer it). So a lookup records each query it sends the
catalog, with its parameters and the rows it returned, in `catalog.duckdb.reads.json`,
and a later lookup process gets the same rows from that file.

Why the file never describes another state of the catalog than the one on disk:

* it is written only by a process holding the catalog's shared lock (a read-only attach
  of DuckDB), from rows read under the locks of attaches that all saw the same commit
  mark (`schema_info.last_commit`, which every commit replaces) as the one held while
  writing;
* every writer removes it while holding the catalog's exclusive lock, before it changes
  anything (`base._attach`), and a writer that cannot remove it does not write;
* a reader takes the shared lock itself (an fcntl read lock, as DuckDB takes it) before
  reading the file and holds it until the answer is printed, and compares the identity,
  size and times of the catalog and its log with those recorded, which a write from
  outside this protocol changes (an older version, a copy put in place).

A query the file does not hold, a lock not granted or a file that cannot be read: the
lookup reads the catalog through DuckDB as always (and records what it read). The file
is a cache: removing it loses nothing, and `lineage store verify` does not count it.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb

READS_SUFFIX = ".reads.json"
FORMAT = "lineage-catalog-reads/1"
MAX_QUERIES = 256  # a file of the usual lookups' queries; more would be read for little
MAX_BYTES = 16 << 20  # a larger file is not read (one put there by other means)

Signature = tuple[tuple[int, int, int, int], ...]
# The catalog attached read-only (its shared lock held), with its commit mark
# (lineage.store.base.marked_cursor): given by the store, which this module does not import.
Attached = AbstractContextManager[tuple["duckdb.DuckDBPyConnection", "str | None"]]


def reads_path(catalog: Path) -> Path:
    return catalog.with_name(catalog.name + READS_SUFFIX)


def catalog_signature(catalog: str | os.PathLike[str]) -> Signature:
    """What changes when a commit lands: identity, size and times of the catalog and WAL."""
    found = []
    for path in (catalog, f"{os.fspath(catalog)}.wal"):
        try:
            st = os.stat(path)
        except FileNotFoundError:
            found.append((0, 0, 0, 0))
            continue
        found.append((st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    return tuple(found)


def forget_reads(catalog: Path) -> None:
    """Remove the kept reads of `catalog` (a writer's, under the exclusive lock), and any
    temporary file of a reader killed while writing them: readers write them only under
    the shared lock, so none is being written now."""
    target = reads_path(catalog)
    for path in [target, *target.parent.glob(f".tmp-*-{target.name}")]:
        with suppress(FileNotFoundError):
            path.unlink()


class ReadMiss(BaseException):
    """A query the kept reads do not hold. A BaseException: no question's `except
    Exception` may take it for an answer; `with_kept_reads` (lineage/store/lookup_reads.py)
    catches it and asks DuckDB."""


def _key(kind: str, sql: str, params: Any) -> str | None:
    try:
        return json.dumps([kind, sql, params], separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return None


class _NotPlain(Exception):
    """A value JSON cannot give back as it was."""


def _encoded(value: Any) -> Any:
    """`value` as JSON holds it: dicts and naive timestamps and dates tagged, so each comes
    back as the type it was (`_decoded`)."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    if isinstance(value, list):
        return [_encoded(item) for item in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"d": {k: _encoded(v) for k, v in value.items()}}
    if isinstance(value, datetime) and value.tzinfo is None:
        return {"t": value.isoformat()}
    if isinstance(value, date) and not isinstance(value, datetime):
        return {"D": value.isoformat()}
    raise _NotPlain(type(value).__name__)


def _decoded(value: Any) -> Any:
    if isinstance(value, list):
        return [_decoded(item) for item in value]
    if isinstance(value, dict):
        if "d" in value:
            return {k: _decoded(v) for k, v in value["d"].items()}
        if "t" in value:
            return datetime.fromisoformat(value["t"])
        return date.fromisoformat(value["D"])
    return value


class Recorder:
    """The queries one lookup sends the catalog through DuckDB, with their rows."""

    def __init__(self) -> None:
        self.queries: dict[str, Any] = {}
        self.marks: set[str | None] = set()
        self.complete = True  # False once a read could not be recorded

    @contextmanager
    def reader(self, attached: Attached) -> Iterator[RecordingConnection]:
        """`attached`: the catalog attached read-only, with its commit mark."""
        with attached as (cursor, mark):
            self.marks.add(mark)
            yield RecordingConnection(cursor, self)

    def not_recorded(self) -> None:
        self.complete = False

    def add(self, kind: str, sql: str, params: Any, rows: Any) -> None:
        key = _key(kind, sql, params)
        try:
            if key is None:
                raise _NotPlain("parameters")
            self.queries[key] = _encoded(rows)
        except _NotPlain:
            self.complete = False

    def keep(self, path: Path, attached: Attached) -> bool:
        """Write what was recorded beside the catalog at `path`, when every read was
        recorded and the catalog is still in the state they were read from (`attached`:
        the catalog attached read-only, with its commit mark). True when written; a
        cache, so any failure to write it is let go."""
        if not self.complete or len(self.marks) != 1 or not self.queries:
            return False
        try:
            with attached as (_, now):  # the shared lock, held while writing
                (mark,) = self.marks
                if now != mark:
                    return False  # a commit landed since: what was read is of the last state
                signature = catalog_signature(path)
                queries = dict(_kept_file(path, signature, mark) or {})
                for key, rows in self.queries.items():
                    if key in queries or len(queries) < MAX_QUERIES:
                        queries[key] = rows
                _write(reads_path(path), {"format": FORMAT, "mark": mark,
                                          "signature": signature, "queries": queries})
        except Exception:  # noqa: BLE001 - e.g. a full disk or a duckdb.Error: nothing kept,
            return False  # nothing lost
        return True


def _write(target: Path, content: dict[str, Any]) -> None:
    temp = target.with_name(f".tmp-{os.getpid()}-{target.name}")
    try:
        temp.write_text(json.dumps(content, separators=(",", ":"), allow_nan=False))
        os.replace(temp, target)
    finally:
        temp.unlink(missing_ok=True)


def _kept_file(path: Path, signature: Signature, mark: str | None) -> dict[str, Any] | None:
    """The queries of the kept reads of the catalog at `path`, if the file is of the
    catalog's state (`signature`, and `mark` when given), else None."""
    try:
        with reads_path(path).open("rb") as file:
            data = json.loads(file.read(MAX_BYTES + 1))
    except (OSError, ValueError):  # missing, unreadable, or cut at MAX_BYTES
        return None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return None
    if _signature(data.get("signature")) != signature:
        return None
    if mark is not None and data.get("mark") != mark:
        return None
    queries = data.get("queries")
    return queries if isinstance(queries, dict) else None


def _signature(value: Any) -> Signature | None:
    try:
        return tuple(tuple(int(x) for x in entry) for entry in value)  # type: ignore[misc]
    except (TypeError, ValueError):
        return None


class RecordingConnection:
    """A catalog cursor whose `execute(...).fetchall()`, `.fetchone()` and `.description`
    are recorded; anything else is passed on and makes the recording incomplete."""

    def __init__(self, cursor: duckdb.DuckDBPyConnection, recorder: Recorder) -> None:
        self._cursor = cursor
        self._recorder = recorder

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> _Recording:
        if params is None:
            self._cursor.execute(sql)
        else:
            self._cursor.execute(sql, params)
        return _Recording(self._cursor, self._recorder, sql, params)

    def __getattr__(self, name: str) -> Any:
        self._recorder.complete = False
        return getattr(self._cursor, name)


class _Recording:
    def __init__(self, cursor: duckdb.DuckDBPyConnection, recorder: Recorder, sql: str,
                 params: Any) -> None:
        self._cursor, self._recorder, self._sql, self._params = cursor, recorder, sql, params

    def fetchall(self) -> list[tuple[Any, ...]]:
        rows = self._cursor.fetchall()
        self._recorder.add("all", self._sql, self._params, [list(row) for row in rows])
        return rows

    def fetchone(self) -> tuple[Any, ...] | None:
        row = self._cursor.fetchone()
        self._recorder.add("one", self._sql, self._params, None if row is None else list(row))
        return row

    @property
    def description(self) -> Any:
        """The columns' names are kept (their types are not: a replay gives None)."""
        columns = self._cursor.description
        self._recorder.add("columns", self._sql, self._params,
                           None if columns is None else [str(c[0]) for c in columns])
        return columns

    def __getattr__(self, name: str) -> Any:
        self._recorder.complete = False
        return getattr(self._cursor, name)


class KeptReads:
    """The kept reads of a catalog, valid while the shared lock taken on opening them is
    held (`close` releases it)."""

    def __init__(self, queries: dict[str, Any], lock_fd: int) -> None:
        self._queries = queries
        self._lock_fd: int | None = lock_fd
        self.missed = False

    @classmethod
    def open(cls, catalog: Path) -> KeptReads | None:
        """The kept reads of `catalog` when they are of its current state; None when
        there are none, they are of another state, or the lock is held by a writer."""
        try:
            import fcntl
        except ImportError:  # no fcntl locks here: DuckDB's own reads only
            return None
        if not reads_path(catalog).is_file():
            return None
        try:
            fd = os.open(catalog, os.O_RDONLY)
        except OSError:
            return None
        try:
            fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # as DuckDB's read-only attach
            queries = _kept_file(catalog, catalog_signature(catalog), None)
        except OSError:
            queries = None
        if queries is None:
            os.close(fd)
            return None
        return cls(queries, fd)

    def close(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # releases the lock
            self._lock_fd = None

    @contextmanager
    def reader(self, attached: Attached) -> Iterator[ReplayConnection]:
        """`attached` is not entered: nothing is asked of DuckDB."""
        yield ReplayConnection(self)

    def not_recorded(self) -> None:
        self.missed = True
        raise ReadMiss("a read of the bulk views")

    def rows(self, kind: str, sql: str, params: Any) -> Any:
        key = _key(kind, sql, params)
        if key is None or key not in self._queries:
            self.missed = True
            raise ReadMiss(sql)
        return _decoded(self._queries[key])


class ReplayConnection:
    """A catalog cursor answering `execute(...).fetchall()`, `.fetchone()` and
    `.description` (names only) from kept reads; anything else is a ReadMiss."""

    def __init__(self, kept: KeptReads) -> None:
        self._kept = kept

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> _Replay:
        return _Replay(self._kept, sql, params)

    def __getattr__(self, name: str) -> Any:
        self._kept.missed = True
        raise ReadMiss(name)


class _Replay:
    def __init__(self, kept: KeptReads, sql: str, params: Any) -> None:
        self._kept, self._sql, self._params = kept, sql, params

    def fetchall(self) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in self._kept.rows("all", self._sql, self._params)]

    def fetchone(self) -> tuple[Any, ...] | None:
        row = self._kept.rows("one", self._sql, self._params)
        return None if row is None else tuple(row)

    @property
    def description(self) -> list[tuple[Any, ...]] | None:
        names = self._kept.rows("columns", self._sql, self._params)
        return None if names is None else [(name, None, None, None, None, None, None)
                                           for name in names]

    def __getattr__(self, name: str) -> Any:
        self._kept.missed = True
        raise ReadMiss(name)
