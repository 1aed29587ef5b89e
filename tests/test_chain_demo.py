"""Tampering with a real run: the demo's tiny NumPy model trained over a real stream, with
clipping, its declared skip rule and checkpoints, then its log and checkpoints changed in
every way an auditor worries about. Each change is named at its step or file, with the
exit code the command line gives it."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from lineage.api import Store, init_store, open_store
from lineage.ingest import ingest_corpus
from lineage.runs.chain import canonical_json, end_hash, step_hash
from lineage.stream.build import build_stream

from . import chain_reference as ref
from .conftest import EXAMPLES, REPO, Cli, load_tiny_run

STEPS, EVERY, SKIP_ABOVE = 60, 20, 0.55  # the demo's run and rule, 60 steps of it
MALICIOUS = REPO / "tests" / "fixtures" / "pickles" / "torch" / "torch_malicious_reduce.pt"



@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, Path]:
    """The demo's store and stream, and the first 60 steps of its tiny run."""
    root = tmp_path_factory.mktemp("demo")
    init_store(root / "store")
    store = open_store(root / "store")
    ingest_corpus(store, [EXAMPLES / "corpus"], corpus="example", fingerprints=False)
    build_stream(store, corpus="example", name="s", seed=42, seq_len=1024, batch=4)
    load_tiny_run().train(store, "s", steps=STEPS, out=root / "run", skip_above=SKIP_ABOVE,
                          checkpoint_every=EVERY)
    return store, root / "run"


def lines_of(run: Path) -> list[str]:
    return (run / "steps.jsonl").read_text(encoding="utf-8").splitlines()


def write(path: Path, lines: list[str]) -> str:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def ingest(cli: Cli, log: str, run: str, code: int = 0) -> Any:
    return cli("ingest", "steps", log, "--run", run, "--stream", "s", "--world-size", "2",
               code=code)


def flip(lines: list[str], index: int, key: str) -> None:
    record = json.loads(lines[index])
    record[key] = not record[key]
    lines[index] = canonical_json(record)


def unskipped_trigger(run: Path) -> tuple[list[str], list[dict[str, Any]], int]:
    """The run's log lines and records with the first step its rule skips applied instead
    (its record rewritten, not yet re-linked), and that step."""
    lines = lines_of(run)
    records = [json.loads(line) for line in lines[1:-1]]
    trigger = next(r["step"] for r in records if r["grad_norm"] > SKIP_ABOVE)
    records[trigger]["skipped"] = False  # the trainer applied a batch its rule says to skip
    lines[trigger + 1] = canonical_json(records[trigger])
    return lines, records, trigger


def relink(lines: list[str], first: int) -> None:
    """Re-hash every record from line index `first` on, and the end record: a forger's
    complete rewrite of the tail."""
    for i in range(first, len(lines)):
        record = json.loads(lines[i])
        if "end" in record:
            record["last_state_hash"] = json.loads(lines[i - 1])["state_hash"]
            record["state_hash"] = end_hash(record)
        else:
            if i > first:
                record["prev_hash"] = json.loads(lines[i - 1])["state_hash"]
            record["state_hash"] = step_hash(record)
        lines[i] = canonical_json(record)


def test_the_honest_run_verifies_closed_and_true_to_its_rule(
        demo: tuple[Store, Path], tmp_path: Path) -> None:
    store, run = demo
    cli = Cli(store.root)
    records = [json.loads(line) for line in lines_of(run)[1:-1]]
    assert len(records) == STEPS and any(r["skipped"] for r in records)
    assert any(r["clipped"] for r in records)
    ingest(cli, str(run / "steps.jsonl"), "tiny")
    report = cli.json("chain", "verify", "tiny")
    assert (report["verdict"], report["closed"], report["steps_checked"]) == ("ok", True, STEPS)
    assert report["skip_rule"]["verdict"] == "ok"
    assert report["skip_rule"]["declared"] == {"grad_norm_above": SKIP_ABOVE,
                                               "rule": "lineage-skip/1", "skip_following": 4}
    assert report["skip_rule"]["skipped_steps"] == sum(r["skipped"] for r in records)


