"""The command line through Typer's runner: exit codes, stderr, parsed --json output."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import typer

from lineage import __version__, schemas
from lineage.cli.docgen import iter_commands, render
from lineage.cli.main import app

from .conftest import REPO, Cli, run_lineage
from .test_store import _old_store


def test_version(cli: Cli) -> None:
    assert cli("--version").stdout.strip() == f"lineage {__version__}"


def test_every_command_has_help_and_is_in_the_reference() -> None:
    reference = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    assert reference == render(), "docs/cli.md is stale: python -m lineage.cli.docgen"
    commands = iter_commands(typer.main.get_command(app))
    assert len(commands) >= 8
    for path, command in commands:
        assert (command.help or "").strip(), f"lineage {' '.join(path)} has no help"
        assert f"lineage {' '.join(path)}" in reference
        for param in command.params:  # arguments too: click 8.5 dropped typer's help
            assert (param.help or "").strip(), f"lineage {' '.join(path)} {param.name}"


def test_init_ingest_show_list_sql_roundtrip(cli: Cli, example_corpus: Path) -> None:
    added = cli.json("ingest", "corpus", str(example_corpus), "--corpus", "example",
                     "--license", "python-stdlib=PSF-2.0", "--license", "NOASSERTION")
    assert added["status"] == "added" and re.fullmatch(r"blake3:[0-9a-f]{64}",
                                                       added["manifest_hash"])
    shown = cli.json("corpus", "show", "example")
    assert set(shown) >= {"name", "manifest_hash", "documents", "tokens", "bytes",
                          "dropped_empty", "sources"}
    assert shown["manifest_hash"] == added["manifest_hash"]
    assert shown["documents"] == added["documents"] and shown["dropped_empty"] == 3
    assert abs(sum(s["share"] for s in shown["sources"]) - 1.0) < 1e-5
    for source in shown["sources"]:
        assert set(source) >= {"source", "documents", "tokens", "share"}
    listed = cli.json("corpus", "list")
    assert [c["name"] for c in listed] == ["example"]
    rows = cli.json("sql", "SELECT source, count(*) AS n FROM documents GROUP BY source "
                    "ORDER BY source")
    assert rows == [{"source": s["source"], "n": s["documents"]} for s in shown["sources"]]
    again = cli("ingest", "corpus", str(example_corpus), "--corpus", "example",
                "--license", "python-stdlib=PSF-2.0", "--license", "NOASSERTION")
    assert "unchanged" in again.stdout and added["manifest_hash"] in again.stdout


def test_human_output_of_show(cli: Cli, example_shards: Path) -> None:
    cli("ingest", "corpus", str(example_shards / "sonnets.jsonl.gz"), "--corpus", "sonnets")
    out = cli("corpus", "show", "sonnets").stdout
    assert "documents   154" in out and "sonnets" in out and "100.00%" in out


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("corpus", "show", "nope"), 2, "no corpus named 'nope'"),
        (("sql", "DELETE FROM corpora"), 2, "read-only: DELETE statements are not allowed"),
        (("ingest", "corpus", "/no/such/dir", "--corpus", "c"), 2, "/no/such/dir: no such file"),
        (("ingest", "corpus", ".", "--corpus", "bad name"), 2, "--corpus 'bad name'"),
        (("ingest", "corpus", ".", "--corpus", "c", "--format", "xml"), 2, "--format must be"),
    ],
)
def test_errors_are_one_line_with_grep_exit_codes(
    cli: Cli, args: tuple[str, ...], code: int, message: str
) -> None:
    result = cli(*args, code=code)
    assert message in result.stderr
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_bad_input_through_the_cli_names_file_and_line(cli: Cli, tmp_path: Path) -> None:
    shard = tmp_path / "bad.jsonl"
    shard.write_text('{"text": "fine"}\n{"text": oops}\n')
    result = cli("ingest", "corpus", str(shard), "--corpus", "c", code=2)
    assert result.stderr == f"error: {shard}:line 2: malformed JSON (Expecting value)\n"


def test_missing_store_is_explained(tmp_path: Path) -> None:
    result = Cli(tmp_path / "absent")("corpus", "list", code=2)
    assert "no lineage store at" in result.stderr and "lineage init" in result.stderr


def test_a_damaged_parquet_file_gives_a_clear_query_error(
    cli: Cli, example_shards: Path
) -> None:
    added = cli.json("ingest", "corpus", str(example_shards / "poems.parquet"), "--corpus", "p")
    part = cli.store_path / added["parts"][0]
    part.write_bytes(part.read_bytes()[:-50])
    result = cli("sql", "SELECT count(*) FROM documents", code=2)
    assert "documents table cannot be read" in result.stderr
    assert "lineage store verify" in result.stderr
    verified = cli("store", "verify", code=1).stdout
    assert f"{added['parts'][0]}: size-mismatch (corpus p)" in verified
    # documents, hashes, its lookup array, the text index
    assert verified.rstrip().splitlines()[-1].startswith("FAILED: 7 files")


def test_store_gc_removes_only_leftovers(cli: Cli, example_shards: Path) -> None:
    cli("ingest", "corpus", str(example_shards / "poems.parquet"), "--corpus", "p")
    leftover = cli.store_path / "tables" / "documents" / "p-0123456789abcdef-0000.parquet"
    leftover.write_bytes(b"left by a killed ingest")
    report = cli.json("store", "verify")
    assert report["ok"] and report["unregistered"] == [
        "tables/documents/p-0123456789abcdef-0000.parquet"]
    assert cli.json("store", "gc")["removed"] == []  # too young: may be mid-commit
    removed = cli.json("store", "gc", "--min-age", "0")["removed"]
    assert removed == ["tables/documents/p-0123456789abcdef-0000.parquet"]
    # documents, hashes, its lookup array, text index
    assert cli.json("store", "verify")["files_checked"] == 7  # near_bands among the text tables


def test_init_twice_and_migrate(cli: Cli) -> None:
    assert "already exists" in cli("init").stdout
    assert cli.json("store", "migrate")["created"] is False
    # A current store has nothing to migrate, and migrate says that, not "already exists".
    assert cli("store", "migrate").stdout == (
        f"store {cli.store_path} is at schema v{schemas.SCHEMA_VERSION} already: nothing to "
        "migrate\n")


def test_migrate_says_what_it_migrated(tmp_path: Path) -> None:
    store = _old_store(tmp_path / "old", 1)
    assert Cli(store.root)("store", "migrate").stdout == (
        f"store {store.root} migrated from schema v1 to v{schemas.SCHEMA_VERSION}\n")


def test_the_console_script_runs_out_of_process(tmp_path: Path) -> None:
    result = run_lineage("--store", str(tmp_path / "s"), "init", "--json")
    assert result.returncode == 0 and json.loads(result.stdout)["created"] is True
    assert run_lineage("--help").stdout.count("ingest") >= 1


def test_stream_build_refuses_a_bad_memory_limit_before_any_work(cli: Cli) -> None:
    result = cli("stream", "build", "--corpus", "c", "--name", "s", "--seed", "1",
                 "--seq-len", "8", "--batch", "1", "--memory-limit", "lots", code=2)
    assert result.stderr.strip().splitlines() == [
        "error: memory limit 'lots': expected a size such as 1GB or 512MB"]


def test_stream_build_with_too_little_memory_says_so_and_stores_nothing(
    cli: Cli, example_corpus: Path
) -> None:
    cli("ingest", "corpus", str(example_corpus), "--corpus", "c")
    result = cli("stream", "build", "--corpus", "c", "--name", "s", "--seed", "1",
                 "--seq-len", "64", "--batch", "1", "--memory-limit", "1KB", code=2)
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: --memory-limit 1KB is too small for this build (")
    assert cli("stream", "list", "--json").stdout.strip() == "[]"
    assert cli("store", "verify", "--json").stdout.count('"ok": true') == 1


def test_an_ingest_with_too_little_memory_says_so_and_stores_nothing(
    cli: Cli, example_corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LINEAGE_MEMORY_LIMIT", "1KB")
    result = cli("ingest", "corpus", str(example_corpus), "--corpus", "c", code=2)
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: $LINEAGE_MEMORY_LIMIT 1KB is too small for this ingest (")
    assert cli("corpus", "list", "--json").stdout.strip() == "[]"



def test_a_reader_that_stops_early_is_not_reported_as_a_bug() -> None:
    """`lineage ... --help | head -40`: the help is cut off, and no error is printed."""
    import shlex
    import subprocess
    import sys

    command = shlex.join([sys.executable, "-m", "lineage.cli", "ingest", "order", "olmo-core",
                          "--help"])
    for _ in range(3):  # the reader leaves while the help is being written: a race, so thrice
        done = subprocess.run(f"{command} | head -40 >/dev/null", shell=True,
                              capture_output=True, text=True, timeout=60,
                              env={**os.environ, "COLUMNS": "80"})
        assert "unexpected" not in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("failing", ["order_files", "tables_files"])
def test_a_full_disk_in_an_out_of_core_build_says_so_and_stores_nothing(
    cli: Cli, example_corpus: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    """The out-of-core order's scratch files (the keys, or the buckets the tables are
    sorted from) meet a full disk: one line, exit 2, no stream, nothing left in staging."""
    import builtins
    import errno
    import importlib

    from lineage.stream import build

    cli("ingest", "corpus", str(example_corpus), "--corpus", "c")
    monkeypatch.setattr(build, "IN_MEMORY_BYTES_PER_ROW", 10**30)
    module = importlib.import_module(f"lineage.stream.{failing}")

    def full(path: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if "a" in mode or "w" in mode:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return builtins.open(path, mode, *args, **kwargs)

    if failing == "order_files":
        monkeypatch.setattr(module, "open", full, raising=False)
    else:  # the buckets, once the order is made: Arrow files
        import pyarrow as pa

        def no_room(*args: Any, **kwargs: Any) -> Any:
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(pa.ipc, "new_file", no_room)
    result = cli("stream", "build", "--corpus", "c", "--name", "s", "--seed", "1",
                 "--seq-len", "64", "--batch", "1", code=2)
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and "disk" in line.lower(), line
    assert cli("stream", "list", "--json").stdout.strip() == "[]"
    store_root = Path(cli.store_path)
    assert not any(p.is_file() for p in (store_root / "staging").rglob("*"))
    assert cli("store", "verify", "--json").stdout.count('"ok": true') == 1
