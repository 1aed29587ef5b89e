"""Write one lookup arrays file (lineage/store/arrays.py) from rows that arrive in
batches: memory holds a batch, never a column.

Each column's values go to a scratch file of its own as they arrive (`Spool`: int64
integers with their least and greatest value, raw content hashes, a string's bytes and
end offsets, a small dictionary's codes); once the last batch is in, each scratch file is
copied into the arrays file at the narrowest width its values fit (`assemble`), a chunk
at a time, and the blocks' and pages' digests are made on the way.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import blake3

from lineage.store.arrays import (
    BLOCK,
    DIGEST_BYTES,
    MAGIC,
    PAGE,
    SPEC,
    TRAILER,
    ArraysRecord,
)

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

COPY_VALUES = 1 << 20  # values copied from a scratch file at a time (8 MiB of int64)
MAX_DICTIONARY = 1024  # a string column with at most this many values is stored as codes
_LIMITS = (("u8", 1 << 8), ("u16", 1 << 16), ("u32", 1 << 32))


def int_kind(least: int, greatest: int) -> str:
    """The narrowest kind that holds every value of [least, greatest]."""
    if least >= 0:
        for kind, limit in _LIMITS:
            if greatest < limit:
                return kind
    return "i64"


class Spool:
    """A column's values in a scratch file, in row order."""

    def __init__(self, name: str, folder: Path) -> None:
        self.name = name
        self.count = 0
        self.path = folder / f"{name}.spool"
        self._out: BinaryIO = open(self.path, "wb")  # noqa: SIM115  (closed by `close`)

    def close(self) -> None:
        if not self._out.closed:
            self._out.close()

    def copy_into(self, body: Body) -> dict[str, Any]:  # pragma: no cover (abstract)
        raise NotImplementedError


def close_spools(spools: Iterable[Spool]) -> None:
    """Close every spool, then raise the first error a close met (a full disk fails the
    flush of the data each still buffers): none is left open."""
    failed: BaseException | None = None
    for spool in spools:
        try:
            spool.close()
        except BaseException as exc:
            failed = failed or exc
    if failed is not None:
        raise failed


class IntSpool(Spool):
    """Integers, spooled as int64; copied at the narrowest width their range fits."""

    def __init__(self, name: str, folder: Path) -> None:
        super().__init__(name, folder)
        self.least, self.greatest = 0, 0

    def add(self, values: np.ndarray) -> None:
        import numpy as np

        values = np.ascontiguousarray(values, dtype="<i8")
        if len(values):
            low, high = int(values.min()), int(values.max())
            if self.count == 0:
                self.least, self.greatest = low, high
            else:
                self.least, self.greatest = min(self.least, low), max(self.greatest, high)
        self._out.write(values.tobytes())
        self.count += len(values)

    def kind(self) -> str:
        return int_kind(self.least, self.greatest)

    def copy_into(self, body: Body) -> dict[str, Any]:
        self.close()
        kind = self.kind()
        entry = {"kind": kind, "at": body.at, "count": self.count}
        _copy_narrowed(self.path, kind, body)
        return entry


class HashSpool(Spool):
    """Content hashes (64 lowercase hex each), spooled and copied as their 32 bytes."""

    def add(self, hexes: pa.Array) -> None:

        _, raw = _utf8_run(hexes)
        self._out.write(bytes.fromhex(raw.decode("ascii")))
        self.count += len(hexes)

    def copy_into(self, body: Body) -> dict[str, Any]:
        self.close()
        entry = {"kind": "h32", "at": body.at, "count": self.count}
        with open(self.path, "rb") as source:
            while chunk := source.read(COPY_VALUES * 8):
                body.write(chunk)
        return entry


