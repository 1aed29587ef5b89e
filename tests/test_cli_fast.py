"""The lean path for `docs --json` and `trained-on FILE|DIR --json`: same bytes as the full
command line, and anything it does not know goes to the full command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from lineage.api import Store
from lineage.cli.fast import run_fast
from lineage.ingest import ingest_corpus
from lineage.stream.build import build_stream

from .conftest import Cli, run_lineage


@pytest.fixture(scope="module")
def streamed(tmp_path_factory: pytest.TempPathFactory, example_corpus: Path) -> Store:
    from lineage.api import init_store, open_store

    root = tmp_path_factory.mktemp("fast") / "store"
    init_store(root)
    store = open_store(root)
    ingest_corpus(store, [example_corpus / "shakespeare"], corpus="plays")
    build_stream(store, corpus="plays", name="main", seed=3, seq_len=512, batch=4)
    return store


def _both(store: Store, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = run_fast(["--store", str(store.root), *args])
    fast = capsys.readouterr().out
    full = Cli(store.root)(*args, code=None)
    assert code == full.exit_code and fast == full.stdout, args
    return code, fast


@pytest.mark.parametrize("args", [
    ("docs", "--step", "3", "--json"),
    ("docs", "--json", "--step=7", "--rank", "1", "--world-size", "2"),
    ("docs", "--step", "2", "--window", "9", "--stream", "main", "--json"),
])
def test_docs_answers_like_the_full_command_line(
        streamed: Store, capsys: pytest.CaptureFixture[str], args: tuple[str, ...]) -> None:
    code, out = _both(streamed, capsys, *args)
    assert code == 0 and '"documents"' in out


def test_trained_on_answers_and_exits_like_the_full_command_line(
        streamed: Store, capsys: pytest.CaptureFixture[str], example_corpus: Path) -> None:
    inside = str(example_corpus / "shakespeare" / "sonnets.txt")
    outside = str(example_corpus / "python-stdlib" / "chunk.py")
    assert _both(streamed, capsys, "trained-on", inside, "--json")[0] == 0
    assert _both(streamed, capsys, "trained-on", inside, outside, "--json")[0] == 1


def test_trained_on_a_folder_answers_like_the_full_command_line(
        streamed: Store, capsys: pytest.CaptureFixture[str], example_corpus: Path) -> None:
    plays = str(example_corpus / "shakespeare")
    code, out = _both(streamed, capsys, "trained-on", plays, "--json")
    assert '"folders"' in out and code == (1 if '"not-found"' in out or
                                           '"in-corpus-only"' in out else 0)
    code, out = _both(streamed, capsys, "trained-on", str(example_corpus),
                      str(example_corpus / "python-stdlib" / "chunk.py"), "--json")
    assert code == 1 and out.count('"folder": ') == 1
    # The console script, which takes the lean path, prints the same bytes.
    script = run_lineage("--store", str(streamed.root), "trained-on", plays, "--json")
    assert (script.returncode, script.stdout) == _both(streamed, capsys, "trained-on", plays,
                                                       "--json")


@pytest.mark.parametrize("args", [
    ("docs", "--step", "3"),  # human output
    ("docs", "--step", "-1", "--json"),  # Typer reports the bad value
    ("docs", "--json"),  # --step missing
    ("docs", "--step", "1", "--step", "2", "--json"),
    ("docs", "--step", "1", "--bogus", "--json"),
    ("trained-on", "--text", "some words", "--json"),
    ("trained-on", "-", "--json"),
    ("trained-on", "--json"),
    ("stream", "list", "--json"),
    ("--debug", "docs", "--step", "1", "--json"),
    ("--help",),
])
def test_anything_else_goes_to_the_full_command_line(streamed: Store,
                                                     args: tuple[str, ...]) -> None:
    assert run_fast(["--store", str(streamed.root), *args]) is None


def test_errors_are_reported_by_the_full_command_line(streamed: Store,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert run_fast(["--store", str(streamed.root), "docs", "--step", "99999", "--json"]) is None
    assert capsys.readouterr().out == ""
    result = run_lineage("--store", str(streamed.root), "docs", "--step", "99999", "--json")
    assert result.returncode == 2 and result.stderr.startswith("error: stream 'main' has steps")


def test_the_console_script_takes_the_lean_path(streamed: Store) -> None:
    result = run_lineage("--store", str(streamed.root), "docs", "--step", "1", "--json",
                         "-X", env={"PYTHONVERBOSE": ""})
    assert result.returncode == 2  # -X is not an option: the full command line says so
    lean = run_lineage("--store", str(streamed.root), "docs", "--step", "1", "--json",
                       env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert lean.returncode == 0
    assert "typer" not in lean.stderr and "rich" not in lean.stderr
