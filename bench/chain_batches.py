"""`chain verify --batches` on an Open-1B-shaped store, the batch digests made by
lineage's code and by the old per-segment code (tests/batch_digests_reference.py) in
turn, each beside DuckDB scanning the stream's occurrences, in the same run.

    .venv/bin/python bench/open1b.py --documents 1000000 --workdir DIR --keep \
        --only ingest build
    .venv/bin/python bench/chain_batches.py --workdir DIR [--runs 3]

The store is bench/open1b.py's (stream `open1b`, 80,957 steps); the chain is the one its
`stage_chain` records (a closed 80,957-step chain, world size 1). Each round runs four
commands in turn, each as its own process, timed by wall clock and CPU (user + system)
with its peak memory (/usr/bin/time's largest process, and the process tree sampled
every 0.1 s): `lineage
chain verify RUN --batches --json` as installed; the same command with the digests
made by the old code; `chain verify RUN --no-batches --json` (the links alone: what
the digests add is the difference); DuckDB alone counting and hashing the
occurrences' columns (bench/open1b.py's floor). Output: medians, every run and the load average, in
bench/out/chain-batches-<workdir's name>.json. With --digests-alone: each round makes
every step's digests in a process of its own by each code, beside the same DuckDB
scan (bench/out/chain-digests-<workdir's name>.json).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import open1b  # noqa: E402  (bench/open1b.py: its store, chain and measurements)


def old_batch_digests(con: Any, store: Any, stream: dict[str, Any], world_size: int,
                      starts: list[tuple[int, int]]) -> dict[int, list[str]]:
    """`batch_digests` as lineage made them before: the old code, kept in tests/."""
    sys.path.insert(0, str(REPO))
    from lineage.stream.query import stream_rank_rule, stream_schedule
    from tests.batch_digests_reference import reference_digests, store_rows

    if not starts:
        return {}
    schedule, seq_len = stream_schedule(stream), int(stream["seq_len"])
    end = starts[-1][1] + schedule.windows_of(starts[-1][0])
    rows = store_rows(con, store, stream["name"], starts[0][1], end, seq_len)
    return reference_digests(rows, schedule, stream_rank_rule(stream), seq_len, world_size,
                             starts)


def run_as_old(argv: list[str]) -> None:
    """The console script with `chain verify`'s batch digests made by the old code."""
    from lineage.runs import chain_verify

    chain_verify.batch_digests = old_batch_digests  # type: ignore[assignment]
    sys.argv = ["lineage", *argv]
    from lineage.cli.main import run

    run()


def digests_alone(store_path: str, old: bool) -> None:
    """Every step's batch digests (world size 1), made in this process by lineage's code
    or the old code, and nothing else: what `chain verify --batches` adds to the links."""
    import lineage as lin
    from lineage.runs.chain_batches import batch_digests

    store = lin.open(Path(store_path))
    info = store.stream("open1b")
    batch = int(info["batch"])
    make = old_batch_digests if old else batch_digests
    with store.reader(views=False) as con:
        found = make(con, store, info, 1, [(s, s * batch) for s in range(int(info["steps"]))])
    print(json.dumps({"steps": len(found)}))


