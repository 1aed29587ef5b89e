"""The typed answers of trained-on, trace, run list/show/checkpoints and chain verify: the
command's --json is the Python answer's to_json(), nested values are typed, and the tables
have the documented columns and rows."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from safetensors.numpy import save_file

from lineage.answer import Answer, AnswerList, optional
from lineage.api import Store, init_store, open_store
from lineage.cli.fast import run_fast
from lineage.ingest import ingest_corpus
from lineage.ingest.checkpoint import ingest_checkpoint
from lineage.ingest.steps import ingest_steps
from lineage.runs.answers import (
    ChainVerification,
    Checkpoints,
    CheckpointVerdict,
    NearestCheckpoint,
    Run,
    RunSegment,
    RunSkipRule,
    RunSummary,
    SkipRuleVerdict,
    SkipViolation,
    Trace,
    TracedDocument,
    TracedStep,
)
from lineage.runs.skip_rule import SkipRule
from lineage.stream.build import build_stream
from lineage.text import trained_on as core
from lineage.text.answers import (
    ExactMatch,
    FingerprintParameters,
    QueryAnswer,
    TextEvidence,
    TextIndexSpec,
    TextMatch,
    TextSpan,
    TrainedOn,
)

from .conftest import Cli
from .test_chain import WORLD, write_log
from .test_trace import sonnet_within

MATCH_COLUMNS = ["file", "verdict", "corpus", "source", "doc_id", "content_hash", "match",
                 "containment", "fingerprints", "similarity", "manifest_hash", "stream",
                 "spec_hash", "steps", "windows", "epochs", "run_steps", "run_verdict"]
TRACE_COLUMNS = ["step", "loss", "grad_norm", "lr", "clipped", "skipped", "state_hash",
                 "doc_id", "source", "uri", "content_hash", "epoch", "windows", "tokens"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, example_shards: Path) -> Store:
    """Stream "s" over the sonnets; run "r" (40 steps, a skip rule that step 30 breaks),
    run "c" (closed, checkpoints every 2 steps, two recorded) and run "empty" (no step)."""
    root = tmp_path_factory.mktemp("answers-runs")
    init_store(root / "store")
    store = open_store(root / "store")
    ingest_corpus(store, [example_shards / "sonnets.jsonl.gz"], corpus="sonnets")
    build_stream(store, corpus="sonnets", name="s", seed=11, seq_len=64, batch=4)
    log = write_log(store, root / "r.jsonl", range(40), clip_at={7, 30},
                    skip_at={7, 8, 9, 10, 11}, skip_rule=SkipRule(1.2, 4))
    ingest_steps(store, log, run="r", stream="s", world_size=WORLD)
    log = write_log(store, root / "c.jsonl", range(6), close=True, checkpoint_every=2)
    ingest_steps(store, log, run="c", stream="s", world_size=WORLD)
    for step in (1, 3):
        ingest_checkpoint(store, _checkpoint(root / f"ckpt-{step}", step), run="c", step=step)
    log = write_log(store, root / "empty.jsonl", range(0))
    ingest_steps(store, log, run="empty", stream="s", world_size=WORLD)
    return store


def _checkpoint(folder: Path, step: int) -> Path:
    """The weights write_log's trainer holds after `step`, saved by safetensors."""
    w = np.random.Generator(np.random.Philox(1)).standard_normal((4, 3)).astype(np.float32)
    for _ in range(step + 1):
        w = (w * 0.99).astype(np.float32)
    folder.mkdir()
    save_file({"w": w}, str(folder / "model.safetensors"), metadata={"format": "np"})
    return folder


def _same_output(store: Store, answer: Answer | AnswerList[Any], *args: str,
                 code: int = 0) -> None:
    """The command prints exactly the answer's to_json(), and exits with `code`."""
    result = Cli(store.root)(*args, "--json", code=code)
    assert result.stdout == answer.to_json() + "\n"
    assert json.loads(result.stdout) == (answer.to_list() if isinstance(answer, AnswerList)
                                         else answer.to_dict())


# -- trained-on -----------------------------------------------------------------------------


