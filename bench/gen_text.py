"""Synthetic raw corpora for the ingest benchmarks: a directory of files, JSONL and Parquet.

    python bench/gen_text.py --out /tmp/lineage-bench/text [--files 2000] \
        [--shards 4] [--shard-mb 50] [--seed 0]

Writes under OUT:

* `files/<source>/<nnnnnn>.bin`: `--files` files of 64-256 KiB (uniform) of random bytes,
  in four source folders (one file is one document for a directory ingest);
* `jsonl/shard-<k>.jsonl`: Dolma-style shards, one `{"id", "text", "source"}` object a line;
* `parquet/shard-<k>.parquet`: FineWeb-style shards with `text, id, url` (zstd, row groups
  of 4096 rows).

The JSONL and Parquet shards hold the same documents: texts of a few KB (log-normal,
median 3 KB, clipped to [200 B, 64 KB]) cut from a pseudo-English pool that also holds
quotes, newlines and non-ASCII letters, so JSON escaping and UTF-8 both get exercised.
Deterministic by `--seed`.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

import blake3
import pyarrow as pa
import pyarrow.parquet as pq

SOURCES = ("web", "edu", "code", "math")
SOURCE_WEIGHTS = (0.667, 0.133, 0.12, 0.08)
FILE_MIN, FILE_MAX = 64 * 1024, 256 * 1024
DOC_MEDIAN, DOC_SIGMA, DOC_MIN, DOC_MAX = 3000, 0.6, 200, 64 * 1024
POOL_CHARS = 8 << 20
PARQUET_ROW_GROUP = 4096
_EXTRA_WORDS = ("café", "naïve", "straße", "Ελλάδα", "東京", "—", "\"quoted\"", "x\\y", "tab\there")


def _rng(seed: int, what: str) -> random.Random:
    return random.Random(blake3.blake3(f"lineage-bench/text/{seed}/{what}".encode()).digest())


def make_files(root: Path, count: int, seed: int) -> list[Path]:
    """`count` files of random bytes, 64-256 KiB each, in one folder per source."""
    rng = _rng(seed, "files")
    paths = []
    for i in range(count):
        source = rng.choices(SOURCES, SOURCE_WEIGHTS)[0]
        size = rng.randint(FILE_MIN, FILE_MAX)
        folder = root / source
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{i:06d}.bin"
        path.write_bytes(blake3.blake3(f"{seed}/file/{i}".encode()).digest(length=size))
        paths.append(path)
    return paths


def _text_pool(seed: int) -> str:
    """About POOL_CHARS characters of sentence-shaped pseudo-English."""
    rng = _rng(seed, "pool")
    letters = "etaoinshrdlcumwfgypbvkjxqz"
    weights = [12.7, 9.1, 8.2, 7.5, 7.0, 6.7, 6.3, 6.1, 6.0, 4.3, 4.0, 2.8, 2.8, 2.4, 2.4,
               2.2, 2.0, 2.0, 1.9, 1.5, 1.0, 0.8, 0.2, 0.2, 0.1, 0.1]
    vocab = ["".join(rng.choices(letters, weights, k=rng.randint(1, 10))) for _ in range(5000)]
    vocab.extend(_EXTRA_WORDS)
    pieces: list[str] = []
    size = 0
    while size < POOL_CHARS:
        words = rng.choices(vocab, k=rng.randint(6, 30))
        sentence = " ".join(words).capitalize() + rng.choice((". ", ". ", "? ", "! ", ".\n\n"))
        pieces.append(sentence)
        size += len(sentence)
    return "".join(pieces)


def make_documents(total_bytes: int, seed: int) -> list[dict[str, str]]:
    """Documents of a few KB until their texts add up to about `total_bytes` characters."""
    rng = _rng(seed, "docs")
    pool = _text_pool(seed)
    docs: list[dict[str, str]] = []
    size = 0
    mu = math.log(DOC_MEDIAN)
    while size < total_bytes:
        length = int(min(DOC_MAX, max(DOC_MIN, rng.lognormvariate(mu, DOC_SIGMA))))
        start = rng.randrange(0, len(pool) - length)
        source = rng.choices(SOURCES, SOURCE_WEIGHTS)[0]
        n = len(docs)
        docs.append({
            "id": f"{source}-{n:08d}-{rng.getrandbits(32):08x}",
            "text": pool[start : start + length],
            "source": source,
            "url": f"https://{source}.example.org/page/{n}",
        })
        size += length
    return docs


def write_jsonl(docs: list[dict[str, str]], path: Path) -> None:
    tmp = path.with_name(path.name + ".partial")
    with open(tmp, "w", encoding="utf-8") as handle:
        for doc in docs:
            record = {"id": doc["id"], "text": doc["text"], "source": doc["source"]}
            handle.write(json.dumps(record, ensure_ascii=False))
            handle.write("\n")
    tmp.replace(path)


def write_parquet(docs: list[dict[str, str]], path: Path) -> None:
    tmp = path.with_name(path.name + ".partial")
    table = pa.table({
        "text": [d["text"] for d in docs],
        "id": [d["id"] for d in docs],
        "url": [d["url"] for d in docs],
    })
    pq.write_table(table, tmp, compression="zstd", row_group_size=PARQUET_ROW_GROUP)
    tmp.replace(path)


def generate(out: Path, *, files: int = 2000, shards: int = 4, shard_mb: float = 50.0,
             seed: int = 0) -> dict[str, list[Path]]:
    """Write all three corpora under `out`; returns their paths by kind."""
    result: dict[str, list[Path]] = {"files": [], "jsonl": [], "parquet": []}
    if files:
        result["files"] = make_files(out / "files", files, seed)
    if shards:
        docs = make_documents(int(shards * shard_mb * 1e6), seed)
        per = math.ceil(len(docs) / shards)
        for kind in ("jsonl", "parquet"):
            (out / kind).mkdir(parents=True, exist_ok=True)
        for k in range(shards):
            chunk = docs[k * per : (k + 1) * per]
            jsonl = out / "jsonl" / f"shard-{k:05d}.jsonl"
            parquet = out / "parquet" / f"shard-{k:05d}.parquet"
            write_jsonl(chunk, jsonl)
            write_parquet(chunk, parquet)
            result["jsonl"].append(jsonl)
            result["parquet"].append(parquet)
    (out / "SPEC.json").write_text(json.dumps(
        {"generator": "bench/gen_text.py", "files": files, "shards": shards,
         "shard_mb": shard_mb, "seed": seed}, sort_keys=True) + "\n")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--files", type=int, default=2000, help="files of 64-256 KiB")
    parser.add_argument("--shards", type=int, default=4, help="JSONL and Parquet shards")
    parser.add_argument("--shard-mb", type=float, default=50.0, help="text MB per shard")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    made = generate(args.out, files=args.files, shards=args.shards, shard_mb=args.shard_mb,
                    seed=args.seed)
    for kind, paths in made.items():
        size = sum(p.stat().st_size for p in paths)
        print(f"{kind:8s} {len(paths):6d} files {size / 1e6:10.1f} MB")
    print(f"wrote {args.out} in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
