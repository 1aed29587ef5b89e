"""The weights an experiment runs on: a folder, a hub cache snapshot, or one model file.

- A folder: every regular file below it, with size and SHA-256 (links are not followed).
- A Hugging Face cache snapshot (`.../snapshots/<revision>`, lineage.formats.hf_cache):
  its files are links into `../../blobs`, so each vetted link is recorded under its name
  in the snapshot with the SHA-256 of the blob it names, as `lineage sums` lists them
  (a link the cache layout does not vouch for is not followed, and the checks say why).
  The snapshot's repository, revision (its folder's name) and the refs naming it are
  recorded too, and the `--revision` given must name it (`check_revision`).
- One file (a GGUF, a safetensors file, ...), as `inspect` and `report` take it: that file
  and the other parts of its split set, as the folder model selects them.

A digest a checksum check already computed is not computed again (`known`).
"""

from __future__ import annotations

import dataclasses
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lineage.errors import InputError
from lineage.formats.folder import FolderModel
from lineage.formats.hf_cache import Snapshot, verify_snapshot
from lineage.formats.sha256sums import read_sums, sha256_files, verify_sums
from lineage.userfiles import file_kind

_SHORT_COMMIT = re.compile(r"[0-9a-fA-F]{7,40}")


def weights_path(path: str | Path) -> Path:
    """`path` if it is a folder or a regular file (through links); InputError otherwise."""
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        problem = "a link whose target does not exist" if os.path.islink(path) else \
            "no such weights folder or file"
        raise InputError(path, problem) from None
    except OSError as exc:
        raise InputError(path, f"unreadable: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode) or stat.S_ISREG(mode):
        return path
    raise InputError(path, f"not-a-regular-file: {file_kind(mode)}, not a weights folder "
                     "or model file")


def weights_files(path: Path, model: FolderModel, *, known: Mapping[str, str] | None = None
                  ) -> list[dict[str, Any]]:
    """[{path, size, sha256}] of the files the command may read, sorted by path."""
    known = dict(known or {})
    if path.is_dir() and model.snapshot is None:
        sources = _plain_files(path)
    else:
        vetted = vetted_links(model)
        sources = {f["path"]: vetted.get(f["path"], model.root / f["path"])
                   for f in model.files}
    todo = [source for rel, source in sources.items() if rel not in known]
    digests = sha256_files(todo)
    return [{"path": rel, "size": source.stat().st_size,
             "sha256": known.get(rel) or digests[source]}
            for rel, source in sorted(sources.items())]


def _plain_files(folder: Path) -> dict[str, Path]:
    paths = sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
    return {p.relative_to(folder).as_posix(): p for p in paths}


def vetted_links(model: FolderModel) -> dict[str, Path]:
    """The snapshot's vetted links under the folder model's root, named from the root."""
    if model.snapshot is None:
        return {}
    prefix = _prefix(model)
    return {rel.removeprefix(prefix): blob for rel, blob in model.snapshot.blobs.items()
            if rel.startswith(prefix)}


def _prefix(model: FolderModel) -> str:
    """Where the folder model's root is in its snapshot: "" or "sub/folder/"."""
    assert model.snapshot is not None
    below = Path(os.path.realpath(model.root)).relative_to(model.snapshot.folder).as_posix()
    return "" if below == "." else below + "/"


def describe_snapshot(snapshot: Snapshot | None) -> dict[str, Any] | None:
    return None if snapshot is None else snapshot.describe()


def check_revision(snapshot: Snapshot | None, revision: str, *, override: bool
                   ) -> str | None:
    """Does `revision` name this snapshot: its folder's name (or a prefix of at least 7 hex
    digits, as git abbreviates), or a `refs/` entry that names it? A mismatch raises
    InputError (rule revision-mismatch) unless `override`; then it is a warning."""
    if snapshot is None or names_snapshot(snapshot, revision):
        return None
    refs = f" (refs naming it: {', '.join(snapshot.refs)})" if snapshot.refs else ""
    message = (f"--revision {revision!r} does not name this snapshot of {snapshot.repo_id}: "
               f"its folder names revision {snapshot.revision}{refs}")
    if not override:
        raise InputError(snapshot.folder, f"revision-mismatch: {message}; give that revision, "
                         "or pass --revision-override to record both")
    return message + "; both are recorded (--revision-override)"


def names_snapshot(snapshot: Snapshot, revision: str) -> bool:
    if revision == snapshot.revision or revision in snapshot.refs:
        return True
    return bool(_SHORT_COMMIT.fullmatch(revision)) and \
        snapshot.revision.startswith(revision.lower())


def file_checksums(target: Path, model: FolderModel, sums: Path | None) -> dict[str, Any]:
    """The checksum verdict on one model file (and its split set), as `lineage verify`
    gives it on a folder: against the list's lines naming these files only (the other
    files a list names need not be here), else against the snapshot's blob names; `ok`
    None when there is neither. A list naming none of them fails: nothing was checked."""
    names = {f["path"] for f in model.files} | {target.name}
    if sums is not None:
        entries = [e for e in read_sums(sums) if e.path in names]
        if not entries:
            return {"ok": False, "source": "sums-list", "files": []}
        report = verify_sums(model.root, entries, list_path=sums,
                             vetted_links=vetted_links(model))
    elif model.snapshot is not None:
        snapshot, prefix = model.snapshot, _prefix(model)
        chosen = {prefix + name for name in names}
        report = verify_snapshot(dataclasses.replace(
            snapshot, files={k: v for k, v in snapshot.files.items() if k in chosen},
            problems=tuple(p for p in snapshot.problems if p.path in chosen)))
    else:
        return {"ok": None, "source": None, "files": []}
    return {"ok": report.ok, "source": report.source, "files": report.files}
