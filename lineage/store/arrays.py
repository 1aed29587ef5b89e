"""Lookup arrays: a lookup table's rows again as fixed-width little-endian columns, read
by binary search without a query engine, pyarrow or numpy (`lineage-arrays/1`,
docs/store.md "Lookup arrays").

A lookup in Parquet decodes a row group of 2,048 rows, every column, to keep the
hundred or so rows a step holds, and a command that does it imports pyarrow and numpy
first (about 100 ms of a 300 ms `docs --json` process). An arrays file holds the same
rows, in the same order, as columns of fixed width (int64, a 32-byte content hash, a
string's end offsets into its bytes, a small dictionary's codes), so a lookup is a
binary search on the sorted columns and a slice of each of the others.

A file is its columns, then its head: a JSON directory (where each column is, its
kind, the table and the sort columns), the sort columns' fences (every R-th value, R
chosen so R values fill one block), and the BLAKE3-128 of each 64 KiB block of the
columns; an 8-byte offset of the head and the magic end the file. The catalog registers
the file in `parquet_files` (table `<table>_arrays`, owned by the stream or corpus the
table's parts belong to) with its size, SHA-256, the BLAKE3 of the head, the BLAKE3 of
the whole file and the digest of the parts it was made from (`parts_digest`: a file
made from other parts than the catalog lists now is not used).

What is checked before a byte is used:
- a command (`ArraysFile.open`): the head against the catalog's BLAKE3, then each block
  the lookup reads against the head's digest of it, the first time it is read; a
  step's lookup reads a few blocks (the fences pick them: one per sort column, then
  one or two per column read).
- a server (`ArraysFile.open(..., whole=True)`): the whole file against the catalog's
  BLAKE3 once, when it is first used; it is then read from memory without further checks.
A byte that differs is `DamagedPartError`; the callers answer from the Parquet parts
instead, with a notice (lineage/store/arrays_use.py).
"""

from __future__ import annotations

import bisect
import itertools
import json
import os
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import blake3

from lineage.errors import DamagedPartError

SPEC = "lineage-arrays/1"
MAGIC = b"LNARRAY1"
TRAILER = struct.Struct("<Q8s")  # the head's offset, then the magic: the file's last bytes
BLOCK = 1 << 16  # bytes per checked block of the columns
DIGEST_BYTES = 16  # BLAKE3-128 of each block: catches damage, as a part's row groups
HASH_BYTES = 32  # a content hash (64 lowercase hex in Parquet), raw
NULL_CODE = 0xFFFFFFFF  # a dictionary column's code for a null
REMEDY = "run `lineage store repair` to make the lookup arrays again"
ARRAY_TABLES = {"occurrences": "occurrences_arrays",
                "occurrence_hashes": "occurrence_hashes_arrays",
                "document_hashes": "document_hashes_arrays"}
_WIDTHS = {"i64": 8, "h32": HASH_BYTES, "str": 8, "dict": 4}
_INT64 = struct.Struct("<q")


class ArraysRecord:
    """An arrays file as the catalog registers it. (A plain class: a dataclass costs a
    lookup process's start-up about a millisecond to make.)"""

    __slots__ = ("blake3", "head_at", "head_blake3", "n_bytes", "parts_digest", "path")

    def __init__(self, path: str, n_bytes: int, head_at: int, head_blake3: str, blake3: str,
                 parts_digest: str) -> None:
        self.path = path  # relative to the store root
        self.n_bytes = n_bytes
        self.head_at = head_at  # where the head starts
        self.head_blake3 = head_blake3  # hex BLAKE3 of bytes head_at..n_bytes
        self.blake3 = blake3  # hex BLAKE3 of the whole file
        self.parts_digest = parts_digest  # of the parts it was made from

    @classmethod
    def parse(cls, path: str, n_bytes: int, record: str) -> ArraysRecord:
        fields = json.loads(record)
        if fields.get("spec") != SPEC:
            raise DamagedPartError(path, f"the catalog's record is not {SPEC}", REMEDY)
        return cls(path, int(n_bytes), int(fields["head_at"]), str(fields["head_blake3"]),
                   str(fields["blake3"]), str(fields["parts_digest"]))

    def to_json(self) -> str:
        return json.dumps({"spec": SPEC, "head_at": self.head_at,
                           "head_blake3": self.head_blake3, "blake3": self.blake3,
                           "parts_digest": self.parts_digest})


