"""Polars frames over the store's tables (`Store.frame(name)`).

A bulk table's frame is a lazy scan of exactly the Parquet parts the catalog lists for it
(`parquet_files`), never a glob: a file in the table's folder that the catalog does not
list is garbage, not data. Each part is checked against the catalog before the frame is
made, the way lookups check the parts they read (lineage/store/part_check.py); a frame
over a whole table can read any row group, so every byte of its parts is re-hashed once.

A catalog table (corpora, streams, runs, steps, ...) is small: its frame is the table
read once, read-only, through the store's reader (DuckDB -> Arrow -> polars), so the
frame keeps what the catalog held when it was made and holds no lock afterwards.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from lineage.errors import UnknownObjectError
from lineage.schemas import (
    BULK_TABLES,
    catalog_ddl,
    document_hashes_schema,
    documents_schema,
    fingerprints_schema,
    near_bands_schema,
    occurrence_hashes_schema,
    occurrences_schema,
    text_documents_schema,
    text_hashes_schema,
)
from lineage.store.base import BaseStore, part_paths

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

# The Arrow schema of each Parquet-backed table: a frame of a table with no parts yet
# still has its columns and types.
BULK_SCHEMAS: dict[str, Callable[[], pa.Schema]] = {
    "documents": documents_schema,
    "document_hashes": document_hashes_schema,
    "occurrences": occurrences_schema,
    "occurrence_hashes": occurrence_hashes_schema,
    "text_documents": text_documents_schema,
    "text_hashes": text_hashes_schema,
    "fingerprints": fingerprints_schema,
    "near_bands": near_bands_schema,
}


def scan_table(store: BaseStore, name: str, *, check: bool = True) -> pl.LazyFrame:
    """A LazyFrame over the store's table `name`; UnknownObjectError for any other name.

    `check=False` skips re-hashing a bulk table's parts (see the module docstring)."""
    if name in BULK_TABLES:
        return _scan_parts(store, name, check=check)
    if name in catalog_tables():
        return _read_catalog_table(store, name)
    raise UnknownObjectError(f"no table named {name!r} (tables: {', '.join(table_names())})")


def table_names() -> tuple[str, ...]:
    """Every table a frame can be made of: the Parquet-backed ones, then the catalog's."""
    return (*BULK_TABLES, *catalog_tables())


@functools.cache
def catalog_tables() -> tuple[str, ...]:
    """The catalog's tables at this schema version, in the order the DDL creates them
    (a reader refuses a catalog of any other version, so these are the ones it holds)."""
    return tuple(re.findall(r"^CREATE TABLE (\w+)", catalog_ddl(), flags=re.MULTILINE))


def _scan_parts(store: BaseStore, table: str, *, check: bool) -> pl.LazyFrame:
    import polars as pl

    from lineage.store.part_check import check_part

    with store.reader(views=False) as con:
        rows = con.execute("SELECT path, n_bytes, sha256, row_groups FROM parquet_files "
                           "WHERE table_name = ? ORDER BY path", [table]).fetchall()
    paths = part_paths(store.root, [rel for rel, *_ in rows])  # plain paths only
    if check:
        for rel, n_bytes, sha256, row_groups in rows:
            check_part(store.root, rel, n_bytes, sha256, row_groups)
    schema = _polars_schema(BULK_SCHEMAS[table]())
    if not paths:
        return pl.LazyFrame(schema=schema)
    # glob=False: the listed names are read as they are, never expanded; no hive
    # partitioning, so a `key=value` folder above the store adds no column.
    return pl.scan_parquet(paths, schema=schema, glob=False, hive_partitioning=False)


def _read_catalog_table(store: BaseStore, table: str) -> pl.LazyFrame:
    import polars as pl

    with store.reader(views=False) as con:  # the catalog attached read-only
        arrow = con.sql(f'SELECT * FROM "{table}"').to_arrow_table()
    frame = pl.from_arrow(arrow)
    assert isinstance(frame, pl.DataFrame)  # a Table (not an Array) gives a DataFrame
    return frame.lazy()


def _polars_schema(schema: pa.Schema) -> pl.Schema:
    """The polars column types of an Arrow schema (those of the parts the writers wrote)."""
    import polars as pl

    frame = pl.from_arrow(schema.empty_table())
    assert isinstance(frame, pl.DataFrame)
    return frame.schema
