"""`lineage export openlineage`: the store's records as OpenLineage RunEvents, sent through
the official `openlineage-python` client and its transports (file, console, HTTP).

`openlineage_events` reads the records (lineage.exports.openlineage_events makes the
events); `emit_events` hands them to an `OpenLineageClient` built on one transport, with
the client's own git source-code facet switched off so the events depend on the store
only, not on the directory the command runs in.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lineage.corpora.query import get_corpus
from lineage.errors import LineageError, UnknownObjectError, UsageError
from lineage.exports.openlineage_answers import OpenLineageExport, OpenLineageRun
from lineage.exports.openlineage_events import (
    corpus_events,
    experiment_events,
    stream_events,
    training_events,
)
from lineage.exports.openlineage_facets import PRODUCER
from lineage.runs.query import get_run
from lineage.store.base import BaseStore

if TYPE_CHECKING:
    from openlineage.client.event_v2 import RunEvent
    from openlineage.client.transport import Transport

NAMESPACE = "lineage"
_STREAM_COLUMNS = ("name", "spec", "spec_hash", "parameters", "corpus", "manifest_hash",
                   "seed", "seq_len", "batch", "tokens", "windows", "steps", "occurrences",
                   "occurrences_digest", "created_at")
_CHECKPOINT_COLUMNS = ("run", "step", "path", "files", "structure_ok", "checksums_ok",
                       "weights_digest", "chain_weights_digest", "matches_chain",
                       "state_digest", "chain_state_digest", "matches_state", "created_at")


def openlineage_events(store: BaseStore, *, run: str | None = None, corpus: str | None = None,
                       exp: str | None = None, namespace: str = NAMESPACE) -> list[RunEvent]:
    """The events of `run` (with the ingest of its corpus and the build of its stream), of
    `corpus` (with every stream built from it and every run over those), of the experiment
    `exp` (a name: every attempt; or an id), or of everything the store records. Ordered
    by event time, then by corpus, stream, run, experiment."""
    if sum(x is not None for x in (run, corpus, exp)) > 1:
        raise UsageError("name at most one of --run RUN, --corpus CORPUS or --exp NAME")
    with store.reader(views=False) as con:
        streams = {row[0]: dict(zip(_STREAM_COLUMNS, row, strict=True)) for row in con.execute(
            f"SELECT {', '.join(_STREAM_COLUMNS)} FROM streams ORDER BY name").fetchall()}
        runs = dict(con.execute(  # run -> stream; a run bound to no stream has no inputs
            "SELECT name, stream FROM runs WHERE stream IS NOT NULL ORDER BY name").fetchall())
        corpora = [r[0] for r in con.execute("SELECT name FROM corpora ORDER BY name").fetchall()]
    names = _select(store, streams, runs, corpora, run=run, corpus=corpus)
    events: list[RunEvent] = []
    if exp is None:
        facts = {name: corpus_facts(store, name) for name in names["corpora"]}
        for name in names["corpora"]:
            events += corpus_events(namespace, facts[name])
        for name in names["streams"]:
            stream = streams[name]
            events += stream_events(namespace, stream, _corpus(store, facts, stream["corpus"]))
        for name in names["runs"]:
            stream = streams[runs[name]]
            events += training_events(namespace, training_facts(store, name), stream,
                                      _corpus(store, facts, stream["corpus"]))
    if run is None and corpus is None:
        for record in experiment_facts(store, exp):
            events += experiment_events(namespace, record)
    return sorted(events, key=lambda e: e.eventTime)


def _select(store: BaseStore, streams: dict[str, dict[str, Any]], runs: dict[str, str],
            corpora: list[str], *, run: str | None, corpus: str | None
            ) -> dict[str, list[str]]:
    if run is not None:
        summary = get_run(store, run)  # UnknownObjectError for an unknown run
        if summary["stream"] is None:
            raise UsageError(f"run {run!r} is bound to no stream: the store records no "
                             "training data for it, so it has no inputs to export")
        stream = streams[summary["stream"]]
        return {"corpora": [stream["corpus"]], "streams": [stream["name"]], "runs": [run]}
    if corpus is not None:
        get_corpus(store, corpus)  # UnknownObjectError for an unknown corpus
        built = [s for s, row in streams.items() if row["corpus"] == corpus]
        over = [r for r, stream in runs.items() if stream in built]
        return {"corpora": [corpus], "streams": built, "runs": over}
    return {"corpora": corpora, "streams": list(streams), "runs": list(runs)}


def _corpus(store: BaseStore, facts: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    if name not in facts:
        facts[name] = corpus_facts(store, name)
    return facts[name]


def stream_facts(store: BaseStore, name: str) -> dict[str, Any]:
    """The stream's catalog row; UnknownObjectError when the store holds no such stream."""
    with store.reader(views=False) as con:
        row = con.execute(f"SELECT {', '.join(_STREAM_COLUMNS)} FROM streams WHERE name = ?",
                          [name]).fetchone()
    if row is None:
        raise UnknownObjectError(f"no stream named {name!r}")
    return dict(zip(_STREAM_COLUMNS, row, strict=True))


