"""Lookups decoded by pyarrow from the checked bytes (lineage/store/part_read.py) give
exactly the rows DuckDB finds scanning every part of the table, for every step range and
every content hash, on a store whose tables span several parts and row groups."""

from __future__ import annotations

import functools
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lineage.api import Store, init_store, open_store
from lineage.ingest import ingest_corpus
from lineage.store import part_select, parts
from lineage.store.part_check import RangeRecord
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


def assert_span_finds_scan(store: Store, first: int, length: int,
                           reader: Store | None = None) -> None:
    """The token range of a hypothesis example (its start `first`/4000 of the way through
    the stream, `length` x 64 tokens long), looked up through `reader` (default: `store`
    itself), finds the rows a scan of the store's parts finds."""
    reader = reader or store
    tokens = int(store.streams()[0]["tokens"])
    start = first * tokens // 4000
    end = start + length * 64
    with reader.reader(views=False) as con:
        found = lookup_rows(con, reader, "occurrences", "s", OCCURRENCES, span=(start, end))
    assert found == _scanned(store, "occurrences", "s", OCCURRENCES,
                             "stream_end > ? AND stream_start < ?", [start, end])


def test_the_fixture_spans_parts_and_row_groups(small_parts: Store) -> None:
    for table in ("occurrences", "occurrence_hashes", "document_hashes"):
        counts = small_parts.sql(f"SELECT count(*), sum(n_rows) FROM parquet_files "
                                 f"WHERE table_name = '{table}'").rows[0]
        assert counts[0] >= 3 and counts[1] > 8 * counts[0], (table, counts)


@settings(max_examples=60, deadline=None)
@given(first=st.integers(0, 4000), length=st.integers(1, 600))
def test_a_token_range_finds_what_a_scan_finds(small_parts: Store, first: int,
                                               length: int) -> None:
    assert_span_finds_scan(small_parts, first, length)


@settings(max_examples=60, deadline=None)
@given(first=st.integers(0, 4000), length=st.integers(1, 600))
def test_a_served_store_finds_what_a_scan_finds(small_parts: Store, first: int,
                                                length: int) -> None:
    """A server's store keeps the parts' key ranges and bisects them (lineage/store/parts.py
    `_part_keys`) where a store reading the catalog file tests each part."""
    from lineage.serve.stores import snapshots_for

    served = snapshots_for(small_parts.root).served()
    assert_span_finds_scan(small_parts, first, length, served)
    digest = held_values(small_parts.root, "documents", "content_hash")[first % 40]
    with served.reader(views=False) as con:
        for table, (owner, columns) in HASHED.items():
            assert lookup_rows(con, served, table, owner, columns,
                               equal=("content_hash", digest)) == \
                _scanned(small_parts, table, owner, columns, "content_hash = ?", [digest])


