"""Hugging Face hub cache snapshots: recognised, their links vetted, and their files checked
against the names the cache gave their blobs, without any SHA256SUMS list.

The layout `huggingface_hub` writes (`file_download.py`):

    <cache>/models--ORG--NAME/             also datasets--ORG--NAME, spaces--ORG--NAME
        blobs/<64 hex>                     a Git LFS file, named by the SHA-256 of its bytes
        blobs/<40 hex>                     a file kept in Git, named by its blob id:
                                           SHA-1 of b"blob <size>\\0" + bytes
        refs/<branch or tag>               text: the commit the branch named when fetched
        snapshots/<commit>/<path>          a relative link `../../blobs/<name>`
                                           (one more `../` per subfolder of <path>)

With huggingface_hub's shared Xet store, `blobs/<name>` may itself be a relative link to
`<cache>/blobs/<2 hex>/<64 hex>`, in a store marked by `<cache>/blobs/.huggingface-shared-blobs`.
That second hop is followed only into such a store; the check is still against `<name>`.

So the cache is a checksum source of its own: each file's expected digest is its blob's
name, and the snapshot folder's name is the revision. A link is followed only into its own
repository's `blobs/`; anything else refuses that file, with one rule id per reason:

    link-leaves-repository  the link (or a blob link) resolves outside the repository folder
    link-into-other-repo    the link points at another repository's blobs/ in the same cache
    link-loop               following the link never ends
    link-not-a-blob         the link stays in the repository but names no blob (a ref,
                            another snapshot, a folder)
    unnamed-blob            the blob's name is not 64 or 40 lower-case hex: nothing to check
    not-a-cache-link        a plain file in the snapshot: no blob name vouches for it
    not-a-regular-file      the blob is a FIFO, device or folder
    missing-file            the blob the link names is not there (status `missing`)
    unreadable-file         the system refused to list a folder or read a blob

`verify_snapshot` then hashes each vetted blob once: `hash-mismatch` when the digest is not
the blob's name, `empty-snapshot` when there was nothing to check.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from lineage.errors import InputError
from lineage.formats.file_hash import Outcome, Progress, Refusal, hash_files
from lineage.formats.sha256sums import SumProblem, SumsReport, format_sums
from lineage.userfiles import read_regular

SOURCE = "hf-cache-blobs"
REPO_KINDS = {"models": "model", "datasets": "dataset", "spaces": "space"}
SHARED_STORE_MARKER = ".huggingface-shared-blobs"
CACHE_REPOSITORY = "cache-repository"  # the rule: a cache or repository folder given
_REPO_FOLDER = re.compile(r"(models|datasets|spaces)--(.+)")
_SHA256_NAME = re.compile(r"[0-9a-f]{64}")
_SHA1_NAME = re.compile(r"[0-9a-f]{40}")
_MAX_REF_BYTES = 4096


@dataclass(frozen=True)
class CachedFile:
    """One snapshot file whose link was vetted."""

    path: str  # as seen in the snapshot, '/'-separated
    blob: Path  # the regular file holding the bytes
    blob_name: str  # its name in the repository's blobs/: the expected digest
    algorithm: str  # "sha256" (an LFS blob) or "git-sha1" (a Git blob)


@dataclass(frozen=True)
class LinkProblem:
    """A snapshot entry that was refused, or whose blob is missing."""

    path: str
    rule: str
    message: str

    @property
    def status(self) -> str:
        return "missing" if self.rule == "missing-file" else "refused"


@dataclass(frozen=True)
class Snapshot:
    """A snapshot folder of a hub cache repository, with every entry vetted."""

    folder: Path  # the resolved snapshot folder
    repo_folder: Path  # <cache>/models--ORG--NAME
    repo_id: str  # ORG/NAME
    kind: str  # model, dataset or space
    revision: str  # the commit: the snapshot folder's name
    refs: tuple[str, ...] = ()  # refs/<name> files naming this revision (main, a tag, ...)
    files: Mapping[str, CachedFile] = field(default_factory=dict)
    problems: tuple[LinkProblem, ...] = ()

    @property
    def blobs(self) -> dict[str, Path]:
        """Snapshot path -> vetted blob file: links a structure check may follow."""
        return {rel: f.blob for rel, f in self.files.items()}

    def restricted(self, paths: Collection[str]) -> Snapshot:
        """The same snapshot with only these entries (one model file and its parts)."""
        return replace(self, files={p: f for p, f in self.files.items() if p in paths},
                       problems=tuple(p for p in self.problems if p.path in paths))

    def describe(self) -> dict[str, object]:
        return {"repo_id": self.repo_id, "kind": self.kind, "revision": self.revision,
                "refs": list(self.refs), "folder": str(self.folder)}


@dataclass(frozen=True)
class _Layout:
    repo: Path
    blobs: Path
    cache: Path


# --- finding -------------------------------------------------------------------------------


def snapshot_folder(path: str | Path) -> Path | None:
    """The resolved snapshot folder that `path` is (or holds the file `path`), else None.

    Recognised by the layout's names only: `<cache>/<kind>s--<id>/snapshots/<revision>`.
    """
    path = Path(path)
    if not os.path.lexists(path):
        return None
    if path.is_dir():  # the snapshot folder itself, or a link the user made to it
        candidates = [Path(os.path.realpath(path))]
    else:  # a file, or a link, in the snapshot or one of its subfolders
        start = Path(os.path.realpath(path.parent))
        candidates = [start, *start.parents]
    for folder in candidates:
        if folder.parent.name == "snapshots" and _REPO_FOLDER.fullmatch(
                folder.parent.parent.name):
            return folder
    return None


def find_snapshot(path: str | Path) -> Snapshot | None:
    """The snapshot `path` is (or is in), every entry vetted; None for any other folder."""
    folder = snapshot_folder(path)
    if folder is None:
        return None
    repo = folder.parent.parent
    match = _REPO_FOLDER.fullmatch(repo.name)
    assert match is not None
    layout = _Layout(repo=repo, blobs=repo / "blobs", cache=repo.parent)
    files, problems = _walk_snapshot(folder, layout)
    return Snapshot(folder=folder, repo_folder=repo, repo_id=match.group(2).replace("--", "/"),
                    kind=REPO_KINDS[match.group(1)], revision=folder.name,
                    refs=_refs_naming(repo / "refs", folder.name), files=files,
                    problems=tuple(problems))


def repository_folder(path: str | Path) -> Path | None:
    """The resolved repository folder when `path` is one (`<cache>/models--ORG--NAME`
    holding `snapshots/`) or its `snapshots/` folder; else None."""
    real = Path(os.path.realpath(path))
    if real.name == "snapshots" and _REPO_FOLDER.fullmatch(real.parent.name):
        return real.parent
    if _REPO_FOLDER.fullmatch(real.name) and (real / "snapshots").is_dir():
        return real
    return None


def repository_folders(cache: str | Path) -> list[Path]:
    """The repository folders of a hub cache (`models--*`, `datasets--*`, `spaces--*`
    folders), sorted; [] for any other folder."""
    try:
        with os.scandir(cache) as listing:
            return sorted(Path(e.path) for e in listing if _REPO_FOLDER.fullmatch(e.name)
                          and e.is_dir(follow_symlinks=False))
    except OSError:
        return []


def revisions(repo: Path) -> list[tuple[str, tuple[str, ...]]]:
    """(revision, refs naming it) for each snapshot folder of a repository, the ones a ref
    names first."""
    try:
        with os.scandir(repo / "snapshots") as listing:
            names = sorted(e.name for e in listing if e.is_dir(follow_symlinks=False))
    except OSError:
        return []
    found = [(name, _refs_naming(repo / "refs", name)) for name in names]
    return sorted(found, key=lambda item: (not item[1], "main" not in item[1], item[0]))


def not_a_model_folder(path: str | Path) -> str | None:
    """Why `path` is a hub cache or one of its repository folders rather than a model
    folder, with where to point instead (None for any other path)."""
    repo = repository_folder(path)
    if repo is not None:
        found = revisions(repo)
        shown = Path(path) if Path(path).name != "snapshots" else Path(path).parent
        if not found:
            return f"{CACHE_REPOSITORY}: a hub cache repository folder with no snapshot"
        rev, refs = found[0]
        more = f" (or one of {len(found) - 1} more)" if len(found) > 1 else ""
        named = f" ({', '.join(refs)})" if refs else ""
        return (f"{CACHE_REPOSITORY}: a hub cache repository folder, not a model folder: "
                f"verify its snapshot {shown / 'snapshots' / rev}{named}{more}, or every "
                f"snapshot with `lineage verify --cache {shown.parent}`")
    if Path(path).is_dir() and repository_folders(path):
        return (f"{CACHE_REPOSITORY}: a hub cache, not a model folder: `lineage verify "
                f"--cache {path}` checks every snapshot of every repository in it")
    return None


def vetted_blob(link: str | Path) -> Path | None:
    """The blob behind one snapshot link, if that link passes every rule; else None."""
    link = Path(link)
    folder = snapshot_folder(link)
    if folder is None or not link.is_symlink():
        return None
    repo = folder.parent.parent
    outcome = _vet_link(link, "", _Layout(repo=repo, blobs=repo / "blobs", cache=repo.parent))
    return outcome.blob if isinstance(outcome, CachedFile) else None


def _refs_naming(refs: Path, revision: str) -> tuple[str, ...]:
    names = []
    for ref in sorted(refs.rglob("*")) if refs.is_dir() else []:
        if ref.is_symlink() or not ref.is_file():
            continue
        try:
            named = read_regular(ref, what="ref", max_bytes=_MAX_REF_BYTES).strip()
        except InputError:
            continue  # oversized, or swapped for something else: names no revision
        if named == revision.encode():
            names.append(ref.relative_to(refs).as_posix())
    return tuple(names)


def _walk_snapshot(
    folder: Path, layout: _Layout
) -> tuple[dict[str, CachedFile], list[LinkProblem]]:
    files: dict[str, CachedFile] = {}
    problems: list[LinkProblem] = []

    def unreadable(exc: OSError) -> None:
        where = Path(exc.filename).relative_to(folder).as_posix() if exc.filename else "."
        problems.append(LinkProblem(where, "unreadable-file", exc.strerror or str(exc)))

    for dirpath, dirnames, names in os.walk(folder, onerror=unreadable):
        here = Path(dirpath)
        dirnames.sort()
        linked_dirs = [d for d in dirnames if (here / d).is_symlink()]
        for name in sorted(names) + linked_dirs:
            rel = (here / name).relative_to(folder).as_posix()
            outcome = _vet_entry(here / name, rel, layout)
            if isinstance(outcome, CachedFile):
                files[rel] = outcome
            else:
                problems.append(outcome)
    return files, problems


def _vet_entry(path: Path, rel: str, layout: _Layout) -> CachedFile | LinkProblem:
    mode = path.lstat().st_mode
    if stat.S_ISLNK(mode):
        return _vet_link(path, rel, layout)
    if stat.S_ISREG(mode):
        return LinkProblem(rel, "not-a-cache-link", "a plain file, not a link to a blob: "
                           "no blob name vouches for it (check it with a SHA256SUMS list)")
    return LinkProblem(rel, "not-a-regular-file", "neither a file nor a link to a blob")


# --- vetting one link ----------------------------------------------------------------------


def _vet_link(link: Path, rel: str, layout: _Layout) -> CachedFile | LinkProblem:
    """Follow one snapshot link by its text, hop by hop, and say where it may not go."""
    if _loops(link):
        return LinkProblem(rel, "link-loop", f"following {os.readlink(link)!r} never ends")
    target = _one_hop(link)
    where = Path(os.path.realpath(target.parent))
    if where == layout.blobs:  # a real path: so blobs/ itself is no link elsewhere
        return _vet_blob(layout.blobs / target.name, rel, layout)
    if where.name == "blobs" and where.parent.parent == layout.cache and \
            _REPO_FOLDER.fullmatch(where.parent.name):
        return LinkProblem(rel, "link-into-other-repo",
                           f"points at {where.parent.name}/blobs/{target.name}, another "
                           f"repository's blob, not {layout.repo.name}'s")
    if where == layout.repo or layout.repo in where.parents:
        return LinkProblem(rel, "link-not-a-blob", f"points at {target}, which is not a "
                           f"blob of {layout.repo.name}")
    return LinkProblem(rel, "link-leaves-repository",
                       f"resolves to {os.path.realpath(link)}, outside {layout.repo}")


def _loops(link: Path) -> bool:
    try:
        os.stat(link)
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


def _one_hop(link: Path) -> Path:
    """Where a link's own text points, without resolving anything beyond it."""
    return Path(os.path.normpath(link.parent / os.readlink(link)))


