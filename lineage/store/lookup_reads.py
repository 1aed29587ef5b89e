"""A lookup answered from the catalog rows an earlier lookup kept, else through DuckDB
with what it reads recorded and kept for the next one (lineage/store/kept_reads.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from lineage.store.base import BaseStore, marked_cursor, shared_instance_started
from lineage.store.kept_reads import KeptReads, Recorder
from lineage.store.notices import add_notice, take_notices

T = TypeVar("T")


def with_kept_reads(store: BaseStore, question: Callable[[], T]) -> T:
    """`question()`, which reads the catalog through `store.reader(views=False)`.

    Kept reads answer it when they hold every query it sends; an error it raises from
    them is the error DuckDB's rows would give (they are the same rows). A query they do
    not hold: asked again through DuckDB, recording, and what it read is kept once the
    catalog is seen to be in the state it was read from. Not used where this process
    has started DuckDB (a lock taken on the catalog by other means would be released
    with DuckDB's)."""
    earlier = take_notices()  # said again below: only the attempt's own are dropped
    kept = None if shared_instance_started() else KeptReads.open(store.catalog_path)
    if kept is not None:
        store.catalog_reads = kept
        try:
            answer = question()
            if not kept.missed:
                return answer
        except BaseException:
            if not kept.missed:
                raise
        finally:
            kept.close()
            store.catalog_reads = None
            if not kept.missed:
                _say_first(earlier)
        take_notices()  # the abandoned attempt's
    _say_first(earlier)
    recorder = Recorder()
    store.catalog_reads = recorder
    try:
        answer = question()
    finally:
        store.catalog_reads = None
    recorder.keep(store.catalog_path, marked_cursor(store.catalog_path))
    return answer


def _say_first(notices: list[str]) -> None:
    later = take_notices()
    for text in [*notices, *later]:
        add_notice(text)
