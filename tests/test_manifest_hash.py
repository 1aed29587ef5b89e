"""Properties of `lineage-manifest/1`: the fast hash equals the spec's reference, and it
depends on the documents only, not on how they were split into shards or ordered."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lineage.api import Store
from lineage.corpora.manifest import ManifestHasher, manifest_hash_of_rows
from lineage.ingest import ingest_corpus

_text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\t\n\r\x1f\x7f"
                  + "".join(chr(c) for c in range(32))),
    min_size=1, max_size=12,
)
_row = st.fixed_dictionaries({
    "doc_id": _text,
    "source": st.sampled_from(["web", "code", "ünïcode"]),
    "uri": st.none() | _text,
    "n_bytes": st.integers(1, 2**40),
    "n_tokens": st.integers(0, 2**40),
    "content_hash": st.binary(min_size=32, max_size=32).map(bytes.hex),
    "license": st.none() | st.sampled_from(["MIT", "CC-BY-4.0"]),
})
_rows = st.lists(_row, min_size=1, max_size=40, unique_by=lambda r: r["doc_id"])


def _table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.table({k: [r[k] for r in rows] for k in rows[0]})


@given(rows=_rows, cut=st.integers(0, 40))
def test_fast_hash_matches_reference_for_any_batching(rows: list[dict[str, Any]], cut: int) -> None:
    ordered = sorted(rows, key=lambda r: r["doc_id"].encode("utf-8"))
    table = _table(ordered)
    hasher = ManifestHasher()
    hasher.update(table.slice(0, cut))
    hasher.update(table.slice(cut))
    assert hasher.manifest_hash() == manifest_hash_of_rows(rows)


@settings(max_examples=50, deadline=None)
@given(rows=_rows)
def test_lines_built_by_duckdb_hash_like_arrow_lines(rows: list[dict[str, Any]]) -> None:
    import duckdb

    con = duckdb.connect()
    con.register("sorted_rows", _table(sorted(rows, key=lambda r: r["doc_id"].encode("utf-8"))))
    by_sql = ManifestHasher()
    batch = con.sql(f"SELECT *, {by_sql.sql_line()} AS line FROM sorted_rows").to_arrow_table()
    by_sql.update(batch)
    assert by_sql.manifest_hash() == manifest_hash_of_rows(rows)


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=_rows, data=st.data())
def test_ingest_hash_ignores_sharding_and_order(
    tmp_path_factory: pytest.TempPathFactory, fresh_store: Callable[[Path], Store],
    rows: list[dict[str, Any]], data: st.DataObject
) -> None:
    root = tmp_path_factory.mktemp("m")
    store = fresh_store(root / "store")
    shuffled = data.draw(st.permutations(rows))
    cut = data.draw(st.integers(0, len(rows)))
    paths = []
    for i, chunk in enumerate([shuffled[:cut], shuffled[cut:]]):
        if chunk:
            paths.append(root / f"part{i}.parquet")
            pq.write_table(_table(chunk), paths[-1])
    result = ingest_corpus(store, paths, corpus="c", workers=1)
    assert result.manifest_hash == manifest_hash_of_rows(rows)
    stored = [r[0] for r in store.sql("SELECT doc_id FROM documents").rows]
    assert stored == sorted(stored, key=lambda s: s.encode("utf-8"))


def test_golden_manifest_hash() -> None:
    # Pinned: any change to the canonical line format must change the spec version.
    rows = [
        {"doc_id": "b", "source": "web", "n_bytes": 3, "n_tokens": 3,
         "content_hash": "a" * 64, "license": None},
        {"doc_id": "a", "source": "web", "n_bytes": 10, "n_tokens": 4,
         "content_hash": "0" * 64, "license": "MIT"},
    ]
    import blake3

    text = ("lineage-manifest/1\n"
            f"a\tweb\t10\t4\t{'0' * 64}\tMIT\n"
            f"b\tweb\t3\t3\t{'a' * 64}\t\n")
    expected = "blake3:" + blake3.blake3(text.encode()).hexdigest()
    assert manifest_hash_of_rows(rows) == expected
    hasher = ManifestHasher()
    hasher.update(_table(sorted(rows, key=lambda r: r["doc_id"])))
    assert hasher.manifest_hash() == expected
