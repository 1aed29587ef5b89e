"""What every order importer shares: check a framework's segments and store them.

An importer turns a framework's files into segments, rows in training order of
`window, slot, doc_id, doc_offset, n_tokens`: window `window` (counted over the whole
run, 0..N-1) holds tokens `[doc_offset, doc_offset + n_tokens)` of document `doc_id`
from its position `slot` on. An importer that found each document's corpus row itself
(`corpus_rows`) gives `rid` instead of `doc_id`, and no doc_id is looked up again.
`store_order` checks them against the corpus and stores them as stream occurrences
(stream_start = window * seq_len + slot), or stores nothing and names the first
problems with the file they came from.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lineage.corpora.manifest import NAME_RULE, is_valid_name
from lineage.errors import ConflictError, InputError, UnknownObjectError, UsageError
from lineage.ingest.input_rules import hash_regular
from lineage.store.base import BaseStore
from lineage.store.durable import remove_quietly
from lineage.store.part_select import part_files
from lineage.store.parts import Progress
from lineage.store.scratch import new_staging_dir, spilling_connection
from lineage.stream.build import Built, commit_stream, content_hash_words
from lineage.stream.imported import ImportedSpec
from lineage.stream.query import stream_row
from lineage.stream.spec import earlier_spec_hash
from lineage.stream.tables import CorpusParts, Segments, write_segments

if TYPE_CHECKING:
    import duckdb
    import numpy as np
    import pyarrow as pa

SEGMENT_COLUMNS = {"window": "int64", "slot": "int64", "doc_id": "string",
                   "doc_offset": "int64", "n_tokens": "int64"}
# the same, from an importer that found each document's corpus row itself
ROW_SEGMENT_COLUMNS = {"window": "int64", "slot": "int64", "rid": "int64",
                       "doc_offset": "int64", "n_tokens": "int64"}
_SHOW = 3  # problems named per rule
MEMORY_LIMIT = "1GB"  # DuckDB's, for the ordinal sort (as `stream build`'s default)


def artifact_hash(path: str | Path) -> str:
    """'blake3:<hex>' of a file an order was read from (regular files only)."""
    return "blake3:" + str(hash_regular(path, keep=False)[0])


def corpus_rows(documents: list[str], doc_ids: pa.Array | pa.ChunkedArray
                ) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Each doc_id's row in the corpus (its rid: the document's position in the
    `documents` parts, doc_id order, as `stream build` numbers them) and its n_tokens;
    -1 for both where the corpus lacks it. One hash join in DuckDB, on all cores, instead
    of a dictionary of the whole corpus: an importer hands the rids to `store_order`,
    which then looks no doc_id up again. doc_ids that are the corpus's own, in its order
    (as many, then equal), are recognised by one comparison instead."""
    import duckdb
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    firsts = np.cumsum([0] + [pq.read_metadata(path).num_rows for path in documents])
    con = duckdb.connect(":memory:")
    try:
        if len(doc_ids) == firsts[-1]:
            own = con.sql("SELECT doc_id, n_tokens FROM read_parquet(?)",
                          params=[documents]).to_arrow_table()
            given = doc_ids if isinstance(doc_ids, pa.ChunkedArray) \
                else pa.chunked_array([doc_ids])
            if own.column("doc_id").equals(given):
                return (np.arange(len(doc_ids), dtype=np.int64),
                        np.asarray(own.column("n_tokens").to_numpy(), dtype=np.int64))
            del own
        con.execute("CREATE TABLE part_rows (path VARCHAR, first_rid BIGINT)")
        con.executemany("INSERT INTO part_rows VALUES (?, ?)", [
            (path, int(first)) for path, first in zip(documents, firsts[:-1], strict=True)])
        con.register("wanted", pa.table({"doc_id": doc_ids,
                                         "at": np.arange(len(doc_ids), dtype=np.int64)}))
        found = con.sql(
            "SELECT coalesce(d.rid, -1) AS rid, coalesce(d.n_tokens, -1) AS n "
            "FROM wanted w LEFT JOIN (SELECT p.first_rid + c.file_row_number AS rid, "
            "c.doc_id, c.n_tokens FROM read_parquet(?, filename = true, "
            "file_row_number = true) c JOIN part_rows p ON p.path = c.filename) d "
            "USING (doc_id) ORDER BY w.at", params=[documents]).fetchnumpy()
    finally:
        con.close()
    return (np.asarray(found["rid"], dtype=np.int64), np.asarray(found["n"], dtype=np.int64))


