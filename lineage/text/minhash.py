"""Near-duplicate signatures (`lineage-near/1`): MinHash of word 2-grams, LSH band keys.

A copy with words replaced, deleted or inserted shares few long passages with its
original, but most of its word pairs. The shingles are the distinct word 2-grams of the
normalized text, hashed as `lineage-fingerprint/1` hashes its grams; one-permutation
MinHash spreads them over 126 bins (each keeps its smallest hash, an empty bin borrows a
filled one's), and the signature is cut into 42 bands of 3 rows, each hashed to a key.
Two texts share a band key with probability 1 - (1 - J^3)^42 for shingle Jaccard J:
0.98 at J = 0.45 (a copy with 20 % of its words edited), 0.001 at J = 0.03.
docs/near-spec.md states the algorithm for re-implementers; `signature` and
`band_keys` are the plain form, `signature_batch` the vectorized one (tests hold them
equal).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lineage.text.fingerprint import _MASK, _P, _fmix64, gram_hash

if TYPE_CHECKING:
    import numpy as np

NEAR_SPEC = "lineage-near/1"
SHINGLE_WORDS = 2
BANDS = 42
ROWS = 3
BINS = BANDS * ROWS
DONOR_TRIES = 64  # then the next filled bin to the right, circularly


def _donor(target: int, attempt: int) -> int:
    return _fmix64((target << 32) | attempt) % BINS


# DONORS[t - 1][i]: the bin an empty bin i borrows from at attempt t.
DONORS = tuple(tuple(_donor(i, t) for i in range(BINS)) for t in range(1, DONOR_TRIES + 1))


def parameters() -> dict[str, object]:
    """The near-duplicate parameters, as every near match cites them."""
    return {"spec": NEAR_SPEC, "shingle_words": SHINGLE_WORDS, "bands": BANDS, "rows": ROWS}


def shingles(words: Sequence[str]) -> list[int]:
    """The hashes of a text's word 2-grams (its one word, for a one-word text)."""
    n = min(SHINGLE_WORDS, len(words))
    return [gram_hash(" ".join(words[i:i + n]).encode("utf-8"))
            for i in range(len(words) - n + 1)] if words else []


def signature(words: Sequence[str]) -> list[int] | None:
    """The BINS values, in bin order; None for a text without words.

    One permutation: shingle x falls in bin x mod BINS, and a bin keeps its smallest x.
    An empty bin borrows the value of the bin DONORS names (the first filled one in
    DONOR_TRIES attempts), else of the next filled bin to its right."""
    hashes = shingles(words)
    if not hashes:
        return None
    filled: dict[int, int] = {}
    for x in hashes:
        b = x % BINS
        if b not in filled or x < filled[b]:
            filled[b] = x
    return [filled[i] if i in filled else filled[_donor_of(i, filled)] for i in range(BINS)]


def _donor_of(target: int, filled: dict[int, int]) -> int:
    for attempt in range(DONOR_TRIES):
        if DONORS[attempt][target] in filled:
            return DONORS[attempt][target]
    return next((target + step) % BINS for step in range(1, BINS)
                if (target + step) % BINS in filled)


def band_keys(sig: Sequence[int]) -> list[int]:
    """Key of band j: fmix64(j + sum over its rows t of value_t * P^(t+1)) mod 2^64."""
    keys = []
    for band in range(BANDS):
        h, power = band, 1
        for value in sig[band * ROWS:(band + 1) * ROWS]:
            power = (power * _P) & _MASK
            h = (h + value * power) & _MASK
        keys.append(_fmix64(h))
    return keys


def estimate(a: Sequence[int], b: Sequence[int]) -> float:
    """The share of equal bins: an estimate of the shingle Jaccard similarity."""
    return sum(x == y for x, y in zip(a, b, strict=True)) / BINS


@dataclass(frozen=True)
class BatchSignatures:
    """Signatures of the texts of a batch that have words: parallel to `text`."""

    text: np.ndarray  # index of the text in the batch
    signature: np.ndarray  # uint64, one row of BINS per text
    band_keys: np.ndarray  # uint64, one row of BANDS per text


