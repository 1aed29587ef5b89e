"""`lineage corpus duplicates` at 10M documents: cluster counts, time and peak memory.

    .venv/bin/python bench/near_clusters.py [--documents 10000000] [--runs 3]
                                            [--workdir DIR] [--keep]

Synthetic English-like JSONL (the words and styles of `text_index.py`'s generator), in
shorter documents than its pages (log-normal, median about 100 words): what the cluster
search reads grows with the number of documents, not their length, since `near_bands`
holds a fixed number of rows a document (near-spec.md). Copies are planted, each of its
own original (an earlier document of the same shard, never itself copied or a copy):
of every 100 documents, one exact copy, one text-identical copy (upper-cased, spaces
doubled: another content hash, the same normalized text), and two near copies, one with
5 % and one with 15 % of its words edited (replaced, deleted, or followed by an
inserted word). The shards are ingested once with the text index; then `lineage corpus
duplicates c --json` runs --runs times, paired with its floor: a fresh DuckDB process
reading the same band table and grouping it by band key (the candidate search alone,
without pairs, components or the documents' attributes). Prints the planted copies
against the clusters found, each planted near pair's outcome, clusters that join no
planted pair, and wall time and peak memory from the same runs. Results go to
bench/out/near_clusters.json.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from text_index import word_law  # noqa: E402

PY = sys.executable
REPO = Path(__file__).resolve().parents[1]
PLANTS = ("exact", "text", "near-5%", "near-15%")  # one of each in every 100 documents


def generate(out: Path, documents: int, shards: int, seed: int = 11) -> dict[str, list]:
    """Write the shards; return the planted copies as kind -> [(original, copy)]."""
    import numpy as np

    out.mkdir(parents=True, exist_ok=True)
    vocab, weights, variants = word_law()
    rng = np.random.default_rng(seed)
    edits = random.Random(seed)
    planted: dict[str, list] = {kind: [] for kind in PLANTS}
    per_shard = -(-documents // shards)
    for shard in range(shards):
        first, last = shard * per_shard, min(documents, (shard + 1) * per_shard)
        count = last - first
        lengths = np.maximum(8, rng.lognormal(4.6, 0.5, count).astype(np.int64))
        words = rng.choice(len(vocab), size=int(lengths.sum()), p=weights)
        style = rng.choice(4, size=len(words), p=[0.86, 0.04, 0.05, 0.05])
        tokens = variants[words + style * len(vocab)]
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).tolist()
        # Of each block of 100 documents, the last four are copies of four distinct
        # documents among the block's first 96 (originals are never copies).
        copy_of: dict[int, tuple[str, int]] = {}
        for block in range(0, count - 99, 100):
            originals = rng.choice(96, size=len(PLANTS), replace=False) + block
            for i, kind in enumerate(PLANTS):
                copy_of[block + 96 + i] = (kind, int(originals[i]))
        path = out / f"shard-{shard:02d}.jsonl"
        with open(path, "w", encoding="utf-8") as handle:
            for offset in range(count):
                doc_id = f"doc-{first + offset:08d}"
                kind, source = copy_of.get(offset, ("", offset))
                start, size = starts[source], int(lengths[source])
                words_of = tokens[start:start + size].tolist()
                if kind.startswith("near"):
                    rate = 0.05 if kind == "near-5%" else 0.15
                    words_of = _edit(words_of, rate, variants, edits)
                text = " ".join(words_of).replace("\n ", "\n")
                if kind == "text":
                    text = text.upper().replace(" ", "  ")
                if kind:
                    planted[kind].append((f"doc-{first + source:08d}", doc_id))
                handle.write(json.dumps({"id": doc_id, "text": text}) + "\n")
        print(f"  shard {shard + 1}/{shards} written", file=sys.stderr, flush=True)
    return planted


def _edit(words: list[str], rate: float, variants: Any, rng: random.Random) -> list[str]:
    out: list[str] = []
    for word in words:
        if rng.random() >= rate:
            out.append(word)
            continue
        kind = rng.randrange(3)
        if kind == 0:
            out.append(str(variants[rng.randrange(len(variants))]))
        elif kind == 2:
            out.extend((word, str(variants[rng.randrange(len(variants))])))
    return out


def cli(store: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "lineage.cli", "--store", str(store), *args],
                          capture_output=True, text=True, cwd=REPO)


def floor_command(store: Path) -> list[str]:
    script = ("import duckdb, sys; c = duckdb.connect(); print(c.execute("
              "\"SELECT count(*) FROM (SELECT band_key FROM read_parquet(?) GROUP BY band_key "
              "HAVING count(*) > 1)\", [sys.argv[1]]).fetchone()[0])")
    return [PY, "-c", script, str(store / "tables" / "near_bands" / "**" / "*.parquet")]


def outcomes(answer: dict[str, Any], planted: dict[str, list]) -> dict[str, Any]:
    """Each planted kind: how many of its pairs ended in one cluster, by that cluster's
    kind (a near copy whose edits all missed is an exact one); and the clusters that
    hold no planted pair."""
    cluster_of: dict[str, tuple[str, int]] = {}
    for number, cluster in enumerate(answer["clusters"]):
        for member in cluster["documents"]:
            cluster_of[member["doc_id"]] = (cluster["kind"], number)
    found: dict[str, dict[str, int]] = {}
    holding: set[int] = set()
    for kind, pairs in planted.items():
        by_kind: dict[str, int] = {}
        for original, copy in pairs:
            a, b = cluster_of.get(original), cluster_of.get(copy)
            if a is not None and a == b:
                by_kind[a[0]] = by_kind.get(a[0], 0) + 1
                holding.add(a[1])
        found[kind] = by_kind
    unplanted = [c for n, c in enumerate(answer["clusters"]) if n not in holding]
    return {"planted": {k: len(v) for k, v in planted.items()}, "found_in_one_cluster": found,
            "clusters_without_a_planted_pair": len(unplanted),
            "their_kinds": {kind: sum(c["kind"] == kind for c in unplanted)
                            for kind in ("exact", "text", "near")},
            "their_largest_sizes": sorted((c["size"] for c in unplanted), reverse=True)[:20]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=10_000_000)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=REPO / "bench" / "out" / "near-clusters")
    parser.add_argument("--keep", action="store_true", help="reuse shards and store if there")
    args = parser.parse_args()
    shards_dir, store = args.workdir / "shards", args.workdir / "store"
    truth = args.workdir / "planted.json"
    report: dict[str, Any] = {"documents": args.documents}
    if not (args.keep and truth.exists()):
        started = time.perf_counter()
        planted = generate(shards_dir, args.documents, args.shards)
        truth.write_text(json.dumps(planted))
        report["generate_s"] = time.perf_counter() - started
    planted = json.loads(truth.read_text())
    shards = sorted(shards_dir.glob("shard-*.jsonl"))
    report["text_bytes"] = sum(p.stat().st_size for p in shards)
    if not (args.keep and (store / "catalog.duckdb").exists()):
        subprocess.run(["rm", "-rf", str(store)], check=True)
        cli(store, "init").check_returncode()
        (seconds, peak), out = _timed_with_peak(
            [PY, "-m", "lineage.cli", "--store", str(store), "ingest", "corpus",
             *map(str, shards), "--corpus", "c", "--json"])
        report["ingest"] = {"seconds": seconds, "peak_rss_mb": peak,
                            "text_index": json.loads(out)["text_index"]}
        print(f"ingest: {seconds:.1f} s", file=sys.stderr, flush=True)
    report["near_bands_bytes"] = sum(
        p.stat().st_size for p in (store / "tables" / "near_bands").rglob("*.parquet"))
    command = [PY, "-m", "lineage.cli", "--store", str(store), "corpus", "duplicates", "c",
               "--json"]
    runs: dict[str, list[float]] = {"duplicates": [], "floor": []}
    peaks: dict[str, list[float]] = {"duplicates": [], "floor": []}
    answer: dict[str, Any] = {}
    for _ in range(args.runs):  # paired: the command, then its floor, in turn
        for name, argv in (("duplicates", command), ("floor", floor_command(store))):
            (seconds, peak), out = _timed_with_peak(argv)
            runs[name].append(seconds)
            peaks[name].append(peak)
            if name == "duplicates":
                answer = json.loads(out)
    report["duplicates"] = {
        name: {"median_s": statistics.median(values), "runs_s": values,
               "peak_rss_mb": max(peaks[name])} for name, values in runs.items()}
    report["ratio"] = statistics.median(
        a / b for a, b in zip(runs["duplicates"], runs["floor"], strict=True))
    report["clusters_by_kind"] = answer["clusters_by_kind"]
    report["documents_in_clusters"] = answer["documents_in_clusters"]
    report["outcomes"] = outcomes(answer, planted)
    out_file = REPO / "bench" / "out" / "near_clusters.json"
    out_file.parent.mkdir(parents=True, exist_ok=True)
    out_file.write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))


def _timed_with_peak(command: list[str]) -> tuple[tuple[float, float], str]:
    """((wall seconds, the child's own peak RSS MB), stdout), the peak read with
    /usr/bin/time's format so runs do not share RUSAGE_CHILDREN's running maximum."""
    started = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-f", "%M", *command], capture_output=True,
                          text=True, cwd=REPO)
    seconds = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(f"{command[:6]} failed: {done.stderr.strip()[-400:]}")
    peak_kb = int(done.stderr.strip().splitlines()[-1])
    return (seconds, peak_kb / 1024), done.stdout


if __name__ == "__main__":
    main()
