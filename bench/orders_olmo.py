"""OLMo-core order import benchmark: importing an OLMo-core run's order against
`stream build` on the same corpus (target: within 1.5x), then lookups on the import.

    .venv/bin/python bench/orders_olmo.py [--sizes 1000000 10000000] [--runs 3] [--workdir DIR]

The corpus is bench/stream.py's (a ready manifest from bench/gen_manifest.py, ingested
once per size). The run is synthetic but complete, in OLMo-core's layout: every document
(doc_id order) followed by its EOS in 8 uint16 token files with Dolma sidecars naming the
documents; the files are sparse (all zeros, EOS 0: a ready manifest has no text, so no
document is re-read and the import says so); one epoch's global indices, OLMo-core's
shuffle of the 2048-token instances for seed 7; a global batch of 64 instances warmed up from 32
(`0:65536,1000:131072` tokens by steps). Builds and imports run in child processes (peak
RSS from getrusage), imports and builds taking turns. Results go to
bench/out/orders_olmo.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from stream import bench_build, bench_lookups, prepare, timed_streams, timing  # noqa: E402

SEQ_LEN, BATCH, FILES = 2048, 64, 8
WARMUP = f"0:{BATCH // 2 * SEQ_LEN},1000:{BATCH * SEQ_LEN}"

IMPORT = """
import json, resource, sys, time
from pathlib import Path
import lineage
from lineage.ingest.orders.olmo_core import OlmoRun, import_olmo_core
from lineage.ingest.orders.olmo_order import Warmup
store = lineage.open(sys.argv[1])
run = Path(sys.argv[2])
made = json.loads((run / "made.json").read_text())
started = time.perf_counter()
r = import_olmo_core(store, corpus="c", stream=sys.argv[3], run=OlmoRun(
    token_files=tuple(run / f for f in made["files"]), dtype="uint16", eos_token_id=0,
    sequence_length=SEQ_LEN, global_batch_size=BATCH_TOKENS,
    global_indices=(run / made["indices"],), warmup=Warmup.parse(WARMUP, "steps")))
print(json.dumps({"seconds": time.perf_counter() - started, "steps": r["steps"],
                  "occurrences": r["occurrences"], "digest": r["occurrences_digest"],
                  "schedule": r["schedule"], "checked": r["checked"],
                  "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
""".replace("SEQ_LEN", str(SEQ_LEN)).replace("BATCH_TOKENS", str(BATCH * SEQ_LEN)).replace(
    "WARMUP", repr(WARMUP))


def write_run(store: Path, out: Path) -> dict[str, Any]:
    """Token files, sidecars and global indices for every document of corpus `c`."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pcsv

    import lineage

    if (out / "made.json").exists():
        return dict(json.loads((out / "made.json").read_text()))
    out.mkdir(parents=True, exist_ok=True)
    with lineage.open(store).reader(views=True) as con:
        docs = con.sql("SELECT doc_id, n_tokens FROM documents WHERE corpus = 'c' "
                       "ORDER BY doc_id").to_arrow_table()
    lengths = docs.column("n_tokens").to_numpy().astype(np.int64) + 1  # + EOS
    per_file = -(-len(lengths) // FILES)
    files, instances = [], 0
    for f in range(FILES):
        part = lengths[f * per_file:(f + 1) * per_file]
        ends = np.cumsum(part)
        name = f"part-{f:02d}.npy"
        with open(out / name, "wb") as handle:
            handle.truncate(int(ends[-1]) * 2)  # sparse zeros: every token reads as EOS 0
        sidecar = pa.table({"start": ends - part, "end": ends,
                            "id": docs.column("doc_id").slice(f * per_file, len(part))})
        with pa.CompressedOutputStream(str(out / name.replace(".npy", ".csv.gz")),
                                       "gzip") as sink:
            pcsv.write_csv(sidecar, sink, pcsv.WriteOptions(include_header=False))
        files.append(name)
        instances += int(ends[-1]) // SEQ_LEN
    from lineage.ingest.orders.olmo_order import olmo_shuffle

    indices = olmo_shuffle(instances, 7, 1)  # what OLMo-core's loader writes for seed 7
    name = f"global_indices_dataset_size{instances}_epoch1_seed7_v1.npy"
    indices.tofile(out / name)
    made = {"documents": len(lengths), "instances": instances, "files": files,
            "indices": name}
    (out / "made.json").write_text(json.dumps(made))
    return made


def bench_import(store: Path, run: Path, runs: int) -> dict[str, object]:
    results = timed_streams(IMPORT, lambda name: [str(store), str(run), name], runs, "o")
    assert len({r["digest"] for r in results}) == 1, "imports disagree"
    return {**timing(results), "schedule": results[0]["schedule"],
            "checked": results[0]["checked"], "stream": results[-1]["name"]}


def interleaved(store: Path, run: Path, runs: int, memory_limit: str
                ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Imports and builds taking turns, so a change in the machine's load between them
    moves both (the machine is shared)."""
    imports, builds = [], []
    for _ in range(runs):
        imports.append(bench_import(store, run, 1))
        builds.append(bench_build(store, 1, memory_limit))
    merged = []
    for results in (imports, builds):
        times = [r["runs_s"][0] for r in results]
        merged.append({**results[-1], "runs_s": times, "median_s": statistics.median(times),
                       "max_rss_mb": max(r["max_rss_mb"] for r in results)})
    return merged[0], merged[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--memory-limit", default="1GB")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/lineage-bench-olmo"))
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"machine": {"cores": os.cpu_count()}, "sizes": {}}
    for documents in args.sizes:
        store = prepare(args.workdir, documents)
        made = write_run(store, args.workdir / f"olmo-{documents}")
        imported, build = interleaved(store, args.workdir / f"olmo-{documents}", args.runs,
                                      args.memory_limit)
        entry = {"run": made, "import": imported, "build": build,
                 "import_vs_build": round(float(imported["median_s"])  # type: ignore[arg-type]
                                          / float(build["median_s"]), 2),  # type: ignore[arg-type]
                 "lookups": bench_lookups(store, str(imported["stream"]), 50)}
        results["sizes"][str(documents)] = entry
        print(json.dumps({documents: entry}, indent=1), flush=True)
    out = Path(__file__).resolve().parent / "out" / "orders_olmo.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