def signature_batch(normalized: Sequence[str],
                    word_counts: Sequence[int] | None = None) -> BatchSignatures:
    """`signature` and `band_keys` of many normalized texts at once (the same values)."""
    import numpy as np

    from lineage.text.fingerprint import _batch_grams

    if word_counts is None:
        word_counts = [t.count(" ") + 1 if t else 0 for t in normalized]
    counts = np.array(word_counts, dtype=np.int64)
    pairs = _batch_grams(normalized, counts.tolist(), SHINGLE_WORDS)
    singles = np.flatnonzero(counts == 1)
    texts, hashes = [], []
    if pairs is not None:
        texts.append(pairs.keep[pairs.text])
        hashes.append(pairs.hashes)
    if len(singles):
        one = _batch_grams([normalized[i] for i in singles.tolist()], [1] * len(singles), 1)
        assert one is not None
        texts.append(singles[one.text])
        hashes.append(one.hashes)
    if not texts:
        empty = np.empty((0, BINS), np.uint64)
        return BatchSignatures(np.empty(0, np.int64), empty, empty[:, :BANDS])
    present, row = np.unique(np.concatenate(texts), return_inverse=True)
    sig, filled = bin_minima(row, np.concatenate(hashes), len(present))
    _densify(sig, filled)
    return BatchSignatures(present, sig, band_keys_array(sig))


def bin_minima(row: np.ndarray, shingle: np.ndarray, rows: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """Step 1 of the signature: each row's bin minima and which bins were filled."""
    import numpy as np

    cell = row * BINS + (shingle % np.uint64(BINS)).astype(np.int64)
    flat = np.full(rows * BINS, np.iinfo(np.uint64).max, np.uint64)
    np.minimum.at(flat, cell, shingle)
    filled = np.zeros(rows * BINS, bool)
    filled[cell] = True
    return flat.reshape(rows, BINS), filled.reshape(rows, BINS)


def long_text_band_keys(text_words: Sequence[str], chunk: int) -> list[int]:
    """`band_keys(signature(text_words))` with memory bounded by `chunk` words: chunks
    overlapping by one word hold every 2-gram, and bin minima combine by minimum."""
    import numpy as np

    from lineage.text.fingerprint import _batch_grams

    sig = np.full((1, BINS), np.iinfo(np.uint64).max, np.uint64)
    filled = np.zeros((1, BINS), bool)
    for start in range(0, max(1, len(text_words) - 1), chunk - 1):
        part = text_words[start:start + chunk]
        grams = _batch_grams([" ".join(part)], [len(part)], min(SHINGLE_WORDS, len(part)))
        if grams is None:
            continue
        minima, got = bin_minima(np.zeros(len(grams.hashes), np.int64), grams.hashes, 1)
        sig, filled = np.minimum(sig, minima), filled | got
    _densify(sig, filled)
    return [int(k) for k in band_keys_array(sig)[0]]


def _densify(sig: np.ndarray, filled: np.ndarray) -> None:
    """Fill each empty bin from its donor, as `signature` does, in place."""
    import numpy as np

    rows, bins = np.nonzero(~filled)
    donors = np.array(DONORS, np.int64)
    for attempt in range(DONOR_TRIES):
        if not len(rows):
            return
        donor = donors[attempt][bins]
        found = filled[rows, donor]
        sig[rows[found], bins[found]] = sig[rows[found], donor[found]]
        rows, bins = rows[~found], bins[~found]
    for step in range(1, BINS):
        if not len(rows):
            return
        donor = (bins + step) % BINS
        found = filled[rows, donor]
        sig[rows[found], bins[found]] = sig[rows[found], donor[found]]
        rows, bins = rows[~found], bins[~found]


def band_keys_array(sig: np.ndarray) -> np.ndarray:
    """`band_keys` of each row of a signature matrix."""
    import numpy as np

    from lineage.text.fingerprint import _fmix64_array

    banded = sig.reshape(len(sig), BANDS, ROWS)
    powers = np.array([pow(_P, t + 1, 1 << 64) for t in range(ROWS)], np.uint64)
    total = (banded * powers).sum(axis=2, dtype=np.uint64)
    total += np.arange(BANDS, dtype=np.uint64)
    return _fmix64_array(total)
