"""`--verify all`: every document an imported order's windows read, re-read whole from
the token files and compared, token for token, with the corpus document's own tokens.

A window's tokens are pieces of documents in the token files, so comparing each document
the windows read, once and whole, compares every window (a document read in three
epochs is read once here). A token that differs is refused only if a window reads it
(the importer's `locate` says which); a token no window reads was never trained on.

Documents are taken in the corpus's order (input file, then record), a file's records at
a time, so that each input file is read once in order (a compressed shard scanned once
per batch of its records, not once per record) and checked against the content hashes
as `docs` checks them; the token files are read by runs of neighbouring documents.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lineage.corpora.doc_text import StoredDocument, needs_scan, read_all_checked
from lineage.errors import InputError, UsageError
from lineage.ingest.input_rules import open_regular, os_error
from lineage.ingest.orders.corpus_tokens import Encoder
from lineage.store.base import BaseStore
from lineage.store.parts import part_files

if TYPE_CHECKING:
    import duckdb

Array = np.ndarray[Any, Any]
VERIFY = ("sample", "all")  # --verify: the default's sampled windows, or every one
BATCH = 65_536  # documents of one input file read at a time (a compressed one: all)
_GAP = 1 << 16  # tokens between two documents read in one run of a token file


@dataclass(frozen=True)
class TokenFiles:
    """Where each document the windows read is in the token files."""

    paths: list[Path]
    dtypes: list[np.dtype[Any]]  # each file's token type
    file: Array  # per document: its token file (index into paths)
    start: Array  # per document: its first token's element offset in that file
    rids: Array  # per document: its corpus row (doc_id order)
    n_tokens: Array  # per document: the corpus's token count (compared: that many tokens)
    eod: int | None = None  # a token each document is followed by in the files, if known


# (document, differing token offsets) -> what a window read there, or None if none did
Locate = Callable[[int, Array], str | None]


def reread_all(store: BaseStore, corpus: str, encode: Encoder, files: TokenFiles,
               locate: Locate) -> dict[str, Any]:
    """Compare every document; InputError naming the token file, the window and the
    first token that differs. What was compared."""
    with store.reader(views=False) as con:
        places = _corpus_places(con, store, corpus, files.rids)
        compared = 0
        for batch in _batches(places):
            texts = read_all_checked(con, [places[1][i] for i in batch])
            compared += _compare(files, [int(places[0][i]) for i in batch],
                                 [texts[places[1][i].doc_id] for i in batch], encode, locate)
    return {"documents": len(files.rids), "tokens": compared}


def _corpus_places(con: duckdb.DuckDBPyConnection, store: BaseStore, corpus: str,
                   rids: Array) -> tuple[Array, list[StoredDocument]]:
    """Each document's place in the corpus (input file, record, line start), in the
    corpus's order: (the documents' indices in that order, their places)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    documents = part_files(con, store, "documents", corpus)
    lines = part_files(con, store, "text_documents", corpus)
    firsts = np.cumsum([0] + [pq.read_metadata(path).num_rows for path in documents])
    con.register("wanted", pa.table({"k": np.arange(len(rids)), "rid": rids}))
    con.register("part_rows", pa.table({"path": documents, "first": firsts[:-1]}))
    text = ("LEFT JOIN (SELECT doc_id, origin, record, byte_offset FROM read_parquet(?)) t "
            "ON t.doc_id = d.doc_id AND t.origin = d.origin AND t.record = d.record"
            if lines else "")
    offset = "t.byte_offset" if lines else "NULL::BIGINT"
    try:
        found = con.execute(
            f"SELECT w.k, d.doc_id, d.content_hash, d.origin, d.record, {offset} "
            "FROM wanted w JOIN (SELECT p.first + c.file_row_number AS rid, c.doc_id, "
            "c.content_hash, c.origin, c.record FROM read_parquet(?, filename = true, "
            "file_row_number = true) c JOIN part_rows p ON p.path = c.filename) d "
            f"USING (rid) {text} ORDER BY d.origin, d.record, w.k",
            [documents, *([lines] if lines else [])]).fetchall()
    finally:
        con.unregister("wanted")
        con.unregister("part_rows")
    order = np.array([row[0] for row in found], dtype=np.int64)
    places = [StoredDocument(row[1], row[2], row[3], row[4], row[5]) for row in found]
    return order, places


