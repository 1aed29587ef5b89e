"""A sort run as key ranges gives the rows, and the batches, of one ORDER BY."""

from __future__ import annotations

import duckdb
import pyarrow as pa
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
    sql = "SELECT ? AS tag, * FROM (SELECT * FROM docs WHERE {range} ORDER BY doc_id, n)"
    whole = con.sql("SELECT 'x' AS tag, * FROM docs ORDER BY doc_id, n").fetchall()
    reader = sorted_by_ranges(con, sql, ["x"], "doc_id", len(keys), range_rows=range_rows,
                              batch_rows=batch_rows)
    batches = list(reader)
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
