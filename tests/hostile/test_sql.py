"""`lineage sql` is read-only by construction: attacks are refused and change nothing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from lineage.api import Store, init_store, open_store
from lineage.errors import UsageError
from lineage.ingest import ingest_corpus
from lineage.ingest.steps import ingest_steps
from lineage.schemas import BULK_TABLES
from lineage.store.sql_guard import DEFAULT_MAX_ROWS, guarded_connection, run_guarded_sql
from lineage.stream.build import build_stream

from ..conftest import EXAMPLES, Cli
from ..test_chain import WORLD, write_log

# Rows without end, a chunk at a time and in little memory: only the time limit stops it.
ENDLESS = "SELECT sum(range) FROM range(1000000000000)"


@pytest.fixture(scope="module")
def corpus_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """The example corpus and the sonnets, a stream over the sonnets and a run's steps."""
    root = tmp_path_factory.mktemp("guarded") / "store"
    init_store(root)
    store = open_store(root)
    ingest_corpus(store, [EXAMPLES / "corpus"], corpus="example")
    ingest_corpus(store, [EXAMPLES / "shards" / "sonnets.jsonl.gz"], corpus="sonnets")
    build_stream(store, corpus="sonnets", name="s", seed=11, seq_len=64, batch=4)
    log = write_log(store, root.parent / "steps.jsonl", range(12), clip_at={3})
    ingest_steps(store, log, run="r", stream="s", world_size=WORLD)
    return store


@pytest.fixture
def outside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty working directory: relative targets of an attack would land here."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def _a_part(store: Store, table: str = "documents") -> Path:
    with store.reader(views=False) as con:
        return store.root / store.registered_files(con, table)[0]


# {part} is a registered documents part, {catalog} the catalog, {root} the store and
# {outside} an empty working directory.
ATTACKS = [
    "EXPLAIN ANALYZE COPY (SELECT 1 AS x) TO '{part}' (FORMAT parquet)",
    "EXPLAIN ANALYZE COPY (SELECT 1) TO '{part}' (FORMAT csv, USE_TMP_FILE false)",
    "EXPLAIN COPY (SELECT 1) TO '{outside}/written.csv'",
    "EXPLAIN ANALYZE SET threads = 1",
    "EXPLAIN ANALYZE LOAD httpfs",
    "EXPLAIN ANALYZE INSTALL httpfs",
    "EXPLAIN ANALYZE CREATE TEMP TABLE t AS SELECT 1",
    "EXPLAIN ANALYZE CREATE TABLE t AS SELECT 1",
    "EXPLAIN ANALYZE ATTACH '{outside}/new.db' AS other",
    "EXPLAIN (ANALYZE) CREATE TEMP VIEW v AS SELECT 1",
    "PRAGMA enable_profiling",
    "PRAGMA profiling_output = '{outside}/written.csv'",
    "PRAGMA threads = 1",
    "PRAGMA import_database('{outside}')",
    "CALL pragma_version()",
    "CALL glob('/*')",
    "CHECKPOINT",
    "ATTACH '{outside}/new.db' AS other",
    "ATTACH ':memory:' AS scratch",
    "ATTACH '{catalog}' AS again",
    "DETACH catalog",
    "COPY (SELECT * FROM documents) TO '{outside}/written.csv'",
    "COPY documents TO '{part}' (FORMAT parquet)",
    "COPY corpora FROM '{outside}/written.csv'",
    "EXPORT DATABASE '{outside}/export'",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET threads = 1",
    "SET enable_external_access = true",
    "SET GLOBAL lock_configuration = false",
    "RESET threads",
    "USE temp.main",
    "CREATE TABLE t (x INT)",
    "CREATE TEMP TABLE t (x INT)",
    "CREATE TEMP VIEW documents AS SELECT 1 AS x",
    "CREATE VIEW v AS SELECT 1",
    "CREATE MACRO m(x) AS x + 1",
    "CREATE TEMP MACRO m(x) AS x + 1",
    "CREATE SECRET s (TYPE s3, KEY_ID 'a', SECRET 'b')",
    "CREATE PERSISTENT SECRET s (TYPE s3, KEY_ID 'a', SECRET 'b')",
    "INSERT INTO corpora SELECT * FROM corpora",
    "UPDATE corpora SET name = 'x'",
    "DELETE FROM parquet_files",
    "DROP TABLE corpora",
    "ALTER TABLE corpora RENAME TO c2",
    "VACUUM",
    "SELECT * FROM read_text('/etc/shadow')",
    "SELECT * FROM read_text('/etc/passwd')",
    "SELECT * FROM read_blob('/etc/hostname')",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_csv_auto('/etc/passwd')",
    "SELECT * FROM read_json('/etc/passwd')",
    "SELECT * FROM read_parquet('/etc/passwd')",
    "SELECT * FROM read_parquet('{part}')",
    "SELECT * FROM read_blob('{part}')",
    "SELECT * FROM glob('/*')",
    "SELECT * FROM glob('{root}/**')",
    "SELECT * FROM parquet_metadata('{part}')",
    "SELECT * FROM sniff_csv('/etc/passwd')",
    "FROM '/etc/passwd'",
    "SELECT getenv('HOME')",
    "SELECT * FROM duckdb_extensions()",
    "EXPLAIN ANALYZE SELECT * FROM read_text('/etc/passwd')",
    "SUMMARIZE SELECT * FROM read_text('/etc/passwd')",
    "SELECT 1; COPY (SELECT 1) TO '{outside}/written.csv'",
    "SELECT 1; SET threads = 1; SELECT 2",
    "/* harmless */ CoPy (SELECT 1) TO '{outside}/written.csv'",
    "-- a comment\ncopy (select 1) to '{outside}/written.csv'",
    "explain/**/analyze/**/copy (select 1) to '{outside}/written.csv'",
    "EXPLAIN ANALYZE -- x\n COPY (SELECT 1) TO '{outside}/written.csv'",
    "COPY\u00a0(SELECT 1) TO '{outside}/written.csv'",
    "SELECT 1;\u2028COPY (SELECT 1) TO '{outside}/written.csv'",
    "\ufeffCOPY (SELECT 1) TO '{outside}/written.csv'",
    "SELECT 1\u3000; COPY (SELECT 1) TO '{outside}/written.csv'",
]


