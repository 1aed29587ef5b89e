"""The reduce of a corpus ingest: check all rows together, sort, hash, write parts.

Runs in its own in-memory DuckDB session over the staged parts and the ready manifests,
outside the catalog lock. Produces fsynced temporary Parquet parts sorted by `doc_id`
and the manifest hash computed from the very batches that were written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lineage.corpora.digest import LINE_COLUMN, string_values
from lineage.corpora.manifest import CONTROL_CHARS_REGEX, HEX64_REGEX, ManifestHasher
from lineage.errors import InputError, UsageError, too_little_memory
from lineage.ingest.input_rules import INT64_MAX, IngestRuleError
from lineage.ingest.inputs import ShardInput
from lineage.ingest.readers.manifests import (
    ManifestStats,
    check_manifests_unchanged,
    load_manifests,
    view_parquet_manifests,
)
from lineage.ingest.sort_ranges import sorted_by_ranges
from lineage.ingest.staging import StagedParts, record_place
from lineage.ingest.text_index import index_manifest_texts
from lineage.ingest.text_reduce import TextIndexSummary, write_text_index
from lineage.schemas import document_hashes_schema, documents_schema
from lineage.store import faults
from lineage.store.arrays_rows import CorpusColumns
from lineage.store.base import sql_text
from lineage.store.parts import (
    LOOKUP_PART_ROWS,
    LOOKUP_ROW_GROUP_ROWS,
    WrittenPart,
    discard_parts,
    write_overlapped,
    write_parts,
)
from lineage.store.parts import report as report_progress

if TYPE_CHECKING:
    import duckdb

# (rule broken, SQL predicate that is true on a breaking row), checked in this order.
ROW_RULES: tuple[tuple[str, str], ...] = (
    ("missing doc_id", "doc_id IS NULL OR doc_id = ''"),
    ("missing source", "source IS NULL OR source = ''"),
    ("n_bytes missing or negative", "n_bytes IS NULL OR n_bytes < 0"),
    ("n_tokens missing or negative", "n_tokens IS NULL OR n_tokens < 0"),
    ("content_hash must be 64 lowercase hex digits (BLAKE3-256)",
     f"content_hash IS NULL OR NOT regexp_full_match(content_hash, '{HEX64_REGEX[1:-1]}')"),
)  # fmt: skip
# Checked on the manifest lines as they are hashed (`ControlChars`); the SQL finds the row.
CONTROL_RULES: tuple[tuple[str, str], ...] = (
    ("doc_id contains a control character",
     f"regexp_matches(doc_id, '{CONTROL_CHARS_REGEX}')"),
    ("source contains a control character",
     f"regexp_matches(source, '{CONTROL_CHARS_REGEX}')"),
    ("license contains a control character",
     f"license IS NOT NULL AND regexp_matches(license, '{CONTROL_CHARS_REGEX}')"),
)  # fmt: skip


@dataclass
class ReducedCorpus:
    manifest_hash: str
    documents: int
    tokens: int
    bytes: int
    dropped_empty: int
    sources: list[dict[str, Any]]
    parts: list[WrittenPart] = field(default_factory=list)  # documents, by doc_id
    hash_parts: list[WrittenPart] = field(default_factory=list)  # document_hashes
    text_index: TextIndexSummary | None = None
    # the lookup arrays file's columns, spooled from the content-hash sort
    arrays: CorpusColumns | None = None

    def all_parts(self) -> list[WrittenPart]:
        text = self.text_index.all_parts() if self.text_index else []
        return [*self.parts, *self.hash_parts, *text]


def reduce_corpus(
    *,
    corpus: str,
    staged_parts: StagedParts,
    manifests: list[ShardInput],
    licenses: LicensePlan,
    staging: Path,
    out_dir: Path,
    progress: Any = None,
    text_index: bool = False,
    manifest_rows: bool = False,
    lookup_arrays: bool = False,
) -> ReducedCorpus:
    """`manifest_rows`: ready manifests were staged by map tasks (`staged_parts`)
    instead of being given in `manifests`. `lookup_arrays`: spool the corpus's lookup
    arrays columns from the content-hash sort (`ReducedCorpus.arrays`; the caller
    writes or closes them)."""
    import duckdb

    # A database file, not ":memory:": DuckDB compresses the rows it keeps on disk and not
    # those of an in-memory database, which spill as they are (5M rows: 1.34 GB -> 0.70 GB).
    con = duckdb.connect(str(staging / "reduce.duckdb"))
    try:
        con.execute("SET preserve_insertion_order = true")
        con.execute("SET temp_directory = ?", [str(staging / "spill")])
        # Beyond this DuckDB spills to the staging folder instead of growing with the corpus.
        con.execute("SET memory_limit = ?", [memory_limit()])
        read: ManifestStats = []  # manifests every pass reads again, where they are
        if _in_place(staged_parts, manifests, text_index):
            dropped, read = _read_in_place(con, manifests, licenses)
        else:
            dropped = _load(con, staged_parts, manifests, licenses, progress)
        fingerprints, near = list(staged_parts.fingerprints), list(staged_parts.near)
        if text_index and (manifests or manifest_rows):
            manifest_prints, manifest_near = index_manifest_texts(con, staging, progress)
            fingerprints += manifest_prints
            near += manifest_near
        documents, tokens, size = _totals(con)
        reduced = ReducedCorpus(
            manifest_hash="", documents=documents, tokens=tokens, bytes=size,
            dropped_empty=dropped,
            sources=summarize_sources(con),
        )
        out_dir.mkdir(parents=True, exist_ok=True)
        _write_both(con, reduced, corpus=corpus, out_dir=out_dir, staging=staging,
                    progress=progress, lookup_arrays=lookup_arrays,
                    after_last_pass=lambda: check_manifests_unchanged(read))
        if text_index:
            try:
                reduced.text_index = write_text_index(
                    con, corpus=corpus, staged_fingerprints=fingerprints, staged_near=near,
                    out_dir=out_dir, progress=progress)
            except BaseException:
                if reduced.arrays is not None:
                    reduced.arrays.discard()
                discard_parts(reduced.all_parts())
                raise
        return reduced
    except duckdb.OutOfMemoryException as exc:
        raise too_little_memory(f"$LINEAGE_MEMORY_LIMIT {memory_limit()}", "ingest",
                                exc) from exc
    finally:
        con.close()


def _in_place(staged_parts: StagedParts, manifests: list[ShardInput], text_index: bool
              ) -> bool:
    """Whether the rows are Parquet ready manifests alone, which are read where they are
    (`view_parquet_manifests`) instead of loaded into a table."""
    return bool(manifests) and not staged_parts.documents and not text_index and all(
        shard.kind != "manifest-jsonl" for shard in manifests)


def _load(con: duckdb.DuckDBPyConnection, staged_parts: StagedParts,
          manifests: list[ShardInput], licenses: LicensePlan, progress: Any) -> int:
    """Every row into table `docs`, licensed and checked; the empty ones removed (their
    count returned)."""
    con.execute(STAGED_TABLE)
    if staged_parts.documents:
        con.execute("INSERT INTO docs SELECT * FROM read_parquet(?)", [staged_parts.documents])
    if manifests:
        report_progress(progress, f"loading {len(manifests)} manifest(s)", None, None)
        load_manifests(con, manifests, table="docs")
    apply_licenses(con, licenses)
    check_rows(con)
    dropped = con.execute("DELETE FROM docs WHERE n_bytes = 0").fetchone()
    return int(dropped[0]) if dropped else 0


def _read_in_place(con: duckdb.DuckDBPyConnection, manifests: list[ShardInput],
                   licenses: LicensePlan) -> tuple[int, ManifestStats]:
    """The Parquet manifests' rows as view `docs`, licensed and checked, without the
    empty ones: their count, and the files' stats before the first pass (each pass
    reads them again). The first two passes read every column: a value no cast takes,
    or a file DuckDB cannot read, then makes the manifests load into the table the way
    `_load` does, which names the file."""
    import duckdb

    read = view_parquet_manifests(con, manifests, view="manifest_rows")
    con.execute(f"CREATE VIEW all_docs AS SELECT * REPLACE ({licensed(licenses)} AS license) "
                "FROM manifest_rows")
    try:
        check_licenses(con, licenses, table="all_docs")
        check_rows(con, table="all_docs")
        dropped = con.execute("SELECT count(*) FILTER (WHERE n_bytes = 0), "
                              "max(length(uri)), max(length(license)) FROM all_docs"
                              ).fetchone()
    except duckdb.Error:
        con.execute(STAGED_TABLE)
        load_manifests(con, manifests, table="docs")  # raises, naming the file
        raise
    con.execute("CREATE VIEW docs AS SELECT * FROM all_docs WHERE n_bytes <> 0")
    return (int(dropped[0]) if dropped else 0), read


def _write_both(con: duckdb.DuckDBPyConnection, reduced: ReducedCorpus, *, corpus: str,
                out_dir: Path, staging: Path, progress: Any, lookup_arrays: bool,
                after_last_pass: Callable[[], None]) -> None:
    """Documents by doc_id and the content-hash index, the index sorted while the
    documents are encoded (`write_overlapped`: a profiled 10M-row ingest went from
    20.6 s to 19.4 s). `after_last_pass` may still refuse what was written (a manifest
    read in place that changed meanwhile): the parts are then removed."""
    def documents(after_sort: Callable[[], None]) -> list[WrittenPart]:
        reduced.manifest_hash, parts = write_sorted_parts(
            con, corpus=corpus, out_dir=out_dir / "documents", total=reduced.documents,
            scratch=staging / "ranges-documents", progress=progress, after_sort=after_sort)
        return parts

    def content_hashes() -> list[WrittenPart]:
        parts = write_hash_index(con, corpus=corpus, out_dir=out_dir / "document_hashes",
                                 total=reduced.documents, scratch=staging / "ranges-hashes",
                                 progress=progress, arrays=reduced.arrays)
        if reduced.arrays is not None:  # while the documents are still being written
            try:
                reduced.arrays.make_now(corpus)
            except BaseException:
                discard_parts(parts)
                raise
        return parts

    if lookup_arrays:
        # the row rules (`check_rows`) held every content hash to 64 lowercase hex digits
        reduced.arrays = CorpusColumns(staging / "corpus-arrays", hashes_checked=True)
    try:
        reduced.parts, reduced.hash_parts = write_overlapped(documents, content_hashes)
        after_last_pass()
        faults.reach("reduce-written")
    except BaseException:
        if reduced.arrays is not None:
            reduced.arrays.discard()
        discard_parts(reduced.all_parts())
        raise


def memory_limit() -> str:
    """DuckDB's memory budget for the reduce: $LINEAGE_MEMORY_LIMIT, else 2GB."""
    import os

    return os.environ.get("LINEAGE_MEMORY_LIMIT") or "2GB"


