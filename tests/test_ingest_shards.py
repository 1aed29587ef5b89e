"""JSONL (plain, gzip, zstd) and Parquet text shards, on real text, and their bad forms."""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import blake3
import pyarrow.parquet as pq
import pytest

from lineage.api import Store
from lineage.errors import InputError, UsageError
from lineage.ingest import ingest_corpus
from lineage.ingest.input_rules import MAX_LINE_BYTES, bounded_lines


def _sonnets(example_shards: Path) -> list[dict[str, object]]:
    with gzip.open(example_shards / "sonnets.jsonl.gz", "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def test_dolma_style_jsonl_shard(store: Store, example_shards: Path) -> None:
    records = _sonnets(example_shards)
    result = ingest_corpus(store, [example_shards / "sonnets.jsonl.gz"], corpus="sonnets")
    assert result.documents == len(records) == 154
    rows = store.sql(
        "SELECT doc_id, source, uri, content_hash, n_bytes, metadata FROM documents"
    ).rows
    by_id = {row[0]: row[1:] for row in rows}
    for record in records:
        source, uri, digest, size, metadata = by_id[str(record["id"])]
        text = str(record["text"]).encode("utf-8")
        assert digest == blake3.blake3(text).hexdigest()
        assert size == len(text)
        assert source == record["source"] and uri == record["url"]
        assert json.loads(metadata) == record["metadata"]


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz", ".jsonl.zst"])
def test_compression_does_not_change_the_manifest(
    store: Store, example_shards: Path, tmp_path: Path, make_jsonl: Callable[..., Path],
    suffix: str,
) -> None:
    records = _sonnets(example_shards)
    shard = make_jsonl(tmp_path / f"sonnets{suffix}", records)
    reference = ingest_corpus(store, [example_shards / "sonnets.jsonl.gz"], corpus="ref")
    again = ingest_corpus(store, [shard], corpus="again")
    assert again.manifest_hash == reference.manifest_hash


def test_fineweb_style_parquet_shard(store: Store, example_shards: Path) -> None:
    table = pq.read_table(example_shards / "poems.parquet")
    result = ingest_corpus(store, [example_shards / "poems.parquet"], corpus="poems")
    assert result.documents == table.num_rows
    assert [s["source"] for s in result.sources] == ["poems"]  # defaults to the corpus name
    stored = dict(store.sql("SELECT doc_id, content_hash FROM documents").rows)
    for row in table.to_pylist():
        assert stored[row["id"]] == blake3.blake3(row["text"].encode("utf-8")).hexdigest()


def test_missing_ids_are_named_after_shard_and_record(
    store: Store, tmp_path: Path, make_jsonl: Callable[..., Path],
    make_parquet: Callable[..., Path],
) -> None:
    make_jsonl(tmp_path / "a.jsonl", [{"text": "first"}, {"text": ""}, {"text": "third"}])
    make_parquet(tmp_path / "b.parquet", {"text": ["x", "y"], "url": ["u1", "u2"]})
    result = ingest_corpus(store, [tmp_path / "a.jsonl", tmp_path / "b.parquet"], corpus="c")
    ids = [row[0] for row in store.sql("SELECT doc_id FROM documents ORDER BY doc_id").rows]
    assert ids == ["a.jsonl#1", "a.jsonl#3", "b.parquet#1", "b.parquet#2"]
    assert result.dropped_empty == 1


def test_token_count_column_with_tokenizer_input(
    store: Store, tmp_path: Path, make_parquet: Callable[..., Path]
) -> None:
    make_parquet(tmp_path / "s.parquet", {"text": ["aa", "bbb"], "id": [1, 2],
                                          "token_count": [7, 9]})
    result = ingest_corpus(store, [tmp_path / "s.parquet"], corpus="c", tokenizer="input")
    assert (result.tokens, result.bytes, result.tokenizer) == (16, 5, "input:token_count")
    make_parquet(tmp_path / "n.parquet", {"text": ["aa"]})
    with pytest.raises(InputError, match="token_count"):
        ingest_corpus(store, [tmp_path / "n.parquet"], corpus="d", tokenizer="input")


@pytest.mark.parametrize("name", ["s.jsonl", "s.jsonl.gz", "s.jsonl.zst"])
def test_jsonl_token_counts_are_read_with_tokenizer_input(
    store: Store, tmp_path: Path, make_jsonl: Callable[..., Path],
    make_parquet: Callable[..., Path], name: str,
) -> None:
    """The same records as JSONL and as Parquet give the same counts and manifest."""
    records = [{"text": "aa", "id": 1, "token_count": 7},
               {"text": "bbb", "id": 2, "token_count": 9}]
    make_jsonl(tmp_path / name, records)
    make_parquet(tmp_path / "s.parquet", {k: [r[k] for r in records] for k in records[0]})
    jsonl = ingest_corpus(store, [tmp_path / name], corpus="j", tokenizer="input", source="s")
    parquet = ingest_corpus(store, [tmp_path / "s.parquet"], corpus="p", tokenizer="input",
                            source="s")
    assert (jsonl.tokens, jsonl.bytes, jsonl.tokenizer) == (16, 5, "input:token_count")
    assert dict(store.sql("SELECT doc_id, n_tokens FROM documents WHERE corpus = 'j'").rows) \
        == {"1": 7, "2": 9}
    assert jsonl.manifest_hash == parquet.manifest_hash


def test_jsonl_token_counts_are_checked_only_when_read(
    store: Store, tmp_path: Path, make_jsonl: Callable[..., Path]
) -> None:
    make_jsonl(tmp_path / "s.jsonl", [{"text": "aa", "token_count": "7"}])
    with pytest.raises(InputError, match=r"line 1: value-type: `token_count` must be an "
                                         r"integer, not a string"):
        ingest_corpus(store, [tmp_path / "s.jsonl"], corpus="c", tokenizer="input")
    assert ingest_corpus(store, [tmp_path / "s.jsonl"], corpus="c").tokens == 2  # bytes
    make_jsonl(tmp_path / "m.jsonl", [{"text": "aa", "token_count": 3}, {"text": "b"}])
    with pytest.raises(InputError, match="record 2: --tokenizer input needs a non-negative"):
        ingest_corpus(store, [tmp_path / "m.jsonl"], corpus="d", tokenizer="input")


def test_shards_in_a_directory_with_format(
    store: Store, tmp_path: Path, make_jsonl: Callable[..., Path]
) -> None:
    (tmp_path / "d" / "sub").mkdir(parents=True)
    make_jsonl(tmp_path / "d" / "sub" / "x.jsonl.gz", [{"text": "one"}])
    make_jsonl(tmp_path / "d" / "y.jsonl", [{"text": "two"}])
    (tmp_path / "d" / "README").write_text("not a shard")
    ingest_corpus(store, [tmp_path / "d"], corpus="c", fmt="jsonl")
    ids = sorted(r[0] for r in store.sql("SELECT doc_id FROM documents").rows)
    assert ids == ["sub/x.jsonl.gz#1", "y.jsonl#1"]


def test_shard_order_does_not_change_the_manifest(
    store: Store, tmp_path: Path, make_jsonl: Callable[..., Path]
) -> None:
    a = make_jsonl(tmp_path / "a.jsonl", [{"id": f"a{i}", "text": f"t{i}"} for i in range(50)])
    b = make_jsonl(tmp_path / "b.jsonl", [{"id": f"b{i}", "text": f"u{i}"} for i in range(50)])
    one = ingest_corpus(store, [a, b], corpus="one", source="web", workers=2)
    two = ingest_corpus(store, [b, a], corpus="two", source="web", workers=1)
    assert one.manifest_hash == two.manifest_hash


BAD_LINES = [
    (b'{"text": "ok"}\n{"text": "broken"\n', "line 2: malformed JSON"),
    (b'{"text": "ok"}\n{"text": "caf\xe9"}\n', "line 2: invalid UTF-8"),
    (b'{"text": "ok"}\n{"txt": "no text"}\n', "record has no `text` string"),
    (b'{"text": "ok"}\n[1, 2]\n', "line 2: expected a JSON object"),
    (b'{"text": "ok"}\n{"text": "\\ud800"}\n', "line 2: `text` holds an unpaired surrogate"),
]


@pytest.mark.parametrize(("content", "message"), BAD_LINES)
def test_bad_jsonl_names_file_and_line(
    store: Store, tmp_path: Path, content: bytes, message: str
) -> None:
    shard = tmp_path / "bad.jsonl"
    shard.write_bytes(content)
    with pytest.raises(InputError) as caught:
        ingest_corpus(store, [shard], corpus="c")
    assert str(shard) in str(caught.value) and message in str(caught.value)
    assert store.corpora() == []


def test_duplicate_ids_across_shards_name_both_places(
    store: Store, tmp_path: Path, make_jsonl: Callable[..., Path]
) -> None:
    make_jsonl(tmp_path / "a.jsonl", [{"id": "x", "text": "1"}, {"id": "dup", "text": "2"}])
    make_jsonl(tmp_path / "b.jsonl", [{"id": "dup", "text": "3"}])
    with pytest.raises(InputError) as caught:
        ingest_corpus(store, [tmp_path / "a.jsonl", tmp_path / "b.jsonl"], corpus="c")
    message = str(caught.value)
    assert "duplicate doc_id 'dup'" in message
    assert "a.jsonl:record 2" in message and "b.jsonl:record 1" in message


def test_parquet_without_text_column_is_refused(
    store: Store, tmp_path: Path, make_parquet: Callable[..., Path]
) -> None:
    make_parquet(tmp_path / "t.parquet", {"body": ["x"]})
    with pytest.raises(InputError, match="no `text` column"):
        ingest_corpus(store, [tmp_path / "t.parquet"], corpus="c")
    (tmp_path / "junk.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(InputError, match="junk.parquet"):
        ingest_corpus(store, [tmp_path / "junk.parquet"], corpus="c")


def test_mixing_manifests_and_raw_text_is_refused(
    store: Store, tmp_path: Path, make_jsonl: Callable[..., Path]
) -> None:
    make_jsonl(tmp_path / "raw.jsonl", [{"text": "x"}])
    make_jsonl(tmp_path / "m.jsonl", [{"doc_id": "a", "source": "s", "uri": None, "n_bytes": 1,
                                       "n_tokens": 1, "content_hash": "0" * 64}])
    with pytest.raises(UsageError, match="not both"):
        ingest_corpus(store, [tmp_path / "raw.jsonl", tmp_path / "m.jsonl"], corpus="c")


def test_real_tokenizer_on_jsonl_in_worker_processes(
    store: Store, tmp_path: Path, make_jsonl: Callable[..., Path], tokenizer_json: Path,
    example_shards: Path,
) -> None:
    import tokenizers

    records = _sonnets(example_shards)
    shards = [make_jsonl(tmp_path / f"s{i}.jsonl", records[i::3]) for i in range(3)]
    result = ingest_corpus(store, shards, corpus="c", tokenizer=str(tokenizer_json), workers=2)
    tok = tokenizers.Tokenizer.from_file(str(tokenizer_json))
    expected = sum(len(tok.encode(str(r["text"]), add_special_tokens=False).ids)
                   for r in records)
    assert result.tokens == expected and result.documents == 154
    assert result.tokenizer.startswith("tokenizer.json:blake3:")


class _Endless(io.RawIOBase):
    """A stream of one line that never ends, counting the bytes read from it."""

    def __init__(self) -> None:
        self.given = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        buffer[:] = b"x" * len(buffer)
        self.given += len(buffer)
        return len(buffer)


def test_a_huge_line_is_refused_without_reading_it_whole() -> None:
    endless = _Endless()
    with pytest.raises(InputError, match="line 1: line-size: a line longer than 16 MiB"):
        next(bounded_lines(io.BufferedReader(endless), "endless.jsonl"))
    assert MAX_LINE_BYTES < endless.given <= MAX_LINE_BYTES + (1 << 20)


def test_a_line_of_16_mib_is_a_record_and_one_byte_more_is_refused(
    store: Store, tmp_path: Path
) -> None:
    """The edge of the rule: what DuckDB reads as one record is read, nothing longer."""
    frame = len(b'{"text": ""}')
    for name, size in (("edge.jsonl", MAX_LINE_BYTES), ("over.jsonl", MAX_LINE_BYTES + 1)):
        (tmp_path / name).write_bytes(b'{"text": "' + b"y" * (size - frame) + b'"}\n')
    result = ingest_corpus(store, [tmp_path / "edge.jsonl"], corpus="c", fingerprints=False)
    assert result.bytes == MAX_LINE_BYTES - frame
    with pytest.raises(InputError, match=r"over\.jsonl:line 1: line-size: "):
        ingest_corpus(store, [tmp_path / "over.jsonl"], corpus="d", fingerprints=False)