@pytest.mark.parametrize("attack", ATTACKS)
def test_each_attack_is_refused_in_one_line_and_changes_nothing(
    corpus_store: Store, outside: Path, attack: str
) -> None:
    sql = attack.format(part=_a_part(corpus_store), catalog=corpus_store.catalog_path,
                        root=corpus_store.root, outside=outside)
    before = _snapshot(corpus_store.root)
    result = Cli(corpus_store.root)("sql", sql, code=2)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), (sql, result.stderr)
    assert result.stdout == ""
    assert _snapshot(corpus_store.root) == before
    assert list(outside.iterdir()) == []
    assert Cli(corpus_store.root).json("sql", "SELECT count(*) AS n FROM documents") == [
        {"n": _documents(corpus_store)}]


def _documents(store: Store) -> int:
    with store.reader() as con:  # the unguarded reader the query commands use
        return con.execute("SELECT count(*) FROM documents").fetchone()[0]


# -- the guard holds without the statement check --------------------------------------


@pytest.mark.parametrize("statement", [
    "COPY (SELECT 1) TO '{part}' (FORMAT csv, USE_TMP_FILE false)",
    "EXPLAIN ANALYZE COPY (SELECT 1) TO '{part}' (FORMAT csv, USE_TMP_FILE false)",
    "COPY (SELECT 1) TO '{catalog}' (FORMAT csv, USE_TMP_FILE false)",
    "COPY (SELECT 1) TO '{catalog}.wal' (FORMAT csv, USE_TMP_FILE false)",
    "COPY (SELECT 1) TO '{catalog}.wal.checkpoint' (FORMAT csv, USE_TMP_FILE false)",
    "COPY (SELECT 1) TO '{catalog}.wal.recovery' (FORMAT csv, USE_TMP_FILE false)",
    "COPY (SELECT 1) TO '{outside}/x.csv'",
    "EXPORT DATABASE '{outside}/export'",
    "SELECT * FROM read_text('/etc/passwd')",
    "SELECT * FROM read_blob('{part}')",
    "SELECT * FROM glob('/*')",
    "SELECT * FROM read_csv('/etc/passwd')",
    "EXPLAIN ANALYZE INSTALL httpfs",
    "INSTALL httpfs",
    "LOAD httpfs",
    "EXPLAIN ANALYZE SET threads = 1",
    "SET enable_external_access = true",
    "SET lock_configuration = false",
    "RESET temp_directory",
    "PRAGMA enable_profiling",
    "CREATE TABLE t AS SELECT 1",
    "CREATE MACRO m(x) AS x",
    "INSERT INTO corpora SELECT * FROM corpora",
    "DELETE FROM parquet_files",
    "ATTACH ':memory:' AS scratch",
    "ATTACH '{outside}/new.db' AS other",
    "CREATE PERSISTENT SECRET s (TYPE s3, KEY_ID 'a', SECRET 'b')",
])
def test_the_session_refuses_by_construction(corpus_store: Store, outside: Path,
                                             statement: str) -> None:
    """Run on the guarded connection directly, past the statement check."""
    sql = statement.format(part=_a_part(corpus_store), catalog=corpus_store.catalog_path,
                           outside=outside)
    before = _snapshot(corpus_store.root)
    with guarded_connection(corpus_store) as con, pytest.raises(duckdb.Error):
        con.execute(sql).fetchall()
    assert _snapshot(corpus_store.root) == before
    assert list(outside.iterdir()) == []


