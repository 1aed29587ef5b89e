"""Text fingerprints (`lineage-fingerprint/1`): winnowed word k-grams of normalized text.

Each k-gram (K consecutive normalized words joined by single spaces, as UTF-8) hashes to
64 bits; winnowing keeps, from every window of W consecutive grams, the rightmost gram
with the smallest hash. Any passage of at least W + K - 1 words shared by two texts
holds a whole window of identical grams, from which both keep the same gram: such a
passage is always found, whatever surrounds it. Short shared runs may be found too.

The gram hash is a polynomial over the gram's bytes modulo 2^64 followed by the
MurmurHash3 finalizer, chosen because it vectorizes: the prefix-sum form below hashes
every gram of a batch of documents in a few array operations. `gram_hash` and `winnow`
are the plain reference (used for queries, and by tests to pin the vectorized path).
docs/text-spec.md states the algorithm for re-implementers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

FINGERPRINT_SPEC = "lineage-fingerprint/1"
K = 5  # words per gram
W = 20  # grams per winnowing window
GUARANTEE_WORDS = W + K - 1  # shared passages at least this long are always found

_MASK = (1 << 64) - 1
_P = 0x100000001B3  # odd, so it has an inverse modulo 2^64
_P_INV = pow(_P, -1, 1 << 64)
_M1, _M2 = 0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53


def parameters() -> dict[str, object]:
    """The fingerprint parameters, as every match cites them."""
    return {"spec": FINGERPRINT_SPEC, "k": K, "w": W, "guarantee_words": GUARANTEE_WORDS}


def _fmix64(h: int) -> int:
    h ^= h >> 33
    h = (h * _M1) & _MASK
    h ^= h >> 33
    h = (h * _M2) & _MASK
    return h ^ (h >> 33)


def gram_hash(data: bytes) -> int:
    """fmix64(sum over bytes of (b_t + 1) * P^t mod 2^64)."""
    h, power = 0, 1
    for byte in data:
        h = (h + (byte + 1) * power) & _MASK
        power = (power * _P) & _MASK
    return _fmix64(h)


def gram_hashes(words: Sequence[str], k: int = K) -> list[int]:
    """The hash of every k-gram, by the position of its first word."""
    return [gram_hash(" ".join(words[i:i + k]).encode("utf-8"))
            for i in range(len(words) - k + 1)]


def gram_hashes_many(words: Sequence[str], k: int = K) -> list[int]:
    """`gram_hashes`, vectorized for long texts (the same values; a test holds it)."""
    if len(words) < _VECTORIZE_FROM:
        return gram_hashes(words, k)
    grams = _batch_grams([" ".join(words)], [len(words)], k)
    return [] if grams is None else [int(h) for h in grams.hashes]


_VECTORIZE_FROM = 20_000  # words; below this the plain loop is quicker than numpy's import


def winnow_many(hashes: Sequence[int], w: int = W) -> list[tuple[int, int]]:
    """`winnow`, vectorized for long texts (the same picks)."""
    if len(hashes) < _VECTORIZE_FROM:
        return winnow(hashes, w)
    import numpy as np

    values = np.array(hashes, dtype=np.uint64)
    picked = _winnow_array(values, np.zeros(len(values), np.int64),
                           np.array([len(values)]), w)
    return [(int(i), int(values[i])) for i in picked]


def winnow(hashes: Sequence[int], w: int = W) -> list[tuple[int, int]]:
    """(position, hash) of the grams kept, by position: from each window of w grams the
    rightmost smallest; a text of fewer than w grams is one window.

    Not robust winnowing (which keeps the previous window's pick on a tie): each window is
    decided by its own hashes, so chunks and batches give the same picks as one pass."""
    m = len(hashes)
    if m == 0:
        return []
    windows = [(0, m)] if m < w else [(j, j + w) for j in range(m - w + 1)]
    kept: dict[int, int] = {}
    for start, end in windows:
        best = start
        for i in range(start + 1, end):
            if hashes[i] <= hashes[best]:
                best = i
        kept[best] = hashes[best]
    return sorted(kept.items())


def fingerprints(words: Sequence[str]) -> list[tuple[int, int]]:
    """(position, fingerprint) of one text's normalized words."""
    return winnow(gram_hashes(words))


@dataclass(frozen=True)
class BatchFingerprints:
    """Fingerprints of a batch of texts: parallel arrays, by text then position."""

    text: np.ndarray  # index of the text in the batch
    position: np.ndarray  # first word of the gram in that text
    fingerprint: np.ndarray  # uint64


def fingerprint_batch(
    normalized: Sequence[str], word_counts: Sequence[int] | None = None, k: int = K, w: int = W
) -> BatchFingerprints:
    """The fingerprints of many normalized texts at once (same result as `fingerprints`).

    The texts' bytes are joined by spaces into one buffer; with prefix sums S of
    (b_t + 1) * P^t, the polynomial of bytes [a, b) is (S[b] - S[a]) * P^-a, so every
    gram of every text hashes in a few array operations. Keep batches to a few MB: the
    work arrays take about 40 bytes per byte of text.
    """
    grams = _batch_grams(normalized, word_counts, k)
    if grams is None:
        return _empty()
    chosen = _winnow_array(grams.hashes, grams.text, grams.per_text, w)
    return BatchFingerprints(grams.keep[grams.text[chosen]], grams.position[chosen],
                             grams.hashes[chosen])


@dataclass(frozen=True)
class _BatchGrams:
    keep: np.ndarray  # indices of the texts with at least k words
    text: np.ndarray  # per gram: its text, as an index into `keep`
    per_text: np.ndarray  # grams of each kept text
    position: np.ndarray  # per gram: its first word in its text
    hashes: np.ndarray  # per gram: its hash (uint64)


def _batch_grams(normalized: Sequence[str], word_counts: Sequence[int] | None,
                 k: int) -> _BatchGrams | None:
    """Every gram hash of a batch of normalized texts; None when no text has k words."""
    import numpy as np

    if word_counts is None:
        word_counts = [t.count(" ") + 1 if t else 0 for t in normalized]
    counts = np.array(word_counts, dtype=np.int64)
    keep = np.flatnonzero(counts >= k)
    if len(keep) == 0:
        return None
    data = " ".join(normalized[i] for i in keep.tolist()).encode("utf-8")
    buf = np.frombuffer(data, dtype=np.uint8)
    spaces = np.flatnonzero(buf == 0x20)
    word_start = np.concatenate(([0], spaces + 1))
    word_end = np.concatenate((spaces, [len(buf)]))

    kept_words = counts[keep]
    grams_per_text = kept_words - k + 1
    gram_text = np.repeat(np.arange(len(keep)), grams_per_text)
    first_gram = np.concatenate(([0], np.cumsum(grams_per_text)[:-1]))
    position = np.arange(len(gram_text)) - first_gram[gram_text]
    first_word = np.concatenate(([0], np.cumsum(kept_words)[:-1]))[gram_text] + position
    start, end = word_start[first_word], word_end[first_word + k - 1]
    hashes = _fmix64_array(_poly_hashes(buf, start, end))
    return _BatchGrams(keep, gram_text, grams_per_text, position, hashes)


def _empty() -> BatchFingerprints:
    import numpy as np

    return BatchFingerprints(np.empty(0, np.int64), np.empty(0, np.int64),
                             np.empty(0, np.uint64))


_POWERS: dict[int, np.ndarray] = {}


def _powers(base: int, n: int) -> np.ndarray:
    """base^0 .. base^(n-1) modulo 2^64, cached and grown by doubling (batches reuse it)."""
    import numpy as np

    cached = _POWERS.get(base)
    if cached is None or len(cached) < n:
        size = max(n, 2 * len(cached) if cached is not None else 1 << 16)
        cached = np.full(size, base, dtype=np.uint64)
        cached[0] = 1
        np.cumprod(cached, out=cached)  # wraps modulo 2^64, as intended
        _POWERS[base] = cached
    return cached[:n]


def _poly_hashes(buf: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    import numpy as np

    prefix = np.zeros(len(buf) + 1, dtype=np.uint64)
    np.cumsum((buf.astype(np.uint64) + np.uint64(1)) * _powers(_P, len(buf)), out=prefix[1:])
    hashes: np.ndarray = (prefix[end] - prefix[start]) * _powers(_P_INV, len(buf))[start]
    return hashes


def _fmix64_array(h: np.ndarray) -> np.ndarray:
    import numpy as np

    h = h ^ (h >> np.uint64(33))
    h *= np.uint64(_M1)
    h ^= h >> np.uint64(33)
    h *= np.uint64(_M2)
    mixed: np.ndarray = h ^ (h >> np.uint64(33))
    return mixed


def _winnow_array(
    hashes: np.ndarray, gram_text: np.ndarray, grams_per_text: np.ndarray, w: int
) -> np.ndarray:
    """Indices of the kept grams, ascending (texts are contiguous runs of grams)."""
    import numpy as np

    picked = []
    if len(hashes) >= w:
        rightmost_min = _sliding_rightmost_min(hashes, w)
        starts = np.flatnonzero(gram_text[: len(rightmost_min)] == gram_text[w - 1:])
        chosen = rightmost_min[starts]
        # As a window slides right its pick never moves left: repeats are adjacent.
        keep = np.ones(len(chosen), dtype=bool)
        keep[1:] = chosen[1:] != chosen[:-1]
        picked.append(chosen[keep])
    short = np.flatnonzero(grams_per_text < w)
    if len(short):
        # A text of fewer than w grams is one window: its rightmost smallest gram.
        index = np.flatnonzero(np.isin(gram_text, short))
        order = np.lexsort((-index, hashes[index], gram_text[index]))
        _, first = np.unique(gram_text[index][order], return_index=True)
        picked.append(index[order][first])
    if not picked:
        return np.empty(0, np.int64)
    return np.sort(np.concatenate(picked)) if len(picked) > 1 else picked[0]


def _sliding_rightmost_min(values: np.ndarray, w: int) -> np.ndarray:
    """For each window [j, j + w), the index of its rightmost smallest value.

    Doubling: windows of 1, 2, 4, ... are merged pairwise, preferring the right one on
    ties, then two overlapping power-of-two windows cover w. O(n log w) array work.
    """
    import numpy as np

    index = np.arange(len(values))
    value = values
    size = 1
    while size * 2 <= w:
        value, index = _merge_right(value[:-size], index[:-size], value[size:], index[size:])
        size *= 2
    count = len(values) - w + 1
    shift = w - size
    value, index = _merge_right(value[:count], index[:count],
                                value[shift:shift + count], index[shift:shift + count])
    return index


def _merge_right(lv: np.ndarray, li: np.ndarray, rv: np.ndarray, ri: np.ndarray,
                 ) -> tuple[np.ndarray, np.ndarray]:
    import numpy as np

    return np.minimum(lv, rv), np.where(rv <= lv, ri, li)
