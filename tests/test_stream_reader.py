"""The trainer-side reader: windows rebuilt from the store equal the packed stream."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lineage.api import Store, init_store, open_store
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


@pytest.fixture(scope="module")
def sonnets_stream(tmp_path_factory: pytest.TempPathFactory,
                   example_shards: Path) -> tuple[Store, list[list[int]]]:
    """A stream of about 120 steps of 4 windows of 256 tokens over the sonnets (plain
    JSONL, read by seeking to each record's line) and poems (Parquet), and its windows
    packed here from the shards' own texts."""
    import gzip
    import json

    import pyarrow.parquet as pq

    folder = tmp_path_factory.mktemp("sonnets")
    plain = folder / "sonnets.jsonl"
    plain.write_bytes(gzip.decompress((example_shards / "sonnets.jsonl.gz").read_bytes()))
    init_store(folder / "store")
    store = open_store(folder / "store")
    ingest_corpus(store, [plain, example_shards / "poems.parquet"], corpus="poems")
    build_stream(store, corpus="poems", name="s", seed=9, seq_len=256, batch=4,
                 separator_tokens=2)
    texts = {record["id"]: record["text"].encode("utf-8")
             for record in map(json.loads, plain.read_text().splitlines())}
    texts |= {row["id"]: row["text"].encode("utf-8")
              for row in pq.read_table(example_shards / "poems.parquet").to_pylist()}
    packed = _packed(store, "s", texts, 2)
    return store, [packed[i:i + 256] for i in range(0, len(packed) - 255, 256)]


def _counting_locations(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the documents table lookups of StreamReader (each: how many doc_ids)."""
    from lineage.stream import reader as reader_module

    calls: list[int] = []
    locations = reader_module.document_locations

    def counted(con: object, store: Store, corpus: str, doc_ids: set[str]) -> object:
        calls.append(len(doc_ids))
        return locations(con, store, corpus, doc_ids)

    monkeypatch.setattr(reader_module, "document_locations", counted)
    return calls


def test_a_trainer_reading_in_order_looks_up_documents_once_per_read_ahead(
        sonnets_stream: tuple[Store, list[list[int]]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Steps read in order find their documents' locations in one lookup per
    READ_AHEAD_TOKENS, not one per step (the first step is looked up alone: a reader reads
    ahead once steps come in order), and their windows are the packed stream's."""
    from lineage.stream import reader as reader_module

    store, windows = sonnets_stream
    steps = int(store.stream("s")["steps"])
    assert steps > 8
    calls = _counting_locations(monkeypatch)
    for ahead in (1, 4 * 4 * 256, 1 << 23):
        monkeypatch.setattr(reader_module, "READ_AHEAD_TOKENS", ahead)
        calls.clear()
        reader = StreamReader(store, "s")
        assert [[list(w) for w in reader.windows(step)] for step in range(steps)] == [
            windows[step * 4:step * 4 + 4] for step in range(steps)]
        # At most one lookup per step, or per four steps after the first (fewer where a
        # step's documents all began in the steps before it).
        if ahead == 1:
            assert steps // 2 < len(calls) <= steps
        elif ahead < 1 << 23:
            assert steps // 8 < len(calls) <= 1 + -(-(steps - 1) // 4)
        else:  # the first step, then the rest of the stream
            assert calls[0] < 10 and len(calls) == 2
    reader = StreamReader(store, "s")
    calls.clear()
    for step in (5, 50, 20):  # not in order: each step alone
        reader.windows(step)
    assert len(calls) == 3 and max(calls) < 10


@settings(max_examples=20, deadline=None)
@given(asked=st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from([None, 0, 1])),
                      min_size=1, max_size=12),
       ahead=st.sampled_from([1, 2048, 8192, 1 << 23]),
       most=st.sampled_from([1, 7, 1 << 16]))
def test_windows_do_not_depend_on_what_was_read_before(
        sonnets_stream: tuple[Store, list[list[int]]], asked: list[tuple[int, int | None]],
        ahead: int, most: int) -> None:
    """Any steps and ranks, in any order, with any read-ahead: each step's windows (or a
    rank's half of them) are the packed stream's."""
    from lineage.stream import reader as reader_module

    store, windows = sonnets_stream
    steps = int(store.stream("s")["steps"])
    reader = StreamReader(store, "s")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(reader_module, "READ_AHEAD_TOKENS", ahead)
        patch.setattr(reader_module, "READ_AHEAD_DOCUMENTS", most)
        for pick, rank in asked:
            step = pick % steps
            if rank is None:
                expected, got = windows[step * 4:step * 4 + 4], reader.windows(step)
            else:
                first = step * 4 + rank * 2
                expected = windows[first:first + 2]
                got = reader.windows(step, rank=rank, world_size=2)
            assert [list(w) for w in got] == expected
