"""The step hash chain: the trainer helper, ingest of step logs (which refuses any line
that breaks the spec), and verification that names the exact step of any tampering."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lineage.api import Store
from lineage.errors import InputError, UsageError
from lineage.ingest.steps import ingest_steps
from lineage.runs.chain import (
    CHAIN_SPEC_V1,
    ChainWriter,
    canonical_json,
    genesis_hash_v1,
    line_step_hash,
    step_hash,
    tensor_digest,
)
from lineage.runs.chain_batches import stream_batch_digests
from lineage.runs.chain_verify import verify_chain
from lineage.runs.skip_rule import SkipRule
from lineage.stream.reader import StreamReader

from . import chain_reference as ref
from .conftest import Cli

WORLD = 2


def write_log(store: Store, path: Path, steps: range, *, config: dict[str, Any] | None = None,
              clip_at: set[int] = frozenset(), skip_at: set[int] = frozenset(),
              norms: dict[int, float] | None = None, skip_rule: SkipRule | None = None,
              data_skips: dict[int, int] | None = None, close: bool = False,
              checkpoint_every: int | None = None) -> Path:
    """A real chain over stream "s" (tensors digested, batch digests from the stream)."""
    reader = StreamReader(store, "s")
    chain = ChainWriter(path, config=config or {"lr": 0.1}, stream=reader.info,
                        world_size=WORLD, skip_rule=skip_rule, checkpoint_every=checkpoint_every)
    rng = np.random.Generator(np.random.Philox(1))
    weights = {"w": rng.standard_normal((4, 3)).astype(np.float32)}
    cursor = 0
    for step in steps:
        jump = (data_skips or {}).get(step, 0)
        cursor += jump + 4
        weights = {"w": (weights["w"] * 0.99).astype(np.float32)}
        chain.append(step, weights=weights, optimizer={"m": weights["w"] * 0.5},
                     gradients={"w": weights["w"] * 0.01},
                     batch_digests=stream_batch_digests(store, "s", cursor - 4, WORLD),
                     loss=3.0 - step / 100,
                     grad_norm=(norms or {}).get(step, 0.5 + (step in clip_at)), lr=0.1,
                     clipped=step in clip_at, skipped=step in skip_at,
                     rng={"seed": 1, "counter": step},
                     data_skip={"windows": jump, "reason": "shard 3 unreadable after resume"}
                     if jump else None)
    if close:
        chain.close()
    return path


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _ingest(store: Store, path: Path, run: str = "r") -> dict[str, Any]:
    return ingest_steps(store, path, run=run, stream="s", world_size=WORLD)


def _refused(store: Store, path: Path, line: int, match: str, run: str = "r") -> None:
    with pytest.raises(InputError, match=match) as caught:
        _ingest(store, path, run)
    assert caught.value.where == f"line {line}", caught.value
    assert store.sql(f"SELECT count(*) FROM runs WHERE name = '{run}'").rows == [(0,)]


def test_an_honest_run_verifies_and_reingest_is_a_no_op(run_store: Store, tmp_path: Path) -> None:
    log = write_log(run_store, tmp_path / "steps.jsonl", range(30), clip_at={3, 4},
                    skip_at={4, 5, 6, 7, 8}, close=True)
    first = _ingest(run_store, log)
    assert first["new_steps"] == 30 and first["closed"] is True
    again = _ingest(run_store, log)
    assert (again["status"], again["new_steps"]) == ("unchanged", 0)
    report = verify_chain(run_store, "r")
    assert report["ok"] and report["verdict"] == "ok" and report["checked"] == "full"
    assert report["steps_checked"] == 30 and report["closed"] and report["end_steps"] == 30
    assert report["skip_rule"]["verdict"] == "no rule declared"
    from lineage.runs.query import get_run

    run = get_run(run_store, "r")
    assert run["clipped_steps"] == [3, 4] and run["skipped_steps"] == [4, 5, 6, 7, 8]
    assert run["last_step"] == 29 and len(run["segments"]) == 1 and run["closed"] is True


@pytest.mark.parametrize("step", [0, 7, 19])
@pytest.mark.parametrize("field", ["loss", "lr", "cursor", "clipped", "state_digest"])
def test_changing_any_field_is_refused_at_that_line(
    run_store: Store, tmp_path: Path, step: int, field: str
) -> None:
    log = write_log(run_store, tmp_path / "steps.jsonl", range(20))
    lines = _lines(log)
    record = json.loads(lines[step + 1])
    value = record[field]
    record[field] = (not value) if isinstance(value, bool) else (
        value + 1 if isinstance(value, int | float) else "blake3:" + "0" * 64)
    lines[step + 1] = canonical_json(record)
    _refused(run_store, _write(log, lines), step + 2,
             f"step {step}: state_hash does not follow from the record")


def test_a_flipped_byte_anywhere_is_refused_at_its_line(run_store: Store, tmp_path: Path) -> None:
    log = write_log(run_store, tmp_path / "steps.jsonl", range(12))
    original = _lines(log)
    for step in range(12):
        line = original[step + 1]
        for position in range(0, len(line), 23):
            lines = list(original)
            lines[step + 1] = line[:position] + chr(ord(line[position]) ^ 1) + line[position + 1:]
            target = _write(tmp_path / f"t{step}-{position}.jsonl", lines)
            with pytest.raises(InputError) as caught:
                _ingest(run_store, target, run=f"t{step}x{position}")
            assert caught.value.where == f"line {step + 2}", (step, position, caught.value)
    assert run_store.sql("SELECT count(*) FROM steps").rows == [(0,)]


@pytest.mark.parametrize(("edit", "line", "match"), [
    (lambda ls: ls.__setitem__(slice(6, 8), [ls[7], ls[6]]), 7,
     "out of step order: step 6 follows step 4"),
    (lambda ls: ls.insert(7, ls[6]), 8, r"duplicate: step 5 is recorded twice \(lines 7 and 8\)"),
    (lambda ls: ls.__delitem__(6), 7, "out of step order: step 6 follows step 4 .*step 5 is "
     "not here"),
    (lambda ls: ls.__setitem__(4, json.dumps(json.loads(ls[4]), indent=None)), 5,
     "step 3: the line is not canonical"),
    (lambda ls: ls.__setitem__(4, ls[4] + "\r"), 5, "CRLF"),
    (lambda ls: ls.__setitem__(1, ls[1].replace('"step":0', '"step":-1')), 2, "integer `step`"),
])
def test_order_and_bytes_are_refused_at_the_line(
    run_store: Store, tmp_path: Path, edit: Callable[[list[str]], None], line: int, match: str
) -> None:
    log = write_log(run_store, tmp_path / "steps.jsonl", range(10))
    lines = _lines(log)
    edit(lines)
    _refused(run_store, _write(log, lines), line, match)


def test_an_edited_and_rehashed_record_breaks_the_next_link(
        run_store: Store, tmp_path: Path) -> None:
    log = write_log(run_store, tmp_path / "steps.jsonl", range(10), close=True)
    lines = _lines(log)
    record = json.loads(lines[5])  # step 4
    record["loss"] = 0.0
    record["state_hash"] = step_hash(record)
    lines[5] = canonical_json(record)
    _refused(run_store, _write(log, lines), 7, "step 5: prev_hash is not step 4's state_hash")
    # the last step edited and re-hashed: the end record no longer follows it
    lines = _lines(write_log(run_store, tmp_path / "b.jsonl", range(10), close=True))
    record = json.loads(lines[10])
    record["loss"] = 0.0
    record["state_hash"] = step_hash(record)
    lines[10] = canonical_json(record)
    _refused(run_store, _write(log, lines), 12, "end record's last_state_hash is not step 9")


def test_input_bounds_are_named_rules(run_store: Store, tmp_path: Path) -> None:
    lines = _lines(write_log(run_store, tmp_path / "steps.jsonl", range(3)))
    huge = json.loads(lines[3])
    huge["step"] = 10**30
    _refused(run_store, _write(tmp_path / "huge.jsonl", [*lines[:3], canonical_json(huge)]), 4,
             r"integer `step` in 0\.\.9007199254740991")
    deep = '{"step":3,"x":' + "[" * 100_000 + "]" * 100_000 + "}"
    _refused(run_store, _write(tmp_path / "deep.jsonl", [*lines[:3], deep]), 4,
             "nested deeper than 32 levels")
    tricky = '{"step":2,"x":"' + "[" * 40 + '\\""}'  # brackets inside a string are text
    _refused(run_store, _write(tmp_path / "s.jsonl", [*lines[:3], tricky]), 4,
             "step 2: state_hash does not follow")
    out = Cli(run_store.root)("ingest", "steps", str(tmp_path / "deep.jsonl"), "--run", "d",
                              "--stream", "s", "--world-size", "2", code=2)
    assert out.stderr.startswith("error: ") and out.stderr.count("\n") == 1
    assert "deep.jsonl:line 4: JSON nested deeper than 32 levels" in out.stderr


def test_restart_segments_forks_and_a_cut_line(run_store: Store, tmp_path: Path) -> None:
    lines = _lines(write_log(run_store, tmp_path / "full.jsonl", range(20), close=True))
    first = _write(tmp_path / "seg0.jsonl", lines[:13])  # steps 0..11
    second = _write(tmp_path / "seg1.jsonl", [lines[0], *lines[9:]])  # 8..19 and the end
    _refused(run_store, second, 2, "step 8: the run's chain so far stops before step 0")
    assert _ingest(run_store, first)["new_steps"] == 12
    assert verify_chain(run_store, "r")["closed"] is False
    added = _ingest(run_store, second)
    assert added["new_steps"] == 8 and added["segment"] == 1 and added["closed"]
    assert verify_chain(run_store, "r")["ok"]

    other = write_log(run_store, tmp_path / "other.jsonl", range(15), clip_at={10})
    disagree = _write(tmp_path / "seg2.jsonl", [lines[0], *_lines(other)[11:]])
    with pytest.raises(InputError, match="step 10 disagrees"):
        _ingest(run_store, disagree)
    beyond = write_log(run_store, tmp_path / "beyond.jsonl", range(22))
    with pytest.raises(InputError, match="step 20: the run was closed after 20 steps"):
        _ingest(run_store, _write(beyond, [lines[0], *_lines(beyond)[20:]]))
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(lines[:8]) + "\n" + lines[8][: len(lines[8]) // 2],
                   encoding="utf-8")
    _refused(run_store, cut, 9, "malformed JSON", run="cut")


def test_a_restart_segment_must_join_the_stored_chain(run_store: Store, tmp_path: Path) -> None:
    lines = _lines(write_log(run_store, tmp_path / "a.jsonl", range(10)))
    _ingest(run_store, _write(tmp_path / "seg0.jsonl", lines[:6]))  # steps 0..4
    other = _lines(write_log(run_store, tmp_path / "b.jsonl", range(10), config={"lr": 0.1},
                             clip_at={2}))
    with pytest.raises(InputError, match="step 5: prev_hash is not the stored step 4's"):
        _ingest(run_store, _write(tmp_path / "seg1.jsonl", [lines[0], *other[6:]]))


def test_end_records_and_expected_length(run_store: Store, tmp_path: Path) -> None:
    lines = _lines(write_log(run_store, tmp_path / "steps.jsonl", range(20), close=True))
    _refused(run_store, _write(tmp_path / "cut.jsonl", [*lines[:16], lines[-1]]), 17,
             "cut: the end record says 20 steps, the log stops after step 14")
    # the tail segment lost, the end record ingested on its own: refused at its line
    _ingest(run_store, _write(tmp_path / "head.jsonl", lines[:16]))
    with pytest.raises(InputError, match="cut: the end record says 20 steps, the stored "
                       "chain stops after step 14") as caught:
        _ingest(run_store, _write(tmp_path / "end.jsonl", [lines[0], lines[-1]]))
    assert caught.value.where == "line 2"
    # a catalog whose tail rows were deleted: verify names the first missing step
    _ingest(run_store, _write(tmp_path / "all.jsonl", lines))
    with run_store.writer() as con:
        con.execute("DELETE FROM steps WHERE run = 'r' AND step >= 15")
    report = verify_chain(run_store, "r")
    assert (report["verdict"], report["first_broken_step"], report["closed"]) == \
        ("broken", 15, True)
    assert "steps 15..19 are missing" in report["reason"]
    # an open chain: ok, and open; with --expect-steps the cut is named
    _ingest(run_store, _write(tmp_path / "open.jsonl", lines[:16]), run="open")
    cli = Cli(run_store.root)
    assert cli.json("chain", "verify", "open")["closed"] is False
    out = cli("chain", "verify", "open")
    assert out.stdout.startswith("ok: 15 steps of run open verified")
    assert ", open (no end record; --expect-steps N checks its length)" in out.stdout
    cut = cli.json("chain", "verify", "open", "--expect-steps", "20", code=1)
    assert (cut["first_broken_step"], cut["verdict"]) == (15, "broken")
    assert cli.json("chain", "verify", "open", "--expect-steps", "15")["ok"] is True
    assert cli.json("chain", "verify", "open", "--expect-steps", "9",
                    code=1)["first_broken_step"] == 9
    with pytest.raises(ValueError, match="closed"):
        ChainWriter(tmp_path / "steps.jsonl", config={"lr": 0.1},
                    stream=StreamReader(run_store, "s").info, world_size=WORLD)


def test_stored_records_are_rechecked_by_verify(run_store: Store, tmp_path: Path) -> None:
    """A catalog edited after ingest: verify recomputes everything from the stored bytes."""
    log = write_log(run_store, tmp_path / "steps.jsonl", range(12), close=True)
    _ingest(run_store, log)
    record = json.loads(_lines(log)[8])  # step 7
    cases = {
        "state_hash does not match": {**record, "loss": 9.0},
        "not canonical": None,
        "cursor 33 is not 32": {**record, "cursor": 33},
        "batch digests differ": {**record, "batch_digests": record["batch_digests"][::-1]},
    }
    for reason, changed in cases.items():
        if changed is None:
            text = json.dumps(record)
        else:
            if "state_hash does not match" not in reason:
                changed["state_hash"] = step_hash(changed)
            text = canonical_json(changed)
        with run_store.writer() as con:
            con.execute("UPDATE steps SET record = ? WHERE run = 'r' AND step = 7", [text])
        report = verify_chain(run_store, "r")
        assert (report["first_broken_step"], report["verdict"]) == (7, "broken"), reason
        assert reason in report["reason"] and report["steps_checked"] == 7


def test_a_resumed_run_that_skips_data_verifies(run_store: Store, tmp_path: Path) -> None:
    log = write_log(run_store, tmp_path / "steps.jsonl", range(12), data_skips={6: 5},
                    close=True)
    record = json.loads(_lines(log)[7])
    assert record["data_skip"] == {"reason": "shard 3 unreadable after resume", "windows": 5}
    assert record["cursor"] == 7 * 4 + 5
    for rank in range(WORLD):  # the spec's windows for rank r: [cursor - B + 2r, +2)
        windows = range(record["cursor"] - 4 + 2 * rank, record["cursor"] - 2 + 2 * rank)
        segments = [(d["window"], d["doc_id"], d["token_start"], d["token_end"])
                    for w in windows for d in
                    run_store.docs_in_step(w // 4, stream="s", window=w)["documents"]]
        assert ref.batch_digest(segments) == record["batch_digests"][rank]
    _ingest(run_store, log)
    assert verify_chain(run_store, "r")["ok"]
    # the step after the jump reads windows 29..32, and its documents are traced there
    traced = run_store.trace("r", step=6)["steps"][0]["documents"]
    assert {w for d in traced for w in d["windows"]} == {29, 30, 31, 32}
    # a jump not declared: the cursor rule names the step
    undeclared = {k: v for k, v in record.items() if k != "data_skip"}
    undeclared["state_hash"] = step_hash(undeclared)
    with run_store.writer() as con:
        con.execute("UPDATE steps SET record = ? WHERE run = 'r' AND step = 6",
                    [canonical_json(undeclared)])
    report = verify_chain(run_store, "r", batches=False)
    assert report["first_broken_step"] == 6 and "cursor 33 is not 28" in report["reason"]


def test_the_skip_rule_is_checked_against_every_step(run_store: Store, tmp_path: Path) -> None:
    rule = SkipRule(grad_norm_above=5.0, skip_following=4)
    norms = {3: 7.5, 12: float("nan"), 20: 6.0}
    honest = write_log(run_store, tmp_path / "a.jsonl", range(30), norms=norms, skip_rule=rule,
                       skip_at={3, 4, 5, 6, 7, 12, 13, 14, 15, 16, 20, 21, 22, 23, 24})
    _ingest(run_store, honest, run="honest")
    cli = Cli(run_store.root)
    ok = cli("chain", "verify", "honest")
    assert "skip rule: pre-clip grad norm > 5 skips the step and the next 4: every step " \
        "agrees (15 skipped)" in ok.stdout
    lying = write_log(run_store, tmp_path / "b.jsonl", range(30), norms=norms, skip_rule=rule,
                      skip_at={4, 5, 6, 7, 12, 13, 14, 16, 20, 21, 22, 23, 24, 27})
    _ingest(run_store, lying, run="lying")
    report = cli.json("chain", "verify", "lying", code=1)
    assert report["verdict"] == "rule-violated" and report["first_broken_step"] is None
    found = {v["step"]: v["reason"] for v in report["skip_rule"]["violations"]}
    assert set(found) == {3, 15, 27}
    assert "grad norm 7.5 is above 5" in found[3]
    assert "cascade cut short: step 12's grad norm nan skips steps 12..16" in found[15]
    assert "skipped without cause" in found[27]
    out = cli("chain", "verify", "lying", code=1)
    assert "skip rule VIOLATED at step 15: cascade cut short" in out.stdout


def test_header_edits_are_refused(run_store: Store, tmp_path: Path) -> None:
    log = write_log(run_store, tmp_path / "steps.jsonl", range(3))
    with pytest.raises(InputError, match="world_size 2, not 4"):
        ingest_steps(run_store, log, run="r", stream="s", world_size=4)
    lines = _lines(log)
    for key, value in [("config", {"lr": 0.2}), ("algorithm", "blake2b"),
                       ("skip_rule", SkipRule(5.0, 4).to_json()), ("checkpoint_every", 10)]:
        header = {**json.loads(lines[0]), key: value}
        edited = _write(tmp_path / f"{key}.jsonl", [canonical_json(header), *lines[1:]])
        match = "defined for blake3 only" if key == "algorithm" else "genesis does not match"
        _refused(run_store, edited, 1, match)
    with pytest.raises(UsageError, match="give --stream"):
        ingest_steps(run_store, log, run="r", stream=None, world_size=WORLD)


def _foreign_lines(digests: list[list[str]] | None = None) -> list[str]:
    header = {"algorithm": "blake2b", "chain": "open-1b-chain", "genesis": "g0",
              "world_size": WORLD}
    lines, prev = [canonical_json(header)], "g0"
    for step in range(6):
        state = hashlib.blake2b(f"{prev}{step}".encode()).hexdigest()
        record = {"prev_hash": prev, "state_hash": state, "step": step}
        if digests is not None:
            record["batch_digests"] = digests[step]
        lines.append(canonical_json(record))
        prev = state
    return lines


def _open_1b_lines(steps: int, *, header_extra: dict[str, Any] | None = None,
                   unskipped: int | None = None) -> list[str]:
    """A blake2b chain as the Open-1B harness keeps it: each record with its pre-clip grad
    norm and skip decision; step 17's norm of 7.5 skips steps 17-21 (norm > 5 skips five
    steps), unless `unskipped` names a step the trainer applied anyway."""
    header = {"algorithm": "blake2b", "chain": "open-1b-chain", "genesis": "g0",
              "world_size": WORLD, **(header_extra or {})}
    lines, prev = [canonical_json(header)], "g0"
    for step in range(steps):
        norm = 7.5 if step == 17 else 0.5 + (step % 7) / 10
        state = hashlib.blake2b(f"{prev}{step}".encode()).hexdigest()
        record = {"grad_norm": norm, "prev_hash": prev, "skipped": 17 <= step <= 21
                  and step != unskipped, "state_hash": state, "step": step}
        lines.append(canonical_json(record))
        prev = state
    return lines


def test_the_open_1b_chain_keeps_its_interval_and_skip_rule(run_store: Store,
                                                            tmp_path: Path) -> None:
    cli = Cli(run_store.root)
    log = _write(tmp_path / "open-1b.jsonl", _open_1b_lines(250))
    out = cli("ingest", "steps", str(log), "--run", "open-1b", "--world-size", str(WORLD),
              "--checkpoint-every", "100", "--skip-rule", "5:4")
    assert "declared checkpoint_every: 100 (from the import)" in out.stdout
    assert 'declared skip_rule: {"grad_norm_above": 5.0, "rule": "lineage-skip/1", ' \
        '"skip_following": 4} (from the import)' in out.stdout
    report = cli.json("chain", "verify", "open-1b", code=1)
    assert report["verdict"] == "continuity-only" and report["skip_rule"]["verdict"] == "ok"
    assert report["skip_rule"]["skipped_steps"] == 5
    status = cli.json("audit", "status", "open-1b")
    assert (status["interval"], status["steps"], status["intervals"]["untouched"]) == \
        (100, 250, 3)

    cut = _write(tmp_path / "cut.jsonl", _open_1b_lines(250, unskipped=19))
    cli("ingest", "steps", str(cut), "--run", "cut", "--world-size", str(WORLD),
        "--skip-rule", "5:4")
    report = cli.json("chain", "verify", "cut", code=1)
    assert report["verdict"] == "rule-violated"
    assert [v["step"] for v in report["skip_rule"]["violations"]] == [19]
    assert "step 17's grad norm 7.5 skips steps 17..21" in \
        report["skip_rule"]["violations"][0]["reason"]


def test_a_foreign_header_may_declare_them_itself(run_store: Store, tmp_path: Path) -> None:
    cli = Cli(run_store.root)
    rule = SkipRule(5.0, 4).to_json()
    log = _write(tmp_path / "h.jsonl", _open_1b_lines(
        120, header_extra={"checkpoint_every": 100, "skip_rule": rule}))
    result = cli.json("ingest", "steps", str(log), "--run", "h", "--world-size", str(WORLD))
    assert result["declared"] == {"checkpoint_every": {"value": 100, "from": "header"},
                                  "skip_rule": {"value": rule, "from": "header"}}
    assert cli.json("chain", "verify", "h", code=1)["skip_rule"]["verdict"] == "ok"
    other = cli("ingest", "steps", str(log), "--run", "h2", "--world-size", str(WORLD),
                "--checkpoint-every", "50", code=2)
    assert "h.jsonl:line 1: the header declares checkpoint_every 100, not 50 as given" in \
        other.stderr and other.stderr.count("\n") == 1
    again = cli("ingest", "steps", str(log), "--run", "h", "--world-size", str(WORLD),
                "--skip-rule", "6:4", code=2)
    assert "the header declares skip_rule" in again.stderr
    bad = cli("ingest", "steps", str(log), "--run", "h3", "--world-size", str(WORLD),
              "--skip-rule", "five", code=2)
    assert "--skip-rule 'five': expected ABOVE:FOLLOWING" in bad.stderr


def test_a_lineage_header_is_the_only_declaration(run_store: Store, tmp_path: Path) -> None:
    cli = Cli(run_store.root)
    log = write_log(run_store, tmp_path / "mine.jsonl", range(3), checkpoint_every=100)
    base = ("ingest", "steps", str(log), "--run", "mine", "--stream", "s",
            "--world-size", str(WORLD))
    out = cli(*base, "--checkpoint-every", "7", code=2)
    assert "mine.jsonl:line 1: the header declares checkpoint_every 100, not 7" in out.stderr
    out = cli(*base, "--skip-rule", "5:4", code=2)
    assert "lineage-chain/2 headers declare skip_rule themselves (this one: none)" in out.stderr
    assert cli.json(*base, "--checkpoint-every", "100")["declared"] == \
        {"checkpoint_every": {"value": 100, "from": "header"}}


def test_a_foreign_chain_gets_its_own_verdict(run_store: Store, tmp_path: Path) -> None:
    log = _write(tmp_path / "foreign.jsonl", _foreign_lines())
    ingest_steps(run_store, log, run="foreign", stream=None, world_size=WORLD)
    cli = Cli(run_store.root)
    report = cli.json("chain", "verify", "foreign", code=1)
    assert (report["verdict"], report["ok"], report["checked"]) == \
        ("continuity-only", False, "continuity")
    assert report["stream"] is None and report["steps_checked"] == 6
    assert cli("chain", "verify", "foreign", "--accept-continuity").stdout.startswith(
        "continuity-only: 6 steps of run foreign link up")
    with pytest.raises(UsageError, match="bound to no stream"):
        run_store.trace("foreign", step=1)
    assert "steps 0..5 recorded, bound to no stream" in cli("run", "show", "foreign").stdout
    # bound to a stream only through batch digests, which verify then checks
    with pytest.raises(InputError, match="step 0 has no batch_digests"):
        ingest_steps(run_store, log, run="f2", stream="s", world_size=WORLD)
    digests = [stream_batch_digests(run_store, "s", step * 4, WORLD) for step in range(6)]
    bound = _write(tmp_path / "bound.jsonl", _foreign_lines(digests))
    ingest_steps(run_store, bound, run="bound", stream="s", world_size=WORLD)
    checked = cli.json("chain", "verify", "bound", "--accept-continuity")
    assert checked["batches_checked"] and checked["stream"] == "s"
    digests[4] = digests[3]
    wrong = _write(tmp_path / "wrong.jsonl", _foreign_lines(digests))
    ingest_steps(run_store, wrong, run="wrong", stream="s", world_size=WORLD)
    assert cli.json("chain", "verify", "wrong", "--accept-continuity",
                    code=1)["first_broken_step"] == 4
    # a lineage chain renamed to look foreign is no longer "ok"
    lines = _lines(write_log(run_store, tmp_path / "own.jsonl", range(4)))
    header = {**json.loads(lines[0]), "chain": "my-harness"}
    renamed = _write(tmp_path / "renamed.jsonl", [canonical_json(header), *lines[1:]])
    ingest_steps(run_store, renamed, run="renamed", stream=None, world_size=WORLD)
    assert verify_chain(run_store, "renamed")["verdict"] == "continuity-only"


def test_version_1_logs_are_still_verified(run_store: Store, tmp_path: Path) -> None:
    info = StreamReader(run_store, "s").info
    header = {"algorithm": "blake3", "chain": CHAIN_SPEC_V1, "config": {"lr": 0.1},
              "manifest_hash": info["manifest_hash"], "stream_spec_hash": info["spec_hash"],
              "world_size": WORLD}
    header["genesis"] = genesis_hash_v1(header)
    lines, prev = [canonical_json(header)], header["genesis"]
    for step in range(5):
        record = {"batch_digests": stream_batch_digests(run_store, "s", step * 4, WORLD),
                  "cursor": (step + 1) * 4, "prev_hash": prev, "step": step,
                  "skipped": False, "grad_norm": 0.1}
        record["state_hash"] = prev = step_hash(record, spec=CHAIN_SPEC_V1)
        lines.append(canonical_json(record))
    _ingest(run_store, _write(tmp_path / "v1.jsonl", lines))
    report = verify_chain(run_store, "r")
    assert report["verdict"] == "ok" and report["chain"] == CHAIN_SPEC_V1
    assert report["closed"] is False and report["skip_rule"]["verdict"] == "no rule declared"
    header["algorithm"] = "blake2b"  # /1's genesis does not cover it: refused outright
    _refused(run_store, _write(tmp_path / "v1b.jsonl", [canonical_json(header), *lines[1:]]),
             1, "defined for blake3 only", run="v1b")


def test_the_writer_refuses_what_would_not_verify(run_store: Store, tmp_path: Path) -> None:
    info = StreamReader(run_store, "s").info
    chain = ChainWriter(tmp_path / "w.jsonl", config={}, stream=info, world_size=WORLD)
    args: dict[str, Any] = {"weights": {"w": np.zeros(2, np.float32)},
                            "batch_digests": [], "loss": 1.0, "grad_norm": 1.0, "lr": 0.1,
                            "clipped": False, "skipped": False, "rng": {}}
    with pytest.raises(ValueError, match="starts at step 0"):
        chain.append(1, **args)
    with pytest.raises(ValueError, match="cursor 8 is not 4"):
        chain.append(0, cursor=8, **args)
    with pytest.raises(ValueError, match="windows >= 1 and a reason"):
        chain.append(0, data_skip={"windows": 0, "reason": "x"}, **args)
    assert chain.append(0, **args)["cursor"] == 4
    chain.close()
    with pytest.raises(ValueError, match="closed"):
        chain.append(1, **args)


def test_tensor_digest_depends_on_names_dtypes_shapes_and_bytes() -> None:
    a = np.arange(6, dtype=np.float32)
    base = tensor_digest({"x": a.reshape(2, 3)})
    assert tensor_digest({"x": a.reshape(3, 2)}) != base
    assert tensor_digest({"y": a.reshape(2, 3)}) != base
    assert tensor_digest({"x": a.reshape(2, 3).astype(np.int32)}) != base
    assert tensor_digest({"x": np.asfortranarray(a.reshape(2, 3))}) == base  # C order bytes
    assert tensor_digest({"x": a.reshape(2, 3).astype(">f4")}) == base  # little-endian bytes
    assert tensor_digest({"x": memoryview(a).cast("B").cast("f", (2, 3))}) == base


@pytest.mark.parametrize("shape", [(0,), (0, 3), (2, 0, 4)])
def test_a_tensor_with_no_elements_is_digested_as_a_checkpoint_file_holds_it(
        shape: tuple[int, ...], tmp_path: Path) -> None:
    from safetensors.numpy import save_file

    from lineage.runs.checkpoint_evidence import weights_digest

    tensors = {"empty": np.zeros(shape, dtype=np.float32), "w": np.ones(3, dtype=np.float16)}
    save_file(tensors, str(tmp_path / "model.safetensors"))
    digest = tensor_digest(tensors)
    assert digest == weights_digest(tmp_path) == ref.tensor_digest(tensors)
    assert digest != tensor_digest({"w": tensors["w"]})


def test_cli_run_and_chain(run_store: Store, tmp_path: Path) -> None:
    log = write_log(run_store, tmp_path / "steps.jsonl", range(8), clip_at={2}, close=True)
    cli = Cli(run_store.root)
    added = cli.json("ingest", "steps", str(log), "--run", "r", "--stream", "s",
                     "--world-size", "2")
    assert added["new_steps"] == 8 and added["closed"] is True
    verified = cli.json("chain", "verify", "r")
    assert verified["ok"] is True and verified["verdict"] == "ok" and verified["closed"]
    shown = cli.json("run", "show", "r")
    assert shown["clipped_steps"] == [2] and shown["steps_recorded"] == 8 and shown["closed"]
    assert [(r["name"], r["closed"]) for r in cli.json("run", "list")] == [("r", True)]
    show = cli("run", "show", "r").stdout
    assert ", closed\n" in show and "skip rule   no rule declared" in show
    share = f"{shown['progress']:.1%}"  # the list says the progress as show does
    assert f"recorded, {share} of " in show
    (row,) = [[c.strip() for c in line.split("│")] for line in
              cli("run", "list").stdout.splitlines() if "│" in line]
    assert row[0] == "r" and row[6] == share != f"{shown['progress']:.4g}"
    lines = _lines(log)
    record = json.loads(lines[3])
    record["loss"] = 0.0
    lines[3] = canonical_json(record)
    _write(log, lines)
    refused = cli("ingest", "steps", str(log), "--run", "bad", "--stream", "s",
                  "--world-size", "2", code=2)
    assert "steps.jsonl:line 4: step 2: state_hash does not follow" in refused.stderr
    assert cli("chain", "verify", "bad", code=2).stderr.startswith("error: no run named 'bad'")


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=True),
              st.text(max_size=4)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["a", "state_hash", "step", "z"]), inner, max_size=3), max_leaves=8)


@settings(deadline=None)  # the machine is shared: time is not the property
@given(record=st.dictionaries(st.sampled_from(["a", "prev_hash", "rng", "state_hash", "step",
                                               "zz"]), json_values),
       value=st.sampled_from(["blake3:00", "x", '",\\"state_hash\\":"']))
def test_the_state_hash_of_a_line_is_the_state_hash_of_its_record(
        record: dict[str, Any], value: str) -> None:
    record = {**record, "state_hash": value}
    if isinstance(record.get("rng"), dict):
        record["rng"]["state_hash"] = value  # the same text nested: must not be cut
    line = canonical_json(record)
    assert line_step_hash(line, record) == step_hash(record)
