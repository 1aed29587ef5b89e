"""Streams with a batch-size schedule and a rank rule: the golden vectors of
docs/stream-spec.md §4, fixed-batch streams unchanged, and every question that cuts
windows into steps (docs --step, ranks, the reader, the chain, trace, trained-on)
following the schedule."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lineage.api import Store, init_store, open_store
from lineage.errors import UsageError
from lineage.ingest import ingest_corpus
from lineage.ingest.steps import ingest_steps
from lineage.ingest.windows import ingest_windows
from lineage.runs.chain import ChainWriter
from lineage.runs.chain_verify import verify_chain
from lineage.stream.batch_digest import batch_digest
from lineage.stream.build import build_stream
from lineage.stream.reader import StreamReader
from lineage.stream.schedule import BatchSchedule, RankRule, parse_schedule

from .conftest import Cli, holding

GOLDEN = Path(__file__).parent / "golden" / "schedules" / "ramped.json"
RAMP = parse_schedule("0:2,3:4,6:8")


def _golden() -> dict[str, Any]:
    return json.loads(GOLDEN.read_text(encoding="utf-8"))


def _manifest(path: Path, docs: list[dict[str, Any]]) -> Path:
    # the rows tests/golden/generate.py hashes (content hashes by position)
    rows = [{"doc_id": d["doc_id"], "source": d["source"], "uri": None,
             "n_bytes": max(d["n_tokens"], 1), "n_tokens": d["n_tokens"],
             "content_hash": f"{i:064x}"} for i, d in enumerate(docs)]
    pq.write_table(pa.table({k: [r[k] for r in rows] for k in rows[0]}), path)
    return path


@pytest.fixture
def golden_store(tmp_path: Path) -> Store:
    init_store(tmp_path / "store")
    store = open_store(tmp_path / "store")
    ingest_corpus(store, [_manifest(tmp_path / "m.parquet", _golden()["documents"])],
                  corpus="c")
    return store


def test_the_ramped_golden_stream(golden_store: Store) -> None:
    case = _golden()
    schedule = BatchSchedule.from_json(case["schedule"])
    for text, expected in case["by_rank_rule"].items():
        name = text.replace(":", "-")
        built = build_stream(golden_store, corpus="c", name=name, schedule=schedule,
                             rank_rule=RankRule.parse(text), **case["parameters"])
        assert built.spec_hash == expected["spec_hash"], text
        assert built.occurrences_digest == case["occurrences_digest"]
        assert (built.steps, built.windows, built.tokens) == (
            case["steps"], case["windows"], case["tokens"])
        row = golden_store.sql(f"SELECT parameters FROM streams WHERE name = '{name}'").rows
        assert row == [(expected["canonical_parameters"],)]
    stored = golden_store.sql(
        "SELECT ordinal, source, doc_id, epoch, stream_start, stream_end FROM occurrences "
        "WHERE stream = 'contiguous' ORDER BY ordinal").records()
    assert stored == case["occurrences"]
    for step, (first, last) in enumerate(case["step_windows"]):
        answer = golden_store.docs_in_step(step, stream="contiguous")
        assert answer["windows"] == [first, last] == answer["step_windows"]
        assert answer["rank_rule"] == {"rule": "contiguous"}
        assert {d["window"] for d in answer["documents"]} == set(range(first, last + 1))


def test_ranks_answer_as_the_golden_vectors_say(golden_store: Store) -> None:
    case = _golden()
    schedule = BatchSchedule.from_json(case["schedule"])
    for text in case["by_rank_rule"]:
        build_stream(golden_store, corpus="c", name=text.replace(":", "-"),
                     schedule=schedule, rank_rule=RankRule.parse(text), **case["parameters"])
    for vector in case["ranks"]:
        name = RankRule.from_json(vector["rank_rule"]).to_text().replace(":", "-")
        for rank, expected in enumerate(vector["ranks"]):
            answer = golden_store.docs_in_step(vector["step"], stream=name, rank=rank,
                                               world_size=vector["world_size"])
            windows = answer.get("rank_windows") or list(
                range(answer["windows"][0], answer["windows"][1] + 1))
            assert windows == expected, (name, vector["step"], rank)
            assert {d["window"] for d in answer["documents"]} == set(expected)
            assert {d["rank"] for d in answer["documents"]} == {rank}
            assert answer["rank_rule"] == vector["rank_rule"]


def test_the_token_schedule_and_the_step_schedule_are_one_stream(
        golden_store: Store, tmp_path: Path) -> None:
    case = _golden()
    cli = Cli(golden_store.root)
    params = case["parameters"]
    common = ["stream", "build", "--corpus", "c", "--seed", str(params["seed"]),
              "--seq-len", str(params["seq_len"]), "--json"]
    by_tokens = cli(*common, "--name", "t", "--schedule-tokens", case["schedule_tokens"])
    steps_text = ",".join(f"{a}:{b}" for a, b in case["schedule"])
    by_steps = cli(*common, "--name", "s", "--schedule", steps_text)
    assert by_tokens.exit_code == by_steps.exit_code == 0, by_tokens.stderr
    built = json.loads(by_tokens.stdout)
    assert built["spec_hash"] == json.loads(by_steps.stdout)["spec_hash"] == \
        case["by_rank_rule"]["contiguous"]["spec_hash"]
    assert built["schedule"] == case["schedule"] and "rank_rule" not in built
    shown = json.loads(cli("stream", "show", "t", "--json").stdout)
    assert shown["schedule"] == case["schedule"] and shown["batch"] == case["schedule"][0][1]


def test_a_fixed_schedule_is_the_fixed_batch_stream_byte_for_byte(
        store: Store, example_corpus: Path) -> None:
    ingest_corpus(store, [example_corpus], corpus="ex")
    cli = Cli(store.root)
    base = ["stream", "build", "--corpus", "ex", "--seed", "42", "--seq-len", "512"]
    assert cli(*base, "--name", "b", "--batch", "4").exit_code == 0
    assert cli(*base, "--name", "s", "--schedule", "0:4,50:4", "--rank-rule",
               "contiguous").exit_code == 0
    b, s = (json.loads(cli("stream", "show", n, "--json").stdout) for n in "bs")
    assert {**b, "name": "s"} == s and "schedule" not in s and "rank_rule" not in s
    for args in (["--step", "7"], ["--step", "7", "--rank", "1", "--world-size", "2"]):
        answers = [json.loads(cli("docs", "--stream", n, *args, "--json").stdout)
                   for n in "bs"]
        assert answers[0] == {**answers[1], "stream": "b"}
        assert "step_windows" not in answers[0] and "rank_rule" not in answers[0]


def test_schedule_options_that_disagree_are_refused(store: Store, example_corpus: Path) -> None:
    ingest_corpus(store, [example_corpus], corpus="ex")
    cli = Cli(store.root)
    base = ["stream", "build", "--corpus", "ex", "--name", "x", "--seed", "1",
            "--seq-len", "512"]
    for extra, message in [
        (["--schedule", "0:2,10:4", "--schedule-tokens", "0:2"], "not both"),
        (["--batch", "4", "--schedule", "0:2,10:4"], "disagree about step 0"),
        ([], "give --batch"),
        (["--schedule", "0:2,10"], "START:WINDOWS"),
        (["--batch", "2", "--rank-rule", "diagonal"], "expected one of"),
    ]:
        result = cli(*base, *extra, code=None)
        assert result.exit_code == 2 and message in result.stderr, (extra, result.stderr)
        assert "Traceback" not in result.stderr
    assert store.streams() == []


@pytest.fixture(scope="module")
def ramped_template(fresh_store: Callable[[Path], Store], example_shards: Path,
                    tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = fresh_store(tmp_path_factory.mktemp("ramped") / "store")
    ingest_corpus(store, [example_shards / "sonnets.jsonl.gz"], corpus="sonnets")
    build_stream(store, corpus="sonnets", name="r", seed=11, seq_len=64, schedule=RAMP,
                 rank_rule=RankRule("micro-batches", 2))
    return store.root


@pytest.fixture
def ramped(store: Store, ramped_template: Path) -> Store:
    """The test's store holding corpus `sonnets` and stream `r` under the RAMP schedule."""
    return holding(store, ramped_template)


