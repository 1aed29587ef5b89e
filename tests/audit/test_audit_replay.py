"""`lineage audit replay` on a real run: the demo's tiny NumPy model trained over a real
stream for 12 steps with a checkpoint every 4, its steps and checkpoints ingested. Steps
are replayed with the example's own replay function, from published checkpoints, from
the initial state and through relay checkpoints; tampered starts are refused before the
replayer runs, and a replayer that computes something else is attested as a mismatch."""

from __future__ import annotations

import builtins
import dataclasses
import importlib.util
import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs
from safetensors.numpy import load_file, save_file

from lineage.api import Store, init_store, open_store
from lineage.audit import state_files
from lineage.audit.replay import (
    OUTCOME_FIELDS,
    RECORDS_FILE,
    load_replayer,
    read_run_step,
    record_id,
    replay_step,
    step_batch,
)
from lineage.errors import InputError, NotFoundError, UsageError
from lineage.ingest import ingest_corpus
from lineage.runs.chain import canonical_json, tensor_digest
from lineage.runs.checkpoint_evidence import checkpoint_digests
from lineage.stream.build import build_stream
from lineage.stream.reader import StreamReader

from ..conftest import EXAMPLES, REPO, Cli, load_tiny_run

STEPS, EVERY = 12, 4
REPLAYER = f"{EXAMPLES / 'tiny_run.py'}:replay"
HASH = re.compile(r"^blake3:[0-9a-f]{64}$")
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
tiny = load_tiny_run()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, Path]:
    """A store with the run `tiny` (steps 0..11) and its checkpoints of steps 3, 7, 11."""
    root = tmp_path_factory.mktemp("replay")
    init_store(root / "store")
    store = open_store(root / "store")
    ingest_corpus(store, [EXAMPLES / "corpus"], corpus="example", fingerprints=False)
    build_stream(store, corpus="example", name="s", seed=42, seq_len=1024, batch=4)
    tiny.train(store, "s", steps=STEPS, out=root / "run", checkpoint_every=EVERY)
    cli = Cli(store.root)
    cli("ingest", "steps", str(root / "run" / "steps.jsonl"), "--run", "tiny", "--stream",
        "s", "--world-size", "2")
    for step in range(EVERY - 1, STEPS, EVERY):
        cli("ingest", "checkpoint", str(root / "run" / f"checkpoint-{step}"), "--run", "tiny",
            "--step", str(step))
    return store, root / "run"