@pytest.mark.parametrize(("name", "edit", "line", "message"), [
    ("swapped", lambda ls: ls.__setitem__(slice(31, 33), [ls[32], ls[31]]), 32,
     "out of step order: step 31 follows step 29"),
    ("dropped", lambda ls: ls.__delitem__(41), 42, "out of step order: step 41 follows step 39"),
    ("duplicated", lambda ls: ls.insert(11, ls[11]), 13, "duplicate: step 10 is recorded twice"),
    ("edited", lambda ls: flip(ls, 26, "clipped"), 27, "step 25: state_hash does not follow"),
    ("cut-closed", lambda ls: ls.__delitem__(slice(51, 61)), 52,
     "cut: the end record says 60 steps, the log stops after step 49"),
])
def test_a_tampered_log_is_refused_at_its_line(
        demo: tuple[Store, Path], tmp_path: Path, name: str, edit: Any, line: int,
        message: str) -> None:
    store, run = demo
    lines = lines_of(run)
    edit(lines)
    out = ingest(Cli(store.root), write(tmp_path / f"{name}.jsonl", lines), name, code=2)
    assert out.stderr.startswith("error: ") and out.stderr.count("\n") == 1
    assert f"{name}.jsonl:line {line}: {message}" in out.stderr
    assert store.sql(f"SELECT count(*) FROM runs WHERE name = '{name}'").rows == [(0,)]


def test_an_edited_and_rehashed_record_is_caught_at_the_next_link(
        demo: tuple[Store, Path], tmp_path: Path) -> None:
    store, run = demo
    lines = lines_of(run)
    record = json.loads(lines[21])  # step 20
    record["loss"] = 0.5
    record["state_hash"] = step_hash(record)
    lines[21] = canonical_json(record)
    out = ingest(Cli(store.root), write(tmp_path / "rehashed.jsonl", lines), "rehashed", code=2)
    assert "line 23: step 21: prev_hash is not step 20's state_hash" in out.stderr


def test_a_rewritten_batch_is_caught_by_the_stream(demo: tuple[Store, Path],
                                                   tmp_path: Path) -> None:
    store, run = demo
    lines = lines_of(run)
    record = json.loads(lines[34])  # step 33 claims step 34's data
    record["batch_digests"] = json.loads(lines[35])["batch_digests"]
    lines[34] = canonical_json(record)
    relink(lines, 34)
    cli = Cli(store.root)
    ingest(cli, write(tmp_path / "batch.jsonl", lines), "batch")  # self-consistent bytes
    report = cli.json("chain", "verify", "batch", code=1)
    assert (report["first_broken_step"], report["steps_checked"]) == (33, 33)
    assert "batch digests differ" in report["reason"]
    # past the break nothing is evidence: the rule is not said to hold
    assert report["skip_rule"]["verdict"] == "not-checked"
    assert report["skip_rule"]["violations"] == []
    out = cli("chain", "verify", "batch", code=1)
    assert "every step agrees" not in out.stdout
    assert "not checked, the chain is broken (no violation in the 33 steps before" in out.stdout


def test_a_violation_before_the_break_still_stands(demo: tuple[Store, Path],
                                                   tmp_path: Path) -> None:
    store, run = demo
    lines, records, trigger = unskipped_trigger(run)  # a wrong decision,
    records[trigger + 3]["batch_digests"] = records[trigger + 4]["batch_digests"]  # a batch twice
    lines[trigger + 4] = canonical_json(records[trigger + 3])
    relink(lines, trigger + 1)
    cli = Cli(store.root)
    ingest(cli, write(tmp_path / "both.jsonl", lines), "both")
    report = cli.json("chain", "verify", "both", code=1)
    assert (report["verdict"], report["first_broken_step"]) == ("broken", trigger + 3)
    assert report["skip_rule"]["verdict"] == "violated"
    assert [v["step"] for v in report["skip_rule"]["violations"]] == [trigger]


