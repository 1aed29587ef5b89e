"""Tracing a run's clipped and skipped steps to their documents; run-aware trained-on."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lineage.api import Store
from lineage.errors import UnknownObjectError, UsageError
from lineage.ingest.steps import ingest_steps

from .conftest import Cli
from .test_chain import WORLD, write_log


@pytest.fixture
def traced(run_store: Store, tmp_path: Path) -> Store:  # noqa: F811
    log = write_log(run_store, tmp_path / "steps.jsonl", range(40), clip_at={7, 30},
                    skip_at={7, 8, 9, 10, 11})
    ingest_steps(run_store, log, run="r", stream="s", world_size=WORLD)
    return run_store


def test_trace_names_the_documents_of_clipped_and_skipped_steps(traced: Store) -> None:
    clipped = traced.trace("r", clipped=True)
    assert [s["step"] for s in clipped["steps"]] == [7, 30]
    for s in clipped["steps"]:
        expected = {d["doc_id"] for d in traced.docs_in_step(s["step"], stream="s")["documents"]}
        assert {d["doc_id"] for d in s["documents"]} == expected
        assert sum(d["tokens"] for d in s["documents"]) <= 4 * 64
        assert s["clipped"] is True and s["loss"] is not None
    skipped = traced.trace("r", skipped=True)
    assert [s["step"] for s in skipped["steps"]] == [7, 8, 9, 10, 11]
    one = traced.trace("r", step=3)
    assert [s["step"] for s in one["steps"]] == [3] and one["spec_hash"].startswith("blake3:")
    with pytest.raises(UsageError, match="exactly one"):
        traced.trace("r", clipped=True, skipped=True)
    with pytest.raises(UnknownObjectError, match="no record of step 99"):
        traced.trace("r", step=99)


def sonnet_within(store: Store, example_shards: Path, tmp_path: Path, first: int,
                   last: int) -> Path:
    """Write out a sonnet whose tokens all fall in steps first..last (256 tokens a step)."""
    doc_id = store.sql(
        "SELECT doc_id FROM occurrences WHERE stream = 's' AND stream_start >= "
        f"{first * 256} AND stream_end <= {(last + 1) * 256} ORDER BY ordinal LIMIT 1"
    ).rows[0][0]
    texts = {json.loads(line)["id"]: json.loads(line)["text"] for line in
             gzip.decompress((example_shards / "sonnets.jsonl.gz").read_bytes()).splitlines()}
    path = tmp_path / f"{doc_id}.txt"
    path.write_text(texts[doc_id], encoding="utf-8")
    return path


def test_trained_on_with_a_run(traced: Store, example_shards: Path, tmp_path: Path) -> None:
    trained = sonnet_within(traced, example_shards, tmp_path, 0, 6)
    skipped = sonnet_within(traced, example_shards, tmp_path, 7, 11)
    later = sonnet_within(traced, example_shards, tmp_path, 60, 200)
    answer = traced.trained_on([str(trained), str(skipped), str(later)], run="r")
    verdicts = [r["verdict"] for r in answer["results"]]
    assert verdicts == ["trained", "skipped-only", "not-reached"]
    assert answer["run_last_step"] == 39
    cli = Cli(traced.root)
    out = cli("trained-on", "--run", "r", str(trained), str(later), code=1)
    assert "not-reached" in out.stdout
    assert cli.json("trained-on", "--run", "r", str(trained))["results"][0]["verdict"] == \
        "trained"
    assert "documents" in cli.json("trace", "--run", "r", "--clipped")["steps"][0]


def test_text_queries_keep_their_verdict_and_each_match_says_what_the_run_did(
        traced: Store, example_shards: Path, tmp_path: Path) -> None:
    trained = sonnet_within(traced, example_shards, tmp_path, 0, 6).read_text()
    skipped = sonnet_within(traced, example_shards, tmp_path, 7, 11).read_text()
    answer = traced.trained_on(texts=[trained.upper(), " ".join(skipped.split())], run="r")
    first, second = answer["results"]
    assert (first["verdict"], second["verdict"]) == ("text-match", "text-match")
    assert [m["run_verdict"] for m in first["matches"]] == ["trained"]
    assert [m["run_verdict"] for m in second["matches"]] == ["skipped-only"]
    assert (first["run_verdict"], second["run_verdict"]) == ("trained", "skipped-only")
    # With a run, exit 0 means trained by that run, for text as for files.
    cli = Cli(traced.root)
    assert cli.json("trained-on", "--run", "r", "--text", trained.upper(), code=0)
    assert cli.json("trained-on", "--run", "r", "--text", skipped, code=1)


def test_trained_on_follows_a_run_past_its_data_skip(
        run_store: Store, example_shards: Path, tmp_path: Path) -> None:  # noqa: F811
    # step 6 jumps over windows 24..63 (stream steps 6..15), then reads 64..67, and so on
    log = write_log(run_store, tmp_path / "steps.jsonl", range(12), data_skips={6: 40})
    ingest_steps(run_store, log, run="r", stream="s", world_size=WORLD)
    jumped = sonnet_within(run_store, example_shards, tmp_path, 6, 15)
    read = sonnet_within(run_store, example_shards, tmp_path, 16, 21)
    later = sonnet_within(run_store, example_shards, tmp_path, 30, 200)
    answer = run_store.trained_on([str(jumped), str(read), str(later)], run="r")
    assert [r["verdict"] for r in answer["results"]] == ["skipped-only", "trained",
                                                         "not-reached"]
    read_steps = answer["results"][1]["matches"][0]["run_steps"]
    assert read_steps and all(6 <= s <= 11 for s in read_steps)
    assert answer["results"][0]["matches"][0]["run_steps"] == []


def test_a_server_answers_every_step_as_a_command_does(traced: Store) -> None:
    """A server finds a step in the run's steps it keeps as columns; a command asks the
    catalog. Every step (a data skip among them), and a step the run lacks, the same."""
    from lineage.jsonout import json_text
    from lineage.runs.trace import trace
    from lineage.serve.stores import snapshots_for
    from lineage.store.budget import lookup_budget

    served = snapshots_for(traced.root).served()
    trace(served, "r", step=0)  # the first question reads the run's steps
    for step in range(40):
        with lookup_budget(10_000):  # no DuckDB query within: the kept columns answer
            kept = trace(served, "r", step=step)
        assert json_text(kept) == json_text(trace(traced, "r", step=step))
    for store in (served, traced):
        with pytest.raises(UnknownObjectError, match="no record of step 40"):
            trace(store, "r", step=40)


@given(st.dictionaries(st.sampled_from(["cursor", "step", "cur\\u0073or"]),
                       st.one_of(st.none(), st.booleans(), st.integers(),
                                 st.floats(allow_nan=False), st.text(max_size=5)),
                       min_size=1),
       st.integers(min_value=-(2**70), max_value=2**70))
def test_a_kept_cursor_is_the_cursor_json_reads(fields: dict[str, object], late: int) -> None:
    """Duplicate keys (the last counts), an escaped key, integers past 64 bits, floats:
    the columns a server keeps read each record's cursor as the query path does."""
    from lineage.runs.step_table import _cursor, record_cursor

    body = ", ".join(f'"{k}": {json.dumps(v)}' for k, v in fields.items())
    for text in (f"{{{body}}}", f'{{{body}, "cursor": {late}}}', f'{{"cursor": NaN, {body}}}'):
        assert repr(_cursor(text)) == repr(record_cursor(text))  # repr: NaN too
