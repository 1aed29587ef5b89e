"""The order of `lineage-stream/1` (docs/stream-spec.md §2-4) computed on numpy arrays.

The keys come from DuckDB (SHA-256 on all cores); sorting, truncating, interleaving and
packing 10M occurrences here takes about three seconds, where the same steps as SQL
window functions took eleven. Everything is exact integer arithmetic: the spec's merge
key (up to 2^64, one bit more than a word) is computed by long division in 64-bit words,
and keys that agree in their first 64 bits (never seen, but possible) are ordered by
their full 256 bits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    IntArray = npt.NDArray[np.int64]
    UIntArray = npt.NDArray[np.uint64]

# rows (positions into the candidate arrays) -> their full sort keys: (key bytes, doc_id
# bytes) per row, for the rare rows whose 64-bit key prefixes are equal.
FullKeys = Callable[["IntArray"], list[tuple[bytes, bytes]]]


@dataclass
class Candidates:
    """One row per (document, epoch) that the spec's sequences may hold."""

    rid: IntArray  # the document's row in the corpus (doc_id order)
    srank: IntArray  # the source's rank by its `src` hex: ties in the merge break on it
    epoch: IntArray
    n_tokens: IntArray
    k64: UIntArray  # the key's first 8 bytes, big-endian


@dataclass
class Placed:
    """The stream's occurrences in ordinal order."""

    rid: IntArray
    epoch: IntArray
    n_tokens: IntArray
    stream_start: IntArray


def place(candidates: Candidates, budgets: list[int], separator_tokens: int,
          full_keys: FullKeys, *, presorted: bool = False) -> Placed:
    """Every kept occurrence in stream order with its packed position (spec §2-4).
    `presorted`: the candidates already are in k64 order (a range-partitioned sort,
    `lineage.stream.shuffle`)."""
    import numpy as np

    if len(candidates.rid) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Placed(rid=empty, epoch=empty, n_tokens=empty, stream_start=empty)
    order = _sequence_order(candidates, full_keys, presorted)
    srank = candidates.srank[order]
    n = candidates.n_tokens[order]
    kept, c_before, totals = _truncate(srank, n, np.asarray(budgets, dtype=np.int64))
    if not kept.all():  # whole epochs keep everything
        order, srank, n, c_before = order[kept], srank[kept], n[kept], c_before[kept]
    high, low = merge_keys(srank, c_before, n, totals)
    # Rows are in (srank, q) order here, and within a source the merge key never falls
    # with q: a stable sort by the key breaks its ties on (srank, q), as the spec asks.
    by_key = np.argsort(low, kind="stable")
    if high.any():
        by_key = by_key[np.argsort(high[by_key], kind="stable")]
    order, n = order[by_key], n[by_key]
    step = n + separator_tokens
    stream_start = np.cumsum(step) - step
    return Placed(rid=candidates.rid[order], epoch=candidates.epoch[order], n_tokens=n,
                  stream_start=stream_start)


def _sequence_order(c: Candidates, full_keys: FullKeys, presorted: bool = False) -> IntArray:
    """Rows sorted by (source, epoch, key): each source's sequence, one after another."""
    import numpy as np

    order = np.arange(len(c.k64)) if presorted else np.argsort(c.k64)
    by_key = c.k64[order]
    any_tie = bool((by_key[1:] == by_key[:-1]).any())  # almost never: 2^-64 a pair
    del by_key
    group = c.srank.astype(np.int64) * (int(c.epoch.max(initial=0)) + 1) + c.epoch
    small = group.astype(np.uint16) if group.max(initial=0) < 2**16 else group
    order = order[np.argsort(small[order], kind="stable")]  # radix sort for uint16
    if any_tie:
        group, k64 = group[order], c.k64[order]
        tied = (group[1:] == group[:-1]) & (k64[1:] == k64[:-1])
        if tied.any():
            _order_ties(order, np.flatnonzero(tied), full_keys)
    return order