def test_a_cut_open_chain_is_named_with_the_expected_length(
        demo: tuple[Store, Path], tmp_path: Path) -> None:
    store, run = demo
    cli = Cli(store.root)
    ingest(cli, write(tmp_path / "open.jsonl", lines_of(run)[:51]), "open")  # steps 0..49
    assert cli.json("chain", "verify", "open")["closed"] is False
    out = cli("chain", "verify", "open", "--expect-steps", str(STEPS), code=1)
    assert out.stdout.startswith("BROKEN at step 50: cut: 60 steps expected, the chain stops "
                                 "after step 49")


def test_a_skip_rule_violation_is_named_at_its_step(demo: tuple[Store, Path],
                                                    tmp_path: Path) -> None:
    store, run = demo
    lines, _, trigger = unskipped_trigger(run)
    relink(lines, trigger + 1)
    cli = Cli(store.root)
    ingest(cli, write(tmp_path / "rule.jsonl", lines), "rule")
    report = cli.json("chain", "verify", "rule", code=1)
    assert report["verdict"] == "rule-violated" and report["first_broken_step"] is None
    assert [v["step"] for v in report["skip_rule"]["violations"]] == [trigger]
    out = cli("chain", "verify", "rule", code=1)
    assert f"skip rule VIOLATED at step {trigger}: grad norm" in out.stdout


def test_checkpoints_as_evidence(demo: tuple[Store, Path], tmp_path: Path) -> None:
    store, run = demo
    cli = Cli(store.root)
    ingest(cli, str(run / "steps.jsonl"), "ckpt")
    good = cli.json("ingest", "checkpoint", str(run / "checkpoint-19"), "--run", "ckpt",
                    "--step", "19")
    assert good["ok"] and good["matches_chain"] is True and good["matches_state"] is True
    assert good["risks"] == {"ok": True, "findings": [], "allowed": []}

    lying = tmp_path / "lying"  # the checkpoint of step 39 claimed as step 20's
    shutil.copytree(run / "checkpoint-39", lying)
    out = cli("ingest", "checkpoint", str(lying), "--run", "ckpt", "--step", "20", code=1)
    assert "DIFFERS from the chain" in out.stdout and "FAILED" in out.stdout
    stored = cli.json("run", "checkpoints", "ckpt")["checkpoints"]
    assert [(c["step"], c["ok"], c["matches_chain"]) for c in stored] == \
        [(19, True, True), (20, False, False)]  # the lie is kept: it is evidence

    moments = tmp_path / "moments"  # weights intact, optimizer state changed
    shutil.copytree(run / "checkpoint-39", moments)
    state = load_file(str(moments / "optimizer" / "state.safetensors"))
    name = sorted(k for k in state if k.startswith("optimizer/"))[0]
    state[name] = (state[name] + np.float32(1e-3)).astype(np.float32)
    save_file(state, str(moments / "optimizer" / "state.safetensors"))
    result = cli.json("ingest", "checkpoint", str(moments), "--run", "ckpt", "--step", "39",
                      code=1)
    assert (result["matches_chain"], result["matches_state"]) == (True, False)

    risky = tmp_path / "risky"  # a true checkpoint with a pickle that runs a command
    shutil.copytree(run / "checkpoint-59", risky)
    shutil.copy(MALICIOUS, risky / "training_args.bin")
    out = cli("ingest", "checkpoint", str(risky), "--run", "ckpt", "--step", "59", code=1)
    assert "risk    training_args.bin: pickle-dangerous-global (DANGEROUS)" in out.stdout
    assert "posix" in out.stdout and "matches the chain" in out.stdout

    listing = cli.json("run", "checkpoints", "ckpt", "--nearest", "58")
    assert listing["missing"] == [] and listing["expected"] == 3
    assert listing["nearest"]["step"] == 19  # 20 lied, 39 has other moments, 59 a pickle
    none = cli("run", "checkpoints", "ckpt", "--nearest", "10", code=1)
    assert "no good checkpoint at or before step 10" in none.stderr


