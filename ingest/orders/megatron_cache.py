"""The index arrays megatron-core caches for a run (`path_to_cache`, by default
`<data prefix>/cache/GPTDataset_indices`), found by their descriptions.

Every cached dataset is a set of files `<md5>-<class>-<split>-<affix>`, where `<md5>` is
the MD5 of the `description.txt` beside them (its JSON names the data prefix, the
seed, the sequence length, the split and the sample count):

- `GPTDataset`: `document_index.npy` (int32, sequence ids, shuffled, over all epochs),
  `sample_index.npy` ([samples + 1, 2]: position in the document index and token offset
  where each sample starts), `shuffle_index.npy` (the order samples are read in);
- `BlendedDataset`: `dataset_index.npy` (int16, which dataset each blended sample
  comes from) and `dataset_sample_index.npy` (int64, which sample of that dataset).

The arrays are read with numpy's own format reader, never unpickled.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lineage.errors import InputError, UsageError
from lineage.ingest.orders.json_input import parse_json

GPT = "GPTDataset"
BLENDED = "BlendedDataset"
GPT_ARRAYS = ("document_index", "sample_index", "shuffle_index")
BLENDED_ARRAYS = ("dataset_index", "dataset_sample_index")


@dataclass(frozen=True)
class Cached:
    """One cached dataset: its description and arrays, and the files they came from."""

    kind: str
    digest: str  # the md5 in the file names
    description: dict[str, Any]
    arrays: dict[str, np.ndarray]
    files: dict[str, Path]  # affix -> path (description.txt and every .npy)


@dataclass(frozen=True)
class CachedRun:
    """A run's datasets in blend order, and the blend when there is one."""

    datasets: list[Cached]
    blend: Cached | None


def find_run(cache: Path, split: str, chosen: str | None = None) -> CachedRun:
    """The cached datasets of `split`: the blend (if any) and its datasets, or the one
    GPTDataset. `chosen` (an md5 from the file names) picks one when several runs share
    the cache folder."""
    if not cache.is_dir():
        raise InputError(cache, "not a folder (give the run's path_to_cache)")
    blends = _described(cache, BLENDED, split)
    if chosen is not None:
        blends = {k: v for k, v in blends.items() if k == chosen}
    if len(blends) > 1:
        raise UsageError(f"{cache}: several blends of split {split!r} ("
                         f"{', '.join(sorted(blends))}); choose one with --index-hash")
    gpts = _described(cache, GPT, split)
    if blends:
        digest, description = next(iter(blends.items()))
        blend = _load(cache, BLENDED, split, digest, description, BLENDED_ARRAYS)
        members = [_member(cache, split, gpts, wanted) for wanted in description["datasets"]]
        return CachedRun(members, blend)
    if chosen is not None:
        gpts = {k: v for k, v in gpts.items() if k == chosen}
    if len(gpts) != 1:
        found = ", ".join(sorted(gpts)) or "none"
        raise UsageError(f"{cache}: expected one GPTDataset of split {split!r}, found "
                         f"{found}; choose one with --index-hash")
    digest, description = next(iter(gpts.items()))
    return CachedRun([_load(cache, GPT, split, digest, description, GPT_ARRAYS)], None)


def _described(cache: Path, kind: str, split: str) -> dict[str, dict[str, Any]]:
    """md5 -> parsed description of every cached `kind` of `split` in the folder."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(cache.glob(f"*-{kind}-{split}-description.txt")):
        digest = path.name.split("-", 1)[0]
        text = path.read_bytes()
        if hashlib.md5(text, usedforsecurity=False).hexdigest() != digest:
            raise InputError(path, "the description's MD5 differs from the one in its name")
        try:
            found[digest] = parse_json(path, text)
        except ValueError as exc:
            raise InputError(path, f"not JSON: {exc}") from exc
    return found


def _member(cache: Path, split: str, gpts: dict[str, dict[str, Any]],
            wanted: dict[str, Any]) -> Cached:
    for digest, description in gpts.items():
        if description == wanted:
            return _load(cache, GPT, split, digest, description, GPT_ARRAYS)
    raise InputError(cache, f"the blend names dataset {wanted.get('dataset_path')!r} "
                     "whose cached GPTDataset indices are not in this folder")


def _load(cache: Path, kind: str, split: str, digest: str, description: dict[str, Any],
          names: tuple[str, ...]) -> Cached:
    base = f"{digest}-{kind}-{split}-"
    files = {"description.txt": cache / f"{base}description.txt"}
    arrays = {}
    for name in names:
        path = cache / f"{base}{name}.npy"
        files[f"{name}.npy"] = path
        arrays[name] = load_array(path)
    return Cached(kind, digest, description, arrays, files)


def load_array(path: Path) -> np.ndarray:
    """An integer .npy array, memory-mapped; pickled object arrays are refused."""
    if not path.is_file():
        raise InputError(path, "missing (megatron-core writes it beside its description)")
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except ValueError as exc:
        raise InputError(path, f"not a plain .npy array ({exc})") from exc
    if not np.issubdtype(array.dtype, np.integer):
        raise InputError(path, f"holds {array.dtype}, expected integers")
    return np.asarray(array)