def test_docs_step_states_the_steps_windows_and_the_rank_rule(ramped: Store) -> None:
    cli = Cli(ramped.root)
    shown = ramped.stream("r")
    assert shown["windows"] == RAMP.first_window(shown["steps"]) and shown["steps"] > 6
    answer = json.loads(cli("docs", "--step", "6", "--rank", "1", "--world-size", "2",
                            "--json").stdout)
    assert answer["step_windows"] == [18, 25]
    assert answer["rank_rule"] == {"micro_batch": 2, "rule": "micro-batches"}
    assert answer["rank_windows"] == [20, 21, 24, 25] and answer["windows"] == [20, 25]
    assert sorted({d["window"] for d in answer["documents"]}) == [20, 21, 24, 25]
    assert answer == ramped.docs_in_step(6, rank=1, world_size=2)
    whole = ramped.docs_in_step(4)
    assert whole["windows"] == [10, 13] and "rank_windows" not in whole
    # step 4 has 4 windows: 2 ranks of 2-window micro-batches divide it, 4 ranks do not
    refused = cli("docs", "--step", "4", "--rank", "0", "--world-size", "4", code=None)
    assert refused.exit_code == 2
    assert "must divide the batch of step 4 (4 windows) under rank rule micro-batches:2" \
        in refused.stderr
    assert cli("docs", "--step", "6", "--rank", "0", "--world-size", "4").exit_code == 0
    window = ramped.docs_in_step(6, rank=1, world_size=2, window=24)
    assert window["windows"] == [24, 24]
    with pytest.raises(UsageError, match="window 22 is not in step 6"):
        ramped.docs_in_step(6, rank=1, world_size=2, window=22)


