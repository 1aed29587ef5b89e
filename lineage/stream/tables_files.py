"""Write a stream's two tables from its occurrences in a file, out of core.

The canonical build ordered out of core (`lineage.stream.order_files`) leaves its
occurrences in ordinal order as fixed-width rows (rid, epoch, n_tokens, stream_start).
Each table needs every occurrence beside its document's strings, in an order the
documents are not in (ordinal; content hash), so the rows go through two bucket passes,
each bucket small enough to sort in memory:

1. the occurrences are cut by document (rid) range (`RIDS_PER_BUCKET`);
2. each range is joined to its slice of the documents (read in rid order, so by
   position: no hash join), and the joined rows are appended, compressed, to the bucket
   of their ordinal range and the bucket of their content hash's top bits;
3. each bucket, in order, is sorted by DuckDB and written: the buckets one after another
   are the table in order, and the digest is computed over them as they pass.

The rows are those the in-memory path writes, and so are the bytes. Memory is one bucket
at a time; the buckets take about 80 bytes an occurrence on disk at the peak.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lineage.corpora.digest import LineHasher
from lineage.store import faults
from lineage.store.parts import Progress, discard_parts
from lineage.store.parts import report as report_progress
from lineage.stream.order_files import PLACED_ROW, groups
from lineage.stream.spec import OCCURRENCES_SPEC, digest_columns
from lineage.stream.tables import HASH_ORDER, StreamTables, table_rows, write_table

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

    from lineage.store.base import BaseStore

RIDS_PER_BUCKET = 2_000_000  # documents joined at a time
ROWS_PER_BUCKET = 2_000_000  # occurrences sorted at a time (about as many documents)
PLACED_CHUNK_ROWS = 4_000_000  # occurrences cut by document range at a time
_DOCUMENT_COLUMNS = ["doc_id", "source", "n_tokens", "content_hash", "uri"]
_RID_ROW = [("rid", "<i8"), ("ordinal", "<i8"), ("epoch", "<i8"), ("stream_start", "<i8")]
_HEX = bytes.maketrans(b"0123456789abcdef", bytes(range(16)))


def write_from_file(
    con: duckdb.DuckDBPyConnection, store: BaseStore, name: str, corpus: str, placed: Path,
    kept: int, documents: list[str], folder: Path, progress: Progress,
) -> StreamTables:
    """The stream's tables from the first `kept` rows of `placed` (PLACED_ROW records in
    ordinal order), joined to the corpus's `documents` parts; `folder` holds the
    buckets."""
    buckets = max(1, math.ceil(kept / ROWS_PER_BUCKET))
    hash_bits = min(16, math.ceil(math.log2(buckets)))
    report_progress(progress, "sorting occurrences", 0, 3)
    rid_buckets = _cut_by_document(placed, kept, folder)
    report_progress(progress, "sorting occurrences", 1, 3)
    _join_documents(documents, rid_buckets, folder, hash_bits)
    report_progress(progress, "sorting occurrences", 2, 3)
    digest = LineHasher(OCCURRENCES_SPEC, digest_columns(OCCURRENCES_SPEC))
    parts = write_table(
        store, "occurrences",
        _sorted_buckets(con, folder, "ordinal", buckets, name, corpus, "ordinal", [digest]),
        digests=[digest], total=kept, progress=progress, stage="writing occurrences")
    try:
        hash_parts = write_table(
            store, "occurrence_hashes",
            _sorted_buckets(con, folder, "hash", 1 << hash_bits, name, corpus, HASH_ORDER, []),
            digests=[], total=kept, progress=progress, stage="indexing occurrences")
        faults.reach("stream-written")
    except BaseException:
        discard_parts(parts)
        raise
    return StreamTables(parts, hash_parts, digest.prefixed(), kept)


def _bucket_file(folder: Path, kind: str, number: int) -> Path:
    return folder / f"{kind}-{number:06d}.{'bin' if kind == 'rids' else 'arrow'}"


def _cut_by_document(placed: Path, kept: int, folder: Path) -> int:
    """The occurrences appended to the file of their document range, each file in
    ordinal order; the number of ranges."""
    import numpy as np

    rows: Any = np.memmap(placed, dtype=PLACED_ROW, mode="r") if kept else []
    ranges = 0
    for begin in range(0, kept, PLACED_CHUNK_ROWS):
        chunk = np.array(rows[begin:min(begin + PLACED_CHUNK_ROWS, kept)])
        cut = np.empty(len(chunk), dtype=_RID_ROW)
        cut["rid"], cut["epoch"] = chunk["rid"], chunk["epoch"]
        cut["stream_start"] = chunk["stream_start"]
        cut["ordinal"] = np.arange(begin, begin + len(chunk), dtype=np.int64)
        for number, selected in groups(cut["rid"] // RIDS_PER_BUCKET):
            with open(_bucket_file(folder, "rids", number), "ab") as out:
                cut[selected].tofile(out)
            ranges = max(ranges, number + 1)
    return ranges


def _join_documents(documents: list[str], rid_buckets: int, folder: Path,
                    hash_bits: int) -> None:
    """Each document range's occurrences beside their documents' columns, appended to the
    buckets of their ordinals and of their content hashes."""
    import numpy as np
    import pyarrow as pa

    writers: dict[Path, pa.ipc.RecordBatchFileWriter] = {}
    options = pa.ipc.IpcWriteOptions(compression="lz4")

    def append(path: Path, rows: pa.Table) -> None:
        if path not in writers:
            writers[path] = pa.ipc.new_file(str(path), rows.schema, options=options)
        writers[path].write_table(rows)

    try:
        for number, slice_ in enumerate(_document_slices(documents, RIDS_PER_BUCKET)):
            if number >= rid_buckets:
                break
            path = _bucket_file(folder, "rids", number)
            if not path.exists():
                continue
            rows = np.fromfile(path, dtype=_RID_ROW)
            path.unlink()
            rows = rows[np.argsort(rows["rid"], kind="stable")]  # (rid, ordinal)
            joined = slice_.take(pa.array(rows["rid"] - number * RIDS_PER_BUCKET))
            for column in ("ordinal", "epoch", "stream_start"):
                joined = joined.append_column(column, pa.array(rows[column]))
            for bucket, selected in groups(rows["ordinal"] // ROWS_PER_BUCKET):
                append(_bucket_file(folder, "ordinal", bucket), joined.take(selected))
            hashed = joined.drop_columns(["uri"])
            for bucket, selected in groups(_top_bits(joined.column("content_hash"),
                                                      hash_bits)):
                append(_bucket_file(folder, "hash", bucket), hashed.take(selected))
    finally:
        for writer in writers.values():
            writer.close()


def _document_slices(paths: list[str], rows: int) -> Iterator[pa.Table]:
    """The documents' columns in rid order, `rows` at a time."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pending: list[pa.RecordBatch] = []
    count = 0
    for path in paths:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=65_536,
                                                       columns=_DOCUMENT_COLUMNS):
            while batch.num_rows:
                head = batch.slice(0, rows - count)
                pending.append(head)
                count += head.num_rows
                batch = batch.slice(head.num_rows)
                if count == rows:
                    yield pa.Table.from_batches(pending)
                    pending, count = [], 0
    if pending:
        yield pa.Table.from_batches(pending)


