"""The fault matrix: every write point of every writing command, failed in turn.

For each command below, a clean run lists the calls that change files in the store
(libfault.c sees Python's, DuckDB's and pyarrow's alike); each point found (the first
call of each kind on each kind of path, and the last one too on the catalog's files) is
then failed in its own run: with ENOSPC (the disk stays full from there on), with EIO
(that one call fails), and by SIGKILL just before the call. After every case:

- no traceback, and no "unexpected" error (a bug's message) on stderr;
- a command that reports success left exactly what a clean run commits; one that fails
  (exit 2) left exactly what was committed before; a killed one left one or the other;
- `store verify` passes;
- when the command's work is not in the store, running it again succeeds and commits
  exactly what a clean run does.

SQLite tests its I/O error handling the same way (its test VFS fails the Nth call).
The matrix size is written to test-artifacts/fault-matrix/ and printed at the end of
the run (tests/conftest.py); docs/store.md quotes it.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lineage.api import Store, open_store

from ..conftest import EXAMPLES, REPO, load_tiny_run, write_jsonl, write_parquet
from .injector import Injector, Point, build_library, cases, copy_store, points

pytestmark = pytest.mark.slow
ARTIFACTS = REPO / "test-artifacts" / "fault-matrix"
# `make test` fails each point's first call once, the actions in turn (injector.cases);
# LINEAGE_FAULT_MATRIX=full (`make test-faults`, run by CI too) every action at every
# point.
FULL = os.environ.get("LINEAGE_FAULT_MATRIX") == "full"

# Columns that differ between two clean runs of the same command (times, random ids,
# records that embed them), left out when states are compared.
VOLATILE = {
    "schema_info": {"value"},  # the last commit's random mark (the version is checked on open)
    "ingests": {"id", "lineage_version"},
    "experiments": {"id", "record", "record_digest"},
    # compared by _logs_kept: a log the disk refused is left out, the record says why
    "experiment_logs": {"experiment", "stream", "content", "n_bytes", "path", "stored_bytes",
                        "stored_sha256"},
    "audit_records": {"id", "record"},
    # the ledger's log: its key is made at random, and its leaves are the records above
    "audit_logs": {"origin", "verifier_key", "root", "checkpoint"},
    "audit_log_entries": {"origin", "record_id", "entry"},
    "audit_log_tiles": {"tile_key", "origin", "data"},
    "audit_log_edges": {"origin", "data"},
}


@dataclass
class World:
    """Inputs shared by the scenarios, made once per worker."""

    root: Path
    base: Path  # a store with corpus `poems` (text index) and stream `s`
    run_store: Path  # base plus a 12-step run `tiny` over `s`, checkpoints every 4 steps
    run_dir: Path  # that run's step log and checkpoints
    inputs: Path
    garbage: Path  # base with files no commit registered, and a dead writer's staging
    broken: Path  # base with a commit left in its log and a lost corpus part


def _committed_all(store: Path) -> str | None:
    return None


def _consistent(store: Path) -> str | None:
    """No lost file, no commit waiting in the log, no garbage: what repair leaves."""
    report = open_store(store).verify()
    if not report["ok"]:
        return f"lost files remain: {[p['path'] for p in report['problems']][:2]}"
    if report["pending_log"]:
        return "commits wait in the catalog's log"
    return f"garbage remains: {report['unregistered'][:2]}" if report["unregistered"] else None


def _logs_kept(store: Path) -> str | None:
    """Every stream of every record is stored, or the record says why not (the record of
    a command that ran is kept even when the disk refused its logs)."""
    found = open_store(store).sql(
        "SELECT e.record, l.stream FROM experiments e LEFT JOIN experiment_logs l "
        "ON l.experiment = e.id").rows
    kept = {(record, stream) for record, stream in found}
    for record, _ in found:
        command = json.loads(record).get("command") or {}
        for stream in ("stdout", "stderr"):
            summary = command.get(stream) or {}
            if (record, stream) not in kept and not {"log_error", "incomplete"} & set(summary):
                return f"the {stream} log is neither stored nor said to be missing"
    return None


def _no_garbage(store: Path) -> str | None:
    left = open_store(store).verify()["unregistered"]
    return f"garbage remains: {left[:2]}" if left else None


@dataclass
class Scenario:
    name: str
    store: Callable[[World], Path]  # the template copied before each case
    argv: Callable[[World, Path], list[str]]  # the command, given the case's store
    returncode: int = 0
    failed: tuple[int, ...] = (2,)  # the exit codes of a run the fault stopped
    # What a successful run leaves beyond the catalog's rows (gc and repair change files
    # only): checked with them.
    done: Callable[[Path], str | None] = _committed_all


def _dir_input(world: World) -> Path:
    return world.inputs / "dir"


SCENARIOS = [
    Scenario("ingest-files", lambda w: w.base,
             lambda w, s: ["ingest", "corpus", str(_dir_input(w)), "--corpus", "files"]),
    Scenario("ingest-jsonl", lambda w: w.base,
             lambda w, s: ["ingest", "corpus", str(EXAMPLES / "shards" / "sonnets.jsonl.gz"),
                           "--corpus", "sonnets"]),
    Scenario("ingest-parquet", lambda w: w.base,
             lambda w, s: ["ingest", "corpus", str(w.inputs / "shard.parquet"),
                           "--corpus", "pq"]),
    Scenario("ingest-manifest", lambda w: w.base,
             lambda w, s: ["ingest", "corpus", str(w.inputs / "manifest.jsonl"),
                           "--corpus", "ready"]),
    Scenario("stream-build", lambda w: w.base,
             lambda w, s: ["stream", "build", "--corpus", "poems", "--name", "s2", "--seed",
                           "7", "--seq-len", "64", "--batch", "2"]),
    Scenario("ingest-windows", lambda w: w.base,
             lambda w, s: ["ingest", "windows", str(w.inputs / "windows.parquet"), "--stream",
                           "rec", "--corpus", "poems", "--seq-len", "64", "--batch", "2"]),
    Scenario("ingest-steps", lambda w: w.base,
             lambda w, s: ["ingest", "steps", str(w.run_dir / "steps.jsonl"), "--run", "tiny",
                           "--stream", "s", "--world-size", "2"]),
    Scenario("ingest-checkpoint", lambda w: w.run_store,
             lambda w, s: ["ingest", "checkpoint", str(w.run_dir / "checkpoint-7"), "--run",
                           "tiny", "--step", "7"]),
    Scenario("audit-claim", lambda w: w.run_store,
             lambda w, s: ["audit", "claim", "tiny", "--steps", "4-7", "--auditor", "ada"]),
    Scenario("exp-run", lambda w: w.base,
             lambda w, s: ["exp", "run", "--weights", str(w.inputs / "weights"), "--revision",
                           "r1", "--name", "e", "--", "true"], done=_logs_kept),
    Scenario("remove-cascade", lambda w: w.run_store,
             lambda w, s: ["corpus", "remove", "poems", "--cascade"]),
    Scenario("store-gc", lambda w: w.garbage,
             lambda w, s: ["store", "gc", "--min-age", "0"], done=_no_garbage),
    Scenario("store-repair", lambda w: w.broken, lambda w, s: ["store", "repair"],
             failed=(1, 2), done=_consistent),  # 1: a part could not be rebuilt now
]


def state(store_path: Path) -> dict[str, list[tuple[Any, ...]]]:
    """What a store has committed: every catalog table's rows (without the columns that
    differ between two clean runs, and timestamps), the registered parts with their
    SHA-256 among them."""
    store = open_store(store_path)
    found: dict[str, list[tuple[Any, ...]]] = {}
    with store.reader(views=False) as con:
        schema = con.execute("SELECT current_setting('search_path')").fetchall()[0][0]
        columns = con.execute(
            "SELECT table_name, column_name, data_type FROM duckdb_columns() WHERE "
            "database_name = ? ORDER BY table_name, column_index",
            [schema.split(".")[0]]).fetchall()
        tables: dict[str, list[str]] = {}
        for table, column, kind in columns:
            if "TIMESTAMP" in kind or column in VOLATILE.get(table, set()):
                continue
            tables.setdefault(table, []).append(f'"{column}"')
        for table, kept in tables.items():
            rows = con.execute(f"SELECT {', '.join(kept)} FROM {table}").fetchall()
            found[table] = sorted(rows, key=repr)
    return found


def _world(root: Path) -> World:
    from lineage.api import init_store
    from lineage.ingest import ingest_corpus
    from lineage.stream.build import build_stream

    inputs = root / "inputs"
    (inputs / "dir").mkdir(parents=True)
    for name in ("sonnets.txt", "macbeth.txt", "hamlet.txt"):  # real text, some subfolders
        for found in sorted((EXAMPLES / "corpus").rglob(name))[:1]:
            shutil.copy(found, inputs / "dir" / name)
    (inputs / "dir" / "nested").mkdir()
    for found in sorted((EXAMPLES / "corpus" / "python-stdlib").glob("*.py"))[:6]:
        shutil.copy(found, inputs / "dir" / "nested" / found.name)
    write_parquet(inputs / "shard.parquet", {"id": [f"p{i}" for i in range(40)],
                                             "text": [f"line {i} of a shard" for i in range(40)]})
    write_jsonl(inputs / "manifest.jsonl", [
        {"doc_id": f"doc-{i:03d}", "source": "web", "uri": f"s3://b/{i}", "n_bytes": 100 + i,
         "n_tokens": 25 + i, "content_hash": f"{i:064x}", "license": "CC0-1.0"}
        for i in range(50)])
    _weights(inputs / "weights")

    base = root / "base"
    init_store(base)
    store = open_store(base)
    ingest_corpus(store, [EXAMPLES / "shards" / "poems.parquet"], corpus="poems")
    build_stream(store, corpus="poems", name="s", seed=3, seq_len=64, batch=2)
    _windows_log(store, inputs / "windows.parquet")

    run_store = copy_store(base, root / "run-store")
    run_dir = root / "run"
    load_tiny_run().train(open_store(run_store), "s", steps=12, out=run_dir,
                          checkpoint_every=4)
    shutil.rmtree(run_store)
    run_store = copy_store(base, root / "run-store")
    from lineage.ingest.steps import ingest_steps

    ingest_steps(open_store(run_store), run_dir / "steps.jsonl", run="tiny", stream="s",
                 world_size=2)

    garbage = copy_store(base, root / "garbage")
    (garbage / "tables" / "documents" / "left-0000.parquet").write_bytes(b"PAR1 not data")
    dead = garbage / "staging" / "999999999-1-deadbeef"
    dead.mkdir(parents=True)
    (dead / "part.parquet").write_bytes(b"half")
    broken = _broken(root, base, inputs)
    return World(root, base, run_store, run_dir, inputs, garbage, broken)


def _weights(folder: Path) -> None:
    import numpy as np
    from safetensors.numpy import save_file

    folder.mkdir(parents=True)
    save_file({"w": np.arange(16, dtype=np.float32)}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps({"model_type": "bigram"}))


def _windows_log(store: Store, path: Path) -> None:
    rows = []
    for step in range(store.stream("s")["steps"]):
        for d in store.docs_in_step(step, stream="s", rank=0, world_size=1)["documents"]:
            rows.append({"step": step, "rank": d["rank"], "window": d["window"],
                         "doc_id": d["doc_id"], "token_start": d["token_start"],
                         "token_end": d["token_end"]})
    write_parquet(path, {k: [r[k] for r in rows] for k in rows[0]})


def _broken(root: Path, base: Path, inputs: Path) -> Path:
    """base, then corpus `files` ingested with its commit left in the catalog's log (the
    catalog file could not take it) and one of its parts lost, as an older lineage left
    stores after a full disk: what `store repair` must bring back."""
    broken = copy_store(base, root / "broken")
    library = build_library(root)
    injector = Injector(library, root)
    try:
        outcome = injector.run(["--store", str(broken), "ingest", "corpus",
                                str(inputs / "dir"), "--corpus", "files"], cwd=root,
                               store=broken, point=Point("write", r"^catalog\.duckdb$", 1),
                               action="eio")
    finally:
        injector.close()
    assert outcome.returncode == 0 and outcome.fired, outcome
    assert (broken / "catalog.duckdb.wal").stat().st_size > 0
    lost = sorted((broken / "tables" / "documents").glob("files-*.parquet"))
    assert lost
    lost[0].unlink()
    return broken


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return _world(tmp_path_factory.mktemp("fault-world"))


@pytest.fixture(scope="module")
def injector(world: World) -> Iterator[Injector]:
    scratch = world.root / "runs"
    scratch.mkdir(exist_ok=True)
    running = Injector(build_library(world.root), scratch)
    yield running
    running.close()


@dataclass
class Case:
    point: Point
    action: str
    returncode: int
    fired: bool
    problem: str | None = None


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_every_write_point_fails_without_breaking_the_store(
    scenario: Scenario, world: World, injector: Injector, tmp_path: Path
) -> None:
    template = scenario.store(world)
    before = state(template)
    damaged = _lost(template)  # what was wrong before (repair's store only)

    clean = copy_store(template, tmp_path / "clean")
    log = tmp_path / "calls.log"
    first = injector.run(_argv(scenario, world, clean), cwd=tmp_path, store=clean, log=log)
    assert first.returncode == scenario.returncode, first.stderr
    after = state(clean)
    assert scenario.done(clean) is None, scenario.done(clean)
    if after == before:  # gc and repair change files, not rows: what they leave tells
        assert scenario.done(template) is not None, "the clean run changed nothing"
    found = points(log)
    assert found, "no write was seen: the injector is not in the process"

    only = os.environ.get("LINEAGE_FAULT_ONLY")  # "KIND NTH": one point, to look into it
    chosen = [(p, a) for p, a in cases(found, full=FULL)
              if not only or f"{p.kind} {p.nth}" == only]
    done = [_case(scenario, world, injector, template, tmp_path, point, action, before, after,
                  damaged) for point, action in chosen]
    _record(scenario, found, done)
    bad = [c for c in done if c.problem]
    assert not bad, "\n".join(f"{c.action} at {c.point}: {c.problem}" for c in bad[:20])
    assert all(c.fired for c in done if c.point.nth == 1), \
        [str(c.point) for c in done if not c.fired and c.point.nth == 1]
    assert sum(c.fired for c in done) >= len(done) * 0.9


def _case(scenario: Scenario, world: World, injector: Injector, template: Path,
          tmp_path: Path, point: Point, action: str, before: Any, after: Any,
          damaged: set[str]) -> Case:
    store = copy_store(template, tmp_path / "case")
    argv = _argv(scenario, world, store)
    outcome = injector.run(argv, cwd=tmp_path, store=store, point=point, action=action)
    case = Case(point, action, outcome.returncode, outcome.fired)
    case.problem = _judge(scenario, store, outcome, action, before, after, damaged)
    if case.problem is None and _missing(scenario, store, after):  # a re-run must do it
        rerun = injector.run(argv, cwd=tmp_path, store=store)
        if rerun.returncode != scenario.returncode:
            case.problem = f"the re-run exited {rerun.returncode}: {rerun.stderr.strip()}"
        elif missing := _missing(scenario, store, after):
            case.problem = f"the re-run did not commit what a clean run does: {missing}"
        elif not open_store(store).verify()["ok"]:
            case.problem = "store verify fails after the re-run"
    return case


def _lost(store: Path) -> set[str]:
    return {p["path"] for p in open_store(store).verify()["problems"]}


def _judge(scenario: Scenario, store: Path, outcome: Any, action: str, before: Any,
           after: Any, damaged: set[str]) -> str | None:
    err = outcome.stderr
    if "Traceback" in err or "unexpected " in err:
        return f"a bug's message: {err.strip()[-400:]}"
    if not outcome.fired:
        return None if outcome.returncode == scenario.returncode else \
            f"not reached, yet exited {outcome.returncode}: {err.strip()}"
    try:
        now = state(store)
        verified = open_store(store).verify()
    except Exception as exc:  # the catalog itself cannot be read: the worst case
        return f"the store cannot be read: {exc}"
    new_damage = {p["path"] for p in verified["problems"]} - damaged
    if new_damage:  # only repair's store had lost files before, and may keep them
        return f"store verify fails: {sorted(new_damage)[:2]}"
    if action == "kill":
        if outcome.returncode != -9:
            return f"was not killed (exit {outcome.returncode})"
        return None if now in (before, after) else "a kill left a state between two commits"
    if outcome.returncode == scenario.returncode:
        missing = _missing(scenario, store, after)
        return None if not missing else \
            f"reported success but did not commit the work: {missing} ({err.strip()[-300:]})"
    if outcome.returncode not in scenario.failed:
        return f"exit {outcome.returncode} for a failed write: {err.strip()}"
    lines = err.strip().splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    if outcome.returncode == 2 and (len(errors) != 1 or any(
            not line.startswith(("error: ", "warning: ")) for line in lines)):
        return f"not a one-line error: {err.strip()}"
    return None if now == before else "failed, but left part of its work committed"


def _missing(scenario: Scenario, store: Path, after: Any) -> str | None:
    """What the store lacks of a clean run's work; None when nothing."""
    now = state(store)
    if now != after:
        tables = sorted(t for t in set(now) | set(after) if now.get(t) != after.get(t))
        return f"tables differ: {tables}"
    return scenario.done(store)


def _argv(scenario: Scenario, world: World, store: Path) -> list[str]:
    return ["--store", str(store), *scenario.argv(world, store)]


def _record(scenario: Scenario, found: list[Point], done: list[Case]) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    summary = {"scenario": scenario.name, "points": len(found), "cases": len(done),
               "full": FULL, "reached": sum(c.fired for c in done),
               "failed_commands": sum(c.fired and c.returncode not in (0, -9) for c in done)}
    (ARTIFACTS / f"{scenario.name}.json").write_text(json.dumps(summary))
