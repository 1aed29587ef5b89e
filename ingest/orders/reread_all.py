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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lineage.corpora.corpus_tokens import Encoder
from lineage.corpora.doc_text import StoredDocument, needs_scan, read_all_checked
from lineage.errors import InputError, UsageError
from lineage.ingest.input_rules import open_regular, os_error
from lineage.store.base import BaseStore
from lineage.store.part_select import part_files

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

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
        order, places = _corpus_places(con, store, corpus, files.rids)
        compared, done = 0, 0
        for batch in _batches(places.drop_columns([places.column_names[0]])):
            texts = read_all_checked(con, batch)
            docs = order[done:done + len(batch)].tolist()
            compared += _compare(files, docs, [texts[d.doc_id] for d in batch], encode,
                                 locate)
            done += len(batch)
    return {"documents": len(files.rids), "tokens": compared}


def _corpus_places(con: duckdb.DuckDBPyConnection, store: BaseStore, corpus: str,
                   rids: Array) -> tuple[Array, pa.Table]:
    """Each document's place in the corpus (doc_id, content hash, input file, record,
    line start), in the corpus's order: (the documents' indices in that order, the
    places as a table of those columns)."""
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
        found = con.sql(
            f"SELECT w.k, d.doc_id, d.content_hash, d.origin, d.record, {offset} "
            "FROM wanted w JOIN (SELECT p.first + c.file_row_number AS rid, c.doc_id, "
            "c.content_hash, c.origin, c.record FROM read_parquet(?, filename = true, "
            "file_row_number = true) c JOIN part_rows p ON p.path = c.filename) d "
            f"USING (rid) {text} ORDER BY d.origin, d.record, w.k",
            params=[documents, *([lines] if lines else [])]).to_arrow_table()
    finally:
        con.unregister("wanted")
        con.unregister("part_rows")
    order = np.asarray(found.column(0).to_numpy(), dtype=np.int64)
    return order, found


def _batches(places: pa.Table) -> Iterator[list[StoredDocument]]:
    """The places (doc_id, content hash, origin, record, line start), a file's records
    at a time: up to BATCH, or all of a compressed file's (read by one scan)."""
    origin = places.column(2).dictionary_encode().combine_chunks().indices
    codes = np.asarray(origin.fill_null(-1).to_numpy(zero_copy_only=False))
    bounds = np.concatenate(([0], np.flatnonzero(codes[1:] != codes[:-1]) + 1,
                             [len(codes)])).tolist()
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        first = StoredDocument(*places.slice(lo, 1).to_pylist()[0].values())
        step = hi - lo if needs_scan(first) else BATCH
        for start in range(lo, hi, step):
            rows = places.slice(start, min(step, hi - start)).to_pylist()
            yield [StoredDocument(*row.values()) for row in rows]


def _compare(files: TokenFiles, docs: list[int], texts: list[bytes], encode: Encoder,
             locate: Locate) -> int:
    """Documents `docs` (with their corpus bytes `texts`) against the token files: one
    comparison of the batch's tokens laid end to end, in token-file order."""
    picked = np.asarray(docs, dtype=np.int64)
    order = np.lexsort((files.start[picked], files.file[picked]))
    picked = picked[order]
    encoded = [encode(texts[i]) for i in order.tolist()]
    counts = files.n_tokens[picked]
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
    wrong = np.flatnonzero(lengths != counts)
    if len(wrong):
        raise InputError("corpus", f"a document re-tokenizes to {int(lengths[wrong[0]])} "
                         f"tokens, not the {int(counts[wrong[0]])} the corpus recorded")
    extra = int(files.eod is not None)
    widths = counts + extra
    ends = np.cumsum(widths)
    expected = np.empty(int(ends[-1]) if len(ends) else 0, dtype=np.int64)
    if files.eod is not None:
        expected[ends - 1] = files.eod
        body = np.ones(len(expected), dtype=bool)
        body[ends - 1] = False
        expected[body] = np.concatenate(encoded) if encoded else []
    elif encoded:
        expected[:] = np.concatenate(encoded)
    found = _gather(files, picked, widths)
    differs = np.flatnonzero(found != expected)
    if len(differs):
        _refuse(files, picked, ends - widths, differs, locate)
    return len(expected)


def _refuse(files: TokenFiles, picked: Array, firsts: Array, differs: Array,
            locate: Locate) -> None:
    """The first document whose differing tokens a window reads, refused."""
    owner = np.searchsorted(firsts, differs, side="right") - 1
    for row in np.unique(owner).tolist():
        positions = differs[owner == row] - firsts[row]
        k = int(picked[row])
        where = locate(k, positions)
        if where is not None:
            path = files.paths[int(files.file[k])]
            raise InputError(path, f"{where}: token {int(positions[0])} differs from the "
                             "corpus document's (--verify all; nothing stored)")


def _gather(files: TokenFiles, picked: Array, widths: Array) -> Array:
    """The documents' tokens end to end (they are in file order), read by runs of
    neighbours: one read of a run, then one gather."""
    starts, which = files.start[picked], files.file[picked]
    if not len(picked):
        return np.zeros(0, dtype=np.int64)
    gap = starts[1:] - (starts[:-1] + widths[:-1])
    breaks = np.flatnonzero((which[1:] != which[:-1]) | (gap < 0) | (gap > _GAP)) + 1
    pieces = []
    for lo, hi in zip(np.concatenate(([0], breaks)).tolist(),
                      np.concatenate((breaks, [len(picked)])).tolist(), strict=True):
        first = int(starts[lo])
        last = int((starts[lo:hi] + widths[lo:hi]).max())
        span = read_elements(files.paths[int(which[lo])], files.dtypes[int(which[lo])],
                             first, last)
        run_widths = widths[lo:hi]
        before = np.cumsum(run_widths) - run_widths
        index = np.repeat(starts[lo:hi] - first - before, run_widths) + \
            np.arange(int(run_widths.sum()), dtype=np.int64)
        pieces.append(span[index])
    return np.concatenate(pieces)


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
