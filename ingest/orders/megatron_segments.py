"""The segments of GPTDataset samples, from megatron-core's cached index arrays.

megatron-core `GPTDataset._query_document_sample_shuffle_indices(idx)`: sample `idx`
is `shuffle_index[idx] = s`; it starts at position `sample_index[s] = (p0, o0)` of the
document index (token `o0` of sequence `document_index[p0]`) and ends at
`sample_index[s + 1] = (p1, o1)`: the parts are sequences `document_index[p0..p1]`,
the first from `o0`, the last up to `o1 + extra` exclusive (`extra` = 1 with
`add_extra_token_to_sequence`, the default: a sample is `sequence_length + 1` tokens,
the last being the next sample's first, read as the label of the last position).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lineage.errors import InputError
from lineage.ingest.orders.indexed import IndexedDataset
from lineage.ingest.orders.megatron_cache import Cached
from lineage.ingest.orders.megatron_files import document_of_sequence, sequence_base


@dataclass(frozen=True)
class Parts:
    """Segment rows of one dataset's samples: Megatron document, token range, slot."""

    window: np.ndarray
    slot: np.ndarray
    document: np.ndarray  # Megatron document (0-based, = line of the preprocessing input)
    doc_offset: np.ndarray
    n_tokens: np.ndarray


def sample_parts(cached: Cached, data: IndexedDataset, windows: np.ndarray,
                 samples: np.ndarray, window_len: int, extra: int) -> Parts:
    """The parts of `samples` of one GPTDataset, which fill `windows` (same length)."""
    document_index, sample_index, shuffle = (
        cached.arrays["document_index"], cached.arrays["sample_index"],
        cached.arrays["shuffle_index"])
    _check_shapes(cached, data)
    _check_bounds(cached, "shuffle_index.npy", samples, len(shuffle), "dataset samples")
    drawn = shuffle[samples].astype(np.int64)
    _check_bounds(cached, "shuffle_index.npy", drawn, len(sample_index) - 1, "samples")
    p0, o0 = sample_index[drawn, 0].astype(np.int64), sample_index[drawn, 1].astype(np.int64)
    p1, o1 = (sample_index[drawn + 1, 0].astype(np.int64),
              sample_index[drawn + 1, 1].astype(np.int64))
    _check_bounds(cached, "sample_index.npy", np.concatenate((p0, p1)), len(document_index),
                  "document index positions")
    counts = p1 - p0 + 1
    if (counts < 1).any():
        _fail(cached, "sample_index.npy", f"sample {int(drawn[np.argmax(counts < 1)])} ends "
              "before it starts")
    first = np.cumsum(counts) - counts
    k = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(first, counts)
    sequence = document_index[np.repeat(p0, counts) + k].astype(np.int64)
    lengths = data.sequence_lengths[sequence].astype(np.int64)
    start = np.where(k == 0, np.repeat(o0, counts), 0)
    stop = np.where(k == np.repeat(counts - 1, counts), np.repeat(o1, counts) + extra, lengths)
    bad = (start < 0) | (start > stop) | (stop > lengths)
    if bad.any():
        row = int(np.argmax(bad))
        _fail(cached, "sample_index.npy", f"a sample reads tokens [{int(start[row])}, "
              f"{int(stop[row])}) of sequence {int(sequence[row])}, which has "
              f"{int(lengths[row])}")
    n = stop - start
    before = np.cumsum(n) - n
    slot = before - np.repeat(before[first], counts)
    totals = np.add.reduceat(n, first) if len(first) else n
    short = np.flatnonzero(totals != window_len)
    if len(short):
        _fail(cached, "sample_index.npy", f"sample {int(drawn[short[0]])} holds "
              f"{int(totals[short[0]])} tokens, not sequence_length + extra = {window_len}")
    document = document_of_sequence(data)[sequence]
    offset = sequence_base(data)[sequence] + start
    keep = n > 0
    return Parts(np.repeat(windows, counts)[keep], slot[keep], document[keep], offset[keep],
                 n[keep])


def _check_shapes(cached: Cached, data: IndexedDataset) -> None:
    document_index, sample_index = (cached.arrays["document_index"],
                                    cached.arrays["sample_index"])
    if sample_index.ndim != 2 or sample_index.shape[1] != 2 or len(sample_index) < 1:
        _fail(cached, "sample_index.npy", f"shape {sample_index.shape}, expected (samples + 1, 2)")
    if document_index.ndim != 1 or cached.arrays["shuffle_index"].ndim != 1:
        _fail(cached, "document_index.npy", "the document and shuffle indices are 1-D")
    first, stop = _split_range(cached, len(data.sequence_lengths))
    if len(document_index) and (document_index.min() < first or document_index.max() >= stop):
        _fail(cached, "document_index.npy", f"names sequences outside [{first}, {stop}), "
              f"the {cached.description.get('index_split')} split of {data.idx.name}")


_SPLITS = ("train", "valid", "test")


def _split_range(cached: Cached, sequences: int) -> tuple[int, int]:
    """The sequences of the split, as megatron-core's builder cuts them
    (`int(round(fraction * sequences))` at both ends of the split's row of the matrix)."""
    matrix = cached.description.get("split_matrix")
    split = cached.description.get("index_split")
    if not isinstance(matrix, list) or split not in _SPLITS:
        return 0, sequences
    bounds = matrix[_SPLITS.index(str(split))]
    if not isinstance(bounds, list) or len(bounds) != 2:
        return 0, sequences
    return int(round(bounds[0] * float(sequences))), int(round(bounds[1] * float(sequences)))


def _check_bounds(cached: Cached, affix: str, values: np.ndarray, limit: int,
                  what: str) -> None:
    if len(values) and (values.min() < 0 or values.max() >= limit):
        wrong = values[(values < 0) | (values >= limit)][0]
        _fail(cached, affix, f"{what} must lie in [0, {limit}); found {int(wrong)}")


def _fail(cached: Cached, affix: str, rule: str) -> None:
    raise InputError(cached.files[affix], rule)
