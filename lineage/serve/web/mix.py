"""A stream's tokens by source in step ranges, read from its occurrence parts.

The source mix needs every occurrence of the stream but only three of its columns
(source, stream_start, stream_end), so each part is read once, every range of it (each
row group and the footer) checked against the catalog's BLAKE3 as lookups check theirs
(lineage/store/part_check.py), and only those three columns are decoded, by polars,
from the checked bytes: nothing unchecked is decoded. Parts are read two at a time
(reading, hashing and decoding release the GIL). At 10M occurrences this is about a
fifth of scanning the whole table through a frame; docs/performance.md has the figures.
"""

from __future__ import annotations

import io
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from lineage.store.part_check import checked_ranges
from lineage.store.parts import PartEntry, candidate_parts, key_admits

if TYPE_CHECKING:
    import numpy as np
    import polars as pl

    from lineage.store.base import BaseStore

COLUMNS = ("source", "stream_start", "stream_end")
READERS = 2  # parts read at once: the serving machine's cores are shared with the server


def tokens_by_range(store: BaseStore, stream: str, bounds: tuple[int, ...]) -> dict[str, Any]:
    """Tokens of each source inside each [bounds[i], bounds[i + 1]) of the stream's tokens
    (`bounds` ascending): {"sources": sorted names, "tokens": [{source: tokens}, ...]}. An
    occurrence crossing a bound counts on each side for the tokens it has there."""
    with store.reader(views=False) as con:
        parts = candidate_parts(con, store, "occurrences", stream,
                                key_admits(span=(bounds[0], bounds[-1])))
    with ThreadPoolExecutor(max_workers=READERS) as pool:
        counted = list(pool.map(lambda part: _part_tokens(store, part, bounds), parts))
    sources = sorted({source for found in counted for _, source in found})
    tokens = [dict.fromkeys(sources, 0) for _ in bounds[1:]]
    for found in counted:
        for (number, source), count in found.items():
            tokens[number][source] += count
    return {"sources": sources, "tokens": tokens}


def _part_tokens(store: BaseStore, part: PartEntry, bounds: tuple[int, ...],
                 ) -> dict[tuple[int, str], int]:
    """Tokens of each source of one part in each range of `bounds`, by (range, source)."""
    import numpy as np
    import polars as pl

    rows = _read_checked(store, part)
    edges = np.asarray(bounds, dtype=np.int64)
    start = rows["stream_start"].to_numpy()
    stop = np.minimum(rows["stream_end"].to_numpy(), edges[-1])
    first = _range_of(edges, start)
    following = edges[np.minimum(first + 1, len(edges) - 1)]  # where the range ends
    counted = (rows.lazy()
               .with_columns(pl.Series("range", first),
                             pl.Series("tokens", np.minimum(stop, following) - start))
               .filter(pl.col("tokens") > 0)
               .group_by("range", "source").agg(pl.col("tokens").sum())
               .collect())
    found = {(number, source): tokens for number, source, tokens in counted.iter_rows()}
    # the few occurrences that go on past their range's end: the rest in the next ranges
    for row in np.flatnonzero(stop > following).tolist():
        source = rows["source"][row]
        for number in range(int(first[row]) + 1, len(bounds) - 1):
            tokens = min(int(stop[row]), bounds[number + 1]) - bounds[number]
            if tokens <= 0:
                break
            found[number, source] = found.get((number, source), 0) + tokens
    return found


def _range_of(edges: np.ndarray[Any, Any], start: np.ndarray[Any, Any]) -> Any:
    """The range of `edges` each start lies in (-1 before the first). A part is written in
    stream order, so its rows are cut into ranges by a binary search for each edge; the
    search for each row is the fallback for a part that is not."""
    import numpy as np

    if len(start) and bool((start[1:] >= start[:-1]).all()):
        cuts = np.searchsorted(start, edges, side="left")
        return np.repeat(np.arange(-1, len(edges)), np.diff(cuts, prepend=0, append=len(start)))
    return np.searchsorted(edges, start, side="right") - 1


def _read_checked(store: BaseStore, part: PartEntry) -> pl.DataFrame:
    """The part's source and token range columns, decoded from bytes checked against the
    catalog (a part without a record of row groups: its whole file checked, then read)."""
    import polars as pl

    checked = checked_ranges(store.root, part.path, part.n_bytes, part.sha256,
                             part.row_groups)
    source: Any = checked.path if checked.whole else io.BytesIO(
        b"".join(checked.data[start] for start in sorted(checked.data)))
    return pl.read_parquet(source, columns=list(COLUMNS), parallel="none")
