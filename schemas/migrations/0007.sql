-- Schema 7: the byte range and BLAKE3 of each row group and footer of a Parquet part, checked by every read.
ALTER TABLE parquet_files ADD COLUMN row_groups VARCHAR;
