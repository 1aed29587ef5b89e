-- lineage catalog, schema version 10 (migrations/ take older catalogs here).
-- Small tables live here; bulk rows live in Parquet files listed in parquet_files.
-- A Parquet file that is not listed here is garbage, never data.

CREATE TABLE schema_info (
    key   VARCHAR PRIMARY KEY,
    value VARCHAR NOT NULL
);

-- Every Parquet file that holds data, with what it takes to re-check it.
CREATE TABLE parquet_files (
    path        VARCHAR PRIMARY KEY,   -- relative to the store root, '/' separators
    table_name  VARCHAR NOT NULL,      -- the view it belongs to, e.g. 'documents'
    owner       VARCHAR NOT NULL,      -- the record it belongs to, e.g. the corpus name
    n_rows      BIGINT  NOT NULL,
    n_bytes     BIGINT  NOT NULL,
    sha256      VARCHAR NOT NULL,      -- 64 lowercase hex of the file's bytes
    created_at  TIMESTAMP NOT NULL,
    key_ranges  VARCHAR,               -- JSON {column: [first, last]} of the sort columns,
                                       -- so a lookup opens only the parts that can match
    row_groups  VARCHAR,               -- JSON {ends, blake3, first, last}: the byte ranges
                                       -- (each row group, then the footer) with the BLAKE3
                                       -- a read checks; NULL for parts written before v7
    arrays_record VARCHAR              -- a lookup arrays file's JSON record (spec, head,
                                       -- BLAKE3, the parts it was made from); NULL for parts
);

CREATE TABLE corpora (
    name           VARCHAR PRIMARY KEY,
    manifest_hash  VARCHAR NOT NULL,   -- 'blake3:<hex>' under manifest_spec
    manifest_spec  VARCHAR NOT NULL,   -- e.g. 'lineage-manifest/1'
    documents      BIGINT  NOT NULL,
    tokens         BIGINT  NOT NULL,
    bytes          BIGINT  NOT NULL,
    dropped_empty  BIGINT  NOT NULL,   -- empty documents seen in the input and not kept
    tokenizer      VARCHAR NOT NULL,   -- 'bytes', 'manifest', 'input:token_count' or 'tokenizer.json:blake3:<hex>'
    created_at     TIMESTAMP NOT NULL
);

CREATE TABLE corpus_sources (
    corpus     VARCHAR NOT NULL,
    source     VARCHAR NOT NULL,
    documents  BIGINT  NOT NULL,
    tokens     BIGINT  NOT NULL,
    bytes      BIGINT  NOT NULL,
    licenses   VARCHAR[] NOT NULL,     -- distinct licences, sorted; NULL licences left out
    PRIMARY KEY (corpus, source)
);

-- One row per ingest that changed the store: what was read and what it produced.
CREATE TABLE ingests (
    id           VARCHAR PRIMARY KEY,
    kind         VARCHAR NOT NULL,     -- 'corpus', ...
    target       VARCHAR NOT NULL,     -- the corpus (or run, stream) name
    inputs       VARCHAR NOT NULL,     -- JSON: the input files with sizes and kinds
    parameters   VARCHAR NOT NULL,     -- JSON: options that shaped the result
    started_at   TIMESTAMP NOT NULL,
    finished_at  TIMESTAMP NOT NULL,
    lineage_version VARCHAR NOT NULL
);

-- Streams: a canonical order (spec 'lineage-stream/1'), a recorded one ('recorded/2';
-- 'recorded' before) or one imported from a trainer ('imported/2'; 'imported/1' before).
CREATE TABLE streams (
    name                VARCHAR PRIMARY KEY,
    spec                VARCHAR NOT NULL,
    spec_hash           VARCHAR NOT NULL,  -- 'blake3:<hex>' of the canonical parameters
    parameters          VARCHAR NOT NULL,  -- the canonical parameter JSON that spec_hash hashes
    corpus              VARCHAR NOT NULL,
    manifest_hash       VARCHAR NOT NULL,
    seed                UBIGINT,           -- NULL for recorded streams
    seq_len             BIGINT  NOT NULL,
    batch               BIGINT  NOT NULL,  -- windows per step
    separator_tokens    BIGINT  NOT NULL,
    token_budget        BIGINT,
    tokens              BIGINT  NOT NULL,  -- tokens consumed: steps * batch * seq_len
    windows             BIGINT  NOT NULL,
    steps               BIGINT  NOT NULL,
    occurrences         BIGINT  NOT NULL,  -- rows of the occurrence table
    occurrences_digest  VARCHAR NOT NULL,  -- 'blake3:<hex>': lineage-occurrences/2 for imported/2 and recorded/2, else /1
    created_at          TIMESTAMP NOT NULL
);

