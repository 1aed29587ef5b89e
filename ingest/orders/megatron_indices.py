"""megatron-core's cached index arrays made again from what its description records.

A GPTDataset's three arrays follow from its description (`random_seed`,
`sequence_length`, `num_samples`, `split_matrix`, `index_split`), the sequence lengths
of its indexed dataset and whether samples hold one extra token; a BlendedDataset's two
from its `weights` and `size`. The importer makes them again here, with numpy alone,
and refuses a cached file that differs, naming it and its first differing element: a
flipped bit in a cache would otherwise name the wrong tokens of the wrong documents
(docs/importers.md, "What is checked").

The arithmetic is megatron-core 0.16's (gpt_dataset.py `_build_document_sample_shuffle_
indices`, `_build_document_index`, `_build_shuffle_index`, `_get_num_epochs`; the
compiled helpers.cpp `build_sample_idx`, `build_blending_indices` and
`build_exhaustive_blending_indices`), re-done step for step; tests/orders/
test_megatron_indices.py holds it to megatron-core's own builder.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lineage.errors import InputError
from lineage.ingest.orders.megatron_cache import BLENDED_ARRAYS, GPT_ARRAYS, Cached
from lineage.ingest.orders.recomputed import Maker, same_array

Array = np.ndarray[Any, Any]
_SPLITS = ("train", "valid", "test")  # megatron-core's Split, in its order
_FINAL_EPOCH_THRESHOLD = 0.80  # gpt_dataset.py: a last epoch under 80% is shuffled apart
_CHUNK = 1 << 20  # blend samples checked at a time (K float64 columns each)


@dataclass(frozen=True)
class GPTIndices:
    """The three arrays megatron-core's builder writes for one GPTDataset."""

    document_index: Array  # int32, sequence ids, every epoch shuffled
    sample_index: Array  # [samples + 1, 2]: position in document_index, token offset
    shuffle_index: Array  # the order the samples are read in


def gpt_indices(description: dict[str, Any], sequence_lengths: Array, *, extra: int,
                where: Path, drop_last: bool = True) -> GPTIndices:
    """The arrays the description makes over `sequence_lengths` (the whole indexed
    dataset's, int32), `extra` = 1 with add_extra_token_to_sequence; `drop_last` False
    for a valid split built with drop_last_partial_validation_sequence off."""
    seed, length, num_samples, split = _settings(description, where)
    first, stop = split_range(description, len(sequence_lengths), where)
    documents = np.arange(first, stop, dtype=np.int32)
    tokens_per_epoch = int(np.sum(sequence_lengths[documents], dtype=np.int64))
    if tokens_per_epoch <= 1:
        raise InputError(where, f"the {split} split holds {tokens_per_epoch} tokens: "
                         "megatron-core builds no samples from it")
    epochs = _epochs(num_samples, tokens_per_epoch, length, extra)
    separate, sans_final = _separate_final_epoch(epochs, num_samples, tokens_per_epoch,
                                                 length, extra, where)
    random = np.random.RandomState(seed)
    document_index = _document_index(documents, epochs, random, separate)
    sample_index = sample_idx(sequence_lengths, document_index, length, epochs,
                              tokens_per_epoch, drop_last=drop_last, extra=extra)
    samples = len(sample_index) - 1
    shuffle_index = _shuffle_index(sans_final if separate else samples, samples, random)
    return GPTIndices(document_index, sample_index, shuffle_index)


def _settings(description: dict[str, Any], where: Path) -> tuple[int, int, int | None, str]:
    missing = [key for key in ("random_seed", "sequence_length", "index_split",
                               "split_matrix") if key not in description]
    if missing:
        raise InputError(where, f"the description lacks {', '.join(missing)}: the cached "
                         "indices cannot be made again to check them (a megatron-core older "
                         "than the one lineage follows, or not megatron-core's)")
    seed, length = description["random_seed"], description["sequence_length"]
    num_samples, split = description.get("num_samples"), description["index_split"]
    if not _integer(seed) or not 0 <= seed < 2**32:
        raise InputError(where, f"random_seed {seed!r} is not a numpy seed (0 to 2^32 - 1)")
    if not _integer(length) or length < 2:
        raise InputError(where, f"sequence_length {length!r}: expected an integer above 1")
    if num_samples is not None and (not _integer(num_samples) or num_samples < 0):
        raise InputError(where, f"num_samples {num_samples!r}: expected a count or null")
    if split not in _SPLITS:
        raise InputError(where, f"index_split {split!r}: expected one of {', '.join(_SPLITS)}")
    return int(seed), int(length), num_samples, str(split)


