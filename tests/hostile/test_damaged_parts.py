"""Damaged Parquet parts: a flipped bit or overwritten byte in any bulk table's part never
turns into a wrong answer. Every query that reads the table gives the answer it gave
before the damage, or stops with DamagedPartError naming the damaged file (exit 2 and
one line through the CLI)."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lineage.api import Store, init_store, open_store
from lineage.errors import DamagedPartError, StoreError
from lineage.ingest import ingest_corpus
from lineage.store import parts
from lineage.stream.build import build_stream
from lineage.stream.reader import StreamReader
from lineage.text.trained_on import trained_on, trained_on_hashes

from ..conftest import Cli, drop_lookup_arrays

TABLES = ("documents", "document_hashes", "occurrences", "occurrence_hashes",
          "text_documents", "text_hashes", "fingerprints")
STEPS = (0, 3, 7)


class _SmallRowGroups(parts._RotatingWriter):
    """The real writer with row groups of at most 16 rows and parts of at most 4096, so a
    small corpus spans several parts and row groups, as a large one does."""

    def __init__(self, out_dir: Path, schema: Any, written: list[Any], sorted_by: Any,
                 part_rows: int, row_group_rows: int, *rest: Any) -> None:
        super().__init__(out_dir, schema, written, sorted_by, min(part_rows, 4096),
                         min(row_group_rows, 16), *rest)


@pytest.fixture(scope="module")
def damaged_store(tmp_path_factory: pytest.TempPathFactory, example_corpus: Path) -> Store:
    corpus = tmp_path_factory.mktemp("damage-corpus")
    for folder in ("shakespeare", "debian-copyright"):
        shutil.copytree(example_corpus / folder, corpus / folder)
    root = tmp_path_factory.mktemp("damage-store") / "store"
    init_store(root)
    store = open_store(root)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(parts, "_RotatingWriter", _SmallRowGroups)
        ingest_corpus(store, [corpus], corpus="plays")
        build_stream(store, corpus="plays", name="s", seed=1, seq_len=512, batch=8)
    # The lookups these tests damage read Parquet, as in a store made before the lookup
    # arrays (a store with them answers from them: tests/test_lookup_arrays.py)
    assert drop_lookup_arrays(store)
    return store


def _excerpt(example_corpus: Path) -> str:
    text = (example_corpus / "shakespeare" / "tempest.txt").read_text(encoding="utf-8")
    middle = len(text) // 2
    return text[middle:middle + 3000]


def _queries(store: Store, example_corpus: Path) -> dict[str, Callable[[], Any]]:
    digests = [row[0] for row in store.sql(
        "SELECT content_hash FROM documents ORDER BY doc_id LIMIT 12").rows]
    excerpt = _excerpt(example_corpus)
    return {
        "docs": lambda: [store.docs_in_step(step, stream="s") for step in STEPS],
        "cli-docs": lambda: _cli_docs(Cli(store.root), STEPS[1]),
        # A new reader each time: a reader keeps the (checked) locations of the documents
        # of the steps it read ahead, and reads the documents table again only past them.
        "windows": lambda: [StreamReader(store, "s").windows(step) for step in STEPS],
        # In order: step 4 (with documents step 3 lacks) looks up the steps ahead too.
        "windows-in-order": lambda: (lambda reader: [reader.windows(step) for step in (2, 3, 4)])(
            StreamReader(store, "s")),
        "trained-on": lambda: trained_on_hashes(
            store, [(d[:8], d) for d in digests], stream="s"),
        "text": lambda: trained_on(store, texts=[excerpt], stream="s"),
    }


def _cli_docs(cli: Cli, step: int) -> Any:
    """`lineage docs --step` through the CLI: its JSON, or the damage it reported (exit 2,
    one line naming the part) raised as DamagedPartError for the caller to check."""
    result = cli("docs", "--step", str(step), "--stream", "s", "--json", code=None)
    if result.exit_code == 0:
        return json.loads(result.stdout)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stdout == ""
    named, marker, _ = result.stderr.removeprefix("error: ").partition(": damaged part: ")
    assert marker, result.stderr
    raise DamagedPartError(named, result.stderr.strip())


READERS = {  # the queries that read each table
    "documents": ("windows", "windows-in-order"),
    "document_hashes": ("trained-on",),
    "occurrences": ("docs", "cli-docs", "windows", "windows-in-order"),
    "occurrence_hashes": ("trained-on",),
    "text_documents": ("text",),
    "text_hashes": ("text",),
    "fingerprints": ("text",),
}


@contextmanager
def _damaged(path: Path, offset: int, change: Callable[[int], int]) -> Iterator[bool]:
    """The file with the byte at `offset` changed (yields whether it changed), restored after."""
    data = path.read_bytes()
    offset %= len(data)
    new = change(data[offset]) & 0xFF
    path.write_bytes(data[:offset] + bytes([new]) + data[offset + 1:])
    try:
        yield new != data[offset]
    finally:
        path.write_bytes(data)


def _parts(store: Store, table: str) -> list[Path]:
    rows = store.sql(f"SELECT path FROM parquet_files WHERE table_name = '{table}' "
                     "ORDER BY path").rows
    return [store.root / row[0] for row in rows]


def test_the_fixture_spans_parts_and_row_groups(damaged_store: Store) -> None:
    for table in TABLES:
        rows = damaged_store.sql(
            f"SELECT row_groups FROM parquet_files WHERE table_name = '{table}'").rows
        groups = sum(len(json.loads(row[0])["ends"]) - 1 for row in rows)
        assert groups >= 3, table
    assert len(_parts(damaged_store, "fingerprints")) >= 2


damage = st.tuples(
    st.integers(0, 1_000), st.integers(0, 1 << 30),
    st.one_of(st.integers(0, 7).map(lambda bit: (lambda b: b ^ (1 << bit))),
              st.integers(0, 255).map(lambda value: (lambda _b: value))),
)


@pytest.mark.parametrize("table", TABLES)
def test_damage_never_gives_a_wrong_answer(
        damaged_store: Store, example_corpus: Path, table: str) -> None:
    queries = _queries(damaged_store, example_corpus)
    wanted = {name: queries[name]() for name in READERS[table]}
    files = _parts(damaged_store, table)
    outcomes = {"same": 0, "refused": 0}

    @settings(max_examples=12, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(damage)
    def check(case: tuple[int, int, Callable[[int], int]]) -> None:
        which, offset, change = case
        path = files[which % len(files)]
        with _damaged(path, offset, change):
            for name in READERS[table]:
                try:
                    answer = queries[name]()
                except DamagedPartError as exc:
                    assert exc.path == str(path), (name, exc)
                    assert "run `lineage store verify`" in str(exc)
                    outcomes["refused"] += 1
                else:
                    assert answer == wanted[name], (name, path, offset)
                    outcomes["same"] += 1

    check()
    assert outcomes["refused"] > 0, outcomes  # damage was found, not only missed


def test_the_cli_names_the_damaged_part_and_exits_2(damaged_store: Store) -> None:
    cli = Cli(damaged_store.root)
    before = cli.json("docs", "--step", "3", "--stream", "s")
    path = _parts(damaged_store, "occurrences")[0]
    footer_start = json.loads(damaged_store.sql(
        "SELECT row_groups FROM parquet_files WHERE path = "
        f"'{path.relative_to(damaged_store.root).as_posix()}'").rows[0][0])["ends"][-2]
    with _damaged(path, footer_start + 10, lambda b: b ^ 4):
        result = cli("docs", "--step", "3", "--stream", "s", "--json", code=2)
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1
    assert str(path) in result.stderr and "footer" in result.stderr
    assert "run `lineage store verify`" in result.stderr
    assert cli.json("docs", "--step", "3", "--stream", "s") == before


def test_a_row_group_the_lookup_does_not_read_is_not_hashed(damaged_store: Store) -> None:
    """The cost stays bounded: a step's lookup checks the footer and its own row groups."""
    first = damaged_store.docs_in_step(0, stream="s")
    path = _parts(damaged_store, "occurrences")[-1]
    record = json.loads(damaged_store.sql(
        "SELECT row_groups FROM parquet_files WHERE path = "
        f"'{path.relative_to(damaged_store.root).as_posix()}'").rows[0][0])
    assert record["first"]["stream_start"][-1] > 8 * 512  # far past step 0
    last_group = record["ends"][-3]  # inside the part's last row group
    with _damaged(path, last_group + 5, lambda b: b ^ 1):
        assert damaged_store.docs_in_step(0, stream="s") == first
        last_step = damaged_store.stream("s")["steps"] - 1
        with pytest.raises(DamagedPartError, match="row group"):
            damaged_store.docs_in_step(last_step, stream="s")


