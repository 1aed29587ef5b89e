"""Turn the PATH arguments of a corpus ingest into a list of typed input shards.

A directory is a corpus of files (one file, one document) unless `--format` says its
files are JSONL or Parquet shards. A file is a JSONL or Parquet shard by its name, and a
ready manifest when its first record (JSONL) or its columns (Parquet) carry
`content_hash` and no `text`. A Croissant file (by its content) stands for the files its
distribution names (ingest/readers/croissant.py).
"""

from __future__ import annotations

import gzip
import io
import json
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from lineage.errors import InputError, UsageError
from lineage.ingest.input_rules import (
    IngestRuleError,
    bounded_lines,
    compressed_error,
    depth_error,
    is_compressed,
    open_regular,
    stat_input,
)
from lineage.ingest.step_log import depth_over
from lineage.ingest.walk import DEFAULT_LINKS, WalkCounts, check_links_mode, walk_folder
from lineage.runs.chain import MAX_DEPTH

FORMATS = ("auto", "files", "jsonl", "parquet", "manifest")
JSONL_SUFFIXES = (".jsonl", ".ndjson", ".jsonl.gz", ".json.gz", ".jsonl.zst", ".json.zst")
PARQUET_SUFFIXES = (".parquet",)


@dataclass(frozen=True)
class DirectoryInput:
    root: Path  # one file, one document; doc_id = path relative to root
    # From a Croissant FileSet: globs a doc_id must match one of (fnmatch, '*' crosses
    # '/'; none: every file) and must match none of.
    includes: tuple[str, ...] = ()
    excludes: tuple[str, ...] = ()
    croissant: Path | None = None  # the Croissant file that named it


@dataclass(frozen=True)
class ShardInput:
    path: Path
    kind: str  # "jsonl" | "parquet" | "manifest-jsonl" | "manifest-parquet"
    name: str  # the shard's name inside its argument: prefix of generated doc_ids
    croissant: Path | None = None  # the Croissant file that named it


Input = DirectoryInput | ShardInput


def plan_inputs(paths: list[Path], fmt: str = "auto", *, links: str = DEFAULT_LINKS,
                counts: WalkCounts | None = None) -> list[Input]:
    """Expand and classify every PATH; errors name the path that cannot be read. What the
    walks of shard folders left out is added to `counts`."""
    if fmt not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    check_links_mode(links)
    if not paths:
        raise UsageError("give at least one PATH to ingest")
    planned: list[Input] = []
    for path in paths:
        if not path.exists() and not path.is_symlink():
            raise InputError(path, "no such file or directory")
        if stat.S_ISDIR(stat_input(path).st_mode):
            if fmt in ("auto", "files"):
                planned.append(DirectoryInput(path))
            else:
                planned.extend(_shards_in(path, fmt, links, counts or WalkCounts()))
        elif fmt == "auto" and _is_croissant(path):
            planned.extend(_croissant_inputs(path))
        else:
            planned.append(_classify(path, path.name, fmt))
    return planned


def _is_croissant(path: Path) -> bool:
    from lineage.ingest.readers.croissant import looks_like_croissant

    return not path.name.lower().endswith(PARQUET_SUFFIXES) and looks_like_croissant(path)


def _croissant_inputs(path: Path) -> list[Input]:
    """The shards and folders a Croissant file's distribution names."""
    from lineage.ingest.readers.croissant import distribution_files

    planned: list[Input] = []
    for files in distribution_files(path):
        stat_input(files.path)
        if files.family == "files":
            planned.append(DirectoryInput(files.path, files.includes, files.excludes, path))
        else:
            manifest = _looks_like_manifest(files.path, files.family)
            kind = f"manifest-{files.family}" if manifest else files.family
            planned.append(ShardInput(files.path, kind, files.name, path))
    return planned


def _shards_in(folder: Path, fmt: str, links: str, counts: WalkCounts) -> list[ShardInput]:
    """Shard files below `folder` (ingest/walk.py), in sorted relative-path order, each
    named by that path."""
    found = walk_folder(folder, links=links, counts=counts,
                        wanted=lambda name: _has_shard_suffix(name, fmt))
    found.sort(key=lambda item: item.rel.encode("utf-8"))
    shards = []
    for item in found:
        stat_input(Path(item.path))
        shards.append(_classify(Path(item.path), item.rel, fmt))
    if not shards:
        raise InputError(folder, f"no {fmt} shards found in this directory")
    return shards


def _has_shard_suffix(name: str, fmt: str) -> bool:
    lowered = name.lower()
    if fmt == "jsonl":
        return lowered.endswith(JSONL_SUFFIXES)
    if fmt == "parquet":
        return lowered.endswith(PARQUET_SUFFIXES)
    return lowered.endswith(JSONL_SUFFIXES + PARQUET_SUFFIXES)


def _classify(path: Path, name: str, fmt: str) -> ShardInput:
    lowered = name.lower()
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
            for raw in bounded_lines(handle, path):
                if raw.strip():
                    if depth_over(raw.decode("utf-8", "replace"), MAX_DEPTH):
                        raise depth_error(path, "line 1")
                    return json.loads(raw)
    except IngestRuleError:
        raise
    except (OSError, ValueError, EOFError) as exc:
        if is_compressed(path) and not isinstance(exc, ValueError | PermissionError):
            raise compressed_error(path, exc) from exc
        raise InputError(path, f"cannot read the first record ({exc})", where="1") from exc
    except Exception as exc:
        if type(exc).__name__ == "ZstdError":
            raise compressed_error(path, exc) from exc
        raise
    return None


def open_text_stream(path: Path) -> BinaryIO:
    """A binary line iterator over a plain, gzip or zstd file."""
    lowered = path.name.lower()
    raw = open(open_regular(path), "rb")  # noqa: SIM115 - closed with the wrapper
    if lowered.endswith(".gz"):
        stream = gzip.GzipFile(fileobj=raw, mode="rb")
        stream.myfileobj = raw  # type: ignore[assignment] # closed with the stream
        return stream  # type: ignore[return-value]
    if lowered.endswith(".zst"):
        return io.BufferedReader(_ZstdFrames(raw), buffer_size=1 << 20)
    return raw


class _ZstdFrames(io.RawIOBase):
    """Every frame of a zstd file, each checked to its end (zstandard's stream reader
    stops silently at a frame cut short); a frame's content checksum, when it has one,
    is checked by the decompressor."""

    def __init__(self, raw: BinaryIO) -> None:
        import zstandard

        super().__init__()
        self._raw = raw
        self._zstd = zstandard.ZstdDecompressor()
        self._frame = self._zstd.decompressobj()
        self._started = False
        self._pending = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            chunk = self._raw.read(1 << 20)
            if not chunk:
                if self._started and not self._frame.eof:
                    raise EOFError("the last zstd frame is cut short")
                return 0
            self._pending = memoryview(self._decompress(chunk))
        count = min(len(buffer), len(self._pending))
        buffer[:count] = self._pending[:count]
        self._pending = self._pending[count:]
        return count

    def _decompress(self, data: bytes) -> bytes:
        out = bytearray()
        while data:
            if self._frame.eof:
                self._frame = self._zstd.decompressobj()
            self._started = True
            out += self._frame.decompress(data)
            data = self._frame.unused_data if self._frame.eof else b""
        return bytes(out)

    def close(self) -> None:
        self._raw.close()
        super().close()
