"""The catalog rows a lookup read, kept beside the catalog (lineage/store/kept_reads.py):
the next lookup process answers the same bytes without DuckDB, a commit removes them, and
rows of another state of the catalog are never used."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lineage.api import Store, init_store, open_store
from lineage.errors import StoreError
from lineage.ingest import ingest_corpus
from lineage.store import kept_reads
from lineage.store.base import marked_cursor
from lineage.store.kept_reads import KeptReads, Recorder, reads_path
from lineage.stream.build import build_stream

from .conftest import Cli

# Runs the console script, then prints whether DuckDB was imported.
PROBE = """
import atexit, sys
atexit.register(lambda: sys.stderr.write(f"DUCKDB {'duckdb' in sys.modules}\\n"))
sys.argv = ["lineage", *sys.argv[1:]]
from lineage.cli.entry import run
run()
"""


def _store(root: Path, example_corpus: Path) -> Store:
    init_store(root)
    store = open_store(root)
    ingest_corpus(store, [example_corpus / "shakespeare"], corpus="plays")
    build_stream(store, corpus="plays", name="main", seed=3, seq_len=512, batch=4)
    return store


@pytest.fixture(scope="module")
def streamed(tmp_path_factory: pytest.TempPathFactory, example_corpus: Path) -> Store:
    return _store(tmp_path_factory.mktemp("kept") / "store", example_corpus)


def _lookup(store: Store, *args: str) -> tuple[int, str, bool]:
    """Exit code, stdout and whether DuckDB was imported, of the console script."""
    done = subprocess.run([sys.executable, "-c", PROBE, "--store", str(store.root), *args],
                          capture_output=True, text=True, timeout=120)
    line = next(x for x in done.stderr.splitlines() if x.startswith("DUCKDB "))
    return done.returncode, done.stdout, line == "DUCKDB True"


@pytest.mark.parametrize("args", [
    ("docs", "--step", "3", "--json"),
    ("docs", "--step", "7", "--rank", "1", "--world-size", "2", "--json"),
    ("trained-on", "sonnets.txt", "--json"),
    ("trained-on", "sonnets.txt", "chunk.py", "--json"),  # one not found: exit 1
])
def test_the_second_lookup_answers_the_same_bytes_without_duckdb(
        streamed: Store, example_corpus: Path, args: tuple[str, ...]) -> None:
    files = {"sonnets.txt": example_corpus / "shakespeare" / "sonnets.txt",
             "chunk.py": example_corpus / "python-stdlib" / "chunk.py"}
    args = tuple(str(files.get(arg, arg)) for arg in args)
    full = Cli(streamed.root)(*args, code=None)
    reads_path(streamed.catalog_path).unlink(missing_ok=True)
    first = _lookup(streamed, *args)
    assert first == (full.exit_code, full.stdout, True)  # read through DuckDB, then kept
    assert reads_path(streamed.catalog_path).is_file()
    assert _lookup(streamed, *args) == (full.exit_code, full.stdout, False)


def test_a_commit_removes_the_kept_reads(tmp_path: Path, example_corpus: Path) -> None:
    store = _store(tmp_path / "store", example_corpus)
    code, one_stream, _ = _lookup(store, "docs", "--step", "3", "--json")
    assert code == 0 and reads_path(store.catalog_path).is_file()
    build_stream(store, corpus="plays", name="other", seed=4, seq_len=512, batch=4)
    assert not reads_path(store.catalog_path).exists()
    # two streams now: the question needs --stream, whatever an earlier lookup read
    code, out, duckdb = _lookup(store, "docs", "--step", "3", "--json")
    assert (code, out, duckdb) == (2, "", True)
    assert _lookup(store, "docs", "--step", "3", "--stream", "main", "--json") == (
        0, one_stream, True)


def test_a_commit_removes_what_a_killed_reader_left(tmp_path: Path, example_corpus: Path,
                                                    ) -> None:
    store = _store(tmp_path / "store", example_corpus)
    left = store.root / f".tmp-99999-{reads_path(store.catalog_path).name}"
    left.write_text('{"format": "lineage-catalog-reads/1", "quer')  # cut by a SIGKILL
    assert _lookup(store, "docs", "--step", "3", "--json")[0] == 0
    assert left.exists()  # a reader leaves it: another reader may be writing it
    build_stream(store, corpus="plays", name="other", seed=4, seq_len=512, batch=4)
    assert not left.exists()


def test_reads_of_another_state_of_the_catalog_are_not_used(
        tmp_path: Path, example_corpus: Path) -> None:
    """A file put back from before a commit (a copy, a writer that did not remove it)
    is of another state: the catalog's identity, size and times say so."""
    store = _store(tmp_path / "store", example_corpus)
    _lookup(store, "docs", "--step", "3", "--json")
    saved = tmp_path / "saved.json"
    shutil.copy(reads_path(store.catalog_path), saved)
    build_stream(store, corpus="plays", name="other", seed=4, seq_len=512, batch=4)
    shutil.copy(saved, reads_path(store.catalog_path))
    assert KeptReads.open(store.catalog_path) is None
    code, out, duckdb = _lookup(store, "docs", "--step", "3", "--json")
    assert (code, out, duckdb) == (2, "", True)


