"""What the store's small operations cost in one process: creating a store, a small
ingest, a small stream build, a write of one catalog row, and `store.sql` over a table
written in many parts.

    .venv/bin/python bench/store_ops.py [--runs 9] [--parts 1000]

These are the fixed costs a notebook, a script of many ingests or a test suite pays
again and again (a large ingest is bench/run.py's). Each figure is the median of
`--runs` wall-clock timings in one warm process, next to the same machine's plain-Python
reference (bench/serve.py's: a shared machine's hours differ by 2x and more).
Results go to bench/out/store_ops.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))


def small_manifest(path: Path, documents: int = 30) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({
        "doc_id": [f"web/{i:05d}" for i in range(documents)],
        "source": ["web"] * documents, "uri": [None] * documents,
        "n_bytes": [50] * documents, "n_tokens": [50] * documents,
        "content_hash": [f"{i:064x}" for i in range(documents)]}), path)
    return path


def timed(action: Callable[[], Any], runs: int) -> float:
    """The median milliseconds of `runs` calls, after one untimed call."""
    action()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        times.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(times), 1)


def many_parts_store(folder: Path, parts: int) -> Any:
    """A store whose corpus of `parts` x 4 documents is written in parts of 4 rows."""
    import lineage
    from lineage.ingest import ingest_corpus
    from lineage.store import parts as store_parts

    class FourRows(store_parts._RotatingWriter):  # type: ignore[misc]
        def __init__(self, out_dir: Path, schema: Any, written: list[Any], sorted_by: Any,
                     part_rows: int, row_group_rows: int, *rest: Any) -> None:
            super().__init__(out_dir, schema, written, sorted_by, 4, 4, *rest)

    root = folder / "many"
    lineage.init_store(root)
    store = lineage.open_store(root)
    original = store_parts._RotatingWriter
    store_parts._RotatingWriter = FourRows
    try:
        ingest_corpus(store, [small_manifest(folder / "many.parquet", parts * 4)],
                      corpus="c")
    finally:
        store_parts._RotatingWriter = original
    return store


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--parts", type=int, default=1000)
    args = parser.parse_args()

    import serve

    import lineage
    from lineage.ingest import ingest_corpus
    from lineage.stream.build import build_stream

    results: dict[str, Any] = {"reference_ms": serve.reference_ms()}
    with tempfile.TemporaryDirectory(prefix="lineage-store-ops-") as tmp:
        folder = Path(tmp)
        manifest = small_manifest(folder / "m.parquet")
        made = iter(range(10**6))

        def fresh() -> Any:
            root = folder / f"s{next(made)}"
            lineage.init_store(root)
            return lineage.open_store(root)

        results["init_store_ms"] = timed(fresh, args.runs)

        def ingest() -> None:
            ingest_corpus(fresh(), [manifest], corpus="c")

        results["init_and_ingest_ms"] = timed(ingest, args.runs)
        built = fresh()
        ingest_corpus(built, [manifest], corpus="c")
        names = iter(range(10**6))
        results["stream_build_ms"] = timed(lambda: build_stream(
            built, corpus="c", name=f"s{next(names)}", seed=1, seq_len=16, batch=2), args.runs)

        def one_row() -> None:
            with built.writer() as con:
                con.execute("UPDATE schema_info SET value = value WHERE key = 'schema_version'")

        results["catalog_write_ms"] = timed(one_row, args.runs)
        many = many_parts_store(folder, args.parts)
        results[f"sql_over_{args.parts}_parts_ms"] = timed(
            lambda: many.sql("SELECT count(*) FROM documents"), args.runs)
    print(json.dumps(results))
    out = REPO / "bench" / "out"
    out.mkdir(exist_ok=True)
    (out / "store_ops.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
