-- Schema 2: parts record the range of their sort columns, so lookups skip parts.
ALTER TABLE parquet_files ADD COLUMN key_ranges VARCHAR;
