"""A plain implementation of `lineage-near/1`, written from docs/near-spec.md alone.

Normalization and the gram hash come from the plain `lineage-text/1` and
`lineage-fingerprint/1` reference beside it; nothing here imports lineage.
"""

from __future__ import annotations

from tests.text_reference import gram_hash, words

MASK = (1 << 64) - 1
P = 0x100000001B3
BANDS, ROWS = 42, 3


def fmix64(h: int) -> int:
    h ^= h >> 33
    h = (h * 0xFF51AFD7ED558CCD) & MASK
    h ^= h >> 33
    h = (h * 0xC4CEB9FE1A85EC53) & MASK
    return h ^ (h >> 33)


def shingle_set(text: str) -> set[int]:
    t = words(text)
    if len(t) == 1:
        return {gram_hash(t[0].encode("utf-8"))}
    return {gram_hash(f"{t[i]} {t[i + 1]}".encode()) for i in range(len(t) - 1)}


def signature(text: str) -> list[int] | None:
    t = words(text)
    if not t:
        return None
    hashes = ([gram_hash(t[0].encode("utf-8"))] if len(t) == 1 else
              [gram_hash(f"{t[i]} {t[i + 1]}".encode()) for i in range(len(t) - 1)])
    bins = BANDS * ROWS
    kept: list[int | None] = [None] * bins
    for x in hashes:
        old = kept[x % bins]
        if old is None or x < old:
            kept[x % bins] = x
    out = []
    for i in range(bins):
        if kept[i] is not None:
            out.append(kept[i])
            continue
        donor = None
        for attempt in range(1, 65):
            j = fmix64(i * 2**32 + attempt) % bins
            if kept[j] is not None:
                donor = j
                break
        if donor is None:
            donor = next((i + s) % bins for s in range(1, bins) if kept[(i + s) % bins] is not None)
        out.append(kept[donor])
    return out  # type: ignore[return-value]


def band_keys(sig: list[int]) -> list[int]:
    keys = []
    for j in range(BANDS):
        total = j
        for t in range(ROWS):
            total += sig[j * ROWS + t] * pow(P, t + 1, 1 << 64)
        keys.append(fmix64(total % (1 << 64)))
    return keys
