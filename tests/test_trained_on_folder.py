"""`trained-on DIR`: every file of a folder asked about, one result each, with a summary,
by the same rules as `ingest corpus DIR` records the folder."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from lineage.api import Store
from lineage.ingest import ingest_corpus
from lineage.stream.build import build_stream

from .conftest import Cli
from .test_ingest_links import doc_tree  # noqa: F401 - the fixture, copied with its links


@pytest.fixture
def folder(tmp_path: Path, example_corpus: Path) -> Path:
    """A few real files at two depths, with a hidden file, a link and an empty file."""
    root = tmp_path / "mine"
    shutil.copytree(example_corpus / "shakespeare", root / "plays")
    shutil.copy(example_corpus / "python-stdlib" / "chunk.py", root / "chunk.py")
    (root / ".notes").write_text("hidden\n")
    (root / "empty.txt").write_bytes(b"")
    (root / "link.txt").symlink_to(root / "chunk.py")
    return root


def test_every_file_is_a_result_and_the_folder_is_summarised(
        store: Store, folder: Path) -> None:
    ingest_corpus(store, [folder / "plays"], corpus="plays")
    build_stream(store, corpus="plays", name="main", seed=3, seq_len=512, batch=4)
    cli = Cli(store.root)
    answer = cli.json("trained-on", str(folder), code=1)  # chunk.py is in no corpus
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")
                   if p.is_file() and not p.is_symlink() and p.stat().st_size
                   and not p.name.startswith("."))
    assert [r["file"] for r in answer["results"]] == [os.path.join(folder, f) for f in files]
    by_file = {r["file"]: r["verdict"] for r in answer["results"]}
    assert by_file[os.path.join(folder, "chunk.py")] == "not-found"
    counts: dict[str, int] = {}
    for verdict in by_file.values():
        counts[verdict] = counts.get(verdict, 0) + 1
    found = sum(counts.get(v, 0) for v in ("in-stream", "text-match", "partial"))
    assert answer["folders"] == [{
        "folder": str(folder), "files": len(files), "found": found,
        "verdicts": dict(sorted(counts.items())), "skipped_hidden": 1, "skipped_links": 1,
        "skipped_empty": 1}]
    assert found == len(files) - 1 - counts.get("in-corpus-only", 0)
    # Each file's result is what asking about that file alone answers.
    alone = cli.json("trained-on", str(folder / "plays" / "sonnets.txt"))["results"][0]
    assert alone == {**answer["results"][files.index("plays/sonnets.txt")],
                     "file": str(folder / "plays" / "sonnets.txt")}
    shown = cli("trained-on", str(folder), code=1).stdout.splitlines()
    assert shown[-1] == (
        f"{folder}: {found} of {len(files)} files trained on ("
        + ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
        + "); skipped 1 hidden, 1 links, 1 empty files")


def test_a_folder_with_everything_in_the_stream_exits_0(store: Store, folder: Path) -> None:
    ingest_corpus(store, [folder], corpus="all")
    build_stream(store, corpus="all", name="all", seed=1, seq_len=8, batch=1)
    answer = Cli(store.root).json("trained-on", str(folder), "--stream", "all", code=None)
    verdicts = answer["folders"][0]["verdicts"]
    assert set(verdicts) <= {"in-stream", "in-corpus-only"}
    # The stream ends at a whole step: what it cut is in the corpus only, and says so.
    assert sum(verdicts.values()) == answer["folders"][0]["files"]


def test_files_and_folders_keep_the_order_given(store: Store, folder: Path) -> None:
    ingest_corpus(store, [folder / "plays"], corpus="plays")
    chunk, plays = str(folder / "chunk.py"), str(folder / "plays")
    answer = Cli(store.root).json("trained-on", chunk, plays, chunk, code=1)
    labels = [r["file"] for r in answer["results"]]
    assert labels[0] == labels[-1] == chunk and all(
        label.startswith(plays + os.sep) for label in labels[1:-1])
    assert answer["folders"][0]["files"] == len(labels) - 2


def test_a_fifo_in_the_folder_or_given_is_refused_without_waiting(
        store: Store, folder: Path) -> None:
    os.mkfifo(folder / "plays" / "pipe")
    result = Cli(store.root)("trained-on", str(folder), code=2)
    assert result.stderr.startswith(f"error: {folder / 'plays' / 'pipe'}: special-file: a FIFO")
    assert result.stderr.count("\n") == 1
    result = Cli(store.root)("trained-on", str(folder / "plays" / "pipe"), code=2)
    assert result.stderr == (f"error: {folder / 'plays' / 'pipe'}: not-a-regular-file: a FIFO, "
                             "not a file\n")


def test_the_folder_asks_about_what_its_ingest_recorded(store: Store,
                                                         doc_tree: Path) -> None:  # noqa: F811
    """A real documentation tree with its links: the files trained-on asks about are the
    documents the ingest recorded from it, and each is found in that corpus."""
    ingest_corpus(store, [doc_tree], corpus="docs", fingerprints=False)
    answer = Cli(store.root).json("trained-on", str(doc_tree), code=None)
    recorded = sorted(r[0] for r in store.sql("SELECT doc_id FROM documents").rows)
    asked = [Path(r["file"]).relative_to(doc_tree).as_posix() for r in answer["results"]]
    assert sorted(asked) == recorded
    assert {r["verdict"] for r in answer["results"]} == {"in-corpus-only"}
    assert all(any(m["doc_id"] == rel for m in r["matches"])
               for rel, r in zip(asked, answer["results"], strict=True))
    summary = answer["folders"][0]
    assert summary["skipped_links"] == ingest_corpus(
        store, [doc_tree], corpus="docs", fingerprints=False).skipped_links > 0
