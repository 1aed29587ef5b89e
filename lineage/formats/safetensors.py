"""Structure checks for safetensors files and model folders: headers only, no tensor is loaded.

Layout: an 8-byte little-endian u64 N, N bytes of JSON header, then the data region. Each
tensor's `data_offsets` are relative to the start of the data region (file offset 8 + N),
not to the start of the file. Reads are bounded: the prefix, at most `max_header_bytes` of
header, and a model index of at most the same size. A pass says the structure is sound; it
says nothing about whether the bytes match the source (checksums) or the model runs.

Every failure names one rule id:

    no-folder         the model folder does not exist or is not a directory
    no-safetensors    the folder holds no *.safetensors file
    symlinked-shard   a *.safetensors entry is a symbolic link (rejected, never followed,
                      unless the caller vetted it: a hub cache snapshot's link to its blob)
    unreadable        not a regular file, or the operating system refused to read it
    short-prefix      the file is shorter than the 8-byte header length prefix
    header-length     N is 0, runs beyond the end of the file, or exceeds the local cap
                      (`max_header_bytes`, 16 MiB by default: a policy, not a format limit)
    header-json       the header is not UTF-8, not JSON, has a duplicate key, NaN/Infinity,
                      nesting deeper than 64, or is not a JSON object
    metadata          `__metadata__` is not an object mapping strings to strings (null is
                      read as absent, like the reference reader does)
    tensor-entry      an entry is not an object, lacks or adds keys beyond dtype / shape /
                      data_offsets, or `__metadata__` holds a tensor entry (the name is
                      reserved for metadata)
    dtype             dtype is not one of DTYPE_BITS
    shape             shape is not a list of non-negative integers below 2**64
    offsets           data_offsets is not two integers 0 <= start <= end <= data size
    dtype-shape-size  elements x dtype bits / 8 != end - start, the element count or bit
                      count overflows u64 (what the reference reader computes in), or a
                      sub-byte dtype does not fill whole bytes
    coverage          the sorted ranges do not tile the data region: a gap, an overlap, or
                      trailing bytes after the last tensor
    duplicate-tensor  one tensor name appears in two shards
    index-json        model.safetensors.index.json is unreadable, not strict JSON, or has no
                      `weight_map` object of string -> string
    index-path        an index entry is absolute, contains `..`, or leaves the folder through
                      a symbolic link
    index-mismatch    the index's weight_map differs from the actual name -> shard mapping
    missing-index     several shards and no model.safetensors.index.json

`read_header` raises `SafetensorsInputError` (an `InputError`) for the first violated rule
in a file; `check_file` and `check_folder` report instead of raising.
"""

from __future__ import annotations

import os
import posixpath
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, BinaryIO, NoReturn

from lineage.errors import InputError, RuleError
from lineage.formats.messages import json_type as _json_type
from lineage.formats.messages import show as _show
from lineage.formats.messages import show_value as _show_value
from lineage.formats.strict_json import loads_strict
from lineage.userfiles import open_regular, read_regular

__all__ = [
    "DEFAULT_MAX_HEADER_BYTES",
    "DTYPE_BITS",
    "INDEX_NAME",
    "RULES",
    "SafetensorsHeader",
    "SafetensorsInputError",
    "StructureError",
    "TensorInfo",
    "check_file",
    "check_folder",
    "read_header",
]

DEFAULT_MAX_HEADER_BYTES = 16 * 2**20
INDEX_NAME = "model.safetensors.index.json"
PREFIX_BYTES = 8
U64_MAX = 2**64 - 1
TENSOR_KEYS = frozenset({"dtype", "shape", "data_offsets"})
MAX_LISTED_DIFFERENCES = 5

