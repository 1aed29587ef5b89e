"""What each file of a model folder is, decided by its bytes first and its name second.

A folder is listed without following links, and nothing but a regular file is ever opened:
a FIFO, device or socket below the folder is listed with the format `special` (opening a
FIFO waits for a writer forever; reading /dev/zero never ends), and the folder model reports
it by the rule `not-a-regular-file` (lineage.userfiles).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, BinaryIO

from lineage.errors import InputError
from lineage.formats.downloads import CONTENT_HEAD_BYTES
from lineage.formats.names import EXTENSIONS, parse_model_name
from lineage.userfiles import NOT_REGULAR, file_kind, open_regular

WEIGHT_FORMATS = {"safetensors", "gguf", "onnx", "pickle", "onnx-data"}
# Formats whose files loading may unpickle: every one of them is scanned for risks.
PICKLE_BEARING = frozenset({"pickle", "zip", "npy", "npz"})
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle", ".joblib")
SPECIAL = "special"  # the format of a FIFO, device or socket: listed, never opened
# Weights names: their anatomy is read whatever the bytes are (an LFS pointer, a bad magic).
_MODEL_SUFFIXES = (*EXTENSIONS, *PICKLE_SUFFIXES)
_SNIFF = 16
# pickle_kind's answers as file formats: torch archives and legacy files are pickles.
_PICKLE_FORMATS = {"pickle": "pickle", "torch-zip": "pickle", "torch-legacy": "pickle",
                   "compressed-pickle": "pickle", "npy": "npy", "npz": "npz", "zip": "zip"}
# The name suffixes that decide a format when the bytes did not (a pickle is by its bytes).
_BY_SUFFIX = ((".json", "json"), (".py", "python"), (".jinja", "jinja"), (".md", "text"),
              (".txt", "text"), (".model", "tokenizer"))


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
    if head.startswith(b"GGUF"):
        return "gguf"
    if name.endswith(".safetensors") or (len(head) >= 9 and head[8:9] == b"{"
                                         and int.from_bytes(head[:8], "little") < 2**32):
        return "safetensors"
    if name.endswith(".onnx"):
        return "onnx"
    if name.endswith(PICKLE_SUFFIXES):
        return "pickle"
    if name.endswith((".onnx_data", ".onnx.data")):
        return "onnx-data"
    return next((kind for suffix, kind in _BY_SUFFIX if name.endswith(suffix)), "other")


def list_files(folder: Path, *, names: set[str] | None = None,
               heads: dict[str, bytes] | None = None
               ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every file below `folder` and the symlinks found. Links are not followed, except a
    hub cache snapshot's vetted links into its own blobs: those are files too. A FIFO,
    device or socket is a file entry of format `special` (size 0), never opened.

    `names`: list only these entries of the folder itself (one model file and its split
    siblings), not the folder's whole tree. `heads`: filled with each file's first bytes
    (downloads.CONTENT_HEAD_BYTES), read while sniffing, so no check opens it again.
    """
    files: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    root_real = Path(os.path.realpath(folder))
    for path, rel, kind in _walk(folder, names):
        if kind == "link":
            target = os.path.realpath(path)
            cache_blob = _vetted_cache_blob(path)
            links.append({"path": rel, "target": target,
                          "inside": Path(target).is_relative_to(root_real),
                          "cache_blob": cache_blob is not None})
            if cache_blob is not None:
                files.append(_entry(path, rel, cache_blob, heads=heads))
        else:
            files.append(_entry(path, rel, None, special=kind == "special", heads=heads))
    return files, links


def _walk(folder: Path, names: set[str] | None) -> list[tuple[Path, str, str]]:
    """(path, '/'-joined relative name, "file" | "link" | "special") of every entry that
    is not a folder, in os.walk's order; a link to a folder is an entry (never descended
    into). The kinds come from the listing itself (no stat per file)."""
    found: list[tuple[Path, str, str]] = []
    stack: list[tuple[Path, str]] = [(folder, "")]
    while stack:
        here, prefix = stack.pop()
        try:
            with os.scandir(here) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError:
            continue  # as os.walk does: a folder that cannot be listed adds nothing
        leaves: list[tuple[Path, str, str]] = []
        links: list[tuple[Path, str, str]] = []
        subfolders: list[tuple[Path, str]] = []
        for entry in entries:
            if names is not None and entry.name not in names:
                continue
            path, rel = Path(entry.path), prefix + entry.name
            if entry.is_symlink():
                (links if _leads_to_folder(path) else leaves).append((path, rel, "link"))
            elif entry.is_dir(follow_symlinks=False):
                subfolders.append((path, rel + "/"))
            else:
                kind = "file" if entry.is_file(follow_symlinks=False) else "special"
                leaves.append((path, rel, kind))
        found += leaves + links
        if names is None:
            stack.extend(reversed(subfolders))
    return found


def _leads_to_folder(link: Path) -> bool:
    return os.path.isdir(link)  # False for a loop or a dangling link, as os.walk has it


def _entry(path: Path, rel: str, blob: Path | None, *, special: bool = False,
           heads: dict[str, bytes] | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"path": rel, "format": SPECIAL, "size": 0, "shard": None,
                             "name": {}}
    if not special:  # a special file is never opened: the folder model names what it is
        entry["format"], entry["size"] = _sniffed(blob or path, path.name.lower(), rel, heads)
    if entry["format"] in WEIGHT_FORMATS or path.name.lower().endswith(_MODEL_SUFFIXES):
        anatomy = parse_model_name(path.name)  # what a weights file's name says
        entry["shard"] = list(anatomy["shard"]) if anatomy["shard"] else None
        entry["name"] = {k: v for k, v in anatomy.items() if v and k not in ("shard", "extra")}
    return entry


def _sniffed(path: Path, name: str, rel: str, heads: dict[str, bytes] | None
             ) -> tuple[str, int]:
    """(format, size) of a file, its first bytes kept in `heads`."""
    try:
        with open_regular(path) as handle:
            size = os.fstat(handle.fileno()).st_size
            if heads is not None:
                heads[rel] = handle.read(CONTENT_HEAD_BYTES)
                handle.seek(0)
            return sniff_open(handle, name), size
    except InputError as exc:  # swapped for a FIFO or device since it was listed
        if exc.rule.startswith(NOT_REGULAR):
            return SPECIAL, 0
    except OSError:
        pass  # unreadable: the format readers say why
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
