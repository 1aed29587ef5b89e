"""The step hash chain: the trainer helper, ingest of step logs, and verification that
names the exact step of any tampering."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lineage.chain import ChainWriter, canonical_json, step_hash, tensor_digest
from lineage.chain_verify import verify_chain
from lineage.errors import InputError
from lineage.ingest import ingest_corpus
from lineage.ingest.steps import ingest_steps
from lineage.store import Store
from lineage.stream.build import build_stream
from lineage.stream.reader import StreamReader

from .conftest import Cli

WORLD = 2


@pytest.fixture
def run_store(store: Store, example_shards: Path) -> Store:
    ingest_corpus(store, [example_shards / "sonnets.jsonl.gz"], corpus="sonnets")
    build_stream(store, corpus="sonnets", name="s", seed=11, seq_len=64, batch=4)
    return store


def write_log(store: Store, path: Path, steps: range, *, config: dict[str, Any] | None = None,
              clip_at: set[int] = frozenset(), skip_at: set[int] = frozenset()) -> Path:
    reader = StreamReader(store, "s")
    chain = ChainWriter(path, config=config or {"lr": 0.1}, stream=reader.info, world_size=WORLD)
    rng = np.random.Generator(np.random.Philox(1))
    weights = {"w": rng.standard_normal((4, 3)).astype(np.float32)}
    for step in steps:
        weights = {"w": (weights["w"] * 0.99).astype(np.float32)}
        chain.append(step, weights=weights, optimizer={"m": weights["w"] * 0.5},
                     gradients={"w": weights["w"] * 0.01},
                     batch_digests=reader.batch_digests(step, WORLD), loss=3.0 - step / 100,
                     grad_norm=0.5 + (step in clip_at), lr=0.1, clipped=step in clip_at,
                     skipped=step in skip_at, rng={"seed": 1, "counter": step},
                     cursor=(step + 1) * 4)
    return path


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _ingest(store: Store, path: Path, run: str = "r") -> dict[str, Any]:
    return ingest_steps(store, path, run=run, stream="s", world_size=WORLD)


def test_an_honest_run_verifies_and_reingest_is_a_no_op(run_store: Store, tmp_path: Path) -> None:
    log = write_log(run_store, tmp_path / "steps.jsonl", range(30), clip_at={3, 4},
                    skip_at={4, 5, 6, 7, 8})
    assert _ingest(run_store, log)["new_steps"] == 30
    again = _ingest(run_store, log)
    assert (again["status"], again["new_steps"]) == ("unchanged", 0)
    report = verify_chain(run_store, "r")
    assert report["ok"] and report["steps_checked"] == 30 and report["checked"] == "full"
    run = run_store_run(run_store)
    assert run["clipped_steps"] == [3, 4] and run["skipped_steps"] == [4, 5, 6, 7, 8]
    assert run["last_step"] == 29 and len(run["segments"]) == 1


def run_store_run(store: Store) -> dict[str, Any]:
    from lineage.runs import get_run

    return get_run(store, "r")


def _tampered(run_store: Store, tmp_path: Path, edit: Any) -> dict[str, Any]:
    log = write_log(run_store, tmp_path / "steps.jsonl", range(20))
    lines = _lines(log)
    edit(lines)
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _ingest(run_store, log)
    return verify_chain(run_store, "r")


@pytest.mark.parametrize("step", [0, 7, 19])
@pytest.mark.parametrize("field", ["loss", "lr", "cursor", "clipped", "state_digest"])
def test_changing_any_field_is_caught_at_that_step(
    run_store: Store, tmp_path: Path, step: int, field: str
) -> None:
    def edit(lines: list[str]) -> None:
        record = json.loads(lines[step + 1])
        value = record[field]
        record[field] = (not value) if isinstance(value, bool) else (
            value + 1 if isinstance(value, int | float) else "blake3:" + "0" * 64)
        lines[step + 1] = canonical_json(record)

    report = _tampered(run_store, tmp_path, edit)
    assert not report["ok"] and report["first_broken_step"] == step
    assert report["steps_checked"] == step


def test_a_flipped_byte_anywhere_is_caught_at_its_step(run_store: Store, tmp_path: Path) -> None:
    log = write_log(run_store, tmp_path / "steps.jsonl", range(12))
    original = _lines(log)
    for step in range(12):
        line = original[step + 1]
        for position in range(0, len(line), 37):
            flipped = line[:position] + chr(ord(line[position]) ^ 1) + line[position + 1:]
            try:
                json.loads(flipped)
            except ValueError:
                continue  # no longer JSON: ingest names the line (tested elsewhere)
            if json.loads(flipped).get("step") != step:
                continue  # the flip renamed the step: a different failure, tested as a gap
            lines = list(original)
            lines[step + 1] = flipped
            target = tmp_path / f"t{step}-{position}.jsonl"
            target.write_text("\n".join(lines) + "\n", encoding="utf-8")
            run = f"t{step}x{position}"
            ingest_steps(run_store, target, run=run, stream="s", world_size=WORLD)
            report = verify_chain(run_store, run, batches=False)
            assert report["first_broken_step"] == step, (step, position, report)


def test_reordered_records(run_store: Store, tmp_path: Path) -> None:
    # Swapping two lines is harmless (records are stored by step); swapping which record
    # carries which step number is not.
    def reorder(lines: list[str]) -> None:
        a, b = json.loads(lines[5]), json.loads(lines[6])
        a["step"], b["step"] = b["step"], a["step"]
        lines[5], lines[6] = canonical_json(b), canonical_json(a)

    assert _tampered(run_store, tmp_path, reorder)["first_broken_step"] == 4


def test_gap_and_noncanonical(run_store: Store, tmp_path: Path) -> None:
    log = write_log(run_store, tmp_path / "a.jsonl", range(10))
    lines = _lines(log)
    del lines[6]  # step 5
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _ingest(run_store, log, run="gap")
    report = verify_chain(run_store, "gap")
    assert report["first_broken_step"] == 6 and "gap" in report["reason"]

    log2 = write_log(run_store, tmp_path / "b.jsonl", range(10))
    lines = _lines(log2)
    lines[4] = json.dumps(json.loads(lines[4]), indent=None)  # spaces after separators
    log2.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _ingest(run_store, log2, run="spaces")
    report = verify_chain(run_store, "spaces")
    assert report["first_broken_step"] == 3 and "canonical" in report["reason"]


def test_a_batch_digest_that_does_not_match_the_stream(run_store: Store, tmp_path: Path) -> None:
    def lie(lines: list[str]) -> None:
        record = json.loads(lines[9])  # step 8
        record["batch_digests"] = list(reversed(record["batch_digests"]))
        record["state_hash"] = step_hash(record)
        lines[9] = canonical_json(record)
        for i in range(10, len(lines)):  # re-link the rest so only the batch is wrong
            later = json.loads(lines[i])
            later["prev_hash"] = json.loads(lines[i - 1])["state_hash"]
            later["state_hash"] = step_hash(later)
            lines[i] = canonical_json(later)

    report = _tampered(run_store, tmp_path, lie)
    assert report["first_broken_step"] == 8 and "batch digests" in report["reason"]


def test_fork_truncation_and_restart_segments(run_store: Store, tmp_path: Path) -> None:
    full = write_log(run_store, tmp_path / "full.jsonl", range(20))
    lines = _lines(full)
    first = tmp_path / "seg0.jsonl"
    first.write_text("\n".join(lines[:13]) + "\n", encoding="utf-8")  # steps 0..11
    second = tmp_path / "seg1.jsonl"
    second.write_text("\n".join([lines[0], *lines[9:]]) + "\n", encoding="utf-8")  # 8..19
    assert _ingest(run_store, first)["new_steps"] == 12
    added = _ingest(run_store, second)
    assert added["new_steps"] == 8 and added["segment"] == 1
    assert verify_chain(run_store, "r")["ok"]

    other = write_log(run_store, tmp_path / "other.jsonl", range(15), config={"lr": 0.1},
                      clip_at={10})
    disagree = tmp_path / "seg2.jsonl"
    disagree.write_text("\n".join([lines[0], *_lines(other)[10:]]) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="step 10 disagrees"):
        _ingest(run_store, disagree)

    fork = tmp_path / "fork.jsonl"
    fork.write_text("\n".join([*lines[:14], _lines(other)[12 + 1]]) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="fork: step 12 is recorded twice"):
        _ingest(run_store, fork, run="forked")

    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(lines[:8]) + "\n" + lines[8][: len(lines[8]) // 2],
                   encoding="utf-8")
    with pytest.raises(InputError, match=r"cut.jsonl:line 9: malformed JSON"):
        _ingest(run_store, cut, run="cut")


def test_header_must_match_the_stream(run_store: Store, tmp_path: Path) -> None:
    log = write_log(run_store, tmp_path / "steps.jsonl", range(3))
    with pytest.raises(InputError, match="world_size 2, not 4"):
        ingest_steps(run_store, log, run="r", stream="s", world_size=4)
    lines = _lines(log)
    header = json.loads(lines[0])
    header["config"]["lr"] = 0.2  # config changed, genesis kept
    log.write_text("\n".join([canonical_json(header), *lines[1:]]) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="genesis does not match"):
        _ingest(run_store, log)


def test_a_foreign_chain_is_checked_for_continuity_only(run_store: Store, tmp_path: Path) -> None:
    import hashlib

    header = {"algorithm": "blake2b", "chain": "open-1b-chain", "genesis": "g0",
              "world_size": WORLD}
    lines, prev = [canonical_json(header)], "g0"
    for step in range(6):
        state = hashlib.blake2b(f"{prev}{step}".encode()).hexdigest()
        lines.append(canonical_json({"prev_hash": prev, "state_hash": state, "step": step}))
        prev = state
    log = tmp_path / "foreign.jsonl"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _ingest(run_store, log, run="foreign")
    report = verify_chain(run_store, "foreign")
    assert report["ok"] and report["checked"] == "continuity" and report["steps_checked"] == 6
    record = json.loads(lines[4])
    record["prev_hash"] = "elsewhere"
    lines[4] = canonical_json(record)
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _ingest(run_store, log, run="foreign2")
    assert verify_chain(run_store, "foreign2")["first_broken_step"] == 3


def test_tensor_digest_depends_on_names_dtypes_shapes_and_bytes() -> None:
    a = np.arange(6, dtype=np.float32)
    base = tensor_digest({"x": a.reshape(2, 3)})
    assert tensor_digest({"x": a.reshape(3, 2)}) != base
    assert tensor_digest({"y": a.reshape(2, 3)}) != base
    assert tensor_digest({"x": a.reshape(2, 3).astype(np.int32)}) != base
    assert tensor_digest({"x": np.asfortranarray(a.reshape(2, 3))}) == base  # C order bytes
    assert tensor_digest({"x": a.reshape(2, 3).astype(">f4")}) == base  # little-endian bytes
    assert tensor_digest({"x": memoryview(a).cast("B").cast("f", (2, 3))}) == base


def test_cli_run_and_chain(run_store: Store, tmp_path: Path) -> None:
    log = write_log(run_store, tmp_path / "steps.jsonl", range(8), clip_at={2})
    cli = Cli(run_store.root)
    added = cli.json("ingest", "steps", str(log), "--run", "r", "--stream", "s",
                     "--world-size", "2")
    assert added["new_steps"] == 8
    assert cli.json("chain", "verify", "r")["ok"] is True
    shown = cli.json("run", "show", "r")
    assert shown["clipped_steps"] == [2] and shown["steps_recorded"] == 8
    assert [r["name"] for r in cli.json("run", "list")] == ["r"]
    lines = _lines(log)
    record = json.loads(lines[3])
    record["loss"] = 0.0
    lines[3] = canonical_json(record)
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    cli("ingest", "steps", str(log), "--run", "bad", "--stream", "s", "--world-size", "2")
    broken = cli("chain", "verify", "bad", code=1)
    assert broken.stdout.startswith("BROKEN at step 2: state_hash does not match")
