"""Make a corpus's or a stream's lookup arrays file (lineage/store/arrays_rows.py) from
its checked Parquet parts, and register it.

The parts stay the source of truth: the file is made from their bytes, in their row
order, and registered with the digest of the parts it was made from, so a file made
from parts the catalog no longer lists is never read. A stream file is made against
its corpus's current file and registered with that file's BLAKE3: it is published only
while that file is still the corpus's current one.

Written as parts are: into a temp file in a scratch folder of the store, fsynced,
renamed into place and registered in one catalog transaction that also unregisters the
file it replaces (removed once the commit is in).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from lineage.store.arrays import (
    ARRAY_SOURCES,
    ARRAY_TABLES,
    OLD_ARRAY_TABLES,
    ArraysRecord,
    parts_digest,
)
from lineage.store.arrays_spool import Written
from lineage.store.durable import fsync_dir, fsync_file, remove_quietly, temp_path_for
from lineage.store.scratch import new_staging_dir

if TYPE_CHECKING:
    import duckdb

    from lineage.store.arrays_rows import CorpusColumns, StreamColumns
    from lineage.store.base import BaseStore
    from lineage.store.parts import WrittenPart


@dataclass
class PreparedArrays:
    """An arrays file written and fsynced in a scratch folder, to be registered with the
    parts it was made from (`publish_arrays`, in their commit)."""

    table: str  # the lookup table: document_hashes (a corpus's) or occurrences (a stream's)
    owner: str
    final: Path
    written: Written
    digest: str  # the parts' (path, SHA-256), as they will be registered
    corpus: str = ""  # a stream file's corpus, and the BLAKE3 of the file it refers to
    corpus_blake3: str = ""


def prepare_corpus_arrays(store: BaseStore, corpus: str, name: str,
                          hash_parts: Sequence[WrittenPart],
                          doc_parts: Sequence[WrittenPart],
                          columns: CorpusColumns | None = None) -> PreparedArrays | None:
    """A corpus's arrays file for parts written but not yet published (`publish_parts`
    will name them `<name>-NNNN.parquet`): from `columns`, spooled while the parts were
    written, else from the parts' rows; None when there are none or their rows cannot
    be searched. Call before taking the catalog's lock."""
    if not hash_parts:
        return None
    listed = [*_future(store, "document_hashes", name, hash_parts),
              *_future(store, "documents", name, doc_parts)]
    digest = parts_digest(listed)
    final = _final(store, "document_hashes", name, digest)

    def make(temp: Path, folder: Path) -> Written | None:
        if columns is not None:
            try:
                return columns.write(temp, folder, corpus)
            finally:
                columns.discard()
        made: Written | None = _rows().corpus_file(
            temp, folder, corpus, [p.temp for p in hash_parts], [p.temp for p in doc_parts])
        return made

    # written beside the staged parts (a killed ingest's is cleared with them)
    written = _write(store, final, hash_parts[0].temp.parent, make)
    return None if written is None else PreparedArrays("document_hashes", corpus, final,
                                                       written, digest)


def prepare_stream_arrays(store: BaseStore, stream: str, corpus: str, name: str,
                          parts: Sequence[WrittenPart], hash_parts: Sequence[WrittenPart],
                          columns: StreamColumns | None = None) -> PreparedArrays | None:
    """A stream's arrays file from the `occurrences` and `occurrence_hashes` parts its
    build wrote (`name`: their published name), against its corpus's current arrays
    file; None without one. `columns`: the file's columns spooled by the build, used
    when they number the corpus's documents as its current file does."""
    if not parts:
        return None
    digest = parts_digest(_future(store, "occurrences", name, parts))
    return _prepare_stream(store, stream, corpus, [p.temp for p in parts],
                           [p.temp for p in hash_parts], digest,
                           _final(store, "occurrences", name, digest), parts[0].temp.parent,
                           columns)


