"""What the Croissant export and ingest cost: `lineage export croissant`, mlcroissant's
load of the result, and `lineage ingest corpus DATASET.json` beside ingesting the same
Parquet part as a ready manifest directly.

    .venv/bin/python bench/croissant.py [--documents 1000000] [--runs 3] [--workdir DIR]

A ready manifest from bench/gen_manifest.py is ingested into a fresh store (once per size,
kept in --workdir). Then, `--runs` times each (medians to stdout and to
bench/out/croissant.json): the export (`croissant(store, "bench")`, only the catalog is
read); `mlcroissant.Dataset(path)` (its validation of the JSON-LD, no records read); and
two ingests of the corpus's documents part into fresh stores, alternated, one from the
Croissant file (it checks the part's SHA-256 first) and one naming the part directly.
Their difference is what reading through Croissant adds.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def build(workdir: Path, documents: int) -> Path:
    """A store holding the synthetic manifest as corpus `bench` (reused when present)."""
    import lineage
    from lineage.ingest import ingest_corpus

    root = workdir / f"croissant-store-{documents}"
    if (root / "catalog.duckdb").is_file():
        return root
    manifest = workdir / f"croissant-manifest-{documents}"
    if not manifest.is_dir():
        subprocess.run([sys.executable, str(REPO / "bench" / "gen_manifest.py"),
                        "--documents", str(documents), "--shards", "4", "--format",
                        "parquet", "--out", str(manifest)], check=True)
    lineage.init_store(root)
    ingest_corpus(lineage.open(root), [manifest], corpus="bench", fmt="manifest",
                  tokenizer=None)
    return root


def timed(action: Callable[[], object], runs: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times), [round(t, 4) for t in times]


def ingest_into(workdir: Path, paths: list[Path]) -> Callable[[], object]:
    import lineage
    from lineage.ingest import ingest_corpus

    def action() -> object:
        target = workdir / "croissant-target"
        shutil.rmtree(target, ignore_errors=True)
        lineage.init_store(target)
        return ingest_corpus(lineage.open(target), paths, corpus="bench", tokenizer=None)

    return action


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/lineage-bench"))
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    import lineage
    from lineage.exports.croissant import croissant

    store = lineage.open(build(args.workdir, args.documents))
    document = croissant(store, "bench")
    described = args.workdir / "croissant.json"
    described.write_text(json.dumps(document, indent=2), encoding="utf-8")
    parts = [Path(f["contentUrl"]) for f in document["distribution"]]
    results: dict[str, object] = {"documents": args.documents, "parts": len(parts),
                                  "part_bytes": sum(p.stat().st_size for p in parts),
                                  "json_bytes": described.stat().st_size}
    results["export"] = timed(lambda: croissant(store, "bench"), args.runs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import mlcroissant

        results["mlcroissant_load"] = timed(lambda: mlcroissant.Dataset(described), args.runs)
    via, direct = ingest_into(args.workdir, [described]), ingest_into(args.workdir, parts)
    pairs = [(timed(via, 1)[0], timed(direct, 1)[0]) for _ in range(args.runs)]  # alternated
    for key, column in (("ingest_croissant", 0), ("ingest_parts", 1)):
        times = [pair[column] for pair in pairs]
        results[key] = (statistics.median(times), [round(t, 4) for t in times])
    for key, value in results.items():
        print(f"{key:<18} {value[0] if isinstance(value, tuple) else value}")
    out = REPO / "bench" / "out"
    out.mkdir(exist_ok=True)
    (out / "croissant.json").write_text(json.dumps(results, indent=2) + "\n",
                                        encoding="utf-8")


if __name__ == "__main__":
    main()
