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
from typing import TYPE_CHECKING, Any, cast

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
from lineage.stream.spec import RecordedSpec
from lineage.stream.tables import write_occurrences

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

SEGMENT_COLUMNS = {"window": "int64", "slot": "int64", "doc_id": "string",
                   "doc_offset": "int64", "n_tokens": "int64"}
_SHOW = 3  # problems named per rule


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
        documents = part_files(con, store, "documents", corpus)
        existing = stream_row(con, stream)
    if row[0] != spec.manifest_hash:
        raise UsageError(f"the order was read for manifest {spec.manifest_hash}, but corpus "
                         f"{corpus!r} has {row[0]}")
    if existing is not None:
        if existing["spec_hash"] != spec.spec_hash:
            raise ConflictError(f"stream {stream!r} exists with another order "
                                f"({existing['spec_hash']}); choose another --stream")
        return {**_answer(stream, corpus, spec, existing), "status": "unchanged",
                "seconds": round(time.monotonic() - started, 3)}
    table = _conformed(segments, origin)
    staging = new_staging_dir(store.staging_dir)
    try:
        built = _build(store, stream, corpus, documents, spec, table, origin, staging,
                       progress)
        # commit_stream reads the fields every spec shares (spec, spec_hash,
        # canonical_json, manifest_hash, seed, seq_len, batch, separator_tokens,
        # token_budget); ImportedSpec has them all.
        status = commit_stream(store, stream, corpus, cast(RecordedSpec, spec), built)
    finally:
        remove_quietly(staging)
    counts = {"windows": built.windows, "steps": built.steps, "tokens": built.tokens,
              "occurrences": built.occurrences, "occurrences_digest": built.digest}
    return {**_answer(stream, corpus, spec, counts), "status": status,
            "seconds": round(time.monotonic() - started, 3)}


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
        column = segments.column(name)
        wanted = pa.string() if kind == "string" else pa.int64()
        is_integer = pa.types.is_integer(column.type)
        is_text = pa.types.is_string(column.type) or pa.types.is_large_string(column.type)
        if not (is_text if kind == "string" else is_integer):
            raise InputError(origin, f"column {name!r} holds {column.type}, expected {kind}")
        try:
            columns.append(column.cast(wanted))
        except pa.ArrowInvalid as exc:
            raise InputError(origin, f"column {name!r}: {exc}") from exc
    return pa.table(dict(zip(SEGMENT_COLUMNS, columns, strict=True)))


def _build(store: BaseStore, stream: str, corpus: str, documents: list[str],
           spec: ImportedSpec, table: pa.Table, origin: Path, staging: Path,
           progress: Progress) -> Built:
    import duckdb
    import numpy as np
    import pyarrow as pa

    con = duckdb.connect(":memory:")
    try:
        con.execute("SET temp_directory = ?", [str(staging / "spill")])
        rows = pa.array(np.arange(table.num_rows, dtype=np.int64))
        con.register("given", table.append_column("row", rows))
        con.execute("CREATE TABLE docs AS SELECT doc_id, source, n_tokens AS doc_tokens, "
                    "content_hash, uri FROM read_parquet(?)", [documents])
        _join(con)
        problems = _problems(con, spec.seq_len)
        if problems:
            raise InputError(origin, "; ".join(problems) + " (nothing stored)")
        windows = int((con.execute("SELECT coalesce(max(win) + 1, 0) FROM seg").fetchone()
                       or (0,))[0])
        con.execute(
            f"""
            CREATE TABLE ordered AS
            SELECT doc_id, source, epoch, n_tokens, content_hash, uri, doc_offset,
                   win * {spec.seq_len} + slot AS stream_start, row AS ordinal
            FROM seg
            """
        )
        written = write_occurrences(con, store, stream, corpus, progress)
        return Built(windows * spec.seq_len, windows, spec.schedule.steps_for(windows),
                     written.occurrences, written.digest, written.parts, written.hash_parts)
    finally:
        con.close()


def _join(con: duckdb.DuckDBPyConnection) -> None:
    """The segments with their documents, the previous row, and each segment's epoch:
    the full passes over its document that earlier segments made (tokens of the same
    document before it, over the document's length)."""
    # `window` is an SQL keyword: it is called `win` from here on.
    con.execute(
        """
        CREATE TABLE seg AS
        SELECT g."window" AS win, g.slot, g.doc_id, g.doc_offset, g.n_tokens, g.row,
               d.source, d.doc_tokens, d.content_hash, d.uri,
               lag(g."window") OVER (ORDER BY g.row) AS prev_win,
               lag(g.slot + g.n_tokens) OVER (ORDER BY g.row) AS prev_end,
               coalesce(sum(g.n_tokens) OVER (
                   PARTITION BY g.doc_id ORDER BY g.row
                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)
               // greatest(d.doc_tokens, 1) AS epoch
        FROM given g LEFT JOIN docs d USING (doc_id)
        """
    )


# (rule, predicate over `seg`); each names its first rows by window, slot and doc_id.
_RULES: tuple[tuple[str, str], ...] = (
    ("missing values", "win IS NULL OR slot IS NULL OR doc_id IS NULL "
     "OR doc_offset IS NULL OR n_tokens IS NULL"),
    ("doc_id is not in the corpus", "doc_tokens IS NULL"),
    ("a segment holds at least 1 token", "n_tokens < 1"),
    ("offsets must satisfy 0 <= doc_offset and doc_offset + n_tokens <= the document's "
     "n_tokens", "doc_offset < 0 OR doc_offset + n_tokens > doc_tokens"),
    ("segment outside its window: 0 <= slot and slot + n_tokens <= seq_len $seq_len",
     "slot < 0 OR slot + n_tokens > $seq_len"),
    ("windows must run 0..N-1 in training order without gaps",
     "(prev_win IS NULL AND win != 0) OR (win != prev_win AND win != prev_win + 1)"),
    ("segments of a window must follow each other without overlapping (rows in "
     "training order)", "win = prev_win AND slot < prev_end"),
)


def _problems(con: duckdb.DuckDBPyConnection, seq_len: int) -> list[str]:
    problems: list[str] = []
    for rule, predicate in _RULES:
        rows = con.execute(
            f"SELECT win, slot, doc_id FROM seg "
            f"WHERE {predicate.replace('$seq_len', str(seq_len))} "
            f"ORDER BY row LIMIT {_SHOW}").fetchall()
        if rows:
            named = ", ".join(f"window {w} slot {s} ({d!r})" for w, s, d in rows)
            problems.append(f"{named}: {rule.replace('$seq_len', str(seq_len))}")
    return problems
