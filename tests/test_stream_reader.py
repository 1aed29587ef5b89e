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


def _tokenizer_packed(store: Store, stream: str, ids: dict[str, list[int]], separator: int,
                      k: int) -> list[int]:
    rows = store.sql(f"SELECT doc_id FROM occurrences WHERE stream = '{stream}' "
                     "ORDER BY ordinal").rows
    return [token for (doc_id,) in rows for token in ids[doc_id] + [separator] * k]


def test_windows_of_a_tokenizer_json_corpus_are_the_tokenizers_own_ids(
    store: Store, example_shards: Path, tokenizer_json: Path
) -> None:
    import pyarrow.parquet as pq
    import tokenizers

    ingest_corpus(store, [example_shards / "poems.parquet"], corpus="p",
                  tokenizer=str(tokenizer_json))
    build_stream(store, corpus="p", name="s", seed=1, seq_len=64, batch=2,
                 separator_tokens=2)
    own = tokenizers.Tokenizer.from_file(str(tokenizer_json))
    ids = {row["id"]: own.encode(row["text"], add_special_tokens=False).ids
           for row in pq.read_table(example_shards / "poems.parquet").to_pylist()}
    separator = own.token_to_id("[UNK]")
    packed = _tokenizer_packed(store, "s", ids, separator, 2)
    reader = StreamReader(store, "s", tokenizer=tokenizer_json.parent, separator="[UNK]")
    steps = reader.info["steps"]
    for step in (0, steps // 2, steps - 1):
        windows = reader.windows(step)
        assert all(w.typecode == "H" for w in windows)
        assert [list(w) for w in windows] == [
            packed[(step * 2 + i) * 64:(step * 2 + i + 1) * 64] for i in range(2)]
    halves = [reader.windows(1, rank=r, world_size=2) for r in (0, 1)]
    assert [list(w) for w in halves[0] + halves[1]] == [list(w) for w in reader.windows(1)]
    by_id = StreamReader(store, "s", tokenizer=tokenizer_json, separator=separator)
    assert [list(w) for w in by_id.windows(1)] == [list(w) for w in reader.windows(1)]


def test_ids_past_16_bits_come_as_32_bit_arrays(
    store: Store, tmp_path: Path
) -> None:
    """A word-level vocabulary of 70,000 entries (written by the `tokenizers` library)
    whose words sit at ids past 65,535."""
    import json

    import tokenizers
    from tokenizers import models, pre_tokenizers

    words = "the quick brown fox jumps over a lazy dog and then sleeps".split()
    vocab = {f"filler{i}": i for i in range(70_000 - len(words) - 1)}
    vocab |= {word: len(vocab) + i for i, word in enumerate(words)}
    vocab["[EOT]"] = len(vocab)
    tok = tokenizers.Tokenizer(models.WordLevel(vocab, unk_token="[EOT]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    shard = tmp_path / "docs.jsonl"
    texts = {"a": "the quick brown fox", "b": "jumps over a lazy dog",
             "c": "and then sleeps"}
    shard.write_text("".join(json.dumps({"id": k, "text": v}) + "\n"
                             for k, v in texts.items()))
    ingest_corpus(store, [shard], corpus="w", tokenizer=str(tmp_path / "tokenizer.json"))
    build_stream(store, corpus="w", name="s", seed=3, seq_len=8, batch=1)
    eot = vocab["[EOT]"]
    ids = {k: [vocab[w] for w in v.split()] for k, v in texts.items()}
    packed = _tokenizer_packed(store, "s", ids, eot, 1)
    reader = StreamReader(store, "s", tokenizer=tmp_path / "tokenizer.json", separator="[EOT]")
    windows = [reader.windows(step) for step in range(reader.info["steps"])]
    assert {w.typecode for step in windows for w in step} == {"I"}
    flat = [token for step in windows for w in step for token in w]
    assert len(flat) >= 8 and flat == packed[:len(flat)] and max(flat) > 65_535


def test_tokens_need_the_corpus_tokenizer_and_a_separator(
    store: Store, example_shards: Path, tokenizer_json: Path, tmp_path: Path
) -> None:
    ingest_corpus(store, [example_shards / "poems.parquet"], corpus="p",
                  tokenizer=str(tokenizer_json))
    build_stream(store, corpus="p", name="s", seed=1, seq_len=64, batch=1)
    reader = StreamReader(store, "s")
    assert reader.segments(0)
    with pytest.raises(UsageError, match=r"give StreamReader\(\.\.\., tokenizer=\)"):
        reader.windows(0)
    with pytest.raises(UsageError, match="needs the separator's token id"):
        StreamReader(store, "s", tokenizer=tokenizer_json).windows(0)
    with pytest.raises(UsageError, match="'<eos>' is not a token of the tokenizer"):
        StreamReader(store, "s", tokenizer=tokenizer_json, separator="<eos>").windows(0)
    other = tmp_path / "other" / "tokenizer.json"
    other.parent.mkdir()
    other.write_text(tokenizer_json.read_text().replace("[UNK]", "[UNKNOWN]"))
    with pytest.raises(UsageError, match="the corpus was counted with tokenizer.json:blake3"):
        StreamReader(store, "s", tokenizer=other, separator=0)
    ingest_corpus(store, [example_shards / "poems.parquet"], corpus="b")
    build_stream(store, corpus="b", name="bytes", seed=1, seq_len=64, batch=1)
    with pytest.raises(UsageError, match="its windows need no tokenizer.json"):
        StreamReader(store, "bytes", tokenizer=tokenizer_json)
    with pytest.raises(UsageError, match="token id from 0 to 65535"):
        StreamReader(store, "bytes", separator="[UNK]").windows(0)


def test_tokens_counted_by_the_input_are_not_in_the_store(
    store: Store, tmp_path: Path
) -> None:
    import json

    shard = tmp_path / "counted.jsonl"
    shard.write_text(json.dumps({"id": "a", "text": "some words", "token_count": 3}) + "\n")
    ingest_corpus(store, [shard], corpus="c", tokenizer="input")
    build_stream(store, corpus="c", name="s", seed=1, seq_len=4, batch=1)
    with pytest.raises(UsageError, match="input:token_count: its tokens are not known"):
        StreamReader(store, "s").windows(0)


@pytest.fixture(scope="module")
def sonnets_stream(tmp_path_factory: pytest.TempPathFactory,
                   example_shards: Path) -> tuple[Store, dict[str, list[list[int]]]]:
    """A stream `s` of about 120 steps of 4 windows of 256 tokens over the sonnets (plain
    JSONL, read by seeking to each record's line) and poems (Parquet), and its windows
    packed here from the shards' own texts; and a stream `g` over the gzipped sonnets
    (read by scanning the shard; its copy is in the store's folder) and the poems, and
    its windows; by stream name."""
    import gzip
    import json

    import pyarrow.parquet as pq

    folder = tmp_path_factory.mktemp("sonnets")
    plain = folder / "sonnets.jsonl"
    plain.write_bytes(gzip.decompress((example_shards / "sonnets.jsonl.gz").read_bytes()))
    shutil.copy(example_shards / "sonnets.jsonl.gz", folder / "sonnets.jsonl.gz")
    init_store(folder / "store")
    store = open_store(folder / "store")
    ingest_corpus(store, [plain, example_shards / "poems.parquet"], corpus="poems")
    ingest_corpus(store, [folder / "sonnets.jsonl.gz", example_shards / "poems.parquet"],
                  corpus="gz")
    for corpus, name in (("poems", "s"), ("gz", "g")):
        build_stream(store, corpus=corpus, name=name, seed=9, seq_len=256, batch=4,
                     separator_tokens=2)
    texts = {record["id"]: record["text"].encode("utf-8")
             for record in map(json.loads, plain.read_text().splitlines())}
    texts |= {row["id"]: row["text"].encode("utf-8")
              for row in pq.read_table(example_shards / "poems.parquet").to_pylist()}
    windows = {}
    for name in ("s", "g"):
        packed = _packed(store, name, texts, 2)
        windows[name] = [packed[i:i + 256] for i in range(0, len(packed) - 255, 256)]
    return store, windows


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
        sonnets_stream: tuple[Store, dict[str, list[list[int]]]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Steps read in order find their documents' locations in one lookup per
    READ_AHEAD_TOKENS, not one per step (the first step is looked up alone: a reader reads
    ahead once steps come in order), and their windows are the packed stream's."""
    from lineage.stream import reader as reader_module

    store, packed = sonnets_stream
    windows = packed["s"]
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


@settings(max_examples=25, deadline=None)
@given(runs=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 6),
                               st.sampled_from([None, 0, 1])), min_size=1, max_size=4),
       name=st.sampled_from(["s", "g"]),
       ahead=st.sampled_from([1, 2048, 8192, 1 << 23]),
       most=st.sampled_from([1, 7, 1 << 16]))
def test_windows_do_not_depend_on_what_was_read_before(
        sonnets_stream: tuple[Store, dict[str, list[list[int]]]],
        runs: list[tuple[int, int, int | None]], name: str, ahead: int, most: int) -> None:
    """Runs of steps in order (each read ahead of), from anywhere, for the whole step or
    one rank, with any read-ahead: each step's windows (or a rank's half of them) are
    the packed stream's."""
    from lineage.stream import reader as reader_module

    store, packed = sonnets_stream
    windows = packed[name]
    steps = int(store.stream(name)["steps"])
    reader = StreamReader(store, name)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(reader_module, "READ_AHEAD_TOKENS", ahead)
        patch.setattr(reader_module, "READ_AHEAD_DOCUMENTS", most)
        for pick, length, rank in runs:
            for step in range(pick % steps, min(steps, pick % steps + length)):
                if rank is None:
                    expected, got = windows[step * 4:step * 4 + 4], reader.windows(step)
                else:
                    first = step * 4 + rank * 2
                    expected = windows[first:first + 2]
                    got = reader.windows(step, rank=rank, world_size=2)
                assert [list(w) for w in got] == expected


def test_a_rank_reads_ahead_only_its_own_documents(
        sonnets_stream: tuple[Store, dict[str, list[list[int]]]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A reader for one rank of two looks ahead at the documents of its own windows."""
    from lineage.stream import reader as reader_module

    store, packed = sonnets_stream
    calls = _counting_locations(monkeypatch)
    monkeypatch.setattr(reader_module, "READ_AHEAD_TOKENS", 40 * 4 * 256)  # 40 steps
    whole, halves = StreamReader(store, "s"), [StreamReader(store, "s") for _ in range(2)]
    looked_up = []
    for reader, split in ((whole, {}), *((half, {"rank": r, "world_size": 2})
                                         for r, half in enumerate(halves))):
        calls.clear()
        for step in (10, 11):
            reader.windows(step, **split)
        looked_up.append(calls[-1])
    ranks = [{s.doc_id for step in range(11, 51) for s in whole.segments(step, rank=r,
                                                                          world_size=2)}
             for r in (0, 1)]
    everything = ranks[0] | ranks[1]
    # Each lookup: the step's own documents and those of the steps ahead (for a rank, of
    # its windows only).
    assert looked_up[0] == len(everything)
    assert looked_up[1:] == [len(ranks[0]), len(ranks[1])] and max(looked_up[1:]) < len(everything)


def test_a_compressed_shard_is_scanned_once_per_read_ahead(
        sonnets_stream: tuple[Store, dict[str, list[list[int]]]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A gzipped shard has no recorded line starts: each read of its records scans it.
    Steps read in order scan it once for all the steps read ahead, not once per step."""
    from lineage.corpora import doc_text
    from lineage.stream import reader as reader_module

    store, packed = sonnets_stream
    windows = packed["g"]
    steps = int(store.stream("g")["steps"])
    scans: list[int] = []
    scan = doc_text._jsonl_records_text

    def counted(con: object, origin: str, records: list[int]) -> list[str]:
        scans.append(len(records))
        return scan(con, origin, records)

    monkeypatch.setattr(doc_text, "_jsonl_records_text", counted)
    monkeypatch.setattr(reader_module, "READ_AHEAD_TOKENS", 16 * 4 * 256)  # 16 steps
    reader = StreamReader(store, "g")
    assert [[list(w) for w in reader.windows(step)] for step in range(steps)] == [
        windows[step * 4:step * 4 + 4] for step in range(steps)]
    # The first step alone, then one scan per 16 steps at most.
    assert len(scans) <= 2 + steps // 16 < steps // 4
    scans.clear()
    sonnets = {row[0] for row in store.sql("SELECT doc_id FROM documents WHERE corpus = 'gz' "
                                            "AND origin LIKE '%.gz'", max_rows=None).rows}
    alone = StreamReader(store, "g")
    asked = (40, 10, 70, 25)
    for step in asked:  # not in order: a scan for each step that holds a sonnet
        alone.windows(step)
    assert len(scans) == sum(1 for step in asked
                             if sonnets & {s.doc_id for s in alone.segments(step)}) > 1


def test_a_changed_record_ahead_stops_only_the_step_that_needs_it(
        sonnets_stream: tuple[Store, dict[str, list[list[int]]]]) -> None:
    """A record of the gzipped shard changed after ingest: the steps read in order before
    the one that holds it read as before, and that one is refused."""
    import gzip
    import json

    from lineage.corpora import doc_text

    store, packed = sonnets_stream
    windows = packed["g"]
    shard = Path(store.root).parent / "sonnets.jsonl.gz"
    original = shard.read_bytes()
    lines = gzip.decompress(original).decode("utf-8").splitlines()
    reader = StreamReader(store, "g")
    docs = [{s.doc_id for s in reader.segments(step)} for step in range(60)]
    records = {json.loads(line)["id"]: n for n, line in enumerate(lines)}
    # Steps p-1 and p, p with a sonnet p-1 lacks, and a later step with a sonnet neither has.
    pair, later, victim = next(
        (p, q, doc) for p in range(20, 40) if (docs[p] - docs[p - 1]) & records.keys()
        for q in range(p + 2, 60) for doc in sorted(docs[q] & records.keys())
        if doc not in docs[p] | docs[p - 1])
    record = json.loads(lines[records[victim]])
    record["text"] = record["text"].replace("e", "E")
    lines[records[victim]] = json.dumps(record)
    try:
        shard.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode("utf-8")))
        reader = StreamReader(store, "g")
        scans: list[int] = []
        scan = doc_text._jsonl_records_text
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(doc_text, "_jsonl_records_text",
                          lambda con, origin, records: scans.append(len(records))
                          or scan(con, origin, records))
            for step in (pair - 1, pair):
                assert [list(w) for w in reader.windows(step)] == windows[step * 4:step * 4 + 4]
        # Step `pair` scanned the shard for the steps ahead (which met the changed record),
        # then for its own records.
        own = len(docs[pair] & records.keys())
        assert scans[-1] == own and scans[-2] > own
        with pytest.raises(StoreError, match=f"record {records[victim] + 1}: bytes of "
                                             f"'{victim}' no longer match"):
            reader.windows(later)
    finally:
        shard.write_bytes(original)
