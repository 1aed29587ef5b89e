"""Near-duplicate signatures (`lineage-near/1`): MinHash of word 2-grams, LSH band keys.

A copy with words replaced, deleted or inserted shares few long passages with its
original, but most of its word pairs. The shingles are the distinct word 2-grams of the
normalized text, hashed as `lineage-fingerprint/1` hashes its grams; each of N = 126
hash functions `(a_i * x + b_i) mod 2^64` keeps its smallest value over the shingles;
the signature is cut into 42 bands of 3 rows and each band hashes to one 64-bit key.
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
PERMUTATIONS = BANDS * ROWS
# Multipliers are odd, so each function is a permutation of the 64-bit values.
MULTIPLIERS = tuple(_fmix64(2 * i + 1) | 1 for i in range(PERMUTATIONS))
ADDENDS = tuple(_fmix64(2 * i + 2) for i in range(PERMUTATIONS))
_BLOCK = 4096  # shingles per vectorized block: 4096 x 126 x 8 bytes = 4 MB of work


def parameters() -> dict[str, object]:
    """The near-duplicate parameters, as every near match cites them."""
    return {"spec": NEAR_SPEC, "shingle_words": SHINGLE_WORDS, "bands": BANDS, "rows": ROWS}


def shingles(words: Sequence[str]) -> list[int]:
    """The hashes of a text's word 2-grams (its one word, for a one-word text)."""
    n = min(SHINGLE_WORDS, len(words))
    return [gram_hash(" ".join(words[i:i + n]).encode("utf-8"))
            for i in range(len(words) - n + 1)] if words else []


def signature(words: Sequence[str]) -> list[int] | None:
    """The N minima, in function order; None for a text without words."""
    hashes = set(shingles(words))
    if not hashes:
        return None
    return [min((a * x + b) & _MASK for x in hashes)
            for a, b in zip(MULTIPLIERS, ADDENDS, strict=True)]


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
    """The share of equal minima: an unbiased estimate of the shingle Jaccard."""
    return sum(x == y for x, y in zip(a, b, strict=True)) / PERMUTATIONS


@dataclass(frozen=True)
class BatchSignatures:
    """Signatures of the texts of a batch that have words: parallel to `text`."""

    text: np.ndarray  # index of the text in the batch
    signature: np.ndarray  # uint64, one row of PERMUTATIONS per text
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
        empty = np.empty((0, PERMUTATIONS), np.uint64)
        return BatchSignatures(np.empty(0, np.int64), empty, empty[:, :BANDS])
    text = np.concatenate(texts)
    shingle = np.concatenate(hashes)
    order = np.argsort(text, kind="stable")
    text, shingle = text[order], shingle[order]
    present, first = np.unique(text, return_index=True)
    sig = np.full((len(present), PERMUTATIONS), np.iinfo(np.uint64).max, np.uint64)
    a = np.array(MULTIPLIERS, np.uint64)
    b = np.array(ADDENDS, np.uint64)
    row = np.searchsorted(present, text)
    for start in range(0, len(shingle), _BLOCK):
        block = slice(start, start + _BLOCK)
        values = shingle[block, None] * a[None, :] + b[None, :]  # wraps modulo 2^64
        rows = row[block]
        cut = np.flatnonzero(np.diff(rows)) + 1
        heads = np.concatenate(([0], cut))
        minima = np.minimum.reduceat(values, heads, axis=0)
        targets = rows[heads]
        sig[targets] = np.minimum(sig[targets], minima)
    return BatchSignatures(present, sig, band_keys_array(sig))


def band_keys_array(sig: np.ndarray) -> np.ndarray:
    """`band_keys` of each row of a signature matrix."""
    import numpy as np

    from lineage.text.fingerprint import _fmix64_array

    banded = sig.reshape(len(sig), BANDS, ROWS)
    powers = np.array([pow(_P, t + 1, 1 << 64) for t in range(ROWS)], np.uint64)
    total = (banded * powers).sum(axis=2, dtype=np.uint64)
    total += np.arange(BANDS, dtype=np.uint64)
    return _fmix64_array(total)
