"""The reduce side of the text index: number the documents, sort, write four tables.

Documents are numbered by their rank in doc_id order (`doc`, the row of the document in
the corpus's `documents` table), so a fingerprint row needs four bytes to name its
document. Four tables come out, each sorted for the lookup it answers:
`text_documents` (by doc), `text_hashes` (by normalized-text hash), `fingerprints`
(by fingerprint) and `near_bands` (by band key, `lineage-near/1`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lineage.schemas import (
    fingerprints_schema,
    near_bands_schema,
    text_documents_schema,
    text_hashes_schema,
)
from lineage.store.parts import (
    TEXT_PART_ROWS,
    TEXT_ROW_GROUP_ROWS,
    WrittenPart,
    discard_parts,
    write_parts,
)
from lineage.text.fingerprint import FINGERPRINT_SPEC, K, W
from lineage.text.identity import TEXT_SPEC, UNICODE_VERSION

if TYPE_CHECKING:
    import duckdb

TEXT_TABLES = ("text_documents", "text_hashes", "fingerprints", "near_bands")
_FETCH_ROWS = 65_536
# Sorted 64-bit fingerprints delta-encode to about 5 bytes instead of 8; document and
# position numbers split by byte compress better than plain.
FINGERPRINT_ENCODINGS = {"fingerprint": "DELTA_BINARY_PACKED", "doc": "BYTE_STREAM_SPLIT",
                         "position": "BYTE_STREAM_SPLIT"}
NEAR_ENCODINGS = {"band_key": "DELTA_BINARY_PACKED", "doc": "BYTE_STREAM_SPLIT"}


@dataclass
class TextIndexSummary:
    documents: int = 0
    not_text: int = 0
    words: int = 0
    fingerprints: int = 0
    text_bytes: int = 0
    document_parts: list[WrittenPart] = field(default_factory=list)
    hash_parts: list[WrittenPart] = field(default_factory=list)
    fingerprint_parts: list[WrittenPart] = field(default_factory=list)
    band_keys: int = 0
    near_parts: list[WrittenPart] = field(default_factory=list)

    def all_parts(self) -> list[WrittenPart]:
        return [*self.document_parts, *self.hash_parts, *self.fingerprint_parts,
                *self.near_parts]

    def catalog_row(self, corpus: str) -> dict[str, Any]:
        """The `text_indexes` row, by column name."""
        return {"corpus": corpus, "text_spec": TEXT_SPEC, "fingerprint_spec": FINGERPRINT_SPEC,
                "k": K, "w": W, "documents": self.documents, "not_text": self.not_text,
                "words": self.words, "fingerprints": self.fingerprints,
                "text_bytes": self.text_bytes,
                "index_bytes": sum(part.n_bytes for part in self.fingerprint_parts),
                "unicode_version": UNICODE_VERSION}


def write_text_index(
    con: duckdb.DuckDBPyConnection, *, corpus: str, staged_fingerprints: list[str],
    out_dir: Path, progress: Any = None, staged_near: list[str] | None = None,
) -> TextIndexSummary:
    """Write the text index of the reduce's `docs` table; remove every part on error."""
    con.execute(
        "CREATE TABLE numbered AS SELECT * FROM (SELECT doc_id, source, content_hash, "
        "text_hash, n_words, n_bytes, CASE WHEN has_text THEN origin END AS origin, "
        "CASE WHEN has_text THEN record END AS record, byte_offset, "
        "row_number() OVER (ORDER BY doc_id) - 1 AS doc FROM docs) WHERE text_hash IS NOT NULL"
    )
    summary = TextIndexSummary()
    row = con.execute("SELECT count(*), coalesce(sum(n_words), 0), coalesce(sum(n_bytes), 0), "
                      "(SELECT count(*) FROM docs) FROM numbered").fetchall()[0]
    summary.documents, summary.words, summary.text_bytes = int(row[0]), int(row[1]), int(row[2])
    summary.not_text = int(row[3]) - summary.documents
    try:
        summary.document_parts = _write(
            con, "SELECT ?::VARCHAR AS corpus, doc, doc_id, source, content_hash, text_hash, "
            "n_words, n_bytes, origin, record, byte_offset FROM numbered ORDER BY doc", [corpus],
            text_documents_schema(), out_dir / "text_documents", ["doc"], progress,
            "writing text documents", summary.documents,
            # doc_id grows with doc: its ranges let a lookup by doc_id (a trainer's
            # documents, a document page) read only the row groups that hold them.
            ranges=["doc", "doc_id"])
        summary.hash_parts = _write(
            con, "SELECT ?::VARCHAR AS corpus, text_hash, doc "
            "FROM numbered ORDER BY ('0x' || left(text_hash, 16))::UBIGINT, text_hash, doc",
            [corpus], text_hashes_schema(), out_dir / "text_hashes", ["text_hash"], progress,
            "indexing text hashes", summary.documents)
        if staged_fingerprints:
            summary.fingerprints = int(con.execute(
                "SELECT count(*) FROM read_parquet(?)", [staged_fingerprints]).fetchall()[0][0])
            summary.fingerprint_parts = _write(
                con, "SELECT ?::VARCHAR AS corpus, f.fingerprint, n.doc::UINTEGER AS doc, "
                "f.position FROM read_parquet(?) f JOIN numbered n USING (doc_id) "
                "ORDER BY f.fingerprint, doc, f.position", [corpus, staged_fingerprints],
                fingerprints_schema(), out_dir / "fingerprints", ["fingerprint"], progress,
                "writing fingerprints", summary.fingerprints, FINGERPRINT_ENCODINGS)
        if staged_near:
            summary.band_keys = int(con.execute(
                "SELECT count(*) FROM read_parquet(?)", [staged_near]).fetchall()[0][0])
            summary.near_parts = _write(
                con, "SELECT ?::VARCHAR AS corpus, s.band_key, n.doc::UINTEGER AS doc "
                "FROM read_parquet(?) s JOIN numbered n USING (doc_id) "
                "ORDER BY s.band_key, doc", [corpus, staged_near],
                near_bands_schema(), out_dir / "near_bands", ["band_key"], progress,
                "writing near-duplicate band keys", summary.band_keys, NEAR_ENCODINGS)
    except BaseException:
        discard_parts(summary.all_parts())
        raise
    return summary


def _write(
    con: duckdb.DuckDBPyConnection, sql: str, params: list[Any], schema: Any, out_dir: Path,
    key: list[str], progress: Any, stage: str, total: int,
    encodings: dict[str, str] | None = None, ranges: list[str] | None = None,
) -> list[WrittenPart]:
    reader = con.cursor().sql(sql, params=params).to_arrow_reader(_FETCH_ROWS)
    return write_parts(
        reader, schema=schema, out_dir=out_dir, sorted_by=key, progress=progress,
        stage=stage, total=total, row_group_rows=TEXT_ROW_GROUP_ROWS,
        part_rows=TEXT_PART_ROWS, range_columns=ranges or key,
        encodings=encodings,
    )
