"""The lookup arrays' writer alone: wall time, CPU and peak memory of making each arrays
file of a store again, beside DuckDB reading the same parts' columns.

    .venv/bin/python bench/arrays_write.py --store STORE [--label 10M]

Each file registered in the store (a corpus's, a stream's) is made again from its parts
by `lineage.store.arrays_write.build_arrays` (what `lineage store repair` runs), each in
a process of its own, timed with its peak resident set (/usr/bin/time's maximum RSS);
then its bytes are compared with the file's before (the same parts make the same
bytes). The floor, in the same run: DuckDB copying every column the file is made from
to one Parquet file (`COPY (SELECT ... FROM read_parquet(parts)) TO ...`, 2 threads,
1 GB), beside the parts. The store is changed only by
having its files written again, byte for byte. Output: bench/out/arrays-write-<label>.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BUILD = """
import sys
from lineage.api import open_store
from lineage.store.arrays_write import build_arrays
print(build_arrays(open_store(sys.argv[1]), sys.argv[2], sys.argv[3]))
"""
FLOOR = """
import os, sys, tempfile, duckdb
con = duckdb.connect()
con.execute("SET threads = 2")
con.execute("SET memory_limit = '1GB'")
with tempfile.TemporaryDirectory(dir=os.path.dirname(sys.argv[3])) as folder:
    con.execute(f"COPY (SELECT {sys.argv[2]} FROM read_parquet(?)) TO "
                f"'{folder}/copy.parquet'", [sys.argv[3:]])
"""


def timed(args: list[str]) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile("r", suffix=".time") as timing:
        done = subprocess.run(["/usr/bin/time", "-v", "-o", timing.name, sys.executable,
                               *args], capture_output=True, text=True, check=False)
        if done.returncode:
            raise RuntimeError(done.stderr[-2000:])
        text = timing.read()
    field = {line.split(":", 1)[0].strip(): line.rsplit(":", 1)[1].strip()
             for line in text.splitlines() if ":" in line}
    wall = field["Elapsed (wall clock) time (h"].split(":")
    seconds = sum(float(x) * 60 ** i for i, x in enumerate(reversed(wall)))
    return {"seconds": round(seconds, 2),
            "cpu_s": round(float(field["User time (seconds)"])
                           + float(field["System time (seconds)"]), 2),
            "max_rss_mb": round(int(field["Maximum resident set size (kbytes)"]) / 1024),
            "load": " ".join(f"{x:.2f}" for x in os.getloadavg())}


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 24):
            digest.update(chunk)
    return digest.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--label", default="store")
    args = parser.parse_args()
    import lineage
    from lineage.store.arrays import ARRAY_TABLES

    store = lineage.open_store(args.store)
    kinds = {kind: table for table, kind in ARRAY_TABLES.items()}
    files = store.sql("SELECT table_name, owner, path FROM parquet_files WHERE table_name "
                      "LIKE '%_arrays' ORDER BY table_name DESC, owner",
                      max_rows=None).rows  # occurrences_arrays after document_hashes
    results: list[dict[str, Any]] = []
    for kind, owner, path in sorted(files, key=lambda r: r[0] != "document_hashes_arrays"):
        if kind not in kinds:
            continue
        table = kinds[kind]
        before = sha256(args.store / path)
        size = (args.store / path).stat().st_size
        parts = [str(args.store / r[0]) for r in store.sql(
            f"SELECT path FROM parquet_files WHERE table_name = '{table}' AND owner = "
            f"'{owner}' ORDER BY path", max_rows=None).rows]
        columns = {"document_hashes": "content_hash, doc_id, source",
                   "occurrences": "stream_start, stream_end, epoch, doc_offset, doc_id",
                   "occurrence_hashes": "content_hash, doc_id, epoch, stream_start"}[table]
        floor = timed(["-c", FLOOR, "x", columns, *parts])
        ours = timed(["-c", BUILD, str(args.store), table, owner])
        now = store.sql(f"SELECT path FROM parquet_files WHERE table_name = '{kind}' AND "
                        f"owner = '{owner}'", max_rows=None).rows[0][0]
        results.append({"table": kind, "owner": owner, "bytes": size, "lineage": ours,
                        "duckdb_read": floor,
                        "same_bytes": sha256(args.store / now) == before})
        print(json.dumps(results[-1]), flush=True)
    out = REPO / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"arrays-write-{args.label}.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
