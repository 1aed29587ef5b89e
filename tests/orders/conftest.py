"""Shared by the order importers' tests: a store holding a real corpus, and a packer that
lays its documents into windows the way a trainer does (to make orders to import)."""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lineage.api import Store
from lineage.ingest import ingest_corpus

from ..conftest import holding  # noqa: TID252 - the suite's helper, shared with its modules


@pytest.fixture(scope="session")
def sonnets_template(fresh_store: Callable[[Path], Store], example_shards: Path,
                     tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = fresh_store(tmp_path_factory.mktemp("sonnets") / "store")
    ingest_corpus(store, [example_shards / "sonnets.jsonl.gz"], corpus="sonnets")
    return store.root


@pytest.fixture
def sonnets(store: Store, sonnets_template: Path) -> Store:
    """A store with corpus `sonnets` (Shakespeare's sonnets, byte tokens)."""
    return holding(store, sonnets_template)


def documents_of(store: Store, corpus: str) -> list[tuple[str, int]]:
    """(doc_id, n_tokens) of every document, in doc_id order."""
    with store.reader(views=True) as con:
        return [(d, int(n)) for d, n in con.execute(
            "SELECT doc_id, n_tokens FROM documents WHERE corpus = ? ORDER BY doc_id",
            [corpus]).fetchall()]


def pack(documents: list[tuple[str, int]], seq_len: int) -> pa.Table:
    """Documents concatenated in the given order and cut into full windows of `seq_len`
    tokens (the tail that does not fill a window is dropped): the segment rows."""
    rows: dict[str, list[Any]] = {"window": [], "slot": [], "doc_id": [], "doc_offset": [],
                                  "n_tokens": []}
    position = 0
    for doc_id, n_tokens in documents:
        offset = 0
        while offset < n_tokens:
            window, slot = divmod(position, seq_len)
            take = min(n_tokens - offset, seq_len - slot)
            for key, value in zip(rows, (window, slot, doc_id, offset, take), strict=True):
                rows[key].append(value)
            offset += take
            position += take
    full = position // seq_len
    keep = [i for i, w in enumerate(rows["window"]) if w < full]
    return pa.table({key: [values[i] for i in keep] for key, values in rows.items()})


HARNESS = Path(__file__).resolve().parent / "fixtures" / "harness"

# Modules proved against megatron-core itself. Its presence is looked up, not imported:
# importing torch while tests are collected would put it in sys.modules for every other
# test of the session. torch and megatron-core warn about themselves on import
# (deprecated torch.jit APIs, no Transformer Engine or Apex on a CPU machine): not this
# project's warnings.
WITH_MEGATRON = [
    pytest.mark.skipif(
        importlib.util.find_spec("torch") is None or importlib.util.find_spec("megatron") is None,
        reason="the proof needs torch and megatron-core: pip install torch==2.13.0 "
        "megatron-core==0.16.1"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
]


@pytest.fixture(scope="session")
def shakespeare_template(fresh_store: Callable[[Path], Store], example_shards: Path,
                         tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = fresh_store(tmp_path_factory.mktemp("shakespeare") / "store")
    ingest_corpus(store, [example_shards / "sonnets.jsonl.gz",
                          example_shards / "poems.parquet"], corpus="shakespeare", workers=1)
    return store.root


@pytest.fixture
def shakespeare(store: Store, shakespeare_template: Path) -> Store:
    """A store with corpus `shakespeare`: the sonnets and the poems, byte tokens (the
    corpus the harness fixture's shards were tokenized from)."""
    return holding(store, shakespeare_template)


@pytest.fixture
def harness(tmp_path: Path) -> Path:
    """A private copy of the committed harness run (tests/orders/make_harness_run.py)."""
    return Path(shutil.copytree(HARNESS, tmp_path / "harness"))
