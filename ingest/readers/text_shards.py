"""JSONL (Dolma style) and Parquet (FineWeb style) shards of documents with text.

JSONL: one JSON object per line with `text` and optional `id`, `source`, `url`,
`metadata`, `token_count`; plain, gzip or zstd. Parquet: `text` and optional `id`, `url`,
`token_count` (a document's tokens under `--tokenizer input`). Each shard's values are
checked first (ingest/value_rules.py: types, NaN, nesting, integer ranges, lines of at
most 16 MiB; a compressed shard read to its end), then DuckDB reads it; each text is
hashed as its exact UTF-8 bytes.
A document without `id` is named `<shard name>#<record>` (1-based, blank lines not
counted). One call maps one shard to one staged Parquet part; calls are independent,
so they run in a process pool (or on any engine that can call a function).
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import blake3

from lineage.corpora.token_count import TokenizerSpec, count_tokens
from lineage.errors import InputError
from lineage.ingest.input_rules import IngestRuleError, bounded_lines, check_unchanged, stat_of
from lineage.ingest.inputs import open_text_stream
from lineage.ingest.staging import ShardSummary, staged_schema
from lineage.ingest.text_index import TextIndexer
from lineage.ingest.value_rules import (
    ANY,
    COUNT,
    ID,
    STRING,
    TEXT,
    check_jsonl,
    check_parquet_not_null,
    check_parquet_types,
)
from lineage.store.durable import parquet_writer

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

_BATCH_ROWS = 8192


@dataclass(frozen=True)
class TextShardTask:
    path: str
    kind: str  # "jsonl" | "parquet"
    name: str
    part: str  # where to write the staged part
    source: str | None  # forced source; else the record's, else `default_source`
    default_source: str
    tokenizer: TokenizerSpec
    fingerprint_part: str | None = None  # where to stage fingerprints; None: no text index


def stage_text_shard(task: TextShardTask) -> ShardSummary:
    """Read, check and hash one shard; write its staged part. Pure apart from the part."""
    import duckdb

    before = stat_of(task.path)
    checked_offsets = check_shard_values(task)
    check_unchanged(task.path, before)
    con = duckdb.connect(":memory:")
    try:
        con.execute("SET threads = 1")
        con.execute("SET preserve_insertion_order = true")  # record numbers follow the file
        reader = _open_records(con, task)
        tok = task.tokenizer.load() if task.tokenizer.kind == "file" else None
        kept = dropped = 0
        record = 0
        indexer = TextIndexer(task.fingerprint_part) if task.fingerprint_part else None
        # where each record starts, from the check's pass (the file is unchanged since)
        offsets = checked_offsets if indexer and _plain_jsonl(task) else None
        with parquet_writer(task.part, staged_schema()) as writer, \
                indexer or contextlib.nullcontext():
            while True:
                try:
                    batch = reader.read_next_batch()
                except StopIteration:
                    break
                except duckdb.Error as exc:
                    raise _locate_error(task, exc) from exc
                if offsets is not None and record + batch.num_rows > len(offsets):
                    check_unchanged(task.path, before)  # more records than were checked
                staged, empty = _stage_batch(task, batch, record, tok, indexer, offsets)
                record += batch.num_rows
                dropped += empty
                kept += staged.num_rows
                writer.write_table(staged)
        fingerprints = indexer.close() if indexer else None
        check_unchanged(task.path, before)  # checked, then read by DuckDB: the same bytes
        return ShardSummary(task.part if kept else None, kept, dropped, fingerprints,
                            indexer.staged_near if indexer else None)
    finally:
        con.close()


JSONL_FIELDS = {"text": TEXT, "id": ID, "source": STRING, "url": STRING, "metadata": ANY}
# Read (so checked) only under --tokenizer input: other tokenizers never look at it.
JSONL_COUNT = {"token_count": COUNT}
PARQUET_FIELDS = {"text": TEXT, "id": ID, "url": STRING, "token_count": COUNT}


def check_shard_values(task: TextShardTask) -> list[int] | None:
    """Refuse what DuckDB would coerce, and a compressed shard that fails its check;
    for JSONL, where each record's line starts."""
    if task.kind == "jsonl":
        counted = task.tokenizer.kind == "input"
        return check_jsonl(Path(task.path), JSONL_FIELDS | (JSONL_COUNT if counted else {}))
    check_parquet_types(Path(task.path), PARQUET_FIELDS)
    check_parquet_not_null(Path(task.path), "id")
    return None