def parts_digest(parts: Sequence[tuple[str, str]]) -> str:
    """The digest of a table's parts (path, SHA-256) an arrays file was made from."""
    text = "\n".join(f"{path} {sha256}" for path, sha256 in sorted(parts))
    return blake3.blake3(text.encode("utf-8")).hexdigest()


class ArraysFile:
    """One arrays file open for lookups; every byte it hands out was checked."""

    def __init__(self, record: ArraysRecord, path: Path, data: Any, head: bytes, *,
                 whole: bool) -> None:
        self.record, self.path = record, path
        self._data = data  # a file descriptor (checked by block), or the checked bytes
        self._whole = whole
        self._checked: dict[int, bytes] = {}  # block -> its checked bytes (by block)
        size = len(head) - TRAILER.size  # the head: fences, digests, JSON, its length
        (length,) = struct.unpack_from("<I", head, size - 4)
        self.directory: dict[str, Any] = json.loads(head[size - 4 - length:size - 4])
        self.rows = int(self.directory["rows"])
        self._head = memoryview(head)[:size]
        self.columns: dict[str, dict[str, Any]] = self.directory["columns"]
        self.sorted_by: list[str] = self.directory["sorted_by"]

    @classmethod
    def open(cls, root: Path, record: ArraysRecord, *, whole: bool = False) -> ArraysFile:
        """The file of `record`, its head checked (`whole`: every byte, read into memory)."""
        path = root / record.path
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            raise DamagedPartError(record.path, f"cannot be read ({exc.strerror})",
                                   REMEDY) from exc
        try:
            size = os.fstat(fd).st_size
            if size != record.n_bytes or record.head_at + TRAILER.size > size:
                raise DamagedPartError(record.path, f"{size} bytes, the catalog says "
                                       f"{record.n_bytes}", REMEDY)
            if whole:
                # Mapped, not read: a server's workers share the pages. Store files are
                # replaced by renames, never cut short in place.
                import mmap

                data: Any = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
                hasher = blake3.blake3(max_threads=blake3.blake3.AUTO)
                hasher.update(data)
                if hasher.hexdigest() != record.blake3:
                    data.close()
                    raise DamagedPartError(record.path, "differs from the catalog's BLAKE3",
                                           REMEDY)
                head = data[record.head_at:]
            else:
                data = fd
                head = _read(fd, record.head_at, record.n_bytes, record.path)
                _check(head, record.head_blake3, record.path, "its head")
            if head[-8:] != MAGIC:
                raise DamagedPartError(record.path, "not a lookup arrays file", REMEDY)
            opened = cls(record, path, data, head, whole=whole)
            if not whole:
                fd = -1  # kept open by the file object, closed by close()
            return opened
        finally:
            if fd >= 0:
                os.close(fd)

    def close(self) -> None:
        if self._whole:
            self._data.close()
        elif self._data >= 0:
            os.close(self._data)
            self._data = -1

    def __enter__(self) -> ArraysFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- bytes ------------------------------------------------------------------------

    def _bytes(self, start: int, end: int) -> bytes:
        """Bytes start..end of the columns, each block they lie in checked once."""
        if end <= start:
            return b""
        if self._whole:
            return bytes(self._data[start:end])
        first, last = start // BLOCK, (end - 1) // BLOCK
        missing = [b for b in range(first, last + 1) if b not in self._checked]
        if missing:
            lo, hi = missing[0] * BLOCK, min((missing[-1] + 1) * BLOCK, self.record.head_at)
            data = _read(self._data, lo, hi, self.record.path)
            digests = self._head[self.directory["blocks_at"]:]
            for block in missing:
                piece = data[(block - missing[0]) * BLOCK:(block - missing[0] + 1) * BLOCK]
                at = block * DIGEST_BYTES
                if blake3.blake3(piece).digest(length=DIGEST_BYTES) != digests[
                        at:at + DIGEST_BYTES]:
                    raise DamagedPartError(self.record.path, f"block {block} (bytes "
                                           f"{block * BLOCK}..) differs from its record",
                                           REMEDY)
                self._checked[block] = piece
        pieces = [self._checked[b] for b in range(first, last + 1)]
        joined = pieces[0] if len(pieces) == 1 else b"".join(pieces)
        return joined[start - first * BLOCK:end - first * BLOCK]

    # -- columns ----------------------------------------------------------------------

    def values(self, name: str, lo: int, hi: int) -> list[Any]:
        """Rows lo..hi of column `name`, as Python values (a content hash as its hex)."""
        column = self.columns[name]
        kind, at = column["kind"], int(column["at"])
        lo, hi = max(lo, 0), min(hi, self.rows)
        if hi <= lo:
            return []
        if kind == "i64":
            return list(struct.unpack(f"<{hi - lo}q", self._bytes(at + 8 * lo, at + 8 * hi)))
        if kind == "h32":
            raw = self._bytes(at + HASH_BYTES * lo, at + HASH_BYTES * hi).hex()
            return [raw[i:i + 64] for i in range(0, len(raw), 64)]
        if kind == "dict":
            words = self.directory["dictionaries"][name]
            codes = struct.unpack(f"<{hi - lo}I", self._bytes(at + 4 * lo, at + 4 * hi))
            return [None if code == NULL_CODE else words[code] for code in codes]
        ends = struct.unpack(f"<{hi - lo + 1}q",
                             self._bytes(at + 8 * lo, at + 8 * (hi + 1)))  # str: n + 1 ends
        base = int(column["heap"])
        first = _end(ends[0])
        text = self._bytes(base + first, base + _end(ends[-1]))
        found: list[Any] = []
        for start, end in itertools.pairwise(ends):  # a negative end: the value is null
            if end < 0:
                found.append(None)
            else:
                found.append(text[_end(start) - first:end - first].decode("utf-8"))
        return found

    def search(self, name: str, value: Any, *, right: bool = False) -> int:
        """The first row whose `name` (a sort column) is above `value` (`right`), or not
        below it: bisect on the head's fences, then on one fence's rows."""
        column = self.columns[name]
        every, fences = int(column["every"]), self._fences(name)
        key = bytes.fromhex(value) if column["kind"] == "h32" else value
        step = bisect.bisect_right if right else bisect.bisect_left
        k = step(fences, key)  # rows (k-1)*every .. k*every hold the answer
        lo = max(k - 1, 0) * every
        hi = min(k * every, self.rows)
        if hi <= lo:
            return min(lo, self.rows)
        chunk = _sort_keys(self, name, lo, hi)
        return lo + step(chunk, key)

    def _fences(self, name: str) -> Sequence[Any]:
        column = self.columns[name]
        at, count = int(column["fences_at"]), int(column["fences"])
        width = _WIDTHS[column["kind"]]
        return _Fixed(self._head[at:at + width * count], column["kind"])


