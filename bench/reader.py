"""A trainer reading its batches from the store: `StreamReader.windows(step)` on a corpus
of short JSONL documents, with and without the text index.

    .venv/bin/python bench/reader.py [--documents 1000000] [--steps 5] [--workdir DIR]

The corpus is `--documents` records of 10-40 words in four plain JSONL shards; it is
ingested twice (with the text index, the default, which records each record's byte
offset, and with `--no-fingerprints`, which does not), and a stream of seq_len 2048 x
batch 64 is built over each. The figures: the median wall-clock time of `windows(step)` for
`--steps` random steps (each by a new reader, so nothing was read ahead for it), after one
untimed step; and the mean time per step of 128 steps read in order by one reader, as a
trainer reads them; next to the machine's plain-Python reference (bench/serve.py's). The
corpus and stores are made once per size in the work folder. Results go to
bench/out/reader.json.
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

WORDS = ("river stone lantern copper meadow quiet harbor signal winter orchard lattice "
         "ember canvas thistle marble cobalt").split()
SHARDS = 4


def corpus(folder: Path, documents: int) -> Path:
    """`documents` short records in plain JSONL shards (made once)."""
    done = folder / "done"
    if done.exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(1)
    for shard in range(SHARDS):
        with (folder / f"shard-{shard}.jsonl").open("w") as out:
            for i in range(shard, documents, SHARDS):
                text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(10, 40)))
                out.write(json.dumps({"id": f"d{i:09d}", "text": text}) + "\n")
    done.touch()
    return folder


def store(root: Path, shards: Path, *, index: bool) -> Path:
    """A store of the corpus with a stream `main` over it (made once)."""
    if (root / "done").exists():
        return root
    lineage = (str(Path(sys.executable).with_name("lineage")), "--store", str(root / "store"))
    subprocess.run([*lineage, "init"], check=True, capture_output=True)
    subprocess.run([*lineage, "ingest", "corpus", str(shards), "--corpus", "c", "--format",
                    "jsonl", *([] if index else ["--no-fingerprints"])],
                   check=True, capture_output=True)
    subprocess.run([*lineage, "stream", "build", "--corpus", "c", "--name", "main", "--seed",
                    "1", "--seq-len", "2048", "--batch", "64"], check=True, capture_output=True)
    (root / "done").touch()
    return root


def windows_seconds(root: Path, steps: int) -> tuple[list[float], float]:
    """`windows(step)` for `steps` random steps (each alone), and the mean of (up to) 128
    steps read in order, as a trainer reads them (the documents read ahead)."""
    import lineage
    from lineage.stream.reader import StreamReader

    opened = lineage.open_store(root / "store")
    rng = random.Random(3)
    total = int(opened.stream("main")["steps"])
    StreamReader(opened, "main").windows(rng.randrange(total))  # untimed: imports, cache
    times = []
    for _ in range(steps):
        step = rng.randrange(total)
        reader = StreamReader(opened, "main")  # nothing read ahead for this step
        started = time.perf_counter()
        reader.windows(step)
        times.append(time.perf_counter() - started)
    first = rng.randrange(max(1, total - 128))
    in_order = range(first, min(total, first + 128))
    reader = StreamReader(opened, "main")
    started = time.perf_counter()
    for step in in_order:
        reader.windows(step)
    return times, (time.perf_counter() - started) / len(in_order)


def main() -> None:
    import serve

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=1_000_000)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/lineage-bench/reader"))
    args = parser.parse_args()
    work = args.workdir / str(args.documents)
    shards = corpus(work / "shards", args.documents)
    results = []
    for index in (True, False):
        root = store(work / ("indexed" if index else "plain"), shards, index=index)
        reference = serve.reference_ms()
        times, in_order = windows_seconds(root, args.steps)
        results.append({"documents": args.documents, "text_index": index,
                        "median_ms": round(statistics.median(times) * 1000, 1),
                        "min_ms": round(min(times) * 1000, 1), "steps": args.steps,
                        "in_order_ms": round(in_order * 1000, 1),
                        "reference_ms": reference})
        print(json.dumps(results[-1]))
    out = REPO / "bench" / "out"
    out.mkdir(exist_ok=True)
    (out / "reader.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