def test_the_reader_follows_the_schedule_and_the_rank_rule(ramped: Store) -> None:
    reader = StreamReader(ramped, "r")
    assert [len(reader.windows(step)) for step in (0, 2, 3, 5, 6, 7)] == [2, 2, 4, 4, 8, 8]
    whole = reader.windows(6)
    mine = [reader.windows(6, rank=r, world_size=2) for r in (0, 1)]
    assert mine[0] == [whole[i] for i in (0, 1, 4, 5)]
    assert mine[1] == [whole[i] for i in (2, 3, 6, 7)]
    digests = reader.batch_digests(6, 2)
    for rank in (0, 1):
        segments = reader.segments(6, rank=rank, world_size=2)
        assert digests[rank] == batch_digest(segments)


def _chain(store: Store, path: Path, steps: int, *, data_skips: dict[int, int]) -> Path:
    reader = StreamReader(store, "r")
    chain = ChainWriter(path, config={"lr": 0.1}, stream=reader.info, world_size=2)
    weights = {"w": np.ones((2, 2), dtype=np.float32)}
    cursor = 0
    from lineage.runs.chain_batches import stream_batch_digests

    for step in range(steps):
        jump = data_skips.get(step, 0)
        first = cursor + jump
        cursor = first + RAMP.windows_of(step)
        chain.append(step, weights=weights, loss=1.0, grad_norm=0.5, lr=0.1, clipped=False,
                     skipped=False, rng={"seed": 1, "counter": step},
                     batch_digests=stream_batch_digests(store, "r", first, 2, step=step),
                     data_skip={"windows": jump, "reason": "bad shard"} if jump else None)
    chain.close()
    return path


def test_the_chain_cursor_follows_the_schedule(ramped: Store, tmp_path: Path) -> None:
    log = _chain(ramped, tmp_path / "steps.jsonl", 8, data_skips={})
    cursors = [json.loads(line).get("cursor") for line in log.read_text().splitlines()[1:9]]
    assert cursors == [RAMP.first_window(step + 1) for step in range(8)]
    ingest_steps(ramped, log, run="run", stream="r", world_size=2)
    report = verify_chain(ramped, "run")
    assert report["verdict"] == "ok" and report["batches_checked"], report
    # the digests a reader makes for a step are the chain's
    record = json.loads(log.read_text().splitlines()[7])
    assert record["batch_digests"] == StreamReader(ramped, "r").batch_digests(6, 2)
    traced = ramped.trace("run", step=6)
    assert sorted({w for d in traced["steps"][0]["documents"] for w in d["windows"]}) == \
        list(range(18, 26))


def test_a_data_skip_under_a_schedule_moves_trace_and_trained_on(
        ramped: Store, tmp_path: Path, example_shards: Path) -> None:
    log = _chain(ramped, tmp_path / "steps.jsonl", 8, data_skips={4: 3})
    ingest_steps(ramped, log, run="run", stream="r", world_size=2)
    assert verify_chain(ramped, "run")["verdict"] == "ok"
    traced = ramped.trace("run", step=5)  # after the skip: windows 17..20, not 14..17
    assert sorted({w for d in traced["steps"][0]["documents"] for w in d["windows"]}) == \
        list(range(17, 21))
    # a document read after the skip: its steps by the schedule, and the run's steps by
    # the cursors (step s read [cursor_s - B_s, cursor_s))
    doc_id = traced["steps"][0]["documents"][-1]["doc_id"]
    import gzip

    texts = {json.loads(line)["id"]: json.loads(line)["text"] for line in
             gzip.decompress((example_shards / "sonnets.jsonl.gz").read_bytes()).splitlines()}
    found = ramped.trained_on(texts=[texts[doc_id]], run="run")["results"][0]["matches"][0]
    assert found["steps"] == sorted({RAMP.step_of_window(w) for w in found["windows"]})
    cursors = [json.loads(line)["cursor"] for line in log.read_text().splitlines()[1:9]]
    read_by = {w: step for step, cursor in enumerate(cursors)
               for w in range(cursor - RAMP.windows_of(step), cursor)}
    assert found["run_steps"] == sorted({read_by[w] for w in found["windows"] if w in read_by})
    assert 5 in found["run_steps"] and found["run_steps"] != found["steps"]


