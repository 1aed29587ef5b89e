"""Write the table reference (docs/schemas.md) from the schema itself.

    python -m lineage.schemas.docgen > docs/schemas.md

Catalog tables: columns, types and keys from the DDL as DuckDB creates it; meanings from
the `--` comments of `catalog.sql` (above a table: the table's; after a column: the
column's). Parquet tables: columns and types from the Arrow schemas, the table's
description from their docstrings. The few meanings the SQL does not carry, and every
Parquet column's, are in NOTES below. A test checks that the committed page equals this
output, that every column has a meaning and that no meaning names a missing column.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import lineage.schemas
from lineage.schemas import BULK_TABLES, SCHEMA_VERSION, catalog_ddl, duckdb_columns, migrations

# Meanings of columns the DDL comments do not describe, by table. A column described both
# here and in catalog.sql is an error: one place per column.
NOTES: dict[str, dict[str, str]] = {
    "schema_info": {
        "": "Key-value facts about the store: `schema_version`, and `last_commit`, a random "
            "mark each write's transaction sets and reads back when its COMMIT fails "
            "([store.md](store.md#what-a-commit-is)).",
        "key": "`schema_version` or `last_commit`",
        "value": "the schema version, as text; the last commit's mark (16 hex)",
    },
    "parquet_files": {
        "n_rows": "rows in the file", "n_bytes": "bytes of the file",
        "created_at": "UTC time of the commit that registered it",
    },
    "corpora": {
        "": "One row per corpus.",
        "name": "corpus name: letters, digits, `.`, `_`, `-`; starts with a letter or digit; "
                "at most 128",
        "documents": "documents kept (empty ones dropped)", "tokens": "their tokens",
        "bytes": "their bytes", "created_at": "UTC time of the commit",
    },
    "corpus_sources": {
        "": "Per corpus and source: what the source holds.",
        "corpus": "the corpus", "source": "the source (sub-corpus)",
        "documents": "documents of the source", "tokens": "their tokens",
        "bytes": "their bytes",
    },
    "ingests": {
        "id": "a UUID", "started_at": "UTC time the ingest started",
        "finished_at": "UTC time it committed",
        "lineage_version": "the lineage version that ran it",
    },
    "streams": {
        "name": "stream name (corpus name rule)", "spec": "`lineage-stream/1` or `recorded`",
        "corpus": "the corpus it orders", "manifest_hash": "that corpus's manifest hash",
        "seq_len": "tokens per window", "separator_tokens": "tokens between documents",
        "token_budget": "the budget that cut the stream, or NULL",
        "windows": "windows consumed: steps × batch", "steps": "whole steps",
        "created_at": "UTC time of the commit",
    },
    "runs": {
        "name": "run name (corpus name rule)",
        "world_size": "ranks a step was split among",
        "genesis": "the chain's genesis hash, `blake3:<hex>` (docs/chain-spec.md)",
        "created_at": "UTC time of the first ingest",
    },
    "steps": {
        "run": "the run", "step": "0-based step number",
        "state_hash": "the step's hash in the chain",
        "prev_hash": "the previous step's state_hash, as recorded",
        "loss": "as logged", "grad_norm": "as logged", "lr": "learning rate, as logged",
        "clipped": "the gradient was clipped", "skipped": "the update was skipped",
        "weights_digest": "digest of the weights after the step, when logged",
        "record": "the log line byte for byte (the bytes that were hashed)",
    },
    "run_segments": {
        "": "One row per ingested step log (restart segment) of a run.",
        "run": "the run", "segment": "0-based, in ingest order",
        "log_path": "absolute path of the log file", "first_step": "its first step",
        "last_step": "its last step", "records": "step records in the log",
        "new_steps": "steps no earlier segment had recorded",
        "ingested_at": "UTC time of the ingest",
    },
    "checkpoints": {
        "": "One row per ingested checkpoint of a run.",
        "run": "the run", "step": "the step it was saved at (`--step`)",
        "path": "absolute path of the checkpoint folder",
        "structure_ok": "every file passed its format's structural checks",
        "created_at": "UTC time of the ingest",
    },
    "experiments": {
        "name": "a name given with `--name`, or NULL", "revision": "`--revision`, or NULL",
        "created_at": "UTC time it was recorded",
    },
    "text_indexes": {
        "corpus": "the corpus", "fingerprints": "rows of `fingerprints` for the corpus",
    },
    "documents": {
        "corpus": "corpus name", "doc_id": "unique within the corpus",
        "source": "sub-corpus",
        "uri": "where the document came from: `file://` URI, the record's `url`, or the "
               "manifest's `uri`",
        "n_bytes": "bytes of the document", "n_tokens": "tokens under the corpus's tokenizer",
        "content_hash": "BLAKE3-256 of the exact bytes, 64 lowercase hex",
        "license": "SPDX id or `LicenseRef-…`, or NULL",
        "metadata": "JSON text of a JSONL record's `metadata`, or NULL",
        "origin": "absolute path of the file the bytes were read from (for a ready manifest "
                  "with `--fingerprints`, the file its `uri` named)",
        "record": "1-based record (JSONL, blank lines not counted) or row (Parquet) in "
                  "`origin`; NULL when the document is the whole file",
    },
    "document_hashes": {
        "corpus": "corpus name", "content_hash": "BLAKE3-256 of the document's bytes",
        "doc_id": "the document", "source": "its source",
    },
    "occurrences": {
        "stream": "stream name", "ordinal": "0-based position in the stream",
        "corpus": "the document's corpus", "doc_id": "the document", "source": "its source",
        "epoch": "0-based epoch of its source this occurrence belongs to",
        "stream_start": "global position of its first token (separators excluded)",
        "stream_end": "one past its last token",
        "doc_offset": "tokens of the document before `stream_start` (0 in canonical "
                      "streams; recorded segments may start inside a document)",
        "content_hash": "the document's BLAKE3", "uri": "the document's `uri`",
    },
    "occurrence_hashes": {
        "stream": "stream name", "content_hash": "the document's BLAKE3",
        "corpus": "the document's corpus", "doc_id": "the document", "source": "its source",
        "ordinal": "as in `occurrences`", "epoch": "as in `occurrences`",
        "stream_start": "as in `occurrences`", "stream_end": "as in `occurrences`",
        "doc_offset": "as in `occurrences`",
    },
    "text_documents": {
        "corpus": "corpus name",
        "doc": "the document's rank in doc_id order (its row in the corpus's `documents`)",
        "doc_id": "the document", "source": "its source", "content_hash": "its BLAKE3",
        "text_hash": "BLAKE3-256 of its normalized text (`lineage-text/1`)",
        "n_words": "normalized words", "n_bytes": "bytes of the document",
        "origin": "where its text can be read again (file, JSONL or Parquet shard)",
        "record": "1-based record or row in `origin`; NULL for a whole file",
        "byte_offset": "byte offset of the record's line in a plain JSONL shard, else NULL",
    },
    "text_hashes": {
        "corpus": "corpus name", "text_hash": "BLAKE3-256 of a normalized text",
        "doc": "`text_documents.doc`",
    },
    "fingerprints": {
        "corpus": "corpus name",
        "fingerprint": "a selected gram hash (`lineage-fingerprint/1`)",
        "doc": "`text_documents.doc`", "position": "first word of the gram in the document",
    },
    "near_bands": {
        "corpus": "corpus name",
        "band_key": "one of the document's 42 LSH band keys (`lineage-near/1`)",
        "doc": "`text_documents.doc`",
    },
}


_SCHEMA_PREFIX = r"^Schema \d+: "  # each migration's first line: "-- Schema N: what"


@dataclass
class Column:
    name: str
    type: str
    nullable: bool
    note: str = ""


@dataclass
class Table:
    name: str
    note: str
    columns: list[Column] = field(default_factory=list)
    key: str = ""


def sql_comments(ddl: str) -> dict[str, tuple[str, dict[str, str]]]:
    """Table -> (its comment, column -> comment), from the `--` comments of the DDL."""
    found: dict[str, tuple[str, dict[str, str]]] = {}
    above: list[str] = []
    table: str | None = None
    columns: dict[str, str] = {}
    last = ""
    for raw in ddl.splitlines():
        line = raw.strip()
        if table is None:
            start = re.match(r"CREATE TABLE (\w+) \($", line)
            if start:
                table, columns, last = start.group(1), {}, ""
            elif line.startswith("--"):
                above.append(line[2:].strip())
            else:
                above = []
            continue
        if line.startswith(");"):
            found[table] = (" ".join(above), columns)
            table, above = None, []
        elif line.startswith("--") and last:  # a column's comment, continued
            columns[last] = f"{columns[last]} {line[2:].strip()}".strip()
        elif not line.startswith("PRIMARY KEY"):
            last = line.split()[0]
            columns[last] = line.partition("--")[2].strip()
    return found


def catalog_tables() -> list[Table]:
    import duckdb

    ddl = catalog_ddl()
    comments = sql_comments(ddl)
    con = duckdb.connect()
    con.execute(ddl)
    tables = []
    for name in comments:
        table_note, column_notes = comments[name]
        notes = NOTES.get(name, {})
        table = Table(name, _one(name, "", table_note, notes.get("", "")))
        for column, kind, null, key, *_ in con.execute(f"DESCRIBE {name}").fetchall():
            note = _one(f"{name}.{column}", column, column_notes.get(column, ""),
                        notes.get(column, ""))
            table.columns.append(Column(column, kind, null == "YES", note))
            if key == "PRI":
                table.key += f"{', ' if table.key else ''}`{column}`"
        tables.append(table)
    return tables


def _one(where: str, column: str, from_sql: str, from_notes: str) -> str:
    if from_sql and from_notes:
        raise ValueError(f"{where}: described both in catalog.sql and in NOTES")
    if column and not (from_sql or from_notes):
        raise ValueError(f"{where}: no description (add a `--` comment in catalog.sql)")
    return from_sql or from_notes


def bulk_tables() -> list[Table]:
    tables = []
    for name in BULK_TABLES:
        builder = getattr(lineage.schemas, f"{name}_schema")  # documents -> documents_schema()
        schema = builder()
        types = duckdb_columns(schema)
        notes = NOTES.get(name, {})
        table = Table(name, " ".join((builder.__doc__ or "").split()))
        for arrow_field in schema:
            note = _one(f"{name}.{arrow_field.name}", arrow_field.name, "",
                        notes.get(arrow_field.name, ""))
            table.columns.append(Column(arrow_field.name, types[arrow_field.name],
                                        arrow_field.nullable, note))
        tables.append(table)
    return tables


def stale_notes() -> list[str]:
    """NOTES entries that name no table or column (a renamed or dropped one)."""
    known = {t.name: {c.name for c in t.columns} for t in [*catalog_tables(), *bulk_tables()]}
    return [f"{table}.{column}" for table, columns in NOTES.items() for column in columns
            if table not in known or (column and column not in known[table])]


def _render_table(table: Table, heading: str) -> list[str]:
    lines = [f"### `{table.name}`{heading}", ""]
    if table.note:
        lines += [table.note, ""]
    if table.key:
        lines += [f"Primary key: {table.key}.", ""]
    lines += ["| column | type | NULL | meaning |", "|---|---|---|---|"]
    lines += [f"| `{c.name}` | {c.type} | {'yes' if c.nullable else ''} | {_cell(c.note)} |"
              for c in table.columns]
    return [*lines, ""]


def _cell(text: str) -> str:
    """Markdown table cell text: `<hex>` is not an HTML tag, `|` not a cell border."""
    return text.replace("<", "&lt;").replace("|", "\\|")


def render() -> str:
    lines = ["# Tables and columns", "",
             "Generated by `python -m lineage.schemas.docgen` from `schemas/catalog.sql` and "
             "the Arrow schemas in `lineage.schemas`; do not edit by hand.", "",
             f"Schema version {SCHEMA_VERSION}. Each version added:", "",
             "| version | change |", "|---|---|", "| 1 | The first catalog |"]
    for version, script in migrations().items():
        first = script.strip().splitlines()[0].removeprefix("--").strip()
        change = re.sub(_SCHEMA_PREFIX, "", first).rstrip(".")
        lines.append(f"| {version} | {change[:1].upper()}{change[1:]} |")
    lines += ["", "## Parquet tables", "",
              "Bulk rows, in Parquet parts listed in `parquet_files`, read through views of "
              "the same name (docs/store.md).", ""]
    for table in bulk_tables():
        lines += _render_table(table, " (view over Parquet)")
    lines += ["## Catalog tables", "", "Small tables in `catalog.duckdb`.", ""]
    for table in catalog_tables():
        lines += _render_table(table, "")
    return "\n".join(lines).rstrip("\n") + "\n"


def main() -> None:
    print(render(), end="")


if __name__ == "__main__":
    main()