def test_trained_on_prints_the_typed_answer(runs: Store, example_shards: Path,
                                            tmp_path: Path) -> None:
    early = sonnet_within(runs, example_shards, tmp_path, 0, 6)
    late = sonnet_within(runs, example_shards, tmp_path, 60, 200)
    text = early.read_text(encoding="utf-8")
    excerpt = "\n".join(late.read_text(encoding="utf-8").splitlines()[2:9])
    answer = runs.trained_on([str(early)])
    _same_output(runs, answer, "trained-on", str(early))
    both = runs.trained_on([str(early), str(late)], texts=[text.upper(), excerpt, " ... "])
    _same_output(runs, both, "trained-on", str(early), str(late), "--text", text.upper(),
                 "--text", excerpt, "--text", " ... ", code=1)
    with_run = runs.trained_on([str(early), str(late)], texts=[text.upper()], run="r")
    _same_output(runs, with_run, "trained-on", str(early), str(late), "--text",
                 text.upper(), "--run", "r", code=1)
    none_yet = runs.trained_on([str(early)], run="empty", min_containment=0.9, limit=3)
    _same_output(runs, none_yet, "trained-on", str(early), "--run", "empty",
                 "--min-containment", "0.9", "--limit", "3", code=1)
    assert none_yet.run == "empty" and none_yet.run_last_step is None
    assert "run_last_step" in none_yet.to_dict()


def test_trained_on_answers_are_typed_all_the_way_down(runs: Store, example_shards: Path,
                                                       tmp_path: Path) -> None:
    early = sonnet_within(runs, example_shards, tmp_path, 0, 6)
    text = early.read_text(encoding="utf-8")
    answer = runs.trained_on([str(early)], texts=[text.upper(), "   "], run="r")
    exact, same_text, wordless = answer.results
    assert isinstance(answer, TrainedOn) and isinstance(exact, QueryAnswer)
    assert exact.verdict == "trained" and answer.run_last_step == 39
    (placed,) = exact.matches
    assert isinstance(placed, ExactMatch) and placed.stream == "s" and placed.steps
    assert isinstance(placed.steps, tuple) and placed.run_verdict == "trained"
    (matched,) = same_text.matches
    assert isinstance(matched, TextMatch) and matched.match == "text"
    assert isinstance(matched.index, TextIndexSpec) and matched.index.k == 5
    assert all(isinstance(span, TextSpan) for span in matched.spans)
    assert (same_text.verdict, same_text.run_verdict) == ("text-match", "trained")
    assert matched.content_hash == exact.content_hash and same_text.words > 0
    # A text without words is matched as text (it has a word count) and has no text hash.
    assert (wordless.verdict, wordless.words, wordless.text_hash) == ("not-found", 0, None)
    assert wordless.to_dict()["text_hash"] is None
    evidence = answer.text_evidence
    assert isinstance(evidence, TextEvidence)
    assert isinstance(evidence.fingerprint, FingerprintParameters)
    assert evidence.min_containment == core.DEFAULT_MIN_CONTAINMENT
    assert answer["results"][0]["matches"][0]["doc_id"] == placed.doc_id  # still a Mapping


def test_trained_on_to_polars_is_one_row_per_query_and_match(
        runs: Store, example_shards: Path, tmp_path: Path) -> None:
    early = sonnet_within(runs, example_shards, tmp_path, 0, 6)
    excerpt = "\n".join(early.read_text(encoding="utf-8").splitlines()[1:10])
    answer = runs.trained_on([str(early)], texts=[excerpt, "nothing like any sonnet"],
                             run="r")
    table = answer.to_polars()
    assert table.columns == MATCH_COLUMNS
    expected = [(r.file, r.verdict, m.doc_id, m.match) for r in answer.results
                for m in r.matches]
    assert list(zip(table["file"], table["verdict"], table["doc_id"], table["match"],
                    strict=True)) == expected
    assert table.height == len(expected) >= 2
    assert "<text 2>" not in table["file"].to_list()  # no match, no row
    exact = table.row(0, named=True)
    result = answer.results[0]
    assert exact["content_hash"] == result.content_hash and exact["fingerprints"] is None
    assert exact["steps"] == list(result.matches[0].steps) and exact["run_verdict"] == "trained"
    assert table.filter(table["match"] == "partial")["fingerprints"].min() > 0
    assert runs.trained_on(texts=["nothing like any sonnet"]).to_polars().columns == \
        MATCH_COLUMNS


