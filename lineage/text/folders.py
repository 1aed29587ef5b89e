"""`trained-on DIR`: every file of a folder asked about, and a summary per folder.

A folder stands for the files `lineage ingest corpus DIR` would record from it, by the
same rules (docs/manifest-spec.md, "A folder of files"): every regular file at any depth,
in path order, asked about as `DIR/<path>`; hidden entries (names starting with '.'),
symbolic links (not followed, as the ingest's default) and empty files (which no corpus
records) are skipped and counted. A FIFO, socket or device in it is refused (reading one
may never end), and so is a folder that cannot be listed.

Kept apart from the question itself and light to import: the command line's lean path
(`trained-on --json`) answers folders too.
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lineage.errors import InputError
from lineage.userfiles import file_kind


@dataclass
class Folder:
    """One folder argument: the files it stands for and what was left out."""

    given: str  # as the user wrote it
    files: list[tuple[str, str]] = field(default_factory=list)  # (label, path), path order
    skipped_hidden: int = 0
    skipped_links: int = 0
    skipped_empty: int = 0


def read_folder(given: str) -> Folder:
    """Every file below the folder `given` (see the module's rules)."""
    folder = Folder(given)
    found: list[tuple[bytes, str, str]] = []  # (path's UTF-8 bytes, label, path)
    pending = [(given, "")]
    while pending:
        here, prefix = pending.pop()
        for entry in _listed(here):
            rel = prefix + entry.name
            if entry.name.startswith("."):
                folder.skipped_hidden += 1
            elif entry.is_symlink():
                folder.skipped_links += 1
            elif entry.is_dir():
                pending.append((entry.path, rel + "/"))
            elif not entry.is_file():
                kind = file_kind(entry.stat(follow_symlinks=False).st_mode)
                raise InputError(entry.path, f"special-file: {kind}, not a regular file: "
                                 "reading it may never end (move it out of the folder)")
            elif entry.stat(follow_symlinks=False).st_size == 0:
                folder.skipped_empty += 1
            else:
                found.append((rel.encode("utf-8", "surrogateescape"),
                              os.path.join(given, rel), entry.path))
    folder.files = [(label, path) for _, label, path in sorted(found)]
    return folder


def _listed(folder: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as entries:
            return sorted(entries, key=lambda entry: entry.name)
    except OSError as exc:  # never skipped: the answer would silently lack its files
        raise InputError(folder, f"unreadable: cannot be listed ({exc.strerror or exc})") \
            from exc


def is_folder(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except OSError:
        return False


def summaries(folders: Sequence[Folder], results: Sequence[Mapping[str, Any]],
              starts: Sequence[int], found: Any) -> list[dict[str, Any]]:
    """One summary per folder: its files by verdict, how many were trained on (`found`
    says of one result), and what was skipped. `starts[i]` is the index of folder i's
    first result."""
    out = []
    for folder, start in zip(folders, starts, strict=True):
        mine = results[start:start + len(folder.files)]
        verdicts = Counter(str(result["verdict"]) for result in mine)
        out.append({"folder": folder.given, "files": len(mine),
                    "found": sum(1 for result in mine if found(result)),
                    "verdicts": dict(sorted(verdicts.items())),
                    "skipped_hidden": folder.skipped_hidden,
                    "skipped_links": folder.skipped_links,
                    "skipped_empty": folder.skipped_empty})
    return out