def test_the_session_settings_are_locked_down(corpus_store: Store) -> None:
    with guarded_connection(corpus_store) as con:
        settings = dict(con.execute(
            "SELECT name, value FROM duckdb_settings() WHERE name IN ('enable_external_access', "
            "'lock_configuration', 'autoinstall_known_extensions', 'autoload_known_extensions', "
            "'allow_community_extensions', 'temp_directory', 'access_mode', "
            "'allowed_paths', 'allowed_directories')").fetchall())
    catalog = corpus_store.catalog_path
    allowed = settings.pop("allowed_paths").strip("[]").split(", ")
    assert str(catalog) in allowed  # DuckDB's own entries: the open catalog and its WAL files
    assert all(path == str(catalog) or path.startswith(f"{catalog}.wal.") or
               path == f"{catalog}.wal" for path in allowed)
    assert settings == {
        "enable_external_access": "false", "lock_configuration": "true",
        "autoinstall_known_extensions": "false", "autoload_known_extensions": "false",
        "allow_community_extensions": "false", "temp_directory": "",
        "access_mode": "read_only", "allowed_directories": "[]",
    }


# -- legitimate queries -----------------------------------------------------------------


@pytest.mark.parametrize("table", sorted(BULK_TABLES))
def test_every_view_answers_as_the_unguarded_reader_does(corpus_store: Store, table: str) -> None:
    query = f"SELECT * FROM {table} ORDER BY ALL"
    with corpus_store.reader() as con:
        cursor = con.execute(query)
        expected = ([d[0] for d in cursor.description], cursor.fetchall())
    result = corpus_store.sql(query)
    assert (result.columns, result.rows) == expected
    assert result.rows, f"{table} is empty in the fixture store"


@pytest.mark.parametrize("query", [
    "SELECT count(*) FROM steps WHERE run = 'r'",
    "SELECT count(*) FROM runs",
    "SELECT count(*) FROM streams",
    "SELECT count(*) FROM parquet_files",
    "SELECT corpus, count(*), sum(n_tokens) FROM documents GROUP BY corpus ORDER BY corpus",
    "SELECT d.corpus, count(*) FROM occurrences o JOIN documents d USING (doc_id) "
    "GROUP BY ALL ORDER BY ALL",
    "WITH big AS (SELECT doc_id FROM documents WHERE n_tokens > 100) SELECT count(*) FROM big",
    "DESCRIBE documents",
    "SHOW TABLES",
    "SUMMARIZE documents",
    "EXPLAIN SELECT * FROM documents",
    "EXPLAIN (FORMAT json) SELECT count(*) FROM documents",
    "/* a comment */ explain analyze -- and another\n select count(*) from documents",
    "EXPLAIN ANALYZE SELECT count(*) FROM documents",
    "PRAGMA database_list",
    "SELECT 1; SELECT 2",
    "SELECT name, value FROM duckdb_settings() WHERE name = 'threads'",
    "SELECT count(*) FROM pragma_storage_info('corpora')",
    "SELECT * FROM query('SELECT count(*) FROM documents')",
])
def test_reading_queries_work(corpus_store: Store, query: str) -> None:
    result = Cli(corpus_store.root)("sql", query)
    assert result.stdout.strip() and result.stderr == ""


