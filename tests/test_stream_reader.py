"""The trainer-side reader: windows rebuilt from the store equal the packed stream."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from lineage.api import Store
from lineage.errors import StoreError, UsageError
from lineage.ingest import ingest_corpus
from lineage.stream.build import build_stream
from lineage.stream.reader import SEPARATOR, StreamReader


def _packed(store: Store, stream: str, texts: dict[str, bytes], separator: int) -> list[int]:
    rows = store.sql(f"SELECT doc_id FROM occurrences WHERE stream = '{stream}' "
                     "ORDER BY ordinal").rows
    tokens: list[int] = []
    for (doc_id,) in rows:
        tokens += list(texts[doc_id]) + [SEPARATOR] * separator
    return tokens


def test_windows_of_text_shards_match_the_packed_stream(
    store: Store, example_shards: Path
) -> None:
    import gzip
    import json

    import pyarrow.parquet as pq

    ingest_corpus(store, [example_shards / "sonnets.jsonl.gz", example_shards / "poems.parquet"],
                  corpus="poems")
    build_stream(store, corpus="poems", name="s", seed=9, seq_len=256, batch=4,
                 separator_tokens=2)
    texts = {}
    for line in gzip.decompress((example_shards / "sonnets.jsonl.gz").read_bytes()).splitlines():
        record = json.loads(line)
        texts[record["id"]] = record["text"].encode("utf-8")
    for row in pq.read_table(example_shards / "poems.parquet").to_pylist():
        texts[row["id"]] = row["text"].encode("utf-8")
    packed = _packed(store, "s", texts, 2)
    reader = StreamReader(store, "s")
    for step in (0, 5, reader.info["steps"] - 1):
        windows = reader.windows(step)
        assert [list(w) for w in windows] == [
            packed[(step * 4 + i) * 256:(step * 4 + i + 1) * 256] for i in range(4)]
    halves = [reader.windows(5, rank=r, world_size=2) for r in (0, 1)]
    assert [list(w) for w in halves[0] + halves[1]] == [list(w) for w in reader.windows(5)]


def test_windows_of_a_directory_corpus_and_a_changed_file(
    store: Store, example_corpus: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "corpus"
    shutil.copytree(example_corpus / "debian-copyright", copy / "debian")
    ingest_corpus(store, [copy], corpus="deb")
    build_stream(store, corpus="deb", name="s", seed=1, seq_len=1024, batch=2)
    reader = StreamReader(store, "s")
    texts = {p.relative_to(copy).as_posix(): p.read_bytes() for p in copy.rglob("*.txt")}
    packed = _packed(store, "s", texts, 1)
    assert [list(w) for w in reader.windows(3)] == [packed[6 * 1024:7 * 1024],
                                                    packed[7 * 1024:8 * 1024]]
    victim = reader.segments(3)[0].doc_id
    (copy / victim).write_bytes(b"edited after ingest")
    with pytest.raises(StoreError, match="no longer match their content hash"):
        reader.windows(3)


def test_tokens_need_the_byte_tokenizer(
    store: Store, example_shards: Path, tokenizer_json: Path
) -> None:
    ingest_corpus(store, [example_shards / "poems.parquet"], corpus="p",
                  tokenizer=str(tokenizer_json))
    build_stream(store, corpus="p", name="s", seed=1, seq_len=64, batch=1)
    reader = StreamReader(store, "s")
    assert reader.segments(0)
    with pytest.raises(UsageError, match="byte-tokenized corpora only"):
        reader.windows(0)
