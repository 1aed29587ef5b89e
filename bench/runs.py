"""Run and checkpoint benchmarks: chain verify at 100k steps (closed, with a skip rule),
structure check of 1,000 shards, checksum verification against single-thread hashlib.

    .venv/bin/python bench/runs.py [--runs 3] [--workdir DIR] [--gib 4] [--only chain]

Results go to bench/out/runs.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable


def timed(call, runs: int) -> dict[str, object]:  # type: ignore[no-untyped-def]
    values = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        values.append(time.perf_counter() - started)
    return {"runs_s": [round(v, 3) for v in values],
            "median_s": round(statistics.median(values), 3)}


def chain_fixture(workdir: Path, steps: int, run: str = "r") -> tuple[Path, str]:
    """A store with a stream of >= `steps` steps and a valid chain of `steps` steps over
    it (closed, checkpoint_every 100, a skip rule), as run `run`."""
    import lineage
    from lineage.ingest.steps import ingest_steps
    from lineage.runs.chain import ChainWriter, canonical_json, end_hash, step_hash
    from lineage.runs.chain_batches import batch_digests
    from lineage.runs.skip_rule import SkipRule
    from lineage.stream.build import build_stream

    store_path = workdir / "chain-store"
    if (store_path / "catalog.duckdb").exists():
        return store_path, run
    manifest = workdir / "manifest-200k"
    if not manifest.exists():
        subprocess.run([PY, str(REPO / "bench" / "gen_manifest.py"), "--documents", "200000",
                        "--shards", "2", "--format", "parquet", "--out", str(manifest)],
                       check=True)
    subprocess.run([PY, "-m", "lineage.cli", "--store", str(store_path), "init"], check=True)
    subprocess.run([PY, "-m", "lineage.cli", "--store", str(store_path), "ingest", "corpus",
                    *map(str, sorted(manifest.glob("*.parquet"))), "--corpus", "c"], check=True)
    store = lineage.open(store_path)
    build_stream(store, corpus="c", name="s", seed=1, seq_len=128, batch=4)
    info = store.stream("s")
    assert info["steps"] >= steps, info["steps"]
    with store.reader(views=False) as con:
        digests = batch_digests(con, store, info, 2, [(s, s * 4) for s in range(steps)])
    log = workdir / "steps.jsonl"
    writer = ChainWriter(log, config={"bench": True}, stream=info, world_size=2,
                         skip_rule=SkipRule(5.0, 4), checkpoint_every=100)
    lines = [canonical_json(writer.header)]
    prev = writer.header["genesis"]
    for step in range(steps):  # records written directly: tensors are not what is timed
        record = {"batch_digests": digests[step], "clipped": False, "cursor": (step + 1) * 4,
                  "grad_norm": 0.5, "loss": 2.0, "lr": 1e-3, "prev_hash": prev,
                  "rng": {"counter": step, "seed": 1}, "skipped": False,
                  "state_digest": "blake3:" + "0" * 64, "step": step,
                  "weights_digest": "blake3:" + "1" * 64}
        record["state_hash"] = prev = step_hash(record)
        lines.append(canonical_json(record))
    end = {"end": True, "last_state_hash": prev, "steps": steps}  # closed, as a run ends
    end["state_hash"] = end_hash(end)
    lines.append(canonical_json(end))
    log.write_text("\n".join(lines) + "\n")
    ingest_steps(store, log, run=run, stream="s", world_size=2)
    return store_path, run


def bench_chain(workdir: Path, runs: int) -> dict[str, object]:
    import lineage
    from lineage.runs.chain_verify import verify_chain

    store_path, run = chain_fixture(workdir, 100_000)
    store = lineage.open(store_path)
    report = verify_chain(store, run)
    assert report["ok"] and report["steps_checked"] == 100_000 and report["closed"], report
    assert report["skip_rule"]["verdict"] == "ok", report["skip_rule"]
    return {"steps": 100_000,
            "links_only": timed(lambda: verify_chain(store, run, batches=False), runs),
            "with_batch_digests": timed(lambda: verify_chain(store, run), runs),
            "target_s": 5.0}


def bench_structure(workdir: Path, runs: int) -> dict[str, object]:
    import numpy as np
    from safetensors.numpy import save_file

    from lineage.formats.safetensors import check_folder

    folder = workdir / "shards-1000"
    if not folder.exists():
        folder.mkdir(parents=True)
        weight_map = {}
        for i in range(1000):
            name = f"model-{i + 1:05d}-of-01000.safetensors"
            tensors = {f"layers.{i}.w{j}": np.zeros((64, 64), np.float16) for j in range(8)}
            save_file(tensors, str(folder / name))
            weight_map |= {t: name for t in tensors}
        (folder / "model.safetensors.index.json").write_text(
            json.dumps({"metadata": {}, "weight_map": weight_map}))
    report = check_folder(folder)
    assert report["ok"] and report["files"] == 1000, report["errors"][:3]
    return {"shards": 1000, "tensors": report["tensors"],
            **timed(lambda: check_folder(folder), runs), "target_s": 1.0}


def bench_checksums(workdir: Path, runs: int, gib: float) -> dict[str, object]:
    from lineage.formats.sha256sums import parse_sums, verify_sums, write_sums

    folder = workdir / f"checksum-{gib}g"
    files = 4
    size = int(gib * 2**30 / files)
    if not folder.exists():
        folder.mkdir(parents=True)
        for i in range(files):
            with open(folder / f"model-{i:05d}.safetensors", "wb") as handle:
                for _ in range(size // 2**24):
                    handle.write(os.urandom(2**24))
    paths = sorted(folder.glob("*.safetensors"))
    entries = parse_sums(write_sums(folder))
    for path in paths:  # warm the page cache: both sides read from memory
        subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)

    def hashlib_one_thread() -> None:
        for path in paths:
            with open(path, "rb") as handle:
                hashlib.file_digest(handle, "sha256")

    single = entries[:1]
    folder_runs = timed(lambda: verify_sums(folder, entries), runs)
    floor_runs = timed(hashlib_one_thread, runs)
    one_file = timed(lambda: verify_sums(folder, single), runs)
    one_floor = timed(lambda: hashlib.file_digest(open(paths[0], "rb"), "sha256"), runs)
    total = sum(p.stat().st_size for p in paths)
    return {"bytes": total, "files": files,
            "verify_folder": folder_runs, "hashlib_one_thread": floor_runs,
            "speedup": round(floor_runs["median_s"] / folder_runs["median_s"], 2),
            "verify_one_file": one_file, "hashlib_one_file": one_floor,
            "one_file_ratio": round(one_floor["median_s"] / one_file["median_s"], 2),
            "targets": {"speedup": 1.7, "one_file_ratio": 0.9}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--gib", type=float, default=4.0)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/lineage-bench-runs"))
    parser.add_argument("--only", choices=["structure", "checksums", "chain"],
                        help="Run one benchmark.")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    benches = {"structure": lambda: bench_structure(args.workdir, args.runs),
               "checksums": lambda: bench_checksums(args.workdir, args.runs, args.gib),
               "chain": lambda: bench_chain(args.workdir, args.runs)}
    results: dict[str, object] = {"cores": os.cpu_count()}
    for name, bench in benches.items():
        if args.only in (None, name):
            results[name] = bench()
    out = REPO / "bench" / "out" / "runs.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
