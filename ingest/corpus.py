"""`ingest_corpus`: record a corpus manifest in the store.

Map (hash every document of every input shard, in parallel, into staged Parquet parts),
reduce (check all rows, sort by doc_id, hash the manifest, write the final parts under
temporary names), then one short commit under the catalog lock: rename the parts into
place and register them with the corpus. Nothing before the commit is visible, and a
process killed anywhere leaves the store as it was.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from fnmatch import fnmatchcase as fnmatch
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from lineage.api import Store
from lineage.corpora.manifest import MANIFEST_SPEC, NAME_RULE, is_valid_name
from lineage.corpora.token_count import TokenizerSpec, parse_tokenizer
from lineage.errors import ConflictError, InputError, StoreError, UsageError
from lineage.ingest.corpus_reduce import LicensePlan, ReducedCorpus, reduce_corpus
from lineage.ingest.engine import Executor
from lineage.ingest.inputs import DirectoryInput, ShardInput, plan_inputs
from lineage.ingest.readers.directory import (
    DirectoryListing,
    list_directory,
    stage_directory,
)
from lineage.ingest.readers.text_shards import TextShardTask, stage_text_shard
from lineage.ingest.shard_tasks import (
    FilesTask,
    files_tasks,
    manifest_tasks,
    stage_files,
    stage_manifest,
)
from lineage.ingest.staging import ShardSummary, StagedParts
from lineage.ingest.text_reduce import TEXT_TABLES
from lineage.ingest.walk import DEFAULT_LINKS, WalkCounts
from lineage.store import faults
from lineage.store.arrays_write import discard_arrays, prepare_corpus_arrays, publish_arrays
from lineage.store.durable import guarded_write, remove_abandoned_temps, remove_quietly
from lineage.store.parts import discard_parts, publish_parts, unpublish_unless_unknown
from lineage.store.parts import report as report_progress
from lineage.store.scratch import new_staging_dir
from lineage.text.match import check_unicode_version, text_indexes
from lineage.version import __version__

Progress = Any  # callable(stage: str, done: int | None, total: int | None) or None


@dataclass
class CorpusIngestResult:
    corpus: str
    status: str  # "added" | "unchanged"
    manifest_hash: str
    manifest_spec: str
    documents: int
    tokens: int
    bytes: int
    dropped_empty: int
    tokenizer: str
    sources: list[dict[str, Any]]
    skipped_hidden: int = 0
    skipped_links: int = 0  # links not read (--links skip or refuse); every one counted
    followed_links: int = 0  # links read: --links follow, and a hub cache's blob links
    parts: list[str] = field(default_factory=list)
    seconds: float = 0.0
    text_index: dict[str, Any] | None = None  # the text_indexes row, when one was built

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@guarded_write
def ingest_corpus(
    store: Store,
    paths: list[str | os.PathLike[str]],
    *,
    corpus: str,
    source: str | None = None,
    license: str | list[str] | None = None,
    tokenizer: str | None = "bytes",
    fmt: str = "auto",
    workers: int | None = None,
    progress: Progress = None,
    fingerprints: bool | None = None,
    links: str = DEFAULT_LINKS,
    executor: Executor | None = None,
) -> CorpusIngestResult:
    """Hash, check and record a corpus; re-ingesting identical input changes nothing.

    `license` is an SPDX id for every document that names none, or a list of such ids
    and `SOURCE=SPDX` entries (per source first, then the plain one). `fingerprints`
    (default: on for documents with text, off for ready manifests) builds the text index
    (docs/text-spec.md); for ready manifests it reads each document from its local `uri`.
    `links` says what a symbolic link in a folder becomes (ingest/walk.py): "skip" (the
    default: not read, counted), "follow" or "refuse" (a link leading out stops the
    ingest); a hub cache snapshot's links to its own blobs are read in every mode.
    `executor` runs the map's tasks elsewhere (ingest/engine.py; None: this machine's
    pools); the store that results is the same.
    """
    started = time.monotonic()
    started_at = time.time()
    _check_names(corpus, source)
    licenses = parse_licenses(license)
    store.require_catalog()
    spec = parse_tokenizer(tokenizer)
    walked = WalkCounts()
    planned = plan_inputs([Path(p) for p in paths], fmt, links=links, counts=walked)
    manifests = [p for p in planned if isinstance(p, ShardInput) and p.kind.startswith("manifest")]
    raw = [p for p in planned if p not in manifests]
    if manifests and raw:
        raise UsageError("one ingest takes either ready manifests or raw documents, not both")
    if manifests and spec.kind != "bytes":
        raise UsageError("ready manifests carry their own n_tokens: drop --tokenizer")
    tokenizer_id = "manifest" if manifests else spec.identity
    index_text = bool(raw) if fingerprints is None else fingerprints
    if index_text:
        _check_unicode_early(store)

    staging = new_staging_dir(store.staging_dir)
    for table in ("documents", "document_hashes", *TEXT_TABLES):
        remove_abandoned_temps(store.table_dir(table))
    reduced: ReducedCorpus | None = None
    try:
        if executor is None:
            staged, dropped = map_locally(raw, staging, corpus, source, spec, workers,
                                          progress, index_text, links, walked)
        else:
            staged, dropped = map_on(executor, raw, manifests, staging, corpus, source,
                                     spec, index_text, links, walked)
        faults.reach("map-done")
        reduced = reduce_corpus(
            corpus=corpus, staged_parts=staged,
            manifests=manifests if executor is None else [], licenses=licenses,
            staging=staging, out_dir=store.tables_dir, progress=progress,
            text_index=index_text, manifest_rows=executor is not None and bool(manifests),
            lookup_arrays=True,
        )
        reduced.dropped_empty += dropped
        if reduced.documents == 0:
            discard_parts(reduced.all_parts())
            raise InputError(
                ", ".join(str(p) for p in paths),
                f"no documents to ingest ({reduced.dropped_empty} empty dropped)",
            )
        record = _IngestRecord(corpus, tokenizer_id, planned, source, licenses, fmt, started_at,
                               links)
        try:
            status, final = _commit(store, reduced, record)
        except BaseException:
            discard_parts(reduced.all_parts())  # e.g. store busy: the temp parts are nobody's
            raise
    finally:
        if reduced is not None and reduced.arrays is not None:
            reduced.arrays.close()  # its spools' files go with the staging folder
        remove_quietly(staging)
    return CorpusIngestResult(
        corpus=corpus, status=status, manifest_hash=reduced.manifest_hash,
        manifest_spec=MANIFEST_SPEC, documents=reduced.documents, tokens=reduced.tokens,
        bytes=reduced.bytes, dropped_empty=reduced.dropped_empty, tokenizer=tokenizer_id,
        sources=reduced.sources, skipped_hidden=walked.skipped_hidden,
        skipped_links=walked.skipped_links, followed_links=walked.followed_links, parts=final,
        seconds=round(time.monotonic() - started, 3),
        text_index=reduced.text_index.catalog_row(corpus) if reduced.text_index else None,
    )


def _check_unicode_early(store: Store) -> None:
    """Before the long work: a store's text indexes share one Unicode version. A store
    that cannot be read now (an older schema, busy) is checked at the commit instead,
    which migrates it first."""
    try:
        with store.reader(views=False) as con:
            indexes = text_indexes(con)
    except StoreError:
        return
    check_unicode_version(indexes, building=True)


def _check_names(corpus: str, source: str | None) -> None:
    if not is_valid_name(corpus):
        raise UsageError(f"--corpus {corpus!r}: {NAME_RULE}")
    if source is not None and (not source or any(ord(c) < 32 for c in source)):
        raise UsageError(f"--source {source!r}: must be non-empty, without control characters")


def parse_licenses(value: str | list[str] | None) -> LicensePlan:
    """`SPDX` and `SOURCE=SPDX` entries into a plan; at most one plain default."""
    entries = [value] if isinstance(value, str) else list(value or [])
    default: str | None = None
    by_source: dict[str, str] = {}
    for entry in entries:
        name, sep, spdx = entry.partition("=")
        if not sep:
            name, spdx = "", entry
        if not spdx.strip() or any(ord(c) < 32 for c in entry):
            raise UsageError(f"--license {entry!r}: expected SPDX or SOURCE=SPDX")
        if not name:
            if default is not None:
                raise UsageError("--license: give at most one licence without SOURCE=")
            default = spdx.strip()
        else:
            by_source[name] = spdx.strip()
    return LicensePlan(default, tuple(sorted(by_source.items())))


def map_locally(
    raw: list[DirectoryInput | ShardInput],
    staging: Path,
    corpus: str,
    source: str | None,
    spec: TokenizerSpec,
    workers: int | None,
    progress: Progress,
    index_text: bool,
    links: str,
    walked: WalkCounts,
) -> tuple[StagedParts, int]:
    """Stage every raw input; returns (staged parts, empty documents). What the folder
    walks left out or followed is added to `walked`."""
    summaries: list[ShardSummary] = []
    tasks: list[TextShardTask] = []
    for item in raw:
        if isinstance(item, DirectoryInput):
            listing = _listing(item, source, links, walked)
            summaries.append(stage_directory(
                item.root, listing, staging, tokenizer=spec,
                progress=progress, workers=workers, fingerprints=index_text,
            ))
        else:
            tasks.append(_shard_task(item, len(tasks), staging, source, corpus, spec,
                                     index_text))
    summaries.extend(_run_shard_tasks(tasks, workers, progress))
    return _staged(summaries)


def _listing(item: DirectoryInput, source: str | None, links: str,
             walked: WalkCounts) -> DirectoryListing:
    """The folder's files (a Croissant FileSet's globs applied); what its walk left out
    or followed is added to `walked`."""
    listing = list_directory(item.root, source=source, links=links)
    if item.includes:
        listing.files = [f for f in listing.files if _selected(f.doc_id, item)]
    walked.skipped_hidden += listing.skipped_hidden
    walked.skipped_links += listing.skipped_links
    walked.followed_links += listing.followed_links
    return listing


def _shard_task(item: ShardInput, index: int, staging: Path, source: str | None, corpus: str,
                spec: TokenizerSpec, index_text: bool) -> TextShardTask:
    part = staging / f"shard-{index:05d}.parquet"
    prints = staging / f"shard-{index:05d}.fingerprints.parquet"
    return TextShardTask(str(item.path), item.kind, item.name, str(part), source, corpus,
                         spec, str(prints) if index_text else None)


def _staged(summaries: list[ShardSummary]) -> tuple[StagedParts, int]:
    """The staged parts of every input, and how many empty documents were dropped."""
    parts = StagedParts(
        documents=[s.part for s in summaries if s.part is not None],
        fingerprints=[s.fingerprint_part for s in summaries if s.fingerprint_part],
        near=[s.near_part for s in summaries if s.near_part],
    )
    return parts, sum(s.dropped_empty for s in summaries)


def _selected(doc_id: str, item: DirectoryInput) -> bool:
    return (any(fnmatch(doc_id, g) for g in item.includes)
            and not any(fnmatch(doc_id, g) for g in item.excludes))


def _run_shard_tasks(
    tasks: list[TextShardTask], workers: int | None, progress: Progress
) -> list[ShardSummary]:
    """One task per shard, on a spawn-based process pool when there is more than one."""
    count = min(len(tasks), workers or os.cpu_count() or 1)
    results: list[ShardSummary] = []
    if count <= 1:
        for done, task in enumerate(tasks, start=1):
            results.append(stage_text_shard(task))
            report_progress(progress, "reading shards", done, len(tasks))
        return results
    with ProcessPoolExecutor(max_workers=count, mp_context=get_context("spawn")) as pool:
        for done, summary in enumerate(pool.map(stage_text_shard, tasks), start=1):
            results.append(summary)
            report_progress(progress, "reading shards", done, len(tasks))
    return results


def map_on(
    executor: Executor,
    raw: list[DirectoryInput | ShardInput],
    manifests: list[ShardInput],
    staging: Path,
    corpus: str,
    source: str | None,
    spec: TokenizerSpec,
    index_text: bool,
    links: str,
    walked: WalkCounts,
) -> tuple[StagedParts, int]:
    """`_map` as independent tasks of `executor`: a folder's files in chunks, each text
    shard, each ready manifest; returns (staged parts, empty documents)."""
    folders: list[FilesTask] = []
    shards: list[TextShardTask] = []
    for item in raw:
        if isinstance(item, DirectoryInput):
            listing = _listing(item, source, links, walked)
            if spec.kind == "input":  # as stage_directory says, before hashing anything
                raise InputError(item.root, "--tokenizer input needs shards with a "
                                 "token_count column")
            folders += files_tasks(item.root, listing.files, staging, len(folders),
                                   tokenizer=spec, fingerprints=index_text)
        else:
            shards.append(_shard_task(item, len(shards), staging, source, corpus, spec,
                                      index_text))
    return _staged([*executor.map(stage_files, folders),
                    *executor.map(stage_text_shard, shards),
                    *executor.map(stage_manifest, manifest_tasks(manifests, staging))])


@dataclass
class _IngestRecord:
    corpus: str
    tokenizer: str
    planned: list[DirectoryInput | ShardInput]
    source: str | None
    licenses: LicensePlan
    fmt: str
    started_at: float
    links: str = DEFAULT_LINKS

    def inputs_json(self) -> str:
        items = []
        for item in self.planned:
            if isinstance(item, DirectoryInput):
                entry: dict[str, Any] = {"kind": "files", "path": str(item.root.resolve())}
                if item.includes:
                    entry |= {"includes": list(item.includes), "excludes": list(item.excludes)}
            else:
                entry = {"kind": item.kind, "path": str(item.path.resolve()),
                         "bytes": item.path.stat().st_size}
            if item.croissant is not None:  # named by a Croissant file's distribution
                entry["croissant"] = str(item.croissant.resolve())
            items.append(entry)
        return json.dumps(items, sort_keys=True)

    def parameters_json(self) -> str:
        license = {"default": self.licenses.default, "by_source": dict(self.licenses.by_source)}
        return json.dumps({"source": self.source, "license": license, "links": self.links,
                           "tokenizer": self.tokenizer, "format": self.fmt}, sort_keys=True)


def _commit(store: Store, reduced: ReducedCorpus, record: _IngestRecord) -> tuple[str, list[str]]:
    """Rename the parts into place and register everything in one short transaction."""
    digest = reduced.manifest_hash.split(":", 1)[1][:16]
    relative: list[str] = []
    renamed: list[str] = []
    arrays = [prepare_corpus_arrays(store, record.corpus, f"{record.corpus}-{digest}",
                                    reduced.hash_parts, reduced.parts, reduced.arrays)]
    try:
        with store.writer() as con:
            faults.reach("commit-locked")
            row = con.execute("SELECT manifest_hash FROM corpora WHERE name = ?",
                              [record.corpus]).fetchone()
            if row is not None:
                discard_parts(reduced.all_parts())
                discard_arrays(arrays)
                if row[0] == reduced.manifest_hash:
                    return "unchanged", []
                raise ConflictError(
                    f"corpus {record.corpus!r} already holds other content ({row[0]}, this "
                    f"input is {reduced.manifest_hash}); choose another --corpus name"
                )
            name = f"{record.corpus}-{digest}"
            relative = publish_parts(con, store, table="documents", owner=record.corpus,
                                     name=name, parts=reduced.parts)
            relative += publish_parts(con, store, table="document_hashes",
                                      owner=record.corpus, name=name, parts=reduced.hash_parts)
            renamed = publish_arrays(con, store, arrays)  # not parts: left out of the answer
            text = reduced.text_index
            if text is not None:
                for table, parts in (("text_documents", text.document_parts),
                                     ("text_hashes", text.hash_parts),
                                     ("fingerprints", text.fingerprint_parts),
                                     ("near_bands", text.near_parts)):
                    relative += publish_parts(con, store, table=table, owner=record.corpus,
                                              name=name, parts=parts)
                index_row = text.catalog_row(record.corpus)
                # Checked again under the lock: another ingest may have indexed meanwhile.
                check_unicode_version(text_indexes(con), building=True)
                con.execute(f"INSERT INTO text_indexes ({', '.join(index_row)}) "
                            f"VALUES ({', '.join('?' * len(index_row))})",
                            list(index_row.values()))
            faults.reach("commit-renamed")
            _register(con, reduced, record)
            faults.reach("commit-registered")
    except BaseException as exc:
        discard_arrays(arrays)
        unpublish_unless_unknown(store, [*relative, *renamed], exc)  # not committed: not data
        raise
    return "added", relative


def _register(con: Any, reduced: ReducedCorpus, record: _IngestRecord) -> None:
    now = "now()::TIMESTAMP"
    con.execute(
        f"INSERT INTO corpora VALUES (?, ?, ?, ?, ?, ?, ?, ?, {now})",
        [record.corpus, reduced.manifest_hash, MANIFEST_SPEC, reduced.documents,
         reduced.tokens, reduced.bytes, reduced.dropped_empty, record.tokenizer],
    )
    for src in reduced.sources:
        con.execute(
            "INSERT INTO corpus_sources VALUES (?, ?, ?, ?, ?, ?)",
            [record.corpus, src["source"], src["documents"], src["tokens"], src["bytes"],
             src["licenses"]],
        )
    con.execute(
        f"INSERT INTO ingests VALUES (?, 'corpus', ?, ?, ?, to_timestamp(?)::TIMESTAMP, {now}, ?)",
        [str(uuid.uuid4()), record.corpus, record.inputs_json(), record.parameters_json(),
         record.started_at, __version__],
    )