# Bits per element, as the safetensors 0.8 reader defines them (Dtype::bitsize in
# safetensors/src/tensor.rs, plus the two FNUZ variants; checked against the installed
# reader). Sub-byte types are packed: a tensor's total bit count must be a whole number of bytes.
DTYPE_BITS: dict[str, int] = {
    "BOOL": 8,
    "F4": 4,
    "F6_E2M3": 6,
    "F6_E3M2": 6,
    "U8": 8,
    "I8": 8,
    "F8_E5M2": 8,
    "F8_E4M3": 8,
    "F8_E8M0": 8,
    "F8_E4M3FNUZ": 8,
    "F8_E5M2FNUZ": 8,
    "I16": 16,
    "U16": 16,
    "F16": 16,
    "BF16": 16,
    "I32": 32,
    "U32": 32,
    "F32": 32,
    "C64": 64,
    "F64": 64,
    "I64": 64,
    "U64": 64,
}

RULES = (
    "no-folder",
    "no-safetensors",
    "symlinked-shard",
    "unreadable",
    "short-prefix",
    "header-length",
    "header-json",
    "metadata",
    "tensor-entry",
    "dtype",
    "shape",
    "offsets",
    "dtype-shape-size",
    "coverage",
    "duplicate-tensor",
    "index-json",
    "index-path",
    "index-mismatch",
    "missing-index",
)


@dataclass(frozen=True)
class TensorInfo:
    name: str
    dtype: str
    shape: tuple[int, ...]
    start: int  # relative to the data region, like data_offsets
    end: int

    @property
    def elements(self) -> int:
        count = 1
        for dim in self.shape:
            count *= dim
        return count


@dataclass
class SafetensorsHeader:
    path: str
    header_len: int
    data_size: int
    metadata: dict[str, str] | None
    tensors: list[TensorInfo]

    @property
    def parameters(self) -> int:
        return sum(t.elements for t in self.tensors)


@dataclass(frozen=True)
class StructureError:
    file: str
    rule: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"file": self.file, "rule": self.rule, "message": self.message}


class SafetensorsInputError(RuleError):
    """A rule broken by a safetensors file."""


# ---------------------------------------------------------------------------------------------
# One file


def read_header(
    path: Path | str, *, max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
) -> SafetensorsHeader:
    """Read and check one file's prefix and header; raise on the first violated rule."""
    path = Path(path)
    file_size, raw = _read_prefix_and_header(path, max_header_bytes)
    header_len = len(raw)
    data_size = file_size - PREFIX_BYTES - header_len
    document = _parse_header_json(path, raw)
    metadata = _parse_metadata(path, document)
    tensors = [
        _parse_entry(path, name, entry, data_size)
        for name, entry in document.items()
        if name != "__metadata__"
    ]
    _check_coverage(path, tensors, data_size)
    return SafetensorsHeader(str(path), header_len, data_size, metadata, tensors)


def check_file(
    path: Path | str, *, max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
) -> tuple[SafetensorsHeader | None, list[StructureError]]:
    """Like read_header, but reports the violated rule instead of raising."""
    try:
        return read_header(path, max_header_bytes=max_header_bytes), []
    except SafetensorsInputError as exc:
        return None, [StructureError(str(path), exc.rule_id, exc.message)]


def _fail(path: Path, rule_id: str, message: str, where: str | None = None) -> NoReturn:
    raise SafetensorsInputError(path, rule_id, message, where=where)


def _read_prefix_and_header(path: Path, max_header_bytes: int) -> tuple[int, bytes]:
    """Return (file size, header bytes), reading no more than 8 + min(N, cap) bytes."""
    with _open(path, "safetensors file") as handle:
        fd = handle.fileno()
        size = os.fstat(fd).st_size
        if size < PREFIX_BYTES:
            _fail(path, "short-prefix", f"file is {size} bytes, shorter than the 8-byte prefix")
        (header_len,) = struct.unpack("<Q", _read_exact(path, fd, 0, PREFIX_BYTES))
        _check_header_length(path, header_len, size, max_header_bytes)
        return size, _read_exact(path, fd, PREFIX_BYTES, header_len)


