"""A full disk at commit never breaks a store, and `lineage store repair` brings back
stores found half-way (an older version's full-disk damage, lost or changed parts,
garbage), without losing committed data and saying what it did."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lineage.api import Store, open_store
from lineage.ingest import ingest_corpus
from lineage.ingest.repair import repair_store
from lineage.stream.build import build_stream

from .conftest import EXAMPLES, Cli


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """300 small files of real text: lines of a play, one file each."""
    play = EXAMPLES / "corpus" / "shakespeare" / "julius_caesar.txt"
    text = play.read_text(encoding="utf-8").splitlines()
    root = tmp_path / "docs"
    root.mkdir()
    kept = [line for line in text if line.strip()][:300]
    for i, line in enumerate(kept):
        (root / f"line-{i:03d}.txt").write_text(line + "\n", encoding="utf-8")
    assert len(kept) == 300
    return root


def _answers(store: Store) -> dict[str, object]:
    return {"corpora": store.sql("SELECT name, manifest_hash, documents FROM corpora "
                                 "ORDER BY name").rows,
            "files": store.sql("SELECT path, sha256 FROM parquet_files ORDER BY path").rows,
            "documents": store.sql("SELECT corpus, count(*) FROM documents GROUP BY ALL "
                                   "ORDER BY ALL").rows}


def _limited(blocks: int) -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (blocks * 512, blocks * 512))


def test_a_catalog_that_cannot_grow_at_commit_keeps_the_commit(
        store: Store, folder: Path, tmp_path: Path) -> None:
    """The reproduction: `ulimit -f` at catalog.duckdb's size, then a 300-file ingest.
    Before, the commit was made, its checkpoint failed, and the parts were deleted."""
    ingest_corpus(store, [EXAMPLES / "shards" / "poems.parquet"], corpus="before")
    size = store.catalog_path.stat().st_size
    result = subprocess.run(
        [sys.executable, "-m", "lineage.cli", "--store", str(store.root), "ingest", "corpus",
         str(folder), "--corpus", "c", "--json"],
        capture_output=True, text=True, preexec_fn=lambda: _limited((size + 511) // 512),
        timeout=300)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["status"] == "added"
    assert "committed, but the commit could not be moved from catalog.duckdb.wal" in \
        result.stderr
    assert (store.root / "catalog.duckdb.wal").stat().st_size > 0
    assert store.verify()["ok"]
    assert store.trained_on([folder / "line-007.txt"]).results[0].verdict != "not-found"
    again = ingest_corpus(store, [folder], corpus="c")
    assert again.status == "unchanged"
    assert not (store.root / "catalog.duckdb.wal").exists() or \
        (store.root / "catalog.duckdb.wal").stat().st_size == 0  # that write moved the log


def test_repair_moves_a_log_left_by_a_failed_checkpoint(
        store: Store, folder: Path) -> None:
    size = store.catalog_path.stat().st_size
    subprocess.run([sys.executable, "-m", "lineage.cli", "--store", str(store.root), "ingest",
                    "corpus", str(folder), "--corpus", "c"], capture_output=True, check=True,
                   preexec_fn=lambda: _limited((size + 511) // 512), timeout=300)
    before = _answers(store)
    report = repair_store(store)
    assert report.ok
    assert [a.action for a in report.actions] == ["moved-log"]
    assert _answers(store) == before
    assert not (store.root / "catalog.duckdb.wal").exists()


def _broken_like_before(store: Store, folder: Path) -> list[str]:
    """What an older lineage left after a full disk at commit: the corpus registered, its
    parts deleted."""
    result = ingest_corpus(store, [folder], corpus="c")
    for rel in result.parts:
        (store.root / rel).unlink()
    return result.parts


def test_repair_rebuilds_the_parts_an_older_version_deleted(
        store: Store, folder: Path) -> None:
    ingest_corpus(store, [EXAMPLES / "shards" / "poems.parquet"], corpus="before")
    good = _answers(store)
    lost = _broken_like_before(store, folder)
    assert not store.verify()["ok"]
    with pytest.raises(Exception, match="cannot be read"):
        store.sql("SELECT count(*) FROM documents")
    report = repair_store(store)
    assert report.ok and not report.remaining
    assert sorted(a.target for a in report.actions if a.action == "rebuilt") == sorted(lost)
    assert store.verify()["ok"]
    assert _answers(store)["corpora"][0][0] == "before"
    assert store.trained_on([folder / "line-042.txt"]).results[0].verdict != "not-found"
    assert good["corpora"] == [r for r in _answers(store)["corpora"] if r[0] == "before"]


def test_repair_rebuilds_a_changed_part_and_a_lost_stream_part(
        store: Store, folder: Path) -> None:
    ingest_corpus(store, [folder], corpus="c")
    build_stream(store, corpus="c", name="s", seed=9, seq_len=32, batch=2)
    before = _answers(store)
    step = store.docs_in_step(3, stream="s").to_dict()
    documents = sorted((store.root / "tables" / "documents").glob("c-*.parquet"))[0]
    data = bytearray(documents.read_bytes())
    data[len(data) // 2] ^= 0x01  # one flipped bit
    documents.write_bytes(bytes(data))
    for part in (store.root / "tables" / "occurrences").glob("s-*.parquet"):
        part.unlink()
    report = repair_store(store)
    assert report.ok, report.to_dict()
    rebuilt = {a.target.split("/")[1] for a in report.actions if a.action == "rebuilt"}
    assert rebuilt == {"documents", "occurrences"}
    assert _answers(store) == before
    assert store.docs_in_step(3, stream="s").to_dict() == step


def test_lost_inputs_are_reported_then_dropped_on_request_and_can_come_back(
        store: Store, folder: Path, tmp_path: Path) -> None:
    ingest_corpus(store, [folder], corpus="c")
    build_stream(store, corpus="c", name="s", seed=9, seq_len=32, batch=2)
    step = store.docs_in_step(1, stream="s").to_dict()
    (next((store.root / "tables" / "documents").glob("c-*.parquet"))).unlink()
    moved = tmp_path / "elsewhere"
    shutil.move(folder, moved)

    report = repair_store(store)
    assert not report.ok
    assert [(a.action, a.target) for a in report.actions] == [("cannot-rebuild", "corpus c")]
    assert f"its input {folder} is gone" in report.actions[0].detail
    assert [p.table for p in report.remaining] == ["documents"]

    dropped = repair_store(store, drop_lost=True)
    assert dropped.ok
    actions = [(a.action, a.target) for a in dropped.actions]
    assert ("dropped", "corpus c") in actions
    assert sum(a == "unregistered" for a, _ in actions) == 7  # its parts and lookup arrays
    note = next(a.detail for a in dropped.actions if a.action == "dropped")
    assert "stream s answer again once corpus c is ingested again" in note
    removed = {a.target for a in dropped.actions if a.action == "removed"}
    assert len(removed) == 6  # its parts and arrays still there: no longer data
    assert store.verify()["ok"]

    shutil.move(moved, folder)
    assert ingest_corpus(store, [folder], corpus="c").status == "added"
    assert store.docs_in_step(1, stream="s").to_dict() == step  # the stream answers again


def test_repair_removes_garbage_but_not_a_live_writers_temp(store: Store) -> None:
    ingest_corpus(store, [EXAMPLES / "shards" / "poems.parquet"], corpus="p")
    tables = store.root / "tables" / "documents"
    (tables / "left-0000.parquet").write_bytes(b"no commit named me")
    live = tables / f".tmp-{os.getpid()}-0a0b0c0d-x.parquet"
    live.write_bytes(b"being written")
    dead_staging = store.root / "staging" / "999999999-1-deadbeef"
    dead_staging.mkdir()
    report = repair_store(store)
    removed = sorted(a.target for a in report.actions if a.action == "removed")
    assert removed == ["staging/999999999-1-deadbeef", "tables/documents/left-0000.parquet"]
    assert live.exists()


def test_store_repair_command(store: Store, folder: Path) -> None:
    lost = _broken_like_before(store, folder)
    cli = Cli(store.root)
    cli("store", "verify", code=1)
    answer = cli.json("store", "repair")
    assert answer["ok"] is True and answer["remaining"] == []
    assert {a["target"] for a in answer["actions"]} == set(lost)
    assert cli("store", "repair").stdout.splitlines() == ["ok: the store is consistent"]
    assert open_store(store.root).verify()["ok"]