def _integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def split_range(description: dict[str, Any], sequences: int, where: Path) -> tuple[int, int]:
    """The sequences of the description's split, as megatron-core's builder cuts them
    (`int(round(fraction * sequences))` at both ends of the split's row of the matrix)."""
    matrix, split = description.get("split_matrix"), description.get("index_split")
    bounds = matrix[_SPLITS.index(str(split))] \
        if isinstance(matrix, list) and len(matrix) == 3 and split in _SPLITS else None
    if not isinstance(bounds, list) or len(bounds) != 2 or not all(
            isinstance(b, int | float) and not isinstance(b, bool) for b in bounds):
        raise InputError(where, f"split_matrix {matrix!r} has no [begin, end] row for "
                         f"split {split!r}")
    first, stop = (int(round(bound * float(sequences))) for bound in bounds)
    if not 0 <= first <= stop <= sequences:
        raise InputError(where, f"split_matrix {matrix!r} cuts outside the dataset's "
                         f"{sequences} sequences")
    return first, stop


def _epochs(num_samples: int | None, tokens_per_epoch: int, length: int, extra: int) -> int:
    """`GPTDataset._get_num_epochs`: epochs until the samples asked for fit."""
    if num_samples is None:
        return 1
    requested = num_samples * length + extra
    return max(1, -(-requested // tokens_per_epoch))


def _separate_final_epoch(epochs: int, num_samples: int | None, tokens_per_epoch: int,
                          length: int, extra: int, where: Path) -> tuple[bool, int]:
    """Whether the last epoch is shuffled apart (megatron-core's 80% rule), and the
    samples before it."""
    if epochs == 1 or num_samples is None:
        return False, 0
    sans_final = ((epochs - 1) * tokens_per_epoch - extra) // length
    from_final = num_samples - sans_final
    per_epoch = (tokens_per_epoch - extra) // length
    if not 0 <= from_final <= per_epoch + 1:
        raise InputError(where, f"num_samples {num_samples} is not one megatron-core could "
                         "build from this dataset")
    return from_final < int(_FINAL_EPOCH_THRESHOLD * per_epoch), sans_final


def _document_index(documents: Array, epochs: int, random: np.random.RandomState,
                    separate: bool) -> Array:
    """`_build_document_index`: the split's sequences once per epoch, shuffled together
    (the last epoch apart when `separate`), by the one RandomState in turn."""
    if not separate or epochs == 1:
        index = np.tile(documents, epochs).astype(np.int32)
        random.shuffle(index)
        return index
    first = _document_index(documents, epochs - 1, random, False)
    return np.concatenate((first, _document_index(documents, 1, random, False)))


def _shuffle_index(samples: int, total: int, random: np.random.RandomState) -> Array:
    """`_build_shuffle_index`: [0, samples) shuffled, then [samples, total) apart."""
    dtype = np.uint32 if total < np.iinfo(np.uint32).max - 1 else np.int64
    first = np.arange(samples, dtype=dtype)
    random.shuffle(first)
    if samples == total:
        return first
    last = np.arange(samples, total, dtype=dtype)
    random.shuffle(last)
    return np.concatenate((first, last))


def sample_idx(sizes: Array, document_index: Array, length: int, epochs: int,
               tokens_per_epoch: int, *, drop_last: bool, extra: int) -> Array:
    """helpers.cpp `build_sample_idx`, whose loop walks the documents: sample k starts
    at token k·length of the documents laid end to end, and the loop records it as
    (the first document whose end reaches the previous sample's end E = k·length +
    extra, E - extra - that document's start). Past the last document (only when a
    partial last sample is kept) it records (the last position, its length - extra)."""
    total = epochs * tokens_per_epoch - extra
    samples = total // length if drop_last else int(np.ceil(np.float32(total)
                                                            / np.float32(length)))
    ends = np.cumsum(sizes[document_index], dtype=np.int64)
    reach = np.arange(1, samples + 1, dtype=np.int64) * length + extra
    position = np.searchsorted(ends, reach, side="left")
    last = len(document_index) - 1
    beyond = position > last
    position[beyond] = last
    starts = ends[position] - sizes[document_index[position]]
    offset = np.where(beyond, sizes[document_index[last]] - extra, reach - extra - starts)
    index = np.empty((samples + 1, 2), dtype=np.int64)
    index[0] = 0
    index[1:, 0], index[1:, 1] = position, offset
    return index