def test_the_store_method_has_the_commands_defaults() -> None:
    parameters = inspect.signature(Store.trained_on).parameters
    assert parameters["min_containment"].default == core.DEFAULT_MIN_CONTAINMENT
    assert parameters["limit"].default == core.DEFAULT_LIMIT
    assert all(p.kind is p.KEYWORD_ONLY for name, p in parameters.items()
               if name not in ("self", "files"))


def test_the_lean_path_prints_the_typed_answer(runs: Store, example_shards: Path,
                                               tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    early = sonnet_within(runs, example_shards, tmp_path, 0, 6)
    code = run_fast(["--store", str(runs.root), "trained-on", str(early), "--run", "r",
                     "--json"])
    assert code == 0
    assert capsys.readouterr().out == runs.trained_on([str(early)], run="r").to_json() + "\n"


# -- trace ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("options", "args"), [
    ({"step": 3}, ("--step", "3")),
    ({"clipped": True}, ("--clipped",)),
    ({"skipped": True, "limit": 2}, ("--skipped", "--limit", "2")),
])
def test_trace_prints_the_typed_answer(runs: Store, options: dict[str, Any],
                                       args: tuple[str, ...]) -> None:
    answer = runs.trace("r", **options)
    _same_output(runs, answer, "trace", "--run", "r", *args)


def test_trace_is_typed_and_its_table_is_one_row_per_step_and_document(runs: Store) -> None:
    answer = runs.trace("r", skipped=True)
    assert isinstance(answer, Trace) and [s.step for s in answer.steps] == [7, 8, 9, 10, 11]
    step = answer.steps[0]
    assert isinstance(step, TracedStep) and step.skipped and step.clipped
    assert all(isinstance(d, TracedDocument) and d.tokens > 0 for d in step.documents)
    table = answer.to_polars()
    assert table.columns == TRACE_COLUMNS
    expected = [(s.step, d.doc_id, list(d.windows), d.tokens) for s in answer.steps
                for d in s.documents]
    assert list(zip(table["step"], table["doc_id"], table["windows"].to_list(),
                    table["tokens"], strict=True)) == expected
    assert table.filter(table["step"] == 7)["tokens"].sum() == \
        sum(d.tokens for d in step.documents)
    none = runs.trace("c", clipped=True).to_polars()
    assert none.columns == TRACE_COLUMNS and none.height == 0


# -- run list / show / checkpoints ----------------------------------------------------------


def test_run_list_and_show_print_the_typed_answers(runs: Store) -> None:
    listed = runs.runs()
    _same_output(runs, listed, "run", "list")
    assert [r.name for r in listed] == ["c", "empty", "r"]
    assert all(isinstance(r, RunSummary) for r in listed)
    table = listed.to_polars()
    assert table["name"].to_list() == ["c", "empty", "r"]
    assert table["last_step"].to_list() == [5, None, 39]
    for name in ("c", "empty", "r"):
        _same_output(runs, runs.run(name), "run", "show", name)
    run = runs.run("r")
    assert isinstance(run, Run) and isinstance(run.skip_rule, RunSkipRule)
    assert run.skip_rule.grad_norm_above == 1.2 and run.skip_rule.skip_following == 4
    assert run.clipped_steps == (7, 30) and run.skipped_steps == (7, 8, 9, 10, 11)
    assert isinstance(run.segments[0], RunSegment) and run.segments[0].records == 40
    closed = runs.run("c")
    assert closed.closed and closed.skip_rule is None and closed.checkpoint_every == 2
    assert all(isinstance(c, CheckpointVerdict) for c in closed.checkpoints)
    assert [c.step for c in closed.checkpoints] == [1, 3]


