"""Order import benchmark: importing a harness run's order against `stream build` on the
same corpus (target: within 1.5x), then lookups on the imported stream.

    .venv/bin/python bench/orders.py [--sizes 1000000 10000000] [--runs 3] [--workdir DIR]

The corpus is bench/stream.py's (a ready manifest from bench/gen_manifest.py, ingested
once per size). The harness run is synthetic but complete: the documents in a seeded
order, each followed by one end-of-document token, cut into windows of 2048 tokens,
64 windows a step (micro-batches of 4 for 8 ranks), whole steps only; 8 shards whose
`.idx` carry the corpus's token counts (+1) and whose `.bin` files are sparse files of
the right size (a ready manifest has no text, so no window is re-read: the import
reports so); doc_ids in Parquet files beside the manifest. Builds and imports run in
child processes (peak RSS from getrusage). Results go to bench/out/orders.json.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from stream import bench_build, bench_lookups, prepare, timed_streams, timing  # noqa: E402

SEQ_LEN, BATCH, MICRO, WORLD, SHARDS = 2048, 64, 4, 8, 8

IMPORT = """
import json, resource, sys, time
from pathlib import Path
import lineage
from lineage.ingest.orders.open_transformers import ingest_open_transformers
store = lineage.open(sys.argv[1])
run = Path(sys.argv[2])
started = time.perf_counter()
r = ingest_open_transformers(store, run / "doc_map.parquet", manifest=run / "manifest.json",
                             shards=run / "shards", corpus="c", stream=sys.argv[3])
print(json.dumps({"seconds": time.perf_counter() - started, "steps": r["steps"],
                  "occurrences": r["occurrences"], "digest": r["occurrences_digest"],
                  "checked": r["checked"]["status"],
                  "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def write_run(store: Path, out: Path) -> dict[str, Any]:
    """The harness's files for every document of corpus `c`, in a seeded order."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    import lineage

    if (out / "doc_map.parquet").exists():
        return json.loads((out / "made.json").read_text())
    with lineage.open(store).reader(views=True) as con:
        docs = con.sql("SELECT doc_id, n_tokens FROM documents WHERE corpus = 'c' "
                       "ORDER BY doc_id").to_arrow_table()
    n = len(docs)
    lengths = docs.column("n_tokens").to_numpy().astype(np.int64) + 1  # + end of document
    per_shard = -(-n // SHARDS)
    (out / "shards").mkdir(parents=True, exist_ok=True)
    shards = []
    for s in range(SHARDS):
        part = lengths[s * per_shard:(s + 1) * per_shard]
        _write_shard(out / "shards" / f"{s:05d}", part)
        ids = docs.column("doc_id").slice(s * per_shard, len(part))
        pq.write_table(pa.table({"doc_id": ids}), out / f"ids-{s:05d}.parquet")
        shards.append({"source": "bench", "shard": f"{s:05d}",
                       "doc_ids_file": f"ids-{s:05d}.parquet"})
    manifest = {"format": "open-transformers/data-manifest/1",
                "run": {"seq_len": SEQ_LEN, "micro_batch_size": MICRO, "world_size": WORLD,
                        "global_batch_ramp": [[0, BATCH]], "seed": 7, "append_eod": True,
                        "eod_token": 0},
                "shards": shards}
    (out / "manifest.json").write_text(json.dumps(manifest))
    order = np.random.default_rng(7).permutation(n)
    rows = _doc_map(order, lengths[order], per_shard)
    pq.write_table(pa.table(rows), out / "doc_map.parquet", row_group_size=1 << 20)
    made = {"documents": n, "rows": len(rows["window"]),
            "steps": int(rows["step"][-1]) + 1}
    (out / "made.json").write_text(json.dumps(made))
    return made


def _write_shard(prefix: Path, lengths: Any) -> None:
    import numpy as np

    sizes = lengths.astype("<i4")
    pointers = np.concatenate(([0], np.cumsum(lengths * 2)[:-1])).astype("<i8")
    header = b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, len(sizes), len(sizes) + 1)
    prefix.with_suffix(".idx").write_bytes(header + sizes.tobytes() + pointers.tobytes()
                                           + np.arange(len(sizes) + 1, dtype="<i8").tobytes())
    with open(prefix.with_suffix(".bin"), "wb") as f:
        f.truncate(int(lengths.sum()) * 2)  # sparse: the right size, no tokens


def _doc_map(order: Any, lengths: Any, per_shard: int) -> dict[str, Any]:
    """Segments of documents `order` (with `lengths`) packed back to back into windows,
    whole steps of BATCH windows only, cut at window edges."""
    import numpy as np
    import pyarrow as pa

    ends = np.cumsum(lengths)
    starts = ends - lengths
    cut = (int(ends[-1]) // (SEQ_LEN * BATCH)) * SEQ_LEN * BATCH
    kept = starts < cut
    order, starts, ends = order[kept], starts[kept], np.minimum(ends[kept], cut)
    first_w, last_w = starts // SEQ_LEN, (ends - 1) // SEQ_LEN
    pieces = last_w - first_w + 1
    doc = np.repeat(np.arange(len(order)), pieces)
    within = np.arange(len(doc)) - np.repeat(np.cumsum(pieces) - pieces, pieces)
    window = first_w[doc] + within
    seg_start = np.maximum(starts[doc], window * SEQ_LEN)
    seg_end = np.minimum(ends[doc], (window + 1) * SEQ_LEN)
    micro = (window % BATCH) // MICRO
    shard = order[doc] // per_shard
    names = pa.array([f"{s:05d}" for s in range(SHARDS)])
    return {"step": window // BATCH, "window": window, "micro_batch": micro,
            "slot": seg_start - window * SEQ_LEN, "rank": micro % WORLD,
            "source": pa.DictionaryArray.from_arrays(pa.array(np.zeros(len(doc), np.int32)),
                                                     pa.array(["bench"])),
            "shard": pa.DictionaryArray.from_arrays(pa.array(shard.astype(np.int32)), names),
            "local_doc": order[doc] % per_shard, "token_start": seg_start - starts[doc],
            "token_end": seg_end - starts[doc]}


def bench_import(store: Path, run: Path, runs: int) -> dict[str, object]:
    results = timed_streams(IMPORT, lambda name: [str(store), str(run), name], runs, "i")
    assert len({r["digest"] for r in results}) == 1, "imports disagree"
    return {**timing(results), "checked": results[0]["checked"],
            "stream": results[-1]["name"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--memory-limit", default="1GB")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/lineage-bench-orders"))
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"machine": {"cores": os.cpu_count()}, "sizes": {}}
    for documents in args.sizes:
        store = prepare(args.workdir, documents)
        run = args.workdir / f"harness-{documents}"
        made = write_run(store, run)
        imported = bench_import(store, run, args.runs)
        build = bench_build(store, args.runs, args.memory_limit)
        entry = {"harness": made, "import": imported, "build": build,
                 "import_vs_build": round(float(imported["median_s"])  # type: ignore[arg-type]
                                          / float(build["median_s"]), 2),  # type: ignore[arg-type]
                 "lookups": bench_lookups(store, str(imported["stream"]), 50)}
        results["sizes"][str(documents)] = entry
        print(json.dumps({documents: entry}, indent=1), flush=True)
    out = Path(__file__).resolve().parent / "out" / "orders.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
