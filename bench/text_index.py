"""Text index benchmark (issue: fingerprint index and partial matches).

    .venv/bin/python bench/text_index.py [--documents 1000000] [--build-runs 3] [--runs 7]
                                         [--workdir DIR]

Generates JSONL shards of synthetic English-like text (words drawn from the vocabulary
of the example corpus's Shakespeare texts with a Zipf-like law, sentences, commas and
line breaks), ingests them with and without the text index, and measures: build time
and peak memory, index size against the text size, and the latency of a one-page query
(an excerpt of a corpus document, re-wrapped, re-cased, with boilerplate inserted) in
process and as a whole CLI process, next to DuckDB's start-up floor. Results go to
bench/out/text_index.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
BOILERPLATE = (
    "Subscribe to our newsletter to get the best stories delivered to your inbox every "
    "week. We use cookies to improve your experience on our site and to show you relevant "
    "advertising. By continuing to browse you agree to our use of cookies. Share this "
    "article on social media and follow us for more."
)


def vocabulary() -> list[str]:
    words: dict[str, int] = {}
    for path in sorted((REPO / "examples" / "corpus" / "shakespeare").glob("*.txt")):
        for word in re.findall(r"[a-z]+", path.read_text(encoding="utf-8").lower()):
            words[word] = words.get(word, 0) + 1
    return sorted(words, key=lambda w: (-words[w], w))  # by frequency: rank 0 is "the"


def word_law() -> tuple[list[str], Any, Any]:
    """(vocabulary, Zipf-like weights of its words, each word's four written styles:
    as is, capitalized, before a comma, ending a sentence): what the generators draw."""
    import numpy as np

    vocab = vocabulary()
    ranks = np.arange(len(vocab), dtype=np.float64)
    weights = 1.0 / (ranks + 2.7) ** 1.05
    weights /= weights.sum()
    variants = np.array(vocab + [w.capitalize() for w in vocab] + [w + "," for w in vocab]
                        + [w + ".\n" for w in vocab], dtype=object)
    return vocab, weights, variants


def generate(out: Path, documents: int, shards: int, seed: int = 7) -> list[Path]:
    import numpy as np

    out.mkdir(parents=True, exist_ok=True)
    vocab, weights, variants = word_law()
    rng = np.random.default_rng(seed)
    paths = []
    per_shard = -(-documents // shards)
    for shard in range(shards):
        first, last = shard * per_shard, min(documents, (shard + 1) * per_shard)
        lengths = np.maximum(8, rng.lognormal(5.3, 0.7, last - first).astype(np.int64))
        lengths[(np.arange(first, last) % 5000) == 0] = 700  # page-sized documents
        words = rng.choice(len(vocab), size=int(lengths.sum()), p=weights)
        style = rng.choice(4, size=len(words), p=[0.86, 0.04, 0.05, 0.05])
        tokens = variants[words + style * len(vocab)]
        path = out / f"shard-{shard:02d}.jsonl"
        with open(path, "w", encoding="utf-8") as handle:
            start = 0
            for offset, length in enumerate(lengths.tolist()):
                text = " ".join(tokens[start:start + length]).replace("\n ", "\n")
                start += length
                handle.write(json.dumps({"id": f"doc-{first + offset:08d}", "text": text}) + "\n")
        paths.append(path)
    return paths


def page_query(shard: Path) -> tuple[str, str]:
    """A page made from the first long document of a shard: 450 of its words, re-wrapped
    and upper-cased, with a paragraph of boilerplate in the middle. (doc_id, text)"""
    with open(shard, encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            if len(record["text"].split()) == 700:
                break
    words = record["text"].split()[100:550]
    body = (" ".join(words[:225]).upper() + "\n\n" + BOILERPLATE + "\n\n"
            + " ".join(words[225:]))
    return record["id"], textwrap.fill(body, 64, replace_whitespace=False)


def unrelated_query(vocab: list[str]) -> str:
    """A page of the same vocabulary in an order no document has."""
    return " ".join(vocab[(i * 7919) % 3000] for i in range(500))


def cli(store: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "lineage.cli", "--store", str(store), *args],
                          input=stdin, capture_output=True, text=True)


def build(workdir: Path, shards: list[Path], name: str, *flags: str) -> dict[str, object]:
    store = workdir / name
    subprocess.run(["rm", "-rf", str(store)], check=True)
    cli(store, "init").check_returncode()
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    done = cli(store, "ingest", "corpus", *map(str, shards), "--corpus", "c", "--json",
                   *flags)
    seconds = time.perf_counter() - started
    done.check_returncode()
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    result = json.loads(done.stdout)
    return {"seconds": seconds, "max_rss_mb": max(peak, before) / 1024,
            "text_index": result["text_index"], "bytes": result["bytes"],
            "documents": result["documents"], "store": str(store)}


def table_bytes(store: Path, table: str) -> int:
    return sum(p.stat().st_size for p in (store / "tables" / table).glob("*.parquet"))


def median_ms(call, runs: int) -> dict[str, object]:  # type: ignore[no-untyped-def]
    call()  # warm: the page cache and the process-wide DuckDB instance
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return {"median_ms": statistics.median(samples), "runs_ms": samples}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=1_000_000)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--build-runs", type=int, default=3)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/lineage-bench-text"))
    args = parser.parse_args()
    data = args.workdir / f"text-{args.documents}"
    shards = sorted(data.glob("*.jsonl")) or generate(data, args.documents, args.shards)

    plain = [build(args.workdir, shards, "store-plain", "--no-fingerprints")
             for _ in range(args.build_runs)]
    indexed = [build(args.workdir, shards, "store-indexed")
               for _ in range(args.build_runs)]
    store = Path(str(indexed[-1]["store"]))
    index = indexed[-1]["text_index"]
    assert isinstance(index, dict)
    sizes = {t: table_bytes(store, t) for t in ("fingerprints", "text_documents", "text_hashes")}

    import lineage as api

    opened = api.open(store)
    doc_id, page = page_query(shards[0])
    answer = opened.trained_on(texts=[page])["results"][0]
    assert answer["verdict"] == "partial" and answer["matches"][0]["doc_id"] == doc_id, answer
    unrelated = unrelated_query(vocabulary())
    subprocess.run([PY, "-m", "compileall", "-q", *(str(REPO / d) for d in (
        "lineage", "ingest", "cli", "schemas"))], check=True)  # as a wheel install does
    floor = median_ms(lambda: subprocess.run(
        [PY, "-c", "import duckdb; duckdb.connect().sql('select 1')"], check=True), args.runs)
    payload = {
        "documents": args.documents, "text_bytes": index["text_bytes"],
        "words": index["words"], "fingerprints": index["fingerprints"],
        "build_plain_s": statistics.median(r["seconds"] for r in plain),  # type: ignore[misc]
        "build_indexed_s": statistics.median(r["seconds"] for r in indexed),  # type: ignore[misc]
        "build_runs_s": {"plain": [r["seconds"] for r in plain],
                         "indexed": [r["seconds"] for r in indexed]},
        "max_rss_mb": max(float(r["max_rss_mb"]) for r in indexed),  # type: ignore[arg-type]
        "table_bytes": sizes,
        "fingerprint_share_of_text": sizes["fingerprints"] / index["text_bytes"],
        "all_text_tables_share": sum(sizes.values()) / index["text_bytes"],
        "bytes_per_word": sizes["fingerprints"] / index["words"],
        "page_words": answer["words"], "page_containment": answer["containment"],
        "query_in_process": median_ms(lambda: opened.trained_on(texts=[page]), args.runs),
        "unrelated_in_process": median_ms(lambda: opened.trained_on(texts=[unrelated]),
                                          args.runs),
        "query_cli": median_ms(lambda: cli(store, "trained-on", "-", "--json",
                                               stdin=page), args.runs),
        "duckdb_floor": floor,
        "cpus": os.cpu_count(),
    }
    out = REPO / "bench" / "out"
    out.mkdir(exist_ok=True)
    (out / "text_index.json").write_text(json.dumps(payload, indent=2) + "\n")
    print(json.dumps({k: v for k, v in payload.items() if not isinstance(v, dict)}, indent=2))
    for key in ("query_in_process", "unrelated_in_process", "query_cli", "duckdb_floor"):
        print(key, round(payload[key]["median_ms"], 1), "ms")  # type: ignore[index]


if __name__ == "__main__":
    main()
