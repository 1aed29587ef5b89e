"""What each file of a model folder is, decided by its bytes first and its name second."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from lineage.formats.names import parse_model_name

WEIGHT_FORMATS = {"safetensors", "gguf", "onnx", "pickle", "onnx-data"}
# Formats whose files loading may unpickle: every one of them is scanned for risks.
PICKLE_BEARING = frozenset({"pickle", "zip", "npy", "npz"})
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle", ".joblib")
_SNIFF = 16
# pickle_kind's answers as file formats: torch archives and legacy files are pickles.
_PICKLE_FORMATS = {"pickle": "pickle", "torch-zip": "pickle", "torch-legacy": "pickle",
                   "compressed-pickle": "pickle", "npy": "npy", "npz": "npz", "zip": "zip"}


def sniff(path: Path) -> str:
    """safetensors, gguf, onnx, pickle, npy, npz, zip, json, python, jinja, text or other.

    Pickles are recognised by content whatever the name (pickle_kind: protocols 0-5, torch
    archives and legacy files, NumPy arrays and archives); a pickle suffix on anything else
    still means pickle, so the risk scan looks at it.
    """
    from lineage.formats.pickle_scan import pickle_kind

    name = path.name.lower()
    try:
        with open(path, "rb") as handle:
            head = handle.read(_SNIFF)
    except OSError:
        return "unreadable"
    kind = pickle_kind(path)  # first: a pickle can be shaped to pass the checks below
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
    for suffix, kind in ((".json", "json"), (".py", "python"), (".jinja", "jinja"),
                         (".md", "text"), (".txt", "text"), (".model", "tokenizer")):
        if name.endswith(suffix):
            return kind
    return "other"


def list_files(folder: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every file below `folder` and the symlinks found. Links are not followed, except a
    hub cache snapshot's vetted links into its own blobs: those are files too."""
    files, links = [], []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for name in sorted(filenames) + [d for d in dirnames if (Path(dirpath) / d).is_symlink()]:
            path = Path(dirpath) / name
            rel = path.relative_to(folder).as_posix()
            if path.is_symlink():
                target = os.path.realpath(path)
                inside = Path(target).is_relative_to(folder.resolve())
                cache_blob = _vetted_cache_blob(path)
                links.append({"path": rel, "target": target, "inside": inside,
                              "cache_blob": cache_blob is not None})
                if cache_blob is None:
                    continue
            anatomy = parse_model_name(path.name)
            files.append({"path": rel, "format": sniff(path), "size": path.stat().st_size,
                          "shard": list(anatomy["shard"]) if anatomy["shard"] else None,
                          "name": {k: v for k, v in anatomy.items()
                                   if v and k not in ("shard", "extra")}})
    return files, links


def _vetted_cache_blob(link: Path) -> Path | None:
    """The blob a hub cache snapshot link leads to, if `hf_cache` vetted it (else None)."""
    from lineage.formats.hf_cache import vetted_blob

    return vetted_blob(link)
