"""What checking the parts costs a frame: `store.frame(name)` with and without the check.

    .venv/bin/python bench/frames.py [--documents 1000000] [--runs 5] [--workdir DIR]

A ready manifest from bench/gen_manifest.py is ingested into a fresh store (once per size,
kept in --workdir) and a stream is built over it. Each table is then read whole into
memory (`store.frame(name, check=...).collect()`) `--runs` times, alternating checked
and unchecked, after one untimed read that puts the parts in the page cache; the medians
go to stdout and to bench/out/frames.json. The difference is what the check costs: every
byte of every part hashed once (BLAKE3 per row group, or SHA-256 for parts from before
schema 7).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TABLES = ("documents", "document_hashes", "occurrences", "occurrence_hashes")


def build(workdir: Path, documents: int) -> Path:
    """A store with the manifest's corpus and one stream over it (reused when present)."""
    import lineage
    from lineage.ingest import ingest_corpus
    from lineage.stream.build import build_stream

    root = workdir / f"frames-store-{documents}"
    if (root / "catalog.duckdb").is_file():
        return root
    manifest = workdir / f"frames-manifest-{documents}"
    if not manifest.is_dir():
        subprocess.run([sys.executable, str(REPO / "bench" / "gen_manifest.py"),
                        "--documents", str(documents), "--shards", "4", "--format",
                        "parquet", "--out", str(manifest)], check=True)
    lineage.init_store(root)
    store = lineage.open(root)
    ingest_corpus(store, [manifest], corpus="bench", fmt="manifest", tokenizer=None)
    build_stream(store, corpus="bench", name="s", seed=1, seq_len=2048, batch=512)
    return root


def time_reads(root: Path, table: str, runs: int) -> dict[str, object]:
    import lineage

    store = lineage.open(root)
    rows = store.frame(table).collect().height  # untimed: the parts into the page cache
    parts = store.sql("SELECT count(*), sum(n_bytes) FROM parquet_files "
                      f"WHERE table_name = '{table}'").rows[0]
    times: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(runs):
        for check in (True, False):
            start = time.perf_counter()
            store.frame(table, check=check).collect()
            times[check].append(time.perf_counter() - start)
    checked, unchecked = (statistics.median(times[c]) for c in (True, False))
    return {"table": table, "rows": rows, "parts": parts[0], "bytes": parts[1],
            "checked_s": round(checked, 4), "unchecked_s": round(unchecked, 4),
            "check_mb_per_s": round(parts[1] / max(checked - unchecked, 1e-9) / 1e6),
            "runs": {str(k): [round(t, 4) for t in v] for k, v in times.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/lineage-bench"))
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    root = build(args.workdir, args.documents)
    results = [time_reads(root, table, args.runs) for table in TABLES]
    print(f"{'table':<18} {'rows':>11} {'MB':>7} {'checked':>9} {'unchecked':>10}")
    for r in results:
        megabytes = float(str(r["bytes"])) / 1e6
        print(f"{r['table']:<18} {r['rows']:>11,} {megabytes:>7.1f} "
              f"{r['checked_s']:>8.3f}s {r['unchecked_s']:>9.3f}s")
    out = REPO / "bench" / "out"
    out.mkdir(exist_ok=True)
    (out / "frames.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
