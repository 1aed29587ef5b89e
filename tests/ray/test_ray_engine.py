"""`--engine ray` leaves the store the local engine leaves, byte for byte, on a real
local cluster: random corpora (ready manifests, text shards, folders) ingested and
ordered by both engines; a task whose worker dies is run again and changes nothing; a
worker that dies for good leaves nothing committed; bad input gives the local engine's
one-line errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import blake3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from lineage.api import Store, init_store, open_store
from lineage.errors import LineageError
from lineage.ingest import ingest_corpus
from lineage.ingest.engine import open_executor
from lineage.stream.build import build_stream

from ..conftest import Cli, run_lineage, spawn_lineage, write_jsonl
from ..hostile.test_ingest_input import CASES
from .conftest import leftovers, store_state

pytestmark = [pytest.mark.ray, pytest.mark.slow]
# No shrinking: each example starts tasks on the cluster (a failure is reported as drawn).
SLOW = settings(max_examples=6, deadline=None, derandomize=True,
                phases=[Phase.explicit, Phase.reuse, Phase.generate],
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
WORDS = ["alpha", "beta", "gamma", "delta", "sonnet", "rose", "time", "love", "the", "of"]


def _both(work: Path, build: Callable[[Store, Any], None]) -> tuple[Any, Any]:
    """`build(store, executor)` on a new store with each engine: what each left (its
    state, or its error's message)."""
    found = []
    for engine in ("local", "ray"):
        root = work / engine
        init_store(root)
        try:
            with open_executor(engine) as executor:
                build(open_store(root), executor)
        except LineageError as exc:
            found.append(("error", str(exc)))
            continue
        found.append(store_state(root))
        assert leftovers(root) == []
    return found[0], found[1]


def _stream(store: Store, executor: Any, seed: int, epochs: list[str]) -> None:
    build_stream(store, corpus="c", name="s", seed=seed, seq_len=4, batch=1, epochs=epochs,
                 executor=executor)


manifest_rows = st.lists(
    st.tuples(st.text(alphabet="abcé/-_0", min_size=1, max_size=6),
              st.sampled_from(["web", "code", "books"]), st.integers(0, 40),
              st.integers(0, 30), st.booleans()),
    min_size=1, max_size=40)


@SLOW
@given(rows=manifest_rows, split=st.integers(1, 3), parquet=st.booleans(),
       seed=st.integers(0, 2**64 - 1), epochs=st.sampled_from([[], ["web=2.5"], ["code=0.5"]]))
def test_ready_manifests_and_their_stream_are_the_same_on_ray(
    ray_cluster: str, monkeypatch: pytest.MonkeyPatch, rows: list[Any], split: int,
    parquet: bool, seed: int, epochs: list[str],
) -> None:
    monkeypatch.setattr("lineage.stream.shuffle.ROWS_PER_RANGE", 7)  # many key ranges
    monkeypatch.setattr("lineage.stream.shuffle.ROWS_PER_KEYS", 5)  # and parts in slices
    records = [{"doc_id": f"{name}{i}", "source": source, "uri": f"s3://b/{i}",
                "n_bytes": size, "n_tokens": tokens,
                "content_hash": blake3.blake3(f"{name}{i}".encode()).hexdigest(),
                **({"license": "MIT"} if licensed else {})}
               for i, (name, source, size, tokens, licensed) in enumerate(rows)]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        paths = []
        for n in range(split):
            chunk = records[n::split]
            if parquet and n % 2 == 0:
                columns = {k: [r.get(k) for r in chunk] for k in records[0] if k != "license"}
                paths.append(work / f"m{n}.parquet")
                pq.write_table(pa.table(columns), paths[-1])
            else:
                paths.append(write_jsonl(work / f"m{n}.jsonl", chunk))

        def build(store: Store, executor: Any) -> None:
            ingest_corpus(store, paths, corpus="c", fmt="manifest", executor=executor,
                          license="Apache-2.0")
            _stream(store, executor, seed, epochs)

        local, ray = _both(work, build)
    assert ray == local
    if isinstance(local, dict):
        assert local["streams"] and local["files"]


def test_a_stream_ordered_out_of_core_is_the_same_on_ray(
    ray_cluster: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    """A corpus over the build's memory budget: on Ray the keys are computed by tasks
    (the driver never computes them), each writing files of its own, and the stream is
    the local one byte for byte (ranges, slices and buckets of a few rows)."""
    from lineage.stream import build, order_files, tables_files

    monkeypatch.setattr(build, "IN_MEMORY_BYTES_PER_ROW", 10**30)
    monkeypatch.setattr(order_files, "ROWS_PER_RANGE", 9)
    monkeypatch.setattr(order_files, "MERGE_ROWS", 11)
    monkeypatch.setattr("lineage.stream.shuffle.ROWS_PER_KEYS", 13)
    monkeypatch.setattr(tables_files, "RIDS_PER_BUCKET", 17)
    monkeypatch.setattr(tables_files, "ROWS_PER_BUCKET", 19)
    records = [{"doc_id": f"d{i:03d}", "source": ("web", "code", "books")[i % 3],
                "uri": f"s3://b/{i}", "n_bytes": 10 + i, "n_tokens": 1 + (i * 37) % 50,
                "content_hash": blake3.blake3(f"{i % 60}".encode()).hexdigest()}
               for i in range(90)]
    manifest = write_jsonl(tmp_path / "m.jsonl", records)
    local_keys = order_files.write_keys

    def build_both(store: Store, executor: Any) -> None:
        ingest_corpus(store, [manifest], corpus="c", fmt="manifest", executor=executor)
        if executor is not None:  # the driver must not compute the keys itself
            monkeypatch.setattr(order_files, "write_keys", None)
        try:
            _stream(store, executor, 11, ["web=1.5", "code=0.7"])
        finally:
            monkeypatch.setattr(order_files, "write_keys", local_keys)

    local, ray = _both(tmp_path / "work", build_both)
    assert isinstance(local, dict) and local["streams"]
    assert ray == local


texts = st.lists(st.tuples(st.lists(st.sampled_from(WORDS), min_size=0, max_size=40),
                           st.booleans(), st.sampled_from(["poems", "prose"])),
                 min_size=1, max_size=30)


@SLOW
@given(docs=texts, split=st.integers(1, 3), seed=st.integers(0, 2**64 - 1))
def test_text_shards_and_their_text_index_are_the_same_on_ray(
    ray_cluster: str, docs: list[Any], split: int, seed: int,
) -> None:
    records = [{"text": " ".join(words) * (1 + i % 3), "source": source,
                **({"id": f"doc-{i}"} if named else {})}
               for i, (words, named, source) in enumerate(docs)]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        paths = [write_jsonl(work / f"s{n}.jsonl", records[n::split]) for n in range(split)]

        def build(store: Store, executor: Any) -> None:
            ingest_corpus(store, paths, corpus="c", executor=executor)
            _stream(store, executor, seed, [])

        local, ray = _both(work, build)
    assert ray == local
    if isinstance(local, dict):
        assert local["text_indexes"]


def test_folders_of_files_are_the_same_on_ray(ray_cluster: str, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("lineage.ingest.shard_tasks.FILES_PER_TASK", 3)  # 4 tasks a folder
    folder = tmp_path / "corpus"
    for n in range(11):
        sub = folder / ("web" if n % 2 else "code")
        sub.mkdir(parents=True, exist_ok=True)
        data = f"file {n} ".encode() * n if n != 4 else b"\xff\xfe binary"
        (sub / f"f{n:02d}.txt").write_bytes(data)  # f00 is empty: dropped by both

    def build(store: Store, executor: Any) -> None:
        ingest_corpus(store, [folder], corpus="c", executor=executor)
        _stream(store, executor, 5, ["web=2"])

    local, ray = _both(tmp_path, build)
    assert isinstance(local, dict)
    assert ray == local
    assert local["corpora"][0][6] == 1  # dropped_empty: f00.txt


def test_a_ready_manifests_text_index_is_the_same_on_ray(ray_cluster: str,
                                                          tmp_path: Path) -> None:
    """--fingerprints on ready manifests: their rows staged by tasks, each document then
    read from its uri by the reduce."""
    docs = tmp_path / "docs"
    docs.mkdir()
    rows = []
    for n in range(12):
        data = (" ".join(WORDS[(n + i) % 10] for i in range(30 + n))).encode()
        (docs / f"d{n}.txt").write_bytes(data)
        rows.append({"doc_id": f"d{n}", "source": "web", "uri": f"docs/d{n}.txt",
                     "n_bytes": len(data), "n_tokens": len(data),
                     "content_hash": blake3.blake3(data).hexdigest()})
    paths = [write_jsonl(tmp_path / "a.jsonl", rows[:5]),
             write_jsonl(tmp_path / "b.jsonl", rows[5:])]

    def build(store: Store, executor: Any) -> None:
        ingest_corpus(store, paths, corpus="c", fingerprints=True, executor=executor)

    local, ray = _both(tmp_path, build)
    assert isinstance(local, dict) and local["text_indexes"][0][5] == 12  # documents
    assert ray == local


def _shards(work: Path) -> list[Path]:
    return [write_jsonl(work / f"s{n}.jsonl",
                        [{"text": f"{WORDS[n]} {WORDS[i % 10]} " * (i + 1)} for i in range(20)])
            for n in range(3)]


def test_a_task_whose_worker_dies_is_run_again_and_the_store_is_the_same(
    ray_cluster: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    paths = _shards(tmp_path)
    killed = []

    def build(store: Store, executor: Any) -> None:
        for step, marker in (("ingest", tmp_path / "killed-ingest"),
                             ("stream", tmp_path / "killed-stream")):
            if executor is not None:  # the first task of each step dies once
                monkeypatch.setenv("LINEAGE_RAY_KILL_ONCE", str(marker))
            if step == "ingest":
                ingest_corpus(store, paths, corpus="c", executor=executor)
            else:
                _stream(store, executor, 3, [])
            killed.append(marker.exists())
        monkeypatch.delenv("LINEAGE_RAY_KILL_ONCE", raising=False)

    local, ray = _both(tmp_path, build)
    assert killed == [False, False, True, True]  # the ray run lost a worker in each step
    assert ray == local


def test_a_worker_that_dies_for_good_leaves_nothing_and_a_rerun_is_the_same(
    ray_cluster: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    paths = _shards(tmp_path)
    root = tmp_path / "ray"
    init_store(root)
    before = store_state(root)
    monkeypatch.setenv("LINEAGE_RAY_MAX_RETRIES", "0")
    monkeypatch.setenv("LINEAGE_RAY_KILL_ONCE", str(tmp_path / "killed"))
    result = Cli(root)("ingest", "corpus", *map(str, paths), "--corpus", "c",
                       "--engine", "ray", code=2)
    assert result.stderr.startswith("error: a Ray task of stage_text_shard could not finish")
    assert result.stderr.count("\n") == 1 and "nothing was committed" in result.stderr
    assert store_state(root) == before and leftovers(root) == []
    monkeypatch.delenv("LINEAGE_RAY_KILL_ONCE")
    Cli(root)("ingest", "corpus", *map(str, paths), "--corpus", "c", "--engine", "ray")
    local = tmp_path / "local"
    init_store(local)
    Cli(local)("ingest", "corpus", *map(str, paths), "--corpus", "c")
    assert store_state(root) == store_state(local)


def test_a_driver_killed_after_the_map_leaves_nothing_and_a_rerun_is_the_same(
    ray_cluster: str, tmp_path: Path,
) -> None:
    """The command joins the running cluster (--ray-address), its tasks stage every
    shard, the reduce writes its parts, and the driver is killed before the commit."""
    paths = [str(p) for p in _shards(tmp_path)]
    root = tmp_path / "ray"
    init_store(root)
    before = store_state(root)
    argv = ["--store", str(root), "ingest", "corpus", *paths, "--corpus", "c",
            "--engine", "ray", "--ray-address", ray_cluster]
    ready = tmp_path / "ready"
    proc = spawn_lineage(*argv, env={"LINEAGE_FAULT_POINT": "reduce-written",
                                     "LINEAGE_FAULT_READY": str(ready)})
    deadline = time.monotonic() + 120
    while not ready.exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    after = store_state(root)
    assert [after[k] for k in ("corpora", "parquet_files")] == \
        [before[k] for k in ("corpora", "parquet_files")]  # its temp parts are garbage
    rerun = run_lineage(*argv, "--json")
    assert rerun.returncode == 0, rerun.stderr
    assert json.loads(rerun.stdout)["status"] == "added"
    local = tmp_path / "local"
    init_store(local)
    Cli(local)("ingest", "corpus", *paths, "--corpus", "c")
    assert store_state(root) == store_state(local)


HOSTILE = [case for case in CASES if case.kind in ("jsonl", "parquet", "manifest", "folder")
           and case.patch is None][:8]


@pytest.mark.parametrize("case", HOSTILE, ids=[case.name for case in HOSTILE])
def test_bad_input_gives_the_local_engines_error_on_ray(
    ray_cluster: str, tmp_path: Path, case: Any,
) -> None:
    work = tmp_path / "in"
    work.mkdir()
    path = case.build(work)
    said = []
    for engine in ("local", "ray"):
        root = tmp_path / engine
        init_store(root)
        result = Cli(root)("ingest", "corpus", str(path), "--corpus", "hostile",
                           "--engine", engine, code=2)
        assert result.stderr.count("\n") == 1 and case.rule in result.stderr
        said.append(result.stderr)
        assert leftovers(root) == [] and not list((root / "tables").rglob("*.parquet"))
    assert said[1] == said[0]


def test_without_ray_installed_the_engine_says_how_to_get_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    shard = write_jsonl(tmp_path / "s.jsonl", [{"text": "a"}])
    init_store(tmp_path / "store")
    cli = Cli(tmp_path / "store")
    for argv in (["ingest", "corpus", str(shard), "--corpus", "c"],
                 ["stream", "build", "--corpus", "c", "--name", "s", "--seed", "1",
                  "--seq-len", "4", "--batch", "1"]):
        result = cli(*argv, "--engine", "ray", code=2)
        assert result.stderr == "error: --engine ray needs Ray: pip install 'lineage[ray]'\n"


_PROBE = """
import json, sys
from lineage.cli.entry import run
sys.argv = ["lineage", *sys.argv[1:]]
try:
    run()
finally:
    sys.stderr.write("RAY " + json.dumps("ray" in sys.modules) + "\\n")
"""


def test_the_local_engine_never_imports_ray(tmp_path: Path) -> None:
    shard = write_jsonl(tmp_path / "s.jsonl", [{"text": "one two three four five"}] * 1
                        + [{"text": f"doc {i} of the corpus"} for i in range(20)])
    store = tmp_path / "store"
    init_store(store)
    for argv in (["ingest", "corpus", str(shard), "--corpus", "c"],
                 ["stream", "build", "--corpus", "c", "--name", "s", "--seed", "1",
                  "--seq-len", "4", "--batch", "1"]):
        done = subprocess.run([sys.executable, "-c", _PROBE, "--store", str(store), *argv,
                               "--json"], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert "RAY false" in done.stderr
        assert json.loads(done.stdout)["status"] == "added"


def test_an_unknown_engine_or_a_lone_ray_address_is_a_usage_error(tmp_path: Path) -> None:
    shard = write_jsonl(tmp_path / "s.jsonl", [{"text": "a"}])
    init_store(tmp_path / "store")
    cli = Cli(tmp_path / "store")
    result = cli("ingest", "corpus", str(shard), "--corpus", "c", "--engine", "spark", code=2)
    assert result.stderr == "error: --engine 'spark': expected one of local, ray\n"
    result = cli("ingest", "corpus", str(shard), "--corpus", "c", "--ray-address", "auto",
                 code=2)
    assert result.stderr == "error: --ray-address needs --engine ray\n"
    assert not list((tmp_path / "store" / "tables").rglob("*.parquet"))
