"""Lookup arrays: the rows a lookup answers from, as fixed-width little-endian columns
read by binary search without a query engine, pyarrow or numpy (`lineage-arrays/2`,
docs/arrays-spec.md; a server, which keeps its files mapped, also reads a span's values
through numpy: lineage/store/arrays_mapped.py).

A corpus has one file (its documents in content-hash order: hash, doc_id, source, uri);
a stream has one file (its occurrences in stream order, as integers only: where each
starts and ends, its epoch, its offset into its document and its document's row in the
corpus file; then each document's occurrences, the postings). A document's attributes
are stored once, in the corpus file; a stream file names the corpus file it refers to
by its BLAKE3, and is not used beside any other.

A file is its columns, then the BLAKE3-128 of each 4 KiB block of the columns (the
digests), then its head: the BLAKE3-128 of each 4 KiB page of the digests and a JSON
directory; an 8-byte offset of the head and the magic end the file. The catalog
registers the file in `parquet_files` (table `<table>_arrays`, owned by the corpus or
stream) with its size, SHA-256, the BLAKE3 of the head, the BLAKE3 of the whole file and
the digest of the parts it was made from (`parts_digest`: a file made from other parts
than the catalog lists now is not used).

What is checked before a byte is used:
- a command (`ArraysFile.open`): the head against the catalog's BLAKE3, then each block
  the lookup reads against its digest, whose page is checked against the head first.
- a server (`ArraysFile.open(..., whole=True)`): the whole file against the catalog's
  BLAKE3 once, when it is first used; it is then read from memory without further checks.
A byte that differs is `DamagedPartError`; the callers answer from the Parquet parts
instead, with a notice (lineage/store/arrays_use.py).
"""

from __future__ import annotations

import bisect
import json
import os
import struct
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import blake3

from lineage.errors import DamagedPartError

SPEC = "lineage-arrays/2"
OLD_SPECS = ("lineage-arrays/1",)  # registered by earlier versions; never read
MAGIC = b"LNARRAY2"
TRAILER = struct.Struct("<Q8s")  # the head's offset, then the magic: the file's last bytes
BLOCK = 1 << 12  # bytes per checked block of the columns: a document's row reads few
PAGE = 1 << 12  # bytes per checked page of the blocks' digests
DIGEST_BYTES = 16  # BLAKE3-128 of each block and page: catches damage
HASH_BYTES = 32  # a content hash (64 lowercase hex in Parquet), raw
REMEDY = "run `lineage store repair` to make the lookup arrays again"
# Each lookup table with an arrays file, and the table its file is registered as.
# (`occurrence_hashes_arrays` was lineage-arrays/1's; a /2 stream file answers both.)
ARRAY_TABLES = {"occurrences": "occurrences_arrays",
                "document_hashes": "document_hashes_arrays"}
OLD_ARRAY_TABLES = ("occurrence_hashes_arrays",)
# The tables whose parts each file is made from (its record's `parts_digest`)
ARRAY_SOURCES = {"occurrences": ("occurrences",),
                 "document_hashes": ("document_hashes", "documents")}
# The integer kinds: struct letter of each (unsigned where the values are never negative)
INT_KINDS = {"u8": "B", "u16": "H", "u32": "I", "i64": "q"}
WIDTHS = {"u8": 1, "u16": 2, "u32": 4, "i64": 8, "h32": HASH_BYTES}
_NATIVE = sys.byteorder == "little"  # typed views read the machine's order: ours is LE
_STRUCTS = {kind: struct.Struct("<" + letter) for kind, letter in INT_KINDS.items()}
_PAIRS = {kind: struct.Struct("<2" + letter) for kind, letter in INT_KINDS.items()}


class OldArraysError(DamagedPartError):
    """A file registered by an earlier version's format: not read, made again by repair."""

    def __init__(self, path: object, spec: str) -> None:
        super().__init__(path, f"{spec}, a format this version no longer reads", REMEDY)
        self.args = (f"{path}: lookup arrays of {spec}, a format this version no longer "
                     f"reads; {REMEDY}",)

    def __str__(self) -> str:
        return str(self.args[0])