def _end(value: int) -> int:
    """A string column's end offset (stored negated, minus one, for a null)."""
    return value if value >= 0 else -value - 1


class _Fixed(Sequence[Any]):
    """Fixed-width values in `data` as a sequence bisect can search, each value made when
    bisect asks for it (about log2(n) of them): a list of every value cost more than the
    whole rest of a lookup, and grows with the store (one fence per 2,048 hashes)."""

    def __init__(self, data: bytes | memoryview, kind: str) -> None:
        self._data = data
        self._width = _WIDTHS[kind]
        self._int = kind == "i64"
        self._length = len(data) // self._width

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index: Any) -> Any:
        if not 0 <= index < self._length:
            raise IndexError(index)
        at = index * self._width
        if self._int:
            return _INT64.unpack_from(self._data, at)[0]
        return bytes(self._data[at:at + self._width])


def _sort_keys(arrays: ArraysFile, name: str, lo: int, hi: int) -> _Fixed:
    """Rows lo..hi of a sort column (raw hash bytes, or integers), searchable by bisect."""
    column = arrays.columns[name]
    width = _WIDTHS[column["kind"]]
    at = int(column["at"])
    return _Fixed(arrays._bytes(at + width * lo, at + width * hi), column["kind"])


def _read(fd: int, start: int, end: int, name: str) -> bytes:
    data = os.pread(fd, end - start, start)
    if len(data) != end - start:
        raise DamagedPartError(name, f"cut short: bytes {start}..{end} cannot be read",
                               REMEDY)
    return data


def _check(data: bytes, expected: str, name: str, what: str) -> None:
    if blake3.blake3(data).hexdigest() != expected:
        raise DamagedPartError(name, f"{what} differs from the catalog's BLAKE3", REMEDY)