def store_order(
    store: BaseStore,
    *,
    stream: str,
    corpus: str,
    spec: ImportedSpec,
    segments: pa.Table,
    origin: Path,
    progress: Progress = None,
    windows: int | None = None,
) -> dict[str, Any]:
    """Check the segments of an imported order and store them as stream `stream`.

    `windows`, given by an importer whose windows may hold no document (an instance its
    trainer masked), is the run's number of windows: segments may then skip windows.
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
        if existing.spec_hash not in (spec.spec_hash, earlier_spec_hash(spec)):
            raise ConflictError(f"stream {stream!r} exists with another order "
                                f"({existing.spec_hash}); choose another --stream")
        # the same order, stored as it is (under imported/1 and its /1 digest if it was
        # imported before lineage-occurrences/2)
        kept = dataclasses.replace(spec, spec=existing.spec)
        return {**_answer(stream, corpus, kept, existing.to_row()), "status": "unchanged",
                "segments": segments.num_rows, "seconds": round(time.monotonic() - started, 3)}
    table = _conformed(segments, origin)
    staging = new_staging_dir(store.staging_dir)
    try:
        built = _build(store, stream, corpus, files, spec, table, origin, staging, progress,
                       windows)
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
    accepted; values that do not fit are an error); `rid` in place of `doc_id` when the
    importer found each segment's corpus row itself."""
    import pyarrow as pa

    by_row = "rid" in segments.column_names and "doc_id" not in segments.column_names
    wanted_columns = ROW_SEGMENT_COLUMNS if by_row else SEGMENT_COLUMNS
    missing = [name for name in wanted_columns if name not in segments.column_names]
    if missing:
        raise InputError(origin, f"the order lacks column(s): {', '.join(missing)}")
    columns = []
    for name, kind in wanted_columns.items():
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
    return pa.table(dict(zip(wanted_columns, columns, strict=True)))


def _build(store: BaseStore, stream: str, corpus: str, files: tuple[list[str], list[str]],
           spec: ImportedSpec, table: pa.Table, origin: Path, staging: Path,
           progress: Progress, windows: int | None = None) -> Built:
    """Checks and epochs with numpy on whole columns, on each segment's row in the
    corpus (its rid: given, or found once by doc_id); the two tables then written as
    `stream build` writes its own (`write_segments`): joined to the corpus's parts by
    position, the content-hash copy in the order of the hashes' 64-bit words."""
    con = spilling_connection(staging, MEMORY_LIMIT)  # the sort spills beyond its limit
    try:
        # DuckDB decodes the content hashes on its threads while numpy checks (one core)
        with ThreadPoolExecutor(1, thread_name_prefix="hash-words") as pool:
            words = pool.submit(content_hash_words, con.cursor(), files[0])
            handed, windows = _segments(con.cursor(), files[0], spec, table, origin, windows)
            corpus_parts = CorpusParts(files[0], files[1], words.result())
        # handed over in a list that write_segments empties: the arrays go as soon as
        # the occurrence lists hold them
        written = write_segments(con, store, stream, corpus, handed, corpus_parts, progress,
                                 arrays_folder=staging / "arrays")
    finally:
        con.close()
    return Built(windows * spec.seq_len, windows, spec.schedule.steps_for(windows),
                 written.occurrences, written.digest, written.parts, written.hash_parts,
                 columns=written.columns)


def _segments(con: duckdb.DuckDBPyConnection, documents: list[str], spec: ImportedSpec,
              table: pa.Table, origin: Path, windows: int | None = None
              ) -> tuple[list[Segments], int]:
    """The checked segments as occurrences (with their epochs), and the windows."""
    import numpy as np

    doc_tokens = np.asarray(con.sql("SELECT n_tokens FROM read_parquet(?)",
                                    params=[documents]).fetchnumpy()["n_tokens"])
    doc = _doc_rows(con, table, documents, len(doc_tokens))
    problems = _problems(table, doc, doc_tokens, spec.seq_len,
                         lambda rows: _names(con, documents, table, doc, rows), windows)
    if problems:
        raise InputError(origin, "; ".join(problems) + " (nothing stored)")
    window = table.column("window").to_numpy()
    doc, start, offset, n_tokens = _joined(
        doc, window * spec.seq_len + table.column("slot").to_numpy(),
        table.column("doc_offset").to_numpy(), table.column("n_tokens").to_numpy())
    epoch, within = _epochs(doc, n_tokens, doc_tokens)
    if windows is None:
        windows = int(window[-1]) + 1 if len(window) else 0
    return [Segments(doc, within, epoch, n_tokens, start, offset)], windows


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


