"""Making lookup copies (lineage/store/lookup_copy.py reads them): every part of the
lookup tables, read from its checked bytes, written again as IPC record batches."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import blake3

from lineage.store.lookup_copy import INDEX_NAME, SPEC
from lineage.store.part_check import RangeRecord, checked_ranges
from lineage.store.parts import RANGE_DIGEST_BYTES, Progress, report

if TYPE_CHECKING:
    import pyarrow as pa

    from lineage.store.base import BaseStore
    from lineage.store.part_select import PartEntry

# The tables lookups read by key (lineage/store/part_read.py `lookup_table`).
COPIED_TABLES = ("occurrences", "occurrence_hashes", "document_hashes", "text_hashes",
                 "fingerprints", "text_documents")
# Rows per batch: a step of the 10M-document bench store holds ~130 occurrences, so it
# reads one batch or two (at 2,048 rows, a Parquet row group decodes 15 times that).
BATCH_ROWS = 256


def make_copies(store: BaseStore, folder: Path, *, tables: Sequence[str] = COPIED_TABLES,
                batch_rows: int = BATCH_ROWS, progress: Progress = None) -> str:
    """Copy every part of `tables` the catalog lists into `folder` (which should be empty
    and private to this user) and write the index; return the index's BLAKE3, which a
    reader must be given to load them. Parts registered without a record of their row
    groups' key values (before schema 7) are not copied: a lookup would read all of it."""
    from lineage.store.part_select import candidate_parts

    with store.reader(views=False) as con:
        parts = [part for table in tables
                 for part in candidate_parts(con, store, table, None, lambda first, last: True)]
    recorded = [(part, RangeRecord.parse(part.row_groups)) for part in parts
                if part.row_groups is not None]
    copied = [(part, record) for part, record in recorded if record.first]
    total = sum(part.n_rows for part, _ in copied)
    entries, done = [], 0
    for number, (part, record) in enumerate(copied):
        name = f"{number:06d}.arrows"
        n_bytes, made = _copy_part(store, part, record, folder / name, batch_rows)
        entries.append({"path": part.path, "sha256": part.sha256, "file": name,
                        "n_bytes": n_bytes, "record": made})
        done += part.n_rows
        report(progress, "copying lookup tables", done, total)
    data = json.dumps({"spec": SPEC, "batch_rows": batch_rows, "parts": entries}).encode()
    (folder / INDEX_NAME).write_bytes(data)
    return blake3.blake3(data).hexdigest()


def _copy_part(store: BaseStore, part: PartEntry, record: RangeRecord, target: Path,
               batch_rows: int) -> tuple[int, dict[str, Any]]:
    """Write `part`'s rows, read from its checked bytes, as batches then the schema;
    return the file's size and its record (as a part's `row_groups` record is written)."""
    from lineage.store.part_read import open_checked

    chunks = checked_ranges(store.root, part.path, part.n_bytes, part.sha256, record)
    rows = open_checked(chunks, part.n_bytes).read(use_threads=False).combine_chunks()
    keys = list(record.first)
    ends: list[int] = []
    digests: list[str] = []
    first: dict[str, list[Any]] = {key: [] for key in keys}
    last: dict[str, list[Any]] = {key: [] for key in keys}
    at = 0
    with target.open("wb") as out:
        for batch in rows.to_batches(max_chunksize=batch_rows):
            for key in keys:
                first[key].append(batch[key][0].as_py())
                last[key].append(batch[key][-1].as_py())
            at = _put(out, batch.serialize(), ends, digests, at)
        at = _put(out, rows.schema.serialize(), ends, digests, at)
    return at, {"ends": ends, "blake3": digests, "first": first, "last": last}


def _put(out: Any, data: pa.Buffer, ends: list[int], digests: list[str], at: int) -> int:
    """Append one byte range to the copy and to its record; return where it ends."""
    out.write(data)
    end = at + int(data.size)
    ends.append(end)
    digests.append(blake3.blake3(data).hexdigest(length=RANGE_DIGEST_BYTES))
    return end
