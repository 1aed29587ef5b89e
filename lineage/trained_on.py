""""Was this file trained on?": content hash -> documents -> stream positions -> steps.

Verdicts, from strongest to weakest: `in-stream` (a document with these exact bytes is
placed in a stream), `in-corpus-only` (recorded in a corpus but in no stream, e.g. past
the token budget), `not-found`. Each match carries the evidence: the content hash, the
corpus manifest hash, and each stream's spec hash, windows and steps. Later verdicts
(run progress, skipped steps, partial text matches) extend the same answer.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lineage.durable import blake3_file
from lineage.errors import InputError, UsageError
from lineage.parts import part_files
from lineage.store import Store

if TYPE_CHECKING:
    import duckdb

IN_STREAM = "in-stream"
IN_CORPUS_ONLY = "in-corpus-only"
NOT_FOUND = "not-found"


def hash_file(path: Path) -> str:
    try:
        return blake3_file(path)
    except OSError as exc:
        raise InputError(path, f"cannot read ({exc.strerror or exc})") from exc


TRAINED = "trained"
SKIPPED_ONLY = "skipped-only"
NOT_REACHED = "not-reached"
_RANK = [TRAINED, SKIPPED_ONLY, NOT_REACHED, IN_CORPUS_ONLY, NOT_FOUND]


def trained_on(
    store: Store, files: list[str | os.PathLike[str]], *, stream: str | None = None,
    run: str | None = None,
) -> dict[str, Any]:
    """One result per file, in the order given; with `run`, verdicts about that run."""
    queries = []
    for item in files:
        path = Path(item)
        if not path.is_file():
            raise InputError(path, "no such file (trained-on takes files)")
        queries.append((str(path), hash_file(path)))
    if run is None:
        return trained_on_hashes(store, queries, stream=stream)
    from lineage.runs import get_run

    info = get_run(store, run)
    if stream is not None and stream != info["stream"]:
        raise UsageError(f"run {run!r} read stream {info['stream']!r}, not {stream!r}")
    answer = trained_on_hashes(store, queries, stream=info["stream"])
    return with_run(store, answer, info)


def with_run(store: Store, answer: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    """Refine verdicts by what the run did: trained, skipped-only or not-reached."""
    with store.reader(views=False) as con:
        skipped = {r[0] for r in con.execute(
            "SELECT step FROM steps WHERE run = ? AND skipped", [run["name"]]).fetchall()}
    last = run["last_step"] if run["last_step"] is not None else -1
    for result in answer["results"]:
        verdicts = []
        for match in result["matches"]:
            steps = match["steps"]
            if not steps:
                match["run_verdict"] = IN_CORPUS_ONLY
            elif any(s <= last and s not in skipped for s in steps):
                match["run_verdict"] = TRAINED
            elif any(s <= last for s in steps):
                match["run_verdict"] = SKIPPED_ONLY
            else:
                match["run_verdict"] = NOT_REACHED
            verdicts.append(match["run_verdict"])
        if verdicts:
            result["verdict"] = min(verdicts, key=_RANK.index)
    answer["run"] = run["name"]
    answer["run_last_step"] = run["last_step"]
    return answer


def trained_on_hashes(
    store: Store, queries: list[tuple[str, str]], *, stream: str | None = None
) -> dict[str, Any]:
    """The same answer for (label, BLAKE3 hex) pairs already hashed."""
    with store.reader(views=False) as con:
        streams = _streams(con, stream)
        corpora = _manifests(con)
        results = [_answer(con, store, label, digest, streams, corpora)
                   for label, digest in queries]
    return {"stream": stream, "results": results}


def _streams(con: duckdb.DuckDBPyConnection, name: str | None) -> dict[str, dict[str, Any]]:
    from lineage.stream.query import _resolve

    if name is not None:
        info = _resolve(con, name)
        return {info["name"]: info}
    rows = con.execute("SELECT name FROM streams ORDER BY name").fetchall()
    return {r[0]: _resolve(con, r[0]) for r in rows}


def _answer(
    con: duckdb.DuckDBPyConnection, store: Store, label: str, digest: str,
    streams: dict[str, dict[str, Any]], corpora: dict[str, str],
) -> dict[str, Any]:
    documents = _lookup(con, store, "document_hashes", None,
                        "corpus, source, doc_id", digest)
    placed: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
    for name, info in streams.items():
        rows = _lookup(con, store, "occurrence_hashes", name,
                       "corpus, doc_id, epoch, stream_start, stream_end", digest)
        for corpus, doc_id, epoch, start, end in rows:
            placed.setdefault((corpus, doc_id), []).append((name, info, epoch, start, end))
    matches = []
    for corpus, source, doc_id in documents:
        base = {"corpus": corpus, "manifest_hash": corpora.get(corpus), "source": source,
                "doc_id": doc_id}
        hits = placed.get((corpus, doc_id), [])
        if not hits:
            matches.append({**base, "stream": None, "spec_hash": None, "steps": [],
                            "windows": [], "epochs": []})
        for name, info, spans in _group(hits):
            windows = sorted({w for _, start, end in spans for w in _windows(info, start, end)})
            batch = int(info["batch"])
            matches.append({**base, "stream": name, "spec_hash": info["spec_hash"],
                            "steps": sorted({w // batch for w in windows}),
                            "windows": windows,
                            "epochs": sorted({epoch for epoch, _, _ in spans})})
    verdict = NOT_FOUND
    if matches:
        verdict = IN_STREAM if any(m["windows"] for m in matches) else IN_CORPUS_ONLY
    return {"file": label, "content_hash": digest, "verdict": verdict, "matches": matches}


def _lookup(con: duckdb.DuckDBPyConnection, store: Store, table: str, owner: str | None,
            columns: str, digest: str) -> list[tuple[Any, ...]]:
    files = part_files(con, store, table, owner, digest=digest)
    if not files:
        return []
    return con.execute(
        f"SELECT {columns} FROM read_parquet(?) WHERE content_hash = ? ORDER BY ALL",
        [files, digest],
    ).fetchall()


def _manifests(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    return dict(con.execute("SELECT name, manifest_hash FROM corpora").fetchall())


def _group(hits: list[tuple[Any, ...]]):  # type: ignore[no-untyped-def]
    by_stream: dict[str, tuple[dict[str, Any], list[tuple[int, int, int]]]] = {}
    for name, info, epoch, start, end in hits:
        by_stream.setdefault(name, (info, []))[1].append((epoch, start, end))
    for name in sorted(by_stream):
        info, spans = by_stream[name]
        yield name, info, spans


def _windows(info: dict[str, Any], start: int, end: int) -> range:
    """Windows holding at least one token of [start, end), within the consumed stream."""
    seq_len, total = int(info["seq_len"]), int(info["windows"])
    if end <= start:
        return range(0)
    return range(start // seq_len, min((end - 1) // seq_len + 1, total))