def _open(path: Path, what: str, max_bytes: int | None = None) -> BinaryIO:
    """Opened without waiting on a FIFO; anything but a regular file is `unreadable`."""
    try:
        return open_regular(path, what=what, max_bytes=max_bytes)
    except InputError as exc:
        _fail(path, "unreadable", exc.rule)
    except ValueError as exc:  # a NUL byte in the path
        _fail(path, "unreadable", f"cannot open ({exc})")


def _read_exact(path: Path, fd: int, offset: int, count: int) -> bytes:
    chunks: list[bytes] = []
    while count > 0:
        try:
            chunk = os.pread(fd, min(count, 2**20), offset)
        except OSError as exc:
            _fail(path, "unreadable", f"read failed at byte {offset} ({exc.strerror or exc})")
        if not chunk:  # the file shrank under us, e.g. a download still being written
            _fail(path, "header-length", f"file ended at byte {offset} while reading the header")
        chunks.append(chunk)
        offset += len(chunk)
        count -= len(chunk)
    return b"".join(chunks)


def _check_header_length(path: Path, header_len: int, size: int, cap: int) -> None:
    available = size - PREFIX_BYTES
    if header_len == 0:
        _fail(path, "header-length", "header length is 0 (a header is at least `{}`)")
    if header_len > available:
        _fail(
            path,
            "header-length",
            f"header length {header_len} runs beyond the file: only {available} bytes follow "
            "the prefix (interrupted download, or not a safetensors file)",
        )
    if header_len > cap:
        _fail(
            path,
            "header-length",
            f"header length {header_len} exceeds the local cap of {cap} bytes (a local "
            "policy, not a format limit nor a sign of an unfinished download: raise it with "
            "--max-header-mib after checking where the file came from)",
        )


def _parse_header_json(path: Path, raw: bytes) -> dict[str, Any]:
    try:
        document = loads_strict(raw, source=str(path))
    except InputError as exc:
        where = f"header {exc.where}" if exc.where else None
        _fail(path, "header-json", exc.rule, where)
    if not isinstance(document, dict):
        _fail(path, "header-json", f"header is a JSON {_json_type(document)}, not an object")
    return document


def _parse_metadata(path: Path, document: dict[str, Any]) -> dict[str, str] | None:
    value = document.get("__metadata__")
    if value is None:  # absent, or null: the reference reader reads both as "no metadata"
        return None
    if not isinstance(value, dict):
        _fail(path, "metadata", f"__metadata__ is a JSON {_json_type(value)}, not an object")
    if _looks_like_tensor(value):
        _fail(
            path,
            "tensor-entry",
            "__metadata__ holds a tensor entry; the name is reserved for string metadata",
        )
    for key, item in value.items():
        if not isinstance(item, str):
            _fail(
                path,
                "metadata",
                f"__metadata__[{_show(key)}] is a JSON {_json_type(item)}, not a string",
            )
    return value


def _looks_like_tensor(value: dict[str, Any]) -> bool:
    # String-valued "dtype"/"shape" keys are legal metadata; lists for shape/offsets are not.
    return TENSOR_KEYS <= value.keys() and not all(isinstance(v, str) for v in value.values())


def _parse_entry(path: Path, name: str, entry: object, data_size: int) -> TensorInfo:
    label = f"tensor {_show(name)}"
    if not isinstance(entry, dict):
        _fail(path, "tensor-entry", f"{label} is a JSON {_json_type(entry)}, not an object")
    _check_entry_keys(path, label, entry)
    dtype = entry["dtype"]
    if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
        _fail(path, "dtype", f"{label} has unknown dtype {_show_value(dtype)}")
    shape = _parse_shape(path, label, entry["shape"])
    start, end = _parse_offsets(path, label, entry["data_offsets"], data_size)
    _check_size(path, label, dtype, shape, end - start)
    return TensorInfo(name, dtype, shape, start, end)


