"""The store: a directory holding `catalog.duckdb` and the Parquet parts it lists.

Catalog connections (`base`), Parquet parts and their checks on read (`parts`,
`part_check`), durable writes (`durable`, `scratch`), whole-store verification
(`integrity`), the guarded read-only SQL session (`sql_guard`, `query`), polars frames
over the tables (`frames`), the named fault points crash tests use (`faults`), what a
reader of a fixed catalog copy keeps between questions (`memo`), the lookup tables'
copies a server reads instead of their parts (`lookup_copy`, `lookup_copy_write`), the
lookup arrays that answer lookups by binary search (`arrays`: the format and its
reader; `arrays_spool`: the batch writer's scratch columns; `arrays_rows`: what each file
holds; `arrays_write`: making and publishing them; `arrays_use`: the lookups), and a
question's budget of rows for answering it at once (`budget`).

Layer 1, the bottom of the core. May import: lineage.errors, lineage.schemas.
"""