def test_a_steps_tokens_read_only_the_row_groups_of_its_documents(damaged_store: Store) -> None:
    """A trainer's `windows(step)` checks and decodes the documents table's footers and the
    row groups holding the step's documents, not the whole table on every step."""
    import pyarrow.parquet as pq

    reader = StreamReader(damaged_store, "s")
    step_docs = {s.doc_id for s in reader.segments(0)}
    before = reader.windows(0)
    # A row group of the documents table that holds none of step 0's documents.
    path, group = next((path, group) for path in _parts(damaged_store, "documents")
                       for group in range(pq.ParquetFile(path).num_row_groups)
                       if not step_docs & set(pq.ParquetFile(path).read_row_group(
                           group, columns=["doc_id"])["doc_id"].to_pylist()))
    held = set(pq.ParquetFile(path).read_row_group(group, columns=["doc_id"])["doc_id"]
               .to_pylist())
    record = json.loads(damaged_store.sql(
        "SELECT row_groups FROM parquet_files WHERE path = "
        f"'{path.relative_to(damaged_store.root).as_posix()}'").rows[0][0])
    start, end = record["ends"][group - 1] if group else 0, record["ends"][group]
    steps = damaged_store.stream("s")["steps"]
    other = next(step for step in range(steps)
                 if held & {s.doc_id for s in reader.segments(step)})
    with _damaged(path, (start + end) // 2, lambda b: b ^ 1):
        assert StreamReader(damaged_store, "s").windows(0) == before
        with pytest.raises(DamagedPartError, match=f"row group {group} ") as exc:
            StreamReader(damaged_store, "s").windows(other)
    assert exc.value.path == str(path)


def test_damage_ahead_stops_only_the_step_that_needs_it(
        damaged_store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader asked for steps in order looks up the documents of the steps ahead too; a
    damaged documents row group that only a later step needs stops that step, not these."""
    import pyarrow.parquet as pq

    from lineage.stream import reader as reader_module

    lookups: list[tuple[int, str]] = []  # (doc_ids asked, how it ended)
    locations = reader_module.document_locations

    def counted(con: object, store: Store, corpus: str, doc_ids: set[str]) -> object:
        try:
            found = locations(con, store, corpus, doc_ids)
        except DamagedPartError:
            lookups.append((len(doc_ids), "damaged"))
            raise
        lookups.append((len(doc_ids), "read"))
        return found

    monkeypatch.setattr(reader_module, "document_locations", counted)

    reader = StreamReader(damaged_store, "s")
    docs = [{s.doc_id for s in reader.segments(step)} for step in range(200)]
    path = _parts(damaged_store, "documents")[0]
    held = [set(pq.ParquetFile(path).read_row_group(g, columns=["doc_id"])["doc_id"]
                .to_pylist()) for g in range(pq.ParquetFile(path).num_row_groups)]
    # Steps p-1 and p (p with a document p-1 lacks, so reading p looks up the steps ahead)
    # that need none of row group g, and a later step that does.
    group, pair, later = next(
        (g, p, q) for g in range(len(held)) for p in range(1, 100)
        if docs[p] - docs[p - 1] and not held[g] & (docs[p] | docs[p - 1])
        for q in range(p + 1, 200) if held[g] & docs[q])
    in_order = [reader.windows(step) for step in (pair - 1, pair)]
    record = json.loads(damaged_store.sql(
        "SELECT row_groups FROM parquet_files WHERE path = "
        f"'{path.relative_to(damaged_store.root).as_posix()}'").rows[0][0])
    start, end = record["ends"][group - 1] if group else 0, record["ends"][group]
    with _damaged(path, (start + end) // 2, lambda b: b ^ 1):
        reader = StreamReader(damaged_store, "s")
        lookups.clear()
        assert [reader.windows(step) for step in (pair - 1, pair)] == in_order
        # Step `pair` looked ahead, met the damage, and was then looked up alone.
        own = len(docs[pair])
        assert lookups[-2:] == [(lookups[-2][0], "damaged"), (own, "read")]
        assert lookups[-2][0] > own
        # The steps up to `later` are then looked up alone: the damage is not met again.
        lookups.clear()
        assert all(reader.windows(step) for step in range(pair + 1, later))
        assert all(how == "read" for _, how in lookups)
        with pytest.raises(DamagedPartError, match=f"row group {group} "):
            reader.windows(later)


def test_a_stream_build_refuses_damaged_documents(damaged_store: Store) -> None:
    path = _parts(damaged_store, "documents")[0]
    with _damaged(path, 100, lambda b: b ^ 0x80), pytest.raises(DamagedPartError) as exc:
        build_stream(damaged_store, corpus="plays", name="again", seed=2, seq_len=512, batch=8)
    assert exc.value.path == str(path)
    assert damaged_store.streams()[-1]["name"] == "s"


def test_parts_from_before_schema_7_are_checked_whole(tmp_path: Path,
                                                     damaged_store: Store) -> None:
    """A part without row-group digests is checked against its SHA-256 on every read."""
    copy = tmp_path / "store"
    shutil.copytree(damaged_store.root, copy)
    con = duckdb.connect(str(copy / "catalog.duckdb"))
    con.execute("UPDATE parquet_files SET row_groups = NULL")
    con.close()
    store = open_store(copy)
    before = store.docs_in_step(3, stream="s")
    path = _parts(store, "occurrences")[-1]
    with _damaged(path, path.stat().st_size // 2, lambda b: b ^ 2):
        with pytest.raises(DamagedPartError, match="SHA-256"):
            store.docs_in_step(0, stream="s")  # the damage is far from step 0: found anyway
    assert store.docs_in_step(3, stream="s") == before


def test_a_truncated_or_missing_part_is_named(tmp_path: Path, damaged_store: Store) -> None:
    copy = tmp_path / "store"
    shutil.copytree(damaged_store.root, copy)
    store = open_store(copy)
    digest = store.sql("SELECT content_hash FROM documents LIMIT 1").rows[0][0]
    (path,) = _parts(store, "document_hashes")
    data = path.read_bytes()
    path.write_bytes(data[:-1])
    with pytest.raises(DamagedPartError, match=f"is {len(data) - 1} bytes, the catalog says "
                                               f"{len(data)}") as exc:
        trained_on_hashes(store, [("x", digest)])
    assert exc.value.path == str(path)
    path.unlink()
    with pytest.raises(DamagedPartError, match="cannot be opened"):
        trained_on_hashes(store, [("x", digest)])


@pytest.mark.parametrize("named", ["../outside.parquet", "/etc/hostname",
                                   "tables/occurrences/x'); SELECT 1; --.parquet",
                                   "tables/../../outside.parquet"])
def test_a_catalog_naming_a_part_outside_the_store_is_refused(
        tmp_path: Path, damaged_store: Store, named: str) -> None:
    """Parts are named by the catalog relative to the store, plainly: a path that could
    leave the store or end an SQL string is never opened, by a lookup, by SQL or by the
    query views, and the error names the catalog and the path (exit 2 and one line
    through the CLI)."""
    copy = tmp_path / "store"
    shutil.copytree(damaged_store.root, copy)
    (outside := tmp_path / "outside.parquet").write_bytes(b"PAR1")
    con = duckdb.connect(str(copy / "catalog.duckdb"))
    first = con.execute("SELECT min(path) FROM parquet_files "
                        "WHERE table_name = 'occurrences'").fetchone()[0]
    con.execute("UPDATE parquet_files SET path = ? WHERE path = ?", [named, first])
    con.close()
    store = open_store(copy)
    refusal = f"{copy / 'catalog.duckdb'}: unexpected Parquet path"
    with pytest.raises(StoreError, match=re.escape(refusal)):
        store.docs_in_step(0, stream="s")  # a lookup
    with pytest.raises(StoreError, match=re.escape(refusal)):
        store.sql("SELECT count(*) FROM occurrences")
    with pytest.raises(StoreError, match=re.escape(refusal)), store.reader() as reader:
        reader.execute("SELECT count(*) FROM occurrences").fetchall()
    result = Cli(copy)("docs", "--step", "0", "--stream", "s", code=2)
    assert result.stderr.count("\n") == 1 and "unexpected Parquet path" in result.stderr
    assert outside.read_bytes() == b"PAR1"


def test_a_lookup_by_doc_id_in_the_text_index_reads_only_its_row_group(
        damaged_store: Store) -> None:
    """`text_documents` is in doc_id order and records each row group's doc_ids, so a
    document's row (a document page, a trainer's line offsets) comes from its own row
    group: damage elsewhere in the part does not stop it."""
    import pyarrow.parquet as pq

    from lineage.store.part_read import row_by_doc_id

    path = _parts(damaged_store, "text_documents")[0]
    shard = pq.ParquetFile(path)
    assert shard.num_row_groups >= 3
    ids = [shard.read_row_group(g, columns=["doc_id"])["doc_id"].to_pylist()
           for g in range(shard.num_row_groups)]
    assert [group[0] for group in ids] == sorted(group[0] for group in ids)
    record = json.loads(damaged_store.sql(
        "SELECT row_groups FROM parquet_files WHERE path = "
        f"'{path.relative_to(damaged_store.root).as_posix()}'").rows[0][0])
    assert record["first"]["doc_id"] == [group[0] for group in ids]
    wanted = ids[0][0]

    def lookup() -> Any:
        with damaged_store.reader(views=False) as con:
            return row_by_doc_id(con, damaged_store, "text_documents", "plays", wanted,
                                 ("doc", "text_hash"))

    before = lookup()
    assert before is not None
    ends = record["ends"]
    last_group = (ends[-3] + ends[-2]) // 2  # inside the part's last row group
    with _damaged(path, last_group, lambda b: b ^ 1):
        assert lookup() == before
    with _damaged(path, ends[0] // 2, lambda b: b ^ 1), \
            pytest.raises(DamagedPartError, match="row group 0 "):
        lookup()