def _check_entry_keys(path: Path, label: str, entry: dict[str, Any]) -> None:
    missing = sorted(TENSOR_KEYS - entry.keys())
    extra = sorted(entry.keys() - TENSOR_KEYS)
    if missing:
        _fail(path, "tensor-entry", f"{label} lacks key(s): {', '.join(missing)}")
    if extra:
        shown = ", ".join(_show(key) for key in extra[:MAX_LISTED_DIFFERENCES])
        _fail(path, "tensor-entry", f"{label} has unexpected key(s): {shown}")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)  # JSON true is not 1


def _parse_shape(path: Path, label: str, shape: object) -> tuple[int, ...]:
    if not isinstance(shape, list):
        _fail(path, "shape", f"{label} shape is a JSON {_json_type(shape)}, not a list")
    for axis, dim in enumerate(shape):
        if not _is_int(dim) or not 0 <= dim <= U64_MAX:
            _fail(
                path,
                "shape",
                f"{label} shape[{axis}] is {_show_value(dim)}, not an integer in 0..2**64-1",
            )
    return tuple(shape)


def _parse_offsets(path: Path, label: str, offsets: object, data_size: int) -> tuple[int, int]:
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(map(_is_int, offsets)):
        _fail(
            path,
            "offsets",
            f"{label} data_offsets is {_show_value(offsets)}, not a list of two integers",
        )
    start, end = offsets
    if start < 0 or end < 0:
        _fail(path, "offsets", f"{label} data_offsets {offsets} are negative")
    if start > end:
        _fail(path, "offsets", f"{label} data_offsets start {start} > end {end}")
    if end > data_size:
        _fail(
            path,
            "offsets",
            f"{label} ends at data byte {end}, beyond the data region of {data_size} bytes "
            "(offsets count from the end of the header; a short file means an interrupted copy)",
        )
    return start, end


def _check_size(path: Path, label: str, dtype: str, shape: tuple[int, ...], nbytes: int) -> None:
    bits = DTYPE_BITS[dtype]
    elements = _element_count(shape)
    if elements is None or elements * bits > U64_MAX:
        _fail(
            path,
            "dtype-shape-size",
            f"{label} shape {_show_value(list(shape))} overflows a u64 element or bit count",
        )
    total_bits = elements * bits
    if total_bits % 8:
        _fail(
            path,
            "dtype-shape-size",
            f"{label} holds {elements} {dtype} elements = {total_bits} bits, not whole bytes",
        )
    if total_bits // 8 != nbytes:
        _fail(
            path,
            "dtype-shape-size",
            f"{label} is {dtype} {_show_value(list(shape))} = {total_bits // 8} bytes, "
            f"but data_offsets span {nbytes} bytes",
        )


def _element_count(shape: tuple[int, ...]) -> int | None:
    """Product of dims in order, or None once it passes u64 (as the reference reader fails)."""
    count = 1
    for dim in shape:
        count *= dim
        if count > U64_MAX:  # stop before multiplying big numbers any further
            return None
    return count


def _check_coverage(path: Path, tensors: list[TensorInfo], data_size: int) -> None:
    position = 0
    previous: TensorInfo | None = None
    for tensor in sorted(tensors, key=lambda t: (t.start, t.end, t.name)):
        if tensor.start > position:
            _fail(
                path,
                "coverage",
                f"gap: data bytes {position}..{tensor.start} belong to no tensor "
                f"(next is {_show(tensor.name)})",
            )
        if tensor.start < position and previous is not None:  # previous is set once position > 0
            _fail(
                path,
                "coverage",
                f"overlap: {_show(tensor.name)} starts at data byte {tensor.start}, inside "
                f"{_show(previous.name)} ({previous.start}..{previous.end})",
            )
        position = tensor.end
        previous = tensor
    if position < data_size:
        _fail(
            path,
            "coverage",
            f"trailing bytes: data bytes {position}..{data_size} "
            f"({data_size - position} bytes) after the last tensor belong to no tensor",
        )


# ---------------------------------------------------------------------------------------------
# A model folder