def _batches(places: tuple[Array, list[StoredDocument]]) -> list[list[int]]:
    """Positions into `places`, a file's records at a time (all of a compressed file's)."""
    out: list[list[int]] = []
    for i, place in enumerate(places[1]):
        whole = needs_scan(place)
        if out and places[1][out[-1][-1]].origin == place.origin and (
                whole or len(out[-1]) < BATCH):
            out[-1].append(i)
        else:
            out.append([i])
    return out


def _compare(files: TokenFiles, docs: list[int], texts: list[bytes], encode: Encoder,
             locate: Locate) -> int:
    """Documents `docs` (with their corpus bytes `texts`) against the token files."""
    found = _read_tokens(files, docs)
    compared = 0
    for k, text, tokens in zip(docs, texts, found, strict=True):
        expected = encode(text)
        count = int(files.n_tokens[k])
        if len(expected) != count:
            raise InputError("corpus", f"a document re-tokenizes to {len(expected)} tokens, "
                             f"not the {count} the corpus recorded")
        if files.eod is not None:
            expected = np.append(expected.astype(np.int64), files.eod)
        differs = np.flatnonzero(tokens[:len(expected)] != expected)
        if len(differs):
            where = locate(k, differs)
            if where is not None:
                path = files.paths[int(files.file[k])]
                raise InputError(path, f"{where}: token {int(differs[0])} differs from the "
                                 "corpus document's (--verify all; nothing stored)")
        compared += len(expected)
    return compared


def _read_tokens(files: TokenFiles, docs: list[int]) -> list[Array]:
    """Each document's tokens (its count, + 1 with an EOD), read by runs of neighbours."""
    extra = int(files.eod is not None)
    keys = sorted(range(len(docs)), key=lambda i: (int(files.file[docs[i]]),
                                                   int(files.start[docs[i]])))
    out: list[Array] = [np.zeros(0)] * len(docs)
    run: list[int] = []
    for i in keys:
        if run and not _neighbours(files, docs[run[-1]], docs[i], extra):
            _read_run(files, [docs[j] for j in run], run, out, extra)
            run = []
        run.append(i)
    if run:
        _read_run(files, [docs[j] for j in run], run, out, extra)
    return out


def _neighbours(files: TokenFiles, a: int, b: int, extra: int) -> bool:
    end = int(files.start[a]) + int(files.n_tokens[a]) + extra
    return bool(files.file[a] == files.file[b] and files.start[b] - end <= _GAP)


def _read_run(files: TokenFiles, docs: list[int], slots: list[int], out: list[Array],
              extra: int) -> None:
    path = files.paths[int(files.file[docs[0]])]
    first = int(files.start[docs[0]])
    last = max(int(files.start[k]) + int(files.n_tokens[k]) + extra for k in docs)
    span = read_elements(path, files.dtypes[int(files.file[docs[0]])], first, last)
    for k, slot in zip(docs, slots, strict=True):
        begin = int(files.start[k]) - first
        out[slot] = span[begin:begin + int(files.n_tokens[k]) + extra]


def read_elements(path: Path, dtype: np.dtype[Any], first: int, last: int) -> Array:
    """Elements [first, last) of a raw little-endian token file, by pread (no memory
    map: a file cut short meanwhile is an error here, not a crash)."""
    size = dtype.itemsize
    fd = open_regular(path)
    try:
        data = os.pread(fd, (last - first) * size, first * size)
    except OSError as exc:
        raise os_error(path, exc) from exc
    finally:
        os.close(fd)
    if len(data) != (last - first) * size:
        raise InputError(path, f"ends before token {last} (cut short while read?)")
    return np.frombuffer(data, dtype=dtype.newbyteorder("<")).astype(np.int64)


def check_verify(verify: str) -> None:
    if verify not in VERIFY:
        raise UsageError(f"--verify {verify!r}: expected one of {', '.join(VERIFY)}")
