"""One model file is accepted wherever a folder is: `verify`, `sums`, `inspect`, `report`.

GGUF models usually arrive as one file (or a split set). The file is checked with its split
parts, never with the rest of the folder it lies in; against a SHA256SUMS list of a whole
release only the lines for those files count, and each of them must be listed. Files are
llama.cpp's own vocab GGUF (committed) and GGUF files written by `gguf.GGUFWriter`; lists
are checked against `sha256sum`'s own output.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import Cli
from .test_folder import VOCAB_GGUF, gguf_with_tensors


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "unused-store")


@pytest.fixture
def downloads(tmp_path: Path) -> Path:
    """A downloads folder: one GGUF model among unrelated files, one of them broken."""
    folder = tmp_path / "Downloads"
    folder.mkdir()
    shutil.copy(VOCAB_GGUF, folder)
    (folder / "notes.txt").write_text("not part of the model\n")
    (folder / "broken.safetensors").write_bytes(b"\xff" * 20)  # never read with the GGUF
    return folder


def sha256sum(folder: Path, *names: str) -> str:
    """What `sha256sum NAME...` prints, run in the folder."""
    return subprocess.run(["sha256sum", *names], cwd=folder, check=True, capture_output=True,
                          text=True).stdout


def test_verify_checks_one_gguf_file_alone(cli: Cli, downloads: Path) -> None:
    model = downloads / VOCAB_GGUF.name
    result = cli.json("verify", str(model))
    assert result["ok"] and result["structure"]["formats"] == {"gguf": 1}
    assert [s["files"] for s in result["structure"]["sets"]] == [[VOCAB_GGUF.name]]
    assert result["checksums"]["ok"] is None  # no list given: nothing to check against
    whole = cli.json("verify", str(downloads), code=1)  # the folder holds a broken file
    assert {e["file"] for e in whole["structure"]["errors"]} == {"broken.safetensors"}


def test_sums_of_a_file_is_what_sha256sum_prints(cli: Cli, downloads: Path) -> None:
    listed = cli("sums", str(downloads / VOCAB_GGUF.name)).stdout
    assert listed == sha256sum(downloads, VOCAB_GGUF.name)
    out = downloads / "model.sha256"
    cli("sums", str(downloads / VOCAB_GGUF.name), "-o", str(out))
    assert out.read_text() == listed


def test_a_release_list_checks_only_the_file_given(cli: Cli, downloads: Path,
                                                   tmp_path: Path) -> None:
    model = downloads / VOCAB_GGUF.name
    sums = tmp_path / "SHA256SUMS"  # the release lists quantizations not downloaded
    other = hashlib.sha256(b"another quantization").hexdigest()
    sums.write_text(f"{other}  model-Q8_0.gguf\n" + sha256sum(downloads, VOCAB_GGUF.name)
                    + f"{other}  model-F16.gguf\n")
    result = cli.json("verify", str(model), "--sums", str(sums))
    checksums = result["checksums"]
    assert result["ok"] and checksums["ok"] and checksums["problems"] == []
    assert [(f["path"], f["status"], f["line"]) for f in checksums["files"]] == [
        (VOCAB_GGUF.name, "ok", 2)]
    text = cli("verify", str(model), "--sums", str(sums)).stdout
    assert f"checksums: ok (1/1 files match {sums})" in text


def test_a_file_the_list_does_not_name_or_another_content_fails(cli: Cli, downloads: Path,
                                                                tmp_path: Path) -> None:
    model = downloads / VOCAB_GGUF.name
    sums = tmp_path / "SHA256SUMS"
    sums.write_text(sha256sum(downloads, "notes.txt"))
    unlisted = cli.json("verify", str(model), "--sums", str(sums), code=1)["checksums"]
    assert unlisted["ok"] is False and unlisted["files"] == []
    assert [(p["path"], p["rule"]) for p in unlisted["problems"]] == [
        (VOCAB_GGUF.name, "unlisted-file")]
    sums.write_text(sha256sum(downloads, VOCAB_GGUF.name))
    data = bytearray(model.read_bytes())
    data[-1] ^= 1  # one flipped bit in the vocabulary
    model.write_bytes(bytes(data))
    changed = cli.json("verify", str(model), "--sums", str(sums), code=1)["checksums"]
    assert [(f["path"], f["status"]) for f in changed["files"]] == [
        (VOCAB_GGUF.name, "mismatch")]


def test_a_split_gguf_is_checked_and_listed_with_all_its_parts(cli: Cli,
                                                               tmp_path: Path) -> None:
    folder = tmp_path / "split"
    folder.mkdir()
    parts = gguf_with_tensors(folder / "tiny.gguf", split_max_tensors=1)
    names = [p.name for p in parts]
    assert names == [f"tiny-0000{i}-of-00003.gguf" for i in (1, 2, 3)]
    (folder / "other-00001-of-00002.gguf").write_bytes(b"GGUF")  # another set: left out
    result = cli.json("verify", str(parts[0]))
    assert result["ok"] and result["structure"]["sets"] == [
        {"format": "gguf", "kind": "split", "files": names}]
    assert result["structure"]["tensors"] == 3
    listed = cli("sums", str(parts[1])).stdout
    assert listed == sha256sum(folder, *names)
    sums = tmp_path / "SHA256SUMS"
    sums.write_text(listed)
    checked = cli.json("verify", str(parts[2]), "--sums", str(sums))["checksums"]
    assert [f["path"] for f in checked["files"] if f["status"] == "ok"] == names
    parts[1].unlink()
    broken = cli.json("verify", str(parts[0]), code=1)
    assert [e["rule"] for e in broken["structure"]["errors"]] == ["incomplete-set"]


def test_inspect_of_a_file_checks_its_list_lines_only(cli: Cli, downloads: Path,
                                                       tmp_path: Path) -> None:
    sums = tmp_path / "SHA256SUMS"
    other = hashlib.sha256(b"x").hexdigest()
    sums.write_text(sha256sum(downloads, VOCAB_GGUF.name) + f"{other}  absent.gguf\n")
    result = cli.json("inspect", str(downloads / VOCAB_GGUF.name), "--sums", str(sums))
    checksums = result["integrity"]["checksums"]
    assert checksums["ok"] and [f["path"] for f in checksums["files"]] == [VOCAB_GGUF.name]