def check_folder(
    folder: Path | str, *, max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES,
    vetted_links: Mapping[str, Path] | None = None,
) -> dict[str, Any]:
    """Check every *.safetensors in a folder and the index against them; never raises.

    `vetted_links` maps names in the folder to the regular files a caller has vetted them
    to link to (a hub cache snapshot's blobs, see `hf_cache`): those links are read
    through the vetted file. Every other symbolic link is still refused.
    """
    folder = Path(folder)
    report = _Report(vetted_links)
    if not folder.is_dir():
        problem = "not a directory" if os.path.lexists(folder) else "no such directory"
        report.add(str(folder), "no-folder", problem)
        return report.result(files=0)
    shards = _list_shards(folder, report)
    if shards is None:
        return report.result(files=0)
    names = _read_shards(folder, shards, report, max_header_bytes)
    _check_index(folder, shards, names, report, max_header_bytes)
    return report.result(files=len(shards))


class _Report:
    def __init__(self, vetted: Mapping[str, Path] | None = None) -> None:
        self.vetted = dict(vetted or {})  # name in the folder -> the file it links to
        self.errors: list[StructureError] = []
        self.tensors = 0
        self.parameters = 0
        self.failed: set[str] = set()  # shard names whose tensors are unknown

    def add(self, file: str, rule: str, message: str) -> None:
        self.errors.append(StructureError(file, rule, message))

    def result(self, *, files: int) -> dict[str, Any]:
        return {
            "ok": not self.errors,
            "files": files,
            "tensors": self.tensors,
            "parameters": self.parameters,
            "errors": [error.as_dict() for error in self.errors],
        }


def _list_shards(folder: Path, report: _Report) -> list[str] | None:
    try:
        with os.scandir(folder) as listing:
            entries = sorted(listing, key=lambda entry: entry.name)
    except OSError as exc:
        report.add(str(folder), "no-folder", f"cannot list the directory ({exc.strerror or exc})")
        return None
    shards = [entry.name for entry in entries if entry.name.endswith(".safetensors")]
    if not shards:
        report.add(str(folder), "no-safetensors", "no *.safetensors file in this directory")
        return None
    return shards


def _read_shards(
    folder: Path, shards: list[str], report: _Report, max_header_bytes: int
) -> dict[str, str]:
    """Check each shard; return tensor name -> shard name for the shards that passed."""
    owner: dict[str, str] = {}
    for shard in shards:
        path = folder / shard
        if path.is_symlink() and shard not in report.vetted:
            report.add(
                str(path),
                "symlinked-shard",
                "shard is a symbolic link (a hub cache snapshot?); copy the real file in",
            )
            report.failed.add(shard)
            continue
        header, errors = check_file(report.vetted.get(shard, path),
                                    max_header_bytes=max_header_bytes)
        report.errors.extend(StructureError(str(path), e.rule, e.message) for e in errors)
        if header is None:
            report.failed.add(shard)
            continue
        report.tensors += len(header.tensors)
        report.parameters += header.parameters
        _claim_names(folder, shard, header.tensors, owner, report)
    return owner


def _claim_names(
    folder: Path, shard: str, tensors: Iterable[TensorInfo], owner: dict[str, str], report: _Report
) -> None:
    for tensor in tensors:
        first = owner.setdefault(tensor.name, shard)
        if first != shard:
            report.add(
                str(folder / shard),
                "duplicate-tensor",
                f"tensor {_show(tensor.name)} is also in {first}",
            )


def _check_index(
    folder: Path, shards: list[str], owner: dict[str, str], report: _Report, cap: int
) -> None:
    index_path = folder / INDEX_NAME
    if not os.path.lexists(index_path):
        if len(shards) > 1:
            report.add(
                str(folder),
                "missing-index",
                f"{len(shards)} shards and no {INDEX_NAME}: which files form the model?",
            )
        return
    weight_map = _read_weight_map(index_path, report, cap)
    if weight_map is None:
        return
    normalised = _check_index_paths(folder, index_path, weight_map, report)
    if normalised is not None:
        _compare_weight_map(index_path, normalised, owner, shards, report)