def _vet_blob(blob: Path, rel: str, layout: _Layout) -> CachedFile | LinkProblem:
    name = blob.name
    if _SHA256_NAME.fullmatch(name):
        algorithm = "sha256"
    elif _SHA1_NAME.fullmatch(name):
        algorithm = "git-sha1"
    else:
        return LinkProblem(rel, "unnamed-blob", f"blob {name!r} is not named by a SHA-256 "
                           "or Git SHA-1: nothing to check it against")
    try:
        mode = blob.lstat().st_mode
    except FileNotFoundError:
        return LinkProblem(rel, "missing-file", f"blob {name} is not in {layout.blobs} "
                           "(an interrupted or pruned download?)")
    if stat.S_ISLNK(mode):
        return _vet_shared_blob(blob, rel, algorithm, layout)
    if not stat.S_ISREG(mode):
        return LinkProblem(rel, "not-a-regular-file", f"blob {name} is not a regular file")
    return CachedFile(path=rel, blob=blob, blob_name=name, algorithm=algorithm)


def _vet_shared_blob(
    blob: Path, rel: str, algorithm: str, layout: _Layout
) -> CachedFile | LinkProblem:
    """A repository blob may link into the cache-wide shared store, and nowhere else."""
    target = _one_hop(blob)
    store = layout.cache / "blobs"
    in_store = (Path(os.path.realpath(target.parent)) == store / target.name[:2]
                and _SHA256_NAME.fullmatch(target.name) is not None
                and _is_shared_store(store))
    if not in_store:
        return LinkProblem(rel, "link-leaves-repository", f"blob {blob.name} links to "
                           f"{os.path.realpath(blob)}, not into a shared blob store")
    try:
        mode = target.lstat().st_mode
    except FileNotFoundError:
        return LinkProblem(rel, "missing-file", f"shared blob {target.name} is not in {store}")
    if not stat.S_ISREG(mode):
        return LinkProblem(rel, "not-a-regular-file", f"shared blob {target.name} is not a "
                           "regular file")
    return CachedFile(path=rel, blob=target, blob_name=blob.name, algorithm=algorithm)


