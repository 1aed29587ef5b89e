"""A sort run as key ranges gives the rows, and the batches, of one ORDER BY."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lineage.ingest.sort_ranges import rebatched, sorted_by_ranges


def _table(con: duckdb.DuckDBPyConnection, keys: list[str]) -> None:
    con.execute("CREATE OR REPLACE TABLE docs (doc_id VARCHAR, n BIGINT)")
    if keys:
        con.executemany("INSERT INTO docs VALUES (?, ?)", [[k, i] for i, k in enumerate(keys)])


@settings(max_examples=40, deadline=None)
@given(keys=st.lists(st.text(alphabet="ab\u00e9z09", min_size=1, max_size=4), max_size=60),
       range_rows=st.integers(1, 70), batch_rows=st.integers(1, 9))
def test_ranges_give_the_rows_and_batches_of_one_sort(
        keys: list[str], range_rows: int, batch_rows: int) -> None:
    con = duckdb.connect()
    _table(con, keys)
    sql = "SELECT ? AS tag, * FROM (SELECT * FROM {rows} ORDER BY doc_id, n)"
    whole = con.sql("SELECT 'x' AS tag, * FROM docs ORDER BY doc_id, n").fetchall()
    with tempfile.TemporaryDirectory() as scratch:
        reader = sorted_by_ranges(con, sql, ["x"], "doc_id", len(keys), range_rows=range_rows,
                                  batch_rows=batch_rows, scratch=Path(scratch) / "s")
        batches = list(reader)
        assert not (Path(scratch) / "s").exists()  # every range's file deleted once read
    assert [row for b in batches for row in pa.Table.from_batches([b]).to_pylist()] == [
        dict(zip(["tag", "doc_id", "n"], row, strict=True)) for row in whole]
    sizes = [b.num_rows for b in batches]
    assert all(s == batch_rows for s in sizes[:-1]) and all(sizes)


@settings(deadline=None)
@given(sizes=st.lists(st.integers(0, 12), max_size=12), rows=st.integers(1, 7))
def test_rebatched_cuts_exact_batches(sizes: list[int], rows: int) -> None:
    start, batches = 0, []
    for size in sizes:
        batches.append(pa.record_batch({"v": list(range(start, start + size))}))
        start += size
    out = list(rebatched(iter(batches), rows))
    assert [v for b in out for v in b.column("v").to_pylist()] == list(range(start))
    assert [b.num_rows for b in out] == [rows] * (start // rows) + (
        [start % rows] if start % rows else [])


def test_an_ingest_writes_the_same_bytes_whatever_the_threads_and_ranges(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Part bytes are the store's evidence (sizes and SHA-256 in the catalog, rebuilt
    byte for byte by `store repair`): 150,000 rows, more than two batches, ingested by
    DuckDB on one thread and on four, sorted whole and in ranges of 40,000 rows, give the
    same files."""
    import pyarrow.parquet as pq

    import lineage.ingest.sort_ranges as ranges
    from lineage.api import init_store, open_store
    from lineage.ingest import ingest_corpus

    n = 150_000
    manifest = tmp_path / "manifest.parquet"
    pq.write_table(pa.table({
        "doc_id": [f"d{(i * 7919) % n:07d}" for i in range(n)],  # not in sorted order
        "source": ["web" if i % 3 else "code" for i in range(n)],
        "uri": [f"s3://b/{i}" for i in range(n)],
        "n_bytes": [100 + i % 977 for i in range(n)],
        "n_tokens": [25 + i % 311 for i in range(n)],
        "content_hash": [f"{(i * 2654435761) % 2**64:016x}" * 4 for i in range(n)]}), manifest)
    connect = duckdb.connect

    def stores() -> Iterator[tuple[str, dict[str, str]]]:
        for threads, range_rows in ((1, ranges.RANGE_ROWS), (4, 40_000), (2, 40_000)):
            def with_threads(*args: Any, _threads: int = threads, **kwargs: Any) -> Any:
                con = connect(*args, **kwargs)
                con.execute(f"SET threads = {_threads}")
                return con

            monkeypatch.setattr(duckdb, "connect", with_threads)
            monkeypatch.setattr(ranges, "RANGE_ROWS", range_rows)
            monkeypatch.setattr(ranges, "WHOLE_SORT_ROWS", range_rows)
            root = tmp_path / f"store-{threads}-{range_rows}"
            init_store(root)
            store = open_store(root)
            ingest_corpus(store, [manifest], corpus="c")
            monkeypatch.setattr(duckdb, "connect", connect)
            parts = dict(store.sql("SELECT table_name || '/' || row_groups::VARCHAR, sha256 "
                                   "FROM parquet_files ORDER BY path").rows)
            yield f"{threads} threads, ranges of {range_rows:,}", parts

    made = dict(stores())
    first = next(iter(made.values()))
    assert len(first) >= 3  # documents, content-hash index, lookup arrays
    for label, parts in made.items():
        assert parts == first, label


def test_documents_with_text_give_the_same_store_sorted_whole_or_in_ranges(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Documents whose text the store can read back keep their file and line in the
    documents table; dealt into key ranges, the rows carry them through: 300 lines of a
    play, as files, give the same parts (text index included) sorted whole and in ranges
    of 40."""
    import lineage.ingest.sort_ranges as ranges
    from lineage.api import init_store, open_store
    from lineage.ingest import ingest_corpus

    from .conftest import EXAMPLES

    folder = tmp_path / "lines"
    folder.mkdir()
    play = (EXAMPLES / "corpus" / "shakespeare" / "julius_caesar.txt").read_text("utf-8")
    for i, line in enumerate([line for line in play.splitlines() if line.strip()][:300]):
        (folder / f"line-{i:03d}.txt").write_text(line + "\n", encoding="utf-8")

    def parts(label: str) -> list[tuple[Any, ...]]:
        root = tmp_path / label
        init_store(root)
        store = open_store(root)
        ingest_corpus(store, [folder], corpus="c")
        return store.sql("SELECT table_name, row_groups, sha256 FROM parquet_files "
                         "ORDER BY path").rows

    whole = parts("whole")
    monkeypatch.setattr(ranges, "RANGE_ROWS", 40)
    monkeypatch.setattr(ranges, "WHOLE_SORT_ROWS", 40)
    dealt: list[int] = []
    deal = ranges._RangeFiles.deal
    monkeypatch.setattr(ranges._RangeFiles, "deal",
                        lambda self, batch: (dealt.append(batch.num_rows), deal(self, batch)))
    assert parts("ranges") == whole
    assert sum(dealt) >= 2 * 300  # both sorts went through ranges
    assert any(name == "documents" for name, _, _ in whole)
