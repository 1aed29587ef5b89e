"""`lineage-arrays/2` (docs/arrays-spec.md) re-derived from the spec alone: the bytes of
a corpus's and a stream's file made here with struct and BLAKE3 from the Parquet rows
equal the files the store wrote; the golden vector in the spec is what the writer makes;
the bytes do not depend on DuckDB's threads or on the batch sizes; each integer column is
as narrow as its values allow."""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import blake3
import pytest

from lineage.api import Store
from lineage.ingest import ingest_corpus
from lineage.store import arrays_rows, arrays_spool
from lineage.store.arrays import ArraysFile, ArraysRecord
from lineage.store.arrays_use import current_records
from lineage.stream.build import build_stream

from .conftest import REPO, write_jsonl

SPEC_DOC = REPO / "docs" / "arrays-spec.md"
# The golden vector's input (docs/arrays-spec.md, "Golden vector")
GOLDEN = [{"id": "a", "text": "one two three", "url": "s3://b/a"},
          {"id": "b", "text": "four five"},
          {"id": "c", "text": "one two three", "url": "s3://b/c"}]


# -- an encoder written from the spec, sharing no code with the writer -----------------

def _width(least: int, greatest: int) -> tuple[str, str]:
    if least >= 0:
        for kind, letter, limit in (("u8", "B", 256), ("u16", "H", 1 << 16),
                                    ("u32", "I", 1 << 32)):
            if greatest < limit:
                return kind, letter
    return "i64", "q"


def _ints(values: list[int]) -> tuple[str, bytes]:
    kind, letter = _width(min(values, default=0), max(values, default=0))
    return kind, struct.pack(f"<{len(values)}{letter}", *values)


def _b3(data: bytes, length: int = 16) -> bytes:
    return blake3.blake3(data).digest(length=length)


def spec_file(kind: str, columns: list[tuple[str, str, list[Any]]], rows: int,
              extra: dict[str, Any]) -> bytes:
    """An arrays file per the spec: columns as (name, kind, values) in file order."""
    body = b""
    entries: dict[str, Any] = {}
    for name, column_kind, values in columns:
        entry: dict[str, Any] = {"at": len(body), "count": len(values)}
        if column_kind == "int":
            entry["kind"], data = _ints(values)
            body += data
        elif column_kind == "h32":
            entry["kind"] = "h32"
            body += b"".join(bytes.fromhex(v) for v in values)
        elif column_kind == "str":
            heap, ends = b"", [0]
            for value in values:
                heap += b"" if value is None else value.encode("utf-8")
                ends.append(len(heap) * 2 + (value is None))
            width, letter = _width(0, len(heap) * 2 + 1)
            entry.update(kind="str", width=width)
            body += struct.pack(f"<{len(ends)}{letter}", *ends)
            entry["heap"] = len(body)
            body += heap
        else:  # dict
            words: list[Any] = []
            for value in values:
                if value not in words:
                    words.append(value)
            width, letter = _width(0, max(len(words) - 1, 0))
            entry.update(kind="dict", width=width, words=words)
            body += struct.pack(f"<{len(values)}{letter}", *[words.index(v) for v in values])
        entries[name] = entry
    digests = b"".join(_b3(body[i:i + 4096]) for i in range(0, len(body), 4096))
    pages = b"".join(_b3(digests[i:i + 4096]) for i in range(0, len(digests), 4096))
    directory = {"spec": "lineage-arrays/2", "kind": kind, "rows": rows, "block": 4096,
                 "page": 4096, "digests_at": len(body), "columns": entries, **extra}
    text = json.dumps(directory, sort_keys=True, separators=(",", ":")).encode()
    head_at = len(body) + len(digests)
    return (body + digests + pages + text + struct.pack("<I", len(text))
            + struct.pack("<Q", head_at) + b"LNARRAY2")


