"""OLMo-core's token files and the documents in them.

A token file is a raw array of token IDs (what `np.memmap` reads: no header, despite the
`.npy` name), documents back to back, each ended by the EOS token. Document boundaries
come from Dolma's metadata sidecar beside the file (`<name>.csv.gz`, one line
`start,end[,id,...]` per document, `end` just past its EOS) when there is one, else from
the EOS tokens themselves, as OLMo-core's `iter_document_indices` finds them. A
document's content is its tokens without the closing EOS: what the corpus counted.
"""

from __future__ import annotations

import csv
import gzip
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lineage.errors import InputError, UsageError

DTYPES = ("uint8", "uint16", "uint32", "uint64")


@dataclass(frozen=True)
class TokenFile:
    """One token array on disk."""

    path: Path
    dtype: np.dtype
    n_tokens: int

    def tokens(self) -> np.ndarray:
        if self.n_tokens == 0:
            return np.zeros(0, dtype=self.dtype)
        return np.memmap(self.path, mode="r", dtype=self.dtype)

    @property
    def sidecar(self) -> Path:
        """Dolma's metadata file: the same name with `.npy` turned into `.csv.gz`."""
        return self.path.with_name(self.path.name.replace(".npy", ".csv.gz"))


def open_token_file(path: Path, dtype: str) -> TokenFile:
    if dtype not in DTYPES:
        raise UsageError(f"--dtype {dtype!r}: expected one of {', '.join(DTYPES)}")
    kind = np.dtype(dtype)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise InputError(path, f"cannot read the token file ({exc.strerror or exc})") from exc
    if size % kind.itemsize:
        raise InputError(path, f"{size} bytes is not a whole number of {dtype} tokens")
    return TokenFile(path, kind, size // kind.itemsize)


@dataclass(frozen=True)
class FileDocuments:
    """The documents of one token file: content token ranges `[starts, ends)` (EOS
    excluded) and, when the sidecar names them, their ids."""

    starts: np.ndarray  # int64
    ends: np.ndarray  # int64
    ids: list[str] | None
    source: str  # "sidecar" or "eos"


def documents_of(file: TokenFile, eos_token_id: int) -> FileDocuments:
    if file.sidecar.is_file():
        return _from_sidecar(file, eos_token_id)
    return _from_eos(file, eos_token_id)


def _from_eos(file: TokenFile, eos_token_id: int) -> FileDocuments:
    """Each EOS closes a document; tokens after the last EOS are a last, unclosed one."""
    eos = np.flatnonzero(file.tokens() == eos_token_id).astype(np.int64)
    starts = np.concatenate(([0], eos + 1)).astype(np.int64)
    ends = np.concatenate((eos, [file.n_tokens])).astype(np.int64)
    if starts[-1] >= file.n_tokens:  # the file ends with an EOS: no unclosed tail
        starts, ends = starts[:-1], ends[:-1]
    return FileDocuments(starts, ends, None, "eos")


def _from_sidecar(file: TokenFile, eos_token_id: int) -> FileDocuments:
    starts: list[int] = []
    ends: list[int] = []
    ids: list[str] = []
    with gzip.open(file.sidecar, "rt", encoding="utf-8", newline="") as handle:
        for line, row in enumerate(csv.reader(handle), start=1):
            start, end = _bounds(file, row, line)
            if starts and start < ends[-1]:
                raise InputError(file.sidecar, f"document at {start} overlaps the one before",
                                 where=f"line {line}")
            starts.append(start)
            ends.append(end)
            ids.append(row[2] if len(row) > 2 else "")
    begin = np.array(starts, dtype=np.int64)
    recorded = np.array(ends, dtype=np.int64)
    # The recorded end is just past the EOS: the content stops before it.
    closed = file.tokens()[recorded - 1] == eos_token_id if len(recorded) else recorded
    content_end = recorded - closed.astype(np.int64)
    named = ids if ids and all(ids) else None
    return FileDocuments(begin, content_end, named, "sidecar")


def _bounds(file: TokenFile, row: list[str], line: int) -> tuple[int, int]:
    try:
        start, end = int(row[0]), int(row[1])
    except (IndexError, ValueError):
        raise InputError(file.sidecar, "expected 'start,end[,id,...]'",
                         where=f"line {line}") from None
    if not 0 <= start < end <= file.n_tokens:
        raise InputError(file.sidecar, f"document [{start}, {end}) is outside the "
                         f"{file.n_tokens} tokens of {file.path.name}", where=f"line {line}")
    return start, end


def read_doc_ids(path: Path) -> list[str]:
    """A mapping file: one corpus doc_id per line, the documents of the token files in
    order (file by file, as the files are listed)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(path, f"cannot read the doc_id list ({exc})") from exc
    if any(not line for line in lines):
        raise InputError(path, "an empty line: one doc_id per line, no blanks")
    return lines