def training_run_facets(store: BaseStore, run: str) -> dict[str, Any]:
    """The run facets `train/<run>` carries: {"lineage_training": ...}."""
    from lineage.exports.openlineage_events import training_run_facet

    training = training_facts(store, run)
    if training["stream"] is None:
        raise UnknownObjectError(f"run {run!r} is bound to no stream")
    stream = stream_facts(store, training["stream"])
    facet = training_run_facet(training, stream, corpus_facts(store, stream["corpus"]))
    return {"lineage_training": facet}


def corpus_facts(store: BaseStore, name: str) -> dict[str, Any]:
    """The corpus (`lineage corpus show`) with its last recorded ingest: the input files
    and the times it started and finished (the corpus's creation time when no ingest row
    names it)."""
    corpus = get_corpus(store, name)
    with store.reader(views=False) as con:
        row = con.execute("SELECT inputs, started_at, finished_at FROM ingests WHERE kind = "
                          "'corpus' AND target = ? ORDER BY finished_at DESC LIMIT 1",
                          [name]).fetchone()
        created = _one(con.execute("SELECT created_at FROM corpora WHERE name = ?", [name]))
    inputs, started, finished = row if row else ("[]", created, created)
    return {**corpus, "inputs": json.loads(inputs), "started_at": started,
            "finished_at": finished}


def training_facts(store: BaseStore, name: str) -> dict[str, Any]:
    """The run (`lineage run show`) with its recorded times, chain head and checkpoints.
    It was last updated when its last log segment or checkpoint was ingested."""
    summary = get_run(store, name)
    with store.reader(views=False) as con:
        created = _one(con.execute("SELECT created_at FROM runs WHERE name = ?", [name]))
        head = con.execute("SELECT state_hash FROM steps WHERE run = ? AND state_hash IS NOT "
                           "NULL ORDER BY step DESC LIMIT 1", [name]).fetchone()
        rows = con.execute(f"SELECT {', '.join(_CHECKPOINT_COLUMNS)} FROM checkpoints "
                           "WHERE run = ? ORDER BY step", [name]).fetchall()
        updated = _one(con.execute(
            "SELECT max(t) FROM (SELECT ingested_at AS t FROM run_segments WHERE run = ? "
            "UNION ALL SELECT created_at FROM checkpoints WHERE run = ?)", [name, name]))
    checkpoints = [_checkpoint(dict(zip(_CHECKPOINT_COLUMNS, r, strict=True))) for r in rows]
    segments = [{"segment": s["segment"], "logHash": s["log_hash"],
                 "firstStep": s["first_step"], "lastStep": s["last_step"],
                 "records": s["records"]} for s in summary["segments"]]
    return {**summary, "created_at": created, "chain_head": head[0] if head else None,
            "updated_at": updated or created,
            "checkpoints": checkpoints, "segments": segments}


def _one(cursor: Any) -> Any:
    """The single value of a one-row, one-column query (the row is known to exist)."""
    row = cursor.fetchone()
    assert row is not None
    return row[0]


def _checkpoint(row: dict[str, Any]) -> dict[str, Any]:
    files = [{key: f[key] for key in ("path", "size", "sha256", "blake3") if key in f}
             for f in json.loads(row["files"])]
    return {**row, "files": sorted(files, key=lambda f: str(f.get("path")))}


def experiment_facts(store: BaseStore, exp: str | None) -> list[dict[str, Any]]:
    """Every experiment record, or those named `exp` (every attempt) or with id `exp`."""
    query = ("SELECT id, name, outcome, revision, created_at, record, record_digest "
             "FROM experiments")
    params: list[str] = []
    if exp is not None:
        query += " WHERE name = ? OR id = ?"
        params = [exp, exp]
    with store.reader(views=False) as con:
        rows = con.execute(query + " ORDER BY created_at, id", params).fetchall()
    if exp is not None and not rows:
        raise UnknownObjectError(f"no experiment named {exp!r} (`lineage exp list` lists them)")
    keys = ("id", "name", "outcome", "revision", "created_at", "record", "record_digest")
    return [{**dict(zip(keys, row, strict=True)), "record": json.loads(row[5])}
            for row in rows]


def event_dicts(events: Sequence[RunEvent]) -> list[dict[str, Any]]:
    """The events as the client serializes them (nulls left out)."""
    from openlineage.client.serde import Serde

    return [Serde.to_dict(event) for event in events]


def file_transport(path: Path) -> Transport:
    """The client's file transport, one event per line, appending to `path`."""
    from openlineage.client.transport.file import FileConfig, FileTransport

    return FileTransport(FileConfig(log_file_path=str(path), append=True))