def _open_records(con: duckdb.DuckDBPyConnection, task: TextShardTask) -> pa.RecordBatchReader:
    import duckdb

    try:
        if task.kind == "jsonl":
            # Under --tokenizer input, token_count was checked to be an integer (or null,
            # or absent) on every line: DuckDB reads it as it is, coercing nothing.
            counted = task.tokenizer.kind == "input"
            count = "token_count" if counted else "NULL::BIGINT AS token_count"
            sql = (
                f"SELECT text, id, source, url, metadata, {count} "
                "FROM read_json(?, format = 'newline_delimited', columns = {text: 'VARCHAR', "
                "id: 'VARCHAR', source: 'VARCHAR', url: 'VARCHAR', metadata: 'JSON'"
                + (", token_count: 'BIGINT'" if counted else "") + "})"
            )
        else:
            present = {row[0] for row in con.execute(
                "DESCRIBE SELECT * FROM read_parquet(?)", [task.path]).fetchall()}
            if "text" not in present:
                raise InputError(task.path, "Parquet shard has no `text` column")
            pick = {
                "id": "CAST(id AS VARCHAR)", "url": "CAST(url AS VARCHAR)",
                "token_count": "CAST(token_count AS BIGINT)",
            }
            cols = [f"{expr} AS {name}" if name in present else f"NULL AS {name}"
                    for name, expr in pick.items()]
            sql = (
                f"SELECT CAST(text AS VARCHAR) AS text, {cols[0]}, NULL::VARCHAR AS source, "
                f"{cols[1]}, NULL::VARCHAR AS metadata, {cols[2]} FROM read_parquet(?)"
            )
        return con.cursor().sql(sql, params=[task.path]).to_arrow_reader(_BATCH_ROWS)
    except duckdb.Error as exc:
        raise _locate_error(task, exc) from exc


def _stage_batch(
    task: TextShardTask, batch: pa.RecordBatch, first_record: int, tok: object,
    indexer: TextIndexer | None = None, offsets: list[int] | None = None,
) -> tuple[pa.Table, int]:
    """Hash and describe one batch of records; returns (staged rows, empty count)."""
    import pyarrow as pa

    text = batch.column("text")
    if text.null_count:
        bad = first_record + text.is_null().to_pylist().index(True) + 1
        raise InputError(task.path, "record has no `text` string", where=_where(task, bad))
    hashes, sizes = _hash_texts(text)
    ids = batch.column("id").to_pylist()
    sources = batch.column("source").to_pylist()
    keep = [i for i, size in enumerate(sizes) if size > 0]
    # Python strings only when a tokenizer or the text index reads them, and only once.
    kept_texts: list[str] = []
    if indexer is not None or task.tokenizer.kind == "file":
        every_text = text.to_pylist()
        kept_texts = [every_text[i] for i in keep]
    token_counts = _token_counts(task, batch, keep, sizes, tok, first_record, kept_texts)
    doc_ids = [ids[i] if ids[i] is not None else f"{task.name}#{first_record + i + 1}"
               for i in keep]
    text_hashes: list[str | None] = [None] * len(keep)
    n_words: list[int | None] = [None] * len(keep)
    if indexer is not None:
        text_hashes, n_words = indexer.identities(doc_ids, kept_texts)
    rows = {
        "doc_id": doc_ids,
        "source": [task.source or sources[i] or task.default_source for i in keep],
        "uri": _pick(batch.column("url").to_pylist(), keep),
        "n_bytes": [sizes[i] for i in keep],
        "n_tokens": token_counts,
        "content_hash": [hashes[i] for i in keep],
        "license": [None] * len(keep),  # assigned in the reduce (--license)
        "metadata": _pick(batch.column("metadata").to_pylist(), keep),
        "origin": [str(Path(task.path).resolve())] * len(keep),
        "record": [first_record + i + 1 for i in keep],
        "has_text": [True] * len(keep),
        "text_hash": text_hashes,
        "n_words": n_words,
        "byte_offset": ([offsets[first_record + i] for i in keep] if offsets
                        else [None] * len(keep)),
    }
    return pa.table(rows, schema=staged_schema()), len(sizes) - len(keep)


