"""`docs --step` and `trained-on` on the real example corpus, through the API and the CLI."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lineage.api import Store
from lineage.errors import UnknownObjectError, UsageError
from lineage.ingest import ingest_corpus
from lineage.stream.build import build_stream

from .conftest import Cli, drop_lookup_arrays


@pytest.fixture
def streamed(store: Store, example_corpus: Path) -> Store:
    ingest_corpus(store, [example_corpus], corpus="example")
    build_stream(store, corpus="example", name="s0", seed=42, seq_len=512, batch=8,
                 separator_tokens=0)
    build_stream(store, corpus="example", name="s1", seed=42, seq_len=512, batch=8,
                 separator_tokens=1, token_budget=400_000)
    return store


def _covered(answer: dict) -> int:
    return sum(d["token_end"] - d["token_start"] for d in answer["documents"])


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(step=st.integers(0, 700))
def test_without_separators_a_step_tiles_exactly(streamed: Store, step: int) -> None:
    info = streamed.stream("s0")
    step = step % info["steps"]
    answer = streamed.docs_in_step(step, stream="s0")
    assert _covered(answer) == 8 * 512
    for window in range(step * 8, step * 8 + 8):
        segments = [d for d in answer["documents"] if d["window"] == window]
        assert sum(d["token_end"] - d["token_start"] for d in segments) == 512


def test_segments_agree_with_the_occurrence_table(streamed: Store) -> None:
    answer = streamed.docs_in_step(5, stream="s1")
    rows = streamed.sql(
        "SELECT doc_id, stream_start, stream_end FROM occurrences WHERE stream = 's1'").rows
    where = {doc_id: (a, b) for doc_id, a, b in rows}
    for d in answer["documents"]:
        a, b = where[d["doc_id"]]
        w = d["window"]
        assert a + d["token_start"] == max(a, w * 512)
        assert a + d["token_end"] == min(b, (w + 1) * 512)
        assert d["content_hash"] and d["uri"].startswith("file://")
    assert answer["spec_hash"] == streamed.stream("s1")["spec_hash"]


def test_ranks_split_a_step_and_windows_narrow_it(streamed: Store) -> None:
    whole = streamed.docs_in_step(3, stream="s0")
    parts = [streamed.docs_in_step(3, stream="s0", rank=r, world_size=4) for r in range(4)]
    assert sum(_covered(p) for p in parts) == _covered(whole)
    assert [p["windows"] for p in parts] == [[24, 25], [26, 27], [28, 29], [30, 31]]
    assert {d["rank"] for d in parts[2]["documents"]} == {2}
    one = streamed.docs_in_step(3, stream="s0", window=29)
    assert _covered(one) == 512 and {d["window"] for d in one["documents"]} == {29}
    with pytest.raises(UsageError, match="must divide the batch"):
        streamed.docs_in_step(3, stream="s0", rank=0, world_size=3)
    with pytest.raises(UsageError, match="go together"):
        streamed.docs_in_step(3, stream="s0", rank=1)
    with pytest.raises(UnknownObjectError, match="has steps 0.."):
        streamed.docs_in_step(10**9, stream="s0")
    with pytest.raises(UsageError, match="say which stream"):
        streamed.docs_in_step(0)


def test_trained_on_verdicts(streamed: Store, example_corpus: Path, tmp_path: Path) -> None:
    rows = streamed.sql("SELECT doc_id, max(stream_start) FROM occurrences "
                        "WHERE stream = 's1' GROUP BY doc_id").rows
    in_budget = {doc_id for doc_id, _ in rows}
    all_docs = {r[0] for r in streamed.sql("SELECT doc_id FROM documents").rows}
    outside = sorted(all_docs - in_budget)[0]
    inside = sorted(in_budget)[0]
    stranger = tmp_path / "stranger.txt"
    stranger.write_text("words nobody put in this corpus")
    answer = streamed.trained_on(
        [str(example_corpus / inside), str(example_corpus / outside), str(stranger)],
        stream="s1",
    )
    verdicts = [r["verdict"] for r in answer["results"]]
    assert verdicts == ["in-stream", "in-corpus-only", "not-found"]
    match = answer["results"][0]["matches"][0]
    assert match["doc_id"] == inside and match["stream"] == "s1"
    assert match["manifest_hash"] == streamed.corpus("example")["manifest_hash"]
    assert match["steps"] == sorted({w // 8 for w in match["windows"]})
    # the steps answer, asked the other way round, contains the document
    step_docs = streamed.docs_in_step(match["steps"][0], stream="s1")["documents"]
    assert inside in {d["doc_id"] for d in step_docs}


def test_identical_files_in_two_places_are_both_reported(
    store: Store, tmp_path: Path
) -> None:
    root = tmp_path / "c"
    (root / "a").mkdir(parents=True)
    (root / "b").mkdir()
    for folder in ("a", "b"):
        (root / folder / "same.txt").write_text("the very same bytes " * 40)
    (root / "a" / "other.txt").write_text("filler " * 200)
    ingest_corpus(store, [root], corpus="c")
    build_stream(store, corpus="c", name="s", seed=3, seq_len=64, batch=1)
    answer = store.trained_on([str(root / "a" / "same.txt")])
    docs = sorted(m["doc_id"] for m in answer["results"][0]["matches"])
    assert docs == ["a/same.txt", "b/same.txt"]


def test_cli_docs_and_trained_on(cli: Cli, example_corpus: Path, tmp_path: Path) -> None:
    cli("ingest", "corpus", str(example_corpus), "--corpus", "example")
    built = cli.json("stream", "build", "--corpus", "example", "--name", "main", "--seed", "42",
                     "--seq-len", "2048", "--batch", "8")
    shown = cli.json("stream", "show", "main")
    assert set(shown) >= {"name", "spec", "spec_hash", "corpus", "manifest_hash", "seed",
                          "seq_len", "batch", "tokens", "windows", "steps",
                          "occurrences_digest"}
    assert shown["occurrences_digest"] == built["occurrences_digest"]
    assert [s["name"] for s in cli.json("stream", "list")] == ["main"]
    answer = cli.json("docs", "--step", "7", "--rank", "1", "--world-size", "2")
    assert answer["step"] == 7 and answer["stream"] == "main"
    for d in answer["documents"]:
        assert set(d) == {"doc_id", "source", "uri", "content_hash", "epoch", "window", "rank",
                          "token_start", "token_end"}
        assert d["rank"] == 1 and 60 <= d["window"] <= 63
    macbeth = example_corpus / "shakespeare" / "macbeth.txt"
    yes = cli.json("trained-on", str(macbeth))
    assert yes["results"][0]["verdict"] == "in-stream"
    stranger = tmp_path / "x.txt"
    stranger.write_text("not in the corpus")
    no = cli("trained-on", str(macbeth), str(stranger), code=1)
    assert "x.txt: not-found" in no.stdout and "macbeth.txt: in-stream" in no.stdout
    missing = cli("trained-on", str(tmp_path / "nope.txt"), code=2)
    assert "nope.txt: no such file" in missing.stderr
    human = cli("docs", "--step", "0").stdout
    assert "step 0: windows 0..7" in human


def test_lookups_open_only_the_parts_that_can_match(
    store: Store, example_shards: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gzip
    import json as jsonlib


    ingest_corpus(store, [example_shards / "sonnets.jsonl.gz"], corpus="c", source="s")
    build_stream(store, corpus="c", name="whole", seed=4, seq_len=128, batch=2)
    from lineage.stream import tables

    monkeypatch.setattr(tables, "LOOKUP_PART_ROWS", 10)  # many small parts
    monkeypatch.setattr(tables, "LOOKUP_ROW_GROUP_ROWS", 4)
    build_stream(store, corpus="c", name="split", seed=4, seq_len=128, batch=2)
    ranges = store.sql("SELECT key_ranges FROM parquet_files WHERE owner = 'split' "
                       "AND table_name = 'occurrences'").rows
    assert len(ranges) >= 15 and all(r[0] for r in ranges)
    steps = store.stream("whole")["steps"]
    for step in range(0, steps, 7):
        whole = store.docs_in_step(step, stream="whole")["documents"]
        assert store.docs_in_step(step, stream="split")["documents"] == whole
    records = [jsonlib.loads(line) for line in
               gzip.decompress((example_shards / "sonnets.jsonl.gz").read_bytes()).splitlines()]
    for record in records[::25]:
        path = tmp_path / f"{record['id']}.txt"
        path.write_text(record["text"], encoding="utf-8")
        a = store.trained_on([str(path)], stream="whole")["results"][0]["matches"]
        b = store.trained_on([str(path)], stream="split")["results"][0]["matches"]
        assert [m["windows"] for m in a] == [m["windows"] for m in b] and a[0]["windows"]


@settings(max_examples=300, deadline=None)
@given(occurrences=st.lists(st.tuples(st.integers(0, 5_000), st.integers(0, 3_000)),
                            max_size=30),
       seq_len=st.integers(1, 700), first=st.integers(0, 12), width=st.integers(0, 6))
def test_pieces_cut_at_once_are_the_pieces_cut_one_by_one(
        occurrences: list[tuple[int, int]], seq_len: int, first: int, width: int) -> None:
    """A step's occurrences are cut at window edges all at once (numpy); the cut is the
    one docs/stream-spec.md §6 states, as `window_pieces` makes it one occurrence at a
    time (zero-length occurrences and windows past the step included)."""
    import numpy as np

    from lineage.stream.query import window_piece_arrays, window_pieces

    starts = [a for a, _ in occurrences]
    ends = [a + n for a, n in occurrences]
    one_by_one = [(i, w, lo, lo + (end - start))
                  for i, (a, b) in enumerate(zip(starts, ends, strict=True))
                  for w, lo, start, end in window_pieces(a, b, 0, seq_len, first,
                                                         first + width)]
    row, window, lo, hi = window_piece_arrays(np.array(starts, dtype=np.int64),
                                              np.array(ends, dtype=np.int64), seq_len,
                                              first, first + width)
    at_once = list(zip(row.tolist(), window.tolist(), lo.tolist(), hi.tolist(), strict=True))
    assert at_once == one_by_one


def test_a_steps_documents_are_vouched_for_only_by_their_columns_types(
        streamed: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A step's segments are PlainRows (json_text writes them unlooked) because their
    columns hold text and integers; were one of another type, they would be a plain
    list, looked at value by value, and written as json writes them."""
    import json

    import pyarrow as pa

    from lineage.jsonout import PlainRows, json_text
    from lineage.store import part_read
    from lineage.stream import query

    answer = query.docs_in_step(streamed, 5, stream="s0")
    assert type(answer["documents"]) is PlainRows and answer["documents"]
    drop_lookup_arrays(streamed)  # the Parquet path's columns, as a store made before them
    assert query.docs_in_step(streamed, 5, stream="s0") == answer
    assert "position" not in answer["documents"][0]
    found = part_read.lookup_table

    def epoch_as_float(*args: object, **kwargs: object) -> pa.Table | None:
        rows = found(*args, **kwargs)  # type: ignore[arg-type]
        assert rows is not None
        at = rows.schema.get_field_index("epoch")
        return rows.set_column(at, "epoch", rows["epoch"].cast(pa.float64()))

    monkeypatch.setattr(part_read, "lookup_table", epoch_as_float)
    looked_at = query.docs_in_step(streamed, 5, stream="s0")
    assert type(looked_at["documents"]) is list
    assert looked_at["documents"][0]["epoch"] == float(answer["documents"][0]["epoch"])
    assert json_text(looked_at) == json.dumps(looked_at, indent=2, ensure_ascii=False)


