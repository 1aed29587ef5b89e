"""`lineage serve --lookup-copies`: the same answers, byte for byte, from the copies; the
copies made at start-up and removed when the server stops."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from lineage.serve.answering import EXIT_HEADER
from lineage.serve.app import create_app
from lineage.serve.limits import Limits
from lineage.store.lookup_copy import LookupCopies
from lineage.store.lookup_copy_write import make_copies

from ..conftest import Cli, drop_lookup_arrays, spawn_lineage
from .conftest import WAIT, first_answer, free_port


@pytest.fixture(scope="module")
def bare_root(demo_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo store without its lookup arrays (a store made before them): the lookups
    these tests follow read the copies, or Parquet where a server has none."""
    from lineage.api import open_store

    root = tmp_path_factory.mktemp("copies-demo") / "store"
    shutil.copytree(demo_root, root)
    drop_lookup_arrays(open_store(root))
    return root


@pytest.fixture(scope="module")
def copies_client(bare_root: Path, tmp_path_factory: pytest.TempPathFactory,
                  ) -> Iterator[TestClient]:
    from lineage.api import open_store

    folder = tmp_path_factory.mktemp("served-copies")
    copies = LookupCopies.load(folder, make_copies(open_store(bare_root), folder))
    with TestClient(create_app(bare_root, lookup_copies=copies), base_url="http://127.0.0.1",
                    raise_server_exceptions=False) as test_client:
        yield test_client


def test_every_step_and_document_answers_as_without_copies(
        copies_client: TestClient, client: TestClient, demo_cli: Cli) -> None:
    """The server without copies answers as the command line does
    (test_serve_api.py); with copies, it answers the same bytes."""
    steps = demo_cli.json("stream", "show", "main")["steps"]
    for step in range(steps):
        for query in (f"step={step}", f"step={step}&rank=1&world_size=2"):
            answer = copies_client.get(f"/api/docs?{query}")
            assert answer.status_code == 200
            assert answer.content == client.get(f"/api/docs?{query}").content, query
    assert copies_client.get("/api/docs?step=7").content == \
        demo_cli("docs", "--step", "7", "--json").stdout_bytes
    digests = [row["content_hash"] for row in demo_cli.json(
        "sql", "SELECT DISTINCT content_hash FROM documents ORDER BY 1")]
    for digest in [*digests, "0" * 64]:
        answer = copies_client.get(f"/api/trained-on?hash={digest}")
        plain = client.get(f"/api/trained-on?hash={digest}")
        assert answer.content == plain.content
        assert answer.headers[EXIT_HEADER] == plain.headers[EXIT_HEADER]
    assert answer.headers[EXIT_HEADER] == "1"  # the absent hash, last