def _plain_jsonl(task: TextShardTask) -> bool:
    return task.kind == "jsonl" and not task.path.lower().endswith((".gz", ".zst"))


def _hash_texts(text: pa.Array) -> tuple[list[str], list[int]]:
    """BLAKE3 hex and byte length of every string, straight from the Arrow buffers."""
    import pyarrow as pa

    if text.type != pa.large_string():
        text = text.cast(pa.large_string())
    offsets = memoryview(text.buffers()[1]).cast("q")[text.offset : text.offset + len(text) + 1]
    data = memoryview(text.buffers()[2]) if len(text) else memoryview(b"")
    hashes: list[str] = []
    sizes: list[int] = []
    for i in range(len(text)):
        start, end = offsets[i], offsets[i + 1]
        hashes.append(blake3.blake3(data[start:end]).hexdigest())
        sizes.append(end - start)
    return hashes, sizes


def _token_counts(
    task: TextShardTask,
    batch: pa.RecordBatch,
    keep: list[int],
    sizes: list[int],
    tok: object,
    first_record: int,
    kept_texts: list[str],
) -> list[int]:
    kind = task.tokenizer.kind
    if kind == "bytes":
        return [sizes[i] for i in keep]
    if kind == "input":
        counts = batch.column("token_count").to_pylist()
        for i in keep:
            if counts[i] is None or counts[i] < 0:
                raise InputError(
                    task.path, "--tokenizer input needs a non-negative `token_count`",
                    where=_where(task, first_record + i + 1),
                )
        return [counts[i] for i in keep]
    return count_tokens(tok, kept_texts)  # type: ignore[arg-type]


def _pick(values: list[object], keep: list[int]) -> list[object]:
    return [values[i] for i in keep]


def _where(task: TextShardTask, record: int) -> str:
    return f"record {record}" if task.kind == "jsonl" else f"row {record}"


def _locate_error(task: TextShardTask, exc: Exception) -> InputError:
    """Name the exact line DuckDB choked on; its own line numbers are not reliable."""
    if task.kind == "jsonl":
        located = find_jsonl_error(Path(task.path))
        if located is not None:
            return located
    first = str(exc).strip().splitlines()[0]
    return InputError(task.path, f"cannot be read as {task.kind} ({first})")


def find_jsonl_error(path: Path) -> InputError | None:
    """Scan a JSONL shard line by line for the first rule it breaks (slow; errors only)."""
    record = 0
    try:
        with open_text_stream(path) as handle:
            for line_no, raw in enumerate(bounded_lines(handle, path), start=1):
                if not raw.strip():
                    continue
                record += 1
                problem = _jsonl_line_problem(raw)
                if problem:
                    return InputError(path, problem, where=f"line {line_no}")
    except IngestRuleError as exc:
        return exc
    except (OSError, EOFError) as exc:
        return InputError(path, f"cannot be decompressed or read ({exc})")
    return None


def _jsonl_line_problem(raw: bytes) -> str | None:
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"invalid UTF-8 at byte {exc.start} of the line"
    try:
        value = json.loads(line)
    except ValueError as exc:
        return f"malformed JSON ({exc.args[0].split(':')[0]})"
    if not isinstance(value, dict):
        return f"expected a JSON object, found {type(value).__name__}"
    text = value.get("text")
    if not isinstance(text, str):
        return "record has no `text` string"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "`text` holds an unpaired surrogate escape (not valid Unicode)"
    if "id" in value and not isinstance(value["id"], str | int):
        return "`id` must be a string or an integer"
    return None