def test_pivot_is_refused_as_several_statements(corpus_store: Store) -> None:
    result = Cli(corpus_store.root)("sql", "PIVOT documents ON corpus USING count(*)", code=2)
    assert result.stderr.splitlines() == [
        "error: read-only: MULTI statements are not allowed here"]


def test_the_steps_and_runs_are_queryable(corpus_store: Store) -> None:
    rows = Cli(corpus_store.root).json(
        "sql", "SELECT count(*) AS steps, count(*) FILTER (WHERE clipped) AS clipped "
        "FROM steps WHERE run = 'r'")
    assert rows == [{"steps": 12, "clipped": 1}]


def test_the_demo_query_works(corpus_store: Store) -> None:
    demo = (EXAMPLES / "demo.sh").read_text()
    start = demo.index('lineage sql "') + len('lineage sql "')
    query = demo[start:demo.index('"', start)]
    rows = Cli(corpus_store.root).json("sql", query)
    with corpus_store.reader() as con:
        expected = con.execute(query).fetchall()
    assert [tuple(r.values()) for r in rows] == expected
    assert [r["doc_id"] for r in rows] == [
        "shakespeare/macbeth.txt", "shakespeare/macbeth_folio.txt", "sonnet-018"]


# -- limits -----------------------------------------------------------------------------


def test_a_slow_query_is_stopped_at_the_time_limit(corpus_store: Store) -> None:
    result = Cli(corpus_store.root)("sql", ENDLESS, "--timeout", "0.5", code=2)
    assert result.stderr.splitlines() == [
        "error: SQL stopped after the 0.5 s time limit (--timeout)"]
    with pytest.raises(UsageError, match="time limit"):
        run_guarded_sql(corpus_store, ENDLESS, timeout=0.2)
    unlimited = Cli(corpus_store.root).json("sql", "SELECT 42 AS n", "--timeout", "0")
    assert unlimited == [{"n": 42}]


def test_a_query_past_the_memory_limit_fails_early(corpus_store: Store) -> None:
    """What DuckDB counts (an aggregate's list here) fails at its share of the limit,
    through the API, the guard and the command line alike."""
    query = "SELECT len(list(range)) FROM range(500000000)"
    with pytest.raises(UsageError, match=r"^SQL stopped at the 64 MiB memory limit"):
        corpus_store.sql(query, max_memory=64 << 20)
    with pytest.raises(UsageError, match="memory limit"):
        run_guarded_sql(corpus_store, query, max_memory=64 << 20)
    result = Cli(corpus_store.root)("sql", query, "--max-memory", "64MiB", code=2)
    assert result.stderr.splitlines() == [
        "error: SQL stopped at the 64 MiB memory limit (--max-memory): the query needs "
        "more memory than that"]
    bad = Cli(corpus_store.root)("sql", "SELECT 1", "--max-memory", "lots", code=2)
    assert len(bad.stderr.splitlines()) == 1 and "'lots'" in bad.stderr


