"""Removing corpora, streams, runs and experiment records: refused while something
depends on the record (unless --cascade), one commit, idempotent, and `store gc` then
frees exactly the removed records' files."""

from __future__ import annotations

import json
from pathlib import Path

from lineage.api import Store, open_store
from lineage.errors import ConflictError
from lineage.ingest import ingest_corpus
from lineage.stream.build import build_stream

from .conftest import EXAMPLES, Cli
from .demo_run import copy_demo_run


def _registered(store: Store) -> dict[str, str]:
    return dict(store.sql("SELECT path, owner FROM parquet_files ORDER BY path").rows)


def _catalog(store: Store) -> dict[str, list[tuple[object, ...]]]:
    tables = ("corpora", "corpus_sources", "streams", "runs", "steps", "audit_records",
              "parquet_files", "ingests", "text_indexes", "experiments")
    return {t: sorted(map(tuple, store.sql(f"SELECT * FROM {t}").rows), key=repr)
            for t in tables}


def test_a_corpus_with_a_stream_and_a_run_is_kept_unless_cascade(
        demo_run: Path, tmp_path: Path) -> None:
    store = copy_demo_run(demo_run, tmp_path / "copy")
    cli = Cli(store.root)
    cli("audit", "claim", "tiny", "--steps", "0-3", "--auditor", "ada")
    before = _catalog(store)
    done = cli("corpus", "remove", "example", code=2)
    assert done.stderr.strip() == ("error: corpus 'example' is needed by stream 'main', "
                                   "run 'tiny', 1 audit record: remove them first, or pass "
                                   "--cascade")
    cli("run", "remove", "tiny", code=2)  # its audit record depends on it
    assert _catalog(store) == before  # a refused removal changes nothing

    removed = cli.json("corpus", "remove", "example", "--cascade")
    assert removed["status"] == "removed"
    assert (removed["corpora"], removed["streams"], removed["runs"]) == (
        ["example"], ["main"], ["tiny"])
    assert removed["audit_records"] == 1
    registered_before = dict(before["parquet_files"] and
                             [(row[0], row[2]) for row in before["parquet_files"]])
    assert removed["parts"] == len(registered_before) > 0
    after = _catalog(store)
    for table, rows in after.items():
        assert rows == [], (table, rows)
    # the files stay, as garbage, until gc deletes exactly those
    report = store.verify()
    assert report.ok and sorted(report.unregistered) == sorted(registered_before)
    gone = cli.json("store", "gc", "--min-age", "0")["removed"]
    assert sorted(gone) == sorted(registered_before)
    assert all(not (store.root / path).exists() for path in registered_before)

    again = cli.json("corpus", "remove", "example", "--cascade")  # idempotent
    assert again["status"] == "absent" and again["parts"] == 0
    # the name is free again: the same corpus is recorded anew
    result = ingest_corpus(store, [EXAMPLES / "corpus"], corpus="example",
                           fingerprints=False, license="NOASSERTION")
    assert result.status == "added"


def test_a_stream_named_like_a_corpus_takes_only_its_own_parts(store: Store) -> None:
    ingest_corpus(store, [EXAMPLES / "shards" / "sonnets.jsonl.gz"], corpus="twin")
    build_stream(store, corpus="twin", name="twin", seed=3, seq_len=64, batch=2)
    corpus_parts = {p for p, owner in _registered(store).items()
                    if not p.startswith("tables/occurrence")}
    answer = store.remove("stream", "twin")
    assert answer.streams == ("twin",) and answer.corpora == ()
    assert set(_registered(store)) == corpus_parts
    assert store.corpus("twin").documents > 0


def test_an_experiment_record_and_its_logs(store: Store, weights: Path) -> None:
    cli = Cli(store.root)
    record = json.loads(cli("exp", "run", "--weights", str(weights), "--revision", "r1",
                            "--name", "trial", "--json", "--", "echo", "hello").stdout)
    logs = [row[0] for row in store.sql("SELECT path FROM experiment_logs").rows]
    assert logs
    removed = cli.json("exp", "remove", "trial")
    assert removed["experiments"] == [record["id"]] and removed["status"] == "removed"
    assert store.sql("SELECT count(*) FROM experiments").rows == [(0,)]
    assert sorted(cli.json("store", "gc", "--min-age", "0")["removed"]) == sorted(set(logs))
    assert cli.json("exp", "remove", "trial")["status"] == "absent"


def test_the_python_api_refuses_as_the_command_does(demo_run: Path, tmp_path: Path) -> None:
    store = copy_demo_run(demo_run, tmp_path / "copy")
    try:
        store.remove("stream", "main")
    except ConflictError as exc:
        assert "run 'tiny'" in str(exc)
    else:
        raise AssertionError("a stream with a run was removed without cascade")
    assert open_store(store.root).remove("run", "tiny").runs == ("tiny",)
    assert store.remove("stream", "main").status == "removed"
