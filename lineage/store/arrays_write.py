"""Make a lookup table's arrays file (lineage/store/arrays.py) from its checked Parquet
parts, and register it.

The parts stay the source of truth: the file is made from their checked bytes, in
their row order, and registered with the digest of the parts it was made from, so a
file made from parts the catalog no longer lists is never read. A table whose rows are
not in the order a binary search needs (a sort column that goes down somewhere) or
whose content hashes are not 64 lowercase hex gets no file: its lookups read Parquet.

Written as parts are: into a temp file beside its final name, fsynced, renamed into
place and registered in one catalog transaction that also unregisters the file it
replaces (removed once the commit is in).
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import blake3

from lineage.store.arrays import (
    ARRAY_TABLES,
    BLOCK,
    DIGEST_BYTES,
    HASH_BYTES,
    MAGIC,
    NULL_CODE,
    SPEC,
    TRAILER,
    ArraysRecord,
    parts_digest,
)
from lineage.store.durable import fsync_dir, fsync_file, remove_quietly, temp_path_for
from lineage.store.scratch import new_staging_dir

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

    from lineage.store.base import BaseStore
    from lineage.store.parts import WrittenPart

# Each lookup table's columns in an arrays file, and its sort columns: the columns its
# lookups ask for (lineage/stream/query.py, lineage/text/trained_on.py).
TABLE_COLUMNS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "occurrences": (("doc_id", "source", "uri", "content_hash", "epoch", "stream_start",
                     "stream_end", "doc_offset", "ordinal"), ("stream_start", "stream_end")),
    "occurrence_hashes": (("content_hash", "corpus", "doc_id", "epoch", "stream_start",
                           "stream_end", "doc_offset"), ("content_hash",)),
    "document_hashes": (("content_hash", "corpus", "source", "doc_id"), ("content_hash",)),
}
STREAM_ARRAY_TABLES = ("occurrences", "occurrence_hashes")
CORPUS_ARRAY_TABLES = ("document_hashes",)
MAX_DICTIONARY = 1024  # a string column with at most this many values is stored as codes


@dataclass
class _Written:
    temp: Path
    n_bytes: int
    sha256: str
    record: ArraysRecord
    rows: int


@dataclass
class PreparedArrays:
    """An arrays file written and fsynced beside its final name, to be registered with
    the parts it was made from (`publish_arrays`, in their commit)."""

    table: str
    owner: str
    final: Path
    written: _Written
    digest: str  # the parts' (path, SHA-256), as they will be registered


def prepare_arrays(store: BaseStore, table: str, owner: str, name: str,
                   parts: Sequence[WrittenPart]) -> PreparedArrays | None:
    """The arrays file of parts written but not yet published (`publish_parts` will name
    them `<name>-NNNN.parquet`); None when there are none or their rows cannot be
    searched. Call before taking the catalog's lock: this reads and writes every row."""
    if not parts:
        return None
    folder = store.table_dir(table)
    relative = [(folder / f"{name}-{i:04d}.parquet").relative_to(store.root).as_posix()
                for i in range(len(parts))]
    digest = parts_digest([(rel, part.sha256) for rel, part in zip(relative, parts,
                                                                    strict=True)])
    final = store.table_dir(ARRAY_TABLES[table]) / f"{name}-{digest[:8]}.arrays"
    final.parent.mkdir(parents=True, exist_ok=True)
    # written in the build's staging folder, beside its parts: a killed build's is cleared
    written = write_arrays(final, table, [part.temp for part in parts], digest,
                           temp_dir=parts[0].temp.parent)
    return None if written is None else PreparedArrays(table, owner, final, written, digest)


def prepare_stream_arrays(store: BaseStore, stream: str, name: str,
                          parts: Sequence[WrittenPart], hash_parts: Sequence[WrittenPart],
                          ) -> list[PreparedArrays | None]:
    """A stream's two arrays files (occurrences, occurrence_hashes), prepared from the
    parts its build wrote (`name`: the parts' published name)."""
    prepared: list[PreparedArrays | None] = []
    try:
        for table, written in (("occurrences", parts), ("occurrence_hashes", hash_parts)):
            prepared.append(prepare_arrays(store, table, stream, name, written))
    except BaseException:
        discard_arrays(prepared)
        raise
    return prepared


