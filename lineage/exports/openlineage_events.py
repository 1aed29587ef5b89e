"""OpenLineage RunEvents made from the store's records (docs/exports.md, "OpenLineage").

Four kinds of job, each a run with a START event and an end event:

    ingest-corpus/<corpus>   outputs the corpus (lineage_corpus)
    build-stream/<stream>    reads the corpus, outputs the stream (lineage_stream)
    train/<run>              reads the corpus and the stream, outputs the checkpoints
                             (lineage_checkpoint); the run facet lineage_training holds
                             the chain. An open chain ends with RUNNING, a closed one
                             with COMPLETE.
    experiment/<name>        reads the model folder; COMPLETE when the record passed,
                             ABORT when interrupted, FAIL otherwise (with errorMessage)

Nothing here reads a clock: event times are the store's own record times and run ids are
UUIDs derived from what the run produced, so the same store gives the same events.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta
from typing import Any

from blake3 import blake3
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent
from openlineage.client.event_v2 import RunState as EventType
from openlineage.client.facet_v2 import (
    dataset_version_dataset,
    error_message_run,
    job_type_job,
)

from lineage.exports.openlineage_facets import (
    PRODUCER,
    LineageCheckpointDatasetFacet,
    LineageCorpusDatasetFacet,
    LineageExperimentRunFacet,
    LineageStreamDatasetFacet,
    LineageTrainingRunFacet,
)

RUN_ID_SPEC = "lineage-openlineage/1"  # what the derived run ids hash, see run_uuid
INTEGRATION = "LINEAGE"


def run_uuid(*parts: str) -> str:
    """A UUID (version 8, RFC 9562) made of the first 16 bytes of the BLAKE3 of `parts`:
    the same records give the same run id on every machine."""
    digest = bytearray(blake3("\0".join((RUN_ID_SPEC, *parts)).encode()).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x80
    digest[8] = (digest[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(digest)))


def event_time(value: datetime) -> str:
    """A catalog TIMESTAMP (UTC, naive) as an ISO 8601 time with its zone."""
    return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _event(state: EventType, at: datetime, run: Run, job: Job, *,
           inputs: list[InputDataset] | None = None,
           outputs: list[OutputDataset] | None = None) -> RunEvent:
    return RunEvent(eventType=state, eventTime=event_time(at), run=run, job=job,
                    inputs=inputs or [], outputs=outputs or [], producer=PRODUCER)


def _job(namespace: str, name: str, job_type: str) -> Job:
    facet = job_type_job.JobTypeJobFacet(processingType="BATCH", integration=INTEGRATION,
                                         jobType=job_type, producer=PRODUCER)
    return Job(namespace=namespace, name=name, facets={"jobType": facet})


def _version(value: str) -> dict[str, Any]:
    return {"version": dataset_version_dataset.DatasetVersionDatasetFacet(
        datasetVersion=value, producer=PRODUCER)}


def corpus_dataset(namespace: str, corpus: dict[str, Any]) -> dict[str, Any]:
    """The corpus as a dataset: its name, its version (the manifest hash), its facet."""
    facet = LineageCorpusDatasetFacet(
        name=corpus["name"], manifestHash=corpus["manifest_hash"],
        manifestSpec=corpus["manifest_spec"], documents=corpus["documents"],
        tokens=corpus["tokens"], bytes=corpus["bytes"], droppedEmpty=corpus["dropped_empty"],
        tokenizer=corpus["tokenizer"], licenses=list(corpus["licenses"]),
        sources=[dict(s) for s in corpus["sources"]], producer=PRODUCER)
    return {"namespace": namespace, "name": f"corpus/{corpus['name']}",
            "facets": {**_version(corpus["manifest_hash"]), "lineage_corpus": facet}}


def stream_dataset(namespace: str, stream: dict[str, Any]) -> dict[str, Any]:
    facet = LineageStreamDatasetFacet(
        name=stream["name"], spec=stream["spec"], specHash=stream["spec_hash"],
        parameters=stream["parameters"], corpus=stream["corpus"],
        manifestHash=stream["manifest_hash"], seqLen=stream["seq_len"], batch=stream["batch"],
        tokens=stream["tokens"], windows=stream["windows"], steps=stream["steps"],
        occurrences=stream["occurrences"], occurrencesDigest=stream["occurrences_digest"],
        seed=stream["seed"], producer=PRODUCER)
    return {"namespace": namespace, "name": f"stream/{stream['name']}",
            "facets": {**_version(stream["spec_hash"]), "lineage_stream": facet}}


def checkpoint_dataset(namespace: str, ckpt: dict[str, Any]) -> dict[str, Any]:
    facet = LineageCheckpointDatasetFacet(
        run=ckpt["run"], step=ckpt["step"], path=ckpt["path"], files=ckpt["files"],
        structureOk=ckpt["structure_ok"], weightsDigest=ckpt["weights_digest"],
        chainWeightsDigest=ckpt["chain_weights_digest"], matchesChain=ckpt["matches_chain"],
        stateDigest=ckpt["state_digest"], chainStateDigest=ckpt["chain_state_digest"],
        matchesState=ckpt["matches_state"], checksumsOk=ckpt["checksums_ok"],
        producer=PRODUCER)
    facets: dict[str, Any] = {"lineage_checkpoint": facet}
    if ckpt["weights_digest"]:
        facets.update(_version(ckpt["weights_digest"]))
    return {"namespace": namespace, "name": f"run/{ckpt['run']}/checkpoint/{ckpt['step']}",
            "facets": facets}


def corpus_events(namespace: str, corpus: dict[str, Any]) -> list[RunEvent]:
    """The corpus ingest: its input files (namespace `file`) and the corpus it made."""
    run = Run(runId=run_uuid("ingest-corpus", corpus["name"], corpus["manifest_hash"]))
    job = _job(namespace, f"ingest-corpus/{corpus['name']}", "INGEST")
    inputs = [InputDataset(namespace="file", name=item["path"]) for item in corpus["inputs"]]
    output = corpus_dataset(namespace, corpus)
    return [_event(EventType.START, corpus["started_at"], run, job, inputs=inputs),
            _event(EventType.COMPLETE, corpus["finished_at"], run, job, inputs=inputs,
                   outputs=[OutputDataset(**output)])]


def stream_events(namespace: str, stream: dict[str, Any],
                  corpus: dict[str, Any]) -> list[RunEvent]:
    """The stream build: it reads the corpus and writes the stream, at one recorded time."""
    run = Run(runId=run_uuid("build-stream", stream["name"], stream["spec_hash"]))
    job = _job(namespace, f"build-stream/{stream['name']}", "BUILD")
    inputs = [InputDataset(**corpus_dataset(namespace, corpus))]
    output = OutputDataset(**stream_dataset(namespace, stream))
    return [_event(EventType.START, stream["created_at"], run, job, inputs=inputs),
            _event(EventType.COMPLETE, stream["created_at"], run, job, inputs=inputs,
                   outputs=[output])]


def training_run_facet(training: dict[str, Any], stream: dict[str, Any],
                       corpus: dict[str, Any]) -> LineageTrainingRunFacet:
    return LineageTrainingRunFacet(
        run=training["name"], stream=stream["name"], specHash=stream["spec_hash"],
        corpus=corpus["name"], manifestHash=corpus["manifest_hash"], chain=training["chain"],
        algorithm=training["algorithm"], genesis=training["genesis"],
        closed=training["closed"], worldSize=training["world_size"],
        stepsRecorded=training["steps_recorded"], clippedSteps=training["clipped_count"],
        skippedSteps=training["skipped_count"], segments=training["segments"],
        chainHead=training["chain_head"], firstStep=training["first_step"],
        lastStep=training["last_step"], streamSteps=training["stream_steps"],
        checkpointEvery=training["checkpoint_every"], producer=PRODUCER)


def training_events(namespace: str, training: dict[str, Any], stream: dict[str, Any],
                    corpus: dict[str, Any]) -> list[RunEvent]:
    """The training run: its chain in the run facet, its checkpoints as outputs. A closed
    chain ends the run (COMPLETE); an open one is still running (RUNNING)."""
    facet = training_run_facet(training, stream, corpus)
    run_id = run_uuid("train", training["name"], training["genesis"],
                      training["chain_head"] or "")
    run = Run(runId=run_id, facets={"lineage_training": facet})
    job = _job(namespace, f"train/{training['name']}", "TRAINING")
    inputs = [InputDataset(**corpus_dataset(namespace, corpus)),
              InputDataset(**stream_dataset(namespace, stream))]
    outputs = [OutputDataset(**checkpoint_dataset(namespace, c))
               for c in training["checkpoints"]]
    end = EventType.COMPLETE if training["closed"] else EventType.RUNNING
    return [_event(EventType.START, training["created_at"], run, job, inputs=inputs),
            _event(end, training["updated_at"], run, job, inputs=inputs, outputs=outputs)]


def experiment_run_facets(experiment: dict[str, Any]) -> dict[str, Any]:
    """lineage_experiment, and errorMessage when a check or the command failed."""
    record = experiment["record"]
    weights = record.get("weights") or {}
    command = record.get("command") or {}
    facet = LineageExperimentRunFacet(
        id=experiment["id"], recordDigest=experiment["record_digest"],
        outcome=experiment["outcome"], weightsPath=str(weights.get("path", "")),
        files=len(weights.get("files") or []), name=experiment["name"],
        revision=experiment["revision"], weightsDigest=weights.get("digest"),
        exitCode=command.get("exit_code"), producer=PRODUCER)
    facets: dict[str, Any] = {"lineage_experiment": facet}
    if experiment["outcome"] not in ("passed", "interrupted"):
        facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
            message=_failure_message(record, experiment["outcome"]),
            programmingLanguage="python", producer=PRODUCER)
    return facets


def experiment_events(namespace: str, experiment: dict[str, Any]) -> list[RunEvent]:
    """An experiment record: START when it was made, then COMPLETE (passed), ABORT
    (interrupted) or FAIL (a check or the command failed) after the command's duration."""
    record = experiment["record"]
    weights = record.get("weights") or {}
    command = record.get("command") or {}
    outcome = experiment["outcome"]
    facets = experiment_run_facets(experiment)
    run = Run(runId=run_uuid("experiment", experiment["id"], experiment["record_digest"]),
              facets=facets)
    job = _job(namespace, f"experiment/{experiment['name'] or experiment['id']}", "EXPERIMENT")
    inputs = [InputDataset(namespace="file", name=str(weights.get("path", "")),
                           facets=_version(weights["digest"]) if weights.get("digest") else {})]
    started = experiment["created_at"]
    ended = started + timedelta(seconds=float(command.get("duration_s") or 0.0))
    end = {"passed": EventType.COMPLETE, "interrupted": EventType.ABORT}.get(outcome,
                                                                             EventType.FAIL)
    return [_event(EventType.START, started, run, job, inputs=inputs),
            _event(end, ended, run, job, inputs=inputs)]


def _failure_message(record: dict[str, Any], outcome: str) -> str:
    failure = record.get("failure")
    if failure:
        return f"{outcome}: {json.dumps(failure, sort_keys=True)}"
    command = record.get("command") or {}
    return f"{outcome}: exit code {command.get('exit_code')}"
