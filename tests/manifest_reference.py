"""A second, deliberately plain implementation of docs/manifest-spec.md, from its text alone.

A folder of files becomes records (§ "A folder of files"), records become the manifest
hash (§ "The hash"). It shares no code with lineage/: the tests compare the two on random
folders and records and on the example corpus, and where they disagree the spec text
decides which one is wrong.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import blake3

SPEC = "lineage-manifest/1"


class FolderError(Exception):
    """The folder breaks a rule of the spec (the ingest stops with exit 2)."""


def folder_records(root: Path, *, source: str | None = None,
                   licenses: dict[str, str] | None = None,
                   default_license: str | None = None,
                   links: str = "skip") -> tuple[list[dict], dict[str, int]]:
    """(records sorted by doc_id, counts of what was left out or followed) of one folder,
    with the byte tokenizer (n_tokens = n_bytes)."""
    licenses = licenses or {}
    top_source = source or root.resolve().name
    records: list[dict] = []
    left_out = {"hidden": 0, "links": 0, "followed": 0, "empty": 0}

    def add(path: Path, parts: list[str]) -> None:
        _check_utf8(path, "/".join(parts))
        data = path.read_bytes()
        if not data:
            left_out["empty"] += 1
            return
        doc_source = source or (parts[0] if len(parts) > 1 else top_source)
        records.append({
            "doc_id": "/".join(parts), "source": doc_source, "n_bytes": len(data),
            "n_tokens": len(data), "content_hash": blake3.blake3(data).hexdigest(),
            "license": licenses.get(doc_source, default_license)})

    def walk(folder: Path, prefix: list[str], holding: set[str]) -> None:
        for raw_name in os.listdir(os.fsencode(folder)):
            text_name = raw_name.decode("utf-8", errors="surrogateescape")
            path = folder / os.fsdecode(raw_name)
            mode = os.lstat(path).st_mode
            parts = [*prefix, text_name]
            if text_name.startswith("."):
                left_out["hidden"] += 1
            elif stat.S_ISLNK(mode):
                kind = _link(path, root, links)
                if kind is None:
                    left_out["links"] += 1
                    continue
                left_out["followed"] += 1
                if kind == "file":
                    add(path, parts)
                    continue
                real = os.path.realpath(path)
                if real in holding:
                    raise FolderError(f"{path}: symlink-loop")
                walk(path, parts, holding | {real})
            elif stat.S_ISDIR(mode):
                walk(path, parts, holding | {os.path.realpath(path)})
            elif stat.S_ISREG(mode):
                add(path, parts)
            else:
                raise FolderError(f"{path}: not a regular file, folder or link")

    walk(root, [], {os.path.realpath(root)})
    for record in records:
        for field in ("doc_id", "source"):
            if any(ord(c) < 0x20 or ord(c) == 0x7F for c in record[field]):
                raise FolderError(f"{record['doc_id']!r}: {field} has a control character")
    return sorted(records, key=lambda r: r["doc_id"].encode("utf-8")), left_out


def _link(path: Path, root: Path, mode: str) -> str | None:
    """"file" or "folder" when a link is read, None when it is skipped: a hub cache's link
    into its own blobs is a file in every mode; a link must resolve, without looping, to
    a file or a folder; then `--links` decides."""
    if _cache_blob_link(path):
        return "file"
    try:
        target = path.resolve(strict=True)
    except FileNotFoundError as exc:
        raise FolderError(f"{path}: unreadable: a link whose target does not exist") from exc
    except (OSError, RuntimeError) as exc:
        raise FolderError(f"{path}: symlink-loop") from exc
    if not (target.is_file() or target.is_dir()):
        raise FolderError(f"{path}: special-file")
    if mode == "follow":
        return "folder" if target.is_dir() else "file"
    if mode == "refuse" and not target.is_relative_to(root.resolve()):
        raise FolderError(f"{path}: symlink-outside")
    return None


def _cache_blob_link(path: Path) -> bool:
    """A link in <cache>/<kind>s--<id>/snapshots/<revision>/... whose own text leads to a
    regular file named by 40 or 64 hex digits in that repository's blobs/."""
    snapshot = next((p for p in Path(os.path.realpath(path.parent)).joinpath("x").parents
                     if p.parent.name == "snapshots"
                     and re.fullmatch(r"(models|datasets|spaces)--.+", p.parent.parent.name)),
                    None)
    if snapshot is None:
        return False
    target = Path(os.path.normpath(path.parent / os.readlink(path)))
    blobs = snapshot.parent.parent / "blobs"
    return (os.path.realpath(target.parent) == str(blobs)
            and re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", target.name) is not None
            and os.path.isfile(target) and not os.path.islink(target))


def _check_utf8(path: Path, doc_id: str) -> None:
    try:
        doc_id.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise FolderError(f"{path}: file name is not valid UTF-8") from exc


def manifest_hash(records: list[dict]) -> str:
    """BLAKE3-256 of the header line and one line per document, sorted by doc_id bytes."""
    text = SPEC + "\n"
    for r in sorted(records, key=lambda r: r["doc_id"].encode("utf-8")):
        license = r["license"] if r["license"] is not None else ""
        fields = [r["doc_id"], r["source"], str(int(r["n_bytes"])), str(int(r["n_tokens"])),
                  r["content_hash"], license]
        text += "\t".join(fields) + "\n"
    return "blake3:" + blake3.blake3(text.encode("utf-8")).hexdigest()
