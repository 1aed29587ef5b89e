"""`lineage serve --lookup-copies`: the same answers, byte for byte, from the copies; the
copies made at start-up and removed when the server stops."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from lineage.serve.answering import EXIT_HEADER
from lineage.serve.app import create_app
from lineage.store.lookup_copy import LookupCopies
from lineage.store.lookup_copy_write import make_copies

from ..conftest import Cli, spawn_lineage
from .conftest import free_port


@pytest.fixture(scope="module")
def copies_client(demo_root: Path, tmp_path_factory: pytest.TempPathFactory,
                  ) -> Iterator[TestClient]:
    from lineage.api import open_store

    folder = tmp_path_factory.mktemp("served-copies")
    copies = LookupCopies.load(folder, make_copies(open_store(demo_root), folder))
    with TestClient(create_app(demo_root, lookup_copies=copies), base_url="http://127.0.0.1",
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


def test_lineage_serve_with_lookup_copies(demo_root: Path, demo_cli: Cli,
                                          tmp_path: Path) -> None:
    """The real command, two workers: the copies are made in a private folder under the
    temporary directory, answered from, and removed after Ctrl-C."""
    port = free_port()
    server = spawn_lineage("--store", str(demo_root), "serve", "--port", str(port),
                           "--workers", "2", "--lookup-copies", env={"TMPDIR": str(tmp_path)})
    try:
        url = f"http://127.0.0.1:{port}/api/docs?step=5"
        deadline = time.monotonic() + 60
        while True:
            try:
                answer = httpx.get(url)
                break
            except httpx.ConnectError:
                assert server.poll() is None, server.communicate()
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.2)
        made = list(tmp_path.glob("lineage-lookup-copies-*"))
        assert len(made) == 1 and (made[0] / "index.json").is_file()
        assert made[0].stat().st_mode & 0o077 == 0  # this user's only
        assert answer.content == demo_cli("docs", "--step", "5", "--json").stdout_bytes
    finally:
        server.send_signal(signal.SIGINT)
        _, stderr = server.communicate(timeout=30)
    assert "copied the lookup tables to" in stderr
    assert not list(tmp_path.glob("lineage-lookup-copies-*"))