def _is_shared_store(store: Path) -> bool:
    marker = store / SHARED_STORE_MARKER
    try:
        return (not store.is_symlink() and not marker.is_symlink() and marker.is_file()
                and read_regular(marker, what="marker", max_bytes=16) == b"1\n")
    except (OSError, InputError):
        return False


# --- checking and listing ------------------------------------------------------------------


def verify_snapshot(
    snapshot: Snapshot, *, workers: int | None = None, progress: Progress | None = None,
    only: Collection[str] | None = None, digests: Mapping[Path, Outcome] | None = None,
) -> SumsReport:
    """Hash every vetted file and compare it with its blob's name; never raises for a file.

    The report has the shape of `verify_sums`'s, with `source` "hf-cache-blobs". `ok` only
    when the snapshot holds at least one file and every entry was vetted and matches.
    `only`: check these snapshot paths alone (one model file and its split parts).
    `digests`: the blobs already hashed (`hash_blobs`, several snapshots at once).
    """
    if only is not None:
        snapshot = snapshot.restricted(only)
    if digests is None:
        digests = hash_blobs([snapshot], workers=workers, progress=progress)
    rows = [_row(f, digests[f.blob]) for f in snapshot.files.values()]
    rows += [{"path": p.path, "expected": None, "actual": None, "status": p.status,
              "line": None, "algorithm": None} for p in snapshot.problems]
    problems = [SumProblem(None, p.path, p.rule, p.message) for p in snapshot.problems]
    problems += [SumProblem(None, r["path"], r.pop("rule"), r.pop("message"))
                 for r in rows if "rule" in r]
    if not rows:
        problems.append(SumProblem(None, None, "empty-snapshot", "the snapshot has no files"))
    rows.sort(key=lambda r: r["path"])
    problems.sort(key=lambda p: (p.path or "", p.rule))
    blobs = {f.blob for f in snapshot.files.values()}
    bytes_hashed = sum(d[1] for blob, d in digests.items()
                       if blob in blobs and not isinstance(d, Refusal))
    return SumsReport(ok=not problems, files=rows, problems=problems,
                      bytes_hashed=bytes_hashed, source=SOURCE)


