"""What the guarded SQL session costs (issue: hostile input, the read-only SQL).

    .venv/bin/python bench/sql_guard.py [--rows 6000000] [--runs 5] [--workdir DIR]
    .venv/bin/python bench/sql_guard.py --hostile [--workdir DIR]

`--hostile` instead runs queries that try to take the machine's time and memory: each
through `lineage sql --timeout 5` (its wall time, peak memory and error line), then
through a real `lineage serve` (alone, then four at once: the answers' times and the
peak memory of the server's process and of its SQL process), and the cost of a plain
`/api/sql` answer now that SQL runs in a process of its own (p50 of 50, against
`run_guarded_sql` in process). Results go to bench/out/sql_guard_hostile.json.

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
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
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


HOSTILE = [
    "SELECT length(repeat('x', 3000000000))",  # one call: neither counted nor interrupted
    "SELECT max(length(repeat('x', 10000000 + range % 2))) FROM range(100000)",
    "SELECT len(list(range)) FROM range(500000000)",  # counted by DuckDB
    "SELECT count(*) FROM range(1000000000) a, range(1000000000) b",  # interrupted
]


def _measured(command: list[str]) -> dict[str, object]:
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True)
    assert process.stderr is not None
    with process.stderr:
        stderr = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    return {"seconds": round(time.perf_counter() - started, 2),
            "peak_mb": usage.ru_maxrss // 1024, "exit": process.returncode,
            "stderr": stderr.strip()}


def _peak_mb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024
    return 0


def hostile(store: Path) -> dict[str, object]:
    import httpx

    cli = [sys.executable, "-m", "lineage.cli", "--store", str(store)]
    result: dict[str, object] = {
        "cli": {q: _measured([*cli, "sql", "--timeout", "5", q]) for q in HOSTILE}}
    port = 18000 + os.getpid() % 1000
    server = subprocess.Popen([*cli, "serve", "--port", str(port)], stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        while True:
            try:
                httpx.get(f"{url}/health", timeout=120)
                break
            except httpx.ConnectError:
                time.sleep(0.2)

        def ask(query: str) -> dict[str, object]:
            started = time.perf_counter()
            answer = httpx.post(f"{url}/api/sql", content=query, timeout=300)
            return {"seconds": round(time.perf_counter() - started, 2),
                    "status": answer.status_code, "answer": answer.text.strip()[:160]}

        served: dict[str, object] = {q: ask(q) for q in HOSTILE}
        with ThreadPoolExecutor(4) as pool:
            served["four at once"] = list(pool.map(ask, [HOSTILE[0]] * 4))
        helpers = Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split()
        served["server_peak_mb"] = _peak_mb(server.pid)
        served["sql_process_peak_mb"] = [_peak_mb(int(pid)) for pid in helpers]
        plain = []
        for _ in range(50):
            started = time.perf_counter()
            httpx.post(f"{url}/api/sql", content="SELECT count(*) FROM documents")
            plain.append(time.perf_counter() - started)
        served["plain_answer_p50_ms"] = round(statistics.median(plain) * 1000, 2)
        result["serve"] = served
    finally:
        server.send_signal(signal.SIGINT)
        server.communicate(timeout=60)
    from lineage.api import open_store
    from lineage.store.sql_guard import run_guarded_sql

    opened = open_store(store)
    result["in_process_p50_ms"] = median_ms(
        lambda: run_guarded_sql(opened, "SELECT count(*) FROM documents"), 50)
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=6_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--hostile", action="store_true")
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-sql-guard-"))
    work.mkdir(parents=True, exist_ok=True)
    from lineage.api import init_store, open_store
    from lineage.ingest import ingest_corpus

    store_root = work / "store"
    if not store_root.exists():
        init_store(store_root)
        ingest_corpus(open_store(store_root), [REPO / "examples" / "corpus"], corpus="example")
    if args.hostile:
        found = hostile(store_root)
        out = REPO / "bench" / "out" / "sql_guard_hostile.json"
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps(found, indent=2) + "\n")
        print(json.dumps(found, indent=2))
        return
    result = {"rows": args.rows, "runs": args.runs,
              "queries": in_process(write_parts(work, args.rows), args.runs),
              "process": whole_process(store_root, args.runs)}
    out = REPO / "bench" / "out" / "sql_guard.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
