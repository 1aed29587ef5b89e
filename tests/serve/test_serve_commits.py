"""The server keeps one reader per process and sees commits without a restart: an answer
begun before a commit finishes on the old state, the next one sees the new state, and
an ingest is never locked out by steady traffic."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from lineage.api import open_store
from lineage.ingest import ingest_corpus
from lineage.serve.stores import snapshots_for

from ..conftest import EXAMPLES, drop_lookup_arrays, spawn_lineage
from .conftest import WAIT, LiveServer


def _until(condition: Callable[[], bool]) -> None:
    """Wait for `condition`, however long a busy machine takes (up to WAIT seconds)."""
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, "waited too long"
        time.sleep(0.02)


@pytest.fixture
def private_store(demo_root: Path, tmp_path: Path) -> Path:
    """A copy of the demo store that a test may write to."""
    shutil.copytree(demo_root, tmp_path / "store")
    return tmp_path / "store"


def test_an_answer_begun_before_a_commit_finishes_on_the_old_state(
        private_store: Path) -> None:
    snapshots = snapshots_for(private_store)
    before = snapshots.served()  # what a request that started now reads
    assert [c["name"] for c in before.corpora()] == ["example", "poems"]
    ingest_corpus(open_store(private_store), [EXAMPLES / "shards" / "poems.parquet"],
                  corpus="more", license="LicenseRef-PublicDomain")
    assert [c["name"] for c in before.corpora()] == ["example", "poems"]
    after = snapshots.served()  # the next request
    assert [c["name"] for c in after.corpora()] == ["example", "more", "poems"]
    assert after.snapshot is not before.snapshot
    time.sleep(0.1)  # once settled, an unchanged catalog is not copied again
    settled = snapshots.served().snapshot
    assert snapshots.served().snapshot is settled


@pytest.mark.slow
def test_server_answers_while_an_ingest_commits(private_store: Path) -> None:
    """Eight clients ask without pause while another process ingests a corpus: every
    answer is a 200, the ingest is not locked out, and the first question after the
    commit sees it (how fast any of this goes is bench/'s business, not a test's)."""
    answers: list[int] = []
    corpora_seen: list[list[str]] = []
    stop = threading.Event()
    with LiveServer(private_store) as server:

        def ask() -> None:
            with httpx.Client(base_url=server.url, timeout=WAIT) as client:
                while not stop.is_set():
                    for path in ("/api/docs?step=1", "/api/corpora"):
                        response = client.get(path)
                        answers.append(response.status_code)
                        if path == "/api/corpora" and response.status_code == 200:
                            corpora_seen.append([c["name"] for c in response.json()])

        clients = [threading.Thread(target=ask) for _ in range(8)]
        for thread in clients:
            thread.start()
        _until(lambda: ["example", "poems"] in corpora_seen)  # the clients are asking
        ingest = spawn_lineage("--store", str(private_store), "ingest", "corpus",
                               str(EXAMPLES / "shards" / "poems.parquet"), "--corpus", "more",
                               "--license", "LicenseRef-PublicDomain",
                               env={"LINEAGE_BUSY_TIMEOUT": "20"})
        _, stderr = ingest.communicate(timeout=WAIT)
        assert ingest.returncode == 0, stderr
        after = httpx.get(f"{server.url}/api/corpora", timeout=WAIT).json()
        _until(lambda: ["example", "more", "poems"] in corpora_seen)  # the clients too
        stop.set()
        for thread in clients:
            thread.join(timeout=WAIT)
    assert set(answers) == {200}
    assert [c["name"] for c in after] == ["example", "more", "poems"]


def test_a_repeated_question_is_answered_from_memory_until_a_commit(
        private_store: Path) -> None:
    from starlette.testclient import TestClient

    from lineage.serve.api import CACHE_HEADER
    from lineage.serve.app import create_app

    with TestClient(create_app(private_store), base_url="http://localhost") as client:
        first = client.get("/api/corpora")
        again = client.get("/api/corpora")
        assert CACHE_HEADER.lower() not in first.headers
        assert again.headers[CACHE_HEADER] == "hit"
        assert again.content == first.content
        assert again.headers["x-lineage-exit-code"] == first.headers["x-lineage-exit-code"]
        posted = [client.post("/api/trained-on", content=b"some text") for _ in range(2)]
        assert posted[1].headers[CACHE_HEADER] == "hit"
        other = client.post("/api/trained-on", content=b"other text")
        assert CACHE_HEADER.lower() not in other.headers
        assert other.json()["results"][0]["content_hash"] != \
            posted[0].json()["results"][0]["content_hash"]
        sql = [client.get("/api/sql?q=SELECT%201") for _ in range(2)]
        assert CACHE_HEADER.lower() not in sql[1].headers
        ingest_corpus(open_store(private_store), [EXAMPLES / "shards" / "poems.parquet"],
                      corpus="more", license="LicenseRef-PublicDomain")
        after = client.get("/api/corpora")
        assert CACHE_HEADER.lower() not in after.headers
        assert [c["name"] for c in after.json()] == ["example", "more", "poems"]


def test_a_busy_or_damaged_store_is_a_json_5xx(private_store: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer that keeps the catalog past the busy timeout: 503; a part whose bytes
    differ from the catalog's record: 500; both with the command line's message."""
    import subprocess
    import sys

    from starlette.testclient import TestClient

    from lineage.serve.app import create_app

    monkeypatch.setenv("LINEAGE_BUSY_TIMEOUT", "0.3")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time, lineage\n"
         "with lineage.open_store(sys.argv[1]).writer():\n"
         "    print('held', flush=True); time.sleep(30)", str(private_store)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with TestClient(create_app(private_store), base_url="http://localhost") as client:
            busy = client.get("/api/corpora")
    finally:
        holder.kill()
        holder.communicate()
    assert busy.status_code == 503
    assert busy.json()["exit_code"] == 2 and "store busy" in busy.json()["error"]

    drop_lookup_arrays(open_store(private_store))  # a lookup that reads the parts
    part = sorted((private_store / "tables" / "occurrences").glob("*.parquet"))[0]
    data = bytearray(part.read_bytes())
    data[100] ^= 0xFF  # inside the first row group, which holds step 0
    part.write_bytes(bytes(data))
    with TestClient(create_app(private_store), base_url="http://localhost") as client:
        damaged = client.get("/api/docs?step=0")
    assert damaged.status_code == 500
    assert damaged.json()["exit_code"] == 2 and "damaged part" in damaged.json()["error"]