def test_every_content_hash_finds_what_a_scan_finds(small_parts: Store) -> None:
    digests = [row[0] for row in small_parts.sql(
        "SELECT DISTINCT content_hash FROM documents ORDER BY 1").rows]
    absent = ["0" * 64, "f" * 64, digests[len(digests) // 2][:-1] + "x"]
    assert len(digests) > 20
    for table, (owner, columns) in HASHED.items():
        with small_parts.reader(views=False) as con:
            for digest in [*digests, *absent]:
                found = lookup_rows(con, small_parts, table, owner, columns,
                                    equal=("content_hash", digest))
                assert found == _scanned(small_parts, table, owner, columns,
                                         "content_hash = ?", [digest]), (table, digest)
                assert found or digest in absent


def test_every_text_hash_finds_what_a_scan_finds(small_parts: Store) -> None:
    """A text hash (`trained-on`'s same-text match) is looked up like a content hash,
    in the text index's own parts: the rows are the ones a scan of them finds."""
    digests = [row[0] for row in small_parts.sql(
        "SELECT DISTINCT text_hash FROM text_hashes ORDER BY 1").rows]
    absent = ["0" * 64, "f" * 64, digests[len(digests) // 2][:-1] + "x"]
    assert len(digests) > 20
    parts = small_parts.sql("SELECT count(*) FROM parquet_files "
                            "WHERE table_name = 'text_hashes'").rows[0][0]
    assert parts >= 3  # the lookup chooses among parts and row groups
    with small_parts.reader(views=False) as con:
        for digest in [*digests, *absent]:
            found = lookup_rows(con, small_parts, "text_hashes", None, ["corpus", "doc"],
                                equal=("text_hash", digest))
            assert found == _scanned(small_parts, "text_hashes", None, ["corpus", "doc"],
                                     "text_hash = ?", [digest]), digest
            assert found or digest in absent


FINGERPRINTS = ["corpus", "fingerprint", "doc", "position"]
TEXT_DOCUMENTS = ["doc", "doc_id", "content_hash", "n_words"]


@functools.cache
def held_values(root: Path, table: str, key: str) -> list[Any]:
    """The distinct values of `key` in `table` of the store at `root`, in order."""
    return [row[0] for row in open_store(root).sql(
        f"SELECT DISTINCT {key} FROM {table} ORDER BY 1", max_rows=None).rows]


def assert_values_find_scan(store: Store, picks: list[int], absent: list[int],
                            reader: Store | None = None) -> None:
    """A text's lookups ask for many values of a key at once (its fingerprints; its
    candidate documents): looked up through `reader` (default: `store`), they find the
    rows a scan of the store's parts finds, in file order. `picks` choose values the
    store holds; `absent` are values it may not."""
    reader = reader or store
    for table, owner, columns, key in [("fingerprints", None, FINGERPRINTS, "fingerprint"),
                                       ("text_documents", "plays", TEXT_DOCUMENTS, "doc")]:
        held = held_values(store.root, table, key)
        values = sorted({held[p % len(held)] for p in picks} | set(absent)) or [held[0]]
        with reader.reader(views=False) as con:
            found = lookup_rows(con, reader, table, owner, columns, any_of=(key, values))
        literal = ", ".join(str(v) for v in values)  # past 2^63: no parameter type holds
        assert found == _scanned(store, table, owner, columns, f"{key} IN ({literal})", [])
        assert len(found) >= len({held[p % len(held)] for p in picks})


@settings(max_examples=15, deadline=None)  # each example scans two tables
@given(picks=st.lists(st.integers(0, 10**6), max_size=12),
       absent=st.lists(st.integers(0, 2**31 - 1), max_size=3))
def test_many_values_of_a_key_find_what_a_scan_finds(small_parts: Store, picks: list[int],
                                                     absent: list[int]) -> None:
    assert_values_find_scan(small_parts, picks, absent)


@settings(max_examples=25, deadline=None)
@given(picks=st.lists(st.integers(0, 10**6), min_size=2, max_size=12))
def test_row_groups_bisected_for_many_values_hold_every_one_that_can(
        small_parts: Store, picks: list[int]) -> None:
    """Each value's row groups are found by bisection; together they hold every row
    group a test of each finds (the fixture's fingerprints span parts and row groups)."""
    held = held_values(small_parts.root, "fingerprints", "fingerprint")
    admits = part_select.key_admits(any_of=("fingerprint", sorted({held[p % len(held)]
                                                             for p in picks})))
    with small_parts.reader(views=False) as con:
        listed = part_select.candidate_parts(con, small_parts, "fingerprints", None,
                                       lambda first, last: True)
        records = [RangeRecord.parse(part.row_groups)  # type: ignore[arg-type]
                   for part in listed]
        assert len(records) >= 2 and max(len(record.ends) for record in records) > 4
        for record in records:
            assert record.ascends("first", "fingerprint")
            every = [i for i in range(len(record.ends) - 1) if admits(
                {k: v[i] for k, v in record.first.items()},
                {k: v[i] for k, v in record.last.items()})]
            assert set(every) <= set(admits.narrow(record))  # type: ignore[attr-defined]
            assert record.admitted(admits) == [*every, len(record.ends) - 1]


def test_only_checked_bytes_are_decoded(small_parts: Store) -> None:
    """The reader of a lookup holds the footer and the row groups that were checked; a
    read of another row group fails instead of touching the file."""
    from lineage.store import part_read
    from lineage.store.part_check import checked_ranges

    with small_parts.reader(views=False) as con:
        admits = part_select.key_admits(span=(0, 1))
        [part] = part_select.candidate_parts(con, small_parts, "occurrences", "s", admits)
    chunks = checked_ranges(small_parts.root, part.path, part.n_bytes, part.sha256,
                            part.row_groups, admits)
    assert chunks.groups == {0}
    parquet = part_read.open_checked(chunks, part.n_bytes)
    assert parquet.num_row_groups > 1
    assert parquet.read_row_group(0).num_rows == 8
    with pytest.raises(OSError, match="were not checked"):
        parquet.read_row_group(1)


def test_a_footer_is_parsed_once_per_process(small_parts: Store) -> None:
    from lineage.store import part_read

    with small_parts.reader(views=False) as con:
        lookup_rows(con, small_parts, "occurrences", "s", OCCURRENCES, span=(0, 1))
        parsed = part_read.footer_parses
        lookup_rows(con, small_parts, "occurrences", "s", OCCURRENCES, span=(0, 1))
        assert part_read.footer_parses == parsed
        part_read._FOOTERS.clear()
        lookup_rows(con, small_parts, "occurrences", "s", OCCURRENCES, span=(0, 1))
    assert part_read.footer_parses == parsed + 1


@pytest.fixture(scope="module")
def manifest_40k(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ready manifest of 40,000 documents of 40-90 tokens: a stream of ~50,000
    occurrences, several row groups of 16,384 rows as well as of 2,048."""
    import blake3
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = 40_000
    path = tmp_path_factory.mktemp("manifest-40k") / "manifest.parquet"
    pq.write_table(pa.table({
        "doc_id": [f"d/{i:06d}" for i in range(n)],
        "source": [("web", "code", "math")[i % 3] for i in range(n)],
        "uri": [None] * n,
        "n_bytes": [40 + i % 51 for i in range(n)],
        "n_tokens": [40 + i % 51 for i in range(n)],
        "content_hash": [blake3.blake3(str(i).encode()).hexdigest() for i in range(n)],
        "license": ["CC0-1.0"] * n}), path)
    return path


def _store_with_row_groups(root: Path, manifest: Path, rows: int,
                           monkeypatch: pytest.MonkeyPatch) -> Store:
    from lineage.ingest import corpus_reduce
    from lineage.stream import tables

    with monkeypatch.context() as patch:
        patch.setattr(corpus_reduce, "LOOKUP_ROW_GROUP_ROWS", rows)
        patch.setattr(tables, "LOOKUP_ROW_GROUP_ROWS", rows)
        init_store(root)
        store = open_store(root)
        ingest_corpus(store, [manifest], corpus="c")
        build_stream(store, corpus="c", name="s", seed=3, seq_len=2048, batch=4)
    return store


def _row_group_rows(store: Store, table: str) -> set[int]:
    import pyarrow.parquet as pq

    files = (store.root / "tables" / table).glob("*.parquet")
    return {meta.row_group(i).num_rows for meta in (pq.read_metadata(f) for f in files)
            for i in range(meta.num_row_groups - 1)}  # the last one of a part is shorter


def test_a_store_written_with_16384_row_groups_answers_as_one_written_now(
        tmp_path: Path, manifest_40k: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Lookup tables used to be written in row groups of 16,384 rows; a part records its
    own, so such a store answers exactly as one written with today's row groups."""
    from lineage.serve.stores import snapshots_for
    from lineage.text.trained_on import trained_on_hashes

    old = _store_with_row_groups(tmp_path / "old", manifest_40k, 16_384, monkeypatch)
    init_store(tmp_path / "new")
    new = open_store(tmp_path / "new")
    ingest_corpus(new, [manifest_40k], corpus="c")
    build_stream(new, corpus="c", name="s", seed=3, seq_len=2048, batch=4)
    for table in ("occurrences", "occurrence_hashes", "document_hashes"):
        assert _row_group_rows(old, table) == {16_384}, table
        assert _row_group_rows(new, table) == {parts.LOOKUP_ROW_GROUP_ROWS}, table
    served = snapshots_for(old.root).served()  # the server's reader, catalog rows kept
    steps = int(new.stream("s")["steps"])
    assert steps > 100
    for step in [*range(0, steps, 9), steps - 1]:
        answer = new.docs_in_step(step, stream="s")
        assert answer["documents"]
        assert old.docs_in_step(step, stream="s") == answer
        assert served.docs_in_step(step, stream="s") == answer
    digests = [r[0] for r in new.sql("SELECT content_hash FROM documents "
                                     "USING SAMPLE 150 ROWS (reservoir, 5)").rows]
    for digest in [*digests, "0" * 64]:
        answer = trained_on_hashes(new, [(digest, digest)], stream="s")
        assert trained_on_hashes(old, [(digest, digest)], stream="s") == answer
        assert trained_on_hashes(served, [(digest, digest)], stream="s") == answer


@settings(max_examples=80, deadline=None)
@given(first=st.integers(0, 4000), length=st.integers(1, 600), pick=st.integers(0, 10**6))
def test_row_groups_found_by_bisection_are_those_a_scan_finds(
        small_parts: Store, first: int, length: int, pick: int) -> None:
    """The row groups a token range, a content hash or one value of the sort column can
    be in, found by bisection over the recorded first and last values, are exactly those
    found by testing each."""
    tokens = int(small_parts.streams()[0]["tokens"])
    start = first * tokens // 4000
    digests = held_values(small_parts.root, "documents", "content_hash")
    digest = digests[pick % len(digests)]
    if pick % 7 == 0:  # a hash no document has, between two that some have
        digest = digest[:-1] + "x"
    asked = {"occurrences": ("s", part_select.key_admits(span=(start, start + length * 64))),
             "occurrence_hashes": ("s", part_select.key_admits(digest=digest)),
             "document_hashes": (None, part_select.key_admits(digest=digest))}
    # A lookup asks for one value of the sort column (lineage/store/part_read.py).
    by_value = part_select.key_admits(any_of=("content_hash", [digest]))
    one_value = {"occurrence_hashes": ("s", by_value), "document_hashes": (None, by_value)}
    with small_parts.reader(views=False) as con:
        for table, (owner, admits) in [*asked.items(), *one_value.items()]:
            for part in part_select.candidate_parts(con, small_parts, table, owner,
                                              lambda first, last: True):
                record = part.row_groups  # as written: a plain store parses it when read
                record = RangeRecord.parse(record) if isinstance(record, str) else record
                assert record is not None and record.ascends("first", _sort_column(table))
                every = [i for i in range(len(record.ends) - 1) if admits(
                    {k: v[i] for k, v in record.first.items()},
                    {k: v[i] for k, v in record.last.items()})]
                assert record.admitted(admits) == [*every, len(record.ends) - 1]
                narrowed = admits.narrow(record)  # type: ignore[attr-defined]
                assert set(every) <= set(narrowed) and len(narrowed) <= len(every) + 1


def _sort_column(table: str) -> str:
    return "stream_start" if table == "occurrences" else "content_hash"


@settings(max_examples=40, deadline=None)
@given(offset=st.integers(0, 100), limit=st.integers(1, 50))
def test_rows_by_position_are_a_page_of_the_sorted_table(small_parts: Store, offset: int,
                                                          limit: int) -> None:
    """A page of a corpus's documents read from the row groups that hold it is the page
    of the whole table sorted by doc_id (the corpus spans several parts here)."""
    from lineage.store.part_read import rows_at

    columns = ["doc_id", "source", "n_tokens", "content_hash"]
    every = _documents_by_id(small_parts.root)
    assert len(every) > 80  # three parts of at most 40 rows, row groups of 8
    with small_parts.reader(views=False) as con:
        total, rows = rows_at(con, small_parts, "documents", "plays", columns,
                              offset=offset, limit=limit)
    assert total == len(every)
    assert [tuple(row.values()) for row in rows] == every[offset:offset + limit]


@settings(max_examples=40, deadline=None)
@given(picks=st.lists(st.integers(0, 10**6), max_size=20),
       absent=st.lists(st.text(max_size=12), max_size=3))
def test_documents_by_doc_id_are_their_rows_in_the_table(small_parts: Store, picks: list[int],
                                                         absent: list[str]) -> None:
    """A step's documents read by doc_id from the row groups that hold them (a trainer's
    `windows`) are their rows of the whole table; a doc_id the corpus lacks has none."""
    from lineage.store.part_read import rows_by_doc_id

    every = {row[0]: row[1:] for row in _documents_by_id(small_parts.root)}
    ids = sorted(every)
    wanted = {ids[p % len(ids)] for p in picks} | set(absent)
    with small_parts.reader(views=False) as con:
        found = rows_by_doc_id(con, small_parts, "documents", "plays", wanted,
                               ["source", "n_tokens", "content_hash"])
    assert {doc_id: tuple(row.values()) for doc_id, row in found.items()} == \
        {doc_id: every[doc_id] for doc_id in wanted if doc_id in every}


@functools.cache
def _documents_by_id(root: Path) -> list[tuple[Any, ...]]:
    return open_store(root).sql("SELECT doc_id, source, n_tokens, content_hash FROM documents "
                                "WHERE corpus = 'plays' ORDER BY doc_id", max_rows=None).rows


ascending_keys = st.lists(st.integers(0, 50), min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)
@given(starts=ascending_keys, data=st.data())
def test_testing_a_record_in_place_keeps_what_testing_each_group_keeps(
        starts: list[int], data: st.DataObject) -> None:
    """`KeyAdmits.among` reads a record's columns in place; it keeps exactly the groups
    that calling the condition on each group's first and last values keeps, for records
    in order or not and every kind of condition."""
    groups = len(starts)
    ends = [s + data.draw(st.integers(0, 20)) for s in starts]
    hashes = data.draw(st.lists(st.text("0123456789abcdef", min_size=1, max_size=3),
                                min_size=groups, max_size=groups))  # in order or not
    last_hashes = [h + data.draw(st.text("0123456789abcdef", max_size=2)) for h in hashes]
    # Each range column has first and last values, as a written record has.
    record = RangeRecord(list(range(groups + 1)), [],
                         {"stream_start": starts, "stream_end": starts, "content_hash": hashes},
                         {"stream_start": ends, "stream_end": ends, "content_hash": last_hashes})
    hash_text = st.text("0123456789abcdef", max_size=3)
    condition = data.draw(st.sampled_from([
        part_select.key_admits(span=data.draw(st.tuples(st.integers(0, 70), st.integers(0, 70)))),
        part_select.key_admits(digest=data.draw(hash_text)),
        part_select.key_admits(any_of=("content_hash", data.draw(st.lists(hash_text, max_size=3)))),
        part_select.key_admits(any_of=("stream_start", data.draw(st.lists(st.integers(0, 70),
                                                                    max_size=3))))]))
    window = range(data.draw(st.integers(0, groups)), groups)
    every = [i for i in window if condition(
        {k: v[i] for k, v in record.first.items()}, {k: v[i] for k, v in record.last.items()})]
    assert condition.among(record, window) == every  # type: ignore[attr-defined]
