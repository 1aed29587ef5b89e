"""What the guarded SQL session costs (issue: hostile input, the read-only SQL).

    .venv/bin/python bench/sql_guard.py [--rows 6000000] [--runs 5] [--workdir DIR]

Writes a synthetic `documents`-shaped table as four Parquet parts, then times the same
queries on DuckDB's own Parquet reader (what the unguarded views use) and on the Arrow
datasets the guarded session registers (DuckDB may open no file there), in process,
and a whole Python process answering one count over a store holding the example corpus,
guarded and through the unguarded reader. Medians; results go to
bench/out/sql_guard.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
QUERIES = [
    "SELECT count(*) FROM documents",
    "SELECT sum(n_tokens) FROM documents",
    "SELECT * FROM documents WHERE doc_id = 'doc-4000000'",
    "SELECT n_tokens % 10, count(DISTINCT content_hash) FROM documents GROUP BY 1",
]


def write_parts(folder: Path, rows: int) -> list[str]:
    import duckdb

    files = []
    per_part = rows // 4
    for part in range(4):
        path = folder / f"p{part}.parquet"
        duckdb.sql(
            f"COPY (SELECT 'example' AS corpus, 'doc-' || (range + {part * per_part}) AS doc_id, "
            f"range % 1000 AS n_tokens, sha256(range::VARCHAR) AS content_hash "
            f"FROM range({per_part})) TO '{path}'")
        files.append(str(path))
    return files


def median_ms(action, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return round(statistics.median(times) * 1000, 1)


def in_process(files: list[str], runs: int) -> dict[str, dict[str, float]]:
    import duckdb
    import pyarrow.dataset as ds

    native = duckdb.connect()
    listed = ", ".join(f"'{f}'" for f in files)
    native.execute(f"CREATE VIEW documents AS SELECT * FROM read_parquet([{listed}])")
    arrow = duckdb.connect()
    arrow.register("documents", ds.dataset(files, format="parquet"))
    return {q: {"read_parquet_ms": median_ms(lambda q=q: native.execute(q).fetchall(), runs),
                "arrow_dataset_ms": median_ms(lambda q=q: arrow.execute(q).fetchall(), runs)}
            for q in QUERIES}


def whole_process(store: Path, runs: int) -> dict[str, float]:
    """A fresh Python process answering one count: start-up, imports, opening, query."""
    head = "import sys\nfrom lineage.api import open_store\nstore = open_store(sys.argv[1])\n"
    unguarded = head + ("with store.reader() as con:\n"
                        "    print(con.execute('SELECT count(*) FROM documents').fetchall())\n")
    guarded = head + ("from lineage.store.sql_guard import run_guarded_sql\n"
                      "print(run_guarded_sql(store, 'SELECT count(*) FROM documents').rows)\n")

    def run(code: str) -> None:
        subprocess.run([sys.executable, "-c", code, str(store)], check=True, capture_output=True)

    return {"guarded_process_ms": median_ms(lambda: run(guarded), runs),
            "unguarded_process_ms": median_ms(lambda: run(unguarded), runs)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=6_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-sql-guard-"))
    work.mkdir(parents=True, exist_ok=True)
    from lineage.api import init_store, open_store
    from lineage.ingest import ingest_corpus

    store_root = work / "store"
    if not store_root.exists():
        init_store(store_root)
        ingest_corpus(open_store(store_root), [REPO / "examples" / "corpus"], corpus="example")
    result = {"rows": args.rows, "runs": args.runs,
              "queries": in_process(write_parts(work, args.rows), args.runs),
              "process": whole_process(store_root, args.runs)}
    out = REPO / "bench" / "out" / "sql_guard.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
