"""The store a request reads: a per-process copy of the catalog, refreshed after commits.

Opening the catalog for every request costs a DuckDB attach and holds its file lock while
the request runs; under steady traffic some request always holds it, and an ingest
waiting for the lock would starve. So each server process (each uvicorn worker) keeps a
`CatalogSnapshot`: the catalog's tables copied into an in-memory DuckDB database, with
the bulk tables as views over exactly the Parquet parts it lists. The catalog file is
locked only while the copy is made (milliseconds), never while a question is answered.

Before each request the catalog's files are looked at (`os.stat`, microseconds): when
they changed since the copy, a new copy is made and the request reads it. A request
keeps the snapshot it started with, so an answer begun before a commit finishes on the
old state and the next one sees the new state. Parquet parts are never rewritten in
place (a new part has a new name), so the copy and DuckDB's cache of part footers stay
valid for as long as the catalog lists them.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from lineage.api import Store
from lineage.store.budget import refuse_within_budget
from lineage.store.kept_reads import catalog_signature
from lineage.store.memo import CatalogMemo

if TYPE_CHECKING:
    import duckdb
    from starlette.requests import Request

    from lineage.store.arrays_use import KeptArrays
    from lineage.store.lookup_copy import LookupCopies

# A file's modification time has the kernel's coarse clock resolution (a few ms): a copy
# made this soon after the last change may have raced a second commit of equal size, so
# it is made again once this much time has passed.
SETTLE_SECONDS = 0.05

_SERIALS = itertools.count(1)


class CatalogSnapshot:
    """One copy of the catalog in memory, with the bulk views; read through cursors
    (`ServedStore.reader`)."""

    def __init__(self, store: Store) -> None:
        self.signature = catalog_signature(store.catalog_path)
        self.taken = time.time()
        self.serial = next(_SERIALS)  # names this state of the catalog in answer caches
        con = store.catalog_copy()
        try:
            # Parts are immutable: their footers are parsed once per snapshot, not per query.
            con.execute("SET parquet_metadata_cache = true")
            # A question reads a row group or two: requests in parallel use the cores
            # better than one query's threads do.
            con.execute("SET threads = 1")
        except BaseException:
            con.close()
            raise
        self.connection = con
        # Catalog rows read from this copy (parts and their row groups' records, streams):
        # the copy never changes, so they are read once (lineage/store/memo.py).
        self.memo = CatalogMemo()

    def settled(self) -> bool:
        """Whether the copy was made well after the catalog's last change (else it is
        made again for the next request, until it is)."""
        newest = max(entry[2] for entry in self.signature) / 1e9
        return self.taken - newest > SETTLE_SECONDS


class ServedStore(Store):
    """A `lineage.Store` whose catalog reads come from a snapshot instead of the file."""

    def __init__(self, root: str | os.PathLike[str], snapshot: CatalogSnapshot,
                 lookup_copies: LookupCopies | None = None,
                 kept_arrays: KeptArrays | None = None) -> None:
        super().__init__(root)
        self.snapshot = snapshot
        self.catalog_memo = snapshot.memo
        self.lookup_copies = lookup_copies
        self.kept_arrays = kept_arrays

    @contextmanager
    def reader(self, *, views: bool = True) -> Iterator[duckdb.DuckDBPyConnection]:
        # The snapshot always has the bulk views; a caller that asked for none ignores them.
        cursor = _CursorOnUse(self.snapshot.connection)
        try:
            yield cast("duckdb.DuckDBPyConnection", cursor)
        finally:
            cursor.close()


class _CursorOnUse:
    """A cursor of the snapshot's connection, made when it is first used: a lookup whose
    catalog rows are all kept (lineage/store/memo.py) never asks DuckDB anything, and
    making a cursor for it cost a twentieth of the answer."""

    def __init__(self, connection: duckdb.DuckDBPyConnection) -> None:
        self._connection = connection
        self._cursor: duckdb.DuckDBPyConnection | None = None

    def __getattr__(self, name: str) -> Any:
        if self._cursor is None:
            refuse_within_budget("a DuckDB query")  # a question answered at once asks none
            self._cursor = self._connection.cursor()
        return getattr(self._cursor, name)

    def close(self) -> None:
        if self._cursor is not None:
            self._cursor.close()


class Snapshots:
    """The current snapshot of one store in this process, replaced after each commit."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.store = Store(root)
        self._catalog = str(self.store.catalog_path)  # looked at on every request
        self._current: CatalogSnapshot | None = None
        self._lock = threading.Lock()

    def current(self) -> CatalogSnapshot:
        """The snapshot to answer the next request from (a fresh one after a commit)."""
        snapshot = self._current
        if snapshot is not None and self._fresh(snapshot):
            return snapshot
        with self._lock:  # one copy at a time; waiting requests then take that copy
            snapshot = self._current
            if snapshot is None or not self._fresh(snapshot):
                self.store.require_catalog()
                snapshot = self._current = CatalogSnapshot(self.store)
            return snapshot

    def peek(self) -> CatalogSnapshot | None:
        """The current snapshot when it is still the catalog's state, else None (a `stat`,
        never a copy: cheap enough for the event loop)."""
        snapshot = self._current
        return snapshot if snapshot is not None and self._fresh(snapshot) else None

    def _fresh(self, snapshot: CatalogSnapshot) -> bool:
        return snapshot.settled() and \
            catalog_signature(self._catalog) == snapshot.signature

    def served(self, snapshot: CatalogSnapshot | None = None,
               lookup_copies: LookupCopies | None = None,
               kept_arrays: KeptArrays | None = None) -> ServedStore:
        """The store a request reads: `snapshot`, or the current one (with the server's
        lookup copies, if it made any, and its checked lookup arrays)."""
        return ServedStore(self.store.root, snapshot or self.current(), lookup_copies,
                           kept_arrays)


_BY_ROOT: dict[Path, Snapshots] = {}
_BY_ROOT_LOCK = threading.Lock()


_BY_NAME: dict[str | os.PathLike[str], Snapshots] = {}


def snapshots_for(root: str | os.PathLike[str]) -> Snapshots:
    """This process's snapshots of the store at `root` (one per process and store)."""
    found = _BY_NAME.get(root)  # by the name as given: resolving it costs ~0.1 ms a request
    if found is not None:
        return found
    key = Path(root).resolve()
    with _BY_ROOT_LOCK:
        found = _BY_ROOT.get(key)
        if found is None:
            found = _BY_ROOT[key] = Snapshots(key)
        _BY_NAME[root] = found
        return found


@contextmanager
def store_for(request: Request) -> Iterator[Store]:
    """The store of the application serving `request` (its directory is set at start-up),
    reading the catalog as it was when the request began."""
    state = request.app.state
    yield snapshots_for(state.store_root).served(
        lookup_copies=state.lookup_copies, kept_arrays=getattr(state, "kept_arrays", None))