def test_tampered_cursors_are_named_by_the_scheduled_batch(ramped: Store, tmp_path: Path) -> None:
    log = _chain(ramped, tmp_path / "steps.jsonl", 5, data_skips={})
    lines = log.read_text().splitlines()
    # a writer that ignored the ramp: step 3 read 2 windows, not 4
    from lineage.runs.chain import canonical_json, step_hash

    record = json.loads(lines[4])
    record["cursor"] -= 2
    record["state_hash"] = step_hash(record)
    lines[4] = canonical_json(record)
    (tmp_path / "bad.jsonl").write_text("\n".join(lines[:5]) + "\n")
    ingest_steps(ramped, tmp_path / "bad.jsonl", run="bad", stream="r", world_size=2)
    report = verify_chain(ramped, "bad")
    assert report["first_broken_step"] == 3
    assert "cursor 8 is not 10 windows (previous cursor 6 + batch 4)" in report["reason"]


def test_a_recorded_window_log_with_a_schedule(store: Store, example_shards: Path,
                                               tmp_path: Path) -> None:
    ingest_corpus(store, [example_shards / "sonnets.jsonl.gz"], corpus="sonnets")
    build_stream(store, corpus="sonnets", name="r", seed=11, seq_len=64, schedule=RAMP)
    rows = []
    for step in range(8):
        answer = store.docs_in_step(step, stream="r")
        for d in answer["documents"]:
            rows.append({"step": step, "rank": 0, "window": d["window"], "doc_id": d["doc_id"],
                         "token_start": d["token_start"], "token_end": d["token_end"]})
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    recorded = ingest_windows(store, log, stream="w", corpus="sonnets", seq_len=64,
                              schedule=RAMP, separator_tokens=1)
    assert recorded["schedule"] == RAMP.to_json() and recorded["steps"] == 8
    for step in (0, 3, 7):
        assert store.docs_in_step(step, stream="w")["documents"] == \
            store.docs_in_step(step, stream="r")["documents"]
    fixed = tmp_path / "fixed.jsonl"
    fixed.write_text(log.read_text())
    cli = Cli(store.root)
    refused = cli("ingest", "windows", str(fixed), "--stream", "f", "--corpus", "sonnets",
                  "--seq-len", "64", "--batch", "2", "--separator-tokens", "1", code=None)
    assert refused.exit_code == 2 and "step must be window // batch" in refused.stderr
    accepted = cli("ingest", "windows", str(fixed), "--stream", "f", "--corpus", "sonnets",
                   "--seq-len", "64", "--schedule", RAMP.to_text(), "--separator-tokens", "1",
                   "--json")
    assert accepted.exit_code == 0, accepted.stderr
    assert json.loads(accepted.stdout)["spec_hash"] == recorded["spec_hash"]


def test_the_spec_states_the_golden_vectors() -> None:
    import re

    page = (Path(__file__).parents[1] / "docs" / "stream-spec.md").read_text(encoding="utf-8")
    case = _golden()
    section = page[page.index("**Golden vectors**"):page.index("## 5.")]
    hashes = case["by_rank_rule"]
    assert case["by_rank_rule"]["contiguous"]["canonical_parameters"] in section
    assert re.findall(r"`(blake3:[0-9a-f]{64})`", section) == [
        hashes["contiguous"]["spec_hash"], hashes["strided"]["spec_hash"],
        hashes["micro-batches:2"]["spec_hash"], case["occurrences_digest"]]
    steps = " | ".join(f"{a}–{b}" if a != b else str(a) for a, b in case["step_windows"])
    assert f"the {case['steps']} steps take windows\n{steps} ({case['windows']} windows, " \
        f"{case['tokens']} tokens)" in section
    assert f"`--schedule-tokens {case['schedule_tokens']}`" in section
    rows = {(json.dumps(v["rank_rule"], sort_keys=True)): v["ranks"] for v in case["ranks"]
            if (v["step"], v["world_size"]) == (4, 2)}
    for name, rule in [("`contiguous`", {"rule": "contiguous"}),
                       ("`strided`", {"rule": "strided"}),
                       ("`micro-batches`, M = 2", {"micro_batch": 2, "rule": "micro-batches"})]:
        ranks = rows[json.dumps(rule, sort_keys=True)]
        assert f"| {name} | {', '.join(map(str, ranks[0]))} | " \
            f"{', '.join(map(str, ranks[1]))} |" in section