def _doc_rows(con: duckdb.DuckDBPyConnection, table: pa.Table, documents: list[str],
              n_documents: int) -> np.ndarray[Any, Any]:
    """Each segment's row among the corpus's documents; -1 for a document it lacks."""
    import numpy as np
    import pyarrow as pa

    if "rid" in table.column_names:
        rid = table.column("rid").to_numpy()
        return np.where((rid >= 0) & (rid < n_documents), rid, -1)
    corpus_ids = _corpus_doc_ids(con, documents)
    column = table.column("doc_id").combine_chunks()
    if pa.types.is_dictionary(column.type):  # each distinct doc_id looked up once
        rows = _doc_rows_of(column.dictionary, corpus_ids)
        return rows[column.indices.to_numpy(zero_copy_only=False).astype(np.int64)]  # type: ignore[no-any-return]
    return _doc_rows_of(column, corpus_ids)


def _corpus_doc_ids(con: duckdb.DuckDBPyConnection, documents: list[str]) -> pa.Array:
    return con.sql("SELECT doc_id FROM read_parquet(?)", params=[documents]
                   ).to_arrow_table().column("doc_id").combine_chunks()


def _doc_rows_of(doc_ids: pa.Array, corpus_ids: pa.Array) -> np.ndarray[Any, Any]:
    import numpy as np
    import pyarrow.compute as pc

    found = pc.index_in(doc_ids, value_set=corpus_ids)
    return found.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)  # type: ignore[no-any-return]


def _names(con: duckdb.DuckDBPyConnection, documents: list[str], table: pa.Table,
           doc: np.ndarray[Any, Any], rows: np.ndarray[Any, Any]) -> list[str]:
    """The doc_ids of segments `rows`, as an error names them (a rid the corpus lacks:
    as `rid N`)."""
    if "doc_id" in table.column_names:
        return [repr(table.column("doc_id")[int(i)].as_py()) for i in rows]
    corpus_ids = _corpus_doc_ids(con, documents)
    return [repr(corpus_ids[int(doc[i])].as_py()) if doc[i] >= 0
            else f"rid {table.column('rid')[int(i)].as_py()}" for i in rows]


def _by_document(doc: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Positions sorted by document, in training order within one (a stable sort): a
    sort of 64-bit keys (document, position) when they fit, 3x numpy's stable argsort."""
    import numpy as np

    n = len(doc)
    position_bits = max(n - 1, 1).bit_length()
    if n == 0 or int(doc.max()).bit_length() + position_bits > 64:
        return np.argsort(doc, kind="stable")
    keys = (doc.astype(np.uint64) << np.uint64(position_bits)) | np.arange(n, dtype=np.uint64)
    keys.sort()
    keys &= np.uint64((1 << position_bits) - 1)
    return keys.view(np.int64)


def _epochs(doc: np.ndarray[Any, Any], n_tokens: np.ndarray[Any, Any],
            doc_tokens: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], ...]:
    """Each segment's epoch (the tokens of its document in earlier segments, over the
    document's length, rounded down: docs/importers.md) and its place among its
    document's segments (0, 1, ... in training order)."""
    import numpy as np

    order = _by_document(doc)  # by document, training order within one
    by_doc = doc[order]
    tokens = n_tokens[order]
    before = np.cumsum(tokens) - tokens  # tokens of all earlier segments in this order
    del tokens
    first = np.ones(len(order), dtype=bool)
    first[1:] = by_doc[1:] != by_doc[:-1]
    base = np.maximum.accumulate(np.where(first, np.arange(len(order)), 0))
    del first
    epoch = np.empty(len(order), dtype=np.int64)
    epoch[order] = (before - before[base]) // np.maximum(doc_tokens[by_doc], 1)
    del before, by_doc
    within = np.empty(len(order), dtype=np.int64)
    within[order] = np.arange(len(order)) - base
    return epoch, within


def _problems(table: pa.Table, doc: np.ndarray[Any, Any], doc_tokens: np.ndarray[Any, Any],
              seq_len: int, names: Callable[[np.ndarray[Any, Any]], list[str]],
              windows: int | None = None) -> list[str]:
    """Every rule on whole columns; each broken one names its first rows. With `windows`
    (the run's count), windows holding no segment are allowed."""
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
         "windows must run 0..N-1 in training order without gaps")
        if windows is None else
        (~same & (window <= previous) | (window >= windows),
         f"windows must run in training order within 0..{windows - 1}"),
        (same & (slot < previous_end), "segments of a window must follow each other without "
         "overlapping (rows in training order)"),
    ]
    problems = []
    for mask, rule in checks:
        rows = np.flatnonzero(mask)[:_SHOW]
        if len(rows):
            named = ", ".join(f"window {window[i]} slot {slot[i]} ({name})"
                              for i, name in zip(rows, names(rows), strict=True))
            problems.append(f"{named}: {rule}")
    return problems
