"""Crash safety and concurrency, with real processes: SIGKILL at every commit boundary,
two writers at once, readers during a write, and a disk that fills up."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from lineage.api import Store, init_store, open_store
from lineage.errors import StoreFullError
from lineage.ingest import ingest_corpus

from .conftest import run_lineage, spawn_lineage

pytestmark = pytest.mark.slow

FAULT_POINTS = ["map-done", "reduce-written", "commit-locked", "commit-renamed",
                "commit-registered"]


def _park_at(point: str, store: Store, ready: Path, *args: str) -> subprocess.Popen[str]:
    """Start an ingest that stops at `point` and wait until it is parked there.

    The child takes Ctrl-C as a terminal's foreground job does, even when these tests run
    as a background job (which a shell starts with SIGINT ignored, and an ignored signal
    stays ignored across exec): for the spawn, this process handles SIGINT, and a handled
    signal reverts to its default action in the child."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = spawn_lineage(
            "--store", str(store.root), "ingest", "corpus", *args,
            env={"LINEAGE_FAULT_POINT": point, "LINEAGE_FAULT_READY": str(ready)},
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    deadline = time.monotonic() + 60
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"never reached {point}: {proc.communicate()}")
        time.sleep(0.02)
    return proc


def _state(store: Store) -> dict[str, object]:
    return {
        "corpora": store.sql("SELECT name, manifest_hash FROM corpora ORDER BY name").rows,
        "files": store.sql("SELECT path, sha256 FROM parquet_files ORDER BY path").rows,
        "documents": store.sql("SELECT count(*) FROM documents").rows,
        "ingests": store.sql("SELECT count(*) FROM ingests").rows,
    }


@pytest.mark.parametrize("point", FAULT_POINTS)
def test_sigkill_leaves_the_store_as_it_was_and_a_rerun_completes(
    store: Store, example_corpus: Path, example_shards: Path, tmp_path: Path, point: str
) -> None:
    ingest_corpus(store, [example_shards / "poems.parquet"], corpus="before")
    before = _state(store)
    proc = _park_at(point, store, tmp_path / "ready", str(example_corpus), "--corpus", "c")
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    assert _state(store) == before  # every table all-or-nothing: nothing of "c" shows
    assert store.verify()["ok"]

    rerun = run_lineage("--store", str(store.root), "ingest", "corpus", str(example_corpus),
                        "--corpus", "c", "--json")
    assert rerun.returncode == 0, rerun.stderr
    assert json.loads(rerun.stdout)["status"] == "added"
    report = store.verify()
    # documents, hash index (and its lookup array) and the four text-index tables
    # (near-duplicate band keys among them), for each of the two corpora
    assert report["ok"] and report["files_checked"] == 14
    assert report["unregistered"] == []  # the re-run cleared what the killed one left
    assert [name for name, _ in store.sql("SELECT name, 1 FROM corpora ORDER BY name").rows] \
        == ["before", "c"]