def _prepare_stream(store: BaseStore, stream: str, corpus: str, parts: Sequence[Path],
                    hash_parts_of_stream: Sequence[Path], digest: str, final: Path,
                    temp_dir: Path, columns: StreamColumns | None = None,
                    ) -> PreparedArrays | None:
    from lineage.store.arrays_use import current_records

    with store.reader(views=False) as con:
        record = current_records(con, "document_hashes", corpus).get(corpus)
        listed = con.execute(
            "SELECT path, n_rows FROM parquet_files WHERE table_name = 'document_hashes' AND "
            "owner = ? ORDER BY path", [corpus]).fetchall()
    if record is None:
        return None  # the corpus has no current file: its lookups read Parquet
    hash_parts = [store.root / path for path, _ in listed]
    blake3 = record.blake3

    def make(temp: Path, folder: Path) -> Written | None:
        try:
            if columns is not None and columns.corpus_rows == sum(n for _, n in listed):
                return columns.write(temp, folder, stream, corpus, blake3)
        finally:
            if columns is not None:
                columns.discard()
        made: Written | None = _rows().stream_file(
            temp, folder, stream, parts, hash_parts_of_stream, corpus, blake3, hash_parts)
        return made

    written = _write(store, final, temp_dir, make)
    if written is None:
        return None
    return PreparedArrays("occurrences", stream, final, written, digest, corpus, blake3)


def publish_arrays(con: duckdb.DuckDBPyConnection, store: BaseStore,
                   prepared: Sequence[PreparedArrays | None]) -> list[str]:
    """Rename prepared files into place and register them, inside the writer's
    transaction that registers their parts; the paths renamed (the caller removes them
    if the transaction fails, as it does its parts'). A file whose parts (or, for a
    stream, whose corpus file) are not the ones now registered is dropped, unregistered."""
    renamed: list[str] = []
    try:
        for item in prepared:
            if item is not None:
                _publish_one(con, store, item, renamed)
    except BaseException:
        for relative in renamed:  # the transaction fails: they are nobody's
            (store.root / relative).unlink(missing_ok=True)
        raise
    return renamed


def _publish_one(con: duckdb.DuckDBPyConnection, store: BaseStore, item: PreparedArrays,
                 renamed: list[str]) -> None:
    from lineage.store.arrays_use import current_records

    now = con.execute("SELECT path, sha256 FROM parquet_files WHERE list_contains(?, "
                      "table_name) AND owner = ? ORDER BY path",
                      [list(ARRAY_SOURCES[item.table]), item.owner]).fetchall()
    current = item.corpus and current_records(con, "document_hashes", item.corpus).get(
        item.corpus)
    if parts_digest([(p, s) for p, s in now]) != item.digest or (
            item.corpus and (not current or current.blake3 != item.corpus_blake3)):
        item.written.temp.unlink(missing_ok=True)
        return
    kinds = [ARRAY_TABLES[item.table], *(OLD_ARRAY_TABLES if item.table == "occurrences"
                                         else ())]
    con.execute("DELETE FROM parquet_files WHERE list_contains(?, table_name) AND owner = ?",
                [kinds, item.owner])
    relative = item.final.relative_to(store.root).as_posix()
    item.final.parent.mkdir(parents=True, exist_ok=True)
    os.replace(item.written.temp, item.final)
    renamed.append(relative)
    fsync_dir(item.final.parent)
    written = item.written
    record = ArraysRecord(relative, written.n_bytes, written.record.head_at,
                          written.record.head_blake3, written.record.blake3, item.digest,
                          item.corpus_blake3)
    con.execute("INSERT INTO parquet_files VALUES (?, ?, ?, ?, ?, ?, now()::TIMESTAMP, "
                "NULL, NULL, ?)", [relative, ARRAY_TABLES[item.table], item.owner, written.rows,
                             written.n_bytes, written.sha256, record.to_json()])


def discard_arrays(prepared: Sequence[PreparedArrays | None]) -> None:
    """Remove prepared files that were not published (their commit failed or was not
    needed)."""
    for item in prepared:
        if item is not None:
            item.written.temp.unlink(missing_ok=True)


