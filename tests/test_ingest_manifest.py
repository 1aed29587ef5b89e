"""Ready manifests: loaded as they are, checked row by row, never re-hashed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lineage.api import Store
from lineage.corpora.manifest import manifest_hash_of_rows
from lineage.errors import InputError, UsageError
from lineage.ingest import ingest_corpus


def _rows(n: int, *, prefix: str = "doc") -> list[dict[str, Any]]:
    return [
        {"doc_id": f"{prefix}-{i:04d}", "source": "web" if i % 3 else "code",
         "uri": f"s3://bucket/{prefix}/{i}", "n_bytes": 100 + i, "n_tokens": 25 + i,
         "content_hash": f"{i:064x}", "license": "CC-BY-4.0" if i % 2 else None}
        for i in range(n)
    ]


def _columns(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    return {key: [row[key] for row in rows] for key in rows[0]}


def test_jsonl_and_parquet_manifests_give_one_hash(
    store: Store, tmp_path: Path, make_jsonl: Callable[..., Path],
    make_parquet: Callable[..., Path],
) -> None:
    rows = _rows(300)
    make_jsonl(tmp_path / "m.jsonl.gz", rows)
    make_parquet(tmp_path / "m.parquet", _columns(rows))
    from_jsonl = ingest_corpus(store, [tmp_path / "m.jsonl.gz"], corpus="j")
    from_parquet = ingest_corpus(store, [tmp_path / "m.parquet"], corpus="p")
    assert from_jsonl.manifest_hash == from_parquet.manifest_hash == manifest_hash_of_rows(rows)
    assert from_jsonl.tokenizer == "manifest"
    assert from_jsonl.documents == 300
    assert from_jsonl.tokens == sum(r["n_tokens"] for r in rows)
    stored = store.sql(
        "SELECT uri, license FROM documents WHERE corpus = 'j' AND doc_id = 'doc-0007'"
    ).rows
    assert stored == [("s3://bucket/doc/7", "CC-BY-4.0")]


def test_default_licence_fills_only_rows_without_one(
    store: Store, tmp_path: Path, make_parquet: Callable[..., Path]
) -> None:
    make_parquet(tmp_path / "m.parquet", _columns(_rows(4)))
    ingest_corpus(store, [tmp_path / "m.parquet"], corpus="c", license="MIT")
    licences = dict(store.sql("SELECT doc_id, license FROM documents").rows)
    assert licences == {"doc-0000": "MIT", "doc-0001": "CC-BY-4.0", "doc-0002": "MIT",
                        "doc-0003": "CC-BY-4.0"}


def test_empty_documents_are_dropped_and_counted(
    store: Store, tmp_path: Path, make_jsonl: Callable[..., Path]
) -> None:
    rows = _rows(5)
    rows[2] |= {"n_bytes": 0, "n_tokens": 0}
    make_jsonl(tmp_path / "m.jsonl", rows)
    result = ingest_corpus(store, [tmp_path / "m.jsonl"], corpus="c")
    assert (result.documents, result.dropped_empty) == (4, 1)


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        ({"content_hash": "ABC"}, "content_hash must be 64 lowercase hex digits (BLAKE3-256)"),
        ({"content_hash": "F" * 64}, "content_hash must be 64 lowercase hex digits (BLAKE3-256)"),
        ({"n_tokens": -1}, "n_tokens missing or negative"),
        ({"n_bytes": None}, "n_bytes missing or negative"),
        ({"doc_id": None}, "missing doc_id"),
        ({"source": ""}, "missing source"),
        ({"doc_id": "bad\nid"}, "doc_id contains a control character"),
        ({"source": "we\x7fb"}, "source contains a control character"),
        ({"license": "MIT\tor-not"}, "license contains a control character"),
    ],
)
def test_bad_rows_name_file_record_and_rule(
    store: Store, tmp_path: Path, make_jsonl: Callable[..., Path], change: dict[str, Any],
    rule: str,
) -> None:
    rows = _rows(6)
    rows[4] |= change
    make_jsonl(tmp_path / "m.jsonl", rows)
    with pytest.raises(InputError) as caught:
        ingest_corpus(store, [tmp_path / "m.jsonl"], corpus="c")
    assert str(caught.value) == f"{tmp_path / 'm.jsonl'}:record 5: {rule}"
    assert store.corpora() == []


def test_a_control_character_is_reported_before_a_duplicate(
    store: Store, tmp_path: Path, make_jsonl: Callable[..., Path]
) -> None:
    rows = _rows(6)
    rows[5]["doc_id"] = rows[1]["doc_id"]
    rows[3]["source"] = "web\x00"
    make_jsonl(tmp_path / "m.jsonl", rows)
    with pytest.raises(InputError) as caught:
        ingest_corpus(store, [tmp_path / "m.jsonl"], corpus="c")
    assert str(caught.value) == (f"{tmp_path / 'm.jsonl'}:record 4: "
                                 "source contains a control character")
    assert store.corpora() == []


def test_parquet_manifest_rows_are_numbered_from_one(
    store: Store, tmp_path: Path, make_parquet: Callable[..., Path]
) -> None:
    rows = _rows(3)
    rows[0]["content_hash"] = "nothex"
    make_parquet(tmp_path / "m.parquet", _columns(rows))
    with pytest.raises(InputError, match=r"m\.parquet:row 1: content_hash"):
        ingest_corpus(store, [tmp_path / "m.parquet"], corpus="c")


def test_missing_column_and_wrong_types(
    store: Store, tmp_path: Path, make_parquet: Callable[..., Path],
    make_jsonl: Callable[..., Path],
) -> None:
    columns = _columns(_rows(3))
    del columns["n_tokens"]
    make_parquet(tmp_path / "m.parquet", columns)
    with pytest.raises(InputError, match="manifest lacks column"):
        ingest_corpus(store, [tmp_path / "m.parquet"], corpus="c", fmt="manifest")
    rows = _rows(3)
    rows[1]["n_bytes"] = "lots"
    make_jsonl(tmp_path / "t.jsonl", rows)
    with pytest.raises(InputError, match=r"t\.jsonl:record 2: value-type: `n_bytes` must be "
                       "an integer, not a string"):
        ingest_corpus(store, [tmp_path / "t.jsonl"], corpus="c")


def test_duplicates_across_manifest_shards(
    store: Store, tmp_path: Path, make_parquet: Callable[..., Path]
) -> None:
    make_parquet(tmp_path / "a.parquet", _columns(_rows(3)))
    make_parquet(tmp_path / "b.parquet", _columns(_rows(3)[1:2]))
    with pytest.raises(InputError, match="duplicate doc_id 'doc-0001'"):
        ingest_corpus(store, [tmp_path / "a.parquet", tmp_path / "b.parquet"], corpus="c")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="abc", min_size=1, max_size=3), max_size=40),
       st.lists(st.integers(1, 7), min_size=1, max_size=10))
def test_duplicate_doc_ids_are_found_in_sorted_batches_at_any_boundary(
        ids: list[str], sizes: list[int]) -> None:
    """The write-time check sees the doc_id-sorted batches; it must name the smallest
    duplicated doc_id, wherever the batches are cut."""
    import pyarrow as pa

    from lineage.ingest.corpus_reduce import UniqueDocIds

    ordered = sorted(ids)
    check = UniqueDocIds()
    start, cut = 0, 0
    while start < len(ordered):
        size = sizes[cut % len(sizes)]
        check.update(pa.record_batch({"doc_id": ordered[start:start + size]}))
        start, cut = start + size, cut + 1
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    assert check.duplicate == (repeated[0] if repeated else None)


def test_parquet_manifests_load_together_and_a_bad_one_is_named(
    store: Store, tmp_path: Path, make_parquet: Callable[..., Path]
) -> None:
    first = _columns(_rows(3))
    second = _columns(_rows(3, prefix="b"))
    del second["license"]  # a manifest without the optional column
    make_parquet(tmp_path / "a.parquet", first)
    make_parquet(tmp_path / "b.parquet", second)
    both = ingest_corpus(store, [tmp_path / "a.parquet", tmp_path / "b.parquet"], corpus="ab")
    assert both.manifest_hash == manifest_hash_of_rows(
        _rows(3) + [{**r, "license": None} for r in _rows(3, prefix="b")])
    places = store.sql("SELECT doc_id, origin, record FROM documents ORDER BY doc_id").rows
    assert places[0] == ("b-0000", None, None)  # ready manifests keep no text origin
    bad = {**first, "n_bytes": ["many", "more", "most"]}
    make_parquet(tmp_path / "c.parquet", bad)
    with pytest.raises(InputError, match=r"c\.parquet: value-type: column `n_bytes` must be an "
                       "integer, not string"):
        ingest_corpus(store, [tmp_path / "a.parquet", tmp_path / "c.parquet"], corpus="bad")
    assert [c["name"] for c in store.corpora()] == ["ab"]


def test_parquet_licences_by_source_read_in_place_match_the_loaded_jsonl(
    store: Store, tmp_path: Path, make_parquet: Callable[..., Path]
) -> None:
    """Parquet manifests are read where they are (a view), JSONL ones loaded into a
    table: per-source licences, the default and the manifest's own agree, and so does
    the manifest hash; a licence for a source no row has is refused on both."""
    from tests.conftest import write_jsonl

    rows = [{**row, "source": "it's"} if i == 2 else row for i, row in enumerate(_rows(9))]
    make_parquet(tmp_path / "m.parquet", _columns(rows))
    write_jsonl(tmp_path / "m.jsonl", rows)
    licences = ["code=Apache-2.0", "it's=O'Neil-1.0", "MIT"]
    answers = [ingest_corpus(store, [tmp_path / name], corpus=name.split(".")[1],
                             license=licences) for name in ("m.parquet", "m.jsonl")]
    assert answers[0].manifest_hash == answers[1].manifest_hash
    by_corpus = store.sql("SELECT corpus, list(license ORDER BY doc_id) FROM documents "
                          "GROUP BY corpus ORDER BY corpus").rows
    by_source = {"code": "Apache-2.0", "it's": "O'Neil-1.0"}
    expected = [row["license"] or by_source.get(row["source"], "MIT") for row in rows]
    assert by_corpus[0][1] == by_corpus[1][1] == expected
    assert {"Apache-2.0", "O'Neil-1.0", "MIT", "CC-BY-4.0"} == set(expected)
    for name in ("m.parquet", "m.jsonl"):
        with pytest.raises(UsageError, match="no document has source 'books'"):
            ingest_corpus(store, [tmp_path / name], corpus="x", license="books=MIT")


def test_a_value_no_cast_takes_names_its_parquet_file(
    store: Store, tmp_path: Path, make_parquet: Callable[..., Path]
) -> None:
    """Read in place, a count beyond a signed 64-bit integer in the second of two
    Parquet manifests is found on the first pass and named with its file, as a load
    names it; nothing is stored."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    make_parquet(tmp_path / "a.parquet", _columns(_rows(4)))
    columns = _columns(_rows(4, prefix="b"))
    table = pa.table({**columns, "n_bytes": pa.array([1, 2, 2**63 + 5, 4], pa.uint64())})
    pq.write_table(table, tmp_path / "b.parquet")
    with pytest.raises(InputError) as caught:
        ingest_corpus(store, [tmp_path / "a.parquet", tmp_path / "b.parquet"], corpus="c")
    assert str(tmp_path / "b.parquet") in str(caught.value)
    assert "a.parquet" not in str(caught.value)
    assert store.sql("SELECT count(*) FROM corpora").rows == [(0,)]


