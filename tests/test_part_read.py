"""Lookups decoded by pyarrow from the checked bytes (lineage/store/part_read.py) give
exactly the rows DuckDB finds scanning every part of the table, for every step range and
every content hash, on a store whose tables span several parts and row groups."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lineage.api import Store, init_store, open_store
from lineage.ingest import ingest_corpus
from lineage.store import parts
from lineage.store.part_read import lookup_rows
from lineage.stream.build import build_stream

OCCURRENCES = ["doc_id", "source", "uri", "content_hash", "epoch", "stream_start",
               "stream_end", "doc_offset", "ordinal"]
HASHED = {"document_hashes": (None, ["corpus", "source", "doc_id"]),
          "occurrence_hashes": ("s", ["corpus", "doc_id", "epoch", "stream_start",
                                      "stream_end", "doc_offset"])}


class _SmallParts(parts._RotatingWriter):
    """The real writer with row groups of at most 8 rows and parts of at most 40, so a
    small corpus spans parts and row groups as a large one does."""

    def __init__(self, out_dir: Path, schema: Any, written: list[Any], sorted_by: Any,
                 part_rows: int, row_group_rows: int, *rest: Any) -> None:
        super().__init__(out_dir, schema, written, sorted_by, min(part_rows, 40),
                         min(row_group_rows, 8), *rest)


@pytest.fixture(scope="module")
def small_parts(tmp_path_factory: pytest.TempPathFactory, example_corpus: Path) -> Store:
    corpus = tmp_path_factory.mktemp("read-corpus")
    for folder in ("shakespeare", "debian-copyright"):
        shutil.copytree(example_corpus / folder, corpus / folder)
    root = tmp_path_factory.mktemp("read-store") / "store"
    init_store(root)
    store = open_store(root)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(parts, "_RotatingWriter", _SmallParts)
        ingest_corpus(store, [corpus], corpus="plays")
        build_stream(store, corpus="plays", name="s", seed=1, seq_len=512, batch=8,
                     epochs={"shakespeare": "2", "debian-copyright": "1"})
    return store


def _scanned(store: Store, table: str, owner: str | None, columns: list[str],
             where: str, params: list[Any]) -> list[tuple[Any, ...]]:
    """The rows DuckDB finds reading every part of the table, in file order."""
    with store.reader(views=False) as con:
        files = [str(store.root / row[0]) for row in con.execute(
            "SELECT path FROM parquet_files WHERE table_name = ? AND owner = coalesce(?, owner) "
            "ORDER BY path", [table, owner]).fetchall()]
        return con.execute(f"SELECT {', '.join(columns)} FROM read_parquet(?, filename = true, "
                           f"file_row_number = true) WHERE {where} ORDER BY filename, "
                           "file_row_number", [files, *params]).fetchall()


def test_the_fixture_spans_parts_and_row_groups(small_parts: Store) -> None:
    for table in ("occurrences", "occurrence_hashes", "document_hashes"):
        counts = small_parts.sql(f"SELECT count(*), sum(n_rows) FROM parquet_files "
                                 f"WHERE table_name = '{table}'").rows[0]
        assert counts[0] >= 3 and counts[1] > 8 * counts[0], (table, counts)


@settings(max_examples=60, deadline=None)
@given(first=st.integers(0, 4000), length=st.integers(1, 600))
def test_a_token_range_finds_what_a_scan_finds(small_parts: Store, first: int,
                                               length: int) -> None:
    tokens = int(small_parts.streams()[0]["tokens"])
    start = first * tokens // 4000
    end = start + length * 64
    with small_parts.reader(views=False) as con:
        found = lookup_rows(con, small_parts, "occurrences", "s", OCCURRENCES,
                            span=(start, end))
    assert found == _scanned(small_parts, "occurrences", "s", OCCURRENCES,
                             "stream_end > ? AND stream_start < ?", [start, end])


def test_every_content_hash_finds_what_a_scan_finds(small_parts: Store) -> None:
    digests = [row[0] for row in small_parts.sql(
        "SELECT DISTINCT content_hash FROM documents ORDER BY 1").rows]
    absent = ["0" * 64, "f" * 64, digests[len(digests) // 2][:-1] + "x"]
    assert len(digests) > 20
    for table, (owner, columns) in HASHED.items():
        with small_parts.reader(views=False) as con:
            for digest in [*digests, *absent]:
                found = lookup_rows(con, small_parts, table, owner, columns, digest=digest)
                assert found == _scanned(small_parts, table, owner, columns,
                                         "content_hash = ?", [digest]), (table, digest)
                assert found or digest in absent


def test_only_checked_bytes_are_decoded(small_parts: Store) -> None:
    """The reader of a lookup holds the footer and the row groups that were checked; a
    read of another row group fails instead of touching the file."""
    from lineage.store import part_read
    from lineage.store.part_check import checked_ranges

    with small_parts.reader(views=False) as con:
        admits = parts.key_admits(span=(0, 1))
        [(path, n_bytes, sha256, row_groups)] = parts.candidate_parts(
            con, "occurrences", "s", admits)
    chunks = checked_ranges(small_parts.root, path, n_bytes, sha256, row_groups, admits)
    assert chunks.groups == {0}
    parquet = part_read._open(chunks, n_bytes)
    assert parquet.num_row_groups > 1
    assert parquet.read_row_group(0).num_rows == 8
    with pytest.raises(OSError, match="were not checked"):
        parquet.read_row_group(1)


def test_a_footer_is_parsed_once_per_process(small_parts: Store) -> None:
    from lineage.store import part_read

    with small_parts.reader(views=False) as con:
        lookup_rows(con, small_parts, "occurrences", "s", OCCURRENCES, span=(0, 1))
        parsed = part_read._footer.cache_info()
        lookup_rows(con, small_parts, "occurrences", "s", OCCURRENCES, span=(0, 1))
    after = part_read._footer.cache_info()
    assert (after.hits, after.misses) == (parsed.hits + 1, parsed.misses)
