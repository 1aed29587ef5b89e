"""Importing a Megatron run's order against building lineage's own stream, same corpus.

    .venv/bin/python bench/megatron_order.py [--documents 1000000] [--runs 3] [--workdir DIR]

The corpus is bench/stream.py's (a ready manifest from gen_manifest.py). The Megatron run
is synthetic but laid out exactly as megatron-core lays it: one indexed dataset holding
every document (+ an EOD) in manifest order (the .bin a sparse file of the right size:
a ready manifest has no text to re-read), and one epoch's document, sample and shuffle
indices as megatron-core's builder makes them for seed 1234 (made by lineage's numpy
re-implementation, which the importer checks them against). Both sides use 2048-token
windows and 64 windows a step. Each import and build runs in a child process; results
go to bench/out/megatron_order.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from stream import BUILD, prepare, timed_streams, timing  # noqa: E402

from lineage.ingest.orders.megatron_indices import gpt_indices  # noqa: E402

SEQUENCE_LENGTH = 2047  # + the extra token: windows of 2048, as the stream build's
BATCH = 64

IMPORT = """
import json, resource, sys, time
from pathlib import Path
import lineage
from lineage.ingest.orders.megatron import MegatronRun, import_megatron
run = Path(sys.argv[2])
store = lineage.open(sys.argv[1])
started = time.perf_counter()
r = import_megatron(store, data=[run / "data"], docs=[run / "doc_ids.txt"], cache=run / "cache",
                    corpus="c", stream=sys.argv[3], run=MegatronRun(64, 1))
print(json.dumps({"seconds": time.perf_counter() - started, "steps": r["steps"],
                  "occurrences": r["occurrences"],
                  "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def synthetic_run(store: Path, out: Path) -> dict[str, int]:
    """The indexed dataset, doc_ids file and GPTDataset cache of a one-epoch run."""
    import lineage

    if (out / "cache").exists():
        return json.loads((out / "run.json").read_text())
    out.mkdir(parents=True, exist_ok=True)
    frame = lineage.open(store).frame("documents").select("doc_id", "n_tokens") \
        .sort("doc_id").collect()
    (out / "doc_ids.txt").write_text("\n".join(frame["doc_id"].to_list()) + "\n")
    lengths = frame["n_tokens"].to_numpy().astype(np.int32) + 1
    _write_idx(out / "data.idx", lengths)
    with (out / "data.bin").open("wb") as handle:
        handle.truncate(int(lengths.sum()) * 2)
    description_of = {"class": "GPTDataset", "dataset_path": "data", "num_samples": None,
                      "index_split": "train", "random_seed": 1234,
                      "sequence_length": SEQUENCE_LENGTH, "split": "100,0,0",
                      "split_matrix": [[0, 1.0], None, None],
                      "tokenizer": {"class": "bench"}}
    # megatron-core's own arrays for this description (the importer makes them again and
    # refuses any other), by lineage's numpy re-implementation of its builder
    made = gpt_indices(description_of, lengths, extra=1, where=out)
    document_index, sample_index, shuffle = (made.document_index, made.sample_index,
                                             made.shuffle_index)
    samples = len(shuffle)
    description = json.dumps(description_of, indent=4)
    digest = hashlib.md5(description.encode(), usedforsecurity=False).hexdigest()
    cache = out / "cache"
    cache.mkdir()
    base = cache / f"{digest}-GPTDataset-train-"
    Path(f"{base}description.txt").write_text(description)
    np.save(f"{base}document_index.npy", document_index)
    np.save(f"{base}sample_index.npy", sample_index.astype(np.int32))
    np.save(f"{base}shuffle_index.npy", shuffle)
    shape = {"documents": len(lengths), "samples": samples}
    (out / "run.json").write_text(json.dumps(shape))
    return shape


def _write_idx(path: Path, lengths: np.ndarray) -> None:
    import struct

    pointers = np.concatenate(([0], np.cumsum(lengths.astype(np.int64) * 2)[:-1]))
    count = len(lengths)
    path.write_bytes(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, count, count + 1)
                     + lengths.astype("<i4").tobytes() + pointers.astype("<i8").tobytes()
                     + np.arange(count + 1, dtype="<i8").tobytes())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--documents", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/lineage-bench-megatron"))
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    store = prepare(args.workdir, args.documents)
    run = args.workdir / f"megatron-{args.documents}-megatron-arrays"
    shape = synthetic_run(store, run)
    imported = timing(timed_streams(IMPORT, lambda name: [str(store), str(run), name],
                                      args.runs, "m"))
    built = timing(timed_streams(BUILD, lambda name: [str(store), name, "4GB"], args.runs, "b"))
    result = {"documents": args.documents, **shape, "import": imported, "stream_build": built,
              "ratio": round(float(imported["median_s"]) / float(built["median_s"]), 2)}
    out = REPO / "bench" / "out"
    out.mkdir(exist_ok=True)
    (out / "megatron_order.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