def build_arrays(store: BaseStore, table: str, owner: str) -> str | None:
    """Make `owner`'s arrays file of `table` ("document_hashes" for a corpus,
    "occurrences" for a stream) from its registered parts (checked first) and register
    it in a commit of its own, replacing the one registered: what `lineage store repair`
    does for a file that is missing, damaged, made from other parts, against another
    corpus file, or of an earlier format. The path registered, or None (no parts, rows a
    binary search cannot use, or a stream whose corpus has no current file)."""
    from lineage.store.part_select import check_all_parts

    with store.reader(views=False) as con:
        parts = con.execute(
            "SELECT path, sha256, table_name FROM parquet_files WHERE list_contains(?, "
            "table_name) AND owner = ? ORDER BY path",
            [list(ARRAY_SOURCES[table]), owner]).fetchall()
        if not any(kind == table for _, _, kind in parts):
            return None
        corpus, by_hash = None, []
        if table == "occurrences":  # its file is made with the same rows in hash order
            corpus = con.execute("SELECT corpus FROM streams WHERE name = ?",
                                 [owner]).fetchone()
            by_hash = [row[0] for row in con.execute(
                "SELECT path FROM parquet_files WHERE table_name = 'occurrence_hashes' AND "
                "owner = ? ORDER BY path", [owner]).fetchall()]
        check_all_parts(con, store, [*(p for p, _, _ in parts), *by_hash])
    digest = parts_digest([(p, s) for p, s, _ in parts])
    mine = [store.root / p for p, _, kind in parts if kind == table]
    final = _final(store, table, Path(mine[0]).stem.rsplit("-", 1)[0], digest)
    staging = new_staging_dir(store.staging_dir)
    try:
        if table == "document_hashes":
            documents = [store.root / p for p, _, kind in parts if kind == "documents"]
            written = _write(store, final, staging, lambda temp, folder: _rows().corpus_file(
                temp, folder, owner, mine, documents))
            prepared = None if written is None else PreparedArrays(table, owner, final,
                                                                   written, digest)
        else:
            prepared = None if corpus is None else _prepare_stream(
                store, owner, str(corpus[0]), mine, [store.root / p for p in by_hash],
                digest, final, staging)
        return None if prepared is None else _replace(store, prepared)
    finally:
        remove_quietly(staging)


def _replace(store: BaseStore, prepared: PreparedArrays) -> str | None:
    """Publish `prepared` in a commit of its own; the files it replaces are removed
    once the commit is in."""
    kinds = [ARRAY_TABLES[prepared.table], *OLD_ARRAY_TABLES]
    old: list[str] = []
    renamed: list[str] = []
    try:
        with store.writer() as con:
            old = [r[0] for r in con.execute(
                "SELECT path FROM parquet_files WHERE list_contains(?, table_name) AND "
                "owner = ?", [kinds, prepared.owner]).fetchall()]
            renamed = publish_arrays(con, store, [prepared])
    except BaseException:
        discard_arrays([prepared])
        for rel in renamed:
            if rel not in old:
                (store.root / rel).unlink(missing_ok=True)
        raise
    for rel in old:  # unregistered by the commit above
        if rel not in renamed:
            (store.root / rel).unlink(missing_ok=True)
    return renamed[0] if renamed else None


def _write(store: BaseStore, final: Path, temp_dir: Path, make: object) -> Written | None:
    """`make(temp, folder)` (a writer of arrays_rows, spooling in `folder`, a scratch
    folder of its own) into a temp file of this process's own in `temp_dir`, fsynced;
    None (and no file) when the rows cannot be searched."""
    # a name of this process's own: two ingests of the same corpus make the same name
    temp = temp_path_for(temp_dir / final.name)
    folder = new_staging_dir(store.staging_dir)
    try:
        written = make(temp, folder)  # type: ignore[operator]
        if written is None:
            temp.unlink(missing_ok=True)
            return None
        fsync_file(temp)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    finally:
        remove_quietly(folder)
    return written  # type: ignore[no-any-return]


def _future(store: BaseStore, table: str, name: str, parts: Sequence[WrittenPart],
            ) -> list[tuple[str, str]]:
    """(path, SHA-256) of staged parts as `publish_parts` will register them."""
    folder = store.table_dir(table)
    return [((folder / f"{name}-{i:04d}.parquet").relative_to(store.root).as_posix(),
             part.sha256) for i, part in enumerate(parts)]


def _final(store: BaseStore, table: str, name: str, digest: str) -> Path:
    return store.table_dir(ARRAY_TABLES[table]) / f"{name}-{digest[:8]}.arrays"


def _rows() -> ModuleType:
    from lineage.store import arrays_rows  # pyarrow and DuckDB: only when writing

    return arrays_rows
