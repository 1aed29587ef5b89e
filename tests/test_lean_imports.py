"""A lookup imports only what its answer needs, on a store of real size.

pyarrow imports pandas (installed here, as in most users' environments) the first time it
converts a Python value; on a 1M-document store that was 0.6-1 s of a 1.3 s `docs --json`.
These tests run the real console script in a subprocess on a 1M-document store and list
the modules it loaded; what that costs in time is measured in bench/startup.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lineage.api import init_store, open_store
from lineage.ingest import ingest_corpus
from lineage.stream.build import build_stream

pytestmark = pytest.mark.slow
DOCUMENTS = 1_000_000
HEAVY = {"pandas", "polars", "rich", "typer", "click"}
# What a lookup answered from the lookup arrays (lineage/store/arrays.py) never imports
DECODERS = {"pyarrow", "numpy"}

# Runs the console script's entry point, then prints the top-level modules it loaded.
PROBE = """
import atexit, json, sys
atexit.register(lambda: sys.stderr.write("MODULES " + json.dumps(sorted(
    {m.split(".")[0] if not m.startswith("lineage.cli.") else m for m in sys.modules}))
    + "\\n"))
sys.argv = ["lineage", *sys.argv[1:]]
from lineage.cli.entry import run
run()
"""


@pytest.fixture(scope="module")
def big_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A ready manifest of 1M documents in two sources, ingested, and a stream over it;
    with a file whose bytes are one of its documents (the others are hashes only)."""
    import blake3
    import numpy as np

    root = tmp_path_factory.mktemp("million")
    known = root / "known.txt"
    known.write_text("The one document of the manifest whose bytes are here.\n")
    rng = np.random.default_rng(7)
    hashes = rng.integers(0, 2**63, size=(DOCUMENTS, 4), dtype=np.int64)
    content = [f"{a & (2**63 - 1):016x}{b:016x}{c:016x}{d:016x}"
               for a, b, c, d in hashes.tolist()]
    content[123_456] = blake3.blake3(known.read_bytes()).hexdigest()
    sizes = rng.integers(200, 20_000, DOCUMENTS)
    sizes[123_456] = known.stat().st_size
    table = pa.table({
        "doc_id": [f"doc-{i:07d}" for i in range(DOCUMENTS)],
        "source": np.where(np.arange(DOCUMENTS) % 5 == 0, "code", "web").tolist(),
        "uri": [f"s3://bucket/{i}" for i in range(DOCUMENTS)],
        "n_bytes": sizes,
        "n_tokens": rng.integers(50, 5_000, DOCUMENTS),
        "content_hash": content,
        "license": ["CC-BY-4.0"] * DOCUMENTS,
    })
    pq.write_table(table, root / "manifest.parquet")
    init_store(root / "store")
    store = open_store(root / "store")
    ingest_corpus(store, [root / "manifest.parquet"], corpus="big")
    build_stream(store, corpus="big", name="main", seed=42, seq_len=2048, batch=64)
    return root / "store", known


def _loaded(store: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    done = subprocess.run([sys.executable, "-c", PROBE, "--store", str(store), *args],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "200"})
    line = next(line for line in done.stderr.splitlines() if line.startswith("MODULES "))
    return done, set(json.loads(line.removeprefix("MODULES ")))


def test_pandas_is_installed_here() -> None:
    """What the other tests prove needs pandas to be importable."""
    import importlib.util

    assert importlib.util.find_spec("pandas") is not None


def test_docs_json_loads_no_heavy_module(big_store: tuple[Path, Path]) -> None:
    store, _ = big_store
    done, modules = _loaded(store, "docs", "--step", "777", "--stream", "main", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["step"] == 777
    assert not modules & (HEAVY | DECODERS), modules & (HEAVY | DECODERS)
    # the catalog rows it read are kept (lineage/store/kept_reads.py): the next lookup
    # of any step starts no DuckDB
    again, modules = _loaded(store, "docs", "--step", "778", "--stream", "main", "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["step"] == 778
    assert not modules & (HEAVY | DECODERS | {"duckdb"}), modules & (HEAVY | DECODERS)


def test_trained_on_json_loads_no_heavy_module(
        big_store: tuple[Path, Path], tmp_path: Path) -> None:
    store, known = big_store
    done, modules = _loaded(store, "trained-on", str(known), "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)["results"][0]
    assert result["matches"][0]["doc_id"] == "doc-0123456"
    assert not modules & (HEAVY | DECODERS), modules & (HEAVY | DECODERS)
    again, modules = _loaded(store, "trained-on", str(known), "--json")
    assert (again.returncode, again.stdout) == (done.returncode, done.stdout)
    assert not modules & (HEAVY | DECODERS | {"duckdb"}), modules & (HEAVY | DECODERS)
    unknown = tmp_path / "query.txt"
    unknown.write_text("a file no document holds\n", encoding="utf-8")
    done, modules = _loaded(store, "trained-on", str(unknown), "--json")
    assert done.returncode == 1, done.stderr  # not found: the lookup ran to its end
    assert not modules & (HEAVY | DECODERS), modules & (HEAVY | DECODERS)


@pytest.mark.parametrize(("args", "module"), [
    (("docs", "--step", "777", "--stream", "main"), "lineage.cli.query"),
    (("corpus", "show", "big"), "lineage.cli.corpus"),
    (("stream", "show", "main"), "lineage.cli.stream"),
])
def test_the_human_forms_load_no_data_frame_library(
        big_store: tuple[Path, Path], args: tuple[str, ...], module: str) -> None:
    store, _ = big_store
    done, modules = _loaded(store, *args)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
    assert not modules & {"pandas", "polars"}, modules & {"pandas", "polars"}
    # the command line sets up the command it runs, not all of them
    commands = {name for name in modules if name.startswith("lineage.cli.")}
    assert module in commands
    assert not commands & {"lineage.cli.audit", "lineage.cli.exp", "lineage.cli.serve"}


def test_the_human_lookups_decode_no_parquet(
        big_store: tuple[Path, Path], tmp_path: Path) -> None:
    """Answered from the lookup arrays, the people's forms of `docs` and `trained-on`
    load neither pyarrow nor numpy (pyarrow and what it brings are a third of a human
    `docs` process)."""
    store, known = big_store
    done, modules = _loaded(store, "docs", "--step", "777", "--stream", "main")
    assert done.returncode == 0, done.stderr
    assert "step 777" in done.stdout.splitlines()[0]
    assert not modules & (DECODERS | {"pandas"}), modules & (DECODERS | {"pandas"})
    done, modules = _loaded(store, "trained-on", str(known))
    assert done.returncode == 0, done.stderr
    assert "doc-0123456" in done.stdout
    assert not modules & (DECODERS | {"pandas"}), modules & (DECODERS | {"pandas"})


def test_a_lookup_still_gives_pandas_to_who_asks(big_store: tuple[Path, Path]) -> None:
    """After keep_pandas_out, an explicit pandas call still works (pyarrow tries again)."""
    store, _ = big_store
    code = ("from lineage.store.no_pandas import keep_pandas_out\n"
            "import lineage, sys\n"
            "keep_pandas_out()\n"
            f"answer = lineage.open_store({str(store)!r}).docs_in_step(777, stream='main')\n"
            "assert 'pandas' not in sys.modules\n"
            "frame = answer.to_polars().to_arrow().to_pandas()\n"
            "print(type(frame).__module__, len(frame))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    module, rows = done.stdout.split()
    assert module.startswith("pandas") and int(rows) > 0