def blend_expected(recorded: Array, weights: list[float], sizes: list[int] | None,
                   first: int, stop: int, taken: Array) -> tuple[Array, Array]:
    """Blend samples [first, stop): which dataset megatron-core's helper picks for
    each, given that the recorded choices before each sample are its own (so the first
    recorded choice that differs is the first element megatron-core would have written
    otherwise), and the sample each recorded choice takes from its dataset. `taken`
    counts the recorded choices before `first`; sizes (the exhaustive blend) drop a
    dataset once it has given them all."""
    chunk = recorded[first:stop].astype(np.int64)
    count = len(weights)
    onehot = np.zeros((len(chunk), count), dtype=np.int64)
    inside = (chunk >= 0) & (chunk < count)
    onehot[np.flatnonzero(inside), chunk[inside]] = 1
    before = np.cumsum(onehot, axis=0) - onehot + taken
    s = np.maximum(np.arange(first, stop, dtype=np.float64), 1.0)[:, None]
    if sizes is None:
        w = np.asarray(weights, dtype=np.float64)
    else:
        w = np.asarray(sizes, dtype=np.float64) / float(sum(sizes))
    errors = w[None, :] * s - before.astype(np.float64)
    if sizes is not None:
        errors[before >= np.asarray(sizes)[None, :]] = -np.inf
    picks = np.argmax(errors, axis=1)
    gives = np.where(inside, before[np.arange(len(chunk)), np.where(inside, chunk, 0)], -1)
    return picks, gives


def check_gpt(cached: Cached, sequence_lengths: Array, extra: int) -> None:
    """Each of the GPTDataset's cached arrays is the one its description makes."""
    where = cached.files["description.txt"]
    made = gpt_indices(cached.description, sequence_lengths, extra=extra, where=where)
    recorded = len(cached.arrays["sample_index"])
    if cached.description["index_split"] == "valid" and recorded != len(made.sample_index):
        # the config's drop_last_partial_validation_sequence, not in the description:
        # a valid split built with it off keeps its last partial sample
        kept = gpt_indices(cached.description, sequence_lengths, extra=extra, where=where,
                           drop_last=False)
        made = kept if recorded == len(kept.sample_index) else made
    maker = Maker("megatron-core's builder",
                  f"from the description's seed {cached.description['random_seed']}")
    for name in GPT_ARRAYS:
        same_array(cached.files[f"{name}.npy"], cached.arrays[name], getattr(made, name),
                   maker)


def check_blend(blend: Cached, members: list[Cached]) -> None:
    """The blend's cached arrays are those megatron-core's helper makes from its
    description's weights and size (or, with no size, the members' own sizes)."""
    where = blend.files["description.txt"]
    weights, size = blend.description.get("weights"), blend.description.get("size")
    if not isinstance(weights, list) or len(weights) != len(members) or not all(
            isinstance(w, int | float) and not isinstance(w, bool) and w > 0 for w in weights):
        raise InputError(where, f"weights {weights!r}: expected one positive number per "
                         "dataset of the blend")
    sizes = None if size is not None else [int(w) for w in weights]
    total = size if size is not None else sum(sizes or [])
    if not _integer(total) or total < 0:
        raise InputError(where, f"size {size!r}: expected a count or null")
    index_file, sample_file = (blend.files[f"{name}.npy"] for name in BLENDED_ARRAYS)
    recorded, samples = blend.arrays["dataset_index"], blend.arrays["dataset_sample_index"]
    maker = Maker("megatron-core's blending", f"from the description's weights {weights} "
                  f"and size {size}")
    for path, array in ((index_file, recorded), (sample_file, samples)):
        if array.ndim != 1:
            raise InputError(path, f"holds shape {array.shape}; a blend's indices are 1-D")
    taken = np.zeros(len(weights), dtype=np.int64)
    step = max(1024, _CHUNK // len(weights))
    for first in range(0, min(total, len(recorded), len(samples)), step):
        stop = min(first + step, total, len(recorded), len(samples))
        picks, gives = blend_expected(recorded, weights, sizes, first, stop, taken)
        same_array(index_file, recorded[first:stop], picks, maker, first)
        same_array(sample_file, samples[first:stop], gives, maker, first)
        taken += np.bincount(recorded[first:stop].astype(np.int64), minlength=len(weights))
    for path, array in ((index_file, recorded), (sample_file, samples)):
        if len(array) != total:
            raise InputError(path, f"holds {len(array)} elements, {maker.who} gives {total} "
                             f"{maker.source} (nothing stored)")