def hash_blobs(snapshots: Collection[Snapshot], *, workers: int | None = None,
               progress: Progress | None = None) -> dict[Path, Outcome]:
    """Each distinct blob of the snapshots hashed once, by the algorithm its name implies
    (snapshots of one repository share most of their blobs)."""
    algorithms = {f.blob: f.algorithm for s in snapshots for f in s.files.values()}
    return hash_files(sorted(algorithms), algorithm=algorithms, workers=workers,
                      progress=progress)


def _row(cached: CachedFile, outcome: tuple[str, int] | Refusal) -> dict[str, Any]:
    # the row type of SumsReport.files
    row: dict[str, Any] = {"path": cached.path, "expected": cached.blob_name,
                              "actual": None, "status": "ok", "line": None,
                              "algorithm": cached.algorithm}
    if isinstance(outcome, Refusal):
        row.update(status="missing" if outcome.rule == "missing-file" else "refused",
                   rule=outcome.rule, message=outcome.message)
        return row
    row["actual"] = outcome[0]
    if outcome[0] != cached.blob_name:
        row.update(status="mismatch", rule="hash-mismatch",
                   message=f"{cached.algorithm} {outcome[0][:16]}…, blob is named "
                           f"{cached.blob_name[:16]}…")
    return row


def write_snapshot_sums(snapshot: Snapshot, *, workers: int | None = None) -> str:
    """SHA256SUMS lines for the snapshot's files, named as in the snapshot, hashed through
    their blobs. InputError for the first entry that was refused or is missing."""
    for problem in snapshot.problems:
        raise InputError(snapshot.folder / problem.path, f"{problem.rule}: {problem.message}")
    if not snapshot.files:
        raise InputError(snapshot.folder, "empty-list: the snapshot has no files")
    return format_sums(snapshot.blobs, workers=workers, where=snapshot.folder)
