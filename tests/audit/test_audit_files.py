"""Files the audit commands are given: records, bundles, keys and allowed_signers files are
opened as regular files only, records files and bundles under a size cap, JSON nested too
deep is the rule `nesting-depth`, and `-o` writes only a regular file or a new path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from lineage.api import Store
from lineage.audit import bundle
from lineage.audit.ledger import iter_records
from lineage.audit.record_files import MAX_RECORDS_BYTES
from lineage.runs.chain import canonical_json

from ..conftest import Cli
from .audit_run import RUN, Chain

DEEP = 100_000  # far past Python's recursion limit


def _one_line_error(result: Any, *needles: str) -> None:
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr and "unexpected" not in result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr


def _deep(depth: int = DEEP) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("form, where", [
    ("object", ":record 1: "), ("list", ":record 2: "), ("jsonl", ":line 2: ")])
def test_deep_json_in_a_records_file_is_the_nesting_depth_rule(fresh, tmp_path, form, where):
    store, chain = fresh
    record = chain.initial()
    deep = {**record, "machine": {**record["machine"], "extra": "@"}}
    text = canonical_json(deep).replace('"@"', _deep())
    path = tmp_path / f"deep.{form}"
    path.write_text({"object": text, "list": f"[{canonical_json(record)},\n{text}]",
                     "jsonl": f"{canonical_json(record)}\n{text}\n"}[form])
    result = Cli(store.root)("audit", "record", str(path), code=None)
    _one_line_error(result, f"{path}{where}nesting-depth: JSON nested deeper than 32 levels")
    assert iter_records(store, RUN) == []  # the batch is refused whole


def test_nesting_within_the_parser_but_past_32_levels_is_refused_too(fresh, tmp_path):
    store, chain = fresh
    record = chain.initial()
    text = canonical_json({**record, "machine": {**record["machine"], "extra": "@"}})
    path = tmp_path / "deep.jsonl"
    path.write_text(text.replace('"@"', _deep(31)) + "\n")  # 33 levels with the record's two
    result = Cli(store.root)("audit", "record", str(path), code=None)
    _one_line_error(result, f"{path}:record 1: nesting-depth")
    path.write_text(text.replace('"@"', _deep(30)) + "\n")
    assert Cli(store.root).json("audit", "record", str(path))["added"]
    in_strings = {**record, "auditor": {**record["auditor"], "name": "[[[[{" * 40}}
    path.write_text(canonical_json(in_strings) + "\n")
    assert Cli(store.root).json("audit", "record", str(path))["added"]  # strings do not nest


def _bundle_with(path: Path, records_text: bytes, manifest: bytes | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("records.jsonl", records_text)
        archive.writestr("MANIFEST.json", manifest if manifest is not None else json.dumps(
            {"spec": bundle.BUNDLE_SPEC, "run": RUN, "records": ["blake3:" + "0" * 64],
             "members": {"records.jsonl": "blake3:" + "0" * 64}, "digest": ""}))
    return path


@pytest.mark.parametrize("member", ["records.jsonl", "MANIFEST.json"])
def test_deep_json_in_a_bundle_is_the_nesting_depth_rule(fresh, tmp_path, member):
    store, _ = fresh
    deep = _deep().encode()
    path = _bundle_with(tmp_path / "b.zip", deep + b"\n" if member == "records.jsonl" else b"",
                        deep if member == "MANIFEST.json" else None)
    result = Cli(store.root)("audit", "import", str(path), code=None)
    place = "records.jsonl:1" if member == "records.jsonl" else "MANIFEST.json"
    _one_line_error(result, f"{path}:{place}: nesting-depth")


@pytest.mark.parametrize("command", ["record", "import", "sign", "sign-key", "signers"])
def test_a_device_is_not_read_as_a_file(fresh, keys, tmp_path, command):
    store, chain = fresh
    records = tmp_path / "r.json"
    records.write_text(canonical_json(chain.initial()))
    args = {"record": ["audit", "record", "/dev/null"],
            "import": ["audit", "import", "/dev/null"],
            "sign": ["audit", "sign", "/dev/null", "--key", str(keys["alice"])],
            "sign-key": ["audit", "sign", str(records), "--key", "/dev/null"],
            "signers": ["audit", "import", str(_exported(store, chain, tmp_path)),
                        "--allowed-signers", "/dev/null"]}[command]
    result = Cli(store.root)(*args, code=None)
    _one_line_error(result, "/dev/null: not-a-regular-file: a character device")


def _exported(store: Store, chain: Chain, folder: Path) -> Path:
    from lineage.audit.ledger import add_records

    add_records(store, [chain.initial()], source="test")
    return Path(Cli(store.root).json("audit", "export", RUN, "-o",
                                     str(folder / "ledger.zip"))["bundle"])


def test_a_fifo_is_refused_without_waiting_for_a_writer(fresh, tmp_path):
    store, _ = fresh
    fifo = tmp_path / "records.jsonl"
    os.mkfifo(fifo)
    done = subprocess.run([sys.executable, "-m", "lineage.cli", "--store", str(store.root),
                           "audit", "record", str(fifo)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"error: {fifo}: not-a-regular-file: a FIFO, not a file of audit " \
                          "records\n"


@pytest.mark.parametrize("command", ["record", "import", "sign"])
def test_files_past_the_cap_are_refused_before_they_are_read(fresh, keys, tmp_path, command):
    store, _ = fresh
    big = tmp_path / "big.jsonl"
    with open(big, "wb") as handle:  # sparse: no disk is spent
        handle.truncate(MAX_RECORDS_BYTES + 1)
    args = {"record": ["audit", "record", str(big)], "import": ["audit", "import", str(big)],
            "sign": ["audit", "sign", str(big), "--key", str(keys["alice"])]}[command]
    result = Cli(store.root)(*args, code=None)
    _one_line_error(result, f"{big}: too-large: {MAX_RECORDS_BYTES + 1:,} bytes, over the "
                    "256 MiB limit")


def test_lines_split_at_newlines_only(fresh, tmp_path):
    """A record whose text holds U+2028 (JSON allows it raw) is one line of JSON lines."""
    store, chain = fresh
    first = chain.initial()
    offer = chain.offer(first)
    offer["location"] = "s3://bucket/relay\u2028step\u0085one"
    path = tmp_path / "relay.jsonl"
    path.write_text(canonical_json(first) + "\n" + canonical_json(offer) + "\n",
                    encoding="utf-8")
    added = Cli(store.root).json("audit", "record", str(path))
    assert len(added["added"]) == 2
    assert [r["location"] for r in iter_records(store, RUN, kind="checkpoint")] == [
        offer["location"]]


@pytest.mark.parametrize("command", ["export", "sign", "report"])
def test_output_refuses_a_fifo_and_leaves_it_as_it_was(fresh, keys, tmp_path, command):
    store, chain = fresh
    _exported(store, chain, tmp_path)
    records = tmp_path / "r.json"
    records.write_text(canonical_json(chain.initial()))
    fifo = tmp_path / "out"
    os.mkfifo(fifo)
    args = {"export": ["audit", "export", RUN, "-o", str(fifo)],
            "sign": ["audit", "sign", str(records), "--key", str(keys["alice"]), "-o", str(fifo)],
            "report": ["audit", "report", RUN, "-o", str(fifo)]}[command]
    result = Cli(store.root)(*args, code=None)
    _one_line_error(result, f"{fifo}: cannot write: it is a FIFO, not a regular file")
    assert fifo.is_fifo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ledger.zip", "out", "r.json", "store"]


def test_export_refuses_a_ledger_no_import_would_read(fresh, tmp_path, monkeypatch):
    store, chain = fresh
    from lineage.audit.ledger import add_records

    add_records(store, [chain.initial()], source="test")
    monkeypatch.setattr(bundle, "MAX_RECORDS_BYTES", 100)  # one record is ~700 bytes
    out = tmp_path / "ledger.zip"
    result = Cli(store.root)("audit", "export", RUN, "-o", str(out), code=None)
    _one_line_error(result, f"the ledger of {RUN!r} is", "over the 100 bytes a bundle may hold")
    assert not out.exists()