STAGED_TABLE = """
CREATE TABLE docs (
    doc_id VARCHAR, source VARCHAR, uri VARCHAR, n_bytes BIGINT, n_tokens BIGINT,
    content_hash VARCHAR, license VARCHAR, metadata VARCHAR, origin VARCHAR, record BIGINT,
    has_text BOOLEAN, text_hash VARCHAR, n_words BIGINT, byte_offset BIGINT
)
"""
_STAGED_TABLE = STAGED_TABLE  # the name bench/profile_ingest.py reads


@dataclass(frozen=True)
class LicensePlan:
    """Licences for documents that carry none: per source first, then the default."""

    default: str | None = None
    by_source: tuple[tuple[str, str], ...] = ()


def apply_licenses(con: duckdb.DuckDBPyConnection, plan: LicensePlan) -> None:
    check_licenses(con, plan)
    for source, license in plan.by_source:
        con.execute(
            "UPDATE docs SET license = ? WHERE license IS NULL AND source = ?", [license, source]
        )
    if plan.default is not None:
        con.execute("UPDATE docs SET license = ? WHERE license IS NULL", [plan.default])


def check_licenses(con: duckdb.DuckDBPyConnection, plan: LicensePlan,
                   table: str = "docs") -> None:
    """A licence given for a source no document has is a mistake worth a word."""
    if not plan.by_source:
        return
    sources = [source for source, _ in plan.by_source]
    found = {row[0] for row in con.execute(
        f"SELECT DISTINCT source FROM {table} WHERE list_contains(?, source)",
        [sources]).fetchall()}
    for source, license in plan.by_source:
        if source not in found:
            raise UsageError(f"--license {source}={license}: no document has source {source!r}")


