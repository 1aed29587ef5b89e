"""What every order importer shares: check a framework's segments and store them.

An importer turns a framework's files into segments, rows in training order of
`window, slot, doc_id, doc_offset, n_tokens`: window `window` (counted over the whole
run, 0..N-1) holds tokens `[doc_offset, doc_offset + n_tokens)` of document `doc_id`
from its position `slot` on. `store_order` checks them against the corpus and stores
them as stream occurrences (stream_start = window * seq_len + slot), or stores nothing
and names the first problems with the file they came from.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lineage.corpora.manifest import NAME_RULE, is_valid_name
from lineage.errors import ConflictError, InputError, UnknownObjectError, UsageError
from lineage.ingest.input_rules import hash_regular
from lineage.store.base import BaseStore
from lineage.store.durable import remove_quietly
from lineage.store.parts import Progress, part_files
from lineage.store.scratch import new_staging_dir
from lineage.stream.build import Built, commit_stream
from lineage.stream.imported import ImportedSpec
from lineage.stream.query import stream_row
from lineage.stream.tables import write_occurrences

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

SEGMENT_COLUMNS = {"window": "int64", "slot": "int64", "doc_id": "string",
                   "doc_offset": "int64", "n_tokens": "int64"}
_SHOW = 3  # problems named per rule
MEMORY_LIMIT = "1GB"  # DuckDB's, for the content-hash sort (as `stream build`'s default)


def artifact_hash(path: str | Path) -> str:
    """'blake3:<hex>' of a file an order was read from (regular files only)."""
    return "blake3:" + str(hash_regular(path, keep=False)[0])


def store_order(
    store: BaseStore,
    *,
    stream: str,
    corpus: str,
    spec: ImportedSpec,
    segments: pa.Table,
    origin: Path,
    progress: Progress = None,
) -> dict[str, Any]:
    """Check the segments of an imported order and store them as stream `stream`.

    Importing the same order again answers "unchanged"; another order under the same
    name is a conflict. On any broken rule nothing is stored and the `InputError`
    names `origin` and the first rows that break each rule."""
    started = time.monotonic()
    if not is_valid_name(stream):
        raise UsageError(f"--stream {stream!r}: {NAME_RULE}")
    with store.reader(views=False) as con:
        row = con.execute("SELECT manifest_hash FROM corpora WHERE name = ?", [corpus]).fetchone()
        if row is None:
            raise UnknownObjectError(f"no corpus named {corpus!r}: `lineage corpus list` "
                                     "shows them")
        files = (part_files(con, store, "documents", corpus),
                 part_files(con, store, "document_hashes", corpus))
        existing = stream_row(con, stream)
    if row[0] != spec.manifest_hash:
        raise UsageError(f"the order was read for manifest {spec.manifest_hash}, but corpus "
                         f"{corpus!r} has {row[0]}")
    if existing is not None:
        if existing["spec_hash"] != spec.spec_hash:
            raise ConflictError(f"stream {stream!r} exists with another order "
                                f"({existing['spec_hash']}); choose another --stream")
        return {**_answer(stream, corpus, spec, existing), "status": "unchanged",
                "segments": segments.num_rows, "seconds": round(time.monotonic() - started, 3)}
    table = _conformed(segments, origin)
    staging = new_staging_dir(store.staging_dir)
    try:
        built = _build(store, stream, corpus, files, spec, table, origin, staging, progress)
        # commit_stream reads the fields every spec shares (spec, spec_hash,
        # canonical_json, manifest_hash, seed, seq_len, batch, separator_tokens,
        # token_budget); ImportedSpec has them all.
        status = commit_stream(store, stream, corpus, spec, built)
    finally:
        remove_quietly(staging)
    counts = {"windows": built.windows, "steps": built.steps, "tokens": built.tokens,
              "occurrences": built.occurrences, "occurrences_digest": built.digest}
    return {**_answer(stream, corpus, spec, counts), "status": status,
            "segments": table.num_rows, "seconds": round(time.monotonic() - started, 3)}


def _answer(stream: str, corpus: str, spec: ImportedSpec, counts: dict[str, Any]
            ) -> dict[str, Any]:
    return {
        "name": stream, "spec": spec.spec, "spec_hash": spec.spec_hash, "corpus": corpus,
        "manifest_hash": spec.manifest_hash, "framework": spec.framework,
        "seq_len": spec.seq_len, "schedule": spec.schedule.to_json(),
        "rank_rule": spec.rank_rule.to_json(), "artifacts": dict(sorted(spec.artifacts.items())),
        "settings": spec.settings,
        **{key: counts[key] for key in ("windows", "steps", "tokens", "occurrences",
                                        "occurrences_digest")},
    }


def _conformed(segments: pa.Table, origin: Path) -> pa.Table:
    """The five segment columns, cast to their types (integers of any width are
    accepted; values that do not fit are an error)."""
    import pyarrow as pa

    missing = [name for name in SEGMENT_COLUMNS if name not in segments.column_names]
    if missing:
        raise InputError(origin, f"the order lacks column(s): {', '.join(missing)}")
    columns = []
    for name, kind in SEGMENT_COLUMNS.items():
        column = segments.column(name).combine_chunks()
        wanted: pa.DataType = pa.string() if kind == "string" else pa.int64()
        is_integer = pa.types.is_integer(column.type)
        text_type = column.type.value_type if pa.types.is_dictionary(column.type) \
            else column.type
        is_text = pa.types.is_string(text_type) or pa.types.is_large_string(text_type)
        if is_text and pa.types.is_dictionary(column.type):  # kept: looked up once per entry
            wanted = pa.dictionary(column.type.index_type, pa.string())
        if not (is_text if kind == "string" else is_integer):
            raise InputError(origin, f"column {name!r} holds {column.type}, expected {kind}")
        if column.null_count:
            raise InputError(origin, f"column {name!r} has missing values")
        try:
            columns.append(column.cast(wanted))
        except pa.ArrowInvalid as exc:
            raise InputError(origin, f"column {name!r}: {exc}") from exc
    return pa.table(dict(zip(SEGMENT_COLUMNS, columns, strict=True))).combine_chunks()


def _build(store: BaseStore, stream: str, corpus: str, files: tuple[list[str], list[str]],
           spec: ImportedSpec, table: pa.Table, origin: Path, staging: Path,
           progress: Progress) -> Built:
    """Checks and epochs with numpy on whole columns; the corpus's documents joined by
    position (each segment's row in the corpus, found once by doc_id); DuckDB writes the
    two tables from rows already in ordinal order, the content-hash copy sorted on the
    integer rank of each document in the corpus's own content-hash index."""
    import duckdb
    import numpy as np
    import pyarrow as pa

    docs, hash_rank = _corpus_documents(store, *files)
    doc = _doc_rows(table, docs)
    doc_tokens = docs.column("n_tokens").to_numpy()
    problems = _problems(table, doc, doc_tokens, spec.seq_len)
    if problems:
        raise InputError(origin, "; ".join(problems) + " (nothing stored)")
    window = table.column("window").to_numpy()
    doc, start, offset, n_tokens = _joined(
        doc, window * spec.seq_len + table.column("slot").to_numpy(),
        table.column("doc_offset").to_numpy(), table.column("n_tokens").to_numpy())
    indices = pa.array(doc.astype(np.int32 if len(docs) < 2**31 else np.int64))
    ordered = pa.table({
        "ordinal": pa.array(np.arange(len(doc), dtype=np.int64)),
        **{name: pa.DictionaryArray.from_arrays(indices, docs.column(name).combine_chunks())
           for name in ("doc_id", "source", "content_hash", "uri")},
        "epoch": pa.array(_epochs(doc, n_tokens, doc_tokens)),
        "n_tokens": pa.array(n_tokens), "doc_offset": pa.array(offset),
        "stream_start": pa.array(start), "hash_rank": pa.array(hash_rank[doc]),
    })
    windows = int(window[-1]) + 1 if len(window) else 0
    con = duckdb.connect(":memory:")
    try:
        con.execute("SET temp_directory = ?", [str(staging / "spill")])
        con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")  # the sort spills beyond it
        written = write_occurrences(con, store, stream, corpus, progress, rows=ordered,
                                    hash_order="hash_rank, epoch, ordinal")
    finally:
        con.close()
    return Built(windows * spec.seq_len, windows, spec.schedule.steps_for(windows),
                 written.occurrences, written.digest, written.parts, written.hash_parts)


def _joined(doc: np.ndarray[Any, Any], start: np.ndarray[Any, Any],
            offset: np.ndarray[Any, Any], n_tokens: np.ndarray[Any, Any]
            ) -> tuple[np.ndarray[Any, Any], ...]:
    """Segments that continue the one before them (the same document, its next token,
    at the next stream position: a document running over a window edge) joined into one
    occurrence, the shape a canonical stream stores; queries cut occurrences at window
    edges again (docs/stream-spec.md §6), so every answer is the same."""
    import numpy as np

    continues = np.zeros(len(doc), dtype=bool)
    continues[1:] = (doc[1:] == doc[:-1]) & (offset[1:] == offset[:-1] + n_tokens[:-1]) \
        & (start[1:] == start[:-1] + n_tokens[:-1])
    firsts = np.flatnonzero(~continues)
    merged = np.add.reduceat(n_tokens, firsts) if len(firsts) else n_tokens[:0]
    return doc[firsts], start[firsts], offset[firsts], merged


def _corpus_documents(store: BaseStore, documents: list[str], hashes: list[str]
                      ) -> tuple[pa.Table, np.ndarray[Any, Any]]:
    """The corpus's documents (doc_id order) and each one's rank in its content-hash
    index, whose order is (content_hash, doc_id): the order of `occurrence_hashes`."""
    import numpy as np
    import pyarrow.compute as pc

    with store.reader(views=False) as con:
        docs = con.sql("SELECT doc_id, source, n_tokens, content_hash, uri FROM "
                       "read_parquet(?)", params=[documents]).to_arrow_table()
        by_hash = con.sql("SELECT doc_id FROM read_parquet(?)",
                          params=[hashes]).to_arrow_table().column("doc_id")
    position = pc.index_in(by_hash, value_set=docs.column("doc_id")).to_numpy(
        zero_copy_only=False).astype(np.int64)
    rank = np.empty(len(docs), dtype=np.int64)
    rank[position] = np.arange(len(position), dtype=np.int64)
    return docs, rank


def _doc_rows(table: pa.Table, docs: pa.Table) -> np.ndarray[Any, Any]:
    """Each segment's row among the corpus's documents; -1 for a doc_id it lacks."""
    import numpy as np
    import pyarrow as pa

    column = table.column("doc_id").combine_chunks()
    if pa.types.is_dictionary(column.type):  # each distinct doc_id looked up once
        rows = _doc_rows_of(column.dictionary, docs)
        return rows[column.indices.to_numpy(zero_copy_only=False).astype(np.int64)]
    return _doc_rows_of(column, docs)


def _doc_rows_of(doc_ids: pa.Array, docs: pa.Table) -> np.ndarray[Any, Any]:
    import numpy as np
    import pyarrow.compute as pc

    found = pc.index_in(doc_ids, value_set=docs.column("doc_id"))
    return found.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)


