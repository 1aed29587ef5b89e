"""A real full disk: a store on a small tmpfs, filled by an ingest, then given room.

The fault matrix fails chosen calls; here the kernel does, wherever the space runs out
(a staging file, a part, the catalog's log or its checkpoint). Mounting needs root, as CI
runs; elsewhere the test says why it did not run.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from lineage.api import open_store

from ..conftest import EXAMPLES, run_lineage

pytestmark = pytest.mark.slow


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=900k", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"a tmpfs cannot be mounted here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def _resize(mount: Path, size: str) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size}", str(mount)], check=True)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lines")
    play = (EXAMPLES / "corpus" / "shakespeare" / "julius_caesar.txt").read_text("utf-8")
    for i, line in enumerate([line for line in play.splitlines() if line.strip()][:300]):
        (root / f"line-{i:03d}.txt").write_text(line + "\n", encoding="utf-8")
    return root


def _corpora(store: Path) -> list[tuple[object, ...]]:
    return open_store(store).sql("SELECT name, manifest_hash FROM corpora").rows


@pytest.mark.parametrize("size", ["900k", "1300k", "2m"])
def test_an_ingest_that_fills_the_disk_leaves_a_store_that_works(
        small_disk: Path, files: Path, tmp_path: Path, size: str) -> None:
    _resize(small_disk, size)
    store = small_disk / "store"
    assert run_lineage("--store", str(store), "init").returncode == 0
    first = run_lineage("--store", str(store), "ingest", "corpus", str(files), "--corpus", "c",
                        "--json")
    assert "Traceback" not in first.stderr and "unexpected" not in first.stderr
    assert first.returncode in (0, 2), first.stderr
    if first.returncode == 2:
        assert len(first.stderr.strip().splitlines()) == 1
        assert "nothing was committed" in first.stderr
        assert _corpora(store) == []
    else:  # committed; the catalog file may not have had room for the checkpoint
        assert json.loads(first.stdout)["status"] == "added"
    assert open_store(store).verify()["ok"]

    _resize(small_disk, "20m")
    again = run_lineage("--store", str(store), "ingest", "corpus", str(files), "--corpus", "c",
                        "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["status"] == ("added" if first.returncode else "unchanged")
    assert [name for name, _ in _corpora(store)] == ["c"]
    assert open_store(store).verify()["ok"]
    found = run_lineage("--store", str(store), "trained-on", str(files / "line-010.txt"),
                        "--json")
    assert found.returncode in (0, 1) and json.loads(found.stdout)["results"][0]["verdict"] \
        != "not-found"