def test_texts_are_matched_from_the_copies_as_without_them(
        copies_client: TestClient, client: TestClient, example_corpus: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Passages of the corpus (re-spaced, found by their fingerprints and checked against
    their documents) and a text no document holds: with copies, the same bytes as
    without, and the fingerprints and documents read from the copies, never by a query
    (once the first questions have kept the parts' lists, which only a query reads)."""
    import lineage.text.match as match
    from lineage.text.trained_on import DEFAULT_LIMIT

    words = [path.read_text(encoding="utf-8").split() for path in
             sorted((example_corpus / "shakespeare").glob("*.txt"))[:3]]
    texts = [" ".join(found[500 + 40 * i:580 + 40 * i]) for found in words for i in range(2)]
    texts.append("lantern copper meadow quiet harbor signal winter orchard " * 6)
    expected = [client.post("/api/trained-on", content=text.encode()) for text in texts]
    assert {answer.headers[EXIT_HEADER] for answer in expected} == {"0", "1"}
    for text in texts:
        copies_client.post("/api/trained-on", content=text.encode())
    monkeypatch.setattr(match, "part_files", lambda *args, **kwargs: pytest.fail(
        "a text's fingerprints or documents were read by a query"))
    for text, plain in zip(texts, expected, strict=True):  # the same question, not kept
        answer = copies_client.post(f"/api/trained-on?limit={DEFAULT_LIMIT}",
                                    content=text.encode())
        assert answer.content == plain.content, text[:40]
        assert answer.headers[EXIT_HEADER] == plain.headers[EXIT_HEADER]


def test_lineage_serve_with_lookup_copies(demo_root: Path, demo_cli: Cli,
                                          tmp_path: Path) -> None:
    """The real command, two workers: the copies are made in a private folder under the
    temporary directory, answered from, and removed after Ctrl-C."""
    port = free_port()
    server = spawn_lineage("--store", str(demo_root), "serve", "--port", str(port),
                           "--workers", "2", "--lookup-copies", env={"TMPDIR": str(tmp_path)})
    try:
        answer = first_answer(server, f"http://127.0.0.1:{port}/api/docs?step=5")
        made = list(tmp_path.glob("lineage-lookup-copies-*"))
        assert len(made) == 1 and (made[0] / "index.json").is_file()
        assert made[0].stat().st_mode & 0o077 == 0  # this user's only
        assert answer.content == demo_cli("docs", "--step", "5", "--json").stdout_bytes
    finally:
        server.send_signal(signal.SIGINT)
        _, stderr = server.communicate(timeout=WAIT)
    assert re.search(r"copied the lookup tables to \S+ \(\d+\.\d MB, \d+\.\d s\); removed "
                     r"when the server stops", stderr), stderr
    assert not list(tmp_path.glob("lineage-lookup-copies-*"))


def _threads_used(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths of the requests answered in a question thread, from now on."""
    from lineage.serve import answering

    used: list[str] = []
    real = answering._threads

    def counting(request: Any) -> Any:
        used.append(request.url.path)
        return real(request)

    monkeypatch.setattr(answering, "_threads", counting)
    return used


def test_small_lookups_are_answered_at_once_and_others_in_a_thread(
        copies_client: TestClient, client: TestClient, bare_root: Path,
        example_corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A step's lookup in the copies, and a posted file that a corpus holds byte for byte,
    are answered on the event loop; one past the row budget, a text no corpus holds
    exactly, a file with another question, or a server without copies uses a question
    thread. The answers are the same bytes either way."""
    first, second = (copies_client.get(f"/api/docs?step={step}").json()["documents"][0]
                     ["content_hash"] for step in (1, 3))
    held = sorted((example_corpus / "shakespeare").iterdir())[0].read_bytes()
    copies_client.get(f"/api/trained-on?hash={first}&stream=main")  # catalog rows, kept
    copies_client.post("/api/trained-on?limit=9", content=held)  # every stream's, kept
    plain = client.post("/api/trained-on", content=held)  # the server without copies
    used = _threads_used(monkeypatch)
    quick = copies_client.get("/api/docs?step=2")
    copies_client.get(f"/api/trained-on?hash={second}&stream=main")
    exact = copies_client.post("/api/trained-on", content=held)
    assert used == []
    assert exact.json()["results"][0]["verdict"] == "in-stream"
    assert exact.content == plain.content
    copies_client.post("/api/trained-on", content=b"Friends, Romans, countrymen")
    copies_client.post("/api/trained-on", files={"file": held}, data={"text": "Romans"})
    assert used == ["/api/trained-on", "/api/trained-on"]
    copies = copies_client.app.state.lookup_copies  # type: ignore[attr-defined]
    for limits, lookup_copies in ((Limits(quick_rows=1), copies), (Limits(), None)):
        used.clear()
        with TestClient(create_app(bare_root, limits=limits, lookup_copies=lookup_copies),
                        base_url="http://127.0.0.1") as other:
            for step in (1, 2):
                answer = other.get(f"/api/docs?step={step}")
        assert used == ["/api/docs", "/api/docs"]
        assert answer.content == quick.content


def test_a_lookup_past_its_budget_reads_nothing(bare_root: Path,
                                                copies_client: TestClient) -> None:
    from lineage.serve.stores import snapshots_for
    from lineage.store.budget import OverBudget, lookup_budget
    from lineage.stream.query import docs_in_step
    from lineage.text.trained_on import trained_on

    copies = copies_client.app.state.lookup_copies  # type: ignore[attr-defined]
    snapshots = snapshots_for(bare_root)
    snapshot = snapshots.current()
    plain, copied = snapshots.served(snapshot), snapshots.served(snapshot, copies)
    docs_in_step(copied, 4)  # the catalog rows this question reads, kept for the snapshot
    with lookup_budget(copies.batch_rows - 1):  # short of the one batch a step reads
        with pytest.raises(OverBudget, match="rows asked"):
            docs_in_step(copied, 4)
    with lookup_budget(copies.batch_rows):
        assert docs_in_step(copied, 4)["documents"]
    with lookup_budget(10**9), pytest.raises(OverBudget, match="Parquet"):
        docs_in_step(plain, 4)  # no copies: Parquet, never within a budget
    with lookup_budget(10**9):
        assert docs_in_step(copied, 4)["documents"]
    fresh = snapshots.served(type(snapshot)(snapshots.store), copies)  # nothing kept
    with lookup_budget(10**9), pytest.raises(OverBudget, match="DuckDB"):
        docs_in_step(fresh, 4)
    text = b"Friends, Romans, countrymen, lend me your ears"
    trained_on(copied, stdin=text)  # catalog rows kept; its bytes are in no corpus
    with lookup_budget(10**9), pytest.raises(OverBudget, match="matching text"):
        trained_on(copied, stdin=text)  # stopped before the fingerprints, not in them


def test_copies_that_cannot_be_written_are_a_one_line_error(demo_root: Path,
                                                            tmp_path: Path) -> None:
    """A temporary folder without room (here: files limited to 64 KiB) stops the command
    with one line naming the folder, and leaves no copies behind."""
    import resource

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, 64 << 10))

    result = subprocess.run(
        [sys.executable, "-m", "lineage.cli", "--store", str(demo_root), "serve",
         "--lookup-copies", "--port", str(free_port())],
        capture_output=True, text=True, timeout=120, preexec_fn=limited,
        env={**os.environ, "TMPDIR": str(tmp_path)})
    assert result.returncode == 2, result.stderr
    assert f"cannot write the lookup copies to {tmp_path}" in result.stderr
    assert "File too large" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not list(tmp_path.glob("lineage-lookup-copies-*"))
