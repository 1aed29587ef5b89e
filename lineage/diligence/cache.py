"""`lineage verify --cache [DIR]`: every snapshot of every repository of a Hugging Face hub
cache, checked against the names the cache gave its blobs (lineage.formats.hf_cache).

The snapshots are the ones `hf cache scan` lists: each `snapshots/<revision>` folder of each
`models--*`, `datasets--*` and `spaces--*` repository folder. Each distinct blob is hashed
once, however many snapshots link to it. A snapshot passes when it has files and every one
of them was vetted (its link leads into its own repository's blobs) and matches its blob's
name; the cache passes when every snapshot does and no repository folder is broken (one
without a snapshot is the rule `no-snapshot`).

Which cache: DIR when given (a hub cache, or HF_HOME holding one as `hub/`), else the one
huggingface_hub uses: $HF_HUB_CACHE, else $HF_HOME/hub, else
$XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from lineage.diligence.answers import (
    CachedSnapshot,
    CacheProblem,
    CacheVerification,
    ChecksumProblem,
)
from lineage.errors import InputError
from lineage.formats import hf_cache
from lineage.formats.file_hash import Outcome, Progress, Refusal
from lineage.formats.sha256sums import SumProblem


def default_cache(environ: Mapping[str, str] | None = None) -> Path:
    """The hub cache huggingface_hub uses, from the same variables it reads."""
    env = os.environ if environ is None else environ
    if env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE"):
        return Path(env.get("HF_HUB_CACHE") or env["HUGGINGFACE_HUB_CACHE"]).expanduser()
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]).expanduser() / "hub"
    base = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser()
    return base / "huggingface" / "hub"


def locate_cache(cache: str | Path | None) -> Path:
    """The hub cache folder: `cache` itself, its `hub/` folder (HF_HOME given), or the
    default; InputError when it holds no repository folder."""
    folder = default_cache() if cache is None else Path(cache).expanduser()
    if not folder.is_dir():
        problem = "no such folder" if not os.path.lexists(folder) else "not a folder"
        raise InputError(folder, f"no-cache: {problem} (a hub cache, or HF_HOME holding one)")
    if not hf_cache.repository_folders(folder) and hf_cache.repository_folders(folder / "hub"):
        folder = folder / "hub"
    if not hf_cache.repository_folders(folder):
        raise InputError(folder, "no-cache: no repository folder (models--ORG--NAME, "
                         "datasets--..., spaces--...) in it: not a hub cache")
    return folder


def verify_cache(cache: str | Path | None = None, *, workers: int | None = None,
                 progress: Progress | None = None) -> CacheVerification:
    """Every snapshot of the cache, one row each, and the repository folders without one."""
    folder = locate_cache(cache)
    repos = hf_cache.repository_folders(folder)
    snapshots: list[hf_cache.Snapshot] = []
    problems: list[CacheProblem] = []
    for repo in repos:
        found = _snapshots_of(repo)
        if not found:
            problems.append(CacheProblem(
                repository=repo.name, rule="no-snapshot",
                message="a repository folder with no snapshots/<revision> folder (an "
                        "interrupted or pruned download?)"))
        snapshots += found
    digests = hf_cache.hash_blobs(snapshots, workers=workers, progress=progress)
    rows = tuple(_row(snapshot, digests) for snapshot in snapshots)
    return CacheVerification(
        cache=str(folder), ok=all(r.ok for r in rows) and not problems,
        repositories=len(repos), snapshots=rows, problems=tuple(problems),
        bytes_hashed=sum(d[1] for d in digests.values() if not isinstance(d, Refusal)))


def _snapshots_of(repo: Path) -> list[hf_cache.Snapshot]:
    try:
        with os.scandir(repo / "snapshots") as listing:
            folders = sorted(Path(e.path) for e in listing if e.is_dir(follow_symlinks=False))
    except OSError:
        return []
    found = [hf_cache.find_snapshot(folder) for folder in folders]
    return [snapshot for snapshot in found if snapshot is not None]


def _row(snapshot: hf_cache.Snapshot, digests: Mapping[Path, Outcome]) -> CachedSnapshot:
    report = hf_cache.verify_snapshot(snapshot, digests=digests)
    matched = sum(1 for f in report.files if f["status"] == "ok")
    return CachedSnapshot(
        repo_id=snapshot.repo_id, kind=snapshot.kind, revision=snapshot.revision,
        refs=tuple(snapshot.refs), folder=str(snapshot.folder), ok=report.ok,
        files=len(report.files), matched=matched, bytes=report.bytes_hashed,
        problems=tuple(checksum_problem(p) for p in report.problems))


def checksum_problem(problem: SumProblem) -> ChecksumProblem:
    return ChecksumProblem(line=problem.line, path=problem.path, rule=problem.rule,
                           message=problem.message)
