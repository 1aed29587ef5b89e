"""The canonical stream: the fast builder against the spec's plain reference, golden
vectors, and the properties the order promises."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lineage.api import Store, init_store, open_store
from lineage.errors import ConflictError, UnknownObjectError, UsageError
from lineage.ingest import ingest_corpus
from lineage.stream.build import build_stream

from .conftest import REPO
from .stream_reference import occurrences_digest, reference_stream
from .test_part_read import _scanned

GOLDEN = REPO / "tests" / "golden"


def _manifest(path: Path, docs: list[dict[str, Any]]) -> Path:
    rows = [{"doc_id": d["doc_id"], "source": d["source"], "uri": None,
             "n_bytes": max(d["n_tokens"], 1), "n_tokens": d["n_tokens"],
             "content_hash": d.get("content_hash") or f"{i:064x}"}
            for i, d in enumerate(docs)]
    pq.write_table(pa.table({k: [r[k] for r in rows] for k in rows[0]}), path)
    return path


def _stored(store: Store, name: str) -> list[dict[str, Any]]:
    """The stream's occurrences in ordinal order, read from its parts (not `store.sql`,
    which starts a DuckDB of its own for each of the property tests' examples)."""
    columns = ["ordinal", "source", "doc_id", "epoch", "stream_start", "stream_end"]
    rows = sorted(_scanned(store, "occurrences", name, columns, "true", []))
    return [dict(zip(columns, row, strict=True)) for row in rows]


def _docs(n: int, sources: dict[str, int]) -> list[dict[str, Any]]:
    docs = []
    for s_index, (source, count) in enumerate(sources.items()):
        for i in range(count):
            docs.append({"doc_id": f"{source}/{i:05d}", "source": source,
                         "n_tokens": 1 + (i * 7919 + s_index * 104729) % n})
    return docs


# Ready manifests bring any hashes: duplicates, and hashes sharing 16, 32 or 48 of their
# 64 digits, which the content-hash copy must still order exactly.
_SHARED = "0123456789abcdef" * 3
_hash = st.none() | st.sampled_from(
    [_SHARED + f"{i:016x}" for i in (7, 3, 9)] + [_SHARED[:32] + f"{i:032x}" for i in (5, 1)]
    + [_SHARED[:16] + f"{i:048x}" for i in (8, 2)] + [f"{i:064x}" for i in (4, 6)])
_doc = st.fixed_dictionaries({
    "doc_id": st.text("abcdefgh/é0123", min_size=1, max_size=8),
    "source": st.sampled_from(["web", "code", "math"]),
    "n_tokens": st.integers(0, 300),
    "content_hash": _hash,
})


