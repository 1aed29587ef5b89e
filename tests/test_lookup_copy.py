"""Lookup copies (lineage/store/lookup_copy.py): lookups read from them find exactly what
a scan of the Parquet parts finds, answers are the same bytes, damage is refused, and a
part committed after the copies were made is read from Parquet."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lineage.api import Store, open_store
from lineage.errors import DamagedPartError
from lineage.ingest import ingest_corpus
from lineage.jsonout import json_text
from lineage.store.lookup_copy import INDEX_NAME, LookupCopies, PartCopy
from lineage.store.lookup_copy_write import make_copies
from lineage.store.part_read import lookup_rows
from lineage.stream.query import docs_in_step
from lineage.text.trained_on import trained_on_hashes

from .test_part_read import (  # noqa: F401 (small_parts: the fixture)
    HASHED,
    OCCURRENCES,
    _scanned,
    assert_span_finds_scan,
    assert_values_find_scan,
    small_parts,
)

BATCH_ROWS = 5  # not the row groups' 8: batches and row groups do not line up


@pytest.fixture(scope="module")
def copies(small_parts: Store, tmp_path_factory: pytest.TempPathFactory,  # noqa: F811
           ) -> LookupCopies:
    folder = tmp_path_factory.mktemp("copies")
    digest = make_copies(small_parts, folder, batch_rows=BATCH_ROWS)
    return LookupCopies.load(folder, digest)


@pytest.fixture(scope="module")
def copied(small_parts: Store, copies: LookupCopies) -> Store:  # noqa: F811
    """The store reading its lookup tables from the copies."""
    store = open_store(small_parts.root)
    store.lookup_copies = copies
    return store


def test_every_lookup_part_is_copied_in_several_batches(small_parts: Store,  # noqa: F811
                                                        copies: LookupCopies) -> None:
    listed = small_parts.sql("SELECT count(*) FROM parquet_files WHERE table_name IN "
                             "('occurrences', 'occurrence_hashes', 'document_hashes', "
                             "'text_hashes', 'fingerprints', 'text_documents')").rows[0][0]
    assert len(copies) == listed
    batches = [len(copy.record.ends) - 1 for copy in copies.copies.values()]
    assert max(batches) > 4


@settings(max_examples=60, deadline=None)
@given(first=st.integers(0, 4000), length=st.integers(1, 600))
def test_a_token_range_in_the_copies_finds_what_a_scan_finds(copied: Store, first: int,
                                                             length: int) -> None:
    assert_span_finds_scan(copied, first, length)


@settings(max_examples=15, deadline=None)  # each example scans two tables
@given(picks=st.lists(st.integers(0, 10**6), max_size=12),
       absent=st.lists(st.integers(0, 2**31 - 1), max_size=3))
def test_many_values_of_a_key_in_the_copies_find_what_a_scan_finds(
        small_parts: Store, copied: Store, picks: list[int], absent: list[int]) -> None:  # noqa: F811
    assert_values_find_scan(small_parts, picks, absent, copied)


def test_every_hash_in_the_copies_finds_what_a_scan_finds(copied: Store) -> None:
    digests = [row[0] for row in copied.sql(
        "SELECT DISTINCT content_hash FROM documents ORDER BY 1").rows]
    texts = [row[0] for row in copied.sql(
        "SELECT DISTINCT text_hash FROM text_hashes ORDER BY 1").rows]
    absent = ["0" * 64, "f" * 64, digests[len(digests) // 2][:-1] + "x"]
    lookups = [(table, owner, columns, "content_hash", digest)
               for table, (owner, columns) in HASHED.items()
               for digest in [*digests, *absent]]
    lookups += [("text_hashes", None, ["corpus", "doc"], "text_hash", text)
                for text in [*texts, *absent]]
    with copied.reader(views=False) as con:
        for table, owner, columns, key, value in lookups:
            found = lookup_rows(con, copied, table, owner, columns, equal=(key, value))
            assert found == _scanned(copied, table, owner, columns, f"{key} = ?",
                                     [value]), (table, value)
            assert found or value in absent


def test_answers_from_the_copies_are_the_same_bytes(small_parts: Store,  # noqa: F811
                                                    copies: LookupCopies) -> None:
    """Every step (whole, and one rank's) and every document, as a server answers them
    (from a copy of the catalog), with the copies and without."""
    from lineage.serve.stores import snapshots_for

    snapshots = snapshots_for(small_parts.root)
    plain, copied = snapshots.served(), snapshots.served(lookup_copies=copies)
    steps = int(small_parts.streams()[0]["steps"])
    for step in range(steps):
        for rank in (None, 1):
            asked = {"stream": "s", "rank": rank, "world_size": rank and 2}
            assert json_text(docs_in_step(copied, step, **asked)) == \
                json_text(docs_in_step(plain, step, **asked)), (step, rank)
    digests = [row[0] for row in small_parts.sql(
        "SELECT DISTINCT content_hash FROM documents ORDER BY 1").rows]
    for digest in digests:
        query = [(digest, digest)]
        assert json_text(trained_on_hashes(copied, query)) == \
            json_text(trained_on_hashes(plain, query))


def _damaged(copies: LookupCopies, tmp_path: Path) -> tuple[Path, LookupCopies]:
    """A private copy of the copies' folder, loaded again."""
    folder = tmp_path / "copies"
    shutil.copytree(copies.folder, folder)
    index = (folder / INDEX_NAME).read_bytes()
    import blake3

    return folder, LookupCopies.load(folder, blake3.blake3(index).hexdigest())


def _refusal(small_parts: Store, copies: LookupCopies, tmp_path: Path,  # noqa: F811
             damage: Callable[[PartCopy], None]) -> tuple[str, PartCopy]:
    """The error of a token-range lookup after `damage` to a private copy of the first
    occurrences part's copy, and that copy."""
    _, loaded = _damaged(copies, tmp_path)
    store = open_store(small_parts.root)
    store.lookup_copies = loaded
    part = small_parts.sql("SELECT path, sha256 FROM parquet_files WHERE table_name = "
                           "'occurrences' ORDER BY path LIMIT 1").rows[0]
    copy = loaded.copies[(part[0], part[1])]
    damage(copy)
    with store.reader(views=False) as con, pytest.raises(DamagedPartError) as caught:
        lookup_rows(con, store, "occurrences", "s", OCCURRENCES, span=(0, 1))
    return str(caught.value), copy


def _flip(copy: PartCopy, at: int) -> None:
    data = bytearray(copy.path.read_bytes())
    data[at] ^= 0x01
    copy.path.write_bytes(bytes(data))


def test_a_changed_batch_is_refused(small_parts: Store, copies: LookupCopies,  # noqa: F811
                                    tmp_path: Path) -> None:
    error, copy = _refusal(small_parts, copies, tmp_path,
                           lambda copy: _flip(copy, copy.record.ends[0] // 2))  # batch 0
    assert error.startswith(f"{copy.path}: damaged part: batch 0 (bytes 0..")
    assert error.endswith("does not match the BLAKE3 in the copies' index; restart "
                          "`lineage serve` to make the lookup copies again")


def test_an_index_that_is_not_the_one_made_is_refused(copies: LookupCopies,
                                                      tmp_path: Path) -> None:
    folder, _ = _damaged(copies, tmp_path)
    index = folder / INDEX_NAME
    import blake3

    made = blake3.blake3(index.read_bytes()).hexdigest()
    index.write_bytes(index.read_bytes().replace(b'"n_bytes": ', b'"n_bytes": 1', 1))
    with pytest.raises(DamagedPartError, match="does not match the BLAKE3"):
        LookupCopies.load(folder, made)


def test_a_part_committed_after_the_copies_is_read_from_parquet(
        small_parts: Store, tmp_path: Path, example_corpus: Path) -> None:  # noqa: F811
    root = tmp_path / "store"
    shutil.copytree(small_parts.root, root)
    store = open_store(root)
    folder = tmp_path / "copies"
    folder.mkdir()
    store.lookup_copies = LookupCopies.load(folder, make_copies(store, folder))
    ingest_corpus(store, [example_corpus / "python-stdlib"], corpus="stdlib")
    digests = [row[0] for row in store.sql(
        "SELECT content_hash FROM documents WHERE corpus = 'stdlib' ORDER BY 1").rows]
    assert digests
    with store.reader(views=False) as con:
        new = con.execute("SELECT path, sha256 FROM parquet_files WHERE table_name = "
                          "'document_hashes' AND path NOT IN (SELECT unnest(?))",
                          [[p for p, _ in store.lookup_copies.copies]]).fetchall()
        assert new  # the new corpus's part has no copy
        for digest in digests:
            found = lookup_rows(con, store, "document_hashes", None, ["corpus", "doc_id"],
                                equal=("content_hash", digest))
            assert ("stdlib",) in {(corpus,) for corpus, _ in found}
    assert sorted(os.listdir(folder))[-1] == INDEX_NAME


def test_a_text_of_a_corpus_ingested_after_the_copies_is_matched_by_a_query(
        small_parts: Store, tmp_path: Path, example_corpus: Path) -> None:  # noqa: F811
    """A text's fingerprints in a part that has no copy (committed after the copies were
    made) are found by a query instead: the same answer as without copies, for a
    passage of the new corpus and one of the old."""
    from lineage.text.trained_on import trained_on

    root = tmp_path / "store"
    shutil.copytree(small_parts.root, root)
    store = open_store(root)
    folder = tmp_path / "copies"
    folder.mkdir()
    copies = LookupCopies.load(folder, make_copies(store, folder))
    ingest_corpus(store, [example_corpus / "python-stdlib"], corpus="stdlib")
    copied = open_store(root)
    copied.lookup_copies = copies
    passages = [" ".join(path.read_text(encoding="utf-8").split()[200:280]) for path in
                (example_corpus / "python-stdlib" / "string.py",
                 example_corpus / "shakespeare" / "macbeth.txt")]
    answer = trained_on(copied, texts=passages)
    assert answer == trained_on(store, texts=passages)
    assert [r["matches"][0]["corpus"] for r in answer["results"]] == ["stdlib", "plays"]


def test_texts_with_many_fingerprint_hits_are_ranked_by_the_query(
        small_parts: Store, copied: Store, example_corpus: Path,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Past `_RANKED_HERE` hits, read from the copies or by a query, the ranking query
    ranks them: the same answers as ranking them in Python."""
    from lineage.text import match
    from lineage.text.trained_on import trained_on

    passages = [" ".join(path.read_text(encoding="utf-8").split()[300:380]) for path in
                sorted((example_corpus / "shakespeare").glob("*.txt"))[:4]]
    expected = trained_on(small_parts, texts=passages)
    in_sql = match.ranked_in_sql
    ranked: list[int] = []
    monkeypatch.setattr(match, "ranked_in_sql",
                        lambda *args: ranked.append(1) or in_sql(*args))
    monkeypatch.setattr(match, "_RANKED_HERE", 2)
    assert trained_on(small_parts, texts=passages) == expected
    assert trained_on(copied, texts=passages) == expected
    assert len(ranked) == 2 * len(passages)


def test_lookups_with_copies_decode_no_parquet(copied: Store,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from lineage.store import part_read

    def refuse(*args: object) -> None:
        raise AssertionError("a Parquet part was opened")

    monkeypatch.setattr(part_read, "open_checked", refuse)
    digest = copied.sql("SELECT content_hash FROM documents LIMIT 1").rows[0][0]
    assert docs_in_step(copied, 3, stream="s")["documents"]
    assert trained_on_hashes(copied, [(digest, digest)])["results"][0]["matches"]


def test_a_budget_counts_rows_only_within_it() -> None:
    from lineage.store.budget import OverBudget, lookup_budget, refuse_within_budget, spend

    spend(10**12)  # outside a budget, reading is free
    refuse_within_budget("a Parquet lookup")
    with lookup_budget(300):
        spend(256)
        with pytest.raises(OverBudget, match="256 rows asked, 44 left"):
            spend(256)
        spend(44)
        with pytest.raises(OverBudget, match="a DuckDB query"):
            refuse_within_budget("a DuckDB query")
    spend(10**12)


def test_a_changed_schema_is_refused_when_first_read(
        small_parts: Store, copies: LookupCopies, tmp_path: Path) -> None:  # noqa: F811
    """A copy's schema is read and checked with its first batches (then kept parsed)."""
    error, copy = _refusal(small_parts, copies, tmp_path, lambda copy: _flip(
        copy, (copy.record.ends[-2] + copy.record.ends[-1]) // 2))  # within the schema
    assert error.startswith(f"{copy.path}: damaged part: schema (bytes "
                            f"{copy.record.ends[-2]}..")


def test_a_copy_of_another_size_is_refused(small_parts: Store, copies: LookupCopies,  # noqa: F811
                                           tmp_path: Path) -> None:
    def grow(copy: PartCopy) -> None:
        with copy.path.open("ab") as out:
            out.write(b"\0")

    error, copy = _refusal(small_parts, copies, tmp_path, grow)
    size = copy.n_bytes
    assert error == (f"{copy.path}: damaged part: is {size + 1} bytes, the copies' "
                     f"index says {size}; restart `lineage serve` to make the lookup copies "
                     "again")