HOLD = """
import sys, time
from lineage.api import open_store
with open_store(sys.argv[1]).writer():
    print("holding", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def test_a_writer_and_a_kept_reader_exclude_each_other(streamed: Store) -> None:
    """Kept reads are read under the catalog's shared lock, the one DuckDB takes: not
    while a writer holds the catalog, and a writer waits for a reader holding them."""
    _lookup(streamed, "docs", "--step", "3", "--json")
    with subprocess.Popen([sys.executable, "-c", HOLD, str(streamed.root), "2"],
                          stdout=subprocess.PIPE, text=True) as writer:
        assert writer.stdout is not None and writer.stdout.readline() == "holding\n"
        assert KeptReads.open(streamed.catalog_path) is None
        writer.wait(timeout=60)
    # the writer removed them; a lookup keeps them again
    assert _lookup(streamed, "docs", "--step", "3", "--json")[2]
    kept = KeptReads.open(streamed.catalog_path)
    assert kept is not None
    try:
        with subprocess.Popen([sys.executable, "-c", HOLD, str(streamed.root), "0"],
                              stdout=subprocess.PIPE, text=True) as writer:
            assert writer.stdout is not None
            with pytest.raises(subprocess.TimeoutExpired):
                writer.wait(timeout=1.0)  # waits for the lock this process holds
            kept.close()
            assert writer.stdout.readline() == "holding\n"
            assert writer.wait(timeout=60) == 0
    finally:
        kept.close()


def test_a_writer_that_cannot_remove_them_writes_nothing(
        tmp_path: Path, example_corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = _store(tmp_path / "store", example_corpus)
    _lookup(store, "docs", "--step", "3", "--json")

    def refused(path: Path) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(kept_reads, "forget_reads", refused)
    with pytest.raises(StoreError, match=r"catalog\.duckdb\.reads\.json: cannot be removed"):
        build_stream(store, corpus="plays", name="other", seed=4, seq_len=512, batch=4)
    assert [s.name for s in store.streams()] == ["main"]
    assert reads_path(store.catalog_path).is_file()


def test_a_read_json_cannot_hold_is_not_kept(streamed: Store) -> None:
    recorder = Recorder()
    recorder.add("all", "SELECT 1", None, [[1, "a"]])
    recorder.add("all", "SELECT now()", None, [[datetime(2026, 1, 1, tzinfo=UTC)]])
    recorder.marks.add("mark")
    assert not recorder.complete
    assert not recorder.keep(streamed.catalog_path, marked_cursor(streamed.catalog_path))


def test_a_lookup_the_kept_reads_miss_asks_duckdb_and_adds_its_reads(
        tmp_path: Path, example_corpus: Path) -> None:
    store = _store(tmp_path / "store", example_corpus)
    build_stream(store, corpus="plays", name="other", seed=4, seq_len=512, batch=4)
    expected = Cli(store.root)("docs", "--step", "3", "--stream", "other", "--json").stdout
    reads_path(store.catalog_path).unlink()
    _lookup(store, "docs", "--step", "3", "--stream", "main", "--json")  # only main's kept
    before = len(json.loads(reads_path(store.catalog_path).read_text())["queries"])
    assert _lookup(store, "docs", "--step", "3", "--stream", "other", "--json") == (
        0, expected, True)
    after = len(json.loads(reads_path(store.catalog_path).read_text())["queries"])
    assert after > before
    assert _lookup(store, "docs", "--step", "3", "--stream", "other", "--json") == (
        0, expected, False)
    assert _lookup(store, "docs", "--step", "3", "--stream", "main", "--json")[2] is False


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.text()
    | st.floats(allow_nan=False, allow_infinity=False) | st.datetimes() | st.dates(),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=8)


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.lists(JSON_VALUES, min_size=1, max_size=4), max_size=4),
       params=st.lists(st.integers() | st.text() | st.lists(st.text(), max_size=2),
                       max_size=3))
def test_kept_rows_come_back_as_duckdb_gave_them(rows: list[list[Any]],
                                                  params: list[Any]) -> None:
    recorder = Recorder()
    recorder.add("all", "SELECT x", params, rows)
    recorder.add("one", "SELECT x", params, rows[0] if rows else None)
    assert recorder.complete
    text = json.dumps({"queries": recorder.queries}, separators=(",", ":"), allow_nan=False)
    kept = KeptReads(json.loads(text)["queries"], lock_fd=-1)
    kept._lock_fd = None
    connection = kept_reads.ReplayConnection(kept)
    got = connection.execute("SELECT x", params).fetchall()
    assert got == [tuple(row) for row in rows]
    assert _types(got) == _types([tuple(row) for row in rows])
    assert connection.execute("SELECT x", params).fetchone() == (
        tuple(rows[0]) if rows else None)
    with pytest.raises(kept_reads.ReadMiss):
        connection.execute("SELECT y", params).fetchall()
    assert kept.missed


def test_a_store_that_cannot_be_written_answers_and_keeps_nothing(
        streamed: Store, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from lineage.cli.fast import run_fast

    def read_only(target: Path, content: dict[str, Any]) -> None:
        raise OSError(30, "Read-only file system")

    reads_path(streamed.catalog_path).unlink(missing_ok=True)
    monkeypatch.setattr(kept_reads, "_write", read_only)
    expected = Cli(streamed.root)("docs", "--step", "3", "--json").stdout
    assert run_fast(["--store", str(streamed.root), "docs", "--step", "3", "--json"]) == 0
    assert capsys.readouterr().out == expected
    assert not reads_path(streamed.catalog_path).exists()


def _types(value: Any) -> Any:
    """The type of every value, nested as the value is (equality alone takes 1 for True)."""
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_types(item) for item in value])
    if isinstance(value, dict):
        return {k: _types(v) for k, v in value.items()}
    return type(value).__name__


@pytest.mark.parametrize("args", [
    ("docs", "--step", "3"),
    ("trained-on", "sonnets.txt"),
    ("corpus", "show", "plays"),
    ("stream", "show", "main"),
])
def test_the_human_forms_answer_from_kept_reads_too(
        streamed: Store, example_corpus: Path, args: tuple[str, ...]) -> None:
    args = tuple(str(example_corpus / "shakespeare" / a) if a.endswith(".txt") else a
                 for a in args)
    reads_path(streamed.catalog_path).unlink(missing_ok=True)
    first = _lookup(streamed, *args)
    assert first[0] == 0 and first[1].strip() and first[2]
    assert _lookup(streamed, *args) == (0, first[1], False)