-- Runs: a training run bound to a stream, with its step hash chain.
CREATE TABLE runs (
    name        VARCHAR PRIMARY KEY,
    stream      VARCHAR,              -- NULL: a foreign chain bound to no stream
    world_size  BIGINT  NOT NULL,
    chain       VARCHAR NOT NULL,     -- 'lineage-chain/2' (or /1), or a foreign chain's name
    algorithm   VARCHAR NOT NULL,     -- 'blake3' (lineage chains) or e.g. 'blake2b' (foreign)
    genesis     VARCHAR NOT NULL,
    header      VARCHAR NOT NULL,     -- the step log's first line, as logged
    created_at  TIMESTAMP NOT NULL,
    end_record  VARCHAR,              -- the end record as logged; NULL while the chain is open
    skip_rule   VARCHAR,              -- JSON: the header's declared skip rule; NULL if none
    checkpoint_every BIGINT           -- the header's checkpoint interval in steps; NULL if none
);

-- One row per step record, kept byte for byte as logged (the bytes that were hashed).
CREATE TABLE steps (
    run             VARCHAR NOT NULL,
    step            BIGINT  NOT NULL,
    segment         BIGINT  NOT NULL,  -- the first log (restart segment) that recorded it
    state_hash      VARCHAR,
    prev_hash       VARCHAR,
    loss            DOUBLE,
    grad_norm       DOUBLE,
    lr              DOUBLE,
    clipped         BOOLEAN,
    skipped         BOOLEAN,
    weights_digest  VARCHAR,
    record          VARCHAR NOT NULL,
    PRIMARY KEY (run, step)
);

CREATE TABLE run_segments (
    run          VARCHAR NOT NULL,
    segment      BIGINT  NOT NULL,
    log_path     VARCHAR NOT NULL,
    log_hash     VARCHAR NOT NULL,    -- 'blake3:<hex>' of the log file as ingested
    first_step   BIGINT  NOT NULL,
    last_step    BIGINT  NOT NULL,
    records      BIGINT  NOT NULL,
    new_steps    BIGINT  NOT NULL,
    ingested_at  TIMESTAMP NOT NULL,
    PRIMARY KEY (run, segment)
);

CREATE TABLE checkpoints (
    run                   VARCHAR NOT NULL,
    step                  BIGINT  NOT NULL,
    path                  VARCHAR NOT NULL,
    files                 VARCHAR NOT NULL,  -- JSON: path, size, sha256, blake3, format
    structure_ok          BOOLEAN NOT NULL,
    checksums_ok          BOOLEAN,           -- NULL when no checksum list was given
    weights_digest        VARCHAR,           -- computed from the checkpoint's tensors
    chain_weights_digest  VARCHAR,           -- what the chain recorded for that step
    matches_chain         BOOLEAN,           -- NULL when the chain has no record to compare
    verdicts              VARCHAR NOT NULL,  -- JSON: the `lineage verify` report
    created_at            TIMESTAMP NOT NULL,
    state_digest          VARCHAR,           -- weights + optimizer/state.safetensors
    chain_state_digest    VARCHAR,           -- the chain's state_digest for that step
    matches_state         BOOLEAN,           -- NULL when either side is missing
    risks                 VARCHAR,           -- JSON: {"ok", "findings"} of the risk checks
    PRIMARY KEY (run, step)
);

-- Experiment records (lineage-experiment/1): what ran, on which files, on which machine.
CREATE TABLE experiments (
    id             VARCHAR PRIMARY KEY,  -- 'exp-' + 12 hex of record_digest
    name           VARCHAR,
    outcome        VARCHAR NOT NULL,     -- 'passed', 'check-failed', 'command-failed'
    revision       VARCHAR,
    created_at     TIMESTAMP NOT NULL,
    record         VARCHAR NOT NULL,     -- canonical JSON of the whole record
    record_digest  VARCHAR NOT NULL,     -- 'blake3:<hex>' of `record`
    sums_text      VARCHAR               -- the checksum list used, verbatim
);

-- Text indexes (docs/text-spec.md): one per corpus ingested with text.
CREATE TABLE text_indexes (
    corpus            VARCHAR PRIMARY KEY,
    text_spec         VARCHAR NOT NULL,  -- normalization, e.g. 'lineage-text/1'
    fingerprint_spec  VARCHAR NOT NULL,  -- e.g. 'lineage-fingerprint/1'
    k                 BIGINT  NOT NULL,  -- words per gram
    w                 BIGINT  NOT NULL,  -- grams per winnowing window
    documents         BIGINT  NOT NULL,  -- documents with a text identity
    not_text          BIGINT  NOT NULL,  -- documents without one (not UTF-8, or no words)
    words             BIGINT  NOT NULL,  -- normalized words over those documents
    fingerprints      BIGINT  NOT NULL,
    text_bytes        BIGINT  NOT NULL,  -- bytes of the indexed documents
    index_bytes       BIGINT  NOT NULL,  -- bytes of the fingerprint parts
    unicode_version   VARCHAR            -- Unicode version of the normalization, e.g. '14.0.0';
                                         -- NULL: built before schema 5 recorded it
);