@pytest.mark.parametrize("rewrite", ["replaced", "rewritten in place"])
def test_a_parquet_manifest_changed_between_passes_is_refused(
    store: Store, tmp_path: Path, make_parquet: Callable[..., Path],
    monkeypatch: pytest.MonkeyPatch, rewrite: str,
) -> None:
    """Read in place, a manifest is read by every pass of the reduce: one replaced
    after the first pass (a new file renamed over it, or the same file rewritten) would
    give documents and content-hash index from different rows. It is refused, named,
    and nothing is stored or left behind."""
    import lineage.ingest.corpus_reduce as reduce

    make_parquet(tmp_path / "a.parquet", _columns(_rows(6)))
    make_parquet(tmp_path / "b.parquet", _columns(_rows(6, prefix="b")))
    summarize = reduce.summarize_sources

    def after_a_pass(con: Any) -> Any:
        answer = summarize(con)
        other = _columns(_rows(7, prefix="b"))
        if rewrite == "replaced":
            make_parquet(tmp_path / "new.parquet", other)
            (tmp_path / "new.parquet").replace(tmp_path / "b.parquet")
        else:
            make_parquet(tmp_path / "b.parquet", other)
        return answer

    monkeypatch.setattr(reduce, "summarize_sources", after_a_pass)
    with pytest.raises(InputError, match=r"b\.parquet: changed-while-read: size") as caught:
        ingest_corpus(store, [tmp_path / "a.parquet", tmp_path / "b.parquet"], corpus="c")
    assert "a.parquet" not in str(caught.value)
    assert store.sql("SELECT count(*) FROM corpora").rows == [(0,)]
    assert not [p for p in (store.root / "tables").rglob("*") if p.is_file()]


def test_a_jsonl_manifest_changed_between_its_check_and_its_load_is_refused(
    store: Store, tmp_path: Path, make_jsonl: Callable[..., Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A JSONL manifest's field types are checked by one read and its rows loaded by
    another: a file grown in between (here by a count written as a string, which the
    load would coerce) is refused."""
    import lineage.ingest.readers.manifests as manifests

    path = make_jsonl(tmp_path / "m.jsonl", _rows(3))
    check = manifests.check_jsonl_columns

    def then_append(con: Any, checked: Path, fields: Any) -> None:
        check(con, checked, fields)
        with path.open("a") as out:
            out.write('{"doc_id": "late", "source": "web", "uri": "u", "n_bytes": "5", '
                      f'"n_tokens": 1, "content_hash": "{7:064x}"}}\n')

    monkeypatch.setattr(manifests, "check_jsonl_columns", then_append)
    with pytest.raises(InputError, match=r"m\.jsonl: changed-while-read"):
        ingest_corpus(store, [path], corpus="c")
    assert store.sql("SELECT count(*) FROM corpora").rows == [(0,)]