def publish_arrays(con: duckdb.DuckDBPyConnection, store: BaseStore,
                   prepared: Sequence[PreparedArrays | None]) -> list[str]:
    """Rename prepared files into place and register them, inside the writer's
    transaction that registers their parts; the paths renamed (the caller removes them
    if the transaction fails, as it does its parts'). A file whose parts are not the
    ones now registered is dropped, unregistered."""
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
    now = con.execute("SELECT path, sha256 FROM parquet_files WHERE table_name = ? AND "
                      "owner = ? ORDER BY path", [item.table, item.owner]).fetchall()
    if parts_digest([(p, s) for p, s in now]) != item.digest:
        item.written.temp.unlink(missing_ok=True)
        return
    kind = ARRAY_TABLES[item.table]
    con.execute("DELETE FROM parquet_files WHERE table_name = ? AND owner = ?",
                [kind, item.owner])
    relative = item.final.relative_to(store.root).as_posix()
    os.replace(item.written.temp, item.final)
    renamed.append(relative)
    fsync_dir(item.final.parent)
    written = item.written
    record = ArraysRecord(relative, written.n_bytes, written.record.head_at,
                          written.record.head_blake3, written.record.blake3, item.digest)
    con.execute("INSERT INTO parquet_files VALUES (?, ?, ?, ?, ?, ?, now()::TIMESTAMP, "
                "NULL, ?)", [relative, kind, item.owner, written.rows, written.n_bytes,
                             written.sha256, record.to_json()])


def discard_arrays(prepared: Sequence[PreparedArrays | None]) -> None:
    """Remove prepared files that were not published (their commit failed or was not
    needed)."""
    for item in prepared:
        if item is not None:
            item.written.temp.unlink(missing_ok=True)


def build_arrays(store: BaseStore, table: str, owner: str) -> str | None:
    """Make `owner`'s arrays file of `table` from its registered parts (checked first)
    and register it in a commit of its own, replacing the one registered: what `lineage
    store repair` does for a file that is missing, damaged or made from other parts. The
    path registered, or None (no parts, or rows a binary search cannot use)."""
    from lineage.store.parts import check_all_parts

    with store.reader(views=False) as con:
        parts = con.execute(
            "SELECT path, sha256 FROM parquet_files WHERE table_name = ? AND owner = ? "
            "ORDER BY path", [table, owner]).fetchall()
        if not parts:
            return None
        check_all_parts(con, store, [p for p, _ in parts])
    digest = parts_digest([(p, s) for p, s in parts])
    final = (store.table_dir(ARRAY_TABLES[table])
             / f"{Path(parts[0][0]).stem.rsplit('-', 1)[0]}-{digest[:8]}.arrays")
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = new_staging_dir(store.staging_dir)
    try:
        written = write_arrays(final, table, [store.root / p for p, _ in parts], digest,
                               temp_dir=staging)
    except BaseException:
        remove_quietly(staging)
        raise
    if written is None:
        remove_quietly(staging)
        return None
    prepared = PreparedArrays(table, owner, final, written, digest)
    old: list[str] = []
    renamed: list[str] = []
    try:
        with store.writer() as con:
            old = [r[0] for r in con.execute(
                "SELECT path FROM parquet_files WHERE table_name = ? AND owner = ?",
                [ARRAY_TABLES[table], owner]).fetchall()]
            renamed = publish_arrays(con, store, [prepared])
    except BaseException:
        discard_arrays([prepared])
        for rel in renamed:
            if rel not in old:
                (store.root / rel).unlink(missing_ok=True)
        raise
    finally:
        remove_quietly(staging)
    for rel in old:  # unregistered by the commit above
        if rel not in renamed:
            (store.root / rel).unlink(missing_ok=True)
    return renamed[0] if renamed else None


def write_arrays(final: Path, table: str, parts: Sequence[Path], digest: str, *,
                 temp_dir: Path) -> _Written | None:
    """The rows of `parts` (a lookup table's, in path order) as a fsynced temp file in
    `temp_dir` (a staging folder of the store: renamed to `final` at commit); None when
    their rows cannot be searched (see the module's doc). Read, encoded and written a
    column at a time: a column of 10M rows, not the table, is in memory at once."""
    names, sorted_by = TABLE_COLUMNS[table]
    # a name of this process's own: two ingests of the same corpus make the same final
    # name, and a corpus's parts (so its temp folder) may be in the table's folder
    temp = temp_path_for(temp_dir / final.name)
    try:
        written = _write(temp, table, parts, names, sorted_by)
        if written is None:
            temp.unlink(missing_ok=True)
            return None
        fsync_file(temp)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    written.record.parts_digest = digest
    return written


def _column(parts: Sequence[Path], name: str) -> pa.Array:
    import pyarrow as pa
    import pyarrow.parquet as pq

    chunks = [pq.read_table(p, columns=[name], use_threads=False)[name] for p in parts]
    column = pa.chunked_array([c for chunk in chunks for c in chunk.chunks],
                              type=chunks[0].type)
    if pa.types.is_string(column.type):  # 32-bit offsets end at 2 GiB (100M doc_ids)
        column = column.cast(pa.large_string())
    return column.combine_chunks()


@dataclass
class _Column:
    name: str
    kind: str
    data: bytes  # the column's fixed-width values
    heap: bytes = b""  # a string column's values, end to end
    words: list[str] | None = None  # a dictionary column's values


