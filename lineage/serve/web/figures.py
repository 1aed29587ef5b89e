"""The numbers behind the explorer's plots and lists, computed with polars over the
store's frames (`Store.frame`): a stream's source mix step range by step range, a run's
per-step series, and a page of a corpus's documents."""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

if TYPE_CHECKING:
    from lineage.api import Store
    from lineage.stream.answers import Stream

T = TypeVar("T")
MIX_COLUMNS = 40  # step ranges a stream's source mix is cut into


def source_mix(store: Store, stream: Stream, *, columns: int = MIX_COLUMNS) -> dict[str, Any]:
    """Tokens of each source in each step range of the stream: the stream's steps cut
    into at most `columns` ranges of equal length. A document crossing a range's border
    counts in each range for the tokens it has there; separators count nowhere.

    A stream's occurrences never change under its name and digest, so the mix is kept
    per process for the next view (it reads the whole occurrence table)."""
    key = ("source_mix", str(store.root), stream.name, stream.occurrences_digest,
           stream.steps, stream.batch, stream.seq_len, columns)
    return kept(key, lambda: _source_mix(store, stream.name, stream.steps, stream.batch,
                                         stream.seq_len, columns))


_KEPT: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
_KEPT_LOCK = threading.Lock()
KEPT_ANSWERS = 32


def kept(key: tuple[Any, ...], compute: Callable[[], T]) -> T:
    """`compute()`, kept for the next call with the same key (the KEPT_ANSWERS most
    recently used). The key must name everything the answer depends on."""
    with _KEPT_LOCK:
        if key in _KEPT:
            _KEPT.move_to_end(key)
            return cast(T, _KEPT[key])
    value = compute()
    with _KEPT_LOCK:
        _KEPT[key] = value
        while len(_KEPT) > KEPT_ANSWERS:
            _KEPT.popitem(last=False)
    return value


def _source_mix(store: Store, name: str, steps: int, batch: int, seq_len: int,
                columns: int) -> dict[str, Any]:
    import polars as pl

    step_tokens = batch * seq_len
    span = max(1, math.ceil(steps / columns))
    width, end = span * step_tokens, steps * step_tokens
    start, stop = pl.col("stream_start"), pl.min_horizontal(pl.col("stream_end"), end)
    rows = (
        store.frame("occurrences")
        .filter((pl.col("stream") == name) & (start < end))
        .select("source", start.alias("a"), stop.alias("b"))
        .with_columns(pl.int_ranges(pl.col("a") // width, (pl.col("b") - 1) // width + 1)
                      .alias("range"))
        .explode("range")
        .with_columns((pl.min_horizontal(pl.col("b"), (pl.col("range") + 1) * width)
                       - pl.max_horizontal(pl.col("a"), pl.col("range") * width))
                      .alias("tokens"))
        .group_by("range", "source").agg(pl.col("tokens").sum())
        .sort("range", "source")
        .collect()
    )
    sources = sorted(set(rows["source"].to_list()))
    ranges = []
    for number in range(math.ceil(steps / span)):
        first = number * span
        ranges.append({"first_step": first, "last_step": min(first + span, steps) - 1,
                       "tokens": dict.fromkeys(sources, 0)})
    for number, source, tokens in rows.iter_rows():
        ranges[number]["tokens"][source] = tokens
    return {"steps_per_range": span, "sources": sources, "ranges": ranges}


def run_series(store: Store, run: str) -> dict[str, list[Any]]:
    """The run's recorded steps in order: loss, grad norm (before clipping), learning
    rate, and whether each step was clipped or skipped."""
    import polars as pl

    frame = (
        store.frame("steps")
        .filter(pl.col("run") == run)
        .select("step", "loss", "grad_norm", "lr", "clipped", "skipped")
        .sort("step")
        .collect()
    )
    return {name: frame[name].to_list() for name in frame.columns}


def corpus_documents(store: Store, corpus: str, *, offset: int, limit: int) -> dict[str, Any]:
    """One page of the corpus's documents in doc_id order, and how many there are."""
    import polars as pl

    frame = (store.frame("documents").filter(pl.col("corpus") == corpus)
             .select("doc_id", "source", "n_tokens", "n_bytes", "license"))
    total = frame.select(pl.len()).collect().item()
    rows = frame.sort("doc_id").slice(offset, limit).collect().to_dicts()
    return {"total": total, "offset": offset, "limit": limit, "documents": rows}
