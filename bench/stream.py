"""Stream benchmarks (issue: the canonical stream): build time and peak memory, query
latency in process and as a whole CLI process, next to DuckDB's start-up floor.

    .venv/bin/python bench/stream.py [--sizes 1000000 10000000] [--runs 3] [--workdir DIR]

Corpora are ready manifests from bench/gen_manifest.py, ingested once per size into a
fresh store. Each build runs in a child process (peak RSS from getrusage); each lookup is
timed over many random steps and content hashes. Results go to bench/out/stream.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable

BUILD = """
import json, resource, sys, time
import lineage
from lineage.stream.build import build_stream
store = lineage.open(sys.argv[1])
started = time.perf_counter()
r = build_stream(store, corpus="c", name=sys.argv[2], seed=42, seq_len=2048, batch=64,
                 memory_limit=sys.argv[3])
print(json.dumps({"seconds": time.perf_counter() - started, "steps": r.steps,
                  "occurrences": r.occurrences, "digest": r.occurrences_digest,
                  "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def sh(*cmd: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=True,
                          env={**os.environ, **(env or {})})


def prepare(workdir: Path, documents: int) -> Path:
    manifest = workdir / f"manifest-{documents}"
    if not manifest.exists():
        sh(PY, str(REPO / "bench" / "gen_manifest.py"), "--documents", str(documents),
           "--shards", "8", "--format", "parquet", "--out", str(manifest))
    store = workdir / f"store-{documents}"
    if not (store / "catalog.duckdb").exists():
        sh(PY, "-m", "lineage.cli", "--store", str(store), "init")
        sh(PY, "-m", "lineage.cli", "--store", str(store), "ingest", "corpus",
           *sorted(str(p) for p in manifest.glob("*.parquet")), "--corpus", "c")
    return store


def timed_streams(script: str, args_for: Callable[[str], list[str]], runs: int,
                  prefix: str) -> list[dict[str, Any]]:
    """`script` run `runs` times, each in a fresh interpreter and writing a new stream
    (named `prefix` + a unique suffix, given to `args_for`): the JSON line each printed
    last, with the stream's name."""
    results = []
    for i in range(runs):
        name = f"{prefix}{time.time_ns()}{i}"
        out = sh(PY, "-c", script, *args_for(name))
        results.append(json.loads(out.stdout.strip().splitlines()[-1]) | {"name": name})
    return results


def timing(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Times and peak memory of `timed_streams`' runs, with the stream's size."""
    return {"runs_s": [round(r["seconds"], 2) for r in results],
            "median_s": round(statistics.median(r["seconds"] for r in results), 2),
            "max_rss_mb": round(max(r["max_rss_mb"] for r in results)),
            "steps": results[0]["steps"], "occurrences": results[0]["occurrences"]}


def bench_build(store: Path, runs: int, memory_limit: str) -> dict[str, object]:
    results = timed_streams(BUILD, lambda name: [str(store), name, memory_limit], runs, "b")
    digests = {r["digest"] for r in results}
    assert len(digests) == 1, "builds disagree"
    return {**timing(results), "memory_limit": memory_limit, "stream": results[-1]["name"]}


def bench_lookups(store: Path, name: str, samples: int) -> dict[str, object]:
    import lineage
    from lineage.text.trained_on import trained_on_hashes

    s = lineage.open(store)
    steps = s.stream(name)["steps"]
    rng = random.Random(7)
    hashes = [r[0] for r in s.sql("SELECT content_hash FROM documents USING SAMPLE 200 ROWS "
                                  "(reservoir, 7)").rows]
    docs_ms, trained_ms = [], []
    for _ in range(samples):
        t = time.perf_counter()
        s.docs_in_step(rng.randrange(steps), stream=name)
        docs_ms.append((time.perf_counter() - t) * 1000)
        digest = rng.choice(hashes)
        t = time.perf_counter()
        trained_on_hashes(s, [("x", digest)], stream=name)
        trained_ms.append((time.perf_counter() - t) * 1000)
    return {"stream": name, "docs_step_ms": round(statistics.median(docs_ms), 1),
            "trained_on_ms": round(statistics.median(trained_ms), 1), "samples": samples,
            "hash": hashes[0]}


def byte_compile() -> None:
    """Compile the project's modules, as a wheel install does: without it (editable
    install, PYTHONDONTWRITEBYTECODE set) every command re-compiles them, ~6 ms."""
    sh(PY, "-m", "compileall", "-q", *(str(REPO / d) for d in ("lineage", "ingest", "cli",
                                                                "schemas")))


def bench_cli(store: Path, stream: str, digest_file: Path, runs: int) -> dict[str, object]:
    byte_compile()

    def timed(cmd: list[str]) -> float:
        t = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=False)
        return time.perf_counter() - t

    lineage_bin = str(Path(PY).with_name("lineage"))
    commands = {
        "floor": [PY, "-c", "import duckdb; duckdb.connect().sql('select 1')"],
        "bare": [PY, "-c", "pass"],
        "docs": [lineage_bin, "--store", str(store), "docs", "--step", "1", "--stream",
                 stream, "--json"],
        "trained": [lineage_bin, "--store", str(store), "trained-on", str(digest_file),
                    "--stream", stream, "--json"],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):  # interleaved: the floor drifts by +-10 ms between runs
        for name, cmd in commands.items():
            times[name].append(timed(cmd))
    floor, bare, docs, trained = (times[name] for name in commands)
    med = statistics.median
    return {"python_pass_ms": round(med(bare) * 1000), "duckdb_floor_ms": round(med(floor) * 1000),
            "cli_docs_ms": round(med(docs) * 1000), "cli_trained_on_ms": round(med(trained) * 1000),
            "docs_vs_floor": round(med(docs) / med(floor), 2),
            "trained_on_vs_floor": round(med(trained) / med(floor), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--memory-limit", default="1GB")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/lineage-bench-stream"))
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    results = {"machine": {"cores": os.cpu_count(), "python": sys.version.split()[0]},
               "sizes": {}}
    for documents in args.sizes:
        store = prepare(args.workdir, documents)
        build = bench_build(store, args.runs, args.memory_limit)
        entry: dict[str, object] = {"build": build}
        lookups = bench_lookups(store, str(build["stream"]), 50)
        entry["lookups"] = lookups
        sample = args.workdir / "not-in-corpus.txt"
        sample.write_text("a file nobody put in the corpus")
        entry["cli"] = bench_cli(store, str(lookups["stream"]), sample, 21)
        results["sizes"][str(documents)] = entry
        print(json.dumps({documents: entry}, indent=1), flush=True)
    out = REPO / "bench" / "out" / "stream.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
    print(f"wrote {out}; children peak RSS {peak} MB")


if __name__ == "__main__":
    main()