def expected_files(store: Store, corpus: str, stream: str) -> tuple[bytes, bytes]:
    """The corpus's and the stream's files, from the spec and the Parquet rows."""
    docs = store.sql(f"SELECT h.content_hash, h.doc_id, h.source, d.uri FROM "
                     f"document_hashes h JOIN documents d USING (corpus, doc_id) WHERE "
                     f"h.corpus = '{corpus}' ORDER BY h.content_hash, h.doc_id",
                     max_rows=None).rows
    corpus_bytes = spec_file("corpus", [
        ("content_hash", "h32", [r[0] for r in docs]), ("doc_id", "str", [r[1] for r in docs]),
        ("source", "dict", [r[2] for r in docs]), ("uri", "str", [r[3] for r in docs])],
        len(docs), {"corpus": corpus, "sorted_by": ["content_hash"]})
    row_of = {r[1]: i for i, r in enumerate(docs)}
    occ = store.sql(f"SELECT stream_start, stream_end, epoch, doc_offset, doc_id FROM "
                    f"occurrences WHERE stream = '{stream}' ORDER BY ordinal",
                    max_rows=None).rows
    doc = [row_of[r[4]] for r in occ]
    postings = sorted(range(len(occ)), key=lambda i: (doc[i], i))
    post_at = [sum(1 for d in doc if d < r) for r in range(len(docs) + 1)]
    stream_bytes = spec_file("stream", [
        ("stream_start", "int", [r[0] for r in occ]), ("stream_end", "int", [r[1] for r in occ]),
        ("epoch", "int", [r[2] for r in occ]), ("doc_offset", "int", [r[3] for r in occ]),
        ("doc", "int", doc), ("post_at", "int", post_at), ("postings", "int", postings)],
        len(occ), {"stream": stream, "corpus": corpus, "corpus_rows": len(docs),
                   "corpus_blake3": blake3.blake3(corpus_bytes).hexdigest(),
                   "sorted_by": ["stream_start", "stream_end"]})
    return corpus_bytes, stream_bytes


def _files(store: Store) -> dict[str, Path]:
    rows = store.sql("SELECT table_name, path FROM parquet_files WHERE table_name LIKE "
                     "'%_arrays'").rows
    return {table: store.root / path for table, path in rows}


def _corpus_c(fresh_store: Callable[[Path], Store], tmp_path: Path,
              records: list[dict[str, Any]]) -> Store:
    """A new store holding `records` as corpus "c" (source "web", no text index)."""
    write_jsonl(tmp_path / "docs.jsonl", records)
    store = fresh_store(tmp_path / "store")
    ingest_corpus(store, [tmp_path / "docs.jsonl"], corpus="c", source="web",
                  fingerprints=False)
    return store


def _assert_the_files_are_the_specs(store: Store) -> bytes:
    """The arrays files of corpus "c" and stream "s" are the spec's bytes; the corpus
    file's bytes."""
    corpus_bytes, stream_bytes = expected_files(store, "c", "s")
    files = _files(store)
    assert files["document_hashes_arrays"].read_bytes() == corpus_bytes
    assert files["occurrences_arrays"].read_bytes() == stream_bytes
    return corpus_bytes


def _golden_store(fresh_store: Callable[[Path], Store], tmp_path: Path) -> Store:
    write_jsonl(tmp_path / "golden.jsonl", GOLDEN)
    store = fresh_store(tmp_path / "store")
    ingest_corpus(store, [tmp_path / "golden.jsonl"], corpus="golden", source="web",
                  fingerprints=False)
    build_stream(store, corpus="golden", name="g", seed=1, seq_len=4, batch=2)
    return store


def test_the_golden_vector_is_what_the_spec_and_the_writer_make(
        fresh_store: Callable[[Path], Store], tmp_path: Path) -> None:
    store = _golden_store(fresh_store, tmp_path)
    corpus_bytes, stream_bytes = expected_files(store, "golden", "g")
    files = _files(store)
    assert files["document_hashes_arrays"].read_bytes() == corpus_bytes
    assert files["occurrences_arrays"].read_bytes() == stream_bytes
    text = SPEC_DOC.read_text(encoding="utf-8")
    for name, data in (("corpus", corpus_bytes), ("stream", stream_bytes)):
        found = re.search(rf"golden {name} file: (\d+) bytes, BLAKE3 ([0-9a-f]{{64}})", text)
        assert found, f"docs/arrays-spec.md states no golden {name} file"
        assert (int(found.group(1)), found.group(2)) == (
            len(data), blake3.blake3(data).hexdigest())


def test_random_stores_match_the_spec(fresh_store: Callable[[Path], Store],
                                      tmp_path: Path) -> None:
    """A larger corpus (blocks and pages of digests past one, strings, nulls, epochs)."""
    records = [{"id": f"doc-{i:05d}", "text": f"text {i % 9973} " * (1 + i % 3),
                **({"url": f"s3://bucket/{i}/é/{'u' * 60}"} if i % 3 else {})}
               for i in range(12_000)]
    store = _corpus_c(fresh_store, tmp_path, records)
    build_stream(store, corpus="c", name="s", seed=5, seq_len=64, batch=3, epochs=["web=2"])
    corpus_bytes = _assert_the_files_are_the_specs(store)
    assert len(corpus_bytes) > 4096 * 257  # more than one page of digests


