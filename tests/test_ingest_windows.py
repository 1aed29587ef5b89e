"""Recorded streams: a run's own window log, checked and stored in the occurrence shape."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lineage.api import Store, open_store
from lineage.errors import InputError
from lineage.ingest import ingest_corpus
from lineage.ingest.windows import ingest_windows
from lineage.stream.build import build_stream

from .conftest import Cli, holding


def _log_of(store: Store, stream: str) -> list[dict[str, Any]]:
    """The log a trainer would have written while reading a canonical stream."""
    info = store.stream(stream)
    rows = []
    for step in range(info["steps"]):
        for d in store.docs_in_step(step, stream=stream, rank=0, world_size=1)["documents"]:
            rows.append({"step": step, "rank": d["rank"], "window": d["window"],
                         "doc_id": d["doc_id"], "token_start": d["token_start"],
                         "token_end": d["token_end"]})
    return rows


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    pq.write_table(pa.table({k: [r[k] for r in rows] for k in rows[0]}), path)
    return path


@pytest.fixture(scope="module")
def canonical_template(fresh_store: Callable[[Path], Store], example_shards: Path,
                       tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = fresh_store(tmp_path_factory.mktemp("canonical") / "store")
    ingest_corpus(store, [example_shards / "sonnets.jsonl.gz"], corpus="sonnets")
    build_stream(store, corpus="sonnets", name="canon", seed=5, seq_len=128, batch=4,
                 separator_tokens=1)
    return store.root


@pytest.fixture
def canonical(store: Store, canonical_template: Path) -> Store:
    """The test's store holding corpus `sonnets` and its canonical stream `canon`."""
    return holding(store, canonical_template)


@pytest.fixture(scope="module")
def canonical_rows(canonical_template: Path) -> list[dict[str, Any]]:
    return _log_of(open_store(canonical_template), "canon")


@pytest.fixture
def canonical_log(canonical_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`_log_of(canonical, "canon")`, read once per module (one lookup per step); the
    test's own copy, to change."""
    return copy.deepcopy(canonical_rows)


def test_a_recorded_log_of_the_canonical_order_answers_the_same(
    canonical: Store, canonical_log: list[dict[str, Any]], tmp_path: Path
) -> None:
    separator = 1
    log = _write(tmp_path / "log.parquet", canonical_log)
    result = ingest_windows(canonical, log, stream="rec", corpus="sonnets", seq_len=128,
                            batch=4, separator_tokens=separator)
    assert result["status"] == "added" and result["spec"] == "recorded/2"
    canon = canonical.stream("canon")
    assert result["steps"] == canon["steps"] and result["windows"] == canon["windows"]
    for step in (0, 17, canon["steps"] - 1):
        a = canonical.docs_in_step(step, stream="canon")["documents"]
        b = canonical.docs_in_step(step, stream="rec")["documents"]
        assert b == a
    again = ingest_windows(canonical, log, stream="rec", corpus="sonnets", seq_len=128,
                           batch=4, separator_tokens=separator)
    assert again["status"] == "unchanged"


def test_trained_on_works_on_a_recorded_stream(
    canonical: Store, canonical_log: list[dict[str, Any]], tmp_path: Path,
    example_shards: Path
) -> None:
    import gzip
    import json

    log = _write(tmp_path / "log.parquet", canonical_log)
    ingest_windows(canonical, log, stream="rec", corpus="sonnets", seq_len=128, batch=4,
                   separator_tokens=1)
    first = json.loads(gzip.decompress(
        (example_shards / "sonnets.jsonl.gz").read_bytes()).splitlines()[0])
    sonnet = tmp_path / "sonnet.txt"
    sonnet.write_text(first["text"], encoding="utf-8")
    canon = canonical.trained_on([str(sonnet)], stream="canon")["results"][0]
    rec = canonical.trained_on([str(sonnet)], stream="rec")["results"][0]
    assert rec["verdict"] == canon["verdict"] == "in-stream"
    assert rec["matches"][0]["windows"] == canon["matches"][0]["windows"]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda rows: rows[3].update(doc_id="no-such-doc"), "doc_id is not in the corpus"),
        (lambda rows: rows[5].update(token_end=10**9), "offsets must satisfy"),
        (lambda rows: rows[7].update(step=99), "step must be window // batch"),
        (lambda rows: [r.update(window=r["window"] + 1, step=(r["window"] + 1) // 4)
                       for r in rows if r["window"] >= 10], "missing (gap)"),
        (lambda rows: rows.insert(2, dict(rows[2])), "overfull"),
    ],
)
def test_bad_logs_are_reported_not_stored(
    canonical: Store, canonical_log: list[dict[str, Any]], tmp_path: Path, edit: Any,
    message: str
) -> None:
    rows = canonical_log
    edit(rows)
    log = _write(tmp_path / "bad.parquet", rows)
    with pytest.raises(InputError) as caught:
        ingest_windows(canonical, log, stream="bad", corpus="sonnets", seq_len=128, batch=4,
                       separator_tokens=1)
    assert message in str(caught.value) and str(log) in str(caught.value)
    assert [s["name"] for s in canonical.streams()] == ["canon"]


def test_cli_ingest_windows_from_jsonl(canonical: Store, canonical_log: list[dict[str, Any]],
                                      tmp_path: Path) -> None:
    import json

    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in canonical_log))
    cli = Cli(canonical.root)
    out = cli.json("ingest", "windows", str(log), "--stream", "rec", "--corpus", "sonnets",
                   "--seq-len", "128", "--batch", "4", "--separator-tokens", "1")
    assert out["occurrences"] > 0
    assert cli.json("docs", "--step", "2", "--stream", "rec")["documents"] == \
        cli.json("docs", "--step", "2", "--stream", "canon")["documents"]
