-- Schema 10: a lookup arrays file's record in a column of its own (`parquet_files.arrays_record`), so that finding it reads no part's row-group ranges.
ALTER TABLE parquet_files ADD COLUMN arrays_record VARCHAR;
UPDATE parquet_files SET arrays_record = row_groups, row_groups = NULL
WHERE table_name IN ('document_hashes_arrays', 'occurrences_arrays', 'occurrence_hashes_arrays');
