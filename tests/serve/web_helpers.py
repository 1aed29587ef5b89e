"""The explorer's test store and server: the demo's records built with the real writers
(examples/demo.sh in miniature), and the explorer served by uvicorn on a free port."""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import uvicorn
from starlette.applications import Starlette

import lineage.exp
from lineage.api import Store, init_store, open_store
from lineage.ingest import ingest_corpus
from lineage.ingest.checkpoint import ingest_checkpoint
from lineage.ingest.steps import ingest_steps
from lineage.serve import web
from lineage.stream.build import build_stream

from ..conftest import EXAMPLES, load_tiny_run  # noqa: TID252 (the suite's shared helpers)

DEMO_LICENSES = ["shakespeare=LicenseRef-PublicDomain", "python-stdlib=PSF-2.0",
                 "debian-copyright=NOASSERTION"]  # as examples/demo.sh gives them
RUN_STEPS = 200
# doc_ids a page must escape and a link must encode (the texts are the first lines of
# three Debian copyright files)
ODD_IDS = ['<img src=x onerror="alert(1)">', "what? #1 & 50% off/here", "  spaced  ",
           "ünïcødé/日本語"]


def build_demo_store(root: Path) -> Store:
    """The demo's corpora (with text indexes), stream `main`, the 200-step run `tiny` with
    its checkpoint after step 99, and two experiments on its last checkpoint; beside them
    `copyrights` (the Debian copyright files again, without a text index, in no stream)
    and `odd` (JSONL records whose ids need escaping), again as `notes.json`."""
    init_store(root / "store")
    store = open_store(root / "store")
    ingest_corpus(store, [EXAMPLES / "corpus"], corpus="example", license=DEMO_LICENSES)
    ingest_corpus(store, [EXAMPLES / "shards" / "sonnets.jsonl.gz",
                          EXAMPLES / "shards" / "poems.parquet"],
                  corpus="poems", license="LicenseRef-PublicDomain")
    ingest_corpus(store, [EXAMPLES / "corpus" / "debian-copyright"], corpus="copyrights",
                  license="NOASSERTION", fingerprints=False)
    ingest_corpus(store, [write_odd_records(root / "odd.jsonl")], corpus="odd",
                  license="NOASSERTION")
    ingest_corpus(store, [root / "odd.jsonl"], corpus="notes.json", license="NOASSERTION",
                  fingerprints=False)
    build_stream(store, corpus="example", name="main", seed=42, seq_len=1024, batch=4)
    out = root / "run"
    load_tiny_run().train(store, "main", steps=RUN_STEPS, out=out)
    ingest_steps(store, out / "steps.jsonl", run="tiny", stream="main", world_size=2)
    ingest_checkpoint(store, out / "checkpoint-99", run="tiny", step=99)
    for name, code in (("local-check", 0), ("failing-check", 3)):
        lineage.exp.run(store, [sys.executable, "-c", f"import sys; sys.exit({code})"],
                        weights=out / "checkpoint-199", revision=f"tiny@199-{name}",
                        name=name, echo=False)
    return store


def write_odd_records(path: Path) -> Path:
    texts = sorted((EXAMPLES / "corpus" / "debian-copyright").glob("*.txt"))
    with path.open("w", encoding="utf-8") as f:
        for doc_id, text in zip(ODD_IDS, texts, strict=False):
            first = text.read_text(encoding="utf-8").splitlines()[0]
            f.write(json.dumps({"id": doc_id, "text": f"{first}\n{doc_id}\n"}) + "\n")
    return path


def explorer_app(store_root: Path) -> Starlette:
    """The explorer's routes alone, as the server mounts them."""
    app = Starlette(routes=web.routes())
    app.state.store_root = store_root
    app.state.lookup_copies = None
    return app


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def serving(app: Starlette) -> Iterator[str]:
    """`app` served by uvicorn in a thread on a free loopback port; yields its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 120  # a machine busy with other work is slow to start
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the explorer's server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=120)


_BUILT: dict[str, Path] = {}


def demo_store_root(factory: pytest.TempPathFactory) -> Path:
    """The store of `build_demo_store`, built once per test session (do not write to it)."""
    if "store" not in _BUILT:
        root = factory.mktemp("explorer")
        build_demo_store(root)
        _BUILT["store"] = root / "store"
    return _BUILT["store"]
