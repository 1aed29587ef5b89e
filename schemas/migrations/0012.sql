-- Schema 12: each full tile of a log has one key (`audit_log_tiles.tile_key`), so that an inclusion proof finds its tiles through the primary key's index instead of scanning them all.
CREATE TABLE audit_log_tiles_12 (
    tile_key VARCHAR PRIMARY KEY,
    origin   VARCHAR NOT NULL,
    level    INTEGER NOT NULL,
    idx      BIGINT  NOT NULL,
    width    INTEGER NOT NULL,
    data     BLOB    NOT NULL
);
INSERT INTO audit_log_tiles_12
SELECT origin || '#' || level || '/' || idx, origin, level, idx, width, data
FROM audit_log_tiles ORDER BY origin, level, idx;
DROP TABLE audit_log_tiles;
ALTER TABLE audit_log_tiles_12 RENAME TO audit_log_tiles;