def licensed(plan: LicensePlan) -> str:
    """The licence column with `plan` applied, as SQL (literals: a view takes no
    parameters): the row's own, else its source's, else the default."""
    choices = ["license"]
    if plan.by_source:
        cases = " ".join(f"WHEN {sql_text(source)} THEN {sql_text(license)}"
                         for source, license in plan.by_source)
        choices.append(f"CASE source {cases} END")
    if plan.default is not None:
        choices.append(sql_text(plan.default))
    return f"coalesce({', '.join(choices)})" if len(choices) > 1 else "license"


def check_rows(con: duckdb.DuckDBPyConnection,
               rules: tuple[tuple[str, str], ...] = ROW_RULES, *, table: str = "docs") -> None:
    """Raise InputError for the first row (by input file and record) breaking a rule."""
    flags = ", ".join(f"bool_or({predicate})" for _, predicate in rules)
    broken = con.execute(f"SELECT {flags} FROM {table}").fetchone() or ()
    for (rule, predicate), failed in zip(rules, broken, strict=True):
        if failed:
            origin, record = con.execute(
                f"SELECT origin, record FROM {table} WHERE {predicate} "
                "ORDER BY origin, record NULLS FIRST LIMIT 1"
            ).fetchone() or ("?", None)
            raise InputError(origin, rule, where=record_place(origin, record))


