"""Lookup copies: the lookup tables' parts again as Arrow IPC record batches, for a
long-running reader that answers point and range lookups many times a second
(`lineage serve --lookup-copies`).

A lookup in a Parquet part decodes a whole row group of 2,048 rows, every column, to
keep the hundred or so a step holds; that decoding is most of a `docs --step` answer's
CPU (docs/performance.md). An IPC record batch is its columns' buffers as they are in
memory: reading one is a `pread` and no decoding at all. So a copy holds each part's rows
in batches of a few hundred (lineage/store/lookup_copy_write.py makes them), and a lookup
reads the one or two batches its rows are in.

A copy is laid out as a part is, so it is read and checked by the same code
(lineage/store/part_check.py): its batches, then its schema, each a byte range with a
BLAKE3 and the first and last values of the part's range columns recorded per batch.
The record of all copies (`index.json`) is written by the process that makes them, and
its BLAKE3 goes to the readers from that process's memory (an environment variable),
never from the folder: a copy damaged or changed after it was made is refused as a part
is. Copies are made from checked bytes of the parts they copy, are keyed by each part's
path and SHA-256 in the catalog, and are used only while the catalog lists that part; a
part committed later has none and is read from Parquet.
"""

from __future__ import annotations

import json
import os
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import blake3

from lineage.errors import DamagedPartError
from lineage.store.budget import spend
from lineage.store.part_check import CheckedBytes, RangeRecord, read_ranges

if TYPE_CHECKING:
    import pyarrow as pa

    from lineage.store.part_check import Admits

INDEX_NAME = "index.json"
COPY_RANGES = ("batch", "schema", "the copies' index")  # as a damage error names them
REMEDY = "restart `lineage serve` to make the lookup copies again"
SPEC = "lineage-lookup-copies/1"


@dataclass(frozen=True)
class PartCopy:
    """A part's copy: its file in the copies' folder (and that file's path), its size, and
    its record (each batch's byte range, BLAKE3 and first and last key values, then the
    schema's)."""

    file: str
    n_bytes: int
    record: RangeRecord
    path: Path


class LookupCopies:
    """The copies in one folder, by the path and SHA-256 of the part each copies."""

    def __init__(self, folder: Path, copies: dict[tuple[str, str], PartCopy],
                 batch_rows: int) -> None:
        self.folder = folder
        self.copies = copies
        self.batch_rows = batch_rows  # rows of every batch but a copy's last
        self._schemas: dict[str, pa.Schema] = {}
        # Each copy's file stays open once read (a few hundred descriptors per process):
        # opening it again for every lookup cost more than reading the batch.
        self._opened: dict[str, int] = {}
        self._lock = threading.Lock()
        weakref.finalize(self, _close_all, self._opened)

    @classmethod
    def load(cls, folder: str | os.PathLike[str], digest: str) -> LookupCopies:
        """The copies `make_copies` made in `folder`, whose index hashed to `digest`."""
        folder = Path(folder)
        path = folder / INDEX_NAME
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise DamagedPartError(path, f"cannot be read ({exc.strerror})", REMEDY) from exc
        if blake3.blake3(data).hexdigest() != digest:
            raise DamagedPartError(path, "does not match the BLAKE3 it was made with", REMEDY)
        index = json.loads(data)
        return cls(folder, {(entry["path"], entry["sha256"]): PartCopy(
            entry["file"], entry["n_bytes"], RangeRecord.from_json(entry["record"]),
            folder / entry["file"]) for entry in index["parts"]}, index["batch_rows"])

    def __len__(self) -> int:
        return len(self.copies)

    def of(self, path: str, sha256: str) -> PartCopy | None:
        """The copy of the part at `path` with the catalog's `sha256`, if one was made."""
        return self.copies.get((path, sha256))

    def batches(self, copy: PartCopy, admits: Admits) -> pa.Table | None:
        """The batches of `copy` whose recorded key values `admits`, every column, each
        checked against its BLAKE3 before it is read; None when none is. The schema's
        bytes are read and checked with a copy's first batches, then kept parsed."""
        import pyarrow as pa
        import pyarrow.ipc as ipc

        record = copy.record
        wanted = record.admitted(admits)[:-1]  # the batches; the schema is last
        if not wanted:
            return None
        spend(len(wanted) * self.batch_rows)
        schema = self._schemas.get(record.digests[-1])
        ranges = wanted if schema is not None else [*wanted, len(record.ends) - 1]
        chunks = CheckedBytes(copy.path)
        try:
            read_ranges(self._file(copy), chunks, record, ranges, names=COPY_RANGES)
        except DamagedPartError as exc:  # the store is not at fault: its copy is
            raise DamagedPartError(exc.path, exc.what, REMEDY) from None
        starts = sorted(chunks.data)  # the batches', then the schema's if it was read
        if schema is None:
            schema = self._schema(chunks.footer_digest, chunks.data[starts.pop()])
        found = [ipc.read_record_batch(pa.py_buffer(chunks.data[start]), schema)
                 for start in starts]
        return pa.Table.from_batches(found, schema)

    def _file(self, copy: PartCopy) -> int:
        """The descriptor of `copy`'s file, opened (and its size checked) once."""
        fd = self._opened.get(copy.file)
        if fd is not None:
            return fd
        with self._lock:
            if (fd := self._opened.get(copy.file)) is not None:
                return fd
            try:
                fd = os.open(copy.path, os.O_RDONLY)
            except OSError as exc:
                raise DamagedPartError(copy.path, f"cannot be opened ({exc.strerror})",
                                       REMEDY) from exc
            if (size := os.fstat(fd).st_size) != copy.n_bytes:
                os.close(fd)
                raise DamagedPartError(copy.path, f"is {size} bytes, the copies' index "
                                                  f"says {copy.n_bytes}", REMEDY)
            self._opened[copy.file] = fd
            return fd

    def _schema(self, digest: str, checked: bytes) -> pa.Schema:
        """A copy's schema from its checked bytes, parsed once per digest."""
        import pyarrow as pa
        import pyarrow.ipc as ipc

        with self._lock:
            found = self._schemas.get(digest)
        if found is None:
            found = ipc.read_schema(pa.py_buffer(checked))
            with self._lock:
                self._schemas[digest] = found
        return found


def _close_all(opened: dict[str, int]) -> None:
    for fd in opened.values():
        os.close(fd)
    opened.clear()
