"""Megatron's indexed dataset (`PREFIX.idx` + `PREFIX.bin`), read with numpy alone.

The `.idx` (megatron/core/datasets/indexed_dataset.py, `_IndexWriter`), little-endian:

    magic            9 bytes   b"MMIDIDX\\x00\\x00"
    version          uint64    1
    dtype code       uint8     1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64,
                               7 float32, 8 uint16 (the token type of the .bin)
    sequence count   uint64    S
    document count   uint64    D (= documents + 1)
    sequence_lengths int32[S]  tokens of each sequence
    sequence_pointers int64[S] byte offset of each sequence in the .bin
    document_indices int64[D]  first sequence of each document, then S

The `.bin` is the sequences' tokens back to back. Every rule is checked on read: the
magic, version and type, the file's exact size, pointers that follow the lengths, the
`.bin`'s size, and document indices that run from 0 to S without going back.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lineage.errors import InputError
from lineage.ingest.input_rules import open_regular, os_error

if TYPE_CHECKING:
    import numpy as np

MAGIC = b"MMIDIDX\x00\x00"
VERSION = 1
DTYPE_CODES = {1: "uint8", 2: "int8", 3: "int16", 4: "int32", 5: "int64", 6: "float64",
               7: "float32", 8: "uint16"}
_HEADER = struct.Struct("<9sQBQQ")


@dataclass(frozen=True)
class IndexedDataset:
    """One indexed dataset's index, with its `.bin` for reading tokens back."""

    idx: Path
    bin: Path
    dtype: str
    idx_hash: str  # 'blake3:<hex>' of the .idx as read
    sequence_lengths: np.ndarray[Any, Any]  # int32
    sequence_pointers: np.ndarray[Any, Any]  # int64
    document_indices: np.ndarray[Any, Any]  # int64

    @property
    def sequences(self) -> int:
        return len(self.sequence_lengths)

    def tokens(self, sequence: int, start: int, end: int) -> np.ndarray[Any, Any]:
        """Tokens [start, end) of one sequence, read from the `.bin` (no memory map: a
        file truncated meanwhile must be an error, not a crash)."""
        import numpy as np

        itemsize = np.dtype(self.dtype).itemsize
        offset = int(self.sequence_pointers[sequence]) + start * itemsize
        fd = open_regular(self.bin)
        try:
            data = os.pread(fd, (end - start) * itemsize, offset)
        except OSError as exc:
            raise os_error(self.bin, exc) from exc
        finally:
            os.close(fd)
        if len(data) != (end - start) * itemsize:
            raise InputError(self.bin, f"ends inside sequence {sequence} (truncated)")
        return np.frombuffer(data, dtype=np.dtype(self.dtype).newbyteorder("<"))


def read_indexed(prefix: Path) -> IndexedDataset:
    """The index of `PREFIX.idx`, checked against itself and against `PREFIX.bin`."""
    import numpy as np

    idx, bin_ = prefix.with_name(prefix.name + ".idx"), prefix.with_name(prefix.name + ".bin")
    digest, data = _read(idx)
    if len(data) < _HEADER.size or data[:9] != MAGIC:
        raise InputError(idx, "not a Megatron indexed-dataset index (magic MMIDIDX missing)")
    _, version, code, count, documents = _HEADER.unpack_from(data)
    if version != VERSION:
        raise InputError(idx, f"index version {version}; this reader knows version {VERSION}")
    if code not in DTYPE_CODES:
        raise InputError(idx, f"unknown token type code {code}")
    expected = _HEADER.size + count * (4 + 8) + documents * 8
    if len(data) != expected:
        raise InputError(idx, f"{len(data)} bytes where the header's counts make {expected} "
                         "(truncated, or a multimodal index, which is not read)")
    at = _HEADER.size
    lengths = np.frombuffer(data, dtype="<i4", count=count, offset=at)
    pointers = np.frombuffer(data, dtype="<i8", count=count, offset=at + 4 * count)
    document_indices = np.frombuffer(data, dtype="<i8", count=documents, offset=at + 12 * count)
    dataset = IndexedDataset(idx, bin_, DTYPE_CODES[code], digest, lengths, pointers,
                             document_indices)
    _check(dataset)
    return dataset


def _read(path: Path) -> tuple[str, bytes]:
    from lineage.ingest.input_rules import hash_regular

    if not path.exists():
        raise InputError(path, "no such file")
    digest, _, data = hash_regular(path, keep=True, keep_big=True)
    return "blake3:" + str(digest), data or b""


def _check(dataset: IndexedDataset) -> None:
    import numpy as np

    itemsize = np.dtype(dataset.dtype).itemsize
    lengths, pointers = dataset.sequence_lengths, dataset.sequence_pointers
    if len(lengths) and int(lengths.min()) < 0:
        raise InputError(dataset.idx, f"sequence {int(np.argmin(lengths))} has a negative length")
    ends = np.cumsum(lengths.astype(np.int64) * itemsize)
    starts = np.concatenate(([0], ends[:-1])) if len(ends) else ends
    wrong = np.flatnonzero(pointers != starts)
    if len(wrong):
        raise InputError(dataset.idx, f"sequence {int(wrong[0])} starts at byte "
                         f"{int(pointers[wrong[0]])}, not where the one before it ends "
                         f"({int(starts[wrong[0]])})")
    indices = dataset.document_indices
    if not len(indices) or indices[0] != 0 or indices[-1] != len(lengths) or \
            bool(np.any(np.diff(indices) < 0)):
        raise InputError(dataset.idx, "document indices must run from 0 to the sequence "
                         f"count ({len(lengths)}) without going back")
    size = int(ends[-1]) if len(ends) else 0
    if not dataset.bin.exists():
        raise InputError(dataset.bin, "no such file (the .idx's tokens)")
    actual = dataset.bin.stat().st_size
    if actual != size:
        raise InputError(dataset.bin, f"{actual} bytes where the .idx's lengths make {size}")
