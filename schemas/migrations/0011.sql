-- Schema 11: the ledger as a transparency log: the store's own log (entries, tlog-tiles, signed checkpoint) and the copies of other logs it imported.
CREATE TABLE audit_logs (
    origin        VARCHAR PRIMARY KEY,
    own           BOOLEAN NOT NULL,
    verifier_key  VARCHAR NOT NULL,
    size          BIGINT  NOT NULL,
    root          VARCHAR NOT NULL,
    checkpoint    VARCHAR NOT NULL
);
CREATE TABLE audit_log_entries (
    origin     VARCHAR NOT NULL,
    position   BIGINT  NOT NULL,
    record_id  VARCHAR NOT NULL,
    entry      VARCHAR NOT NULL
);
CREATE TABLE audit_log_tiles (
    origin  VARCHAR NOT NULL,
    level   INTEGER NOT NULL,
    idx     BIGINT  NOT NULL,
    width   INTEGER NOT NULL,
    data    BLOB    NOT NULL,
    PRIMARY KEY (origin, level, idx)
);
CREATE TABLE audit_log_edges (
    origin  VARCHAR NOT NULL,
    level   INTEGER NOT NULL,
    idx     BIGINT  NOT NULL,
    width   INTEGER NOT NULL,
    data    BLOB    NOT NULL,
    PRIMARY KEY (origin, level)
);
ALTER TABLE audit_records ADD COLUMN log_position BIGINT;