def test_the_lean_path_answers_a_scheduled_stream_like_the_full_command_line(
        ramped: Store, capsys: pytest.CaptureFixture[str]) -> None:
    from lineage.cli.fast import run_fast

    for args in (("docs", "--step", "6", "--rank", "1", "--world-size", "2", "--json"),
                 ("docs", "--step", "3", "--json"),
                 ("docs", "--step", "7", "--window", "27", "--json")):
        code = run_fast(["--store", str(ramped.root), *args])
        fast = capsys.readouterr().out
        full = Cli(ramped.root)(*args)
        assert code == 0 and fast == full.stdout, args
        step = RAMP.step_range(int(args[2]))
        assert json.loads(fast)["step_windows"] == [step[0], step[-1]]


def test_docs_prints_the_schedule_and_rank_rule_for_people(ramped: Store) -> None:
    printed = Cli(ramped.root)("docs", "--step", "6", "--rank", "1", "--world-size", "2")
    first = printed.stdout.splitlines()[0]
    assert "step 6: windows 20, 21, 24, 25 of step windows 18..25" in first
    assert "rank rule micro-batches:2" in first


def test_a_model_card_states_the_schedule(ramped: Store) -> None:
    from lineage.exports.card_text import _stream
    from lineage.stream.answers import shown_stream
    from lineage.stream.query import get_stream

    build_stream(ramped, corpus="sonnets", name="f", seed=11, seq_len=64, batch=4)
    ramp = _stream(shown_stream(get_stream(ramped, "r")))  # as the model card gives it
    assert "batch: windows per step by schedule (2 from step 0, 4 from step 3, 8 from " \
        "step 6); steps:" in ramp
    assert "batch: 4 windows per step; steps:" in _stream(shown_stream(get_stream(ramped,
                                                                                "f")))


def test_the_reader_looks_ahead_by_windows_under_the_schedule_and_rank_rule(
        ramped: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Steps read in order under a ramped schedule and a micro-batch rank rule read what
    each step read alone reads; a look-ahead spans READ_AHEAD_TOKENS of windows, not a
    count of steps of the size of the step it starts from."""
    from lineage.stream import reader as reader_module

    asked: list[set[str]] = []
    locations = reader_module.document_locations

    def recorded(con: object, store: Store, corpus: str, doc_ids: set[str]) -> object:
        asked.append(set(doc_ids))
        return locations(con, store, corpus, doc_ids)

    monkeypatch.setattr(reader_module, "document_locations", recorded)
    monkeypatch.setattr(reader_module, "READ_AHEAD_TOKENS", 8 * 64)  # 8 windows
    steps = int(ramped.stream("r")["steps"])
    for split, first in (({}, 0), ({"rank": 1, "world_size": 2}, 3)):  # 2 ranks from step 3
        reader = StreamReader(ramped, "r")
        for step in range(first, min(steps, 14)):
            assert reader.windows(step, **split) == \
                StreamReader(ramped, "r").windows(step, **split)
    # Steps of 1 window, then of 8: a look-ahead of 16 windows from a step of 1 window
    # near the change ends in the first step of 8 windows, not 16 steps on.
    build_stream(ramped, corpus="sonnets", name="slow", seed=11, seq_len=64,
                 schedule=parse_schedule("0:1,40:8"))
    monkeypatch.setattr(reader_module, "READ_AHEAD_TOKENS", 16 * 64)
    docs = [{s.doc_id for s in StreamReader(ramped, "slow").segments(step)}
            for step in range(60)]
    # A step with a document the step before lacks (so it looks ahead).
    step = [step for step in range(25, 40) if docs[step] - docs[step - 1]][-1]
    last = 40  # the first step of 8 windows holds the 16th window from `step`
    reader = StreamReader(ramped, "slow")
    reader.windows(step - 1)
    asked.clear()
    reader.windows(step)
    assert asked == [set().union(*docs[step:last + 1])]
    # 16 steps ahead, as many as 16 windows of steps of 1 window, would have held these.
    assert set().union(*docs[last + 1:step + 16]) - asked[0]
