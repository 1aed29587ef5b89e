"""Batch-size schedules and rank rules: what they cost a build and a lookup.

    .venv/bin/python bench/schedule.py [--documents 1000000] [--samples 40] [--blocks 10]
        [--build-runs 2] [--compare-python /work/main/.venv/bin/python]

On one store (a ready manifest from bench/gen_manifest.py), builds a fixed-batch stream
(batch 64) and a ramped one (16 windows a step, 32 from step 200, 64 from step 600, rank
rule micro-batches:4) of the same order (and, with --build-runs, times fresh builds of
each, alternating), then times `docs --step` in process in
alternating blocks: the fixed stream, the ramped one, and a rank of the ramped one (4
ranks). With --compare-python (another checkout's interpreter), the fixed stream's
lookup is also timed by that code in the same blocks. Results go to
bench/out/schedule.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from stream import prepare  # noqa: E402

LOOKUPS = """
import json, random, sys, time
import lineage
store = lineage.open(sys.argv[1])
name, samples, seed = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rank = json.loads(sys.argv[5])
steps = store.stream(name)["steps"]
rng = random.Random(seed)
times = []
for _ in range(samples):
    step = rng.randrange(steps)
    t = time.perf_counter()
    store.docs_in_step(step, stream=name, **rank)
    times.append((time.perf_counter() - t) * 1000)
print(json.dumps(times))
"""

BUILD = """
import json, sys, time
import lineage
from lineage.stream.build import build_stream
from lineage.stream.schedule import RankRule, parse_schedule
store = lineage.open(sys.argv[1])
ramped = sys.argv[3] == "ramped"
started = time.perf_counter()
r = build_stream(store, corpus="c", name=sys.argv[2], seed=42, seq_len=2048,
                 **({"schedule": parse_schedule("0:16,200:32,600:64"),
                     "rank_rule": RankRule("micro-batches", 4)} if ramped else {"batch": 64}))
print(json.dumps({"seconds": time.perf_counter() - started, "steps": r.steps,
                  "digest": r.occurrences_digest}))
"""


def run(python: str, *args: str) -> str:
    # run from /tmp: `python -c` puts the working folder first on sys.path, which would
    # shadow the interpreter's own checkout
    return subprocess.run([python, *args], capture_output=True, text=True, check=True,
                          cwd="/tmp").stdout.strip().splitlines()[-1]


def build(store: Path, name: str, kind: str) -> dict[str, object]:
    existing = subprocess.run(
        [sys.executable, "-m", "lineage.cli", "--store", str(store), "stream", "show", name,
         "--json"], capture_output=True, text=True, check=False, cwd="/tmp")
    if existing.returncode == 0:
        shown = json.loads(existing.stdout)
        return {"seconds": None, "steps": shown["steps"], "digest": shown["occurrences_digest"]}
    return dict(json.loads(run(sys.executable, "-c", BUILD, str(store), name, kind)))


def build_times(store: Path, runs: int) -> dict[str, float]:
    """Median seconds of fresh builds, fixed and ramped alternating."""
    seconds: dict[str, list[float]] = {"fixed": [], "ramped": []}
    for i in range(runs):
        for kind in seconds:
            built = build(store, f"{kind}{time.time_ns()}{i}", kind)
            seconds[kind].append(float(built["seconds"]))  # type: ignore[arg-type]
    return {kind: round(statistics.median(values), 2) for kind, values in seconds.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=1_000_000)
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--build-runs", type=int, default=0)
    parser.add_argument("--compare-python", default=None)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/lineage-bench-stream"))
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    store = prepare(args.workdir, args.documents)
    builds = {name: build(store, name, name) for name in ("fixed", "ramped")}
    assert builds["fixed"]["digest"] != builds["ramped"]["digest"] or \
        builds["fixed"]["steps"] != builds["ramped"]["steps"]
    cases = {"fixed": (sys.executable, "fixed", {}),
             "ramped": (sys.executable, "ramped", {}),
             "ramped rank 3 of 4": (sys.executable, "ramped", {"rank": 3, "world_size": 4})}
    if args.compare_python:
        cases["fixed, compared code"] = (args.compare_python, "fixed", {})
    times: dict[str, list[float]] = {case: [] for case in cases}
    for block in range(args.blocks):  # alternating blocks: the shared machine drifts
        for case, (python, name, rank) in cases.items():
            times[case] += json.loads(run(python, "-c", LOOKUPS, str(store), name,
                                          str(args.samples), str(block), json.dumps(rank)))
    result = {"documents": args.documents, "builds": builds,
              "build_median_s": build_times(store, args.build_runs) if args.build_runs else None,
              "docs_step_median_ms": {case: round(statistics.median(t), 2)
                                      for case, t in times.items()},
              "samples": args.samples * args.blocks, "measured": time.strftime("%Y-%m-%d")}
    out = REPO / "bench" / "out"
    out.mkdir(exist_ok=True)
    (out / "schedule.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