class UniqueDocIds:
    """Fed the doc_id-sorted batches as they are written (like a digest): duplicates are
    adjacent there, so the check costs no pass of its own (a GROUP BY over 10M doc_ids
    took 1.4 s). Remembers the first duplicate seen."""

    def __init__(self) -> None:
        self.last: str | None = None
        self.duplicate: str | None = None

    def update(self, batch: Any) -> None:
        import pyarrow.compute as pc

        ids = batch.column("doc_id")
        if len(ids) == 0 or self.duplicate is not None:
            return
        if ids[0].as_py() == self.last:
            self.duplicate = self.last
            return
        same = pc.equal(ids.slice(1), ids.slice(0, len(ids) - 1))
        if pc.any(same).as_py():
            self.duplicate = ids[pc.index(same, True).as_py() + 1].as_py()
        self.last = ids[-1].as_py()


class ControlChars:
    """Fed the manifest lines as they are hashed: a line holds exactly one TAB between
    fields and one LF, so any other control byte is in a doc_id, source or licence.
    Counting bytes there replaced three regular expressions over the table (1.1 s at
    10M rows); `check_rows(con, CONTROL_RULES)` then names the row."""

    def __init__(self, fields: int) -> None:
        self.per_line = fields  # fields - 1 TABs and the LF
        self.found = False

    def update(self, batch: Any) -> None:
        import numpy as np

        if self.found or batch.num_rows == 0:
            return
        lines = batch.column(LINE_COLUMN)
        count = 0
        for chunk in getattr(lines, "chunks", [lines]):
            data = np.frombuffer(string_values(chunk), dtype=np.uint8)
            count += int(np.count_nonzero(data < 0x20)) + int(np.count_nonzero(data == 0x7F))
        self.found = count != self.per_line * batch.num_rows


def duplicate_error(con: duckdb.DuckDBPyConnection, doc_id: str) -> InputError:
    """The error for a doc_id that occurs twice, naming both places."""
    seen = con.execute(
        "SELECT origin, record FROM docs WHERE doc_id = ? ORDER BY origin, record NULLS FIRST "
        "LIMIT 2", [doc_id]).fetchall()
    first, second = ({"origin": o, "record": r} for o, r in seen)
    here = second["origin"]
    also = (record_place(first["origin"], first["record"]) or "") if first["record"] else ""
    return InputError(
        here,
        f"duplicate doc_id {doc_id!r} (also at {first['origin']}{':' + also if also else ''}); "
        "doc_ids must be unique within a corpus",
        where=record_place(here, second["record"]),
    )


