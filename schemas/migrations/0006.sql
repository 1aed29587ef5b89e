-- Schema 6: the whole stdout and stderr of experiment commands (zstd files under logs/).
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