def _encoded(name: str, array: pa.Array) -> _Column | None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_integer(array.type):
        if array.null_count:
            return None
        return _Column(name, "i64", array.cast(pa.int64()).to_numpy().astype("<i8").tobytes())
    if name == "content_hash":
        if array.null_count or not pc.all(pc.match_substring_regex(
                array, "^[0-9a-f]{64}$")).as_py():
            return None
        text = array.cast(pa.large_string())
        offsets = np.frombuffer(text.buffers()[1], dtype="<i8")[text.offset:]
        data = text.buffers()[2]
        raw = b"" if data is None else bytes.fromhex(
            data.to_pybytes()[offsets[0]:offsets[len(text)]].decode("ascii"))
        return _Column(name, "h32", raw)
    encoded = pc.dictionary_encode(array)
    if len(encoded.dictionary) <= MAX_DICTIONARY:
        codes = encoded.indices.cast(pa.uint32()).fill_null(NULL_CODE).to_numpy()
        return _Column(name, "dict", codes.astype("<u4").tobytes(),
                       words=encoded.dictionary.to_pylist())
    large = array.cast(pa.large_string())
    offsets = np.frombuffer(large.buffers()[1], dtype="<i8")[large.offset:
                                                             large.offset + len(large) + 1]
    heap = b"" if large.buffers()[2] is None else large.buffers()[2].to_pybytes()[
        offsets[0]:offsets[-1]]
    ends = offsets - offsets[0]
    if large.null_count:  # a null's end is stored as -end - 1
        nulls = np.flatnonzero(large.is_null().to_numpy(zero_copy_only=False)) + 1
        ends = ends.copy()
        ends[nulls] = -ends[nulls] - 1
    return _Column(name, "str", ends.astype("<i8").tobytes(), heap=heap)


def _ascending(array: pa.Array) -> bool:
    import pyarrow.compute as pc

    if len(array) < 2:
        return True
    return bool(pc.all(pc.greater_equal(array[1:], array[:-1])).as_py())


class _Body:
    """The columns as they are written: their SHA-256, BLAKE3 and blocks' digests."""

    def __init__(self, handle: Any) -> None:
        self.handle, self.at = handle, 0
        self.sha256, self.blake3 = hashlib.sha256(), blake3.blake3()
        self.digests: list[bytes] = []
        self._block = bytearray()

    def write(self, data: bytes) -> None:
        self.handle.write(data)
        self.sha256.update(data)
        self.blake3.update(data)
        self.at += len(data)
        view = memoryview(data)
        while view:
            take = BLOCK - len(self._block)
            self._block += view[:take]
            view = view[take:]
            if len(self._block) == BLOCK:
                self._end_block()

    def _end_block(self) -> None:
        self.digests.append(blake3.blake3(bytes(self._block)).digest(length=DIGEST_BYTES))
        self._block = bytearray()

    def close(self) -> None:
        if self._block:
            self._end_block()




def _write(temp: Path, table: str, parts: Sequence[Path], names: Sequence[str],
           sorted_by: Sequence[str]) -> _Written | None:
    directory: dict[str, Any] = {"spec": SPEC, "table": table, "rows": 0,
                                 "sorted_by": list(sorted_by), "block": BLOCK,
                                 "columns": {}, "dictionaries": {}}
    fences = bytearray()
    with open(temp, "wb") as handle:
        body = _Body(handle)
        for name in names:
            array = _column(parts, name)
            column = _encoded(name, array)
            if column is None or (name in sorted_by and not _ascending(array)):
                return None
            directory["rows"] = len(array)
            del array
            entry: dict[str, Any] = {"kind": column.kind, "at": body.at}
            body.write(column.data)
            if column.kind == "str":
                entry["heap"] = body.at
                body.write(column.heap)
            if column.words is not None:
                directory["dictionaries"][name] = column.words
            if name in sorted_by:
                width = 8 if column.kind == "i64" else HASH_BYTES
                every = max(1, BLOCK // width)
                data = column.data
                picked = b"".join(data[i:i + width]
                                  for i in range(0, len(data), every * width))
                entry.update(every=every, fences_at=len(fences), fences=len(picked) // width)
                fences += picked
            directory["columns"][name] = entry
        body.close()
        head = bytearray(fences)
        directory["blocks_at"] = len(head)
        head += b"".join(body.digests)
        text = json.dumps(directory, separators=(",", ":")).encode("utf-8")
        head += text + struct.pack("<I", len(text))
        head += TRAILER.pack(body.at, MAGIC)
        head_at = body.at
        head_bytes = bytes(head)
        handle.write(head_bytes)
        body.sha256.update(head_bytes)
        body.blake3.update(head_bytes)
    n_bytes = head_at + len(head_bytes)
    record = ArraysRecord("", n_bytes, head_at, blake3.blake3(head_bytes).hexdigest(),
                          body.blake3.hexdigest(), "")
    return _Written(temp, n_bytes, body.sha256.hexdigest(), record, int(directory["rows"]))