class ArraysRecord:
    """An arrays file as the catalog registers it. (A plain class: a dataclass costs a
    lookup process's start-up about a millisecond to make.)"""

    __slots__ = ("blake3", "corpus_blake3", "head_at", "head_blake3", "n_bytes",
                 "parts_digest", "path")

    def __init__(self, path: str, n_bytes: int, head_at: int, head_blake3: str, blake3: str,
                 parts_digest: str, corpus_blake3: str = "") -> None:
        self.path = path  # relative to the store root
        self.n_bytes = n_bytes
        self.head_at = head_at  # where the head starts
        self.head_blake3 = head_blake3  # hex BLAKE3 of bytes head_at..n_bytes
        self.blake3 = blake3  # hex BLAKE3 of the whole file
        self.parts_digest = parts_digest  # of the parts it was made from
        self.corpus_blake3 = corpus_blake3  # a stream file's: the corpus file it refers to

    @classmethod
    def parse(cls, path: str, n_bytes: int, record: str) -> ArraysRecord:
        fields = json.loads(record)
        spec = fields.get("spec")
        if spec in OLD_SPECS:
            raise OldArraysError(path, str(spec))
        if spec != SPEC:
            raise DamagedPartError(path, f"the catalog's record is not {SPEC}", REMEDY)
        return cls(path, int(n_bytes), int(fields["head_at"]), str(fields["head_blake3"]),
                   str(fields["blake3"]), str(fields["parts_digest"]),
                   str(fields.get("corpus_blake3", "")))

    def to_json(self) -> str:
        fields = {"spec": SPEC, "head_at": self.head_at, "head_blake3": self.head_blake3,
                  "blake3": self.blake3, "parts_digest": self.parts_digest}
        if self.corpus_blake3:
            fields["corpus_blake3"] = self.corpus_blake3
        return json.dumps(fields)


def parts_digest(parts: Sequence[tuple[str, str]]) -> str:
    """The digest of the parts (path, SHA-256) an arrays file was made from."""
    text = "\n".join(f"{path} {sha256}" for path, sha256 in sorted(parts))
    return blake3.blake3(text.encode("utf-8")).hexdigest()