def _order_ties(order: IntArray, tied: IntArray, full_keys: FullKeys) -> None:
    """Reorder, in place, each run of rows whose group and 64-bit key prefix agree."""
    runs: list[list[int]] = []
    for position in tied.tolist():  # `position` and `position + 1` agree
        if runs and runs[-1][-1] == position:
            runs[-1].append(position + 1)
        else:
            runs.append([position, position + 1])
    for run in runs:
        rows = order[run]
        keys = full_keys(rows)
        order[run] = [row for _, row in sorted(zip(keys, rows.tolist(), strict=True))]


def _truncate(srank: IntArray, n: IntArray, budgets: IntArray
              ) -> tuple[npt.NDArray[np.bool_], IntArray, IntArray]:
    """(kept rows, tokens before each row in its source, kept tokens per source).

    Rows are grouped by source in sequence order; a source keeps the longest prefix
    whose tokens stay within its budget (running totals never fall: n >= 0)."""
    import numpy as np

    inclusive = np.empty(len(n), dtype=np.int64)
    for start, end in zip(*_runs(srank), strict=True):  # running totals per source
        np.cumsum(n[start:end], out=inclusive[start:end])
    kept = inclusive <= budgets[srank]
    totals = np.zeros(len(budgets), dtype=np.int64)
    kept_starts, kept_ends = _runs(srank[kept])
    totals[srank[kept][kept_starts]] = inclusive[kept][kept_ends - 1]
    return kept, inclusive - n, totals


def _runs(values: IntArray) -> tuple[IntArray, IntArray]:
    """(start, end) positions of the runs of equal values."""
    import numpy as np

    if len(values) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, values[1:] != values[:-1]])
    return starts, np.r_[starts[1:], len(values)]


def merge_keys(srank: IntArray, c_before: IntArray, n: IntArray, totals: IntArray
               ) -> tuple[npt.NDArray[np.bool_], UIntArray]:
    """m = floor((2c + n) * 2^64 / max(2S, 1)) per row, as (m >= 2^64, m mod 2^64);
    rows grouped by source.

    m reaches 2^64 only for a zero-token document at the very end of its source."""
    import numpy as np

    x = (2 * c_before + n).astype(np.uint64)
    low = np.zeros(len(n), dtype=np.uint64)
    high = np.zeros(len(n), dtype=bool)
    for start, end in zip(*_runs(srank), strict=True):  # rows are grouped by source
        rows = slice(int(start), int(end))
        divisor = max(2 * int(totals[srank[start]]), 1)
        high[rows] = x[rows] == divisor
        low[rows] = _fraction_bits(np.where(high[rows], 0, x[rows]), divisor)
    return high, low


def _fraction_bits(x: UIntArray, divisor: int) -> UIntArray:
    """floor(x * 2^64 / divisor) for 0 <= x < divisor, by long division in digits as wide
    as keep `remainder << width` below 2^64."""
    import numpy as np

    width = 64 - divisor.bit_length()
    if width < 1:  # a source of 2^62 tokens or more: exact, slowly
        return np.array([(int(v) << 64) // divisor for v in x.tolist()], dtype=np.uint64)
    d = np.uint64(divisor)
    quotient = np.zeros(len(x), dtype=np.uint64)
    remainder = x.astype(np.uint64)
    left = 64
    while left:
        bits = np.uint64(min(width, left))
        shifted = remainder << bits
        digit = shifted // d
        remainder = shifted - digit * d
        quotient = (quotient << bits) | digit
        left -= int(bits)
    return quotient


def content_hash_order(words: UIntArray) -> IntArray:
    """Rows (rids, in doc_id order) sorted by content hash, then doc_id: the order of the
    corpus's `document_hashes` table. `words` holds each hash as four big-endian 64-bit
    words (one row per document), so the order is exact whatever the hashes are (ready
    manifests may bring hashes that share long prefixes)."""
    import numpy as np

    order = np.argsort(words[:, 0])
    first = words[order, 0]
    tied = first[1:] == first[:-1]
    if tied.any():  # every duplicate document, and hashes that share their first word
        in_run = np.zeros(len(order), dtype=bool)
        in_run[1:] |= tied
        in_run[:-1] |= tied
        rows = np.flatnonzero(in_run)
        run = np.cumsum(np.r_[True, ~tied])[rows]  # runs of equal first words
        members = order[rows]
        rest = words[members]
        order[rows] = members[np.lexsort((members, rest[:, 3], rest[:, 2], rest[:, 1], run))]
    return order