def summarize_sources(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    rows = con.execute(
        """
        SELECT source, count(*), sum(n_tokens), sum(n_bytes),
               coalesce(list(DISTINCT license ORDER BY license)
                        FILTER (WHERE license IS NOT NULL), [])
        FROM docs GROUP BY source ORDER BY source
        """
    ).fetchall()
    return [
        {"source": s, "documents": d, "tokens": int(t), "bytes": int(b), "licenses": lic}
        for s, d, t, b, lic in rows
    ]


def _totals(con: duckdb.DuckDBPyConnection) -> tuple[int, int, int]:
    """The corpus's documents, tokens and bytes."""
    docs, tokens, size = con.execute(
        "SELECT count(*), coalesce(sum(n_tokens), 0), coalesce(sum(n_bytes), 0) FROM docs"
    ).fetchone() or (0, 0, 0)
    for name, total in (("n_tokens", tokens), ("n_bytes", size)):
        if int(total) > INT64_MAX:  # the catalog keeps totals as signed 64-bit integers
            origin = (con.execute("SELECT min(origin) FROM docs").fetchone() or ("?",))[0]
            raise IngestRuleError(origin, "integer-range", f"the corpus's {name} add up to "
                                  f"{int(total)}, more than {INT64_MAX}")
    return int(docs), int(tokens), int(size)


def write_sorted_parts(
    con: duckdb.DuckDBPyConnection,
    *,
    corpus: str,
    out_dir: Path,
    total: int,
    scratch: Path,
    progress: Any = None,
    after_sort: Callable[[], None] | None = None,
) -> tuple[str, list[WrittenPart]]:
    """Write the rows sorted by doc_id into temp parts; hash exactly what was written.
    `after_sort` is called once DuckDB has sorted them, before they are written;
    `scratch`: a folder of the sort's own (lineage.ingest.sort_ranges)."""
    unique, hasher = UniqueDocIds(), ManifestHasher()
    controls = ControlChars(len(hasher.columns))
    # The sort carries only the columns written (rows a third narrower than the staged
    # ones, so a 10M-row sort spills less); the constant corpus is added after it.
    any_text = _any_text(con)
    where_text = ("CASE WHEN has_text THEN origin END AS origin, "
                  "CASE WHEN has_text THEN record END AS record" if any_text else
                  "NULL::VARCHAR AS origin, NULL::BIGINT AS record")
    written = "doc_id, source, uri, n_bytes, n_tokens, content_hash, license, metadata"
    # What the sort reads: dealt into key ranges, the rows carry nothing else (a ready
    # manifest's rows would carry their file's path and record number for nothing)
    carried = written + (", has_text, origin, record" if any_text else "")
    sql = (f"SELECT ?::VARCHAR AS corpus, *, {hasher.sql_line()} AS {LINE_COLUMN} FROM ("
           f"SELECT {written}, {where_text} FROM {{rows}} ORDER BY doc_id)")
    reader = sorted_by_ranges(con, sql, [corpus], "doc_id", total, after_first=after_sort,
                              scratch=scratch, columns=carried)
    parts = write_parts(
        reader, schema=documents_schema(), out_dir=out_dir, sorted_by=["doc_id"],
        digests=[hasher, controls, unique], progress=progress, stage="writing documents",
        total=total,
    )
    if controls.found:
        discard_parts(parts)
        check_rows(con, CONTROL_RULES)
        raise AssertionError("a control character was counted but no row holds one")
    if unique.duplicate is not None:
        discard_parts(parts)
        raise duplicate_error(con, unique.duplicate)
    return hasher.manifest_hash(), parts


def _any_text(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether some document's text can be read back from where it was ingested."""
    return bool(con.execute("SELECT bool_or(has_text) FROM docs").fetchall()[0][0])


def write_hash_index(
    con: duckdb.DuckDBPyConnection, *, corpus: str, out_dir: Path, total: int,
    scratch: Path, progress: Any = None, arrays: CorpusColumns | None = None,
) -> list[WrittenPart]:
    """The same documents sorted by content hash, for "was this file in the corpus?".
    `arrays` takes the corpus's lookup arrays columns from the same sorted rows (which
    carry the uri for it: the parts do not)."""
    # the first 8 bytes as an integer sort like the hex string, and much faster
    prefix = "('0x' || left(content_hash, 16))::UBIGINT"
    carried = "content_hash, doc_id, source" + (", uri" if arrays is not None else "")
    reader = sorted_by_ranges(
        con, f"SELECT ?::VARCHAR AS corpus, * FROM (SELECT {carried} "
        f"FROM {{rows}} ORDER BY {prefix}, content_hash, doc_id)",
        [corpus], prefix, total, key_type="UBIGINT", scratch=scratch, columns=carried)
    return write_parts(
        reader, schema=document_hashes_schema(), out_dir=out_dir, sorted_by=["content_hash"],
        digests=[] if arrays is None else [arrays], progress=progress,
        stage="indexing content hashes", total=total,
        row_group_rows=LOOKUP_ROW_GROUP_ROWS, part_rows=LOOKUP_PART_ROWS,
        range_columns=["content_hash"],
    )
