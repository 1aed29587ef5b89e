"""What `lineage exp run` records of its weights: every file of a Hugging Face cache
snapshot (laid out by huggingface_hub's own functions) with its SHA-256, the snapshot's
revision checked against `--revision`, and one model file (a GGUF) as weights."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from lineage.diligence.verify import folder_sums

from .conftest import Cli
from .test_folder import gguf_with_tensors
from .test_hf_cache import REVISION, blob_of, flip_byte, put_in_cache

OTHER_REVISION = "03e404f2b8ae3d1f1a1c8f9d0e4b5a6c7d8e9f00"


def _run(cli: Cli, weights: Path, revision: str, *args: str, code: int = 0) -> dict[str, Any]:
    result = cli("exp", "run", "--weights", str(weights), "--revision", revision, "--json",
                 *args, code=code)
    return json.loads(result.stdout)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def hub(minilm_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    cache = tmp_path_factory.mktemp("hub")
    put_in_cache(minilm_folder, cache)
    return cache


@pytest.fixture
def snapshot(hub: Path, tmp_path: Path) -> Path:
    """A private copy of the cached MiniLM snapshot (the links are relative)."""
    shutil.copytree(hub, tmp_path / "hub", symlinks=True)
    (found,) = (tmp_path / "hub").glob(f"models--*/snapshots/{REVISION}")
    return found


def _sums_lines(snapshot: Path) -> dict[str, str]:
    """`lineage sums` of the snapshot: path -> SHA-256."""
    lines = [line.split(None, 1) for line in folder_sums(snapshot).splitlines()]
    return {name.lstrip("*"): digest for digest, name in lines}


def test_every_file_of_a_snapshot_is_recorded_with_its_sha256(
    cli: Cli, snapshot: Path, minilm_folder: Path
) -> None:
    record = _run(cli, snapshot, REVISION, "--", "true")
    files = {f["path"]: f for f in record["weights"]["files"]}
    expected = _sums_lines(snapshot)
    assert len(files) == len(expected) == sum(1 for p in minilm_folder.rglob("*")
                                             if p.is_file())  # was "0 files"
    assert {p: f["sha256"] for p, f in files.items()} == expected
    assert files["model.safetensors"]["size"] == \
        (minilm_folder / "model.safetensors").stat().st_size
    assert record["weights"]["snapshot"]["revision"] == REVISION
    assert record["weights"]["snapshot"]["refs"] == ["main"]
    shown = cli("exp", "show", record["id"]).stdout
    assert f"({len(files)} files, blake3:" in shown
    assert f"at revision {REVISION} (refs: main)" in shown


def test_diff_shows_the_file_that_changed_in_a_tampered_snapshot(
    cli: Cli, snapshot: Path
) -> None:
    intact = _run(cli, snapshot, REVISION, "--name", "intact", "--", "true")
    blob = blob_of(snapshot, "model.safetensors")
    flip_byte(blob, blob.stat().st_size // 2)  # inside a tensor: the structure holds
    tampered = _run(cli, snapshot, "main", "--name", "tampered", "--", "true", code=1)
    assert tampered["failure"]["type"] == "hash mismatch"
    assert intact["weights"]["digest"] != tampered["weights"]["digest"]
    diff = cli.json("exp", "diff", "intact", "tampered", code=1)
    (change,) = [c for c in diff["changes"] if c["field"] == "files"]
    assert change["key"] == "model.safetensors"
    assert change["b"] == hashlib.sha256(blob.read_bytes()).hexdigest() != change["a"]


@pytest.mark.parametrize("revision", [REVISION, REVISION[:7], REVISION.upper()[:12], "main"])
def test_a_revision_naming_the_snapshot_is_accepted(cli: Cli, snapshot: Path,
                                                   revision: str) -> None:
    record = _run(cli, snapshot, revision, "--", "true")
    assert record["revision"] == revision and record["revision_override"] is False
    assert record["warnings"] == []


@pytest.mark.parametrize("revision", ["deadbeef", REVISION[:6], "v1.0"])
def test_a_revision_that_does_not_name_the_snapshot_is_refused(
    cli: Cli, snapshot: Path, tmp_path: Path, revision: str
) -> None:
    marker = tmp_path / "ran"
    result = cli("exp", "run", "--weights", str(snapshot), "--revision", revision, "--",
                 "touch", str(marker), code=2)
    assert f"revision-mismatch: --revision {revision!r} does not name this snapshot" \
        in result.stderr
    assert f"its folder names revision {REVISION} (refs naming it: main)" in result.stderr
    assert "--revision-override" in result.stderr
    assert not marker.exists() and cli.json("exp", "list") == []


def test_an_override_records_both_revisions(cli: Cli, snapshot: Path) -> None:
    result = cli("exp", "run", "--weights", str(snapshot), "--revision", "deadbeef",
                 "--revision-override", "--json", "--", "true")
    record = json.loads(result.stdout)
    assert record["revision"] == "deadbeef" and record["revision_override"] is True
    assert record["weights"]["snapshot"]["revision"] == REVISION
    assert "does not name this snapshot" in record["warnings"][0]
    assert "both are recorded" in result.stderr
    assert "--revision-override: the given revision does not name it" in \
        cli("exp", "show", record["id"]).stdout


def test_a_ref_that_names_another_snapshot_does_not_name_this_one(
    cli: Cli, snapshot: Path, minilm_folder: Path
) -> None:
    cache = snapshot.parent.parent.parent
    put_in_cache(minilm_folder, cache, revision=OTHER_REVISION)  # refs/main moves there
    assert (snapshot.parent.parent / "refs" / "main").read_text() == OTHER_REVISION
    result = cli("exp", "run", "--weights", str(snapshot), "--revision", "main", "--",
                 "true", code=2)
    assert "revision-mismatch" in result.stderr
    assert _run(cli, snapshot.parent / OTHER_REVISION, "main", "--", "true")["outcome"] \
        == "passed"


# --- one model file -------------------------------------------------------------------


@pytest.fixture
def gguf(tmp_path: Path) -> Path:
    (tmp_path / "models").mkdir()
    (path,) = gguf_with_tensors(tmp_path / "models" / "tiny.gguf")
    return path


def test_one_gguf_file_is_weights(cli: Cli, gguf: Path, tmp_path: Path) -> None:
    (gguf.parent / "notes.txt").write_text("not part of the model")
    record = _run(cli, gguf, "r1", "--", "true")
    assert record["outcome"] == "passed"
    assert record["weights"]["path"] == str(gguf.resolve())
    assert record["weights"]["files"] == [{
        "path": "tiny.gguf", "size": gguf.stat().st_size,
        "sha256": hashlib.sha256(gguf.read_bytes()).hexdigest()}]
    assert {c["name"] for c in record["checks"]} == {"structure", "risks"}


def test_one_gguf_file_is_checked_against_its_line_of_a_list(
    cli: Cli, gguf: Path, tmp_path: Path
) -> None:
    digest = hashlib.sha256(gguf.read_bytes()).hexdigest()
    sums = tmp_path / "SHA256SUMS"  # the release's list: other quantizations are elsewhere
    sums.write_text(f"{digest}  tiny.gguf\n{'0' * 64}  tiny-Q8_0.gguf\n")
    record = _run(cli, gguf, "r1", "--sums", str(sums), "--", "true")
    (checked,) = [c for c in record["checks"] if c["name"] == "checksums"]
    assert checked["ok"] and [f["path"] for f in checked["files"]] == ["tiny.gguf"]
    sums.write_text(f"{'1' * 64}  tiny.gguf\n")
    wrong = _run(cli, gguf, "r2", "--sums", str(sums), "--", "true", code=1)
    assert wrong["failure"]["type"] == "hash mismatch" and wrong["failure"]["files"] == \
        ["tiny.gguf"]
    sums.write_text(f"{digest}  other.gguf\n")
    unnamed = _run(cli, gguf, "r3", "--sums", str(sums), "--", "true", code=1)
    assert unnamed["failure"]["type"] == "no checksums"  # nothing was checked


def test_one_part_of_a_split_gguf_brings_its_set(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "split").mkdir()
    parts = gguf_with_tensors(tmp_path / "split" / "tiny.gguf", split_max_tensors=1)
    record = _run(cli, parts[0], "r1", "--", "true")
    assert [f["path"] for f in record["weights"]["files"]] == [p.name for p in parts]
    assert len(parts) == 3 and record["outcome"] == "passed"


def test_one_gguf_file_in_a_snapshot_is_checked_against_its_blob(
    cli: Cli, gguf: Path, tmp_path: Path
) -> None:
    (gguf.parent / ".gitattributes").write_text("*.gguf filter=lfs diff=lfs merge=lfs -text\n")
    snapshot = put_in_cache(gguf.parent, tmp_path / "hub", repo_id="org/tiny-GGUF")
    linked = snapshot / "tiny.gguf"
    assert linked.is_symlink() and os.readlink(linked).startswith("../../blobs/")
    record = _run(cli, linked, REVISION[:8], "--", "true")
    assert record["weights"]["path"] == str(linked)  # its name, not its blob's
    digest = hashlib.sha256(gguf.read_bytes()).hexdigest()
    assert record["weights"]["files"] == [{"path": "tiny.gguf", "size": gguf.stat().st_size,
                                           "sha256": digest}]
    (checked,) = [c for c in record["checks"] if c["name"] == "checksums"]
    assert checked["ok"] and [(f["path"], f["actual"]) for f in checked["files"]] == \
        [("tiny.gguf", digest)]  # the .gitattributes beside it is not checked with it
    assert record["weights"]["snapshot"]["repo_id"] == "org/tiny-GGUF"


@pytest.mark.parametrize(("make", "message"), [
    (lambda p: os.mkfifo(p), "not-a-regular-file: a FIFO, not a weights folder or model file"),
    (lambda p: None, "no such weights folder or file"),
    (lambda p: p.symlink_to(p.parent / "gone"), "a link whose target does not exist"),
])
def test_weights_that_are_neither_folder_nor_file_are_refused(
    cli: Cli, tmp_path: Path, make: Any, message: str
) -> None:
    path = tmp_path / "weights"
    make(path)
    result = cli("exp", "run", "--weights", str(path), "--revision", "r", "--", "true",
                 code=2)
    assert f"{path}: {message}" in result.stderr and cli.json("exp", "list") == []


def test_the_header_cap_is_a_policy_exp_run_lets_a_user_set(cli: Cli, tmp_path: Path) -> None:
    import numpy as np
    from safetensors.numpy import save_file

    folder = tmp_path / "model"
    folder.mkdir()
    save_file({"w": np.zeros((2, 2), np.float32)}, str(folder / "model.safetensors"),
              metadata={"note": "x" * 4096})  # a 4 KiB header, made by the real writer
    stopped = _run(cli, folder, "r1", "--max-header-mib", "0.001", "--", "true", code=1)
    assert stopped["outcome"] == "check-failed"
    (structure,) = [c for c in stopped["checks"] if c["name"] == "structure"]
    message = json.dumps(structure)
    assert "exceeds the local cap of 1048 bytes" in message
    assert "not a format limit nor a sign of an unfinished download" in message
    assert "--max-header-mib" in message
    assert _run(cli, folder, "r2", "--max-header-mib", "0.01", "--", "true")["outcome"] == \
        "passed"
    bad = cli("exp", "run", "--weights", str(folder), "--revision", "r3",
              "--max-header-mib", "0", "--", "true", code=2)
    assert "--max-header-mib must be positive" in bad.stderr
