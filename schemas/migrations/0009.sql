-- Schema 9: OpenLineage events read back by `lineage ingest openlineage` (docs/exports.md), each kept once.
CREATE TABLE openlineage_events (
    id             VARCHAR PRIMARY KEY,  -- 'blake3:<hex>' of the event's canonical JSON (keys sorted, no spaces)
    event_type     VARCHAR,              -- START, RUNNING, COMPLETE, ABORT, FAIL or OTHER; NULL when the event names none
    event_time     VARCHAR NOT NULL,     -- the event's eventTime, as written
    run_id         VARCHAR NOT NULL,     -- run.runId
    job_namespace  VARCHAR NOT NULL,     -- job.namespace
    job_name       VARCHAR NOT NULL,     -- job.name
    producer       VARCHAR NOT NULL,     -- the URI of what wrote the event
    source         VARCHAR NOT NULL,     -- the file the event was first read from, as given
    event          VARCHAR NOT NULL,     -- the event as canonical JSON
    ingested_at    TIMESTAMP NOT NULL    -- when it was first read (UTC)
);
