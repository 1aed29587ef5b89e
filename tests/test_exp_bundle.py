"""`lineage exp import` reads a bundle as it reads every file a user names: a FIFO or a
device is refused without blocking, JSON members nested too deep or of the wrong shape
are refused by a named rule (one line, exit 2), and nothing is stored."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path
from typing import Any

import pytest

from lineage.exp.records import record_id
from lineage.runs.chain import blake3_hex, canonical_json

from .conftest import Cli, spawn_lineage


def _bundle(path: Path, records: list[Any], manifest: bytes | None = None) -> Path:
    """A bundle whose manifest lists its members with their true digests: only the
    content is hostile."""
    members = {}
    for record in records:
        data = record if isinstance(record, bytes) else canonical_json(record).encode()
        name = f"records/{record_id(record) if isinstance(record, dict) else 'x'}.json"
        members[name] = data
    listed = {name: blake3_hex(data) for name, data in members.items()}
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        archive.writestr("MANIFEST.json", manifest if manifest is not None else canonical_json(
            {"spec": "lineage-experiment-bundle/2", "members": listed,
             "digest": blake3_hex(canonical_json(listed).encode())}))
    return path


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_special_file_is_refused_as_a_bundle(cli: Cli, tmp_path: Path, kind: str) -> None:
    path = tmp_path / "b.zip"
    if kind == "fifo":
        os.mkfifo(path)  # zipfile opened it and waited for a writer forever
    else:
        path.symlink_to("/dev/zero")
    proc = spawn_lineage("--store", str(cli.store_path), "exp", "import", str(path))
    try:
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 2 and f"{path}: not-a-regular-file" in err


def test_a_deep_manifest_is_refused_by_its_rule(cli: Cli, tmp_path: Path) -> None:
    path = _bundle(tmp_path / "b.zip", [], manifest=b"[" * 50000 + b"]" * 50000)
    result = cli("exp", "import", str(path), code=2)
    assert "MANIFEST.json: nesting-depth: JSON nested deeper than 32 levels" in result.stderr
    assert "unexpected" not in result.stderr


@pytest.mark.parametrize(("record", "message"), [
    (b"{\"a\": " * 5000 + b"1" + b"}" * 5000, "nesting-depth"),
    ([1, 2], "not-an-object"),
    ({"spec": "lineage-experiment/9"}, "unknown record spec"),
    ({"spec": "lineage-experiment/2", "weights": {"files": []}, "outcome": "passed",
      "created_at": "2026-01-01T00:00:00+00:00"}, "not an experiment record"),
    ({"spec": "lineage-experiment/2", "weights": {"files": []}, "outcome": "passed",
      "host": {}, "created_at": "yesterday"}, "not an experiment record"),
])
def test_a_record_lineage_cannot_read_is_refused_and_nothing_stored(
    cli: Cli, tmp_path: Path, record: Any, message: str
) -> None:
    path = _bundle(tmp_path / "b.zip", [record])
    result = cli("exp", "import", str(path), code=2)
    assert message in result.stderr and "unexpected" not in result.stderr
    assert cli.json("exp", "list") == []
