"""The near-duplicate layer of the text index: band keys built in the ingest pass."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq

from lineage.api import Store
from lineage.ingest import ingest_corpus
from lineage.store.frames import scan_table
from lineage.text.minhash import BANDS
from tests import near_reference


def _bands(store: Store) -> list[tuple[str, int]]:
    """(doc_id, band_key) of every row of near_bands, sorted."""
    docs = scan_table(store, "text_documents").collect()
    ids = dict(zip(docs["doc"].to_list(), docs["doc_id"].to_list(), strict=True))
    bands = scan_table(store, "near_bands").collect()
    return sorted((ids[d], k) for d, k in zip(bands["doc"].to_list(),
                                               bands["band_key"].to_list(), strict=True))


def test_band_keys_follow_the_spec_and_not_the_worker_count(
    fresh_store: Callable[[Path], Store], tmp_path: Path, example_corpus: Path,
    example_shards: Path,
) -> None:
    inputs = [example_corpus, example_shards / "sonnets.jsonl.gz"]
    one, two = fresh_store(tmp_path / "one"), fresh_store(tmp_path / "two")
    ingest_corpus(one, inputs, corpus="c", workers=1)
    ingest_corpus(two, inputs, corpus="c", workers=2)
    rows = _bands(one)
    assert rows == _bands(two)
    docs = scan_table(one, "text_documents").collect()
    assert len(rows) == BANDS * docs.height > 0
    # The stored table is sorted by band key, as a lookup by key expects.
    for part in sorted((one.root / "tables" / "near_bands").rglob("*.parquet")):
        keys = pq.read_table(part, columns=["band_key"])["band_key"].to_pylist()
        assert keys == sorted(keys)
    # Each file's keys are the reference's, from its bytes alone.
    by_doc: dict[str, list[int]] = {}
    for doc_id, key in rows:
        by_doc.setdefault(doc_id, []).append(key)
    checked = 0
    for path in sorted(example_corpus.rglob("*.txt"))[:12]:
        doc_id = path.relative_to(example_corpus).as_posix()
        sig = near_reference.signature(path.read_text("utf-8"))
        if sig is None or doc_id not in by_doc:
            continue
        assert sorted(near_reference.band_keys(sig)) == by_doc[doc_id]
        checked += 1
    assert checked >= 5


def test_no_fingerprints_means_no_near_layer(
    fresh_store: Callable[[Path], Store], tmp_path: Path, example_shards: Path,
) -> None:
    store = fresh_store(tmp_path / "plain")
    ingest_corpus(store, [example_shards / "sonnets.jsonl.gz"], corpus="c",
                  fingerprints=False)
    assert scan_table(store, "near_bands").collect().height == 0