def test_checkpoints_print_the_typed_answer_and_table(runs: Store) -> None:
    plain = runs.checkpoints("c")
    _same_output(runs, plain, "run", "checkpoints", "c")
    assert plain.nearest is None and "nearest_to" not in plain
    assert plain.missing == (5,) and plain.expected == 3
    near = runs.checkpoints("c", nearest=4)
    _same_output(runs, near, "run", "checkpoints", "c", "--nearest", "4")
    assert isinstance(near, Checkpoints) and isinstance(near.nearest, NearestCheckpoint)
    assert (near.nearest.step, near.nearest.replays, near.nearest_to) == (3, 1, 4)
    table = near.to_polars()
    assert table.columns == ["step", "structure_ok", "checksums_ok", "matches_chain",
                             "matches_state", "risks_ok", "ok"]
    assert table["step"].to_list() == [1, 3] and table["matches_chain"].to_list() == [True,
                                                                                     True]
    assert runs.checkpoints("r").to_polars().height == 0


# -- chain verify ---------------------------------------------------------------------------


def test_chain_verify_prints_the_typed_answer(runs: Store) -> None:
    violated = runs.verify_chain("r")
    _same_output(runs, violated, "chain", "verify", "r", code=1)
    assert isinstance(violated, ChainVerification) and violated.verdict == "rule-violated"
    rule = violated.skip_rule
    assert isinstance(rule, SkipRuleVerdict) and rule.verdict == "violated"
    assert rule.description is not None and rule.reason is None
    assert all(isinstance(v, SkipViolation) for v in rule.violations)
    assert [v.step for v in rule.violations][0] == 30
    closed = runs.verify_chain("c", batches=False)
    _same_output(runs, closed, "chain", "verify", "c", "--no-batches")
    assert closed.ok and not closed.batches_checked and closed.end_steps == 6
    assert "description" not in closed.skip_rule and closed.skip_rule.declared is None
    short = runs.verify_chain("r", expect_steps=50)
    _same_output(runs, short, "chain", "verify", "r", "--expect-steps", "50", code=1)
    assert (short.verdict, short.first_broken_step) == ("broken", 40)


# -- the answer machinery these answers need ------------------------------------------------


class _Tagged(Answer):
    tag: str | None = optional()
    value: int | None = optional(present_with="tag")


def test_a_key_present_with_another_may_be_null_and_is_checked() -> None:
    assert _Tagged.from_dict({"tag": "a", "value": None}).to_dict() == {"tag": "a",
                                                                       "value": None}
    assert _Tagged.from_dict({}).to_dict() == {} and len(_Tagged.from_dict({})) == 0
    assert dict(_Tagged.from_dict({"tag": "a", "value": 3})) == {"tag": "a", "value": 3}
    with pytest.raises(TypeError, match="exactly when"):
        _Tagged.from_dict({"tag": "a"})
    with pytest.raises(TypeError, match="exactly when"):
        _Tagged.from_dict({"value": 3})


def test_a_match_is_read_as_the_type_its_keys_fit(runs: Store, example_shards: Path,
                                                   tmp_path: Path) -> None:
    early = sonnet_within(runs, example_shards, tmp_path, 0, 6)
    answer = runs.trained_on([str(early)]).to_dict()
    match = answer["results"][0]["matches"][0]
    swapped = {"corpus": match["corpus"], "source": match["source"], **match}
    with pytest.raises(TypeError, match="ExactMatch.*TextMatch"):
        QueryAnswer.from_dict({**answer["results"][0], "matches": [swapped]})


@given(st.one_of(st.just({}), st.builds(
    lambda tag, value: {"tag": tag, "value": value},
    st.text(max_size=5), st.one_of(st.none(), st.integers()))))
def test_answers_with_a_key_present_with_another_read_back_as_they_print(
        data: dict[str, Any]) -> None:
    answer = _Tagged.from_dict(data)
    assert answer.to_dict() == data and dict(answer) == data
    assert json.loads(answer.to_json()) == data and list(answer) == list(data)
