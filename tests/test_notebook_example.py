"""examples/notebook.py runs top to bottom over a demo store, saves its three plots as
real PNG images, and every number it prints is what the store answers."""

from __future__ import annotations

import struct
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from lineage.api import Store, init_store, open_store
from lineage.ingest import ingest_corpus
from lineage.ingest.steps import ingest_steps
from lineage.stream.build import build_stream

from .conftest import EXAMPLES, load_tiny_run

STEPS = 40  # of the demo's 200: enough for clipped and skipped steps, and quick
PLOTS = ("source_shares.png", "loss.png", "documents_per_step.png")
DEMO_LICENSES = ["shakespeare=LicenseRef-PublicDomain", "python-stdlib=PSF-2.0",
                 "debian-copyright=NOASSERTION"]



@pytest.fixture(scope="module")
def notebook(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, Path, str]:
    """examples/demo.sh's store (without text indexes), a 40-step tiny run, and the
    notebook's output over it: (store, plot folder, what it printed)."""
    root = tmp_path_factory.mktemp("notebook")
    init_store(root / "demo-store")
    store = open_store(root / "demo-store")
    ingest_corpus(store, [EXAMPLES / "corpus"], corpus="example", license=DEMO_LICENSES,
                  fingerprints=False)
    ingest_corpus(store, [EXAMPLES / "shards" / "sonnets.jsonl.gz",
                          EXAMPLES / "shards" / "poems.parquet"], corpus="poems",
                  license="LicenseRef-PublicDomain", fingerprints=False)
    build_stream(store, corpus="example", name="main", seed=42, seq_len=1024, batch=4)
    load_tiny_run().train(store, "main", steps=STEPS, out=root / "demo-run")
    ingest_steps(store, root / "demo-run" / "steps.jsonl", run="tiny", stream="main",
                 world_size=2)
    done = subprocess.run(
        [sys.executable, "-W", "error", str(EXAMPLES / "notebook.py"), "demo-store", "plots"],
        cwd=root, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return store, root / "plots", done.stdout


def _tables(printed: str) -> dict[tuple[str, ...], list[dict[str, str]]]:
    """The Markdown tables the notebook printed, by their header."""
    tables: dict[tuple[str, ...], list[dict[str, str]]] = {}
    block: list[list[str]] = []
    for line in [*printed.splitlines(), ""]:
        if line.startswith("|"):
            block.append([cell.strip() for cell in line.strip("|").split("|")])
        elif block:
            header, _rule, *rows = block
            tables[tuple(header)] = [dict(zip(header, row, strict=True)) for row in rows]
            block = []
    return tables


def _segments(store: Store, step: int) -> list[Any]:
    return list(store.docs_in_step(step, stream="main").documents)


def test_the_plots_are_png_images_with_something_drawn(notebook: tuple[Store, Path, str]
                                                       ) -> None:
    import matplotlib.image

    _, plots, printed = notebook
    assert sorted(p.name for p in plots.iterdir()) == sorted(PLOTS)
    for name in PLOTS:
        data = (plots / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", name
        width, height = struct.unpack(">II", data[16:24])
        assert 800 <= width <= 1200 and 400 <= height <= 600, (name, width, height)
        pixels = matplotlib.image.imread(plots / name)
        assert pixels.shape[:2] == (height, width)
        assert pixels.std() > 0.05, name  # not a blank canvas
    assert f"plots in plots/: {', '.join(PLOTS)}" in printed


def test_source_shares_sum_to_one_and_count_the_tokens_of_each_step(
        notebook: tuple[Store, Path, str]) -> None:
    store, _, printed = notebook
    rows = _tables(printed)[("first_step", "last_step", "source", "tokens", "share")]
    ranges = sorted({(int(r["first_step"]), int(r["last_step"])) for r in rows})
    assert ranges[0][0] == 0 and ranges[-1][1] == STEPS - 1 and len(ranges) == 10
    assert all(a[1] + 1 == b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    for first, last in ranges:
        shown = [r for r in rows if int(r["first_step"]) == first]
        assert sum(float(r["share"]) for r in shown) == pytest.approx(1.0, abs=1e-5)
        tokens: Counter[str] = Counter()
        for step in range(first, last + 1):
            for seg in _segments(store, step):
                tokens[seg.source] += seg.token_end - seg.token_start
        assert {r["source"]: int(r["tokens"]) for r in shown} == dict(tokens)
        total = sum(tokens.values())
        for r in shown:
            assert float(r["share"]) == pytest.approx(tokens[r["source"]] / total, abs=1e-6)


def test_the_corpus_shares_are_those_corpus_show_prints(notebook: tuple[Store, Path, str]
                                                        ) -> None:
    store, _, printed = notebook
    rows = _tables(printed)[("source", "tokens", "share")]
    sources = store.corpus("example")["sources"]
    assert [(r["source"], int(r["tokens"]), float(r["share"])) for r in rows] == \
        [(s["source"], s["tokens"], s["share"]) for s in sources]


def test_the_step_kinds_count_the_runs_clipped_and_skipped_steps(
        notebook: tuple[Store, Path, str]) -> None:
    store, _, printed = notebook
    rows = _tables(printed)[("kind", "steps", "first_step", "mean_loss", "mean_grad_norm")]
    shown = {r["kind"]: (int(r["steps"]), int(r["first_step"]), float(r["mean_loss"]))
             for r in rows}
    counted = store.sql(
        "SELECT CASE WHEN skipped THEN 'skipped' WHEN clipped THEN 'clipped' "
        "ELSE 'applied' END AS kind, count(*), min(step), round(avg(loss), 4) "
        "FROM steps WHERE run = 'tiny' GROUP BY kind").rows
    assert shown == {kind: (n, first, loss) for kind, n, first, loss in counted}
    assert set(shown) == {"applied", "clipped", "skipped"}
    assert sum(n for n, _, _ in shown.values()) == STEPS
    assert f"run tiny: {STEPS} steps (0..{STEPS - 1}) over stream main" in printed


def test_documents_per_step_are_what_docs_in_step_lists(notebook: tuple[Store, Path, str]
                                                        ) -> None:
    store, _, printed = notebook
    tables = _tables(printed)
    per_step = {}
    for step in range(STEPS):
        segments = _segments(store, step)
        per_step[step] = (len({(s.doc_id, s.epoch) for s in segments}),
                          sum(s.token_end - s.token_start for s in segments))
    spread = Counter(documents for documents, _ in per_step.values())
    assert {int(r["documents"]): int(r["steps"]) for r in tables[("documents", "steps")]} \
        == dict(spread)
    busiest = tables[("step", "documents", "tokens")]
    assert len(busiest) == 5
    for row in busiest:
        assert per_step[int(row["step"])] == (int(row["documents"]), int(row["tokens"]))
    most = max(documents for documents, _ in per_step.values())
    assert int(busiest[0]["documents"]) == most > 1
