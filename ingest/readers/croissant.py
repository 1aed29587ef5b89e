"""A Croissant file (JSON-LD, MLCommons) as a description of where a corpus's documents are.

`lineage ingest corpus DATASET.json` reads the file's `distribution` and ingests what it
names with the existing readers (docs/exports.md, "Croissant"):

- a `FileObject` whose `encodingFormat` is Parquet or JSON Lines: one shard, read as a
  text shard, or as a ready manifest when its columns say so (a file `lineage export
  croissant` names is one); its `sha256` (or `md5`) and a `contentSize` in bytes are
  checked against the file first (rule `croissant-checksum`);
- a `FileSet` (no `containedIn`) of Parquet or JSON Lines files: every file its
  `includes` globs match (minus `excludes`), as shards;
- a `FileSet` of `text/plain` files: one file, one document, as a folder is ingested,
  from the folder the globs start in.

Paths are relative to the Croissant file's folder (as mlcroissant reads them), absolute,
or `file://` URIs. Nothing is fetched: a URL, a git repository or an archive is an error
naming the distribution entry (download or unpack it, then describe the local files).
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from lineage.errors import InputError, RuleError
from lineage.ingest.input_rules import IngestRuleError, open_regular, read_regular, stat_input

MAX_CROISSANT_BYTES = 64 << 20  # a description, not data: larger files are not sniffed
_SNIFF_BYTES = 1 << 16
_CHUNK = 1 << 22
PARQUET_FORMATS = ("application/x-parquet", "application/vnd.apache.parquet",
                   "application/parquet")
JSONL_FORMATS = ("application/jsonlines", "application/jsonl", "application/x-jsonlines",
                 "application/x-ndjson", "application/ndjson")
TEXT_FORMATS = ("text/plain",)
ARCHIVE_FORMATS = ("application/zip", "application/x-tar", "application/x-gzip",
                   "application/gzip", "application/x-gziptar", "application/x-7z-compressed")
_GLOB = re.compile(r"[*?\[]")


class CroissantError(RuleError):
    """A Croissant file that cannot be ingested; nothing was written."""


@dataclass(frozen=True)
class DocumentFiles:
    """Files a distribution entry names: one shard ("parquet", "jsonl"), or a folder
    ("files") whose files matching `includes` and no `excludes` (globs relative to the
    folder) are documents."""

    path: Path
    family: str
    # A shard's name (the prefix of generated doc_ids): its path relative to the Croissant
    # file's folder, or its file name when outside it; a folder's own name.
    name: str
    includes: tuple[str, ...] = ()
    excludes: tuple[str, ...] = ()


def looks_like_croissant(path: Path) -> bool:
    """Whether `path` is a Croissant file, by its content: one JSON object with an
    `@context` that conforms to a Croissant version. Big files and files that do not
    start with `{` are not read past their first bytes."""
    try:
        size = path.stat().st_size
        if size > MAX_CROISSANT_BYTES:
            return False
        with open(open_regular(path), "rb") as handle:
            head = handle.read(_SNIFF_BYTES)
    except OSError:
        return False  # the shard readers report it with their rule
    if not head.lstrip().startswith(b"{") or (b"@context" not in head and size > len(head)):
        return False
    try:
        document = _parse(path)
    except (ValueError, InputError) as exc:
        if isinstance(exc, IngestRuleError) and exc.rule_id == "nesting-depth":
            raise
        return False
    return isinstance(document, dict) and "@context" in document and any(
        "mlcommons.org/croissant" in str(value) for value in _values(document, "conformsTo"))


def read_croissant(path: Path) -> dict[str, Any]:
    """The Croissant file's JSON object (CroissantError when it is not one)."""
    try:
        document = _parse(path)
    except ValueError as exc:
        raise CroissantError(path, "croissant-json", f"not JSON ({exc})") from exc
    if not isinstance(document, dict):
        raise CroissantError(path, "croissant-json", "not a JSON object")
    return document


def _parse(path: Path) -> Any:
    """The file's JSON. Python's parser recurses, and stops at its recursion limit: a
    file nested that deep is refused with the rule the JSONL readers use for it."""
    try:
        return json.loads(read_regular(path))
    except RecursionError as exc:
        raise IngestRuleError(path, "nesting-depth", "JSON nested too deep to parse") \
            from exc