def http_transport(url: str, *, endpoint: str = "api/v1/lineage", timeout: float = 5.0,
                   api_key: str | None = None) -> Transport:
    """The client's HTTP transport: POST each event to `url`/`endpoint`, retrying twice."""
    from openlineage.client.transport.http import HttpConfig, HttpTransport

    params: dict[str, Any] = {"url": url, "endpoint": endpoint, "timeout": timeout,
                              "retry": {"total": 2, "backoff_factor": 0.1}}
    if api_key:
        params["auth"] = {"type": "api_key", "apiKey": api_key}
    try:
        return HttpTransport(HttpConfig.from_dict(params))
    except ValueError as exc:
        raise UsageError(f"--url {url!r}: {exc}") from exc


def console_transport() -> Transport:
    """The client's console transport: each event logged at INFO on the
    `openlineage.client.transport.console` logger."""
    from openlineage.client.transport.console import ConsoleConfig, ConsoleTransport

    return ConsoleTransport(ConsoleConfig())


def emit_events(events: Sequence[RunEvent], transport: Transport, *, where: str) -> int:
    """Send `events` in order through `transport`; the number sent. A transport error
    (a refused connection, a 4xx/5xx answer, an unwritable file) stops at that event and
    names it."""
    from openlineage.client import OpenLineageClient

    if os.environ.get("OPENLINEAGE_DISABLED", "").strip().lower() == "true":
        raise UsageError("OPENLINEAGE_DISABLED=true in the environment: the client would "
                         "send nothing; unset it to export")
    client = OpenLineageClient(transport=transport, config={
        "facets": {"source_code_location": {"disabled": True}}})
    for sent, event in enumerate(events):
        try:
            client.emit(event)
        except BrokenPipeError:
            raise  # the reader of the console went away: the command line handles that
        except Exception as exc:  # the client raises requests' and OS errors as they come
            state = event.eventType.value if event.eventType else "OTHER"
            raise LineageError(f"{where}: event {sent + 1} of {len(events)} ({state} "
                               f"{event.job.name}) was not sent: {exc}") from exc
    client.close()
    return len(events)


SPEC_URL = "https://openlineage.io/spec/2-0-2/OpenLineage.json"


def export_openlineage(store: BaseStore, *, run: str | None = None, corpus: str | None = None,
                       exp: str | None = None, namespace: str = NAMESPACE,
                       output: Path | None = None, url: str | None = None,
                       endpoint: str = "api/v1/lineage", api_key: str | None = None
                       ) -> OpenLineageExport:
    """Send the events (see `openlineage_events`) to the file `output` (one JSON event per
    line, replaced atomically), to the OpenLineage HTTP endpoint `url`, or, with neither,
    to the client's console transport; the answer says what went where."""
    if output is not None and url is not None:
        raise UsageError("name at most one destination: -o FILE, --url URL or --console")
    events = openlineage_events(store, run=run, corpus=corpus, exp=exp, namespace=namespace)
    runs = _runs(events)

    def exported(transport: str, destination: str) -> OpenLineageExport:
        return OpenLineageExport(spec=SPEC_URL, producer=PRODUCER, namespace=namespace,
                                 events=len(events), runs=runs, transport=transport,
                                 destination=destination)

    if output is not None:
        _emit_to_file(events, output)
        return exported("file", str(output))
    if url is not None:
        transport = http_transport(url, endpoint=endpoint, api_key=api_key)
        emit_events(events, transport, where=f"--url {url}")
        return exported("http", url.rstrip("/") + "/" + endpoint)
    emit_events(events, console_transport(), where="console")
    return exported("console", "console")


def _emit_to_file(events: Sequence[RunEvent], output: Path) -> None:
    from lineage.store.durable import publish, temp_path_for
    from lineage.userfiles import check_output_path

    check_output_path(output)  # a regular file or a new path: never a device or FIFO
    final = output.resolve()
    temp = temp_path_for(final)
    try:
        emit_events(events, file_transport(temp), where=str(output))
        if not events:
            temp.write_text("", encoding="utf-8")
        check_output_path(output)  # it may have become something else meanwhile
        publish(temp, final)
    except OSError as exc:
        raise UsageError(f"{output}: cannot write: {exc.strerror or exc}") from exc
    finally:
        temp.unlink(missing_ok=True)


def _runs(events: Sequence[RunEvent]) -> tuple[OpenLineageRun, ...]:
    """One entry per OpenLineage run, with its events' states in order, by job name."""
    by_run: dict[str, list[RunEvent]] = {}
    for event in events:
        by_run.setdefault(event.run.runId, []).append(event)
    runs = [OpenLineageRun(job=sent[0].job.name, run_id=run_id,
                           states=tuple(_state(event) for event in sent),
                           first_time=sent[0].eventTime, last_time=sent[-1].eventTime)
            for run_id, sent in by_run.items()]
    return tuple(sorted(runs, key=lambda r: r.job))


def _state(event: RunEvent) -> str:
    return event.eventType.value if event.eventType else "OTHER"
