"""`--engine ray` against the local engine on this machine (docs/scale.md).

    .venv/bin/python bench/ray_engine.py [--documents 1000000] [--manifests 8]
    .venv/bin/python bench/ray_engine.py --text DIR   # DIR/jsonl/*.jsonl (bench/gen_text.py)

Starts a local Ray cluster of this machine's cores once (its start-up is reported, not
counted), then for the same ready manifests (`--manifests` JSONL files of `--documents`
rows in 3 sources) times, with each engine: the ingest, the stream build (1 epoch, plus
2.5 epochs of one source), and inside each the commit (the catalog transaction). Also:
empty-task throughput (the floor of any task), the Ray tasks each step ran, and the
bytes of the key shuffle per document (key files written by `part_keys`). Checks that
both engines' stores record the same hashes. Results as JSON on stdout. With `--text`,
the inputs are the JSONL text shards bench/gen_text.py wrote (hashed, tokenized by bytes
and fingerprinted for the text index), instead of ready manifests.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def _manifests(work: Path, documents: int, files: int) -> list[Path]:
    import numpy as np

    rng = np.random.default_rng(11)
    paths = []
    per = -(-documents // files)
    for n in range(files):
        ids = np.arange(n * per, min((n + 1) * per, documents))
        hashes = rng.integers(0, 2**63, size=(len(ids), 4), dtype=np.int64)
        lines = [
            json.dumps({"doc_id": f"doc-{i:09d}", "source": ("web", "code", "books")[i % 3],
                        "uri": f"s3://bucket/{i}", "n_bytes": 1000 + i % 5000,
                        "n_tokens": 200 + i % 1000,
                        "content_hash": "".join(f"{w:016x}" for w in h)})
            for i, h in zip(ids.tolist(), hashes.tolist(), strict=True)]
        path = work / f"m{n:03d}.jsonl"
        path.write_text("\n".join(lines) + "\n")
        paths.append(path)
    return paths


class _Timed:
    """Wraps a module's function and adds up the seconds spent in it."""

    def __init__(self, module: Any, name: str) -> None:
        self.module, self.name, self.seconds = module, name, 0.0
        self.original = getattr(module, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return self.original(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - started

        setattr(module, name, timed)


def _run(engine: str, executor: Any, paths: list[Path], work: Path,
         fmt: str = "manifest") -> dict[str, Any]:
    import lineage.ingest.corpus as corpus_module
    import lineage.stream.build as build_module
    from lineage.api import init_store, open_store
    from lineage.ingest import ingest_corpus
    from lineage.stream.build import build_stream

    root = work / f"store-{engine}"
    shutil.rmtree(root, ignore_errors=True)
    init_store(root)
    store = open_store(root)
    commit = _Timed(corpus_module, "_commit")
    stream_commit = _Timed(build_module, "commit_stream")
    found: dict[str, Any] = {"engine": engine}
    maps = _Maps(executor)
    started = time.perf_counter()
    ingested = ingest_corpus(store, paths, corpus="c", fmt=fmt, executor=executor)
    found["ingest_s"] = round(time.perf_counter() - started, 2)
    found["ingest_commit_s"] = round(commit.seconds, 3)
    found["documents"] = ingested.documents
    started = time.perf_counter()
    built = build_stream(store, corpus="c", name="s", seed=7, seq_len=2048, batch=8,
                         epochs=["code=2.5"], memory_limit="4GB", executor=executor)
    found["build_s"] = round(time.perf_counter() - started, 2)
    found["build_commit_s"] = round(stream_commit.seconds, 3)
    found["maps"] = maps.calls
    found["shuffle_bytes"] = maps.shuffle_bytes
    found["occurrences"] = built.occurrences
    found["hashes"] = [ingested.manifest_hash, built.spec_hash, built.occurrences_digest]
    with store.reader(views=False) as con:
        found["part_hashes"] = con.execute(
            "SELECT list(sha256 ORDER BY path) FROM parquet_files").fetchall()[0][0]
    for timer in (commit, stream_commit):
        setattr(timer.module, timer.name, timer.original)
    return found


class _Maps:
    """Wraps an executor's `map`: each call's function, tasks and seconds, and the bytes
    of the key files the sort tasks read (the shuffle; gone once sorted)."""

    def __init__(self, executor: Any) -> None:
        self.calls: list[dict[str, Any]] = []
        self.shuffle_bytes = 0
        if executor is None:
            return
        inner = executor.map

        def spy(fn: Any, items: Any) -> Any:
            from lineage.stream.shuffle import sort_range

            if fn is sort_range:
                self.shuffle_bytes += sum(Path(p).stat().st_size for t in items
                                          for p in t.inputs)
            started = time.perf_counter()
            try:
                return inner(fn, items)
            finally:
                self.calls.append({"fn": fn.__name__, "tasks": len(items),
                                   "s": round(time.perf_counter() - started, 3)})

        executor.map = spy


def _noop(item: int) -> int:
    return item


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--documents", type=int, default=1_000_000)
    parser.add_argument("--manifests", type=int, default=8)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--text", type=Path, default=None)
    args = parser.parse_args()
    from lineage.ingest.engine import open_executor

    work = args.workdir or Path(tempfile.mkdtemp(prefix="lineage-ray-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    fmt = "jsonl" if args.text else "manifest"
    paths = sorted((args.text / "jsonl").glob("*.jsonl")) if args.text else \
        _manifests(work, args.documents, args.manifests)
    results: dict[str, Any] = {"inputs": len(paths), "format": fmt}
    results["local"] = _run("local", None, paths, work, fmt)
    started = time.perf_counter()
    with open_executor("ray") as executor:
        assert executor is not None
        results["ray_start_s"] = round(time.perf_counter() - started, 2)
        executor.map(_noop, list(range(20)))  # workers up
        started = time.perf_counter()
        executor.map(_noop, list(range(1000)))
        results["empty_tasks_per_s"] = round(1000 / (time.perf_counter() - started), 1)
        results["ray"] = _run("ray", executor, paths, work, fmt)
    same = results["local"].pop("hashes") == results["ray"].pop("hashes") and \
        results["local"].pop("part_hashes") == results["ray"].pop("part_hashes")
    results["same_store"] = same
    json.dump(results, sys.stdout, indent=2)
    print()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