def distribution_files(path: Path) -> list[DocumentFiles]:
    """The document files the distribution names, in its order."""
    document = read_croissant(path)
    entries = _values(document, "distribution")
    if not entries:
        raise CroissantError(path, "croissant-distribution",
                             "no distribution: nothing says where the documents are")
    base = path.resolve().parent
    planned: list[DocumentFiles] = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise CroissantError(path, "croissant-distribution", f"entry {entry!r} is not "
                                 "an object")
        planned.extend(_entry_files(path, base, entry))
    if not planned:
        raise CroissantError(path, "croissant-distribution", "the distribution names no "
                             "Parquet, JSON Lines or text files")
    return planned


def _entry_files(path: Path, base: Path, entry: dict[str, Any]) -> list[DocumentFiles]:
    kind = _type_name(entry)
    label = f"distribution {entry.get('@id') or _first(entry, 'name') or '?'}"
    formats = [str(f).lower().split(";")[0].strip() for f in _values(entry, "encodingFormat")]
    if _values(entry, "containedIn"):
        raise CroissantError(path, "croissant-remote", f"{label} is inside "
                             f"{_values(entry, 'containedIn')}: an archive or repository "
                             "lineage does not unpack or fetch; unpack it and describe the "
                             "local files")
    if any(f.startswith("git+") for f in formats) or any(f in ARCHIVE_FORMATS for f in formats):
        raise CroissantError(path, "croissant-remote", f"{label} is an archive or "
                             "repository: unpack it and describe the local files")
    family = _family(path, label, formats)
    if kind == "FileObject":
        local = _local_path(path, base, label, _first(entry, "contentUrl"))
        _check_file(path, label, local, entry)
        if family == "files":
            return [DocumentFiles(local.parent, "files", local.name, (local.name,))]
        inside = local.resolve().is_relative_to(base)
        name = local.resolve().relative_to(base).as_posix() if inside else local.name
        return [DocumentFiles(local, family, name)]
    if kind == "FileSet":
        return _file_set(path, base, label, family, entry)
    raise CroissantError(path, "croissant-distribution", f"{label} has type {kind!r}, "
                         "not FileObject or FileSet")


def _family(path: Path, label: str, formats: list[str]) -> str:
    for family, names in (("parquet", PARQUET_FORMATS), ("jsonl", JSONL_FORMATS),
                          ("files", TEXT_FORMATS)):
        if any(f in names for f in formats):
            return family
    raise CroissantError(path, "croissant-format", f"{label} has encodingFormat "
                         f"{formats or 'none'}: lineage reads Parquet "
                         f"({PARQUET_FORMATS[0]}), JSON Lines ({JSONL_FORMATS[0]}) and "
                         "text/plain files")


def _local_path(path: Path, base: Path, label: str, url: Any) -> Path:
    """The file a contentUrl names: a path relative to the Croissant file's folder, an
    absolute path, or a file:// URI. Anything else would need a download."""
    if not isinstance(url, str) or not url:
        raise CroissantError(path, "croissant-distribution", f"{label} has no contentUrl")
    parts = urlsplit(url)
    if parts.scheme.lower() == "file":
        if parts.netloc not in ("", "localhost"):
            raise CroissantError(path, "croissant-remote", f"{label}: {url} names another "
                                 "host; lineage never fetches")
        return Path(unquote(parts.path))
    if parts.scheme and len(parts.scheme) > 1:  # one letter: a Windows drive, not a scheme
        raise CroissantError(path, "croissant-remote", f"{label}: {url} would need a "
                             "download, and lineage never fetches: download it and give "
                             "its local path as the contentUrl")
    return base / url


