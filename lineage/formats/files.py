"""What each file of a model folder is, decided by its bytes first and its name second.

A folder is listed without following links, and nothing but a regular file is ever opened:
a FIFO, device or socket below the folder is listed with the format `special` (opening a
FIFO waits for a writer forever; reading /dev/zero never ends), and the folder model reports
it by the rule `not-a-regular-file` (lineage.userfiles).
"""

from __future__ import annotations

import errno
import os
import stat
from operator import attrgetter
from pathlib import Path
from typing import Any, BinaryIO

from lineage.errors import InputError
from lineage.formats.downloads import CONTENT_HEAD_BYTES
from lineage.formats.names import EXTENSIONS, parse_model_name
from lineage.userfiles import file_kind, open_regular

WEIGHT_FORMATS = {"safetensors", "gguf", "onnx", "pickle", "onnx-data"}
# Formats whose files loading may unpickle: every one of them is scanned for risks.
PICKLE_BEARING = frozenset({"pickle", "zip", "npy", "npz"})
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle", ".joblib")
SPECIAL = "special"  # the format of a FIFO, device or socket: listed, never opened
# Weights names: their anatomy is read whatever the bytes are (an LFS pointer, a bad magic).
_MODEL_SUFFIXES = (*EXTENSIONS, *PICKLE_SUFFIXES)
_SNIFF = 16
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NAME = attrgetter("name")
# pickle_kind's answers as file formats: torch archives and legacy files are pickles.
_PICKLE_FORMATS = {"pickle": "pickle", "torch-zip": "pickle", "torch-legacy": "pickle",
                   "compressed-pickle": "pickle", "npy": "npy", "npz": "npz", "zip": "zip"}
# The name suffixes that decide a format when the bytes did not (a pickle is by its bytes
# or, for the risk scan, by these names too); `.onnx.data` is onnx-data as well.
_BY_SUFFIX = {".safetensors": "safetensors", ".onnx": "onnx",
              **dict.fromkeys(PICKLE_SUFFIXES, "pickle"), ".onnx_data": "onnx-data",
              ".json": "json", ".py": "python", ".jinja": "jinja", ".md": "text",
              ".txt": "text", ".model": "tokenizer"}


def sniff(path: Path) -> str:
    """safetensors, gguf, onnx, pickle, npy, npz, zip, json, python, jinja, text, other,
    or `unreadable` (it could not be opened as a regular file).

    Pickles are recognised by content whatever the name (pickle_kind: protocols 0-5, torch
    archives and legacy files, NumPy arrays and archives); a pickle suffix on anything else
    still means pickle, so the risk scan looks at it.
    """
    try:
        with open_regular(path) as handle:
            return sniff_open(handle, path.name.lower())
    except (InputError, OSError):
        return "unreadable"


def sniff_open(handle: BinaryIO, name: str) -> str:
    """`sniff` of a file already opened (at its start), `name` lower-cased."""
    from lineage.formats.pickle_scan import pickle_kind_of

    head = handle.read(_SNIFF)
    handle.seek(0)
    kind = pickle_kind_of(handle)  # first: a pickle can be shaped to pass the checks below
    if kind is not None:
        return "pickle" if kind == "zip" and name.endswith(PICKLE_SUFFIXES) else \
            _PICKLE_FORMATS[kind]
    return _sniff_head(head, name)


def _sniff_head(head: bytes, name: str) -> str:
    """The format of a file that is no pickle, from its first _SNIFF bytes and its name."""
    if head.startswith(b"GGUF"):
        return "gguf"
    if len(head) >= 9 and head[8:9] == b"{" and int.from_bytes(head[:8], "little") < 2**32:
        return "safetensors"
    _stem, dot, suffix = name.rpartition(".")
    if not dot:
        return "other"
    if suffix == "data":
        return "onnx-data" if name.endswith(".onnx.data") else "other"
    return _BY_SUFFIX.get(dot + suffix, "other")


