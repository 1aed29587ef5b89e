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


def test_a_full_disk_while_the_rows_are_dealt_into_ranges_commits_nothing(
        small_disk: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A corpus larger than one sort is dealt into key ranges, a scratch file a range in
    the staging folder. The disk filled up just as the deal starts (a file takes all but
    32 KiB of it) is one error naming a full disk, every scratch writer closed, nothing
    committed; with room again, the store is the one an ingest that never ran short
    makes."""
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    import lineage.ingest.sort_ranges as ranges
    from lineage.api import init_store
    from lineage.errors import StoreFullError
    from lineage.ingest import ingest_corpus

    n = 60_000
    manifest = tmp_path / "manifest.parquet"
    pq.write_table(pa.table({
        "doc_id": [f"d{(i * 7919) % n:07d}" for i in range(n)],
        "source": ["web" if i % 3 else "code" for i in range(n)],
        "uri": [f"s3://bucket/some/longer/path/{i:09d}.txt" for i in range(n)],
        "n_bytes": [100 + i % 977 for i in range(n)],
        "n_tokens": [25 + i % 311 for i in range(n)],
        "content_hash": [f"{(i * 2654435761) % 2**64:016x}" * 4 for i in range(n)]}),
        manifest)
    monkeypatch.setattr(ranges, "RANGE_ROWS", 5_000)
    monkeypatch.setattr(ranges, "WHOLE_SORT_ROWS", 5_000)

    def parts(root: Path) -> list[tuple[object, ...]]:
        return open_store(root).sql(
            "SELECT table_name, row_groups, sha256 FROM parquet_files ORDER BY path").rows

    clean = tmp_path / "clean"
    init_store(clean)
    ingest_corpus(open_store(clean), [manifest], corpus="c")

    _resize(small_disk, "40m")
    store, filler = small_disk / "store", small_disk / "filler"
    init_store(store)
    opened, full_while_dealing = ranges._RangeFiles.__init__, []
    flush = ranges._RangeFiles._flush

    def fill_then_open(self: ranges._RangeFiles, *args: object) -> None:
        stat = os.statvfs(small_disk)
        with open(filler, "wb") as out:
            out.write(b"\0" * (stat.f_bavail * stat.f_frsize - 32 * 1024))
        opened(self, *args)  # type: ignore[arg-type]

    def flushed(self: ranges._RangeFiles, k: int) -> None:
        try:
            flush(self, k)
        except OSError:
            full_while_dealing.append(k)
            raise

    monkeypatch.setattr(ranges._RangeFiles, "__init__", fill_then_open)
    monkeypatch.setattr(ranges._RangeFiles, "_flush", flushed)
    with pytest.raises(StoreFullError, match="disk full while writing .*nothing was committed"):
        ingest_corpus(open_store(store), [manifest], corpus="c")
    assert full_while_dealing  # the disk ran out in the deal itself
    still_open = [os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
                  if os.path.exists(f"/proc/self/fd/{fd}")]
    assert not [path for path in still_open if path.startswith(str(store))]
    assert _corpora(store) == []
    filler.unlink()
    assert open_store(store).verify()["ok"]

    monkeypatch.setattr(ranges._RangeFiles, "__init__", opened)
    ingest_corpus(open_store(store), [manifest], corpus="c")
    assert _corpora(store) == _corpora(clean)
    assert parts(store) == parts(clean)
