"""A whole hub cache: `lineage verify --cache` checks every snapshot `hf cache scan` lists
against its blob names; a cache's own folders given to `verify` are pointed at a snapshot;
one file of a snapshot is verified alone.

Caches are laid out by huggingface_hub's own functions (test_hf_cache.put_in_cache) from the
real MiniLM model folder, and read back with huggingface_hub's `scan_cache_dir`.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from huggingface_hub import scan_cache_dir
from huggingface_hub.file_download import repo_folder_name

from lineage.diligence.api import verify_cache
from lineage.diligence.cache import default_cache

from .conftest import Cli
from .test_hf_cache import REPO_ID, REVISION, blob_of, flip_byte, put_in_cache

REVISION_2 = "0123456789abcdef0123456789abcdef01234567"
DATASET_ID = "lineage-tests/tiny-text"
DATASET_REVISION = "fedcba9876543210fedcba9876543210fedcba98"


@pytest.fixture(scope="module")
def pristine_hub(minilm_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """HF_HOME holding a hub cache: MiniLM at two revisions (the second edits config.json
    and shares every other blob), and a dataset repository of two files."""
    home = tmp_path_factory.mktemp("hf-home")
    cache = home / "hub"
    put_in_cache(minilm_folder, cache)
    second = tmp_path_factory.mktemp("minilm-v2") / "model"
    shutil.copytree(minilm_folder, second)
    config = second / "config.json"
    config.write_text(config.read_text().replace("}", ', "note": "v2"}', 1))
    put_in_cache(second, cache, revision=REVISION_2, ref="v2")
    data = tmp_path_factory.mktemp("dataset")
    (data / "train.jsonl").write_text('{"text": "one"}\n{"text": "two"}\n')
    (data / "README.md").write_text("# tiny text\n")
    put_in_cache(data, cache, repo_id=DATASET_ID, repo_type="dataset",
                 revision=DATASET_REVISION)
    return home


@pytest.fixture
def hf_home(pristine_hub: Path, tmp_path: Path) -> Path:
    home = tmp_path / "hf-home"
    shutil.copytree(pristine_hub, home, symlinks=True)
    return home


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path / "unused-store")


def snapshot_of(cache: Path, revision: str = REVISION) -> Path:
    return cache / repo_folder_name(repo_id=REPO_ID, repo_type="model") / "snapshots" / revision


def test_every_snapshot_hf_cache_scan_lists_is_checked(cli: Cli, hf_home: Path) -> None:
    cache = hf_home / "hub"
    scanned = scan_cache_dir(cache)
    listed = {(repo.repo_id, rev.commit_hash, len(rev.files))
              for repo in scanned.repos for rev in repo.revisions}
    result = cli.json("verify", "--cache", str(hf_home))  # HF_HOME: its hub/ is the cache
    assert result["ok"] and result["cache"] == str(cache) and result["repositories"] == 2
    rows = result["snapshots"]
    assert {(r["repo_id"], r["revision"], r["files"]) for r in rows} == listed
    assert all(r["ok"] and r["matched"] == r["files"] and r["problems"] == [] for r in rows)
    assert {r["revision"]: r["refs"] for r in rows} == {
        REVISION: ["main"], REVISION_2: ["v2"], DATASET_REVISION: ["main"]}
    # a blob two snapshots share is read once: the bytes hashed are the blobs' sizes
    assert result["bytes_hashed"] == sum(blob.size_on_disk for repo in scanned.repos
                                         for blob in _blobs(repo))
    text = cli("verify", "--cache", str(cache)).stdout
    assert "2 repositories, 3 snapshots" in text and "FAILED" not in text
    assert f"checksums: ok (3/3 snapshots match their blob names; {result['bytes_hashed']:,}" \
        in text


def _blobs(repo: object) -> list[object]:
    files = [f for rev in repo.revisions for f in rev.files]  # type: ignore[attr-defined]
    return list({f.blob_path: f for f in files}.values())


def test_a_changed_shared_blob_fails_every_snapshot_that_links_it(cli: Cli,
                                                                  hf_home: Path) -> None:
    cache = hf_home / "hub"
    flip_byte(blob_of(snapshot_of(cache), "model.safetensors"), 60_000)
    result = cli.json("verify", "--cache", str(cache), code=1)
    verdicts = {r["revision"]: (r["ok"], r["matched"], r["files"]) for r in result["snapshots"]}
    assert verdicts == {REVISION: (False, 12, 13), REVISION_2: (False, 12, 13),
                        DATASET_REVISION: (True, 2, 2)}
    problems = [(r["revision"], p["path"], p["rule"]) for r in result["snapshots"]
                for p in r["problems"]]
    assert sorted(problems) == [(REVISION_2, "model.safetensors", "hash-mismatch"),
                                (REVISION, "model.safetensors", "hash-mismatch")]
    text = cli("verify", "--cache", str(cache), code=1).stdout
    assert "checksums: FAILED (1/3 snapshots match their blob names" in text
    assert f"{REPO_ID} {REVISION[:12]}: model.safetensors: hash-mismatch: sha256 " in text


def test_a_repository_without_snapshots_or_a_refused_link_fails(cli: Cli,
                                                                hf_home: Path) -> None:
    cache = hf_home / "hub"
    empty = cache / "models--lineage-tests--interrupted"
    (empty / "blobs").mkdir(parents=True)
    link = snapshot_of(cache, REVISION_2) / "config.json"
    link.unlink()
    link.symlink_to("/etc/hostname")
    result = cli.json("verify", "--cache", str(cache), code=1)
    assert [(p["repository"], p["rule"]) for p in result["problems"]] == [
        (empty.name, "no-snapshot")]
    failed = {r["revision"]: [(p["path"], p["rule"]) for p in r["problems"]]
              for r in result["snapshots"] if not r["ok"]}
    assert failed == {REVISION_2: [("config.json", "link-leaves-repository")]}


def test_the_default_cache_is_the_one_huggingface_hub_uses(cli: Cli, hf_home: Path,
                                                           monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path: Path) -> None:
    monkeypatch.setenv("HF_HOME", str(hf_home))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    assert cli.json("verify", "--cache")["cache"] == str(hf_home / "hub")
    assert verify_cache().ok
    monkeypatch.setenv("HF_HOME", str(tmp_path / "nowhere"))
    missing = cli("verify", "--cache", code=2)
    assert missing.stderr == (f"error: {tmp_path / 'nowhere' / 'hub'}: no-cache: no such "
                              "folder (a hub cache, or HF_HOME holding one)\n")
    not_a_cache = cli("verify", "--cache", str(tmp_path), code=2)
    assert "no-cache: no repository folder" in not_a_cache.stderr


@pytest.mark.parametrize("variables", list(itertools.product(
    [None, "/h/home"], [None, "/h/cache"], [None, "/h/legacy"], [None, "/h/xdg"])))
def test_default_cache_follows_huggingface_hubs_variables(
        variables: tuple[str | None, ...]) -> None:
    names = ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "XDG_CACHE_HOME")
    env = {k: v for k, v in os.environ.items() if k not in names}
    env |= {name: value for name, value in zip(names, variables, strict=True) if value}
    theirs = subprocess.run(
        [sys.executable, "-c", "from huggingface_hub import constants as c; "
                               "print(c.HF_HUB_CACHE)"],
        env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert str(default_cache(env)) == theirs


def test_cache_options_that_do_not_apply_are_refused(cli: Cli, hf_home: Path) -> None:
    refused = cli("verify", "--cache", str(hf_home), "--sums", "SHA256SUMS", code=2)
    assert "--cache checks blob names only" in refused.stderr
    assert "needs a FOLDER" in cli("verify", code=2).stderr


@pytest.mark.parametrize("command", ["verify", "inspect", "sums", "report"])
@pytest.mark.parametrize("where", ["repository", "snapshots"])
def test_a_repository_folder_is_pointed_at_its_snapshot(cli: Cli, hf_home: Path, command: str,
                                                        where: str) -> None:
    cache = hf_home / "hub"
    repo = cache / repo_folder_name(repo_id=REPO_ID, repo_type="model")
    given = repo if where == "repository" else repo / "snapshots"
    result = cli(command, str(given), code=2)
    assert result.stdout == ""
    assert result.stderr == (
        f"error: {given}: cache-repository: a hub cache repository folder, not a model "
        f"folder: verify its snapshot {repo / 'snapshots' / REVISION} (main) (or one of 1 "
        f"more), or every snapshot with `lineage verify --cache {cache}`\n")


def test_one_file_of_a_snapshot_is_checked_against_its_blob_alone(cli: Cli,
                                                                  hf_home: Path) -> None:
    snapshot = snapshot_of(hf_home / "hub")
    flip_byte(blob_of(snapshot, "vocab.txt"), 10)  # another file of the snapshot: not read
    result = cli.json("verify", str(snapshot / "model.safetensors"))
    checksums = result["checksums"]
    assert result["ok"] and checksums["source"] == "hf-cache-blobs"
    assert [(f["path"], f["status"]) for f in checksums["files"]] == [
        ("model.safetensors", "ok")]
    assert result["structure"]["tensors"] == 104
    listed = cli("sums", str(snapshot / "model.safetensors")).stdout
    assert listed == subprocess.run(["sha256sum", "model.safetensors"], cwd=snapshot,
                                    check=True, capture_output=True, text=True).stdout
    flip_byte(blob_of(snapshot, "model.safetensors"), 60_000)
    changed = cli.json("verify", str(snapshot / "model.safetensors"), code=1)["checksums"]
    assert [(f["path"], f["status"]) for f in changed["files"]] == [
        ("model.safetensors", "mismatch")]
