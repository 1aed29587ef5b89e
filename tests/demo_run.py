"""The demo's records (examples/demo.sh), built once per test session: the corpus of
examples/corpus with the demo's licences, stream `main`, 200 steps of the tiny run (its
log and checkpoints in `run/`) and that log ingested as run `tiny`. Training is most of
the cost, and it is deterministic, so every module that needs these records copies one
build instead of training again."""

from __future__ import annotations

import shutil
from pathlib import Path

from lineage.api import Store, init_store, open_store
from lineage.ingest import ingest_corpus
from lineage.ingest.steps import ingest_steps
from lineage.stream.build import build_stream

from .conftest import EXAMPLES, load_tiny_run

DEMO_LICENSES = ["shakespeare=LicenseRef-PublicDomain", "python-stdlib=PSF-2.0",
                 "debian-copyright=NOASSERTION"]  # as examples/demo.sh ingests them


def build_demo_run(root: Path) -> Path:
    """`root/store` and `root/run` as the demo makes them (no checkpoint ingested)."""
    init_store(root / "store")
    store = open_store(root / "store")
    ingest_corpus(store, [EXAMPLES / "corpus"], corpus="example", license=DEMO_LICENSES,
                  fingerprints=False)
    build_stream(store, corpus="example", name="main", seed=42, seq_len=1024, batch=4)
    load_tiny_run().train(store, "main", steps=200, out=root / "run")
    ingest_steps(store, root / "run" / "steps.jsonl", run="tiny", stream="main", world_size=2)
    return root


def copy_demo_run(base: Path, to: Path) -> Store:
    """A private copy of a build (store and run folder) at `to`; its store, opened."""
    shutil.copytree(base, to)
    return open_store(to / "store")
