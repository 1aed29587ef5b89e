"""Shared by the server tests: a demo-like store (built once per session, never written
by a test), the command line over it, and a test client of the application."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from lineage.api import init_store, open_store
from lineage.ingest import ingest_corpus
from lineage.ingest.checkpoint import ingest_checkpoint
from lineage.ingest.steps import ingest_steps
from lineage.serve.app import create_app
from lineage.stream.build import build_stream

from ..conftest import EXAMPLES, Cli, load_tiny_run

DEMO_LICENSES = ["shakespeare=LicenseRef-PublicDomain", "python-stdlib=PSF-2.0",
                 "debian-copyright=NOASSERTION"]  # as examples/demo.sh gives them
STEPS = 24
EVERY = 8  # the tiny run's checkpoint interval (the audit ledger needs one)


@pytest.fixture(scope="session")
def demo_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two corpora (with text indexes), a stream, a 24-step run with checkpoints and two
    experiment records: the demo store's kinds of records, small."""
    root = tmp_path_factory.mktemp("serve-demo")
    init_store(root / "store")
    store = open_store(root / "store")
    ingest_corpus(store, [EXAMPLES / "corpus"], corpus="example", license=DEMO_LICENSES)
    ingest_corpus(store, [EXAMPLES / "shards" / "sonnets.jsonl.gz"], corpus="poems",
                  license="LicenseRef-PublicDomain")
    build_stream(store, corpus="example", name="main", seed=42, seq_len=1024, batch=4)
    load_tiny_run().train(store, "main", steps=STEPS, out=root / "run", checkpoint_every=EVERY)
    ingest_steps(store, root / "run" / "steps.jsonl", run="tiny", stream="main", world_size=2)
    ingest_checkpoint(store, root / "run" / f"checkpoint-{EVERY - 1}", run="tiny",
                      step=EVERY - 1)
    cli = Cli(store.root)
    for revision in ("r1", "r2"):
        cli("exp", "run", "--weights", str(root / "run" / f"checkpoint-{EVERY - 1}"),
            "--revision", revision, "--name", f"check-{revision}", "--",
            sys.executable, "-c", "print('ok')", code=None)
    return store.root


@pytest.fixture(scope="session")
def demo_cli(demo_root: Path) -> Cli:
    return Cli(demo_root)


@pytest.fixture(scope="session")
def client(demo_root: Path) -> Iterator[TestClient]:
    with TestClient(create_app(demo_root), base_url="http://127.0.0.1",
                    raise_server_exceptions=False) as test_client:
        yield test_client


# How long a test waits for a server to start or answer: long enough for a machine busy
# with other work (a test's speed is never what it checks; bench/ measures that).
WAIT = 120.0


def first_answer(server: subprocess.Popen[str], url: str,
                 headers: dict[str, str] | None = None) -> httpx.Response:
    """The first answer of a `lineage serve` just started, to a GET of `url`: once the
    server says it is ready (`/health` answers; with --workers, every worker is up), the
    answer, each waited for up to WAIT seconds; fails with the server's output if it exits
    first."""
    origin = "/".join(url.split("/")[:3])
    deadline = time.monotonic() + WAIT
    while True:
        try:
            httpx.get(f"{origin}/health", timeout=WAIT).raise_for_status()
            break
        except httpx.ConnectError:
            assert server.poll() is None, server.communicate()
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.2)
    return httpx.get(url, headers=headers, timeout=WAIT)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class LiveServer:
    """The application under a real uvicorn in a thread, on a free loopback port."""

    def __init__(self, root: Path) -> None:
        import uvicorn

        from lineage.serve.tcp import UVICORN_SETTINGS

        self.port = free_port()
        # as `lineage serve` runs it: the same HTTP protocol and event loop
        config = uvicorn.Config(create_app(root), host="127.0.0.1", port=self.port,
                                **UVICORN_SETTINGS)  # type: ignore[arg-type]
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + WAIT
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=WAIT)
