"""What a step's lookup would cost if the occurrences were also kept in another format:
the checked Parquet read lineage does now, against Arrow IPC record batches of a few
hundred rows (each batch's bytes checked with BLAKE3, then decoded), uncompressed or
compressed. A measurement for a design decision, not a feature: lineage writes Parquet.

    .venv/bin/python bench/lookup_formats.py --store STORE [--stream main] [--runs 400]

One occurrences part of the stream is read whole into memory and written again in each
format; a lookup of 174 consecutive rows (a step of the 10M-document bench store) is timed
in each, the medians printed, with each format's size.
"""

from __future__ import annotations

import argparse
import io
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import blake3

COLUMNS = ["doc_id", "source", "uri", "content_hash", "epoch", "stream_start", "stream_end",
           "doc_offset", "ordinal"]


def median_ms(call: Callable[[], Any], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return round(statistics.median(times) * 1000, 3)


def parquet_lookup(root: Path, stream: str, runs: int) -> float:
    """lineage's own lookup of a step's rows (lineage/store/part_read.py), in process,
    through a server's copy of the catalog (its catalog rows kept, as `lineage serve`
    keeps them)."""
    from lineage.serve.stores import snapshots_for
    from lineage.store.part_read import lookup_table

    store = snapshots_for(root).served()
    info = store.stream(stream)
    seq_len, batch = int(info["seq_len"]), int(info["batch"])
    span = (1000 * batch * seq_len, 1001 * batch * seq_len)
    with store.reader(views=False) as con:
        return median_ms(lambda: lookup_table(con, store, "occurrences", stream, COLUMNS,
                                              span=span), runs)


def ipc_lookup(table: Any, rows: int, compression: str | None,
               runs: int) -> tuple[float, int]:
    """A lookup in the same rows written as IPC record batches of `rows` rows: the
    batch's bytes hashed, the message decoded, the rows sliced and made Python values."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    sink = io.BytesIO()
    ranges = []
    with ipc.new_stream(sink, table.schema,
                        options=ipc.IpcWriteOptions(compression=compression)) as writer:
        for batch in table.to_batches(max_chunksize=rows):
            start = sink.tell()
            writer.write_batch(batch)
            ranges.append((start, sink.tell()))
    data = sink.getvalue()
    start, end = ranges[len(ranges) // 2]
    chunk = data[start:end]
    recorded = blake3.blake3(chunk).hexdigest()

    def lookup() -> list[list[Any]]:
        if blake3.blake3(chunk).hexdigest() != recorded:
            raise RuntimeError("damaged")
        found = ipc.read_record_batch(ipc.read_message(pa.py_buffer(chunk)), table.schema)
        kept = found.slice(40, 174)
        return [kept.column(i).to_pylist() for i in range(kept.num_columns)]

    return median_ms(lookup, runs), len(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--stream", default="main")
    parser.add_argument("--runs", type=int, default=400)
    args = parser.parse_args()
    import pyarrow.parquet as pq

    import lineage

    store = lineage.open_store(args.store)
    path = store.sql("SELECT path FROM parquet_files WHERE table_name = 'occurrences' AND "
                     f"owner = '{args.stream}' ORDER BY path LIMIT 1").rows[0][0]
    part = args.store / path
    table = pq.read_table(part, columns=COLUMNS)
    ms = parquet_lookup(args.store, args.stream, args.runs)
    print(f"| Parquet (lineage now), {part.stat().st_size / 1e6:.1f} MB | {ms} ms |")
    for rows, compression in ((256, None), (256, "lz4"), (256, "zstd")):
        ms, size = ipc_lookup(table, rows, compression, args.runs)
        print(f"| IPC, {rows}-row batches, {compression or 'uncompressed'}, "
              f"{size / 1e6:.1f} MB | {ms} ms |")


if __name__ == "__main__":
    main()