class StrSpool(Spool):
    """Strings: their UTF-8 bytes end to end, and each one's end (`end * 2 + null`)."""

    def __init__(self, name: str, folder: Path) -> None:
        super().__init__(name, folder)
        self.heap_path = folder / f"{name}.heap"
        self._heap: BinaryIO = open(self.heap_path, "wb")  # noqa: SIM115
        self.heap_bytes = 0
        self._out.write(struct.pack("<q", 0))  # the first value starts at 0

    def add(self, strings: pa.Array) -> None:
        import numpy as np
        import pyarrow as pa

        text = strings.cast(pa.large_string())
        offsets, heap = _utf8_run(text)
        self._heap.write(heap)
        ends = (offsets[1:] - offsets[0] + self.heap_bytes) * 2
        if text.null_count:
            ends = ends + text.is_null().to_numpy(zero_copy_only=False).astype("<i8")
        self._out.write(np.ascontiguousarray(ends, dtype="<i8").tobytes())
        self.heap_bytes += int(offsets[-1] - offsets[0])
        self.count += len(text)

    def close(self) -> None:
        try:
            super().close()
        finally:  # a full disk fails the first flush: the heap is closed all the same
            if not self._heap.closed:
                self._heap.close()

    def copy_into(self, body: Body) -> dict[str, Any]:
        self.close()
        width = int_kind(0, self.heap_bytes * 2 + 1)
        entry: dict[str, Any] = {"kind": "str", "width": width, "at": body.at,
                                 "count": self.count}
        _copy_narrowed(self.path, width, body)
        entry["heap"] = body.at
        with open(self.heap_path, "rb") as source:
            while chunk := source.read(COPY_VALUES * 8):
                body.write(chunk)
        return entry


class DictSpool(Spool):
    """Strings of few distinct values: codes into a dictionary (in order of first
    appearance); past MAX_DICTIONARY values, the rows so far are written again as
    strings and the column goes on as one."""

    def __init__(self, name: str, folder: Path) -> None:
        super().__init__(name, folder)
        self.folder = folder
        self.words: list[str | None] = []
        self._codes: dict[str | None, int] = {}
        self.strings: StrSpool | None = None

    def add(self, strings: pa.Array) -> None:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        if self.strings is not None:
            self.strings.add(strings)
            self.count += len(strings)
            return
        encoded = pc.dictionary_encode(strings.cast(pa.large_string()))
        local = encoded.dictionary.to_pylist()
        for word in local:
            self._codes.setdefault(word, len(self._codes))
        if strings.null_count:
            self._codes.setdefault(None, len(self._codes))
        if len(self._codes) > MAX_DICTIONARY:
            self.strings = self._to_strings()
            self.strings.add(strings)
            self.count += len(strings)
            return
        self.words = list(self._codes)
        remap = np.array([self._codes[w] for w in local] or [0], dtype="<u4")
        indices = encoded.indices.fill_null(0).to_numpy(zero_copy_only=False)
        codes = remap[indices]
        if strings.null_count:
            nulls = strings.is_null().to_numpy(zero_copy_only=False)
            codes[nulls] = self._codes[None]
        self._out.write(np.ascontiguousarray(codes, dtype="<u4").tobytes())
        self.count += len(strings)

    def _to_strings(self) -> StrSpool:
        import numpy as np
        import pyarrow as pa

        self.close()
        words = pa.array(self.words, type=pa.large_string())
        strings = StrSpool(f"{self.name}-strings", self.folder)
        with open(self.path, "rb") as source:
            while chunk := source.read(COPY_VALUES * 4):
                strings.add(words.take(pa.array(np.frombuffer(chunk, dtype="<u4"))))
        return strings

    def close(self) -> None:
        try:
            super().close()
        finally:
            if self.strings is not None:
                self.strings.close()

    def copy_into(self, body: Body) -> dict[str, Any]:
        if self.strings is not None:
            return self.strings.copy_into(body)
        self.close()
        width = int_kind(0, max(len(self.words) - 1, 0))
        entry = {"kind": "dict", "width": width, "words": self.words, "at": body.at,
                 "count": self.count}
        import numpy as np

        with open(self.path, "rb") as source:
            while chunk := source.read(COPY_VALUES * 4):
                body.write(np.frombuffer(chunk, dtype="<u4").astype(_DTYPES[width]).tobytes())
        return entry


_DTYPES = {"u8": "<u1", "u16": "<u2", "u32": "<u4", "i64": "<i8"}