def _read_weight_map(index_path: Path, report: _Report, cap: int) -> dict[str, str] | None:
    try:
        raw = _read_small_file(report.vetted.get(INDEX_NAME, index_path), cap)
        document = loads_strict(raw, source=str(index_path))
    except InputError as exc:
        report.add(str(index_path), "index-json", exc.rule)
        return None
    weight_map = document.get("weight_map") if isinstance(document, dict) else None
    if not isinstance(weight_map, dict):
        report.add(str(index_path), "index-json", "no `weight_map` object")
        return None
    for name, shard in weight_map.items():
        if not isinstance(shard, str):
            message = f"weight_map[{_show(name)}] is a JSON {_json_type(shard)}, not a string"
            report.add(str(index_path), "index-json", message)
            return None
    return weight_map


def _read_small_file(path: Path, cap: int) -> bytes:
    if path.is_symlink():
        raise InputError(path, "index file is a symbolic link")
    try:
        return read_regular(path, what="index file", max_bytes=cap)
    except OSError as exc:
        raise InputError(path, f"cannot read ({exc.strerror or exc})") from None


def _check_index_paths(
    folder: Path, index_path: Path, weight_map: dict[str, str], report: _Report
) -> dict[str, str] | None:
    """Return weight_map with normalised shard paths, or None after an index-path error."""
    root = folder.resolve()
    normalised: dict[str, str] = {}
    for name, shard in weight_map.items():
        problem = _path_problem(root, shard)
        if problem:
            report.add(str(index_path), "index-path", f"{_show(name)} -> {_show(shard)}: {problem}")
            return None
        normalised[name] = posixpath.normpath(shard)
    return normalised


def _path_problem(root: Path, shard: str) -> str | None:
    if not shard:
        return "empty path"
    if PurePosixPath(shard).is_absolute() or PureWindowsPath(shard).is_absolute():
        return "absolute path"
    if ".." in PurePosixPath(shard.replace("\\", "/")).parts:
        return "path contains `..`"
    if "\0" in shard:
        return "path contains a NUL byte"
    # Resolve the directories only: a symlinked shard itself is reported as symlinked-shard.
    try:
        parent = (root / shard).parent.resolve()
    except (OSError, RuntimeError):  # a symlink loop
        return "path cannot be resolved (symbolic link loop?)"
    if not parent.is_relative_to(root):
        return "path leaves the folder through a symbolic link"
    return None


def _compare_weight_map(
    index_path: Path,
    weight_map: dict[str, str],
    owner: dict[str, str],
    shards: list[str],
    report: _Report,
) -> None:
    # Shards that failed their own check have unknown contents: compare only the rest.
    indexed = {n: s for n, s in weight_map.items() if s not in report.failed}
    actual = {n: s for n, s in owner.items() if s not in report.failed}
    differences = _differences(indexed, actual, set(shards))
    if differences:
        more = len(differences) - MAX_LISTED_DIFFERENCES
        shown = "; ".join(differences[:MAX_LISTED_DIFFERENCES])
        suffix = f"; and {more} more" if more > 0 else ""
        message = f"{len(differences)} difference(s): {shown}{suffix}"
        report.add(str(index_path), "index-mismatch", message)


def _differences(indexed: dict[str, str], actual: dict[str, str], shards: set[str]) -> list[str]:
    found: list[str] = []
    for name in sorted(indexed.keys() | actual.keys()):
        want, have = indexed.get(name), actual.get(name)
        if want == have:
            continue
        if have is None:
            where = "" if want in shards else " (no such shard in the folder)"
            found.append(f"{_show(name)} indexed in {want}{where} but in no shard")
        elif want is None:
            found.append(f"{_show(name)} in {have} but not in the index")
        else:
            found.append(f"{_show(name)} indexed in {want} but found in {have}")
    return found