def _top_bits(hashes: pa.ChunkedArray, bits: int) -> Any:
    """The top `bits` bits (at most 16) of each 64-hex-digit content hash."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if bits == 0:
        return np.zeros(len(hashes), dtype=np.int64)
    head = pc.utf8_slice_codeunits(hashes, 0, 4).combine_chunks()
    assert isinstance(head, pa.StringArray)
    digits = np.frombuffer(head.buffers()[2], dtype=np.uint8)[:4 * len(head)]
    # 4 ASCII digits a row, back to back (the hashes are checked at ingest)
    values = np.frombuffer(digits.tobytes().translate(_HEX), dtype=np.uint8)
    values = values.reshape(-1, 4).astype(np.int64)
    word = (values[:, 0] << 12) | (values[:, 1] << 8) | (values[:, 2] << 4) | values[:, 3]
    return word >> (16 - bits)


def _sorted_buckets(con: duckdb.DuckDBPyConnection, folder: Path, kind: str, buckets: int,
                    name: str, corpus: str, order: str, digests: list[Any],
                    ) -> Iterator[pa.RecordBatch]:
    """The buckets of `kind` one after another, each sorted by `order` (each removed
    once read)."""
    import pyarrow as pa

    for number in range(buckets):
        path = _bucket_file(folder, kind, number)
        if not path.exists():
            continue
        with pa.memory_map(str(path)) as source, con.cursor() as cursor:
            cursor.register("bucket", pa.ipc.open_file(source).read_all())
            yield from table_rows(
                cursor, "occurrences" if kind == "ordinal" else "occurrence_hashes", name,
                corpus, source="(SELECT *, 0::BIGINT AS doc_offset FROM bucket)", params=[],
                order=order, digests=digests)
        path.unlink()