@pytest.fixture(params=["in-memory", "out-of-core"])
def order_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways of computing the order: numpy arrays when they fit the budget, else
    files read a piece at a time, here pieces of a few rows: many key ranges, merge
    rounds and buckets."""
    from lineage.stream import build, order_files, tables_files

    if request.param == "out-of-core":
        monkeypatch.setattr(build, "IN_MEMORY_BYTES_PER_ROW", 10**30)
        monkeypatch.setattr(order_files, "ROWS_PER_RANGE", 3)
        monkeypatch.setattr(order_files, "MERGE_ROWS", 5)
        monkeypatch.setattr(order_files, "KEY_BATCH_ROWS", 7)
        monkeypatch.setattr(tables_files, "RIDS_PER_BUCKET", 4)
        monkeypatch.setattr(tables_files, "ROWS_PER_BUCKET", 6)
        monkeypatch.setattr(tables_files, "PLACED_CHUNK_ROWS", 9)
    return str(request.param)


def test_memory_limits_parse_like_duckdb() -> None:
    from lineage.stream.build import memory_bytes

    assert memory_bytes("1GB") == 10**9 and memory_bytes("512MiB") == 512 * 2**20
    assert memory_bytes("1.5gb") == 1_500_000_000 and memory_bytes("2048") == 2048
    with pytest.raises(UsageError, match="expected a size"):
        memory_bytes("lots")


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    docs=st.lists(_doc, min_size=1, max_size=40, unique_by=lambda d: d["doc_id"]),
    seed=st.integers(0, 2**64 - 1),
    seq_len=st.integers(1, 64),
    batch=st.integers(1, 4),
    separator=st.integers(0, 2),
    epoch=st.sampled_from(["1", "0.5", "2", "1.37"]),
)
def test_builder_matches_the_reference(
    tmp_path_factory: pytest.TempPathFactory, fresh_store: Callable[[Path], Store],
    order_path: str, docs: list[dict[str, Any]],
    seed: int, seq_len: int, batch: int, separator: int, epoch: str,
) -> None:
    root = tmp_path_factory.mktemp("s")
    store = fresh_store(root / "store")
    ingest_corpus(store, [_manifest(root / "m.parquet", docs)], corpus="c")
    epochs = {"web": epoch}
    expected = reference_stream(docs, seed=seed, seq_len=seq_len, batch=batch,
                                separator_tokens=separator, epochs=epochs)
    if expected["steps"] == 0:
        with pytest.raises(UsageError, match="not one step"):
            build_stream(store, corpus="c", name="s", seed=seed, seq_len=seq_len, batch=batch,
                         separator_tokens=separator, epochs=[f"web={epoch}"]
                         if any(d["source"] == "web" for d in docs) else None)
        return
    built = build_stream(store, corpus="c", name="s", seed=seed, seq_len=seq_len, batch=batch,
                         separator_tokens=separator,
                         epochs=epochs if any(d["source"] == "web" for d in docs) else None)
    assert _stored(store, "s") == expected["occurrences"]
    assert (built.steps, built.windows, built.tokens) == (
        expected["steps"], expected["windows"], expected["tokens"])
    assert built.occurrences_digest == occurrences_digest(expected["occurrences"])
    assert built.cut == expected["cut"]
    _assert_hash_copy(store, "s")


def _assert_hash_copy(store: Store, name: str) -> None:
    """occurrence_hashes holds the occurrences again, in content-hash order, file by
    file; equal hashes in (doc_id, epoch) order, whichever path ordered the stream."""
    columns = ["content_hash", "doc_id", "epoch", "ordinal", "stream_start", "stream_end",
               "source"]
    occurrences = _scanned(store, "occurrences", name, columns, "true", [])
    as_rows = _scanned(store, "occurrence_hashes", name, columns, "true", [])  # file order
    assert as_rows == sorted(occurrences, key=lambda r: (r[0], r[1].encode("utf-8"), r[2]))


def test_positions_past_16_and_32_bits_widen_before_adding(
    store: Store, tmp_path: Path, order_path: str
) -> None:
    """The occurrence lists hold positions in 16 bits here (the last start is 32,032);
    its end, 33,032, must not overflow."""
    docs = [{"doc_id": f"d{i:02d}", "source": "web", "n_tokens": 1000} for i in range(40)]
    ingest_corpus(store, [_manifest(tmp_path / "m.parquet", docs)], corpus="c")
    built = build_stream(store, corpus="c", name="s", seed=1, seq_len=1000, batch=33)
    expected = reference_stream(docs, seed=1, seq_len=1000, batch=33)
    assert _stored(store, "s") == expected["occurrences"]
    assert max(r["stream_end"] for r in expected["occurrences"]) > 2**15
    assert built.occurrences_digest == occurrences_digest(expected["occurrences"])
    _assert_hash_copy(store, "s")


def test_a_zero_token_document_is_kept_in_the_last_partial_epoch(
    store: Store, tmp_path: Path, order_path: str
) -> None:
    """Epochs are drawn for e = 0 .. ceil(E) - 1 (spec §2): with E = 2.05 and 10 tokens,
    the budget of 20 is spent after two epochs, and a zero-token document that sorts
    first in epoch 2 still fits."""
    docs = [{"doc_id": "a", "source": "web", "n_tokens": 10},
            {"doc_id": "z", "source": "web", "n_tokens": 0}]
    ingest_corpus(store, [_manifest(tmp_path / "m.parquet", docs)], corpus="c")
    build_stream(store, corpus="c", name="s", seed=0, seq_len=1, batch=1,
                 epochs=["web=2.05"])
    expected = reference_stream(docs, seed=0, seq_len=1, batch=1, epochs={"web": "2.05"})
    assert ("z", 2) in {(r["doc_id"], r["epoch"]) for r in expected["occurrences"]}
    assert _stored(store, "s") == expected["occurrences"]


def test_golden_vectors(tmp_path: Path, order_path: str) -> None:
    cases = sorted(GOLDEN.glob("*.json"))
    assert len(cases) >= 3
    for case_path in cases:
        case = json.loads(case_path.read_text(encoding="utf-8"))
        init_store(tmp_path / case_path.stem)
        store = open_store(tmp_path / case_path.stem)
        ingest_corpus(store, [_manifest(tmp_path / f"{case_path.stem}.parquet",
                                        case["documents"])], corpus="c")
        params = case["parameters"]
        built = build_stream(store, corpus="c", name="g", **params)
        assert _stored(store, "g") == case["occurrences"], case_path.name
        assert built.occurrences_digest == case["occurrences_digest"], case_path.name
        assert built.spec_hash == case["spec_hash"], case_path.name


def test_whole_epochs_hold_each_document_once_and_sources_finish_together(
    store: Store, tmp_path: Path
) -> None:
    docs = _docs(500, {"web": 400, "code": 80, "math": 40})
    ingest_corpus(store, [_manifest(tmp_path / "m.parquet", docs)], corpus="c")
    built = build_stream(store, corpus="c", name="s", seed=42, seq_len=16, batch=1,
                         separator_tokens=0, epochs=["code=2"])
    rows = _stored(store, "s")
    counts = Counter((r["source"], r["doc_id"], r["epoch"]) for r in rows)
    assert set(counts.values()) == {1}
    per_source = Counter(r["source"] for r in rows)
    assert per_source["web"] == 400 and per_source["math"] == 40
    assert per_source["code"] <= 160  # two epochs (the tail may fall after the last step)
    # Rates proportional to size: each source's share of tokens so far stays close to its
    # final share at every quarter of the stream.
    totals = Counter()
    for r in rows:
        totals[r["source"]] += r["stream_end"] - r["stream_start"]
    grand = sum(totals.values())
    seen: Counter[str] = Counter()
    checkpoints = {len(rows) * k // 4 for k in (1, 2, 3)}
    for i, r in enumerate(rows):
        seen[r["source"]] += r["stream_end"] - r["stream_start"]
        if i in checkpoints:
            done = sum(seen.values())
            for source in totals:
                assert abs(seen[source] / done - totals[source] / grand) < 0.05
    assert built.steps == built.tokens // 16


def test_fractional_epoch_truncates_and_budget_stops(store: Store, tmp_path: Path) -> None:
    docs = _docs(300, {"web": 200})
    ingest_corpus(store, [_manifest(tmp_path / "m.parquet", docs)], corpus="c")
    total = sum(d["n_tokens"] for d in docs)
    build_stream(store, corpus="c", name="frac", seed=1, seq_len=8, batch=1,
                 separator_tokens=0, epochs=["web=0.89"])
    rows = _stored(store, "frac")
    kept = sum(r["stream_end"] - r["stream_start"] for r in rows)
    assert len({r["doc_id"] for r in rows}) == len(rows) < 200
    assert kept <= int(0.89 * total)
    budget = build_stream(store, corpus="c", name="budget", seed=1, seq_len=8, batch=2,
                          token_budget=1000)
    assert budget.tokens == 1000 // 16 * 16 and budget.steps == 62
    # The budget's cut is said: every packed token (and separator) past token 992, every
    # occurrence wholly past it, and the one it cuts in two.
    rows = _stored(store, "budget")
    assert budget.cut is not None
    assert budget.cut.tokens == total + len(docs) - budget.tokens
    assert budget.cut.documents == len(docs) - len(rows)
    assert budget.cut.short == int(rows[-1]["stream_end"] > budget.tokens) == 1


def test_a_different_seed_gives_a_different_order(store: Store, tmp_path: Path) -> None:
    ingest_corpus(store, [_manifest(tmp_path / "m.parquet", _docs(50, {"web": 60}))],
                  corpus="c")
    a = build_stream(store, corpus="c", name="a", seed=1, seq_len=8, batch=1)
    b = build_stream(store, corpus="c", name="b", seed=2, seq_len=8, batch=1)
    assert a.occurrences_digest != b.occurrences_digest
    assert a.spec_hash != b.spec_hash
    assert sorted(r["doc_id"] for r in _stored(store, "a")) == \
        sorted(r["doc_id"] for r in _stored(store, "b"))


def test_rebuild_is_a_no_op_and_other_parameters_are_refused(
    store: Store, example_corpus: Path
) -> None:
    ingest_corpus(store, [example_corpus], corpus="ex")
    first = build_stream(store, corpus="ex", name="s", seed=42, seq_len=2048, batch=8)
    again = build_stream(store, corpus="ex", name="s", seed=42, seq_len=2048, batch=8)
    assert (first.status, again.status) == ("added", "unchanged")
    assert again.occurrences_digest == first.occurrences_digest
    with pytest.raises(ConflictError, match="other parameters"):
        build_stream(store, corpus="ex", name="s", seed=43, seq_len=2048, batch=8)
    with pytest.raises(UnknownObjectError, match="no corpus named 'nope'"):
        build_stream(store, corpus="nope", name="t", seed=1, seq_len=8, batch=1)
    with pytest.raises(UsageError, match="no source 'web'"):
        build_stream(store, corpus="ex", name="t", seed=1, seq_len=8, batch=1,
                     epochs=["web=2"])


_BUILD_IN_A_PROCESS = """
import json, sys
from lineage.ingest import ingest_corpus
from lineage.api import init_store, open_store
from lineage.stream.build import build_stream
root, shards = sys.argv[1], sys.argv[2:]
init_store(root)
store = open_store(root)
ingest_corpus(store, shards, corpus="c", source="web", workers=int(%d))
r = build_stream(store, corpus="c", name="s", seed=7, seq_len=64, batch=2)
print(r.occurrences_digest)
"""


def test_identical_across_processes_hash_seeds_workers_and_shard_order(
    tmp_path: Path, example_shards: Path
) -> None:
    import gzip

    lines = gzip.decompress((example_shards / "sonnets.jsonl.gz").read_bytes()).splitlines()
    shards = []
    for i in range(3):
        shard = tmp_path / f"part{i}.jsonl"
        shard.write_bytes(b"\n".join(lines[i::3]) + b"\n")
        shards.append(str(shard))
    digests = set()
    for run, (hash_seed, workers, order) in enumerate(
        [("0", 1, shards), ("12345", 2, shards[::-1]), ("random", 3, shards[1:] + shards[:1])]
    ):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run(
            [sys.executable, "-c", _BUILD_IN_A_PROCESS % workers, str(tmp_path / f"s{run}"),
             *order], capture_output=True, text=True, env=env,
        )
        assert out.returncode == 0, out.stderr
        digests.add(out.stdout.strip())
    assert len(digests) == 1


def test_the_command_line_says_what_the_end_of_the_stream_cut(
    store: Store, example_shards: Path
) -> None:
    from .conftest import Cli

    cli = Cli(store.root)
    ingest_corpus(store, [example_shards / "sonnets.jsonl.gz"], corpus="s")
    args = ("stream", "build", "--corpus", "s", "--seed", "1", "--seq-len", "64", "--batch",
            "8", "--token-budget", "5000")
    answer = cli.json(*args, "--name", "j")
    cut = answer["cut"]
    assert cut["documents"] > 0 and cut["short"] == 1
    shown = cli(*args, "--name", "h").stdout.splitlines()
    assert shown[-1] == (f"cut: {cut['tokens']:,} packed tokens past the last whole step "
                         f"within --token-budget: {cut['documents']:,} documents left out, "
                         "1 cut short")
    again = cli.json(*args, "--name", "j")  # found built: the catalog does not keep the cut
    assert again["status"] == "unchanged" and "cut" not in again


def test_both_paths_write_the_same_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ordered in memory or through files a few rows at a time, the stream's parts are
    the same files: three sources, two epochs of one, duplicate content hashes."""
    import hashlib

    from lineage.stream import build, order_files, tables_files

    docs = _docs(300, {"web": 90, "code": 40, "math": 25})
    for i, doc in enumerate(docs):
        doc["content_hash"] = f"{(i % 70) * 7919:064x}"  # 85 documents share a hash
    files: list[list[str]] = []
    for path in ("in-memory", "out-of-core"):
        if path == "out-of-core":
            monkeypatch.setattr(build, "IN_MEMORY_BYTES_PER_ROW", 10**30)
            monkeypatch.setattr(order_files, "ROWS_PER_RANGE", 11)
            monkeypatch.setattr(order_files, "MERGE_ROWS", 17)
            monkeypatch.setattr(tables_files, "RIDS_PER_BUCKET", 13)
            monkeypatch.setattr(tables_files, "ROWS_PER_BUCKET", 19)
        init_store(tmp_path / path)
        store = open_store(tmp_path / path)
        ingest_corpus(store, [_manifest(tmp_path / f"{path}.parquet", docs)], corpus="c")
        build_stream(store, corpus="c", name="s", seed=7, seq_len=64, batch=3,
                     epochs=["code=2", "math=0.6"])
        files.append(sorted(
            f"{table}:{hashlib.sha256(part.read_bytes()).hexdigest()}"
            for table in ("occurrences", "occurrence_hashes")
            for part in store.table_dir(table).rglob("*.parquet")))
    assert files[0] == files[1] and len(files[0]) >= 2
