"""Downloads that are not what they claim: rules read from file names and first bytes only.

A folder can pass every format check and still not be the model: a downloader is still
writing it, a git clone fetched LFS pointers instead of the objects, a mirror answered with
an error page that was saved under the weights' name, or a set of shards is not all there.
Each case has its own rule id, so the action fits the failure instead of "download again":

    download-in-progress  a file, or a folder on its path, named like a download still being
                          written (IN_PROGRESS_SUFFIXES: huggingface_hub `.incomplete`,
                          browsers' `.part` / `.crdownload` / `.download`, aria2's `.aria2`,
                          `.tmp`, ...)
    lfs-pointer           a git-LFS pointer file (`version https://git-lfs.github.com/spec/v1`,
                          `oid sha256:<hex>`, `size <n>`) where the object should be
    error-page            an HTML or JSON document saved under a weights name (a failed or
                          refused download: weights files never start as text)
    incomplete-set        shards named `-0000i-of-0000N` with parts missing, numbered beyond N
                          or disagreeing on N; an `*.index.json` naming files that are absent
    missing-config        (a warning) weights of a transformers folder without config.json
    missing-tokenizer     (a warning) config.json without tokenizer or processor files

A warning says the set cannot run as it is; it is not a structure failure (weights can be
intact without their tokenizer). Every problem is a dict {file, rule, message}, the file
relative to the folder.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from lineage.errors import InputError
from lineage.userfiles import open_regular, read_regular

__all__ = [
    "IN_PROGRESS_SUFFIXES",
    "WEIGHT_SUFFIXES",
    "content_problem",
    "in_progress_suffix",
    "index_problems",
    "runnable_warnings",
    "shard_name_problems",
]

# Suffixes downloaders give a file (or, for Safari, a folder) while it is being written.
IN_PROGRESS_SUFFIXES = (
    ".incomplete", ".part", ".partial", ".tmp", ".temp", ".aria2", ".crdownload",
    ".download", ".downloading", ".filepart", ".opdownload", ".!qb", ".!ut", ".dlpart",
)
# Names weights (and binary tokenizer models) are saved under: never text when genuine.
WEIGHT_SUFFIXES = (
    ".safetensors", ".gguf", ".onnx", ".onnx_data", ".onnx.data", ".bin", ".pt", ".pth",
    ".ckpt", ".pkl", ".pickle", ".h5", ".msgpack", ".model", ".npz", ".tflite", ".ot",
)
LFS_POINTER_MAX_BYTES = 1024  # git-lfs reads no further when it looks for a pointer
HEAD_BYTES = 512
CONTENT_HEAD_BYTES = max(LFS_POINTER_MAX_BYTES, HEAD_BYTES)  # what content_problem reads
JSON_PAGE_MAX_BYTES = 1 << 20
INDEX_MAX_BYTES = 16 << 20  # as the safetensors reader caps an index
_LFS_VERSIONS = (b"version https://git-lfs.github.com/spec/", b"version https://hawser.github.com/spec/")
_SHARD = re.compile(r"^(?P<stem>.+)-(?P<no>\d{1,6})-of-(?P<count>\d{1,6})(?P<ext>\.[^-]+)$")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "spiece.model",
                    "sentencepiece.bpe.model", "vocab.txt", "vocab.json", "merges.txt",
                    "preprocessor_config.json", "processor_config.json")
MAX_LISTED = 5


def in_progress_suffix(rel: str) -> str | None:
    """The in-progress suffix of a path or of a folder on it, or None."""
    for part in rel.lower().split("/"):
        if part.endswith(IN_PROGRESS_SUFFIXES):  # one test for all, per part of the path
            for suffix in IN_PROGRESS_SUFFIXES:
                if part.endswith(suffix) and part != suffix:
                    return suffix
    return None


def content_problem(folder: Path, rel: str, size: int,
                    head: bytes | None = None) -> dict[str, Any] | None:
    """An LFS pointer or an error page in place of the file `rel` of `folder`, from its
    first bytes (`head`: its first CONTENT_HEAD_BYTES, when the caller read them already);
    else None. The path is joined only when the file is read: most files need no read."""
    weights_name = rel.lower().endswith(WEIGHT_SUFFIXES)
    if size > LFS_POINTER_MAX_BYTES and not weights_name:
        return None
    if head is None:
        try:
            with open_regular(folder / rel) as handle:  # never waits on a FIFO swapped in
                head = handle.read(CONTENT_HEAD_BYTES)
        except (InputError, OSError):
            return None  # the format reader reports what it cannot read
    if size <= LFS_POINTER_MAX_BYTES and head.startswith(_LFS_VERSIONS):
        return _lfs_pointer(rel, head)
    if weights_name:
        return _error_page(folder / rel, rel, head[:HEAD_BYTES], size)
    return None


def _lfs_pointer(rel: str, text: bytes) -> dict[str, Any]:
    fields = dict(line.split(" ", 1) for line in text.decode("utf-8", "replace").splitlines()
                  if " " in line)
    oid, size = fields.get("oid", "?"), fields.get("size", "?")
    return {"file": rel, "rule": "lfs-pointer", "oid": oid, "size": size,
            "message": f"a git-LFS pointer, not the object: oid {oid}, size {size} bytes"}


def _error_page(path: Path, rel: str, head: bytes, size: int) -> dict[str, Any] | None:
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not text or b"\0" in head or not _is_text(text):
        return None
    lowered = text[:200].lower()
    if text.startswith(b"<") and (b"html" in lowered or b"<!doctype" in lowered
                                  or lowered.startswith(b"<?xml")):
        kind = "an HTML page"
    elif text.startswith((b"{", b"[")) and _json_document(path, size):
        kind = "a JSON document"
    else:
        return None
    first = text.split(b"\n", 1)[0][:80].decode("utf-8", "replace")
    return {"file": rel, "rule": "error-page",
            "message": f"{kind} ({size} bytes) saved under a weights name: {first!r}"}


def _is_text(head: bytes) -> bool:
    for cut in range(4):  # the read may end inside a character of up to 4 bytes
        try:
            decoded = head[: len(head) - cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
        return all(c.isprintable() or c in "\t\r\n" for c in decoded)
    return False


def _json_document(path: Path, size: int) -> bool:
    if size > JSON_PAGE_MAX_BYTES:
        return True  # text from the first byte, starting like JSON: no weights format does
    try:
        json.loads(read_regular(path, what="JSON file", max_bytes=JSON_PAGE_MAX_BYTES))
    except (InputError, OSError, ValueError):
        return False
    return True


# ---------------------------------------------------------------------------------------------
# Sets


def shard_name_problems(names: list[str]) -> list[dict[str, Any]]:
    """Shards `stem-0000i-of-0000N.ext` in one folder: every part there, all agreeing on N."""
    groups: dict[tuple[str, str, str], list[tuple[int, int, str]]] = defaultdict(list)
    for rel in names:
        directory, name = posixpath.split(rel)
        match = _SHARD.match(name)
        if match and not in_progress_suffix(rel):
            key = (directory, match["stem"], match["ext"])
            groups[key].append((int(match["no"]), int(match["count"]), rel))
    problems = []
    for (_, stem, ext), parts in sorted(groups.items()):
        problem = _shard_problem(stem + ext, sorted(parts))
        if problem:
            first = parts[0][2]
            problems.append({"file": first, "rule": "incomplete-set", "message": problem})
    return problems


def _shard_problem(label: str, parts: list[tuple[int, int, str]]) -> str | None:
    counts = sorted({count for _, count, _ in parts})
    if len(counts) > 1:
        shown = ", ".join(posixpath.basename(rel) for _, _, rel in parts[:MAX_LISTED])
        return f"the parts of {label} disagree on their count ({counts}): {shown}"
    total = counts[0]
    invalid = [no for no, _, _ in parts if not 1 <= no <= total]
    if invalid:
        return f"{label}: part {invalid[0]} of {total} is not a valid part number"
    present = {no for no, _, _ in parts}
    missing = [no for no in range(1, total + 1) if no not in present]
    if not missing:
        return None
    shown = ", ".join(str(no) for no in missing[:MAX_LISTED]) + (
        ", ..." if len(missing) > MAX_LISTED else "")
    return f"{label}: {len(present)} of {total} parts present; missing part(s) {shown}"


def index_problems(root: Path, index_rel: str, present: set[str]) -> list[dict[str, Any]]:
    """The files an `*.index.json` weight_map names that are not in the folder."""
    try:
        document = json.loads(read_regular(root / index_rel, what="index JSON",
                                           max_bytes=INDEX_MAX_BYTES))
    except (InputError, OSError, ValueError):
        return []  # oversized or unreadable: the format reader's rule (index-json)
    weight_map = document.get("weight_map") if isinstance(document, dict) else None
    if not isinstance(weight_map, dict):
        return []
    directory = posixpath.dirname(index_rel)
    named = {v for v in weight_map.values() if isinstance(v, str) and v}
    missing = sorted(v for v in named if _safe(v)
                     and posixpath.normpath(posixpath.join(directory, v)) not in present)
    if not missing:
        return []
    shown = ", ".join(missing[:MAX_LISTED]) + (", ..." if len(missing) > MAX_LISTED else "")
    return [{"file": index_rel, "rule": "incomplete-set",
             "message": f"the index names {len(missing)} of {len(named)} file(s) not in the "
                        f"folder: {shown}"}]


def _safe(value: str) -> bool:
    return not value.startswith(("/", "\\")) and ".." not in value.replace("\\", "/").split("/")


# ---------------------------------------------------------------------------------------------
# Runnable


def runnable_warnings(top_names: set[str]) -> list[dict[str, Any]]:
    """A transformers folder (config.json, or safetensors weights) needs config and tokenizer.

    Adapters (adapter_config.json) run on a base model and diffusers pipelines
    (model_index.json) keep their parts in sub-folders: neither is judged here.
    """
    if {"adapter_config.json", "model_index.json"} & top_names:
        return []
    has_config = "config.json" in top_names
    has_weights = any(n.endswith(".safetensors") for n in top_names)
    if not (has_config or has_weights):
        return []
    warnings = []
    if not has_config:
        warnings.append({"file": ".", "rule": "missing-config",
                         "message": "safetensors weights without config.json: the set cannot "
                                    "run as it is"})
    if not any(n in top_names for n in _TOKENIZER_FILES) and not any(
            n.endswith((".model", ".tiktoken")) for n in top_names):
        warnings.append({"file": ".", "rule": "missing-tokenizer",
                         "message": "no tokenizer files (tokenizer.json, tokenizer.model, "
                                    "vocab.txt, ...) and no processor config: the set cannot run "
                                    "as it is"})
    return warnings
