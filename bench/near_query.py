"""What a near-duplicate query costs `trained-on`, against today's text query, at 1M documents.

    .venv/bin/python bench/near_query.py --store STORE --shards DIR [--runs 21] [--cli-runs 7]

STORE holds the corpus of `bench/text_index.py`'s synthetic JSONL shards in DIR (1M
documents: `text_index.generate`, then `lineage ingest corpus DIR/*.jsonl --corpus c`).
Four queries, each asked in process on one opened store, alternated run by run:

- `page`: today's text query, `text_index.page_query` (450 words of a document with a
  paragraph of boilerplate; `partial` by fingerprints: no near lookup);
- `near`: a document of 300-400 words with 10 % of its words edited at random (replace,
  delete, insert), answered `near-duplicate`;
- `near, lookup off`: the same query with the near lookup switched off: what the query
  cost before this layer (`not-found` after the fingerprints);
- `unrelated`: `text_index.unrelated_query` (`not-found`; it pays the near lookup too);
- `page, copies off`: `page` without the copy counts of its matches (`copies`, `seen`).

Then `page` and `near` as whole CLI processes (`trained-on - --json`) beside DuckDB's
start-up. Prints medians (ms) with each run's times, and the ratios. With `--recall N`,
also the recall at this corpus size: N documents of 250-450 words of the first shard,
each copied with 5 %, 10 % and 20 % of its words edited, found (`partial` or
`near-duplicate`, naming the document) or not.
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

from text_index import page_query, unrelated_query, vocabulary  # noqa: E402

PY = sys.executable


def near_query(shard: Path, rate: float, seed: int) -> tuple[str, str]:
    """(doc_id, a copy of the shard's first 300-400-word document with `rate` of its words
    edited: replaced, deleted or followed by an inserted word)."""
    with open(shard, encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            if 300 <= len(record["text"].split()) <= 400:
                break
    return record["id"], edited(record["text"], rate, random.Random(seed))


def edited(text: str, rate: float, rng: random.Random) -> str:
    vocab = vocabulary()
    out: list[str] = []
    for word in text.split():
        if rng.random() >= rate:
            out.append(word)
            continue
        kind = rng.randrange(3)
        if kind == 0:
            out.append(rng.choice(vocab))
        elif kind == 2:
            out.extend((word, rng.choice(vocab)))
    return " ".join(out)


def recall(store: Any, shard: Path, count: int) -> None:
    """Share of edited copies of `count` documents found naming their document."""
    rng = random.Random(11)
    records = []
    with open(shard, encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            if 250 <= len(record["text"].split()) <= 450:
                records.append(record)
            if len(records) >= 20 * count:
                break
    sample = rng.sample(records, count)
    for rate in (0.05, 0.10, 0.20):
        texts = [edited(r["text"], rate, rng) for r in sample]
        answer = store.trained_on(texts=texts)
        found = near = 0
        for record, result in zip(sample, answer["results"], strict=True):
            named = any(m["doc_id"] == record["id"] for m in result["matches"])
            found += named and result["verdict"] in ("partial", "near-duplicate")
            near += named and result["verdict"] == "near-duplicate"
        print(f"recall, {rate:.0%} of words edited: {found}/{count} = {found / count:.3f} "
              f"({near} near-duplicate, {found - near} partial)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--shards", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--cli-runs", type=int, default=7)
    parser.add_argument("--rate", type=float, default=0.10)
    parser.add_argument("--recall", type=int, default=0)
    args = parser.parse_args()

    import lineage as api
    from lineage.text import near_match, trained_on

    shard = sorted(args.shards.glob("*.jsonl"))[0]
    store = api.open(args.store)
    page_id, page = page_query(shard)
    near_id, near = near_query(shard, args.rate, seed=1)
    unrelated = unrelated_query(vocabulary())
    has_index, with_copies = near_match.has_near_index, trained_on._with_copies

    def ask(text: str, lookup: bool = True, copies: bool = True) -> Any:
        near_match.has_near_index = has_index if lookup else (lambda con, store: False)
        trained_on._with_copies = with_copies if copies else (lambda *args: None)
        try:
            return store.trained_on(texts=[text])["results"][0]
        finally:
            near_match.has_near_index, trained_on._with_copies = has_index, with_copies

    first = {"page": ask(page), "near": ask(near), "near, lookup off": ask(near, False),
             "unrelated": ask(unrelated)}
    assert first["page"]["verdict"] == "partial"
    assert first["page"]["matches"][0]["doc_id"] == page_id
    assert first["near"]["verdict"] == "near-duplicate", first["near"]["verdict"]
    assert first["near"]["matches"][0]["doc_id"] == near_id
    assert first["near, lookup off"]["verdict"] == "not-found"
    for name, result in first.items():
        print(f"{name}: {result['verdict']}, {result['words']} words, similarity "
              f"{result.get('similarity')}, {len(result['matches'])} matches")
    calls = {"page": lambda: ask(page), "near": lambda: ask(near),
             "near, lookup off": lambda: ask(near, False), "unrelated": lambda: ask(unrelated),
             "page, copies off": lambda: ask(page, copies=False)}
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(args.runs):
        for name, call in calls.items():  # alternated: load changes hit every variant alike
            started = time.perf_counter()
            call()
            times[name].append((time.perf_counter() - started) * 1000)
    medians = {name: statistics.median(samples) for name, samples in times.items()}
    print("\nin process, medians of", args.runs, "alternated runs:")
    for name, samples in times.items():
        print(f"  {name}: {medians[name]:.1f} ms  ({' '.join(f'{t:.0f}' for t in samples)})")
    print(f"  near / page = {medians['near'] / medians['page']:.2f}x; near / near lookup off "
          f"= {medians['near'] / medians['near, lookup off']:.2f}x; page / page copies off = "
          f"{medians['page'] / medians['page, copies off']:.2f}x")

    def process(argv: list[str], stdin: str | None = None) -> float:
        started = time.perf_counter()
        subprocess.run(argv, input=stdin, capture_output=True, text=True, check=False)
        return (time.perf_counter() - started) * 1000

    command = [PY, "-m", "lineage.cli", "--store", str(args.store), "trained-on", "-", "--json"]
    floor = [PY, "-c", "import duckdb; duckdb.connect().sql('select 1')"]
    process(floor)
    cli: dict[str, list[float]] = {"page": [], "near": [], "duckdb floor": []}
    for _ in range(args.cli_runs):
        cli["page"].append(process(command, page))
        cli["near"].append(process(command, near))
        cli["duckdb floor"].append(process(floor))
    print("\nas a CLI process (trained-on - --json), medians of", args.cli_runs, "alternated runs:")
    for name, samples in cli.items():
        print(f"  {name}: {statistics.median(samples):.0f} ms  "
              f"({' '.join(f'{t:.0f}' for t in samples)})")
    print(f"  near / page = {statistics.median(cli['near']) / statistics.median(cli['page']):.2f}x")
    if args.recall:
        recall(store, shard, args.recall)


if __name__ == "__main__":
    main()
