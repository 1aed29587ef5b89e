"""A lookup answered from the catalog rows an earlier lookup kept, else through DuckDB
with what it reads recorded and kept for the next one (lineage/store/kept_reads.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from lineage.store.base import BaseStore, marked_cursor, shared_instance_started
from lineage.store.kept_reads import KeptReads, ReadMiss, Recorder
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
    earlier = take_notices()  # said again first: only an abandoned attempt's are dropped
    try:
        kept = None if shared_instance_started() else KeptReads.open(store.catalog_path)
        if kept is not None:
            try:
                return _from_kept(store, kept, question)
            except ReadMiss:
                take_notices()  # the abandoned attempt's
        recorder = Recorder()
        store.catalog_reads = recorder
        try:
            answer = question()
        finally:
            store.catalog_reads = None
        recorder.keep(store.catalog_path, marked_cursor(store.catalog_path))
        return answer
    finally:
        later = take_notices()
        for text in [*earlier, *later]:
            add_notice(text)


def _from_kept(store: BaseStore, kept: KeptReads, question: Callable[[], T]) -> T:
    """`question()` from `kept`; ReadMiss when it sent a query they do not hold, even one
    the question caught and took for something else."""
    store.catalog_reads = kept
    try:
        answer = question()
    except BaseException as exc:
        if kept.missed and not isinstance(exc, ReadMiss):
            raise ReadMiss("a query the kept reads do not hold") from exc
        raise
    finally:
        kept.close()
        store.catalog_reads = None
    if kept.missed:
        raise ReadMiss("a query the kept reads do not hold")
    return answer
