"""`corpus_status`: does a local copy still match a recorded corpus, or a manifest someone
published? (What `dvc status` and `hf cache verify` answer for their own records.)

The local copy is read exactly as `ingest corpus` would read it (the same walk, hashing
and checks, with the recorded ingest's options unless others are given), into a scratch
folder that is removed afterwards; nothing is written to the store. The two sides are
then joined by doc_id: a document is new (local only), missing (reference only),
changed (other content hash) or unchanged.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lineage.api import Store
from lineage.corpora.answers import ChangedDocument, CorpusStatus
from lineage.corpora.token_count import parse_tokenizer
from lineage.errors import InputError, UnknownObjectError, UsageError
from lineage.ingest.corpus import map_locally, parse_licenses
from lineage.ingest.corpus_reduce import LicensePlan, ReducedCorpus, reduce_corpus
from lineage.ingest.inputs import ShardInput, plan_inputs
from lineage.ingest.readers.croissant import looks_like_croissant
from lineage.ingest.staging import StagedParts
from lineage.ingest.walk import DEFAULT_LINKS, WalkCounts
from lineage.store.base import sql_text
from lineage.store.durable import remove_quietly
from lineage.store.scratch import new_staging_dir

DEFAULT_LIMIT = 100
_COLUMNS = "doc_id, content_hash"


def corpus_status(
    store: Store | None,
    corpus: str | None,
    paths: Sequence[str | os.PathLike[str]],
    *,
    manifest: str | os.PathLike[str] | None = None,
    source: str | None = None,
    fmt: str | None = None,
    links: str | None = None,
    workers: int | None = None,
    limit: int = DEFAULT_LIMIT,
    progress: Any = None,
) -> CorpusStatus:
    """Compare `paths` (default: the folders and shards the corpus was ingested from) with
    the recorded corpus `corpus`, or with the ready manifest `manifest` (then no store is
    needed). `source`, `fmt` and `links` default to what the corpus's ingest used."""
    if (corpus is None) == (manifest is None):
        raise UsageError("compare with a recorded corpus (NAME) or a manifest (--manifest), "
                         "one of the two")
    if limit < 0:
        raise UsageError("--limit must be 0 or more")
    recorded: dict[str, Any] = {}
    if corpus is not None:
        if store is None:
            raise UsageError("a recorded corpus needs a store")
        recorded = _recorded_ingest(store, corpus)
    if not paths:
        paths = list(recorded.get("paths", []))
        if not paths:
            raise UsageError("give the PATHs of the local copy")
    parameters = recorded.get("parameters", {})
    links = links or parameters.get("links", DEFAULT_LINKS)
    walked = WalkCounts()
    planned = plan_inputs([Path(p) for p in paths], fmt or parameters.get("format", "auto"),
                          links=links, counts=walked)
    root = _scratch(store)
    try:
        local = _read_local(planned, root / "local",
                            source if source is not None else parameters.get("source"),
                            _licenses(parameters), links, workers, progress, walked)
        if manifest is not None:
            reference = _read_manifest(Path(manifest), root / "reference", progress)
            reference_name, reference_hash = str(Path(manifest).resolve()), \
                reference.manifest_hash
            reference_sql = _parts_sql(reference)
        else:
            reference_name = f"corpus {corpus}"
            reference_hash = recorded["manifest_hash"]
            reference_sql = None
        counts, lists = _compare(store, corpus, _parts_sql(local), reference_sql, limit)
    finally:
        remove_quietly(root)
    return CorpusStatus(
        reference=reference_name, reference_hash=reference_hash,
        local_hash=local.manifest_hash,
        in_sync=not (counts["new"] or counts["changed"] or counts["missing"]),
        recorded=counts["recorded"], local=counts["local"], unchanged=counts["unchanged"],
        new=counts["new"], changed=counts["changed"], missing=counts["missing"], limit=limit,
        new_documents=tuple(lists["new"]),
        changed_documents=tuple(ChangedDocument(**c) for c in lists["changed"]),
        missing_documents=tuple(lists["missing"]),
        paths=tuple(str(Path(p).resolve()) for p in paths),
        skipped_hidden=walked.skipped_hidden, skipped_links=walked.skipped_links,
    )


def _scratch(store: Store | None) -> Path:
    """Where the local copy's parts and DuckDB's spill go: the store's staging folder (on
    the store's disk, cleared of dead writers' folders), or a temporary folder when there
    is no store or it cannot be written (a read-only store is still compared)."""
    if store is not None and os.access(store.root, os.W_OK):
        return new_staging_dir(store.staging_dir)
    return Path(tempfile.mkdtemp(prefix="lineage-status-"))


def _recorded_ingest(store: Store, corpus: str) -> dict[str, Any]:
    """The corpus's manifest hash, and the inputs and options its ingest recorded."""
    with store.reader(views=False) as con:
        row = con.execute("SELECT manifest_hash FROM corpora WHERE name = ?",
                          [corpus]).fetchone()
        if row is None:
            known = [r[0] for r in con.execute("SELECT name FROM corpora ORDER BY name")
                     .fetchall()]
            hint = f"known: {', '.join(known)}" if known else "the store has no corpora yet"
            raise UnknownObjectError(f"no corpus named {corpus!r} ({hint})")
        ingest = con.execute(
            "SELECT inputs, parameters FROM ingests WHERE kind = 'corpus' AND target = ? "
            "ORDER BY finished_at DESC LIMIT 1", [corpus]).fetchone()
    inputs = json.loads(ingest[0]) if ingest else []
    return {"manifest_hash": row[0],
            "paths": list(dict.fromkeys(item["path"] for item in inputs)),
            "parameters": json.loads(ingest[1]) if ingest else {}}


