"""Map tasks of a corpus ingest, one module per input kind."""