@pytest.mark.parametrize("batch_rows", [5, 65_536])
def test_copies_of_a_text_are_placed_by_doc_id_in_the_stream_file(
        fresh_store: Callable[[Path], Store], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, batch_rows: int) -> None:
    """The stream file finds each occurrence's document by reading occurrence_hashes
    beside document_hashes: with 400 documents holding 6 texts (runs of copies sharing
    a content hash, told apart by doc_id), 3 epochs and batches of 5 rows (runs and
    documents split across batches), the file is still the spec's."""
    monkeypatch.setattr(arrays_rows, "BATCH_ROWS", batch_rows)
    records = [{"id": f"d{(i * 37) % 400:03d}", "text": f"text number {i % 6} " * 3}
               for i in range(400)]
    store = _corpus_c(fresh_store, tmp_path, records)
    build_stream(store, corpus="c", name="s", seed=2, seq_len=16, batch=2, epochs=["web=3"])
    assert store.sql("SELECT count(DISTINCT content_hash), count(*) FROM documents").rows == [
        (6, 400)]
    _assert_the_files_are_the_specs(store)


def test_a_stream_file_is_not_made_from_another_streams_hash_order(
        fresh_store: Callable[[Path], Store], tmp_path: Path) -> None:
    """Two streams of the same documents, each document once, in other orders: the same
    ordinals and documents, so only the sum of the rows' hashes tells that one stream's
    `occurrence_hashes` are not the other's occurrences; no file is made of them."""
    records = [{"id": f"d{i:03d}", "text": f"doc number {i:05d}"} for i in range(60)]
    store = _corpus_c(fresh_store, tmp_path, records)
    for name, seed in (("s", 1), ("t", 2)):
        build_stream(store, corpus="c", name=name, seed=seed, seq_len=16, batch=1)

    def parts(table: str, owner: str) -> list[Path]:
        return [store.root / r[0] for r in store.sql(
            f"SELECT path FROM parquet_files WHERE table_name = '{table}' AND owner = "
            f"'{owner}' ORDER BY path").rows]

    def made(by_hash: str) -> object:
        folder = tmp_path / f"scratch-{by_hash}"
        folder.mkdir()
        return arrays_rows.stream_file(
            folder / "file.arrays", folder, "s", parts("occurrences", "s"),
            parts("occurrence_hashes", by_hash), "c", "0" * 64, parts("document_hashes", "c"))

    orders = store.sql("SELECT stream, list(doc_id ORDER BY ordinal) FROM occurrences "
                       "GROUP BY stream ORDER BY stream").rows
    assert sorted(orders[0][1]) == sorted(orders[1][1]) != orders[0][1] != orders[1][1]
    assert made("s") is not None
    assert made("t") is None


@pytest.mark.parametrize("threads", [1, 4])
def test_the_bytes_do_not_depend_on_threads_or_batches(
        fresh_store: Callable[[Path], Store], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, threads: int) -> None:
    """Files made again with other DuckDB threads, batches of 7 rows, post_at made 3
    documents at a time and spools copied 5 values at a time: the same bytes."""
    from lineage.store.arrays_write import build_arrays

    store = _golden_store(fresh_store, tmp_path)
    before = {t: p.read_bytes() for t, p in _files(store).items()}
    monkeypatch.setattr(arrays_rows, "BATCH_ROWS", 7)
    monkeypatch.setattr(arrays_rows, "POSTINGS_CHUNK", 3)
    monkeypatch.setattr(arrays_spool, "COPY_VALUES", 5)
    session = arrays_rows._session
    monkeypatch.setattr(arrays_rows, "_session", lambda folder, _: session(folder, threads))
    for table, owner in (("document_hashes", "golden"), ("occurrences", "g")):
        with store.writer() as con:  # unregistered, so that repair's builder makes it anew
            con.execute("DELETE FROM parquet_files WHERE table_name = ?", [f"{table}_arrays"])
        assert build_arrays(store, table, owner) is not None
    assert {t: p.read_bytes() for t, p in _files(store).items()} == before


def test_each_integer_column_is_as_narrow_as_its_values(
        fresh_store: Callable[[Path], Store], tmp_path: Path) -> None:
    store = _golden_store(fresh_store, tmp_path)
    with store.reader(views=False) as con:
        record = current_records(con, "occurrences", "g")["g"]
    assert isinstance(record, ArraysRecord)
    with ArraysFile.open(store.root, record) as arrays:
        kinds = {name: column["kind"] for name, column in arrays.columns.items()}
        assert kinds == dict.fromkeys(kinds, "u8")  # a tiny stream: every value below 256
        assert arrays.directory["corpus_rows"] == 3
