"""A stream's tokens by source in step ranges, read from its occurrence parts.

The source mix needs every occurrence of the stream but only three of its columns
(source, stream_start, stream_end), so each part is read once, every range of it (each
row group and the footer) checked against the catalog's BLAKE3 as lookups check theirs
(lineage/store/part_check.py), and only those three columns are decoded, by polars,
from the checked bytes: nothing unchecked is decoded. Parts are read two at a time
(reading, hashing and decoding release the GIL). At 10M occurrences this costs about
half the CPU of scanning the whole table through a frame; docs/performance.md has the
figures.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from lineage.store.part_check import checked_ranges
from lineage.store.part_select import PartEntry, candidate_parts, key_admits

if TYPE_CHECKING:
    import polars as pl

    from lineage.store.base import BaseStore

COLUMNS = ("source", "stream_start", "stream_end")
READERS = 2  # parts read at once: the serving machine's cores are shared with the server


def tokens_by_range(store: BaseStore, stream: str, bounds: tuple[int, ...], *,
                    sources: Sequence[str] = ()) -> dict[str, Any]:
    """Tokens of each source inside each [bounds[i], bounds[i + 1]) of the stream's tokens
    (`bounds` ascending): {"sources": sorted names, "tokens": [{source: tokens}, ...]}. An
    occurrence crossing a bound counts on each side for the tokens it has there.

    `sources`: the names the stream's sources are expected to have (its corpus's), so
    that they are decoded straight to numbers; a part with any other is read all the
    same, its names found first."""
    with store.reader(views=False) as con:
        parts = candidate_parts(con, store, "occurrences", stream,
                                key_admits(span=(bounds[0], bounds[-1])))
    with ThreadPoolExecutor(max_workers=READERS) as pool:
        counted = list(pool.map(lambda part: _part_tokens(store, part, bounds, sources),
                                parts))
    names = sorted({source for found in counted for source, count in found.items()
                    if any(count)})
    tokens = [dict.fromkeys(names, 0) for _ in bounds[1:]]
    for found in counted:
        for source in names:
            for number, count in enumerate(found.get(source, ())):
                tokens[number][source] += count
    return {"sources": names, "tokens": tokens}


def _part_tokens(store: BaseStore, part: PartEntry, bounds: tuple[int, ...],
                 sources: Sequence[str]) -> dict[str, list[int]]:
    """Tokens of each source of one part in each range of `bounds`."""
    import numpy as np

    rows = _read_checked(store, part)
    names, codes = _source_codes(rows["source"], sources)
    start, end = rows["stream_start"].to_numpy(), rows["stream_end"].to_numpy()
    if len(start) and not bool((start[1:] >= start[:-1]).all()):
        # parts are written in stream order; one that is not is put in it first
        order = np.argsort(start, kind="stable")
        start, end, codes = start[order], end[order], codes[order]
    edges = np.asarray(bounds, dtype=np.int64)
    cuts = np.searchsorted(start, edges, side="left")  # the first row of each range
    sums = np.zeros((len(bounds) - 1, len(names)), dtype=np.int64)
    for row in np.flatnonzero(end[:cuts[0]] > edges[0]).tolist():  # begun before the first
        _carry(sums, bounds, -1, int(codes[row]), int(end[row]))
    for number in range(len(bounds) - 1):
        first, after = int(cuts[number]), int(cuts[number + 1])
        if first == after:
            continue
        here = np.minimum(end[first:after], edges[number + 1]) - start[first:after]
        # Whole numbers below 2**53 add up exactly in float64 (a stream has far fewer tokens).
        sums[number] += np.bincount(codes[first:after], weights=here,
                                    minlength=len(names)).astype(np.int64)
        for row in np.flatnonzero(end[first:after] > edges[number + 1]).tolist():
            _carry(sums, bounds, number, int(codes[first + row]), int(end[first + row]))
    return {name: sums[:, code].tolist() for code, name in enumerate(names)}


def _carry(sums: Any, bounds: tuple[int, ...], number: int, code: int, end: int) -> None:
    """An occurrence that goes on past range `number`'s end (-1: begins before the first
    range): its tokens in the next ones."""
    for later in range(number + 1, len(bounds) - 1):
        if end <= bounds[later]:
            return
        sums[later, code] += min(end, bounds[later + 1]) - bounds[later]


def _source_codes(column: pl.Series, expected: Sequence[str]) -> tuple[list[str], Any]:
    """The names of the sources and each row's number among them: decoded against the
    expected names when every row has one of them, else against the names found."""
    import polars as pl

    names = sorted(set(expected))
    try:
        return names, column.cast(pl.Enum(names)).to_physical().to_numpy()
    except pl.exceptions.InvalidOperationError:
        names = column.unique().sort().to_list()
        return names, column.cast(pl.Enum(names)).to_physical().to_numpy()


def _read_checked(store: BaseStore, part: PartEntry) -> pl.DataFrame:
    """The part's source and token range columns, decoded from bytes checked against the
    catalog (a part without a record of row groups: its whole file checked, then read)."""
    import polars as pl

    checked = checked_ranges(store.root, part.path, part.n_bytes, part.sha256,
                             part.row_groups)
    source: Any = checked.path if checked.whole else io.BytesIO(
        b"".join(checked.data[start] for start in sorted(checked.data)))
    return pl.read_parquet(source, columns=list(COLUMNS), parallel="none")