def slim(m: dict[str, Any]) -> dict[str, Any]:
    return {k: m[k] for k in ("seconds", "cpu_s", "max_rss_mb", "tree_peak_mb", "load")}


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"median_s": statistics.median(r["seconds"] for r in runs),
            "median_cpu_s": statistics.median(r["cpu_s"] for r in runs),
            "max_rss_mb": max(r["max_rss_mb"] for r in runs),
            "tree_peak_mb": max(r["tree_peak_mb"] for r in runs),
            "runs": [slim(r) for r in runs]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, required=True,
                        help="bench/open1b.py's --workdir, kept (--keep)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--digests-alone", action="store_true",
                        help="time only the digests, in a process each (no chain, no verify)")
    args = parser.parse_args()
    open1b.ARGS = args  # its DuckDB jobs spill into the work folder
    store = args.workdir / "store"
    if args.digests_alone:
        compare_digests(args, store)
        return
    log = args.workdir / "steps.jsonl"
    started = time.perf_counter()
    open1b.write_chain(store, log)
    written = round(time.perf_counter() - started, 1)
    run = f"r{time.time_ns()}"
    open1b.lineage(store, "ingest", "steps", str(log), "--run", run, "--world-size", "1",
                   "--stream", "open1b", "--json")
    log.unlink()
    verify = ["--store", str(store), "chain", "verify", run, "--batches", "--json"]
    occ = sorted(str(p) for p in (store / "tables" / "occurrences").glob("*.parquet"))
    floor_sql = ("SELECT count(*), sum(hash(ordinal, doc_id, stream_start, stream_end)) "
                 f"FROM read_parquet({open1b.files_sql(occ)})")
    new, old, links, floor = [], [], [], []
    for _ in range(args.runs):  # in turn, so each round meets the same load
        new.append(open1b.measure([open1b.LINEAGE, *verify]))
        old.append(open1b.measure([open1b.PY, __file__, "--as-old", *verify]))
        links.append(open1b.measure([open1b.LINEAGE, *verify[:-2], "--no-batches", "--json"]))
        floor.append(open1b.duckdb_job(floor_sql, "1GB"))
        print(json.dumps({"new": slim(new[-1]), "old": slim(old[-1]),
                          "links": slim(links[-1]), "duckdb": slim(floor[-1])}), flush=True)
    for m in new + old:
        answer = json.loads(m["stdout"])
        if answer.get("ok") is not True or not answer.get("batches_checked"):
            raise RuntimeError(f"chain verify did not pass: {m['stdout'][:500]}")
    info = json.loads(open1b.lineage(store, "stream", "show", "open1b", "--json")["stdout"])
    result = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "store": str(store), "occurrences": info.get("occurrences"),
              "windows": info.get("windows"), "steps": info.get("steps"),
              "chain_written_s": written, "new": summary(new), "old": summary(old),
              "links_only": summary(links), "duckdb": summary(floor)}
    n, f = result["new"]["median_s"], result["duckdb"]["median_s"]
    result["new_over_duckdb"] = round(n / f, 2)
    result["old_over_duckdb"] = round(result["old"]["median_s"] / f, 2)
    result["old_over_new"] = round(result["old"]["median_s"] / n, 2)
    out = REPO / "bench" / "out" / f"chain-batches-{args.workdir.name}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items()
                      if k not in ("new", "old", "links_only", "duckdb")}
                     | {k: {"median_s": result[k]["median_s"],
                            "median_cpu_s": result[k]["median_cpu_s"],
                            "max_rss_mb": result[k]["max_rss_mb"]}
                        for k in ("new", "old", "links_only", "duckdb")}))


def compare_digests(args: argparse.Namespace, store: Path) -> None:
    """Rounds of: the digests alone by lineage's code, by the old code, DuckDB's scan."""
    occ = sorted(str(p) for p in (store / "tables" / "occurrences").glob("*.parquet"))
    floor_sql = ("SELECT count(*), sum(hash(ordinal, doc_id, stream_start, stream_end)) "
                 f"FROM read_parquet({open1b.files_sql(occ)})")
    new, old, floor = [], [], []
    for _ in range(args.runs):
        new.append(open1b.measure([open1b.PY, __file__, "--digests", str(store)]))
        old.append(open1b.measure([open1b.PY, __file__, "--digests-old", str(store)]))
        floor.append(open1b.duckdb_job(floor_sql, "1GB"))
        print(json.dumps({"new": slim(new[-1]), "old": slim(old[-1]),
                          "duckdb": slim(floor[-1])}), flush=True)
    result = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "store": str(store), "new": summary(new), "old": summary(old),
              "duckdb": summary(floor)}
    out = REPO / "bench" / "out" / f"chain-digests-{args.workdir.name}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: {"median_s": result[k]["median_s"],
                          "median_cpu_s": result[k]["median_cpu_s"],
                          "max_rss_mb": result[k]["max_rss_mb"]}
                      for k in ("new", "old", "duckdb")}))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--as-old"]:
        run_as_old(sys.argv[2:])
    elif sys.argv[1:2] in (["--digests"], ["--digests-old"]):
        digests_alone(sys.argv[2], old=sys.argv[1] == "--digests-old")
    else:
        main()
