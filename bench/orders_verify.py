"""`--verify all` against the default sample: importing a Megatron order whose every
window is re-read from the .bin and compared with the corpus's text.

    .venv/bin/python bench/orders_verify.py [--documents 1000000] [--runs 1] [--workdir DIR]

A corpus with text (a ready manifest has none to compare): `--documents` JSONL records of
8-80 words drawn from a small pseudo-English vocabulary (seeded), in doc_id order, in 8 plain JSONL
shards, ingested with the byte tokenizer (the text index on, as by default, so a record
is one seek). The Megatron run reads them all: one indexed dataset of every document's
bytes + an EOD (uint16, the real tokens), one epoch's cache as megatron-core's builder
makes it (bench/megatron_order.py's), 2048-token windows, 64 a step. Each import runs in
a child process (peak RSS from getrusage). Beside them, the floors: DuckDB reading every
record's text from the shards, and a plain read of the .bin. Results go to
bench/out/orders_verify.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from megatron_order import SEQUENCE_LENGTH, _write_idx  # noqa: E402

from lineage.ingest.orders.megatron_indices import gpt_indices  # noqa: E402

SHARDS = 8
WORDS = ("the of and to in is was that for on as with by at from his her which this be "
         "are were not have had but they one all their there been has would what when "
         "who will more no if out so said about into than them can only other new time "
         "could some these two may first then do any like my now over such our man me "
         "even most made after also did many before must through back years where much "
         "your way well down should because each just those people how too little state "
         "good very make world still own see men work long get here between both life "
         "being under never day same another know while last might us great old year off "
         "come since against go came right used take three café naïve Ελλάδα 東京").split()

IMPORT = """
import json, resource, sys, time
from pathlib import Path
import lineage
from lineage.ingest.orders.megatron import MegatronRun, import_megatron
run = Path(sys.argv[2])
store = lineage.open(sys.argv[1])
started = time.perf_counter()
r = import_megatron(store, data=[run / "data"], docs=[run / "doc_ids.txt"], cache=run / "cache",
                    corpus="t", stream=sys.argv[3], run=MegatronRun(64, 1), verify=sys.argv[4])
print(json.dumps({"seconds": time.perf_counter() - started, "steps": r["steps"],
                  "checked": r["checked"],
                  "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def write_corpus(out: Path, documents: int) -> list[Path]:
    """The JSONL shards (ids `d<n>` zero-padded: file order is doc_id order)."""
    shards = [out / f"shard-{k}.jsonl" for k in range(SHARDS)]
    if all(p.exists() for p in shards):
        return shards
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    words = np.array(WORDS, dtype=object)
    per = -(-documents // SHARDS)
    for k, path in enumerate(shards):
        first, stop = k * per, min(documents, (k + 1) * per)
        # 40-400 bytes of words a document (the words hold no character JSON escapes)
        counts = rng.integers(8, 80, size=stop - first)
        picked = words[rng.integers(0, len(words), size=int(counts.sum()))]
        bounds = np.concatenate(([0], np.cumsum(counts))).tolist()
        with path.open("w", encoding="utf-8") as handle:
            handle.writelines(
                f'{{"id": "d{first + i:09d}", "text": "{" ".join(picked[a:b])}"}}\n'
                for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)))
    return shards


def write_run(shards: list[Path], out: Path) -> dict[str, int]:
    """The indexed dataset (real byte tokens + EOD 256), doc_ids and cache."""
    if (out / "run.json").exists():
        return json.loads((out / "run.json").read_text())
    import hashlib

    out.mkdir(parents=True, exist_ok=True)
    lengths, ids = [], []
    with (out / "data.bin").open("wb") as binary:
        for shard in shards:
            for line in shard.open("rb"):
                record = json.loads(line)
                data = record["text"].encode("utf-8")
                tokens = np.frombuffer(data, dtype=np.uint8).astype("<u2")
                binary.write(tokens.tobytes() + np.array([256], "<u2").tobytes())
                lengths.append(len(data) + 1)
                ids.append(record["id"])
    (out / "doc_ids.txt").write_text("\n".join(ids) + "\n")
    lengths_array = np.array(lengths, dtype=np.int32)
    _write_idx(out / "data.idx", lengths_array)
    description_of = {"class": "GPTDataset", "dataset_path": "data", "num_samples": None,
                      "index_split": "train", "random_seed": 1234,
                      "sequence_length": SEQUENCE_LENGTH, "split": "100,0,0",
                      "split_matrix": [[0, 1.0], None, None], "tokenizer": {"class": "bench"}}
    made = gpt_indices(description_of, lengths_array, extra=1, where=out)
    description = json.dumps(description_of, indent=4)
    digest = hashlib.md5(description.encode(), usedforsecurity=False).hexdigest()
    (out / "cache").mkdir()
    base = out / "cache" / f"{digest}-GPTDataset-train-"
    Path(f"{base}description.txt").write_text(description)
    np.save(f"{base}document_index.npy", made.document_index)
    np.save(f"{base}sample_index.npy", made.sample_index.astype(np.int32))
    np.save(f"{base}shuffle_index.npy", made.shuffle_index)
    shape = {"documents": len(lengths), "samples": len(made.shuffle_index),
             "tokens": int(lengths_array.sum())}
    (out / "run.json").write_text(json.dumps(shape))
    return shape


def ingest(store: Path, shards: list[Path]) -> float:
    import lineage
    from lineage.ingest import ingest_corpus

    if store.exists():
        return 0.0
    lineage.init_store(store)
    started = time.perf_counter()
    ingest_corpus(lineage.open(store), [str(p) for p in shards], corpus="t")
    return time.perf_counter() - started


def floors(shards: list[Path], run: Path) -> dict[str, float]:
    """What reading the inputs costs at least: DuckDB reading every record's text, and
    the .bin read whole (after one read to warm the page cache, as for the imports)."""
    import duckdb

    out = {}
    started = time.perf_counter()
    con = duckdb.connect()
    con.execute("SELECT sum(length(text)) FROM read_json(?, format = 'newline_delimited', "
                "columns = {id: 'VARCHAR', text: 'VARCHAR'})", [[str(p) for p in shards]])
    out["duckdb_read_texts_s"] = round(time.perf_counter() - started, 2)
    started = time.perf_counter()
    total = 0
    with (run / "data.bin").open("rb") as handle:
        while chunk := handle.read(1 << 24):
            total += len(chunk)
    out["plain_read_bin_s"] = round(time.perf_counter() - started, 2)
    started = time.perf_counter()
    for shard in shards:
        for line in shard.open("rb"):
            json.loads(line)
    out["python_json_loads_s"] = round(time.perf_counter() - started, 2)
    return out


def timed(store: Path, run: Path, stream: str, verify: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", IMPORT, str(store), str(run), stream, verify],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--documents", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/lineage-bench-verify"))
    args = parser.parse_args()
    folder = args.workdir / f"verify-{args.documents}"
    shards = write_corpus(folder / "corpus", args.documents)
    ingest_s = ingest(folder / "store", shards)
    shape = write_run(shards, folder / "run")
    result: dict[str, object] = {"documents": args.documents, **shape,
                                 "ingest_s": round(ingest_s, 1)}
    for run in range(args.runs):
        for verify in ("sample", "all"):
            result[f"{verify}_{run}"] = timed(folder / "store", folder / "run",
                                              f"{verify}{run}{time.time_ns()}", verify)
    result["floors"] = floors(shards, folder / "run")
    out = REPO / "bench" / "out"
    out.mkdir(exist_ok=True)
    (out / "orders_verify.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