def test_two_writers_at_once_both_land(store: Store, example_corpus: Path) -> None:
    procs = [
        spawn_lineage("--store", str(store.root), "ingest", "corpus", str(example_corpus),
                      "--corpus", name, "--json")
        for name in ("first", "second")
    ]
    outputs = [proc.communicate(timeout=120) for proc in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    hashes = {json.loads(out)["manifest_hash"] for out, _ in outputs}
    assert len(hashes) == 1
    assert len(store.corpora()) == 2 and store.verify()["ok"]


def test_two_writers_of_the_same_corpus_one_adds_one_is_unchanged(
    store: Store, example_corpus: Path
) -> None:
    procs = [
        spawn_lineage("--store", str(store.root), "ingest", "corpus", str(example_corpus),
                      "--corpus", "same", "--json")
        for _ in range(2)
    ]
    outputs = [proc.communicate(timeout=120) for proc in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    statuses = sorted(json.loads(out)["status"] for out, _ in outputs)
    assert statuses == ["added", "unchanged"]
    report = store.verify()
    assert report["ok"] and report["files_checked"] == 7 and report["unregistered"] == []


def test_a_query_during_the_long_part_of_an_ingest_sees_the_old_state(
    store: Store, example_corpus: Path, example_shards: Path, tmp_path: Path
) -> None:
    ingest_corpus(store, [example_shards / "poems.parquet"], corpus="before")
    proc = _park_at("map-done", store, tmp_path / "ready", str(example_corpus), "--corpus", "c")
    try:
        query = run_lineage("--store", str(store.root), "sql",
                            "SELECT corpus, count(*) AS n FROM documents GROUP BY corpus",
                            "--json")
        assert query.returncode == 0, query.stderr
        assert json.loads(query.stdout) == [{"corpus": "before", "n": 18}]
    finally:
        proc.kill()
        proc.communicate()


def test_a_reader_blocked_by_a_commit_reports_busy_with_the_pid(
    store: Store, example_corpus: Path, tmp_path: Path
) -> None:
    proc = _park_at("commit-registered", store, tmp_path / "ready", str(example_corpus),
                    "--corpus", "c")
    try:
        started = time.monotonic()
        query = run_lineage("--store", str(store.root), "corpus", "list",
                            env={"LINEAGE_BUSY_TIMEOUT": "1"})
        waited = time.monotonic() - started
        assert query.returncode == 2
        assert f"store busy (pid {proc.pid})" in query.stderr
        assert "Traceback" not in query.stderr and query.stderr.count("\n") == 1
        assert waited >= 1.0
    finally:
        proc.kill()
        proc.communicate()
    assert store.corpora() == []  # the killed commit never happened


def test_readers_wait_out_a_short_commit(store: Store, example_shards: Path) -> None:
    released = threading.Event()

    def hold_lock() -> None:
        with store.writer():
            time.sleep(0.8)
        released.set()

    holder = threading.Thread(target=hold_lock)
    holder.start()
    time.sleep(0.1)
    query = run_lineage("--store", str(store.root), "corpus", "list", "--json")
    holder.join()
    assert query.returncode == 0, query.stderr
    assert released.is_set() and json.loads(query.stdout) == []


def test_disk_full_is_reported_and_nothing_is_committed(
    tmp_path: Path, example_corpus: Path, make_parquet: object
) -> None:
    mount = tmp_path / "small"
    mount.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1200k", "tmpfs", str(mount)], capture_output=True
    ).returncode == 0
    try:
        init_store(mount / "store")
        store = open_store(mount / "store")
        if mounted:
            # Incompressible hashes fill the rest of the 1.2 MB file system.
            import pyarrow as pa
            import pyarrow.parquet as pq

            n = 60_000
            manifest = tmp_path / "big.parquet"
            pq.write_table(pa.table({
                "doc_id": [f"d{i}" for i in range(n)], "source": ["s"] * n, "uri": [None] * n,
                "n_bytes": [1] * n, "n_tokens": [1] * n,
                "content_hash": [os.urandom(32).hex() for _ in range(n)],
            }), manifest)
            with pytest.raises(StoreFullError, match="disk full"):
                ingest_corpus(store, [manifest], corpus="big")
        else:  # no permission to mount: fail the write at the same place by injection
            os.environ["LINEAGE_FAULT_POINT"] = "reduce-written"
            os.environ["LINEAGE_FAULT_ACTION"] = "enospc"
            try:
                with pytest.raises(StoreFullError, match="disk full"):
                    ingest_corpus(store, [example_corpus], corpus="big")
            finally:
                del os.environ["LINEAGE_FAULT_POINT"], os.environ["LINEAGE_FAULT_ACTION"]
        assert store.corpora() == []
        assert not [p for p in (store.root / "tables").rglob("*") if p.is_file()]
        assert not list((store.root / "staging").iterdir())
        assert store.verify()["ok"]
    finally:
        if mounted:
            subprocess.run(["umount", str(mount)], check=False)


@pytest.mark.parametrize("point", ["reduce-written", "commit-renamed"])
def test_injected_enospc_through_the_cli_is_one_line(
    store: Store, example_corpus: Path, point: str
) -> None:
    result = run_lineage(
        "--store", str(store.root), "ingest", "corpus", str(example_corpus), "--corpus", "c",
        env={"LINEAGE_FAULT_POINT": point, "LINEAGE_FAULT_ACTION": "enospc"},
    )
    assert result.returncode == 2
    assert result.stderr.startswith("error: disk full while writing")
    assert "Traceback" not in result.stderr
    assert store.corpora() == [] and store.verify()["unregistered"] == []


def test_verify_catches_a_flipped_byte_and_a_truncated_file(
    store: Store, example_corpus: Path
) -> None:
    result = ingest_corpus(store, [example_corpus], corpus="c")
    part = store.root / result.parts[0]
    data = bytearray(part.read_bytes())
    spare = part.with_suffix(".orig")
    shutil.copyfile(part, spare)
    data[len(data) // 2] ^= 0x01
    part.write_bytes(bytes(data))
    flipped = run_lineage("--store", str(store.root), "store", "verify", "--json")
    assert flipped.returncode == 1
    problem = json.loads(flipped.stdout)["problems"][0]
    assert (problem["path"], problem["status"]) == (result.parts[0], "hash-mismatch")
    part.write_bytes(spare.read_bytes()[:-100])
    truncated = run_lineage("--store", str(store.root), "store", "verify")
    assert truncated.returncode == 1 and "size-mismatch" in truncated.stdout
    part.unlink()
    missing = store.verify()
    assert missing["problems"][0]["status"] == "missing"


def test_a_second_writer_waits_then_reports_busy(
    store: Store, example_corpus: Path, example_shards: Path, tmp_path: Path
) -> None:
    proc = _park_at("commit-registered", store, tmp_path / "ready", str(example_corpus),
                    "--corpus", "c")
    try:
        second = run_lineage("--store", str(store.root), "ingest", "corpus",
                             str(example_shards / "poems.parquet"), "--corpus", "p",
                             env={"LINEAGE_BUSY_TIMEOUT": "1"})
        assert second.returncode == 2
        assert f"error: store busy (pid {proc.pid})" in second.stderr
    finally:
        proc.kill()
        proc.communicate()
    # Only the killed writer's renamed parts remain (garbage for gc); the busy one left none.
    leftovers = store.verify()["unregistered"]
    assert store.corpora() == []
    assert sorted(p.split("/")[1] for p in leftovers) == [
        "document_hashes", "document_hashes_arrays", "documents", "fingerprints",
        "near_bands", "text_documents", "text_hashes"]
    assert all(p.split("/")[2].startswith("c-") for p in leftovers)


@pytest.mark.parametrize("point", ["map-done", "reduce-written", "commit-renamed"])
def test_ctrl_c_exits_130_and_cleans_up(
    store: Store, example_corpus: Path, tmp_path: Path, point: str
) -> None:
    proc = _park_at(point, store, tmp_path / "ready", str(example_corpus), "--corpus", "c")
    os.kill(proc.pid, signal.SIGINT)
    try:
        _, stderr = proc.communicate(timeout=30)
    finally:  # a child that ignored the signal must not outlive the test
        proc.kill()
        proc.communicate()
    assert proc.returncode == 130
    assert stderr == "error: interrupted: nothing was committed\n"
    report = store.verify()
    assert store.corpora() == [] and report["unregistered"] == []
    assert not list((store.root / "staging").iterdir())