def chain_records(run: Path) -> list[dict[str, Any]]:
    lines = (run / "steps.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines[1:-1]]


def check_attestation(record: dict[str, Any]) -> None:
    """Every field of a lineage-audit/1 attestation, with its type (the plan's list)."""
    assert set(record) == {"spec", "kind", "run", "chain_head", "step", "unit", "start",
                           "state_hash", "expected", "result", "machine", "duration_s",
                           "tools", "auditor", "created_at"}
    assert (record["spec"], record["kind"], record["unit"]) == \
        ("lineage-audit/1", "attestation", "step-replay")
    assert isinstance(record["step"], int) and isinstance(record["run"], str)
    for key in ("chain_head", "state_hash", "expected"):
        assert HASH.match(record[key]), key
    assert record["result"] == ("match" if record["state_hash"] == record["expected"]
                                else "mismatch")
    start = record["start"]
    assert start["kind"] in ("published", "intermediate", "initial")
    expected_keys = {"published": {"kind", "step", "weights_digest"},
                     "intermediate": {"kind", "step", "checkpoint", "state_digest"},
                     "initial": {"kind"}}[start["kind"]]
    assert set(start) == expected_keys
    machine = record["machine"]
    assert set(machine) == {"backend", "device", "memory_bytes", "swapped", "os", "cpu"}
    assert machine["backend"] == "cpu" and machine["memory_bytes"] > 2**20
    assert isinstance(machine["swapped"], bool)
    assert all(isinstance(machine[k], str) and machine[k] for k in ("device", "os", "cpu"))
    assert isinstance(record["duration_s"], float) and record["duration_s"] >= 0
    assert {"lineage", "python", "numpy", "replayer"} <= set(record["tools"])
    assert set(record["auditor"]) == {"name", "public_key", "payout"}
    assert TIME.match(record["created_at"])
    json.loads(canonical_json(record))  # canonical JSON holds it: its id is defined


def replay(store: Store, step: int, **options: Any) -> dict[str, Any]:
    function, source = load_replayer(REPLAYER)
    return replay_step(store, "tiny", step, function, replayer_name=REPLAYER,
                       replayer_source=source, auditor=options.pop("auditor", "ada"),
                       **options)


class Spy:
    """The example's replay function, counting its calls and keeping what it was given."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, state: dict[str, Any], batch: list[Any], **kw: Any) -> Any:
        self.calls.append({"state": state, "batch": batch, **kw})
        return tiny.replay(state, batch, **kw)


def test_a_step_after_a_published_checkpoint_replays_to_the_chains_hash(
        demo: tuple[Store, Path]) -> None:
    store, run = demo
    records = chain_records(run)
    result = replay(store, EVERY)
    attestation = result["attestation"]
    check_attestation(attestation)
    assert attestation["result"] == "match" and result["checkpoint"] is None
    assert attestation["expected"] == records[EVERY]["state_hash"]
    assert attestation["chain_head"] == records[-1]["state_hash"]
    assert attestation["start"] == {"kind": "published", "step": EVERY - 1,
                                    "weights_digest": records[EVERY - 1]["weights_digest"]}
    assert attestation["auditor"] == {"name": "ada", "public_key": None, "payout": None}


def test_step_zero_replays_from_the_initial_state_the_replayer_builds(
        demo: tuple[Store, Path]) -> None:
    store, run = demo
    attestation = replay(store, 0)["attestation"]
    check_attestation(attestation)
    assert attestation["start"] == {"kind": "initial"} and attestation["result"] == "match"
    with pytest.raises(UsageError, match="step 0 starts from the run's initial state"):
        replay(store, 0, start=run / "checkpoint-3")


def test_the_example_replays_every_step_bit_for_bit(demo: tuple[Store, Path]) -> None:
    """The example's replay, chained in memory from the initial state, gives the digests
    the chain recorded at every step, skipped and clipped steps included."""
    store, run = demo
    records = chain_records(run)
    reader, state = StreamReader(store, "s"), {}
    for record in records:
        out = tiny.replay(state, reader.windows(record["step"]), step=record["step"],
                          record=record, config={"seed": tiny.SEED, "clip": tiny.CLIP})
        state = {k: v for k, v in out.items() if "/" in k}
        weights = {k[len("weights/"):]: v for k, v in state.items() if k.startswith("weights/")}
        assert tensor_digest(weights) == record["weights_digest"]
        assert tensor_digest(state) == record["state_digest"]
        assert (out["loss"], out["grad_norm"], out["clipped"]) == \
            (record["loss"], record["grad_norm"], record["clipped"])
    assert any(r["clipped"] for r in records)


def test_a_relay_continues_from_the_previous_auditors_checkpoint(
        demo: tuple[Store, Path], tmp_path: Path) -> None:
    store, run = demo
    records = chain_records(run)
    first = replay(store, EVERY * 2, save=tmp_path / "relay-8")
    attestation, checkpoint = first["attestation"], first["checkpoint"]
    assert attestation["result"] == "match"
    assert checkpoint == {
        "spec": "lineage-audit/1", "kind": "checkpoint", "run": "tiny",
        "chain_head": attestation["chain_head"], "step": 8,
        "weights_digest": records[8]["weights_digest"],
        "state_digest": records[8]["state_digest"], "loss": records[8]["loss"],
        "state_hash": records[8]["state_hash"], "attestation": record_id(attestation),
        "location": str((tmp_path / "relay-8").resolve()), "auditor": attestation["auditor"],
        "created_at": attestation["created_at"]}
    found = checkpoint_digests(tmp_path / "relay-8")  # what the next auditor's tool sees
    assert (found["weights_digest"], found["state_digest"]) == \
        (records[8]["weights_digest"], records[8]["state_digest"])
    written = (tmp_path / "relay-8" / RECORDS_FILE).read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in written] == [attestation, checkpoint]

    second = replay(store, 9, start=tmp_path / "relay-8", save=tmp_path / "relay-9",
                    auditor="bob")
    check_attestation(second["attestation"])
    assert second["attestation"]["result"] == "match"
    assert second["attestation"]["start"] == {
        "kind": "intermediate", "step": 8, "checkpoint": record_id(checkpoint),
        "state_digest": records[8]["state_digest"]}
    third = replay(store, 10, start=tmp_path / "relay-9", auditor="cy")["attestation"]
    assert third["result"] == "match"
    assert third["start"]["checkpoint"] == record_id(second["checkpoint"])


def test_a_tampered_relay_checkpoint_is_refused_before_replaying(
        demo: tuple[Store, Path], tmp_path: Path) -> None:
    store, run = demo
    replay(store, 4, save=tmp_path / "good")
    flipped = tmp_path / "flipped"  # one weight's lowest bit
    shutil.copytree(tmp_path / "good", flipped)
    weights = load_file(str(flipped / "model.safetensors"))
    weights["embed"].view(np.uint32)[3, 5] ^= 1
    save_file(weights, str(flipped / "model.safetensors"))
    spy = Spy()
    with pytest.raises(InputError, match=r"flipped: weights-digest: blake3:\w+ is not the "
                       r"chain's weights_digest of step 4 \(blake3:\w+\); refusing"):
        replay_step(store, "tiny", 5, spy, replayer_name="spy", start=flipped)
    assert spy.calls == []

    moments = tmp_path / "moments"  # weights intact, an optimizer moment changed
    shutil.copytree(tmp_path / "good", moments)
    state = load_file(str(moments / "optimizer" / "state.safetensors"))
    state["optimizer/out.v"][0, 0] += np.float32(1e-6)
    save_file(state, str(moments / "optimizer" / "state.safetensors"))
    with pytest.raises(InputError, match="moments: state-digest: .* is not the chain's "
                       "state_digest of step 4"):
        replay_step(store, "tiny", 5, spy, replayer_name="spy", start=moments)

    lying = tmp_path / "lying"  # true tensors of step 4 offered as step 5's start
    shutil.copytree(tmp_path / "good", lying)
    with pytest.raises(InputError, match="lying: weights-digest: .* of step 5"):
        replay_step(store, "tiny", 6, spy, replayer_name="spy", start=lying)

    claims = tmp_path / "claims"  # true tensors, a record claiming another chain state
    shutil.copytree(tmp_path / "good", claims)
    lines = (claims / RECORDS_FILE).read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[1]) | {"state_hash": "blake3:" + "0" * 64}
    (claims / RECORDS_FILE).write_text(lines[0] + "\n" + canonical_json(record) + "\n",
                                       encoding="utf-8")
    with pytest.raises(InputError, match=r"claims/audit-records.jsonl: state-hash: the "
                       r"checkpoint record claims blake3:0{64}, the chain's step 4 has"):
        replay_step(store, "tiny", 5, spy, replayer_name="spy", start=claims)

    recordless = tmp_path / "recordless"
    shutil.copytree(tmp_path / "good", recordless)
    (recordless / RECORDS_FILE).unlink()
    with pytest.raises(InputError, match="checkpoint-record: no checkpoint record of run "
                       "'tiny' step 4"):
        replay_step(store, "tiny", 5, spy, replayer_name="spy", start=recordless)
    assert spy.calls == []


def test_a_published_checkpoint_changed_since_ingest_is_refused(
        demo: tuple[Store, Path], tmp_path: Path) -> None:
    store, run = demo
    cli = Cli(store.root)
    cli("ingest", "steps", str(run / "steps.jsonl"), "--run", "copy", "--stream", "s",
        "--world-size", "2")
    shutil.copytree(run / "checkpoint-3", tmp_path / "c3")
    cli("ingest", "checkpoint", str(tmp_path / "c3"), "--run", "copy", "--step", "3")
    state = load_file(str(tmp_path / "c3" / "optimizer" / "state.safetensors"))
    state["optimizer/embed.m"][1, 1] = np.float32(0.5)
    save_file(state, str(tmp_path / "c3" / "optimizer" / "state.safetensors"))
    spy = Spy()
    with pytest.raises(InputError, match="c3: state-digest: .* step 3"):
        replay_step(store, "copy", 4, spy, replayer_name="spy")
    assert spy.calls == []


def test_without_a_checkpoint_at_the_step_before_the_error_names_what_exists(
        demo: tuple[Store, Path]) -> None:
    store, _ = demo
    with pytest.raises(NotFoundError, match=r"run 'tiny' has no good checkpoint at step 5, "
                       r"the state a replay of step 6 starts from \(good checkpoints: 3, 7, "
                       r"11\); give a relay checkpoint of step 5 with --from DIR"):
        replay(store, 6)


def test_a_replayer_that_computes_something_else_gives_a_mismatch(
        demo: tuple[Store, Path], tmp_path: Path) -> None:
    store, run = demo

    def doubled_lr(state: dict[str, Any], batch: list[Any], *, record: dict[str, Any],
                   **kw: Any) -> Any:
        return tiny.replay(state, batch, record={**record, "lr": 2 * record["lr"]}, **kw)

    result = replay_step(store, "tiny", 8, doubled_lr, replayer_name="doubled",
                         save=tmp_path / "wrong", auditor="eve")
    attestation = result["attestation"]
    check_attestation(attestation)
    assert attestation["result"] == "mismatch"
    assert attestation["expected"] == chain_records(run)[8]["state_hash"]
    assert result["checkpoint"] is None and not (tmp_path / "wrong").exists()


def test_the_replayer_gets_the_steps_inputs_and_the_canonical_batch(
        demo: tuple[Store, Path]) -> None:
    store, run = demo
    record = chain_records(run)[4]
    spy = Spy()
    replay_step(store, "tiny", 4, spy, replayer_name="spy")
    (call,) = spy.calls
    assert call["record"] == {k: v for k, v in record.items() if k not in OUTCOME_FIELDS}
    assert {"lr", "rng", "skipped", "cursor", "batch_digests", "prev_hash"} <= \
        set(call["record"])
    assert call["batch"] == StreamReader(store, "s").windows(4)
    assert call["config"] == {"model": "bigram-bytes", "dim": 16, "lr": 0.05, "clip": 0.3,
                              "seed": 42, "optimizer": "adam"}
    assert sorted(call["state"]) == ["gradients/embed", "gradients/out", "optimizer/embed.m",
                                     "optimizer/embed.v", "optimizer/out.m",
                                     "optimizer/out.v", "weights/embed", "weights/out"]


def test_a_replayer_may_name_its_backend_and_device(
        demo: tuple[Store, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    store, _ = demo
    looked_for: list[str] = []  # torch may already be loaded by other tests: spy instead
    real_import, real_find_spec = builtins.__import__, importlib.util.find_spec

    def spy_import(name: str, *args: Any, **kwargs: Any) -> Any:
        looked_for.append(name)
        return real_import(name, *args, **kwargs)

    def spy_find_spec(name: str, *args: Any, **kwargs: Any) -> Any:
        looked_for.append(name)
        return real_find_spec(name, *args, **kwargs)

    def on_accelerator(state: dict[str, Any], batch: list[Any], **kw: Any) -> Any:
        return {**tiny.replay(state, batch, **kw), "backend": "cuda", "device": "Test GPU"}

    monkeypatch.setattr(builtins, "__import__", spy_import)
    monkeypatch.setattr(importlib.util, "find_spec", spy_find_spec)
    attestation = replay_step(store, "tiny", 4, on_accelerator,
                              replayer_name="accel")["attestation"]
    monkeypatch.undo()
    assert attestation["result"] == "match"
    assert (attestation["machine"]["backend"], attestation["machine"]["device"]) == \
        ("cuda", "Test GPU")
    # lineage looked for no accelerator itself
    assert not [name for name in looked_for if name.split(".")[0] in ("torch", "jax")]


def test_batch_digests_are_recomputed_from_the_stream(demo: tuple[Store, Path]) -> None:
    store, run = demo
    records = chain_records(run)
    for step in (0, 5, STEPS - 1):
        target = read_run_step(store, "tiny", step)
        windows, digests = step_batch(store, target)
        assert digests == records[step]["batch_digests"] and len(digests) == 2
        assert windows == StreamReader(store, "s").windows(step) and len(windows) == 4
    claimed = dataclasses.replace(  # a record claiming step 6's data at step 5
        read_run_step(store, "tiny", 5),
        record={**records[5], "batch_digests": records[6]["batch_digests"]})
    with pytest.raises(InputError, match="batch-digests: step 5: the stream's batch differs "
                       r"from the chain's batch_digests \(rank 0, 1\)"):
        step_batch(store, claimed)


def test_replayer_results_that_break_the_protocol_are_named(demo: tuple[Store, Path]) -> None:
    store, _ = demo
    cases = [(lambda s, b, **kw: [1, 2], "returned list, not a dict"),
             (lambda s, b, **kw: {"weights/x": np.zeros(1), "grad_norm": 1.0},
              "returned no number 'loss'"),
             (lambda s, b, **kw: {"loss": 1.0, "grad_norm": 1.0}, "no weights/… tensors"),
             (lambda s, b, **kw: 1 / 0, "failed at step 4: ZeroDivisionError"),
             (lambda s, b, **kw: {**tiny.replay(s, b, **kw), "backend": 3},
              "'backend' is not a name")]
    for function, message in cases:
        with pytest.raises(UsageError, match=f"replayer bad: {message}|{message}"):
            replay_step(store, "tiny", 4, function, replayer_name="bad")


@settings(max_examples=40, deadline=None)
@given(hs.dictionaries(
    hs.text("abc/._", min_size=1, max_size=8),
    hs.tuples(hs.sampled_from(["float32", "float64", "int64", "uint16", "int8", "bool"]),
              hs.lists(hs.integers(1, 3), max_size=3)),
    max_size=4))
def test_state_files_round_trip_with_the_safetensors_library(
        tensors: dict[str, tuple[str, list[int]]]) -> None:
    import tempfile

    rng = np.random.default_rng(0)
    arrays = {name: np.asarray(rng.standard_normal(shape) * 100).astype(dtype)
              for name, (dtype, shape) in tensors.items()}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.safetensors"
        state_files.write_tensors(path, arrays, metadata={"step": "1"})
        theirs = load_file(str(path))
        ours = state_files.read_tensors(path)
    assert sorted(theirs) == sorted(ours) == sorted(arrays)
    for name, array in arrays.items():
        assert theirs[name].dtype == ours[name].dtype == array.dtype
        assert np.array_equal(theirs[name], array) and np.array_equal(ours[name], array)
    assert tensor_digest(ours) == tensor_digest(arrays)


# -- the command line -------------------------------------------------------------------------


def test_the_command_prints_the_records_without_recording(demo: tuple[Store, Path],
                                                          tmp_path: Path) -> None:
    store, run = demo
    cli = Cli(store.root)
    out = cli.json("audit", "replay", "tiny", "--step", "8", "--replayer", REPLAYER,
                   "--auditor", "ada", "--save", str(tmp_path / "r8"), "--no-record")
    assert set(out) == {"attestation", "checkpoint"}
    check_attestation(out["attestation"])
    assert out["attestation"]["result"] == "match"
    assert out["checkpoint"]["attestation"] == record_id(out["attestation"])
    assert out["attestation"]["tools"]["replayer"] == REPLAYER
    assert HASH.match(out["attestation"]["tools"]["replayer_source"])
    relay = cli.json("audit", "replay", "tiny", "--step", "9", "--replayer", REPLAYER,
                     "--from", str(tmp_path / "r8"), "--no-record")
    assert relay["attestation"]["start"]["checkpoint"] == record_id(out["checkpoint"])
    assert relay["checkpoint"] is None
    text = cli("audit", "replay", "tiny", "--step", "4", "--replayer", REPLAYER,
               "--no-record").stdout
    assert text.startswith("step 4 of tiny: MATCH\n")
    assert "start       published checkpoint of step 3" in text
    assert "ledger      not recorded (--no-record)" in text
    assert chain_records(run)[4]["state_hash"] in text


def _reversed_batch_replayer(folder: Path) -> str:
    """A replayer (as --replayer names it) that feeds the example's replay its batch
    reversed: a mismatch."""
    module = folder / "other.py"
    module.write_text(
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('t', {str(EXAMPLES / 'tiny_run.py')!r})\n"
        "tiny = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(tiny)\n\n"
        "def replay(state, batch, *, record, **kw):\n"
        "    return tiny.replay(state, batch[::-1], record=record, **kw)\n", encoding="utf-8")
    return f"{module}:replay"


def test_the_command_exits_1_on_a_mismatch(demo: tuple[Store, Path], tmp_path: Path) -> None:
    store, _ = demo
    out = Cli(store.root)("audit", "replay", "tiny", "--step", "4", "--replayer",
                          _reversed_batch_replayer(tmp_path), "--no-record", "--json", code=1)
    assert json.loads(out.stdout)["attestation"]["result"] == "mismatch"


@pytest.mark.parametrize(("value", "message"), [
    ("tiny_run", "expected MODULE:FUNCTION or path/to/file.py:FUNCTION"),
    (f"{EXAMPLES / 'tiny_run.py'}:", "expected MODULE:FUNCTION"),
    ("no/such/file.py:replay", "no file no/such/file.py"),
    (f"{EXAMPLES / 'tiny_run.py'}:nothing_here", "has no function 'nothing_here'"),
    ("lineage_no_such_module:replay", "no module 'lineage_no_such_module' on the Python path"),
    ("json:loads_everything", "json has no function 'loads_everything'"),
])
def test_bad_replayer_values_are_clear_errors(demo: tuple[Store, Path], value: str,
                                              message: str) -> None:
    store, _ = demo
    out = Cli(store.root)("audit", "replay", "tiny", "--step", "4", "--replayer", value,
                          "--no-record", code=2)
    assert out.stderr.startswith("error: --replayer ") and out.stderr.count("\n") == 1
    assert message in out.stderr


def test_command_errors_before_replaying(demo: tuple[Store, Path], tmp_path: Path) -> None:
    store, run = demo
    cli = Cli(store.root)
    base = ("audit", "replay", "tiny", "--replayer", REPLAYER, "--no-record")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x", encoding="utf-8")
    cases = [(("--step", "4", "--save", str(tmp_path / "full")),
              "--save needs a new or empty folder", 2),
             (("--step", "0", "--from", str(run / "checkpoint-3")),
              "step 0 starts from the run's initial state", 2),
             (("--step", "99"), "run 'tiny' has no step 99 (steps 0..11)", 2),
             (("--step", "6"), "no good checkpoint at step 5", 1),
             (("--step", "5", "--from", str(tmp_path / "nowhere")),
              "not a checkpoint folder", 2)]
    for extra, message, code in cases:
        out = cli(*base, *extra, code=code)
        assert message in out.stderr and out.stderr.count("\n") == 1, out.stderr
    out = cli("audit", "replay", "nope", "--step", "1", "--replayer", REPLAYER, code=2)
    assert "no run named 'nope'" in out.stderr


def test_swap_is_read_from_the_kernels_counters() -> None:
    from lineage.audit import machine

    counters = machine.swap_counters()
    if Path("/proc/vmstat").is_file():
        assert counters is not None and all(isinstance(c, int) and c >= 0 for c in counters)
    assert machine.swapped_between((5, 7), (5, 8)) and machine.swapped_between((5, 7), (6, 7))
    assert machine.swapped_between((5, 7), (5, 7)) is False
    assert machine.swapped_between(None, (5, 8)) is None  # not measured: unknown


MAC_VM_STAT = (REPO / "tests" / "fixtures" / "macos" / "vm_stat.txt").read_text(encoding="ascii")


def test_a_macs_swap_counters_are_read_from_vm_stat(monkeypatch: pytest.MonkeyPatch) -> None:
    from lineage.audit import machine

    assert machine._vm_stat_counters(MAC_VM_STAT) == (8_847_092, 9_440_713)
    after = MAC_VM_STAT.replace("9440713.", "9440912.")
    readings = iter([MAC_VM_STAT, after])
    monkeypatch.setattr(machine, "_system", lambda: "darwin")
    monkeypatch.setattr(machine, "_vm_stat", lambda: next(readings))
    before = machine.swap_counters()
    assert machine.swapped_between(before, machine.swap_counters()) is True
    cut = "\n".join(line for line in MAC_VM_STAT.splitlines() if "Swapouts" not in line)
    assert machine._vm_stat_counters(cut) is None and machine._vm_stat_counters(None) is None
    monkeypatch.setattr(machine, "_system", lambda: "freebsd14")
    assert machine.swap_counters() is None


def test_where_swap_cannot_be_read_a_mismatch_is_recorded_unknown_and_inconclusive(
        demo: tuple[Store, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lineage.audit import machine

    store, _ = demo
    monkeypatch.setattr(machine, "_system", lambda: "freebsd14")  # no probe there
    shutil.copytree(store.root, tmp_path / "store")  # the shared run stays unrecorded
    cli = Cli(tmp_path / "store")
    out = cli("audit", "replay", "tiny", "--step", "4", "--replayer",
              _reversed_batch_replayer(tmp_path), "--auditor", "mac", code=1)
    assert "swap UNKNOWN (no swap counter on this system)" in out.stdout
    assert "whether the machine swapped is unknown: re-run with more memory" in out.stdout
    shown = cli.json("audit", "show", "tiny", "--step", "4")
    assert [a["machine"]["swapped"] for a in shown["attestations"]] == [None]
    assert shown["status"] == "inconclusive"
    assert 4 in cli.json("audit", "status", "tiny")["inconclusive"]


# -- replay requirements ---------------------------------------------------------------------


def _requirements(folder: Path, **fields: int) -> Path:
    path = folder / "requirements.json"
    path.write_text(json.dumps(fields), encoding="utf-8")
    return path


def test_requirements_are_checked_against_this_machine(demo: tuple[Store, Path],
                                                       tmp_path: Path) -> None:
    from lineage.audit import machine

    store, _ = demo
    cli = Cli(store.root)
    assert "run tiny declares no replay requirements" in \
        cli("audit", "requirements", "tiny").stdout
    have = machine.memory_bytes()
    enough = _requirements(tmp_path, memory_bytes=1 << 20, disk_bytes=1 << 20,
                           download_bytes=25_700_000_000, step_seconds=43_200)
    met = cli.json("audit", "requirements", "tiny", "--requirements", str(enough))
    assert met["ok"] and met["source"] == str(enough)
    assert [(c["requirement"], c["available"]) for c in met["checks"]] == \
        [("memory_bytes", have), ("disk_bytes", met["checks"][1]["available"])]
    assert (met["expected_seconds"], met["expected_seconds_swapping"]) == (43_200, 129_600)
    text = cli("audit", "requirements", "tiny", "--requirements", str(enough)).stdout
    assert "about 12.0 h a step; about 36.0 h if the machine swaps" in text
    assert "download               23.9 GiB" in text

    (tmp_path / "big").mkdir()
    short = _requirements(tmp_path / "big", memory_bytes=have * 4, disk_bytes=2**62)
    out = cli("audit", "requirements", "tiny", "--requirements", str(short), code=1)
    assert f"SHORT  memory_bytes           needs {have * 4 / 2**30:,.1f} GiB" in out.stdout
    assert "SHORT  disk_bytes" in out.stdout


def test_a_replay_below_the_requirements_is_refused_unless_forced(
        demo: tuple[Store, Path], tmp_path: Path) -> None:
    from lineage.audit import machine

    store, _ = demo
    cli = Cli(store.root)
    have = machine.memory_bytes()
    need = _requirements(tmp_path, memory_bytes=have * 2)
    base = ("audit", "replay", "tiny", "--step", "4", "--replayer", REPLAYER, "--no-record",
            "--requirements", str(need))
    out = cli(*base, code=2)
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert f"this machine is below run 'tiny''s replay requirements (memory_bytes: " \
        f"{have / 2**30:.1f} GiB of {have * 2 / 2**30:.1f} GiB): --force replays anyway" in \
        out.stderr
    forced = json.loads(cli(*base, "--force", "--json").stdout)
    assert forced["attestation"]["result"] == "match"
    assert forced["attestation"]["machine"]["shortfall"] == [
        f"memory_bytes: {have / 2**30:.1f} GiB of {have * 2 / 2**30:.1f} GiB"]


def test_unified_memory_and_the_initial_state_have_their_own_figures(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from lineage.audit import requirements as req

    declared = {"memory_bytes": 24 << 30, "unified_memory_bytes": 40 << 30,
                "initial_memory_bytes": 48 << 30}
    monkeypatch.setattr(req.machine, "memory_bytes", lambda: 32 << 30)
    monkeypatch.setattr(req, "unified_memory", lambda: False)
    assert [(c["requirement"], c["ok"]) for c in req.check(declared, step=5, folder=tmp_path)] \
        == [("memory_bytes", True)]
    monkeypatch.setattr(req, "unified_memory", lambda: True)  # a 32 GB Mac: too little
    assert [(c["requirement"], c["ok"]) for c in req.check(declared, step=5, folder=tmp_path)] \
        == [("unified_memory_bytes", False)]
    assert [c["requirement"] for c in req.check(declared, step=0, folder=tmp_path)] == \
        ["initial_memory_bytes"]
    header = {"chain": "lineage-chain/2", "config": {"requirements": declared}}
    assert req.declared_requirements(header) == declared
    assert req.declared_requirements({"chain": "open-1b-chain",
                                      "requirements": {"disk_bytes": 5}}) == {"disk_bytes": 5}
    for bad, message in [({"memory": 1}, "unknown field 'memory'"),
                         ({"disk_bytes": -1}, "disk_bytes: must be a positive integer"),
                         ({"disk_bytes": 2.5}, "disk_bytes: must be a positive integer")]:
        with pytest.raises(InputError, match=message):
            req.declared_requirements({"chain": "lineage-chain/2",
                                       "config": {"requirements": bad}})