def list_files(folder: Path, *, names: set[str] | None = None,
               heads: dict[str, bytes] | None = None, whole: dict[str, bytes] | None = None
               ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every file below `folder` and the symlinks found. Links are not followed, except a
    hub cache snapshot's vetted links into its own blobs: those are files too. A FIFO,
    device or socket is a file entry of format `special` (size 0), never opened.

    `names`: list only these entries of the folder itself (one model file and its split
    siblings), not the folder's whole tree. `heads`: filled with each file's first bytes
    (downloads.CONTENT_HEAD_BYTES), read while sniffing, so no check opens it again.
    `whole`: filled with the bytes of each file those first bytes are all of (opened
    without following a link, regular by fstat), so a checksum need not read it again.
    """
    files: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    root_real = Path(os.path.realpath(folder))
    reader = _Reader(heads, whole)
    for here, entries in _walk(folder, names):
        reader.enter(here)
        try:
            for path, rel, kind in entries:
                if kind == "link":
                    target = os.path.realpath(path)
                    cache_blob = _vetted_cache_blob(Path(path))
                    links.append({"path": rel, "target": target,
                                  "inside": Path(target).is_relative_to(root_real),
                                  "cache_blob": cache_blob is not None})
                    if cache_blob is not None:
                        files.append(_entry(reader, path, rel, str(cache_blob)))
                else:
                    files.append(_entry(reader, path, rel, None, special=kind == "special"))
        finally:
            reader.leave()
    return files, links


def _walk(folder: Path, names: set[str] | None
          ) -> list[tuple[str, list[tuple[str, str, str]]]]:
    """Each folder below `folder` with its entries that are not folders: (path, '/'-joined
    relative name, "file" | "link" | "special"), in os.walk's order; a link to a folder is
    an entry (never descended into). The kinds come from the listing itself (no stat per
    file); paths stay strings (a Path per file cost more than the rest of the listing)."""
    found: list[tuple[str, list[tuple[str, str, str]]]] = []
    stack: list[tuple[str, str]] = [(os.fspath(folder), "")]
    while stack:
        here, prefix = stack.pop()
        try:
            with os.scandir(here) as listing:
                entries = sorted(listing, key=_NAME)
        except OSError:
            continue  # as os.walk does: a folder that cannot be listed adds nothing
        leaves: list[tuple[str, str, str]] = []
        links: list[tuple[str, str, str]] = []
        subfolders: list[tuple[str, str]] = []
        for entry in entries:
            if names is not None and entry.name not in names:
                continue
            path, rel = entry.path, prefix + entry.name
            if entry.is_file(follow_symlinks=False):  # most entries: asked first
                leaves.append((path, rel, "file"))
            elif entry.is_symlink():
                (links if _leads_to_folder(path) else leaves).append((path, rel, "link"))
            elif entry.is_dir(follow_symlinks=False):
                subfolders.append((path, rel + "/"))
            else:
                leaves.append((path, rel, "special"))
        if leaves or links:
            found.append((here, leaves + links))
        if names is None:
            stack.extend(reversed(subfolders))
    return found


def _leads_to_folder(link: str) -> bool:
    return os.path.isdir(link)  # False for a loop or a dangling link, as os.walk has it


def _entry(reader: _Reader, path: str, rel: str, blob: str | None, *,
           special: bool = False) -> dict[str, Any]:
    name = rel.rpartition("/")[2]
    lowered = name.lower()
    entry: dict[str, Any] = {"path": rel, "format": SPECIAL, "size": 0, "shard": None,
                             "name": {}}
    if not special:  # a special file is never opened: the folder model names what it is
        entry["format"], entry["size"] = reader.sniff(blob or path, lowered, rel,
                                                      plain=blob is None)
    if entry["format"] in WEIGHT_FORMATS or lowered.endswith(_MODEL_SUFFIXES):
        anatomy = parse_model_name(name)  # what a weights file's name says
        entry["shard"] = list(anatomy["shard"]) if anatomy["shard"] else None
        entry["name"] = {k: v for k, v in anatomy.items() if v and k not in ("shard", "extra")}
    return entry


class _Reader:
    """Sniffs each file from one read of its first bytes, keeping them in `heads` (and in
    `whole` the files they are all of)."""

    def __init__(self, heads: dict[str, bytes] | None, whole: dict[str, bytes] | None
                 ) -> None:
        from lineage.formats.pickle_scan import may_be_pickle

        self.heads = heads
        self.whole = whole
        self.may_be_pickle = may_be_pickle
        self.folder: int | None = None  # the folder being read, open: files by name in it

    def enter(self, folder: str) -> None:
        """Open the folder whose files are read next (a file opened by its name in it: the
        kernel walks one name, not the whole path; None if it cannot be opened)."""
        try:
            self.folder = os.open(folder, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
        except OSError:
            self.folder = None

    def leave(self) -> None:
        if self.folder is not None:
            os.close(self.folder)
            self.folder = None

    def sniff(self, path: str, name: str, rel: str, *, plain: bool) -> tuple[str, int]:
        """(format, size) of a file. Opened as open_regular opens one (never waiting on a
        FIFO; fstat says it is regular), and without following a link when `plain` (a
        link swapped in since the listing is opened as before, and not kept whole). A
        file whose first bytes no pickle, archive or compressed stream starts with
        (pickle_scan.may_be_pickle) is told from them and its name; any other is read
        again from its start by sniff_open."""
        try:
            fd, unfollowed = _open(path, self.folder if plain else None)
        except OSError:
            return _unopened(path)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):  # swapped for a FIFO or device since listed
                return SPECIAL, 0
            size = info.st_size
            head = os.read(fd, CONTENT_HEAD_BYTES)
            if len(head) < CONTENT_HEAD_BYTES and len(head) < size:  # a short read
                head = _read_rest(fd, head)
            if self.heads is not None:
                self.heads[rel] = head
            if self.whole is not None and unfollowed and len(head) == size < CONTENT_HEAD_BYTES:
                self.whole[rel] = head  # a short read of what fstat said: the whole file
            if not self.may_be_pickle(head):
                return _sniff_head(head[:_SNIFF], name), size
            os.lseek(fd, 0, os.SEEK_SET)
            with open(fd, "rb", closefd=False) as handle:
                return sniff_open(handle, name), size
        except OSError:
            pass  # unreadable: the format readers say why
        finally:
            os.close(fd)
        return _unread(path)


def _open(path: str, folder: int | None) -> tuple[int, bool]:
    """A descriptor for reading, and whether it was opened without following a link: by
    its name in `folder` (a listed file, its folder open), else by its path as given."""
    if folder is not None:
        try:
            return os.open(os.path.basename(path), _OPEN_FLAGS | _NOFOLLOW, dir_fd=folder), True
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
    return os.open(path, _OPEN_FLAGS), False


def _read_rest(fd: int, head: bytes) -> bytes:
    """`head` and what more reads give, up to CONTENT_HEAD_BYTES or the end of the file."""
    while len(head) < CONTENT_HEAD_BYTES and (more := os.read(fd, CONTENT_HEAD_BYTES
                                                              - len(head))):
        head += more
    return head


def _unopened(path: str) -> tuple[str, int]:
    """What open_regular's refusal meant: a special file (a socket cannot be opened at
    all), or an unreadable one."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return "unreadable", 0
    return (SPECIAL, 0) if not stat.S_ISREG(mode) else _unread(path)


def _unread(path: str) -> tuple[str, int]:
    try:
        return "unreadable", os.stat(path).st_size
    except OSError:
        return "unreadable", 0


def special_kind(path: Path) -> str:
    """What a special file is, in words ("a FIFO", "a character device", ...)."""
    try:
        return file_kind(os.lstat(path).st_mode)
    except OSError:
        return "a special file"


def _vetted_cache_blob(link: Path) -> Path | None:
    """The blob a hub cache snapshot link leads to, if `hf_cache` vetted it (else None)."""
    from lineage.formats.hf_cache import vetted_blob

    return vetted_blob(link)