def _licenses(parameters: dict[str, Any]) -> LicensePlan:
    plan = parameters.get("license") or {}
    entries = [f"{name}={spdx}" for name, spdx in (plan.get("by_source") or {}).items()]
    if plan.get("default"):
        entries.append(plan["default"])
    return parse_licenses(entries)


def _read_local(planned: list[Any], scratch: Path, source: str | None,
                licenses: LicensePlan, links: str, workers: int | None, progress: Any,
                walked: WalkCounts) -> ReducedCorpus:
    """The documents `ingest corpus` would record from `planned`, as parts in `scratch`.
    Token counts are not compared: the byte tokenizer is used whatever the corpus's was
    (its tokenizer file may be gone), so `local_hash` equals the recorded manifest hash
    only for a corpus counted in bytes or from ready manifests."""
    manifests = [p for p in planned if isinstance(p, ShardInput)
                 and p.kind.startswith("manifest")]
    raw = [p for p in planned if p not in manifests]
    scratch.mkdir(parents=True)
    staged, dropped = map_locally(raw, scratch, "status", source, parse_tokenizer("bytes"),
                                  workers, progress, False, links, walked)
    reduced = reduce_corpus(corpus="status", staged_parts=staged, manifests=manifests,
                            licenses=licenses, staging=scratch, out_dir=scratch / "out",
                            progress=progress)
    reduced.dropped_empty += dropped
    return reduced


def _read_manifest(path: Path, scratch: Path, progress: Any) -> ReducedCorpus:
    """A published ready manifest, checked and sorted as `ingest corpus` would record it;
    or the ready manifests a Croissant file names (`lineage export croissant` names a
    corpus's manifest parts), each checked against the file's SHA-256 and size first."""
    croissant = looks_like_croissant(path)
    planned = plan_inputs([path], "auto" if croissant else "manifest")
    manifests = [p for p in planned if isinstance(p, ShardInput)
                 and p.kind.startswith("manifest")]
    if not manifests:
        raise InputError(path, "names no ready manifest (doc_id and content_hash columns) "
                         "to compare with: `ingest corpus` reads the files it names")
    scratch.mkdir(parents=True)
    return reduce_corpus(corpus="status", staged_parts=StagedParts([], []),
                         manifests=manifests, licenses=LicensePlan(), staging=scratch,
                         out_dir=scratch / "out", progress=progress)


def _parts_sql(reduced: ReducedCorpus) -> str:
    listed = ", ".join(sql_text(str(part.temp)) for part in reduced.parts)
    return f"SELECT {_COLUMNS} FROM read_parquet([{listed}])"


_KINDS = ("CASE WHEN recorded IS NULL THEN 'new' WHEN local IS NULL THEN 'missing' "
          "ELSE 'changed' END")


def _compare(store: Store | None, corpus: str | None, local_sql: str,
             reference_sql: str | None, limit: int) -> tuple[dict[str, int], dict[str, list[Any]]]:
    """Counts of each kind, and the first `limit` doc_ids of each kind, by doc_id."""
    import duckdb

    parameters: list[Any] = []
    if reference_sql is None:
        reference_sql, parameters = f"SELECT {_COLUMNS} FROM documents WHERE corpus = ?", \
            [corpus]
    joined = (f"WITH l AS ({local_sql}), r AS ({reference_sql}), "
              "j AS (SELECT coalesce(l.doc_id, r.doc_id) AS doc_id, r.content_hash AS "
              "recorded, l.content_hash AS local FROM l FULL OUTER JOIN r USING (doc_id)) ")
    counting = joined + (
        "SELECT count(recorded), count(local), count(*) FILTER (local = recorded), "
        "count(*) FILTER (recorded IS NULL), count(*) FILTER (local <> recorded), "
        "count(*) FILTER (local IS NULL) FROM j")
    listing = joined + (
        f"SELECT kind, doc_id, recorded, local FROM (SELECT *, {_KINDS} AS kind, "
        f"row_number() OVER (PARTITION BY {_KINDS} ORDER BY doc_id) AS n FROM j "
        "WHERE local IS DISTINCT FROM recorded) WHERE n <= ? ORDER BY kind, doc_id")

    def run(con: duckdb.DuckDBPyConnection) -> tuple[Any, list[Any]]:
        totals = con.execute(counting, parameters).fetchone()
        return totals, con.execute(listing, [*parameters, limit]).fetchall()

    if store is not None and corpus is not None:
        with store.reader() as con:
            totals, rows = run(con)
    else:
        with duckdb.connect(":memory:") as con:
            totals, rows = run(con)
    names = ("recorded", "local", "unchanged", "new", "changed", "missing")
    counts = dict(zip(names, (int(v) for v in totals), strict=True))
    lists: dict[str, list[Any]] = {"new": [], "changed": [], "missing": []}
    for kind, doc_id, was, now in rows:
        lists[kind].append({"doc_id": doc_id, "recorded": was, "local": now}
                           if kind == "changed" else doc_id)
    return counts, lists
