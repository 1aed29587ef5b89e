-- Schema 8: the audit ledger (docs/audit-spec.md): attestations, claims and intermediate checkpoints of runs.
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
    record      VARCHAR NOT NULL      -- the whole record as JSON, signature included
);
