"""OLMo-core's token files and the documents in them.

A token file is a raw array of token IDs (what `np.memmap` reads: no header, despite the
`.npy` name), documents back to back, each ended by the EOS token. Document boundaries
come from Dolma's metadata sidecar beside the file (`<name>.csv.gz`, one line
`start,end[,id,...]` per document, `end` just past its EOS) when there is one, else from
the EOS tokens themselves, as OLMo-core's `iter_document_indices` finds them (with a BOS
token, an EOS closes a document only when a BOS follows it). A document's content is its
tokens without the closing EOS (and without the opening BOS, when the run has one): what
the corpus counted.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from lineage.errors import InputError, UsageError

if TYPE_CHECKING:
    import pyarrow as pa

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


@dataclass(frozen=True)
class Layout:
    """Every document of the token files in one coordinate: file `f`'s token `t` is at
    `bases[f] + t`; document `k` holds content `[starts[k], ends[k])` there."""

    bases: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    doc_ids: pa.ChunkedArray  # strings: a doc_id per document, never a Python str each
    firsts: np.ndarray  # the index of each file's first document
    boundaries: str  # "sidecar", "eos" or both

    def where(self, k: int) -> tuple[int, int]:
        """(file, document within it) of document `k`."""
        f = int(np.searchsorted(self.firsts, k, side="right")) - 1
        return f, k - int(self.firsts[f])


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
    ids: pa.ChunkedArray | None  # strings
    source: str  # "sidecar" or "eos"


def documents_of(file: TokenFile, eos_token_id: int,
                 bos_token_id: int | None = None) -> FileDocuments:
    found = (_from_sidecar(file, eos_token_id) if file.sidecar.is_file() else
             _from_eos(file, eos_token_id, bos_token_id))
    return found if bos_token_id is None else _without_bos(file, found, bos_token_id)


def closing_eos(tokens: np.ndarray, eos_token_id: int, bos_token_id: int | None = None
                ) -> np.ndarray:
    """The positions of the EOS tokens that close a document, as OLMo-core's
    `iter_document_indices` finds them: every EOS, or, with a BOS token, an EOS followed
    by a BOS (or ending the file)."""
    closing = tokens == eos_token_id
    if bos_token_id is not None and len(tokens):
        closing[:-1] &= tokens[1:] == bos_token_id
    return np.flatnonzero(closing).astype(np.int64)


def _from_eos(file: TokenFile, eos_token_id: int,
              bos_token_id: int | None = None) -> FileDocuments:
    """Each closing EOS ends a document; tokens after the last are a last, unclosed one."""
    eos = closing_eos(file.tokens(), eos_token_id, bos_token_id)
    starts = np.concatenate(([0], eos + 1)).astype(np.int64)
    ends = np.concatenate((eos, [file.n_tokens])).astype(np.int64)
    if starts[-1] >= file.n_tokens:  # the file ends with an EOS: no unclosed tail
        starts, ends = starts[:-1], ends[:-1]
    return FileDocuments(starts, ends, None, "eos")


def _without_bos(file: TokenFile, found: FileDocuments, bos_token_id: int) -> FileDocuments:
    """A document opened by BOS holds its content from the token after it."""
    if not len(found.starts):
        return found
    spans = found.starts < found.ends  # the BOS is the first of a span's tokens
    first = file.tokens()[np.where(spans, found.starts, 0)]
    missing = np.flatnonzero(~spans | (first != bos_token_id))
    if len(missing):
        d = int(missing[0])
        raise InputError(file.path, f"document {d} (from token {int(found.starts[d])}) does "
                         f"not open with the BOS token {bos_token_id}")
    return FileDocuments(found.starts + 1, found.ends, found.ids, found.source)


def _from_sidecar(file: TokenFile, eos_token_id: int) -> FileDocuments:
    begin, recorded, ids = _read_sidecar(file.sidecar)
    bad = np.flatnonzero((begin < 0) | (recorded <= begin) | (recorded > file.n_tokens))
    if len(bad):
        row = int(bad[0])
        raise InputError(file.sidecar, f"document [{begin[row]}, {recorded[row]}) is not "
                         f"inside the {file.n_tokens} tokens of {file.path.name}",
                         where=f"line {row + 1}")
    overlap = np.flatnonzero(begin[1:] < recorded[:-1])
    if len(overlap):
        row = int(overlap[0]) + 1
        raise InputError(file.sidecar, f"document at {begin[row]} overlaps the one before",
                         where=f"line {row + 1}")
    # The recorded end is just past the EOS: the content stops before it.
    closed = file.tokens()[recorded - 1] == eos_token_id if len(recorded) else recorded
    return FileDocuments(begin, recorded - closed.astype(np.int64), ids, "sidecar")


def _read_sidecar(path: Path) -> tuple[np.ndarray, np.ndarray, pa.ChunkedArray | None]:
    """start, end and (when the third column is there and filled) id of each line."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    try:
        table = pcsv.read_csv(
            path, read_options=pcsv.ReadOptions(autogenerate_column_names=True),
            convert_options=pcsv.ConvertOptions(column_types={
                "f0": pa.int64(), "f1": pa.int64(), "f2": pa.string()}))
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(path, f"expected lines 'start,end[,id,...]' ({exc})") from exc
    if table.num_rows == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), pa.chunked_array([], pa.string())
    if table.num_columns < 2 or table.column(0).null_count or table.column(1).null_count:
        raise InputError(path, "expected lines 'start,end[,id,...]'")
    ids = None
    if table.num_columns > 2 and table.column(2).null_count == 0:
        ids = table.column(2)  # kept in Arrow: 1M ids as Python strings cost ~0.3 s
    named = ids is not None and pc.min(pc.binary_length(ids)).as_py() > 0  # none empty
    return (table.column(0).to_numpy().astype(np.int64),
            table.column(1).to_numpy().astype(np.int64), ids if named else None)


def short_names(files: list[TokenFile]) -> list[str]:
    """Each file's path below the files' common folder ('/'-separated): its name when
    they share one folder, enough to tell apart same-named files of different sources."""
    import os

    folders = [str(file.path.resolve().parent) for file in files]
    common = Path(os.path.commonpath(folders)) if folders else Path()
    return [file.path.resolve().relative_to(common).as_posix() for file in files]


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
