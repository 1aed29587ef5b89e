"""Hugging Face cache snapshots, laid out by huggingface_hub's own functions and checked
against the names the cache gives its blobs (SHA-256 for LFS files, Git blob SHA-1 else)."""

from __future__ import annotations

import fnmatch
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from huggingface_hub import scan_cache_dir
from huggingface_hub.file_download import (
    _cache_commit_hash_for_specific_revision,
    _create_symlink,
    _get_pointer_path,
    repo_folder_name,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lineage.diligence.inspect import inspect_model
from lineage.diligence.verify import folder_sums, verify_folder
from lineage.formats import hf_cache
from lineage.formats.file_hash import digest_regular_file
from lineage.formats.safetensors import check_folder

from .conftest import Cli

REPO_ID = "sentence-transformers/all-MiniLM-L6-v2"
REVISION = "c9745ed1d9f207416be6d2e6f8de32d1f16199bf"  # a 40-hex commit, as the hub names them
# The SHA-256 of MiniLM's model.safetensors: its LFS object id, hence its blob name.
SAFETENSORS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


def git_blob_ids(paths: list[Path]) -> list[str]:
    """Git's own blob ids for files, from `git hash-object` (an independent implementation)."""
    done = subprocess.run(["git", "hash-object", "--stdin-paths"], check=True, text=True,
                          input="".join(f"{p}\n" for p in paths), capture_output=True)
    return done.stdout.split()


def lfs_patterns(source: Path) -> list[str]:
    attributes = source / ".gitattributes"
    lines = attributes.read_text().splitlines() if attributes.exists() else []
    return [line.split()[0] for line in lines if "filter=lfs" in line]


def put_in_cache(source: Path, cache: Path, *, repo_id: str = REPO_ID, repo_type: str = "model",
                 revision: str = REVISION, ref: str = "main") -> Path:
    """Lay `source` out as `hf_hub_download` does: blobs named by their etag (SHA-256 for
    files `.gitattributes` sends to LFS, the Git blob id otherwise), a relative link per
    file in snapshots/<revision>/, refs/<ref> naming the revision. Returns the snapshot."""
    storage = cache / repo_folder_name(repo_id=repo_id, repo_type=repo_type)
    files = sorted(p for p in source.rglob("*") if p.is_file())
    patterns = lfs_patterns(source)
    for path, git_id in zip(files, git_blob_ids(files), strict=True):
        rel = path.relative_to(source).as_posix()
        lfs = any(fnmatch.fnmatch(rel, pattern) for pattern in patterns)
        etag = hashlib.sha256(path.read_bytes()).hexdigest() if lfs else git_id
        blob = storage / "blobs" / etag
        pointer = Path(_get_pointer_path(str(storage), revision, rel))
        blob.parent.mkdir(parents=True, exist_ok=True)
        pointer.parent.mkdir(parents=True, exist_ok=True)
        if not blob.exists():
            shutil.copyfile(path, blob)
        _create_symlink(str(blob), str(pointer), new_blob=False)
    _cache_commit_hash_for_specific_revision(str(storage), ref, revision)
    return storage / "snapshots" / revision


@pytest.fixture(scope="module")
def pristine_cache(minilm_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    cache = tmp_path_factory.mktemp("hub")
    put_in_cache(minilm_folder, cache)
    return cache


@pytest.fixture
def snapshot(pristine_cache: Path, tmp_path: Path) -> Path:
    """A private copy of the cached MiniLM snapshot (relative links survive the copy)."""
    cache = tmp_path / "hub"
    shutil.copytree(pristine_cache, cache, symlinks=True)
    return cache / repo_folder_name(repo_id=REPO_ID, repo_type="model") / "snapshots" / REVISION


def blob_of(snapshot: Path, rel: str) -> Path:
    return snapshot.parent.parent / "blobs" / os.readlink(snapshot / rel).rsplit("/", 1)[-1]


def flip_byte(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def statuses(report: hf_cache.SumsReport) -> dict[str, str]:
    return {row["path"]: row["status"] for row in report.files}


def problem_rules(report: hf_cache.SumsReport) -> dict[str, str]:
    return {p.path or "": p.rule for p in report.problems}


# --- the layout ---------------------------------------------------------------------------


def test_layout_is_the_hub_libraries_own(snapshot: Path, minilm_folder: Path) -> None:
    info = scan_cache_dir(snapshot.parent.parent.parent)
    assert not info.warnings
    (repo,) = info.repos
    (revision,) = repo.revisions
    assert (repo.repo_id, repo.repo_type, revision.refs) == (REPO_ID, "model", {"main"})
    found = hf_cache.find_snapshot(snapshot)
    assert found is not None and not found.problems
    assert (found.repo_id, found.kind, found.revision, found.refs) == (
        REPO_ID, "model", REVISION, ("main",))
    hub_blobs = {f.file_path.relative_to(snapshot).as_posix(): f.blob_path
                 for f in revision.files}
    assert found.blobs == hub_blobs  # the same file -> blob mapping the hub library reads
    assert os.readlink(snapshot / "1_Pooling" / "config.json").startswith("../../../blobs/")
    assert found.files["model.safetensors"].blob_name == SAFETENSORS_SHA256
    assert found.files["model.safetensors"].algorithm == "sha256"
    assert found.files["config.json"].algorithm == "git-sha1"
    assert len(found.files) == sum(1 for p in minilm_folder.rglob("*") if p.is_file())


def test_recognised_from_a_file_inside_and_for_datasets(snapshot: Path, tmp_path: Path) -> None:
    inner = hf_cache.find_snapshot(snapshot / "1_Pooling" / "config.json")
    assert inner is not None and inner.folder == snapshot.resolve()
    source = tmp_path / "data"
    source.mkdir()
    (source / "train.jsonl").write_text('{"text": "a"}\n')
    dataset = put_in_cache(source, tmp_path / "other", repo_id="org/set", repo_type="dataset")
    found = hf_cache.find_snapshot(dataset)
    assert found is not None and (found.kind, found.repo_id) == ("dataset", "org/set")
    (tmp_path / "my-model").symlink_to(snapshot, target_is_directory=True)
    linked = hf_cache.find_snapshot(tmp_path / "my-model")  # a link the user made to it
    assert linked is not None and linked.folder == snapshot.resolve() and not linked.problems
    assert verify_folder(tmp_path / "my-model")["checksums"]["source"] == "hf-cache-blobs"
    assert hf_cache.find_snapshot(snapshot.parent) is None  # snapshots/ itself is not one
    assert hf_cache.find_snapshot(source) is None


# --- checked against the blob names, with no list -----------------------------------------


def test_a_good_snapshot_verifies_without_a_list(snapshot: Path, minilm_folder: Path) -> None:
    report = hf_cache.verify_snapshot(hf_cache.find_snapshot(snapshot))  # type: ignore[arg-type]
    assert report.ok and report.source == "hf-cache-blobs" and not report.problems
    assert set(statuses(report).values()) == {"ok"}
    rows = {row["path"]: row for row in report.files}
    assert rows["model.safetensors"]["actual"] == SAFETENSORS_SHA256
    config = (minilm_folder / "config.json").read_bytes()
    assert rows["config.json"]["actual"] == hashlib.sha1(
        b"blob %d\0" % len(config) + config).hexdigest()
    assert report.bytes_hashed == sum(p.stat().st_size for p in minilm_folder.rglob("*")
                                      if p.is_file())


def test_cli_verify_names_the_source_and_the_revision(snapshot: Path, tmp_path: Path) -> None:
    cli = Cli(tmp_path / "unused-store")
    result = cli.json("verify", str(snapshot))
    assert result["ok"] and result["structure"]["ok"] and result["structure"]["tensors"] == 104
    assert result["checksums"]["source"] == "hf-cache-blobs" and result["checksums"]["ok"]
    assert result["snapshot"]["revision"] == REVISION and result["snapshot"]["refs"] == ["main"]
    text = cli("verify", str(snapshot)).stdout
    assert f"revision {REVISION} (main)" in text and "13/13 files match" in text
    cache = snapshot.parent.parent.parent
    pointed = cli("verify", str(cache), code=2)  # the cache itself: pointed at --cache
    assert pointed.stderr == (f"error: {cache}: cache-repository: a hub cache, not a model "
                              f"folder: `lineage verify --cache {cache}` checks every "
                              "snapshot of every repository in it\n")


@pytest.mark.parametrize(("rel", "offset"), [("model.safetensors", 50_000), ("config.json", 3)])
def test_a_flipped_byte_in_a_blob_is_a_mismatch(snapshot: Path, tmp_path: Path, rel: str,
                                                offset: int) -> None:
    flip_byte(blob_of(snapshot, rel), offset)  # in the data region: the structure stays sound
    result = Cli(tmp_path / "unused-store").json("verify", str(snapshot), code=1)
    bad = [f for f in result["checksums"]["files"] if f["status"] != "ok"]
    assert [(f["path"], f["status"]) for f in bad] == [(rel, "mismatch")]
    assert bad[0]["actual"] != bad[0]["expected"] == blob_of(snapshot, rel).name
    assert [p["rule"] for p in result["checksums"]["problems"]] == ["hash-mismatch"]


def test_a_missing_blob_is_missing(snapshot: Path) -> None:
    blob_of(snapshot, "tokenizer.json").unlink()
    report = verify_folder(snapshot)
    assert statuses_of(report)["tokenizer.json"] == "missing"
    assert {p["path"]: p["rule"] for p in report["checksums"]["problems"]} == {
        "tokenizer.json": "missing-file"}
    assert report["structure"]["ok"] and not report["ok"]


def statuses_of(report: dict[str, object]) -> dict[str, str]:
    checksums = report["checksums"]
    assert isinstance(checksums, dict)
    return {row["path"]: row["status"] for row in checksums["files"]}


# --- links that are refused, each by its rule ---------------------------------------------


def _relink(link: Path, target: str | Path) -> None:
    link.unlink()
    link.symlink_to(target)


def test_links_leaving_the_repository_are_refused_by_name(snapshot: Path, tmp_path: Path,
                                                           minilm_folder: Path) -> None:
    repo = snapshot.parent.parent
    other = put_in_cache(minilm_folder / "1_Pooling", repo.parent, repo_id="evil/other")
    other_blob = next((other.parent.parent / "blobs").iterdir())
    outside = tmp_path / "outside.json"
    outside.write_text("{}")
    _relink(snapshot / "config.json", outside)  # absolute, out of the cache
    _relink(snapshot / "vocab.txt", "../../../outside.txt")  # relative, next to the repo
    _relink(snapshot / "README.md", f"../../../{other.parent.parent.name}/blobs/{other_blob.name}")
    _relink(snapshot / "special_tokens_map.json", "special_tokens_map.json")  # a loop
    _relink(snapshot / "tokenizer.json", "../../refs/main")  # in the repo, not a blob
    (repo / "blobs" / "not-a-digest").write_text("{}")
    _relink(snapshot / "modules.json", "../../blobs/not-a-digest")
    (snapshot / "data_config.json").unlink()
    shutil.copyfile(minilm_folder / "data_config.json", snapshot / "data_config.json")
    found = hf_cache.find_snapshot(snapshot)
    assert found is not None
    rules = {p.path: p.rule for p in found.problems}
    assert rules == {"config.json": "link-leaves-repository",
                     "vocab.txt": "link-leaves-repository",
                     "README.md": "link-into-other-repo",
                     "special_tokens_map.json": "link-loop", "modules.json": "unnamed-blob",
                     "tokenizer.json": "link-not-a-blob",
                     "data_config.json": "not-a-cache-link"}
    assert not set(rules) & set(found.blobs)  # none of them is followed
    report = hf_cache.verify_snapshot(found)
    assert not report.ok and problem_rules(report) == rules
    assert {statuses(report)[rel] for rel in rules} == {"refused"}
    assert statuses(report)["model.safetensors"] == "ok"


def test_refused_links_stop_sums_and_fail_verify(snapshot: Path, tmp_path: Path) -> None:
    _relink(snapshot / "config.json", "config.json")
    cli = Cli(tmp_path / "unused-store")
    listed = cli("sums", str(snapshot), code=2)
    assert listed.stderr.count("\n") == 1 and "config.json: link-loop" in listed.stderr
    result = cli.json("verify", str(snapshot), code=1)
    assert result["checksums"]["problems"][0]["rule"] == "link-loop"


def test_a_shard_linked_into_another_repo_fails_structure_too(snapshot: Path,
                                                               minilm_folder: Path) -> None:
    repo = snapshot.parent.parent
    other = put_in_cache(minilm_folder, repo.parent, repo_id="evil/weights")
    other_blob = other.parent.parent / "blobs" / SAFETENSORS_SHA256
    _relink(snapshot / "model.safetensors",
            f"../../../{other.parent.parent.name}/blobs/{other_blob.name}")
    report = verify_folder(snapshot)
    assert [e["rule"] for e in report["structure"]["errors"]] == ["symlinked-shard"]
    assert statuses_of(report)["model.safetensors"] == "refused"


def test_structure_follows_only_links_it_was_given(snapshot: Path, tmp_path: Path) -> None:
    copy = tmp_path / "plain"
    shutil.copytree(snapshot, copy, symlinks=True)  # the links now dangle or leave the folder
    assert [e["rule"] for e in check_folder(copy)["errors"]] == ["symlinked-shard"]
    assert check_folder(snapshot)["errors"][0]["rule"] == "symlinked-shard"  # nothing vetted
    vetted = hf_cache.find_snapshot(snapshot).blobs  # type: ignore[union-attr]
    assert check_folder(snapshot, vetted_links=vetted)["ok"]


# --- the shared Xet blob store of huggingface_hub 2.x --------------------------------------


def test_a_blob_shared_through_the_hub_store_is_followed(snapshot: Path) -> None:
    from huggingface_hub.utils._shared_blobs import publish_blob_to_shared_store

    cache = snapshot.parent.parent.parent
    blob = blob_of(snapshot, "tokenizer.json")
    xet_hash = hashlib.sha256(b"xet" + blob.read_bytes()).hexdigest()  # stands in for Xet's
    assert publish_blob_to_shared_store(blob_path=str(blob), xet_hash=xet_hash,
                                        cache_dir=cache, expected_size=blob.stat().st_size)
    assert blob.is_symlink() and not scan_cache_dir(cache).warnings
    found = hf_cache.find_snapshot(snapshot)
    assert found is not None and not found.problems
    assert found.files["tokenizer.json"].blob == cache / "blobs" / xet_hash[:2] / xet_hash
    assert hf_cache.verify_snapshot(found).ok
    (cache / "blobs" / ".huggingface-shared-blobs").unlink()  # not a hub store any more
    found = hf_cache.find_snapshot(snapshot)
    assert found is not None and problem_rules(hf_cache.verify_snapshot(found)) == {
        "tokenizer.json": "link-leaves-repository"}


# --- listing a snapshot -------------------------------------------------------------------


def test_sums_of_a_snapshot_equal_sha256sum_of_its_files(snapshot: Path, tmp_path: Path) -> None:
    found = hf_cache.find_snapshot(snapshot)
    assert found is not None
    names = sorted(found.files)
    expected = subprocess.run(["sha256sum", *names], cwd=snapshot, capture_output=True,
                              text=True, check=True).stdout  # sha256sum follows the links
    assert folder_sums(snapshot) == expected
    listed = Cli(tmp_path / "unused-store")("sums", str(snapshot))
    assert listed.stdout == expected and "blobs" not in listed.stdout


def test_sums_and_verify_of_a_missing_folder_are_errors(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "unused-store")
    absent = tmp_path / "nonexistent"
    for args in (["sums", str(absent)], ["verify", str(absent), "--sums", "x"]):
        result = cli(*args, code=2)
        assert result.stderr == f"error: {absent}: no-folder: no such file or folder\n"


def test_a_list_checks_a_snapshot_through_its_vetted_links(snapshot: Path, tmp_path: Path) -> None:
    sums = tmp_path / "SHA256SUMS"
    lines = folder_sums(snapshot).splitlines(keepends=True)
    sums.write_text("".join(line for line in lines if not line.endswith("  vocab.txt\n")))
    cli = Cli(tmp_path / "unused-store")
    warned = cli.json("verify", str(snapshot), "--sums", str(sums))
    assert warned["ok"] and warned["checksums"]["source"] == "sums-list"
    assert warned["checksums"]["unlisted"] == ["vocab.txt"]
    assert "warning: vocab.txt: unlisted-file" in cli("verify", str(snapshot), "--sums",
                                                      str(sums)).stdout
    strict = cli.json("verify", str(snapshot), "--sums", str(sums), "--strict", code=1)
    assert strict["checksums"]["unlisted"] == ["vocab.txt"] and not strict["checksums"]["ok"]


# --- inspect and report -------------------------------------------------------------------


def test_inspect_sees_the_files_and_no_risk_in_cache_links(snapshot: Path) -> None:
    report = inspect_model(snapshot)
    assert report["risks"] == [] and report["parameters"] == 22_713_216  # + 512 buffer values
    hashes = report["hashes"]["files"]  # read through the vetted links, SHA-256 throughout
    assert report["hashes"]["computed"] and hashes["model.safetensors"] == SAFETENSORS_SHA256
    config = (snapshot / "config.json").read_bytes()
    assert hashes["config.json"] == hashlib.sha256(config).hexdigest()
    assert report["integrity"]["structure"]["ok"] and report["integrity"]["checksums"]["ok"]
    assert {link["cache_blob"] for link in report["links"]} == {True}
    _relink(snapshot / "vocab.txt", "/etc/hostname")
    risky = inspect_model(snapshot)
    assert [(r["file"], r["kind"], r["severity"]) for r in risky["risks"]] == [
        ("vocab.txt", "symlink-outside", "dangerous")]


# --- invariants ---------------------------------------------------------------------------


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=st.dictionaries(st.sampled_from(["a.bin", "b.json", "sub/c.txt", "d.safetensors"]),
                             st.binary(min_size=1, max_size=300), min_size=1),
       data=st.data())
def test_any_flipped_blob_byte_fails_exactly_its_files(tmp_path: Path, files: dict[str, bytes],
                                                        data: st.DataObject) -> None:
    root = Path(os.path.realpath(tmp_path)) / os.urandom(6).hex()
    source = root / "src"
    for rel, content in files.items():
        (source / rel).parent.mkdir(parents=True, exist_ok=True)
        (source / rel).write_bytes(content)
    (source / ".gitattributes").write_text("*.bin filter=lfs diff=lfs merge=lfs -text\n")
    found = hf_cache.find_snapshot(put_in_cache(source, root / "hub"))
    assert found is not None and hf_cache.verify_snapshot(found).ok
    rel = data.draw(st.sampled_from(sorted(files)))
    blob = found.files[rel].blob
    flip_byte(blob, data.draw(st.integers(0, blob.stat().st_size - 1)))
    bad = {r for r, s in statuses(hf_cache.verify_snapshot(found)).items() if s != "ok"}
    assert bad == {r for r, f in found.files.items() if f.blob == blob}  # same blob, same fate
    assert digest_regular_file(blob, "git-sha1")[0] == git_blob_ids([blob])[0]


def test_the_experiment_gate_reads_a_snapshot_as_verify_does(snapshot: Path,
                                                            tmp_path: Path) -> None:
    cli = Cli(tmp_path / "store")
    cli("init")
    record = cli.json("exp", "run", "--weights", str(snapshot), "--revision", REVISION,
                      "--json", "--", "true")
    checks = {c["name"]: c["ok"] for c in record["checks"]}
    assert checks["structure"] and checks["risks"] and record["outcome"] == "passed"
    verdict = cli.json("verify", str(snapshot))
    assert verdict["structure"]["errors"] == [e for c in record["checks"]
                                              if c["name"] == "structure" for e in c["errors"]]