def _copy_narrowed(path: Path, kind: str, body: Body) -> None:
    import numpy as np

    with open(path, "rb") as source:
        while chunk := source.read(COPY_VALUES * 8):
            body.write(np.frombuffer(chunk, dtype="<i8").astype(_DTYPES[kind]).tobytes())


class Body:
    """The file as it is written: its SHA-256 and BLAKE3, and each block's digest."""

    def __init__(self, handle: BinaryIO, digests: BinaryIO) -> None:
        self.handle, self.at = handle, 0
        self.sha256, self.blake3 = hashlib.sha256(), blake3.blake3()
        self._digests = digests  # each block's digest, spooled (4 MiB a GiB of columns)
        self._block = bytearray()

    def write(self, data: bytes) -> None:
        self._raw(data)
        view = memoryview(data)
        if self._block:  # fill the block begun by the last write
            take = BLOCK - len(self._block)
            self._block += view[:take]
            view = view[take:]
            if len(self._block) == BLOCK:
                self._digests.write(_digest(self._block))
                self._block = bytearray()
        whole = len(view) - len(view) % BLOCK
        for at in range(0, whole, BLOCK):
            self._digests.write(_digest(view[at:at + BLOCK]))
        self._block += view[whole:]

    def _raw(self, data: bytes) -> None:
        self.handle.write(data)
        self.sha256.update(data)
        self.blake3.update(data)
        self.at += len(data)

    def end_columns(self) -> None:
        if self._block:
            self._digests.write(_digest(self._block))
            self._block = bytearray()

    def write_unblocked(self, data: bytes) -> None:
        """Bytes after the columns (the digests, the head): not in any block."""
        self._raw(data)


def _digest(data: Any) -> bytes:
    return blake3.blake3(data).digest(length=DIGEST_BYTES)


@dataclass
class Written:
    temp: Path
    n_bytes: int
    sha256: str
    record: ArraysRecord
    rows: int


def assemble(temp: Path, folder: Path, kind: str, rows: int, spools: Sequence[Spool],
             extra: dict[str, Any]) -> Written:
    """Write the arrays file `temp` from `spools` (in that order), with `extra` in its
    directory (`kind`: "corpus" or "stream"; `rows`: its rows). Not fsynced."""
    digests_path = folder / "blocks.digests"
    directory: dict[str, Any] = {"spec": SPEC, "kind": kind, "rows": rows, "block": BLOCK,
                                 "page": PAGE, **extra, "columns": {}}
    with open(temp, "wb") as handle, open(digests_path, "w+b") as digests:
        body = Body(handle, digests)
        for spool in spools:
            directory["columns"][spool.name] = spool.copy_into(body)
        body.end_columns()
        directory["digests_at"] = body.at
        digests.seek(0)
        pages = bytearray()
        while page := digests.read(PAGE):
            body.write_unblocked(page)
            pages += _digest(page)
        head_at = body.at
        text = json.dumps(directory, separators=(",", ":"), sort_keys=True).encode("utf-8")
        head = bytes(pages) + text + struct.pack("<I", len(text)) + TRAILER.pack(
            head_at, MAGIC)
        body.write_unblocked(head)
    digests_path.unlink(missing_ok=True)
    n_bytes = head_at + len(head)
    record = ArraysRecord("", n_bytes, head_at, blake3.blake3(head).hexdigest(),
                          body.blake3.hexdigest(), "")
    return Written(temp, n_bytes, body.sha256.hexdigest(), record, rows)


def _utf8_run(strings: pa.Array) -> tuple[Any, bytes]:
    """A string array's end offsets (int64, one more than its values) and the UTF-8 bytes
    of its values end to end, copied from the one range of its data buffer they span."""
    import numpy as np
    import pyarrow as pa

    text = strings.cast(pa.large_string())
    offsets = np.frombuffer(text.buffers()[1], dtype="<i8")[
        text.offset:text.offset + len(text) + 1]
    data = text.buffers()[2]
    if data is None or not len(text):
        return offsets, b""
    start, stop = int(offsets[0]), int(offsets[-1])
    return offsets, data.slice(start, stop - start).to_pybytes()

