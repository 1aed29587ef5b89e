"""A document's row of a corpus's table (`documents`, `text_documents`) by its doc_id,
read from the one row group that can hold it.

The catalog records where each row group of a part ends and the BLAKE3 of each, but not
the doc_ids a row group holds; the part's footer does (each row group's smallest and
largest doc_id). So the footer is read and checked first, the row groups whose range
holds the doc_id are chosen from it, and only their bytes are read, checked and decoded
(lineage/store/part_check.py): on a 10M-document corpus a document page used to hash a
whole part (about 130 MB) to read one row. A part without a record of row groups is
checked whole, as everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from lineage.store.part_check import checked_ranges
from lineage.store.part_read import _footer, _open
from lineage.store.parts import PartEntry, candidate_parts, key_admits

if TYPE_CHECKING:
    import duckdb

    from lineage.store.base import BaseStore


def document_row(con: duckdb.DuckDBPyConnection, store: BaseStore, table: str, corpus: str,
                 doc_id: str, columns: Sequence[str]) -> dict[str, Any] | None:
    """The row of `doc_id` in the corpus's `table`, as `columns`; None if it has none.
    DamagedPartError if a byte it is read from is not as written."""
    for part in candidate_parts(con, store, table, corpus,
                                key_admits(any_of=("doc_id", [doc_id]))):
        row = _row_in_part(store, part, doc_id, columns)
        if row is not None:
            return row
    return None


def _row_in_part(store: BaseStore, part: PartEntry, doc_id: str,
                 columns: Sequence[str]) -> dict[str, Any] | None:
    import pyarrow.compute as pc

    footer = checked_ranges(store.root, part.path, part.n_bytes, part.sha256,
                            part.row_groups, only=())
    if footer.whole:  # checked whole: every row group may be read
        parquet = _open(footer, part.n_bytes)
        groups = _groups_holding(parquet.metadata, doc_id)
    else:
        groups = _groups_holding(_footer(footer.footer_digest, footer.data[max(footer.data)]),
                                 doc_id)
        if not groups:
            return None
        parquet = _open(checked_ranges(store.root, part.path, part.n_bytes, part.sha256,
                                       part.row_groups, only=groups), part.n_bytes)
    if not groups:
        return None
    # One decode of the columns asked for: the doc_id is nearly always there (a page
    # links to documents that exist), so reading its column first would only add one.
    rows = parquet.read_row_groups(groups, columns=list(dict.fromkeys(["doc_id", *columns])),
                                   use_threads=False)
    found = rows.filter(pc.equal(rows["doc_id"], doc_id)).slice(0, 1).to_pylist()
    return {name: found[0][name] for name in columns} if found else None


def _groups_holding(metadata: Any, doc_id: str) -> list[int]:
    """The row groups whose smallest..largest doc_id (the footer's statistics) holds
    `doc_id`; a row group without statistics may hold anything."""
    column = metadata.schema.to_arrow_schema().get_field_index("doc_id")
    groups = []
    for number in range(metadata.num_row_groups):
        stats = metadata.row_group(number).column(column).statistics
        if stats is None or not stats.has_min_max or stats.min <= doc_id <= stats.max:
            groups.append(number)
    return groups