def test_a_hash_is_placed_only_in_the_streams_of_its_corpora(
        streamed: Store, example_corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stream holds only documents of its corpus: `trained-on` looks a content hash up
    in the streams of the corpora that hold it, and answers as it would after looking in
    every stream."""
    from lineage.text import trained_on as module

    ingest_corpus(streamed, [example_corpus.parent / "shards" / "sonnets.jsonl.gz"],
                  corpus="poems")
    build_stream(streamed, corpus="poems", name="p", seed=1, seq_len=512, batch=2)
    held = sorted((example_corpus / "shakespeare").iterdir())[0]
    asked: list[tuple[str, str | None]] = []
    documents, placements = module._document_lookup, module._placement_lookup

    def documents_recorded(con: Any, store: Store, digests: list[str],
                           ) -> list[tuple[Any, ...]]:
        asked.append(("document_hashes", None))
        return documents(con, store, digests)

    def placements_recorded(con: Any, store: Store, stream: str, corpus: str,
                            digests: list[str]) -> list[tuple[Any, ...]]:
        asked.append(("occurrence_hashes", stream))
        return placements(con, store, stream, corpus, digests)

    monkeypatch.setattr(module, "_document_lookup", documents_recorded)
    monkeypatch.setattr(module, "_placement_lookup", placements_recorded)
    answer = module.trained_on(streamed, [held])
    assert answer["results"][0]["verdict"] == "in-stream"
    assert sorted(asked) == [("document_hashes", None), ("occurrence_hashes", "s0"),
                             ("occurrence_hashes", "s1")]
    monkeypatch.setattr(module, "_of_corpora", lambda streams, corpora: streams)
    assert module.trained_on(streamed, [held]) == answer  # every stream looked in
    assert ("occurrence_hashes", "p") in asked
