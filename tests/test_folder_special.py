"""Special files never hang or flood the model-folder commands.

A FIFO, socket or device inside a model folder is listed by the rule `not-a-regular-file`
and never opened (opening a FIFO for reading waits for a writer forever); one named as the
model, the `--sums` list or the `-o` output is refused at once, exit 2, one line. The
commands run as the real console script under a timeout, so a hang fails the test instead
of stopping the suite.
"""

from __future__ import annotations

import json
import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from .conftest import run_lineage

TIMEOUT = 120  # a busy machine is slow; a hang is forever


@pytest.fixture
def folder(tmp_path: Path) -> Iterator[Path]:
    """A safetensors model folder holding a FIFO as its config, a stray FIFO and a socket."""
    model = tmp_path / "model"
    model.mkdir()
    save_file({"w": np.ones((4, 3), np.float32)}, str(model / "model.safetensors"))
    (model / "tokenizer.json").write_text('{"version": "1.0"}')
    os.mkfifo(model / "config.json")
    os.mkfifo(model / "weights.gguf")  # a FIFO under a weights name is not read as GGUF
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(model / "agent.sock"))
    yield model
    server.close()


def full_device(tmp_path: Path) -> Path:
    """A character device like /dev/full (1, 7), made in the test's folder where the system
    allows it (as root), so code that replaced it would harm nothing else; else /dev/full."""
    node = tmp_path / "full"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    except PermissionError:
        return Path("/dev/full")
    return node


def lineage(*args: str) -> tuple[int, str, str]:
    done = run_lineage("--store", "unused-store", *args, timeout=TIMEOUT)
    return done.returncode, done.stdout, done.stderr


SPECIAL = {"agent.sock": "a socket", "config.json": "a FIFO", "weights.gguf": "a FIFO"}


def test_verify_names_each_special_file_and_opens_none(folder: Path) -> None:
    code, out, err = lineage("verify", str(folder), "--json")
    assert (code, err) == (1, "")
    structure = json.loads(out)["structure"]
    errors = {e["file"]: (e["rule"], e["message"]) for e in structure["errors"]}
    assert errors == {name: ("not-a-regular-file", f"{kind} in the model folder: never opened")
                      for name, kind in SPECIAL.items()}
    assert structure["formats"] == {"safetensors": 1} and structure["tensors"] == 1


@pytest.mark.parametrize("command", ["inspect", "report"])
def test_inspect_and_report_list_special_files_without_opening_them(folder: Path,
                                                                    command: str) -> None:
    args = ["--json"] if command == "inspect" else ["--format", "json"]
    code, out, err = lineage(command, str(folder), *args)
    assert (code, err) == (0, "")  # no risk of running code: the structure verdict says no
    found = json.loads(out)
    formats = {f["path"]: f["format"] for f in found["files"]}
    assert {name: formats[name] for name in SPECIAL} == dict.fromkeys(SPECIAL, "special")
    assert not found["integrity"]["structure"]["ok"]
    assert set(found["hashes"]["files"]) == {"model.safetensors", "tokenizer.json"}


@pytest.mark.parametrize("command", ["inspect", "verify", "report", "sums"])
@pytest.mark.parametrize(("target", "kind"), [("/dev/zero", "a character device"),
                                              ("config.json", "a FIFO")])
def test_a_special_file_named_as_the_model_is_refused_at_once(folder: Path, command: str,
                                                              target: str, kind: str) -> None:
    path = folder / target
    code, out, err = lineage(command, str(path))
    assert (code, out) == (2, "")
    assert err == f"error: {path}: not-a-regular-file: {kind}, not a model file or folder\n"


@pytest.mark.parametrize("command", ["inspect", "verify", "report"])
def test_a_special_sums_list_is_refused_unread(folder: Path, command: str) -> None:
    for sums, kind in (("/dev/zero", "a character device"), (folder / "config.json", "a FIFO")):
        code, out, err = lineage(command, str(folder), "--sums", str(sums))
        assert (code, out) == (2, "")
        assert err == f"error: {sums}: not-a-regular-file: {kind}, not a SHA256SUMS list\n"


@pytest.mark.parametrize("command", ["report", "sums"])
@pytest.mark.parametrize("target", ["/dev/full", "fifo", "folder"])
def test_output_never_replaces_a_device_fifo_or_folder(tmp_path: Path, command: str,
                                                       target: str) -> None:
    model = tmp_path / "model"
    model.mkdir()
    save_file({"w": np.ones((2, 2), np.float32)}, str(model / "model.safetensors"))
    out = full_device(tmp_path) if target == "/dev/full" else tmp_path / f"out.{target}"
    if target == "fifo":
        os.mkfifo(out)
    elif target == "folder":
        out.mkdir()
    before = os.stat(out)
    code, stdout, err = lineage(command, str(model), "-o", str(out))
    assert (code, stdout) == (2, "") and err.count("\n") == 1
    assert err.startswith(f"error: {out}: cannot write: it is a ")
    after = os.stat(out)
    assert (after.st_mode, after.st_rdev, after.st_ino) == (before.st_mode, before.st_rdev,
                                                            before.st_ino)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["model"] + ([out.name] if out.parent == tmp_path else []))


def test_output_replaces_a_regular_file_whole(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    save_file({"w": np.ones((2, 2), np.float32)}, str(model / "model.safetensors"))
    out = tmp_path / "report.md"
    out.write_text("an older, longer report\n" * 1000)
    code, stdout, err = lineage("report", str(model), "-o", str(out))
    assert (code, stdout, err) == (0, "", f"wrote {out}\n")
    assert out.read_text().startswith("# ") and "longer report" not in out.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model", "report.md"]