def _check_file(path: Path, label: str, local: Path, entry: dict[str, Any]) -> None:
    """The checksums and the size in bytes the entry states, against the local file."""
    if not local.exists():
        raise InputError(local, f"no such file (named by {label} of {path})")
    if stat.S_ISDIR(stat_input(local).st_mode):  # special files: their own rule
        raise CroissantError(local, "croissant-distribution", f"{label} names a folder: "
                             "describe its files with a FileSet")
    size = _bytes_of(_first(entry, "contentSize"))
    if size is not None and size != local.stat().st_size:
        raise CroissantError(local, "croissant-checksum", f"{label} states {size} bytes, "
                             f"the file has {local.stat().st_size}")
    for name in ("sha256", "md5"):
        if (want := _first(entry, name)) is None:
            continue
        digest = _digest(local, name)
        if str(want).lower() not in (digest.hex(), base64.b64encode(digest).decode().lower()):
            raise CroissantError(local, "croissant-checksum", f"{label} states {name} "
                                 f"{want}, the file's is {digest.hex()}")


def _digest(path: Path, algorithm: str) -> bytes:
    """The file's digest, read in chunks (a Parquet part may be gigabytes)."""
    hasher = hashlib.new(algorithm)
    with open(open_regular(path), "rb") as handle:
        while chunk := handle.read(_CHUNK):
            hasher.update(chunk)
    return hasher.digest()


def _bytes_of(value: Any) -> int | None:
    """A contentSize in bytes ('22913', '22913 B'); None for other units (kB, MB), which
    are rounded and cannot be checked exactly."""
    match = re.fullmatch(r"\s*(\d+)\s*(B|bytes?)?\s*", str(value)) if value is not None else None
    return int(match.group(1)) if match else None


def _file_set(path: Path, base: Path, label: str, family: str,
              entry: dict[str, Any]) -> list[DocumentFiles]:
    includes = [str(g) for g in _values(entry, "includes")]
    excludes = [str(g) for g in _values(entry, "excludes")]
    if not includes:
        raise CroissantError(path, "croissant-distribution", f"{label} has no includes")
    if family == "files":
        root = _glob_root(base, includes)
        return [DocumentFiles(root, "files", root.name,
                              tuple(os.path.relpath(base / g, root) for g in includes),
                              tuple(os.path.relpath(base / g, root) for g in excludes))]
    found = [p for p in _walk(_glob_root(base, includes))
             if _matches(p.relative_to(base).as_posix(), includes, excludes)]
    if not found:
        raise CroissantError(path, "croissant-distribution", f"{label}: no file matches "
                             f"{includes} in {base}")
    return [DocumentFiles(p, family, p.relative_to(base).as_posix()) for p in found]


def _walk(root: Path) -> list[Path]:
    """Every file below `root`, in sorted path order (links to folders not followed)."""
    found: list[Path] = []
    for folder, dirnames, filenames in os.walk(root):
        dirnames.sort()
        found.extend(Path(folder) / name for name in sorted(filenames))
    return sorted(found, key=lambda p: p.as_posix().encode("utf-8"))


def _matches(relative: str, includes: list[str], excludes: list[str]) -> bool:
    """mlcroissant's rule: a path is in a FileSet when it matches an include glob and no
    exclude glob, `*` crossing '/' (fnmatch, case-sensitive)."""
    return (any(fnmatch.fnmatchcase(relative, g) for g in includes)
            and not any(fnmatch.fnmatchcase(relative, g) for g in excludes))


def _glob_root(base: Path, includes: list[str]) -> Path:
    """The deepest folder every glob starts in: the documents' doc_ids are relative to
    it, as for `lineage ingest corpus FOLDER`."""
    heads = []
    for glob in includes:
        literal = []
        for part in Path(glob).parts[:-1]:
            if _GLOB.search(part):
                break
            literal.append(part)
        heads.append(base.joinpath(*literal))
    return Path(os.path.commonpath(heads))


def _type_name(entry: dict[str, Any]) -> str:
    kinds = [str(k).rsplit(":", 1)[-1].rsplit("/", 1)[-1] for k in _values(entry, "@type")]
    return next((k for k in kinds if k in ("FileObject", "FileSet")), ",".join(kinds))


def _values(node: dict[str, Any], name: str) -> list[Any]:
    """A property's values under its compact name or a cr:/sc:/dct: prefixed one; a
    single value is a list of one."""
    for key in (name, f"cr:{name}", f"sc:{name}", f"dct:{name}", f"schema:{name}"):
        if key in node:
            value = node[key]
            return list(value) if isinstance(value, list) else [value]
    return []


def _first(node: dict[str, Any], name: str) -> Any:
    values = _values(node, name)
    return values[0] if values else None
