"""The numbers behind the explorer's plots and lists, computed with polars over the
store's frames (`Store.frame`): a stream's source mix step range by step range, a run's
per-step series, and a page of a corpus's documents."""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from lineage.stream.schedule import BatchSchedule

if TYPE_CHECKING:
    from lineage.api import Store
    from lineage.stream.answers import Stream

T = TypeVar("T")
MIX_COLUMNS = 40  # step ranges a stream's source mix is cut into


def stream_schedule_of(stream: Stream) -> BatchSchedule:
    """The stream's windows per step: lineage.stream.query's `stream_schedule` where the
    store knows batch-size schedules, else the fixed batch every stream then had."""
    import importlib

    # Looked up by name so that this module serves stores of either version unchanged.
    query = importlib.import_module("lineage.stream.query")
    read = getattr(query, "stream_schedule", None)
    if read is None:
        return BatchSchedule.fixed(stream.batch)
    schedule: BatchSchedule = read(stream)
    return schedule


def source_mix(store: Store, stream: Stream, *, columns: int = MIX_COLUMNS) -> dict[str, Any]:
    """Tokens of each source in each step range of the stream: the stream's steps cut
    into at most `columns` ranges of equal length in steps (the windows of a range follow
    the stream's schedule). A document crossing a range's border counts in each range for
    the tokens it has there; separators count nowhere.

    A stream's occurrences never change under its name and digest, so the mix is kept
    per process for the next view (it reads three columns of every occurrence:
    lineage/serve/web/mix.py)."""
    from lineage.serve.web.mix import tokens_by_range

    schedule = stream_schedule_of(stream)
    span = max(1, math.ceil(stream.steps / columns))
    firsts = [*range(0, stream.steps, span), stream.steps]
    bounds = tuple(schedule.first_window(step) * stream.seq_len for step in firsts)
    key = ("source_mix", str(store.root), stream.name, stream.occurrences_digest, bounds)
    mix = kept(key, lambda: tokens_by_range(store, stream.name, bounds,
                                            sources=_sources_of(store, stream)))
    ranges = [{"first_step": first, "last_step": following - 1, "tokens": tokens}
              for first, following, tokens in zip(firsts[:-1], firsts[1:], mix["tokens"],
                                                  strict=True)]
    return {"steps_per_range": span, "sources": mix["sources"], "ranges": ranges}


def _sources_of(store: Store, stream: Stream) -> list[str]:
    """The sources of the stream's corpus, as the catalog lists them."""
    return [s["source"] for s in store.corpus(stream.corpus).to_dict()["sources"]]


_KEPT: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
_KEPT_LOCK = threading.Lock()
_COMPUTING: dict[tuple[Any, ...], threading.Lock] = {}  # by key, while one is computed
KEPT_ANSWERS = 32


def kept(key: tuple[Any, ...], compute: Callable[[], T]) -> T:
    """`compute()`, kept for the next call with the same key (the KEPT_ANSWERS most
    recently used). The key must name everything the answer depends on. Two requests
    for the same key at once compute it once: the second waits for the first's answer
    (a cold stream page reads the whole occurrence table). A failed computation is not
    kept."""
    with _KEPT_LOCK:
        if key in _KEPT:
            _KEPT.move_to_end(key)
            return cast(T, _KEPT[key])
        computing = _COMPUTING.setdefault(key, threading.Lock())
    with computing:
        with _KEPT_LOCK:
            if key in _KEPT:  # computed while this request waited
                _KEPT.move_to_end(key)
                return cast(T, _KEPT[key])
        try:
            value = compute()
            with _KEPT_LOCK:
                _KEPT[key] = value
                while len(_KEPT) > KEPT_ANSWERS:
                    _KEPT.popitem(last=False)
        finally:
            with _KEPT_LOCK:
                _COMPUTING.pop(key, None)
    return value


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


LISTED_COLUMNS = ("doc_id", "source", "n_tokens", "n_bytes", "license")  # a corpus page's


def corpus_documents(store: Store, corpus: str, *, offset: int, limit: int) -> dict[str, Any]:
    """One page of the corpus's documents in doc_id order, and how many there are. The
    corpus's `documents` parts are sorted by doc_id and follow one another, so the page is
    read from the row groups that hold it (each checked), not from the whole table."""
    from lineage.store.part_read import rows_at

    with store.reader(views=False) as con:
        total, rows = rows_at(con, store, "documents", corpus, LISTED_COLUMNS,
                              offset=offset, limit=limit)
    return {"total": total, "offset": offset, "limit": limit, "documents": rows}