def _run_measured(*args: str) -> tuple[int, str, int]:
    """The console script in a process of its own: exit code, stderr, peak memory."""
    process = subprocess.Popen([sys.executable, "-m", "lineage.cli", *args],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    with process.stderr:
        stderr = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return process.returncode, stderr, usage.ru_maxrss << 10


@pytest.mark.skipif(sys.platform != "linux", reason="the process bound reads /proc")
def test_one_function_call_cannot_outgrow_the_command(corpus_store: Store) -> None:
    """The reproduction: a 3 GB string made by one call of repeat(), which DuckDB neither
    counts nor interrupts (it ran 32 s to 6 GB), fails at once at the 1 GiB default."""
    code, stderr, peak = _run_measured(
        "--store", str(corpus_store.root), "sql", "--timeout", "5",
        "SELECT length(repeat('x', 3000000000))")
    assert (code, stderr.splitlines()) == (2, [
        "error: SQL stopped at the 1 GiB memory limit (--max-memory): the query needs "
        "more memory than that"])
    assert peak < 1 << 30


def test_the_process_bounds_hold_and_are_lifted() -> None:
    """Inside the bounds an allocation past the limit fails, and a block that outlives
    its time limit by the grace is reported to `on_overrun` (which would end the
    process); after them both are gone."""
    import threading

    from lineage.store.sql_guard import process_bounds

    overran: list[str] = []
    told = threading.Event()

    def on_overrun(message: str) -> None:
        overran.append(message)
        told.set()

    with process_bounds(max_memory=64 << 20, timeout=0.05, on_overrun=on_overrun, grace=0.05):
        with pytest.raises(MemoryError):
            bytearray(256 << 20)
        assert told.wait(60)  # a function call the interrupt cannot stop, here a wait
    assert overran == ["SQL stopped after the 0.05 s time limit (--timeout)"]
    assert len(bytearray(256 << 20)) == 256 << 20
    with process_bounds(max_memory=None, timeout=None, on_overrun=on_overrun):
        pass
    assert len(overran) == 1


def test_the_row_limit_cuts_and_says_so(corpus_store: Store) -> None:
    cli = Cli(corpus_store.root)
    text = cli("sql", "SELECT * FROM range(25)", "--max-rows", "10")
    assert text.stdout.splitlines()[-1] == (
        "(only the first 10 rows are shown; --max-rows raises the limit)")
    assert text.stdout.splitlines()[-2].strip() == "9"
    cut = cli("sql", "SELECT range AS n FROM range(25)", "--max-rows", "10", "--json")
    assert [r["n"] for r in json.loads(cut.stdout)] == list(range(10))
    assert cut.stderr.splitlines() == [
        "warning: only the first 10 rows are shown; --max-rows raises the limit"]
    whole = cli.json("sql", "SELECT range AS n FROM range(25)", "--max-rows", "0")
    assert len(whole) == 25
    exact = cli("sql", "SELECT range AS n FROM range(10)", "--max-rows", "10", "--json")
    assert len(json.loads(exact.stdout)) == 10 and exact.stderr == ""


def test_the_default_row_limit(corpus_store: Store) -> None:
    query = f"SELECT range AS n FROM range({DEFAULT_MAX_ROWS + 5})"
    rows = Cli(corpus_store.root).json("sql", query)
    assert len(rows) == DEFAULT_MAX_ROWS == 10_000
    result = run_guarded_sql(corpus_store, query)
    assert result.truncated and len(result.rows) == DEFAULT_MAX_ROWS
    assert len(corpus_store.sql(query).rows) == DEFAULT_MAX_ROWS + 5  # the API: no limit


# -- damaged parts ----------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["truncate", "remove", "flip"])
@pytest.mark.parametrize("which", [0, -1])  # the part whose schema is read, and a later one
def test_a_damaged_part_is_named_as_damage(corpus_store: Store, tmp_path: Path, damage: str,
                                           which: int) -> None:
    copy = tmp_path / "store"
    shutil.copytree(corpus_store.root, copy)
    with open_store(copy).reader(views=False) as con:
        parts = open_store(copy).registered_files(con, "documents")
    assert len(parts) >= 2
    part = copy / parts[which]
    data = bytearray(part.read_bytes())
    if damage == "truncate":
        part.write_bytes(data[:-50])
    elif damage == "flip":  # one bit in the first row group: same size, different bytes
        data[len(data) // 3] ^= 0x10
        part.write_bytes(data)
    else:
        part.unlink()
    result = Cli(copy)("sql", "SELECT count(*), max(content_hash) FROM documents", code=2)
    [line] = result.stderr.splitlines()
    assert parts[which] in line and line.endswith("run `lineage store verify`")
    if damage == "flip":  # a part that still opens: caught by its row-group digests
        assert line.startswith(f"error: {part}: damaged part: ")
        assert Cli(copy)("sql", "SELECT count(*) FROM runs").stdout  # others still answer