-- Experiment logs (schema 6): the whole stdout and stderr of experiment commands, as zstd
-- files under logs/ named by the BLAKE3 of the bytes written (docs/experiments.md).
CREATE TABLE experiment_logs (
    experiment     VARCHAR NOT NULL,  -- experiments.id
    stream         VARCHAR NOT NULL,  -- 'stdout' or 'stderr'
    content        VARCHAR NOT NULL,  -- 'blake3:<hex>' of the bytes as the command wrote them
    n_bytes        BIGINT  NOT NULL,  -- their length
    path           VARCHAR NOT NULL,  -- 'logs/<hex>.zst', relative to the store
    stored_bytes   BIGINT  NOT NULL,  -- size of the zstd file
    stored_sha256  VARCHAR NOT NULL,  -- hex SHA-256 of the zstd file (store verify)
    PRIMARY KEY (experiment, stream)
);

-- Audit records (schema 8): the ledger of docs/audit-spec.md (lineage-audit/1), one row per
-- attestation, claim or intermediate checkpoint record, immutable; adding one twice is a no-op.
-- A signed version of a held record is a row of its own; readers count each record once.
CREATE TABLE audit_records (
    id          VARCHAR PRIMARY KEY,  -- 'blake3:<hex>' of the canonical record (signature left out)
    kind        VARCHAR NOT NULL,     -- 'attestation', 'claim' or 'checkpoint'
    run         VARCHAR NOT NULL,     -- the run the record is about (runs.name)
    chain_head  VARCHAR NOT NULL,     -- the run's last state_hash the record was made against
    step        BIGINT,               -- attestation, checkpoint: the step; claim: its first step
    last_step   BIGINT,               -- claim: its last step (inclusive); otherwise = step
    auditor     VARCHAR NOT NULL,     -- the auditor's display name
    public_key  VARCHAR,              -- the auditor's ssh-ed25519 key line, when the record names one
    signed      BOOLEAN NOT NULL,     -- carries a signature that verified when it was added
    result      VARCHAR,              -- attestation: 'match' or 'mismatch'
    unit        VARCHAR,              -- attestation: 'step-replay' or 'initial-state'
    start_kind  VARCHAR,              -- attestation: 'published', 'intermediate' or 'initial'
    start_ref   VARCHAR,              -- attestation from an intermediate checkpoint: that record's id
    swapped     BOOLEAN,              -- attestation: the machine swapped during the replay
    duration_s  DOUBLE,               -- attestation: seconds the replay took (self-reported)
    expires_at  TIMESTAMP,            -- claim: when it stops counting (UTC)
    created_at  TIMESTAMP NOT NULL,   -- when the record says it was made (UTC)
    record      VARCHAR NOT NULL,     -- the whole record as JSON, signature included
    log_position BIGINT               -- its current version's leaf in the store's own log (schema 11)
);

-- OpenLineage events (schema 9): events read back by `lineage ingest openlineage`
-- (docs/exports.md), each kept once.
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

-- The ledger as a transparency log (schema 11, docs/audit-spec.md): every record the ledger
-- accepts is appended to the store's own RFC 6962 log, kept as tlog-tiles, its head signed by
-- the store's key; the heads and tiles of other logs imported from bundles are kept to check
-- that a later copy extends them.
CREATE TABLE audit_logs (
    origin        VARCHAR PRIMARY KEY,  -- the log's origin line, also its key's name
    own           BOOLEAN NOT NULL,     -- the store's own log (appended and signed here); else a copy of another's
    verifier_key  VARCHAR NOT NULL,     -- the signed-note verifier key of its checkpoints
    size          BIGINT  NOT NULL,     -- leaves in the latest checkpoint held
    root          VARCHAR NOT NULL,     -- that checkpoint's root hash, hex
    checkpoint    VARCHAR NOT NULL      -- that checkpoint as a signed note
);
CREATE TABLE audit_log_entries (
    origin     VARCHAR NOT NULL,  -- the store's own log (audit_logs.origin)
    position   BIGINT  NOT NULL,  -- the leaf's index, from 0
    record_id  VARCHAR NOT NULL,  -- the record it holds (audit_records.id)
    entry      VARCHAR NOT NULL   -- the leaf's bytes: the record's canonical JSON as accepted
);
CREATE TABLE audit_log_tiles (
    tile_key VARCHAR PRIMARY KEY,  -- '<origin>#<L>/<N>': one value, found through its index
    origin   VARCHAR NOT NULL,     -- the log (audit_logs.origin)
    level    INTEGER NOT NULL,     -- tile level L: hashes of nodes of height 8L
    idx      BIGINT  NOT NULL,     -- tile index N
    width    INTEGER NOT NULL,     -- hashes in the tile: 256 (a full tile)
    data     BLOB    NOT NULL      -- the tile's bytes, as at tile/<L>/<N>
);
-- The partial tile at the right edge of each level (full tiles never change; this one is
-- rewritten by every append, so it lives in a table of a few rows).
CREATE TABLE audit_log_edges (
    origin  VARCHAR NOT NULL,  -- the log (audit_logs.origin)
    level   INTEGER NOT NULL,  -- tile level L
    idx     BIGINT  NOT NULL,  -- tile index N
    width   INTEGER NOT NULL,  -- hashes in the tile, 1 to 255
    data    BLOB    NOT NULL,  -- the tile's bytes, as at tile/<L>/<N>.p/<W>
    PRIMARY KEY (origin, level)
);
