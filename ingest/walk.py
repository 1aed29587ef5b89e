"""Walking an input folder: every file below it, and what becomes of hidden entries, links
and special files (docs/manifest-spec.md, "A folder of files").

Hidden entries (names starting with '.') are skipped and counted. A symbolic link is
first checked whatever `--links` says: one whose target does not exist (`unreadable`),
that loops (`symlink-loop`) or that leads to a FIFO, socket or device (`special-file`)
stops the ingest. Then:

    skip    (the default) the link is not read, and counted: a corpus is the folder's own
            files, never what a link happens to reach elsewhere on the machine
    follow  the link is read as the file or folder it leads to, wherever that is; its
            documents are named by the link's path inside the folder. A folder link that
            leads to a folder holding it is a loop (`symlink-loop`)
    refuse  a link leading out of the folder stops the ingest (`symlink-outside`); a link
            inside it is skipped and counted (what it leads to is read by its own path)

In a Hugging Face hub cache snapshot (lineage/formats/hf_cache.py), every link that passes
the cache's own rules (a relative link into its repository's blobs/, as `verify` follows
them) is a file of the snapshot, whatever the mode: it is read through its link and named
by its path in the snapshot. Its other links meet the mode like any link.

Entries are listed in name order and the caller sorts what is found by path, so what is
ingested never depends on the order the file system lists a folder in.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lineage.errors import InputError, UsageError
from lineage.ingest.input_rules import IngestRuleError, os_error, special_file_error

LINK_MODES = ("skip", "follow", "refuse")
DEFAULT_LINKS = "skip"


@dataclass
class WalkCounts:
    """What a walk left out or followed, summed over every folder walked."""

    skipped_hidden: int = 0
    skipped_links: int = 0
    followed_links: int = 0


@dataclass(frozen=True)
class Found:
    path: str  # where to read the file (through its link when it was followed)
    rel: str  # its path below the folder walked, '/'-separated


def check_links_mode(mode: str) -> str:
    if mode not in LINK_MODES:
        raise UsageError(f"--links must be one of {', '.join(LINK_MODES)}, not {mode!r}")
    return mode


def walk_folder(root: Path, *, links: str, counts: WalkCounts,
                wanted: Callable[[str], bool] | None = None) -> list[Found]:
    """Every file below `root` (those whose name `wanted` accepts), in no set order.

    Walks with `os.scandir` and plain strings: a path object per file costs more than
    hashing a small file (2,000 files listed in 68 ms with pathlib, a few ms like this)."""
    policy = _LinkPolicy(check_links_mode(links), Path(os.path.realpath(root)),
                         _in_snapshot(root))
    found: list[Found] = []
    first = (str(root), "", policy.ancestry(frozenset(), str(root)))
    pending = [first]  # (folder on disk, its path prefix, the folders holding it)
    while pending:
        folder, prefix, ancestors = pending.pop()
        for entry in _listed(folder):
            name = entry.name
            if name.startswith("."):
                counts.skipped_hidden += 1
            elif entry.is_symlink():
                if wanted is not None and not wanted(name) and not entry.is_dir():
                    continue  # not a shard's name, and no folder to walk
                followed = policy.decide(entry.path)
                if followed is None:
                    counts.skipped_links += 1
                    continue
                counts.followed_links += 1
                if followed == "folder":
                    inner = policy.ancestry(ancestors, entry.path, link=True)
                    pending.append((entry.path, f"{prefix}{name}/", inner))
                else:
                    found.append(Found(entry.path, _named(entry.path, prefix + name)))
            elif entry.is_dir():
                inner = policy.ancestry(ancestors, entry.path)
                pending.append((entry.path, f"{prefix}{name}/", inner))
            elif not entry.is_file():  # reading a FIFO would wait forever
                raise special_file_error(entry.path, entry.stat().st_mode)
            elif wanted is None or wanted(name):
                found.append(Found(entry.path, _named(entry.path, prefix + name)))
    return found


def _listed(folder: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(folder) as found:
            return sorted(found, key=lambda entry: entry.name)
    except OSError as exc:  # never skipped: the corpus would silently lack its files
        raise os_error(folder, exc) from exc


def _named(path: str, rel: str) -> str:
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(path, "file name is not valid UTF-8: rename it") from exc
    return rel


def _in_snapshot(root: Path) -> bool:
    from lineage.formats.hf_cache import snapshot_folder

    return snapshot_folder(root) is not None


@dataclass(frozen=True)
class _LinkPolicy:
    mode: str
    root: Path  # the folder walked, resolved
    snapshot: bool  # the folder is (or is in) a hub cache snapshot

    def decide(self, path: str) -> str | None:
        """"file" or "folder" when the link is read, None when it is skipped; raises the
        rule a link breaks."""
        if self.snapshot and _cache_file(path):
            return "file"
        target = _target(path)
        if self.mode == "follow":
            return "folder" if stat.S_ISDIR(target.st_mode) else "file"
        if self.mode == "refuse":
            real = Path(os.path.realpath(path))
            if not real.is_relative_to(self.root):
                raise IngestRuleError(path, "symlink-outside", f"a link to {real}, outside "
                                      f"{self.root}: --links follow reads it, --links skip "
                                      "leaves it out (or give its place as a PATH)")
        return None

    def ancestry(self, ancestors: frozenset[tuple[int, int]], folder: str, *,
                 link: bool = False) -> frozenset[tuple[int, int]]:
        """The folders holding the next one walked, itself included: only links can make
        a folder hold itself, so they are tracked only when links are followed."""
        if self.mode != "follow":
            return ancestors
        try:
            found = os.stat(folder)
        except OSError as exc:
            raise os_error(folder, exc) from exc
        key = (found.st_dev, found.st_ino)
        if link and key in ancestors:
            raise IngestRuleError(folder, "symlink-loop", "a link to a folder that holds it: "
                                  "following it never ends")
        return ancestors | {key}


def _cache_file(path: str) -> bool:
    """A snapshot link the hub cache's rules vouch for (into its own repository's blobs)."""
    from lineage.formats.hf_cache import vetted_blob

    return vetted_blob(path) is not None


def _target(path: str) -> os.stat_result:
    """What a link leads to, which must exist, end, and be a regular file or a folder."""
    try:
        found = os.stat(path)
    except FileNotFoundError as exc:
        raise IngestRuleError(path, "unreadable", "a link whose target does not exist") \
            from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise IngestRuleError(path, "symlink-loop", "a symbolic link that loops") from exc
        raise os_error(path, exc) from exc
    if not (stat.S_ISREG(found.st_mode) or stat.S_ISDIR(found.st_mode)):
        raise special_file_error(path, found.st_mode)
    return found