def _epochs(doc: np.ndarray[Any, Any], n_tokens: np.ndarray[Any, Any],
            doc_tokens: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Each segment's epoch: the tokens of its document in earlier segments, over the
    document's length, rounded down (docs/importers.md)."""
    import numpy as np

    order = np.argsort(doc, kind="stable")  # by document, training order within one
    tokens = n_tokens[order]
    before = np.cumsum(tokens) - tokens  # tokens of all earlier segments in this order
    first = np.ones(len(order), dtype=bool)
    first[1:] = doc[order][1:] != doc[order][:-1]
    base = np.maximum.accumulate(np.where(first, np.arange(len(order)), 0))
    within = before - before[base]
    epoch = np.empty(len(order), dtype=np.int64)
    epoch[order] = within // np.maximum(doc_tokens[doc[order]], 1)
    return epoch


def _problems(table: pa.Table, doc: np.ndarray[Any, Any], doc_tokens: np.ndarray[Any, Any],
              seq_len: int) -> list[str]:
    """Every rule on whole columns; each broken one names its first rows."""
    import numpy as np

    window, slot = table.column("window").to_numpy(), table.column("slot").to_numpy()
    offset, n = table.column("doc_offset").to_numpy(), table.column("n_tokens").to_numpy()
    known = doc >= 0
    length = np.where(known, doc_tokens[np.where(known, doc, 0)], 0)
    previous = np.concatenate(([-1], window[:-1]))
    previous_end = np.concatenate(([0], (slot + n)[:-1]))
    same = window == previous
    checks = [
        (~known, "doc_id is not in the corpus"),
        (n < 1, "a segment holds at least 1 token"),
        (known & ((offset < 0) | (offset + n > length)),
         "offsets must satisfy 0 <= doc_offset and doc_offset + n_tokens <= the document's "
         "n_tokens"),
        ((slot < 0) | (slot + n > seq_len),
         f"segment outside its window: 0 <= slot and slot + n_tokens <= seq_len {seq_len}"),
        (~same & (window != previous + 1),
         "windows must run 0..N-1 in training order without gaps"),
        (same & (slot < previous_end), "segments of a window must follow each other without "
         "overlapping (rows in training order)"),
    ]
    problems = []
    for mask, rule in checks:
        rows = np.flatnonzero(mask)[:_SHOW]
        if len(rows):
            named = ", ".join(f"window {window[i]} slot {slot[i]} "
                              f"({table.column('doc_id')[int(i)].as_py()!r})" for i in rows)
            problems.append(f"{named}: {rule}")
    return problems