class ArraysFile:
    """One arrays file open for lookups; every byte it hands out was checked."""

    def __init__(self, record: ArraysRecord, path: Path, data: Any, head: bytes, *,
                 whole: bool) -> None:
        self.record, self.path = record, path
        self._data = data  # a file descriptor (checked by block), or the checked bytes
        self._whole = whole
        self._blocks: dict[int, bytes] = {}  # block -> its checked bytes (by block)
        self._pages: dict[int, bytes] = {}  # page of digests -> its checked bytes
        size = len(head) - TRAILER.size  # the head: page digests, JSON, its length
        (length,) = struct.unpack_from("<I", head, size - 4)
        self.directory: dict[str, Any] = json.loads(head[size - 4 - length:size - 4])
        self.rows = int(self.directory["rows"])
        self._page_digests = bytes(head[:size - 4 - length])
        self._digests_at = int(self.directory["digests_at"])
        self.columns: dict[str, dict[str, Any]] = self.directory["columns"]
        # A mapped file's integer columns as typed views (made on first use): a server's
        # binary search and reads then run in C, not a struct call a value.
        self._views: dict[str, memoryview] = {}

    @classmethod
    def open(cls, root: Path, record: ArraysRecord, *, whole: bool = False) -> ArraysFile:
        """The file of `record`, its head checked (`whole`: every byte, mapped)."""
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
            for view in self._views.values():
                view.release()
            self._views.clear()
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
            return self._data[start:end]  # type: ignore[no-any-return]
        first, last = start // BLOCK, (end - 1) // BLOCK
        missing = [b for b in range(first, last + 1) if b not in self._blocks]
        if missing:
            lo = missing[0] * BLOCK
            hi = min((missing[-1] + 1) * BLOCK, self._digests_at)
            data = _read(self._data, lo, hi, self.record.path)
            for block in missing:
                at = (block - missing[0]) * BLOCK
                piece = data[at:at + BLOCK]
                if blake3.blake3(piece).digest(length=DIGEST_BYTES) != self._digest(block):
                    raise DamagedPartError(self.record.path, f"block {block} (bytes "
                                           f"{block * BLOCK}..) differs from its record",
                                           REMEDY)
                self._blocks[block] = piece
        if first == last:
            return self._blocks[first][start - first * BLOCK:end - first * BLOCK]
        joined = b"".join(self._blocks[b] for b in range(first, last + 1))
        return joined[start - first * BLOCK:end - first * BLOCK]

    def _digest(self, block: int) -> bytes:
        """The recorded digest of a block, from its page of digests (checked once)."""
        at = block * DIGEST_BYTES
        page = at // PAGE
        data = self._pages.get(page)
        if data is None:
            lo = self._digests_at + page * PAGE
            hi = min(lo + PAGE, self.record.head_at)
            data = _read(self._data, lo, hi, self.record.path)
            expected = self._page_digests[page * DIGEST_BYTES:(page + 1) * DIGEST_BYTES]
            if blake3.blake3(data).digest(length=DIGEST_BYTES) != expected:
                raise DamagedPartError(self.record.path, f"digest page {page} (bytes "
                                       f"{lo}..) differs from its record", REMEDY)
            self._pages[page] = data
        return data[at - page * PAGE:at - page * PAGE + DIGEST_BYTES]

    @property
    def mapped(self) -> bool:
        """Whether the file is mapped and was checked whole (a server's): its columns can
        then be read as arrays over its bytes (lineage/store/arrays_mapped.py)."""
        return self._whole and _NATIVE

    def mapped_bytes(self) -> Any:
        """The mapped file (its every byte checked); only where `mapped`."""
        if not self.mapped:
            raise ValueError(f"{self.record.path}: not mapped whole")
        return self._data

    # -- columns ----------------------------------------------------------------------

    def _view(self, name: str) -> memoryview | None:
        """A mapped file's integer column as a typed view (None: read by struct)."""
        view = self._views.get(name)
        if view is None and self._whole and _NATIVE:
            column = self.columns[name]
            kind = column["width"] if column["kind"] == "dict" else column["kind"]
            if kind in INT_KINDS:  # integers, or a dictionary's codes
                at, count = int(column["at"]), int(column["count"])
                whole = memoryview(self._data)
                view = whole[at:at + WIDTHS[kind] * count].cast(
                    INT_KINDS[kind])  # type: ignore[call-overload]
                whole.release()
                self._views[name] = view
        return view

    def values(self, name: str, lo: int, hi: int) -> list[Any]:
        """Values lo..hi of column `name`, as Python values (a content hash as its hex)."""
        column = self.columns[name]
        kind, at = column["kind"], int(column["at"])
        lo, hi = max(lo, 0), min(hi, int(column["count"]))
        if hi <= lo:
            return []
        view = self._view(name) if self._whole else None
        if view is not None:
            if kind == "dict":
                words = column["words"]
                return [words[code] for code in view[lo:hi].tolist()]
            return view[lo:hi].tolist()
        if kind in INT_KINDS:
            width = WIDTHS[kind]
            return list(struct.unpack(f"<{hi - lo}{INT_KINDS[kind]}",
                                      self._bytes(at + width * lo, at + width * hi)))
        if kind == "h32":
            raw = self._bytes(at + HASH_BYTES * lo, at + HASH_BYTES * hi).hex()
            return [raw[i:i + 64] for i in range(0, len(raw), 64)]
        if kind == "dict":
            words = column["words"]
            width = WIDTHS[column["width"]]
            codes = struct.unpack(f"<{hi - lo}{INT_KINDS[column['width']]}",
                                  self._bytes(at + width * lo, at + width * hi))
            return [words[code] for code in codes]
        return self._strings(column, lo, hi)

    def value_at(self, name: str, rows: Sequence[int]) -> list[Any]:
        """Column `name` at each of `rows` (any order, each below its count), as
        `values` gives them: a step's documents are rows scattered over the corpus file,
        so each is read on its own, with nothing made per row but the value."""
        column = self.columns[name]
        kind, at, get = column["kind"], int(column["at"]), self._bytes
        view = self._view(name) if self._whole else None
        if view is not None:
            if kind == "dict":
                words = column["words"]
                return [words[view[r]] for r in rows]
            return [view[r] for r in rows]
        if self._whole:  # the mapped bytes, sliced here: no call a value
            if kind == "h32":
                data = self._data
                return [data[at + HASH_BYTES * r:at + HASH_BYTES * (r + 1)].hex()
                        for r in rows]
            return self._mapped_strings(name, column, rows)
        if kind == "h32":
            self._prefetch([at + HASH_BYTES * r for r in rows], HASH_BYTES)
            return [get(at + HASH_BYTES * r, at + HASH_BYTES * (r + 1)).hex() for r in rows]
        if kind in INT_KINDS or kind == "dict":
            width_kind = column["width"] if kind == "dict" else kind
            width, unpack = WIDTHS[width_kind], _STRUCTS[width_kind].unpack
            self._prefetch([at + width * r for r in rows], width)
            found = [unpack(get(at + width * r, at + width * (r + 1)))[0] for r in rows]
            if kind == "dict":
                words = column["words"]
                return [words[code] for code in found]
            return found
        width, pair = WIDTHS[column["width"]], _PAIRS[column["width"]].unpack
        heap = int(column["heap"])
        self._prefetch([at + width * r for r in rows], 2 * width)
        bounds = [pair(get(at + width * r, at + width * (r + 2))) for r in rows]
        self._prefetch([heap + (start >> 1) for start, _ in bounds],
                       [(end >> 1) - (start >> 1) for start, end in bounds])
        return [None if end & 1 else get(heap + (start >> 1), heap + (end >> 1))
                .decode("utf-8") for start, end in bounds]

    def _prefetch(self, starts: Sequence[int], lengths: int | Sequence[int]) -> None:
        """Ask the kernel for the blocks (and their digest pages) of these byte ranges
        all at once, before they are read one by one: rows scattered over a file that is
        not in the page cache then cost one disk round trip together, not one each
        (a step's documents at 100M: 11,000 reads of 50 us)."""
        if not hasattr(os, "posix_fadvise") or len(starts) < 2:
            return
        spans = zip(starts, [lengths] * len(starts) if isinstance(lengths, int) else lengths,
                    strict=True)
        blocks = sorted({block for start, length in spans if length > 0
                         for block in range(start // BLOCK, (start + length - 1) // BLOCK + 1)}
                        - self._blocks.keys())
        pages = sorted({block * DIGEST_BYTES // PAGE for block in blocks} - self._pages.keys())
        for block in blocks:
            os.posix_fadvise(self._data, block * BLOCK, BLOCK, os.POSIX_FADV_WILLNEED)
        for page in pages:
            os.posix_fadvise(self._data, self._digests_at + page * PAGE, PAGE,
                             os.POSIX_FADV_WILLNEED)

    def _mapped_strings(self, name: str, column: dict[str, Any], rows: Sequence[int],
                        ) -> list[Any]:
        """`value_at` of a string column of a mapped (checked) file: its end offsets
        through a typed view, each value sliced from the heap."""
        ends = self._views.get(name + "/ends")
        if ends is None:
            width = column["width"]
            whole = memoryview(self._data)
            at = int(column["at"])
            ends = whole[at:at + WIDTHS[width] * (int(column["count"]) + 1)].cast(
                INT_KINDS[width])  # type: ignore[call-overload]
            whole.release()
            self._views[name + "/ends"] = ends
        data, heap = self._data, int(column["heap"])
        return [None if (end := ends[r + 1]) & 1 else
                data[heap + (ends[r] >> 1):heap + (end >> 1)].decode() for r in rows]

    def _strings(self, column: dict[str, Any], lo: int, hi: int) -> list[Any]:
        """A string column's values lo..hi: each end offset is `end * 2 + null`."""
        width, letter = WIDTHS[column["width"]], INT_KINDS[column["width"]]
        at = int(column["at"])
        ends = struct.unpack(f"<{hi - lo + 1}{letter}",
                             self._bytes(at + width * lo, at + width * (hi + 1)))
        base = int(column["heap"])
        first = ends[0] >> 1
        text = self._bytes(base + first, base + (ends[-1] >> 1))
        found: list[Any] = []
        start = first
        for end in ends[1:]:
            stop = end >> 1
            found.append(None if end & 1 else text[start - first:stop - first].decode("utf-8"))
            start = stop
        return found

    def search(self, name: str, value: Any, *, right: bool = False) -> int:
        """The first row whose `name` (an ascending column) is above `value` (`right`), or
        not below it: a binary search reading one value a probe."""
        column = self.columns[name]
        key = bytes.fromhex(value) if column["kind"] == "h32" else value
        step = bisect.bisect_right if right else bisect.bisect_left
        if not self._whole:
            return step(_Probe(self, column), key)
        view = self._view(name)
        return step(_MappedHashes(self._data, column) if view is None else view, key)


class _Probe(Sequence[Any]):
    """An ascending column as a sequence bisect can search, each value read when bisect
    asks for it (about log2(n) of them; a command checks the blocks they lie in)."""

    def __init__(self, arrays: ArraysFile, column: dict[str, Any]) -> None:
        self._arrays = arrays
        self._at = int(column["at"])
        self._width = WIDTHS[column["kind"]]
        self._letter = INT_KINDS.get(column["kind"])
        self._length = int(column["count"])

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index: Any) -> Any:
        if not 0 <= index < self._length:
            raise IndexError(index)
        at = self._at + index * self._width
        data = self._arrays._bytes(at, at + self._width)
        if self._letter is None:
            return data
        return struct.unpack("<" + self._letter, data)[0]


class _MappedHashes(Sequence[bytes]):
    """A mapped file's hash column as a sequence bisect can search."""

    def __init__(self, data: Any, column: dict[str, Any]) -> None:
        self._data, self._at, self._length = data, int(column["at"]), int(column["count"])

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index: Any) -> Any:
        at = self._at + HASH_BYTES * index
        return self._data[at:at + HASH_BYTES]


def _read(fd: int, start: int, end: int, name: str) -> bytes:
    data = os.pread(fd, end - start, start)
    if len(data) != end - start:
        raise DamagedPartError(name, f"cut short: bytes {start}..{end} cannot be read",
                               REMEDY)
    return data


def _check(data: bytes, expected: str, name: str, what: str) -> None:
    if blake3.blake3(data).hexdigest() != expected:
        raise DamagedPartError(name, f"{what} differs from the catalog's BLAKE3", REMEDY)
