"""The signature example of docs/audit-spec.md runs as written: ssh-keygen verifies
what `lineage audit sign` wrote, and refuses it after each change the page names."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .audit_helpers import attestation

SPEC = Path(__file__).parents[2] / "docs" / "audit-spec.md"


def _example() -> str:
    page = SPEC.read_text(encoding="utf-8")
    found = re.search(r"<!-- verify-with-ssh-keygen -->\n```sh\n(.*?)```", page, re.S)
    assert found, "docs/audit-spec.md lost its ssh-keygen example"
    return found.group(1)


def _run(script: str, folder: Path) -> subprocess.CompletedProcess[str]:
    # the console script and python3 of this environment come first on PATH
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    return subprocess.run(["bash", "-e", "-c", script], cwd=folder, capture_output=True,
                          text=True, env={**os.environ, "PATH": path}, timeout=60)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    record = attestation(101, "alice")
    record["location"] = "ünïcode ✓"  # the canonical bytes are UTF-8, not escapes
    (tmp_path / "attestation.json").write_text(json.dumps(record, indent=2))
    return tmp_path


def test_ssh_keygen_verifies_the_documented_example(folder):
    result = _run(_example(), folder)
    assert result.returncode == 0, result.stderr
    assert 'Good "lineage-audit" signature for alice with ED25519 key' in result.stdout
    signed = json.loads((folder / "signed.json").read_text())
    assert signed["auditor"]["public_key"] == " ".join(
        (folder / "alice_key.pub").read_text().split()[:2])


def _flip_signature(folder: Path) -> None:
    lines = (folder / "signed.sig").read_text().splitlines()
    middle = lines[3]  # inside the ed25519 signature
    lines[3] = middle[:20] + ("B" if middle[20] != "B" else "C") + middle[21:]
    (folder / "signed.sig").write_text("\n".join(lines) + "\n")


def _edit(folder: Path, name: str, old: str, new: str) -> None:
    text = (folder / name).read_text(encoding="utf-8")
    assert old in text
    (folder / name).write_text(text.replace(old, new, 1), encoding="utf-8")


CHANGES = {
    "a byte of the record": lambda f: _edit(f, "signed.canonical", '"step":101', '"step":102'),
    "a byte of the signature": _flip_signature,
    "another name": lambda f: _edit(f, "allowed_signers", "alice ", "bob "),
}


@pytest.mark.parametrize("change", [*CHANGES, "another namespace"])
def test_each_change_the_page_names_makes_it_fail(folder, change):
    setup, check = _example().rstrip().rsplit("\n", 1)
    assert check.startswith("ssh-keygen -Y verify")
    assert _run(setup, folder).returncode == 0
    if change == "another namespace":
        check = check.replace("-n lineage-audit", "-n git")
    else:
        CHANGES[change](folder)
    result = _run(check, folder)
    assert result.returncode != 0 and "Good" not in result.stdout, (change, result.stdout)
