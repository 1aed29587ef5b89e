"""Turn the PATH arguments of a corpus ingest into a list of typed input shards.

A directory is a corpus of files (one file, one document) unless `--format` says its
files are JSONL or Parquet shards. A file is a JSONL or Parquet shard by its name, and a
ready manifest when its first record (JSONL) or its columns (Parquet) carry
`content_hash` and no `text`.
"""

from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass
from pathlib import Path

from lineage.errors import InputError, UsageError

FORMATS = ("auto", "files", "jsonl", "parquet", "manifest")
JSONL_SUFFIXES = (".jsonl", ".ndjson", ".jsonl.gz", ".json.gz", ".jsonl.zst", ".json.zst")
PARQUET_SUFFIXES = (".parquet",)


@dataclass(frozen=True)
class DirectoryInput:
    root: Path  # one file, one document; doc_id = path relative to root


@dataclass(frozen=True)
class ShardInput:
    path: Path
    kind: str  # "jsonl" | "parquet" | "manifest-jsonl" | "manifest-parquet"
    name: str  # the shard's name inside its argument: prefix of generated doc_ids


Input = DirectoryInput | ShardInput


def plan_inputs(paths: list[Path], fmt: str = "auto") -> list[Input]:
    """Expand and classify every PATH; errors name the path that cannot be read."""
    if fmt not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if not paths:
        raise UsageError("give at least one PATH to ingest")
    planned: list[Input] = []
    for path in paths:
        if not path.exists():
            raise InputError(path, "no such file or directory")
        if path.is_dir():
            if fmt in ("auto", "files"):
                planned.append(DirectoryInput(path))
            else:
                planned.extend(_shards_in(path, fmt))
        else:
            planned.append(_classify(path, path.name, fmt))
    return planned


def _shards_in(folder: Path, fmt: str) -> list[ShardInput]:
    """Shard files below `folder`, in sorted relative-path order."""
    found: list[ShardInput] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for filename in sorted(filenames):
            path = Path(dirpath) / filename
            if filename.startswith(".") or not _has_shard_suffix(filename, fmt):
                continue
            found.append(_classify(path, path.relative_to(folder).as_posix(), fmt))
    if not found:
        raise InputError(folder, f"no {fmt} shards found in this directory")
    return found


def _has_shard_suffix(name: str, fmt: str) -> bool:
    lowered = name.lower()
    if fmt == "jsonl":
        return lowered.endswith(JSONL_SUFFIXES)
    if fmt == "parquet":
        return lowered.endswith(PARQUET_SUFFIXES)
    return lowered.endswith(JSONL_SUFFIXES + PARQUET_SUFFIXES)


def _classify(path: Path, name: str, fmt: str) -> ShardInput:
    lowered = path.name.lower()
    if lowered.endswith(JSONL_SUFFIXES):
        family = "jsonl"
    elif lowered.endswith(PARQUET_SUFFIXES):
        family = "parquet"
    elif fmt in ("jsonl", "parquet"):
        family = fmt
    else:
        raise InputError(
            path,
            "unknown shard type: expected .jsonl[.gz|.zst], .json.gz or .parquet "
            "(or pass a directory of files, or --format)",
        )
    if fmt == "files":
        raise UsageError(f"--format files takes directories, but {path} is a file")
    is_manifest = fmt == "manifest" or (fmt == "auto" and _looks_like_manifest(path, family))
    kind = f"manifest-{family}" if is_manifest else family
    return ShardInput(path, kind, name)


def _looks_like_manifest(path: Path, family: str) -> bool:
    if family == "parquet":
        import pyarrow.parquet as pq

        try:
            names = set(pq.read_schema(path).names)
        except Exception as exc:
            raise InputError(path, f"not a readable Parquet file ({exc})") from exc
        return "content_hash" in names and "text" not in names
    first = _first_jsonl_record(path)
    return isinstance(first, dict) and "content_hash" in first and "text" not in first


def _first_jsonl_record(path: Path) -> object:
    try:
        with open_text_stream(path) as handle:
            for raw in handle:
                if raw.strip():
                    return json.loads(raw)
    except (OSError, ValueError, EOFError) as exc:
        raise InputError(path, f"cannot read the first record ({exc})", where="1") from exc
    return None


def open_text_stream(path: Path):  # type: ignore[no-untyped-def]
    """A binary line iterator over a plain, gzip or zstd file."""
    lowered = path.name.lower()
    if lowered.endswith(".gz"):
        return gzip.open(path, "rb")
    if lowered.endswith(".zst"):
        import io

        import zstandard

        raw = open(path, "rb")  # noqa: SIM115 - closed with the wrapper
        return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(raw, closefd=True))
    return open(path, "rb")  # noqa: SIM115