def test_catalog_rows_are_kept_per_snapshot_and_part_bytes_checked_every_time(
        private_store: Path) -> None:
    """A snapshot keeps the parts, their row groups' records and the streams' rows it read
    (the same answers as the store read afresh); a part damaged after that is still caught
    by the next lookup of the same snapshot; a commit starts a snapshot with nothing kept."""
    from lineage.errors import DamagedPartError
    from lineage.text.trained_on import trained_on_hashes

    plain = open_store(private_store)
    drop_lookup_arrays(plain)  # the lookups read the parts, as in a store made before them
    snapshots = snapshots_for(private_store)
    served = snapshots.served()
    digests = [r[0] for r in plain.sql("SELECT content_hash FROM documents").rows]
    digests = digests[::max(1, len(digests) // 24)]  # spread over the parts' row groups
    last = plain.stream("main")["steps"] - 1
    steps = sorted({*range(0, last, max(1, last // 24)), last})
    for _ in range(2):  # the second time from what the snapshot kept
        for step in steps:
            assert served.docs_in_step(step, stream="main") == \
                plain.docs_in_step(step, stream="main")
        for digest in digests:
            assert trained_on_hashes(served, [(digest, digest)], stream="main") == \
                trained_on_hashes(plain, [(digest, digest)], stream="main")
    kept = served.snapshot.memo
    assert len(kept) >= 4  # parts of occurrences, document_hashes, occurrence_hashes; streams

    drop_lookup_arrays(open_store(private_store))  # a lookup that reads the parts
    part = sorted((private_store / "tables" / "occurrences").glob("*.parquet"))[0]
    data = bytearray(part.read_bytes())
    data[100] ^= 0xFF  # inside the first row group, which holds step 0
    part.write_bytes(bytes(data))
    with pytest.raises(DamagedPartError, match="row group 0"):  # the same snapshot
        served.docs_in_step(0, stream="main")
    assert served.catalog_memo is kept and len(kept) >= 4

    ingest_corpus(plain, [EXAMPLES / "shards" / "poems.parquet"], corpus="more",
                  license="LicenseRef-PublicDomain")
    after = snapshots.served()
    assert after.snapshot is not served.snapshot and len(after.snapshot.memo) == 0
    assert [c["name"] for c in after.corpora()] == ["example", "more", "poems"]
