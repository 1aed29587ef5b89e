# ruff: noqa: E501  (the phase table below reads better one entry a line)
"""Where an ingest spends its time: wall-clock timers wrapped around the library's steps.

For measurement only: `instrument()` replaces module-level functions and methods of the
library with timing wrappers for the duration of a `with` block and puts them back
afterwards. The library's files are not touched. Timers nest: a phase's time includes
its children's. A step that the library at hand does not have is skipped, so the same
table works across versions of the code; only what ran is reported.

The text-shard map runs in a spawned process pool that these wrappers cannot reach; call
the ingest with `workers=1` (the map then runs in this process) to see inside it.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

# (module, attribute [Class.method], label, depth). `label` may contain "{stage}": the
# `stage=` keyword of the write_parts call it runs in (one call per table written).
PATCHES: tuple[tuple[str, str, str, int], ...] = (
    ("lineage.ingest.corpus", "plan_inputs", "plan inputs (inputs.plan_inputs)", 0),
    ("lineage.ingest.corpus", "_map", "map (corpus._map)", 0),
    ("lineage.ingest.corpus", "list_directory", "list files (directory.list_directory)", 1),
    ("lineage.ingest.corpus", "stage_directory", "hash files + stage (directory.stage_directory)", 1),
    ("lineage.ingest.readers.directory", "_hash_entry", "read + BLAKE3 per file, summed over threads (directory.hash_file)", 2),
    ("lineage.ingest.readers.directory", "_columns_for", "build staged columns (directory._columns_for)", 2),
    ("lineage.ingest.corpus", "_run_shard_tasks", "text shards (corpus._run_shard_tasks)", 1),
    ("lineage.ingest.corpus", "stage_text_shard", "one shard, in-process (text_shards.stage_text_shard)", 2),
    ("lineage.ingest.readers.text_shards", "_open_records", "open DuckDB reader (text_shards._open_records)", 3),
    ("lineage.ingest.readers.text_shards", "_stage_batch", "stage batches (text_shards._stage_batch)", 3),
    ("lineage.ingest.readers.text_shards", "_hash_texts", "BLAKE3 per text (text_shards._hash_texts)", 4),
    ("lineage.ingest.corpus", "reduce_corpus", "reduce (corpus_reduce.reduce_corpus)", 0),
    ("lineage.ingest.corpus_reduce", "load_manifests", "load manifests into DuckDB (manifests.load_manifests)", 1),
    ("lineage.ingest.corpus_reduce", "apply_licenses", "apply licences (corpus_reduce.apply_licenses)", 1),
    ("lineage.ingest.corpus_reduce", "check_rows", "row rules (corpus_reduce.check_rows)", 1),
    ("lineage.ingest.corpus_reduce", "summarize_sources", "per-source summary (corpus_reduce.summarize_sources)", 1),
    ("lineage.ingest.corpus_reduce", "_totals", "totals (corpus_reduce._totals)", 1),
    ("lineage.ingest.corpus_reduce", "write_sorted_parts", "documents by doc_id (corpus_reduce.write_sorted_parts)", 1),
    ("lineage.ingest.corpus_reduce", "write_hash_index", "hash index by content_hash (corpus_reduce.write_hash_index)", 1),
    ("lineage.ingest.corpus_reduce", "write_parts", "write parts [{stage}] (parts.write_parts)", 2),
    ("lineage.store.parts", "conform", "cast batches to schema [{stage}] (parts.conform)", 3),
    ("lineage.corpora.digest", "LineHasher.update", "manifest hash [{stage}] (digest.LineHasher.update)", 3),
    ("lineage.store.parts", "_RotatingWriter.write", "Parquet zstd write [{stage}] (parts._RotatingWriter.write)", 3),
    ("lineage.store.parts", "_HashingFile.close", "fsync a part, SHA-256 as written [{stage}] (parts._HashingFile.close)", 4),
    ("lineage.ingest.corpus", "_commit", "commit under catalog lock (corpus._commit)", 0),
    ("lineage.ingest.corpus", "remove_quietly", "remove staging (durable.remove_quietly)", 0),
)  # fmt: skip

# Time spent waiting for the next sorted batch from DuckDB inside write_parts.
FETCH = "DuckDB: fetch sorted batches as Arrow [{stage}]"
# write_X minus its write_parts: the query up to an open reader (DuckDB sorts here).
SORT = "DuckDB: ORDER BY until the reader is open [{stage}] (derived)"
_STAGE_OF = {"write_sorted_parts": "writing documents",
             "write_hash_index": "indexing content hashes"}


class PhaseTimer:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self.depth: dict[str, int] = {}
        self.order: list[str] = []
        self.stage = "-"  # the `stage=` of the write_parts call in progress

    def add(self, name: str, seconds: float, depth: int) -> None:
        if name not in self.seconds:
            self.seconds[name] = 0.0
            self.calls[name] = 0
            self.depth[name] = depth
            self.order.append(name)
        self.seconds[name] += seconds
        self.calls[name] += 1

    def wrap(self, label: str, depth: int, fn: Callable[..., Any],
             reader_arg: bool = False) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            outer_stage = self.stage
            if reader_arg:
                self.stage = str(kwargs.get("stage", "-"))
            name = label.format(stage=self.stage)
            if name not in self.seconds:  # reserve the slot: parents list before children
                self.add(name, 0.0, depth)
                self.calls[name] -= 1
            if reader_arg and args:
                fetch = FETCH.format(stage=self.stage)
                args = (_timed_reader(self, args[0], fetch, depth + 1), *args[1:])
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.add(name, time.perf_counter() - started, depth)
                self.stage = outer_stage

        return timed

    def report(self) -> list[dict[str, Any]]:
        rows = [{"phase": name, "depth": self.depth[name], "seconds": round(self.seconds[name], 4),
                 "calls": self.calls[name]} for name in self.order]
        for attr, stage in _STAGE_OF.items():
            parent = next((r for r in rows if r["phase"].endswith(f"(corpus_reduce.{attr})")), None)
            child = self.seconds.get(f"write parts [{stage}] (parts.write_parts)")
            if parent is not None and child is not None:
                at = rows.index(parent) + 1
                rows.insert(at, {"phase": SORT.format(stage=stage), "depth": 2,
                                 "seconds": round(parent["seconds"] - child, 4), "calls": 1})
        return rows


def _timed_reader(timer: PhaseTimer, reader: Any, name: str, depth: int) -> Iterator[Any]:
    iterator = iter(reader)
    while True:
        started = time.perf_counter()
        try:
            batch = next(iterator)
        except StopIteration:
            timer.add(name, time.perf_counter() - started, depth)
            return
        timer.add(name, time.perf_counter() - started, depth)
        yield batch


@contextmanager
def instrument(*, in_process_shards: bool = False) -> Iterator[PhaseTimer]:
    """Time the ingest's phases inside the block; yields the timer.

    `in_process_shards`: also wrap `stage_text_shard`, which is only safe when the ingest
    runs with `workers=1` (a process pool must pickle the original function).
    """
    timer = PhaseTimer()
    saved: list[tuple[Any, str, Any]] = []
    try:
        for module_name, attr, label, depth in PATCHES:
            if attr == "stage_text_shard" and not in_process_shards:
                continue
            try:
                owner: Any = importlib.import_module(module_name)
            except ImportError:
                continue
            *path, name = attr.split(".")
            for part in path:
                owner = getattr(owner, part, None)
            if owner is None or not hasattr(owner, name):
                continue
            original = inspect.getattr_static(owner, name)
            saved.append((owner, name, original))
            setattr(owner, name, timer.wrap(label, depth, original,
                                            reader_arg=name == "write_parts"))
        yield timer
    finally:
        for owner, name, original in reversed(saved):
            setattr(owner, name, original)


def format_report(rows: list[dict[str, Any]], total: float) -> list[str]:
    lines = [f"{'seconds':>9s} {'share':>6s} {'calls':>6s}  phase"]
    for row in rows:
        share = 100 * row["seconds"] / total if total else 0.0
        lines.append(f"{row['seconds']:9.3f} {share:5.1f}% {row['calls']:6d}  "
                     f"{'  ' * row['depth']}{row['phase']}")
    return lines