def test_a_dangerous_finding_can_be_allowed_by_name_only(demo: tuple[Store, Path],
                                                         tmp_path: Path) -> None:
    store, run = demo
    cli = Cli(store.root)
    ingest(cli, str(run / "steps.jsonl"), "allow")
    risky = tmp_path / "risky"
    shutil.copytree(run / "checkpoint-59", risky)
    shutil.copy(MALICIOUS, risky / "training_args.bin")
    wrong = cli.json("ingest", "checkpoint", str(risky), "--run", "allow", "--step", "59",
                     "--allow-risk", "python-code", code=1)
    assert wrong["risks"]["ok"] is False
    allowed = cli.json("run", "checkpoints", "allow")
    assert allowed["checkpoints"][0]["risks_ok"] is False
    listing = cli.json("run", "checkpoints", "allow")
    assert listing["missing"] == [19, 39]
    other = tmp_path / "risky2"
    shutil.copytree(risky, other)
    passed = cli.json("ingest", "checkpoint", str(other), "--run", "allow", "--step", "39",
                      "--allow-risk", "pickle-dangerous-global", code=1)  # weights of 59
    assert passed["risks"]["ok"] is True and passed["matches_chain"] is False
    assert passed["risks"]["findings"][0]["allowed"] is True


def test_the_reference_recomputes_the_demo_run_from_the_spec(demo: tuple[Store, Path]) -> None:
    """Every state hash, the skip decisions, the batch digests of a few steps, and the
    weights and state digests of each checkpoint, by tests/chain_reference.py."""
    store, run = demo
    lines = lines_of(run)
    assert ref.first_bad_line(lines, batch=4) is None
    header, records = json.loads(lines[0]), [json.loads(line) for line in lines[1:-1]]
    assert ref.must_skip(records, header["skip_rule"]) == [r["skipped"] for r in records]
    for step in (0, 35, STEPS - 1):
        for rank in range(2):
            documents = store.docs_in_step(step, stream="s", rank=rank, world_size=2)
            segments = [(d["window"], d["doc_id"], d["token_start"], d["token_end"])
                        for d in documents["documents"]]
            assert ref.batch_digest(segments) == records[step]["batch_digests"][rank]
    for step in range(EVERY - 1, STEPS, EVERY):
        folder = run / f"checkpoint-{step}"
        weights = load_file(str(folder / "model.safetensors"))
        state = load_file(str(folder / "optimizer" / "state.safetensors"))
        assert ref.tensor_digest(weights) == records[step]["weights_digest"]
        named = {"weights/" + k: v for k, v in weights.items()} | state
        assert ref.tensor_digest(named) == records[step]["state_digest"]


def test_a_checkpoint_without_weights_fails_even_with_a_matching_list(
        demo: tuple[Store, Path], tmp_path: Path) -> None:
    """`verify --sums` judges a folder without weights by its list alone; a checkpoint
    is its weights, so one without them fails whatever its list says."""
    store, run = demo
    cli = Cli(store.root)
    ingest(cli, str(run / "steps.jsonl"), "empty")
    folder = tmp_path / "no-weights"
    folder.mkdir()
    (folder / "notes.txt").write_text("the weights were never copied\n")
    sums = tmp_path / "SHA256SUMS"
    sums.write_text(hashlib.sha256((folder / "notes.txt").read_bytes()).hexdigest()
                    + "  notes.txt\n")
    result = cli.json("ingest", "checkpoint", str(folder), "--run", "empty", "--step", "19",
                      "--sums", str(sums), code=1)
    assert result["ok"] is False and result["verdicts"]["checksums"]["ok"] is True
    assert result["verdicts"]["structure"]["ok"] is False
